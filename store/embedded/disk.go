package embedded

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"herald/store"
)

// Disk space.
//
// Pebble cannot go on after a failed WAL or MANIFEST write: its commit
// pipeline stays locked (every later commit waits forever) and it calls
// Logger.Fatalf. So the store keeps a full disk from ever failing such a
// write, the way CockroachDB does:
//
//   - A reserve file (the ballast, ballastName in the store's directory)
//     holds ReserveBytes of the disk. Pebble writes through
//     vfs.OnDiskFull, whose callback deletes the ballast when a write
//     fails with ENOSPC and then retries that write once, so the write in
//     progress (and flushes of what is already accepted) still finish.
//   - From then on, and whenever free space is below MinFreeBytes, the
//     store is full: every write method refuses with STORAGE_FULL before
//     it reaches Pebble, so the reserve is not used up; reads work.
//   - A check every DiskCheckEvery leaves the full state once free space
//     is back above MinFreeBytes plus the reserve, re-creating the ballast
//     first, with no restart.
//
// Where Pebble still cannot go on (the ballast already spent, a failed
// fsync, which must not be retried), Fatalf calls Options.OnFatal, which
// by default exits so that a supervisor restarts the process: every
// acknowledged write was synced, so a restart loses nothing accepted.

// ballastName is the reserve file in the store's directory. An operator
// may delete it to free space at once; the store re-creates it when space
// is back.
const ballastName = "EMERGENCY_BALLAST"

// errStorageFull is what a write returns while the disk is full.
var errStorageFull = &store.Error{
	Code:    store.ESTORAGEFULL,
	Message: "the server's disk is full: writes are refused until space is freed; reads still work",
}

// disk tracks whether the store's disk has room for writes.
type disk struct {
	// fs is the filesystem without OnDiskFull: the callback runs while the
	// wrapped one holds every write back, so the ballast must be removed
	// (and re-created) around it.
	fs      vfs.FS
	dir     string
	ballast string
	reserve int64  // 0: no ballast
	minFree uint64 // refuse writes below this much free space
	log     *slog.Logger

	full atomic.Bool
	// mu serialises the check and the callback, which both handle the
	// ballast.
	mu sync.Mutex
	// usageErr is the last error of GetDiskUsage, logged once; guarded by mu.
	usageErr string
}

func newDisk(fsys vfs.FS, dir string, opts Options) *disk {
	return &disk{
		fs:      fsys,
		dir:     dir,
		ballast: fsys.PathJoin(dir, ballastName),
		reserve: max(opts.ReserveBytes, 0),
		minFree: uint64(max(opts.MinFreeBytes, 0)),
		log:     opts.Logger,
	}
}

// writable returns nil while writes may go to Pebble, else STORAGE_FULL.
func (d *disk) writable() error {
	if d.full.Load() {
		return errStorageFull
	}
	return nil
}

// init sets the state at open and makes the ballast if there is room.
func (d *disk) init() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	avail, known := d.avail()
	if d.hasBallast() {
		d.setFull(known && avail < d.minFree, avail)
		return nil
	}
	if known && avail < d.minFree+uint64(d.reserve) {
		d.setFull(true, avail)
		return nil
	}
	switch err := d.makeBallast(); {
	case err == nil:
	case vfs.IsNoSpaceError(err):
		d.setFull(true, avail)
	default:
		return fmt.Errorf("create the disk reserve %s: %w", d.ballast, err)
	}
	return nil
}

// check is run every DiskCheckEvery: it refuses writes when free space
// falls below the minimum, and lets them in again, with a new ballast,
// once there is room for both.
func (d *disk) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	avail, known := d.avail()
	if !d.full.Load() {
		if known && avail < d.minFree {
			d.setFull(true, avail)
		}
		return
	}
	if known && avail < d.minFree+uint64(d.reserve) {
		return
	}
	// Making the ballast is the proof of room when the free space is not
	// known (and the last word when it is: a quota may say otherwise).
	if err := d.makeBallast(); err != nil {
		if vfs.IsNoSpaceError(err) {
			return
		}
		d.log.Error("could not re-create the disk reserve; writes resume without it", "file", d.ballast, "err", err)
	}
	d.setFull(false, avail)
}

// onFull is Pebble's OnDiskFull callback: a write failed with ENOSPC. It
// gives the ballast's space to that write's retry and refuses new writes.
// Pebble holds every write back while it runs, so it only deletes a file.
func (d *disk) onFull() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.full.Store(true)
	err := d.fs.Remove(d.ballast)
	switch {
	case err == nil:
		d.log.Error("the disk is full: deleted the disk reserve so the writes in progress can finish; refusing writes until space is freed (reads still work)",
			"dir", d.dir, "reserve_bytes", d.reserve)
	case errors.Is(err, fs.ErrNotExist) || d.reserve == 0:
		d.log.Error("the disk is full and there is no disk reserve left: refusing writes until space is freed (reads still work)", "dir", d.dir)
	default:
		d.log.Error("the disk is full, and deleting the disk reserve failed: refusing writes until space is freed", "dir", d.dir, "err", err)
	}
}

