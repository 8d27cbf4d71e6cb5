package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// The check of the newest write-ahead log before Pebble opens it.
//
// Pebble replays the newest WAL up to the first record it cannot read and
// treats the rest as the torn tail of a write cut short by a crash: it
// drops it with an info-level line. Only a later chunk saying the damaged
// offset had been synced makes it report corruption, and chunks say so
// only from format FormatWALSyncChunks on (this store is older: that
// format also changes the sstable format) and only in a later 32 KiB
// block. So a damaged byte anywhere in the newest WAL silently loses
// every acknowledged write after it.
//
// A torn tail is the end of the file: nothing of the log follows it. So
// before opening, the store reads the newest WAL as the replay will and,
// if it stops early, looks at the rest of the file for a record of the
// same log (its header carries the log number, and a checksum), or the
// EOF trailer a clean close writes: either means the log went on past
// the damage, and Herald refuses to start (WALDamageError). A recycled
// log's older content carries another log number, and zeros are
// preallocated space, so neither counts. A last record cut off by the end
// of the file is a write a crash interrupted, never acknowledged; a last
// record whole but failing its checksum is damage or a write a power loss
// tore, which cannot be told apart: it is dropped with an error-level log
// line and counted (Store.DamagedWALTails).

// WALDamageError is Open's refusal: a write-ahead log is damaged at
// Offset, and records follow the damage, which opening would drop (the
// newest log), or which Pebble cannot replay past (an older one).
type WALDamageError struct {
	File   string
	Offset int64 // where the first unreadable record starts
	Next   int64 // where a readable record after it starts; 0 if not looked for
	Size   int64 // the file's size
}

func (e *WALDamageError) Error() string {
	next := "before its end"
	if e.Next > 0 {
		next = fmt.Sprintf("and records follow the damage (the next at byte %d)", e.Next)
	}
	return fmt.Sprintf("the embedded store's write-ahead log %s is damaged at byte %d of %d, %s: "+
		"opening it would drop every write after byte %d, so Herald refuses to start. "+
		"Restore the data directory from a backup; or, to accept losing the writes after the damage, keep a copy of the file, "+
		"truncate it to %d bytes (truncate -s %d %s) and start again",
		e.File, e.Offset, e.Size, next, e.Offset, e.Offset, e.Offset, e.File)
}