// setFull sets the state, logging a change. Callers hold mu.
func (d *disk) setFull(full bool, avail uint64) {
	if d.full.Swap(full) == full {
		return
	}
	if full {
		d.log.Error("the disk is almost full: refusing writes until space is freed (reads still work)",
			"dir", d.dir, "free_bytes", avail, "min_free_bytes", d.minFree)
	} else {
		d.log.Warn("disk space is back: writes resume", "dir", d.dir, "free_bytes", avail)
	}
}

// avail returns the free space of the disk, and whether it is known.
// Callers hold mu.
func (d *disk) avail() (uint64, bool) {
	u, err := d.fs.GetDiskUsage(d.dir)
	if err != nil {
		if err.Error() != d.usageErr {
			d.usageErr = err.Error()
			d.log.Warn("cannot read the disk's free space; relying on write errors alone", "dir", d.dir, "err", err)
		}
		return 0, false
	}
	d.usageErr = ""
	return u.AvailBytes, true
}

// hasBallast reports whether the ballast is in place (or none is wanted).
func (d *disk) hasBallast() bool {
	if d.reserve == 0 {
		return true
	}
	fi, err := d.fs.Stat(d.ballast)
	return err == nil && fi.Size() == d.reserve
}

// makeBallast creates the ballast unless it is in place. Its blocks are
// allocated (fallocate where the filesystem can, else zeros written), so
// they are really held: a sparse file would free nothing.
func (d *disk) makeBallast() error {
	if d.hasBallast() {
		return nil
	}
	f, err := d.fs.Create(d.ballast, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = allocate(f, d.reserve)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = d.fs.Remove(d.ballast)
		return err
	}
	return nil
}

// writeZeros fills f with n zero bytes from its start.
func writeZeros(f vfs.File, n int64) error {
	zeros := make([]byte, min(n, 1<<20))
	for n > 0 {
		w, err := f.Write(zeros[:min(n, int64(len(zeros)))])
		n -= int64(w)
		if err != nil {
			return err
		}
	}
	return nil
}

// fatalError is an error Pebble cannot go on from, as Logger.Fatalf gets it.
type fatalError struct {
	msg   string
	cause error // the first error among Fatalf's arguments, if any
}

func (e *fatalError) Error() string { return e.msg }
func (e *fatalError) Unwrap() error { return e.cause }

func newFatalError(format string, args ...any) error {
	e := &fatalError{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			e.cause = err
			break
		}
	}
	return e
}

// exitOnFatal is the default Options.OnFatal: it says why and exits, for
// a supervisor to restart the process.
func exitOnFatal(log *slog.Logger, dir string) func(error) {
	return func(err error) {
		msg := "the embedded store hit an error it cannot go on from; exiting so that a restart recovers it (every acknowledged write is already on disk)"
		if vfs.IsNoSpaceError(err) {
			msg = "the disk is full and the embedded store cannot go on; exiting. Free space on the disk, then restart Herald: every acknowledged write is already on disk"
		}
		log.Error(msg, "dir", dir, "err", err)
		os.Exit(1)
	}
}

// lockError explains a failure to lock the store's directory: most often
// another process has it open.
func lockError(fsys vfs.FS, dir string, err error) error {
	lockFile := fsys.PathJoin(dir, "LOCK")
	var pe *fs.PathError
	held := !errors.As(err, &pe) && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		errors.Is(err, syscall.EWOULDBLOCK) || err.Error() == "lock held by current process")
	if held {
		return fmt.Errorf("the embedded store in %s is in use: another Herald process (or another store in this process) holds its lock file %s; stop that process first, or give this one another data directory (%w)", dir, lockFile, err)
	}
	return fmt.Errorf("lock the embedded store in %s (lock file %s): %w", dir, lockFile, err)
}

// openError explains a failed pebble.Open: corruption is the one an
// operator must act on.
func openError(fsys vfs.FS, dir string, err error) error {
	if pebble.IsCorruptionError(err) && strings.Contains(err.Error(), "replaying WAL") {
		if d := findDamagedWAL(fsys, dir); d != nil {
			return fmt.Errorf("%w (%v)", d, err)
		}
	}
	if pebble.IsCorruptionError(err) {
		return fmt.Errorf("the embedded store in %s is damaged, so Herald refuses to start rather than serve it without the damaged part: %w. "+
			"Restore the data directory from a backup", dir, err)
	}
	return fmt.Errorf("open embedded store in %s: %w", dir, err)
}