// Chunk layout of Pebble's record package (record/record.go): checksum
// (4), length (2), encoding (1), log number (4) and, in the WAL sync
// formats, the synced offset (8); chunks do not cross 32 KiB blocks.
const (
	walBlockSize         = 32 << 10
	recyclableHeaderSize = 11
	walSyncHeaderSize    = 19
	encRecyclableFull    = 5
	encRecyclableFirst   = 6
	encRecyclableLast    = 8
	encWALSyncFull       = 9
	encWALSyncFirst      = 10
	encWALSyncLast       = 12
	maskedCRCDelta       = 0xa282ead8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// chunk is a parsed chunk header at some offset.
type chunk struct {
	enc     byte
	logNum  uint32
	hdr, n  int  // header and payload sizes
	whole   bool // header and payload lie within the buffer
	checked bool // whole, and the checksum matches
}

// parseChunk reads a recyclable or WAL-sync chunk header at buf[i:], whose
// offset in the file is off. ok is false if no such header fits there.
func parseChunk(buf []byte, i int, off int64) (c chunk, ok bool) {
	blockLeft := walBlockSize - int(off%walBlockSize)
	if i+7 > len(buf) {
		return c, false
	}
	c.enc = buf[i+6]
	switch {
	case c.enc >= encRecyclableFull && c.enc <= encRecyclableLast:
		c.hdr = recyclableHeaderSize
	case c.enc >= encWALSyncFull && c.enc <= encWALSyncLast:
		c.hdr = walSyncHeaderSize
	default:
		return c, false
	}
	if c.hdr > blockLeft || i+c.hdr > len(buf) {
		return c, false
	}
	c.logNum = binary.LittleEndian.Uint32(buf[i+7:])
	c.n = int(binary.LittleEndian.Uint16(buf[i+4:]))
	if c.hdr+c.n > blockLeft {
		return c, false
	}
	c.whole = i+c.hdr+c.n <= len(buf)
	if c.whole {
		sum := crc32.Checksum(buf[i+6:i+c.hdr+c.n], castagnoli)
		c.checked = binary.LittleEndian.Uint32(buf[i:]) == (sum>>15|sum<<17)+maskedCRCDelta
	}
	return c, true
}

// startsRecord reports whether c begins a record.
func (c chunk) startsRecord() bool {
	switch c.enc {
	case encRecyclableFull, encRecyclableFirst, encWALSyncFull, encWALSyncFirst:
		return true
	}
	return false
}

// walTail is what checkWAL found at the end of the newest WAL.
type walTail struct {
	file    string
	offset  int64
	damaged bool // the last record is whole but unreadable
}

// checkWAL reads the newest WAL in dir as Pebble's replay will. It returns
// a *WALDamageError if records of the log follow the first unreadable one,
// and a walTail with damaged set if the unreadable record is the last.
// Whatever it cannot read at all it leaves to Pebble's open to report.
func checkWAL(fsys vfs.FS, dir string) (walTail, error) {
	logs, err := wal.Scan(wal.Dir{FS: fsys, Dirname: dir})
	if err != nil || len(logs) == 0 {
		return walTail{}, nil
	}
	ll := logs[len(logs)-1]
	r := ll.OpenForRead()
	defer r.Close()
	var off wal.Offset
	for {
		var err error
		if _, off, err = r.NextRecord(); err == nil {
			continue
		} else if errors.Is(err, io.EOF) || !(errors.Is(err, record.ErrInvalidChunk) ||
			errors.Is(err, record.ErrZeroedChunk) || errors.Is(err, record.ErrUnexpectedEOF)) {
			return walTail{}, nil
		}
		break
	}
	if off.PhysicalFile == "" {
		return walTail{}, nil
	}
	f, err := fsys.Open(off.PhysicalFile)
	if err != nil {
		return walTail{}, nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() <= off.Physical {
		return walTail{}, nil
	}
	buf := make([]byte, fi.Size()-off.Physical)
	if _, err := f.ReadAt(buf, off.Physical); err != nil && !errors.Is(err, io.EOF) {
		return walTail{}, nil
	}
	logNum := uint32(ll.Num)
	tail := walTail{file: off.PhysicalFile, offset: off.Physical}
	// A record of this log after the first unreadable one, or the EOF
	// trailer a clean close writes last: a header with no checksum, no
	// payload and the next log's number.
	for i := 1; i < len(buf); i++ {
		c, ok := parseChunk(buf, i, off.Physical+int64(i))
		if !ok {
			continue
		}
		trailer := c.enc == encRecyclableFull && c.n == 0 && c.logNum == logNum+1 &&
			i+c.hdr == len(buf) && binary.LittleEndian.Uint32(buf[i:]) == 0
		if trailer || c.checked && c.logNum == logNum && c.startsRecord() {
			return tail, &WALDamageError{File: off.PhysicalFile, Offset: off.Physical, Next: off.Physical + int64(i), Size: fi.Size()}
		}
	}
	// Nothing follows. A chunk of this log that is whole yet fails its
	// checksum is damage; a chunk cut short by the end of the file, a
	// readable first chunk (the rest of its record never written), another
	// log's content or zeros are a torn or recycled tail.
	if c, ok := parseChunk(buf, 0, off.Physical); ok && c.logNum == logNum && c.whole && !c.checked {
		tail.damaged = true
	}
	return tail, nil
}

// reportWALTail logs a damaged last WAL record loudly: it may have been an
// acknowledged write.
func reportWALTail(log *slog.Logger, t walTail) {
	if !t.damaged {
		return
	}
	log.Error("the embedded store's write-ahead log ends with a damaged record, which is dropped: it may have been the last acknowledged write "+
		"(a damaged disk) or a write a power loss cut short (not acknowledged). Check the disk; if writes are missing, restore from a backup",
		"file", t.file, "offset", t.offset)
}

// findDamagedWAL returns the first write-ahead log in dir that cannot be
// read to its end, for the message of a corruption Pebble reports while
// replaying (it names neither file nor offset in its error's text).
func findDamagedWAL(fsys vfs.FS, dir string) *WALDamageError {
	logs, err := wal.Scan(wal.Dir{FS: fsys, Dirname: dir})
	if err != nil {
		return nil
	}
	for _, ll := range logs {
		if d := walDamage(fsys, ll); d != nil {
			return d
		}
	}
	return nil
}

// walDamage returns where ll stops being readable, or nil if it reads to
// its end.
func walDamage(fsys vfs.FS, ll wal.LogicalLog) *WALDamageError {
	r := ll.OpenForRead()
	defer r.Close()
	for {
		_, off, err := r.NextRecord()
		if err == nil {
			continue
		} else if errors.Is(err, io.EOF) || off.PhysicalFile == "" {
			return nil
		}
		d := &WALDamageError{File: off.PhysicalFile, Offset: off.Physical}
		if fi, err := fsys.Stat(off.PhysicalFile); err == nil {
			d.Size = fi.Size()
		}
		return d
	}
}
