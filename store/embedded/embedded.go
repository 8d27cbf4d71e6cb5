// Package embedded is Herald's single-node backend: a Pebble database in a
// data directory, needing no setup. Every write is one synced batch, so an
// accepted write survives a crash. A full disk makes writes fail with
// STORAGE_FULL until space is back, never wedges Pebble (disk.go), and a
// damaged write-ahead log is refused at open rather than cut short
// silently (walcheck.go).
//
// Key layout (one byte of prefix, then fixed-width big-endian parts, so
// that byte order is the order the queries need):
//
//	u <user>                 user document (BSON, short names; see store/internal/docs)
//	h <handle>               user id, for unique handles and lookup
//	e <user> <followee>      follow time: "who user follows" (followees collection)
//	r <user> <follower>      follow time: "who follows user" (followers collection)
//	m <message>              message document
//	o <author> <message>     outbox index: created time and pulled flag
//	p <user>                 the user has pulled messages (ListPullAuthors)
//	i <owner> <message>      one inbox entry: author, created, delivered
//	n <owner>                inbox head: total, unread, read mark, rebuilding, last seen
//	c <owner>                cached inbox (LayoutCache): expiry, completeness, entries
//	d <message> <last owner> delivery record of one DeliverInbox chunk: its owners
//	d <message> <owner> x    delivery record of one InsertInbox entry: the owner
//	j <job>                  pending fan-out job document
//	b <name>                 bulk-load progress record (bulk.go)
//	l <user> <like>          message and its author: "what user likes", newest first (likes.go)
//	L <message> <like>       user and the message's author: "who likes the message", newest first
//	k <user> <message>       like id: whether user likes the message (FindLiked, idempotent Like)
//	t <parent> <reply>       the reply's author: the replies to a message, oldest first (threads.go)
//	R <user> <original>      the ID of user's live repost of the message (reposts.go)
//	v <user> <kind> <rel>    target: user's blocks or mutes, newest first (blocks.go)
//	w <user> <kind> <target> relation ID: whether user blocks or mutes target
//	B <target> <user>        kind mask: how user relates to target (FindBlockers)
//	g, G, x, y, Y, z         the notifications feed: groups, their keys, feed order, actors, counts (notifications.go)
//	N, K, a                  name store and attribute index (attributes.go)
//
// LayoutEntries and LayoutBuckets share one physical layout here: one key
// per entry, keyed by owner and message, so a reverse range read is the
// inbox newest first whatever order entries arrived in. Pebble appends one
// key per entry fastest (measured ~1.5M entries/s against ~112k/s for
// read-modify-write buckets and ~430k/s for buckets built by a merge
// operator, on this machine kind), and an owner's newest entries are
// adjacent keys in one block or two, which is the locality buckets give a
// document store. The two strategies differ in layout on MongoDB only.
//
// Every head is kept in memory (loaded at open, kept by every writer, about
// 100 bytes a user), so fan-out reads no head from disk: counts, the read
// mark and the last-seen time it skips inactive owners by come from the map.
package embedded

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"herald/store"
	"herald/store/storage"
)

const (
	pUser     = 'u'
	pHandle   = 'h'
	pFollowee = 'e'
	pFollower = 'r'
	pMessage  = 'm'
	pOutbox   = 'o'
	pInbox    = 'i'
	pHead     = 'n'
	pDelivery = 'd'
	pJob      = 'j'
	pCache    = 'c'
	pPullers  = 'p'
	pProgress = 'b'
	pLikes    = 'l'
	pLikers   = 'L'
	pLiked    = 'k'
	pReplies  = 't'
	pReposted = 'R'
	pReposts  = 'P'
	pSearch   = 's'
)

// Options configure the embedded backend.
type Options struct {
	// Logger receives Pebble's messages; slog.Default() by default.
	Logger *slog.Logger
	// CacheBytes is the block cache size (default 256 MiB). Pebble
	// reserves the memtables (two of memTableSize at most times) from it,
	// so what caches blocks is the rest.
	CacheBytes int64

	// ReserveBytes is the size of the disk reserve (disk.go): a file in
	// the store's directory deleted when the disk fills, so the writes in
	// progress finish. Default 64 MiB; negative: none.
	ReserveBytes int64
	// MinFreeBytes is the free space below which writes are refused with
	// STORAGE_FULL (they resume above it plus the reserve). Default
	// 64 MiB; negative: none.
	MinFreeBytes int64
	// DiskCheckEvery is how often free space is checked (default 1s).
	DiskCheckEvery time.Duration
	// FS is the filesystem the store lives on: vfs.Default by default;
	// tests inject faults through it.
	FS vfs.FS
	// DocCacheEntries is how many users, and as many messages, are kept
	// decoded in memory for reads (doccache.go): default 65,536;
	// negative: none.
	DocCacheEntries int
	// OnFatal is called when Pebble cannot go on (a WAL or MANIFEST write
	// or sync failed and its commit pipeline is stuck): it must end the
	// process, which a restart recovers, every acknowledged write being on
	// disk. If it returns, the goroutine that hit the error blocks for
	// good, so nothing proceeds as if the write had worked. Default: log
	// the cause at error level and exit with status 1.
	OnFatal func(error)
}

// Defaults of Options.
const (
	defaultReserveBytes   = 64 << 20
	defaultMinFreeBytes   = 64 << 20
	defaultDiskCheckEvery = time.Second
)

// Store is the embedded backend. It is safe for concurrent use; only one
// process may open a data directory at a time (Pebble locks it), which is
// what lets the store keep inbox heads in memory.
type Store struct {
	db           *pebble.DB
	dirLock      *pebble.Lock // held from before Pebble opens to after it closes
	healthChecks io.Closer    // Pebble's disk-health checks of the filesystem
	disk         *disk
	stopDisk     chan struct{}
	diskDone     chan struct{}
	fatal        func(error) // Options.OnFatal
	damagedTails int         // DamagedWALTails

	// userLocks serialise read-modify-write of user documents (counters),
	// message documents (edits, like counts) and handle claims, striped by
	// key (user id, message id, handle); see lock.
	userLocks [256]sync.Mutex
	seed      maphash.Seed

	// inboxMu serialises every change to inboxes, heads, caches and jobs,
	// so counts are read-modify-written by one writer at a time and a
	// delivery cannot race a deletion.
	inboxMu sync.Mutex
	// convMu serialises every change to conversations (conversations.go).
	convMu sync.Mutex
	// retractSeen is when JobBacklog first counted each pending
	// JobRetract, whose record holds no deletion time; backlogMu guards it.
	backlogMu   sync.Mutex
	retractSeen map[store.ID]time.Time
	// heads holds every user's inbox head; headsMu guards the map itself.
	// A head changes under inboxMu, except a new user's, which CreateUser
	// adds before the user exists for anyone to deliver to.
	headsMu sync.RWMutex
	heads   map[store.ID]head
	// dirty are the owners whose heads count journal records their stored
	// heads do not (journal.go); guarded by headsMu.
	dirty map[store.ID]struct{}
	// journalSeq is the last journal record's seq, and journalHas whether
	// records await a checkpoint; guarded by inboxMu.
	journalSeq      uint64
	journalHas      bool
	stopCheckpoints chan struct{}
	checkpointsDone chan struct{}
	log             *slog.Logger

	names names

	// decoded caches decoded users and messages, unless
	// Options.DocCacheEntries is negative.
	decoded docCaches
}

var _ storage.Backend = (*Store)(nil)

// memTableSize is the size of a memtable: large enough that a fan-out
// chunk's batch fits many times over, small enough that the two Pebble
// keeps (the live one and the one being flushed) leave most of the
// default cache to blocks.
const memTableSize = 32 << 20

// Open opens (creating if needed) the database in dir.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = 256 << 20
	}
	if opts.ReserveBytes == 0 {
		opts.ReserveBytes = defaultReserveBytes
	}
	if opts.MinFreeBytes == 0 {
		opts.MinFreeBytes = defaultMinFreeBytes
	}
	if opts.DiskCheckEvery <= 0 {
		opts.DiskCheckEvery = defaultDiskCheckEvery
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.OnFatal == nil {
		opts.OnFatal = exitOnFatal(opts.Logger, dir)
	}
	fsys := opts.FS
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open embedded store: %w", err)
	}
	// Locked before anything in the directory is touched (the WAL check,
	// the reserve), then handed to Pebble.
	lock, err := pebble.LockDirectory(dir, fsys)
	if err != nil {
		return nil, lockError(fsys, dir, err)
	}
	s := &Store{dirLock: lock, fatal: opts.OnFatal, seed: maphash.MakeSeed(), heads: make(map[store.ID]head), dirty: make(map[store.ID]struct{}), log: opts.Logger}
	if n := opts.DocCacheEntries; n >= 0 {
		if n == 0 {
			n = defaultDocCacheEntries
		}
		s.decoded = docCaches{users: newDocCache(n, copyUser), messages: newDocCache(n, copyMessage)}
	}
	if err := s.open(dir, opts); err != nil {
		_ = lock.Close()
		return nil, err
	}
	s.stopCheckpoints, s.checkpointsDone = make(chan struct{}), make(chan struct{})
	go s.checkpoints(s.stopCheckpoints, s.checkpointsDone)
	s.stopDisk, s.diskDone = make(chan struct{}), make(chan struct{})
	go s.watchDisk(opts.DiskCheckEvery, s.stopDisk, s.diskDone)
	return s, nil
}

// open opens the database under s.dirLock and loads what the store keeps
// in memory.
func (s *Store) open(dir string, opts Options) error {
	tail, err := checkWAL(opts.FS, dir)
	if err != nil {
		return err
	}
	if tail.damaged {
		reportWALTail(opts.Logger, tail)
		s.damagedTails++
	}
	s.disk = newDisk(opts.FS, dir, opts)
	if err := s.disk.init(); err != nil {
		return err
	}
	cache := pebble.NewCache(opts.CacheBytes)
	defer cache.Unref()
	popts := &pebble.Options{
		Cache:        cache,
		MemTableSize: memTableSize,
		Logger:       pebbleLogger{opts.Logger, opts.OnFatal},
		FS:           vfs.OnDiskFull(opts.FS, s.disk.onFull),
		Lock:         s.dirLock,
	}
	popts.EnsureDefaults()
	// The disk-health checks Pebble adds around the filesystem it picks
	// itself (Options.WithFSDefaults), around ours; their closer is ours to
	// call, after the database's close or a failed open.
	var healthChecks io.Closer
	popts.FS, healthChecks = vfs.WithDiskHealthChecks(popts.FS, 5*time.Second, nil, popts.EventListener.DiskSlow)
	db, err := pebble.Open(dir, popts)
	if err != nil {
		_ = healthChecks.Close()
		return openError(opts.FS, dir, err)
	}
	s.db, s.healthChecks = db, healthChecks
	for _, load := range []func() error{s.loadNames, s.loadHeads, s.replayJournal, s.indexSearch, s.indexNotifActors} {
		if err := load(); err != nil {
			_ = db.Close()
			_ = healthChecks.Close()
			return err
		}
	}
	return nil
}

// Close flushes and closes the database. The disk reserve stays, for the
// next open.
func (s *Store) Close() error {
	close(s.stopCheckpoints)
	<-s.checkpointsDone
	close(s.stopDisk)
	<-s.diskDone
	// A failed last checkpoint loses nothing: opening replays the journal.
	// While the disk is full it is skipped for that reason.
	return errors.Join(s.checkpoint(), s.db.Close(), s.healthChecks.Close(), s.dirLock.Close())
}

// Health reports whether writes work: nil, or the STORAGE_FULL error
// writes get while the disk is full.
func (s *Store) Health() error { return s.disk.writable() }

// DamagedWALTails counts the write-ahead logs found at open ending with a
// damaged record, which was dropped (walcheck.go): 0 or 1.
func (s *Store) DamagedWALTails() int { return s.damagedTails }

// watchDisk runs the disk check every every until stop closes.
func (s *Store) watchDisk(every time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			s.disk.check()
		}
	}
}

type pebbleLogger struct {
	log   *slog.Logger
	fatal func(error)
}

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}
func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

// Fatalf hands the error to OnFatal. Pebble carries on after Fatalf as if
// it had not returned (a commit reports success), so it never returns.
func (l pebbleLogger) Fatalf(format string, args ...any) {
	if !strings.HasPrefix(format, "pebble") {
		format = "pebble: " + format
	}
	l.fatal(newFatalError(format, args...))
	select {}
}

// key builds a key from a prefix and parts ([]byte, store.ID, uint64 or string).
func key(prefix byte, parts ...any) []byte {
	k := make([]byte, 1, 1+2*len(store.ID{})+8)
	k[0] = prefix
	for _, p := range parts {
		switch v := p.(type) {
		case store.ID:
			k = append(k, v[:]...)
		case uint64:
			k = binary.BigEndian.AppendUint64(k, v)
		case string:
			k = append(k, v...)
		case []byte:
			k = append(k, v...)
		default:
			panic(fmt.Sprintf("embedded: bad key part %T", p))
		}
	}
	return k
}

// prefixEnd returns the smallest key after every key starting with p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// get returns a copy of the value at k, or nil, false.
func (s *Store) get(k []byte) ([]byte, bool, error) {
	v, closer, err := s.db.Get(k)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("embedded get: %w", err)
	}
	v = bytes.Clone(v)
	closer.Close()
	return v, true, nil
}

// findDoc reads and decodes the document at k; a missing one is NOT_FOUND
// with the given message.
func findDoc[T any](s *Store, k []byte, decode func([]byte) (*T, error), notFound string) (*T, error) {
	v, ok, err := s.get(k)
	if err != nil {
		return nil, err
	} else if !ok {
		return nil, store.Errorf(store.ENOTFOUND, "%s", notFound)
	}
	return decode(v)
}

// findDocs reads the documents of ids under prefix p (the key up to the
// ID), aligned with ids and nil where one is missing. It reads them with
// one iterator, seeking to each key in ascending order, instead of one Get
// per key: each Get builds (and tears down) an iterator stack of its own,
// and the keys of a batch (a timeline page's messages, their few authors)
// are usually close together, so an ascending seek mostly steps within the
// block the last one loaded. The iterator is also one consistent view of
// the batch. decode must not keep v: it is valid only until the iterator
// moves.
func findDocs[T any](s *Store, p []byte, ids []store.ID, decode func(v []byte) (*T, error)) ([]*T, error) {
	out := make([]*T, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	// Positions of ids in ascending key order; a timeline page is newest
	// first, so a reversed copy is usually sorted already.
	order := make([]int32, len(ids))
	for i := range order {
		order[i] = int32(len(ids) - 1 - i)
	}
	if !slices.IsSortedFunc(order, func(a, b int32) int { return ids[a].Compare(ids[b]) }) {
		slices.SortFunc(order, func(a, b int32) int { return ids[a].Compare(ids[b]) })
	}
	first, last := ids[order[0]], ids[order[len(order)-1]]
	lower := append(bytes.Clone(p), first[:]...)
	upper := prefixEnd(append(bytes.Clone(p), last[:]...))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	k := bytes.Clone(lower) // one scratch key for every seek; the bounds stay Pebble's
	found := false
	for n, i := range order {
		id := ids[i]
		// A repeated id is read where the iterator already is.
		if n == 0 || id != ids[order[n-1]] {
			copy(k[len(p):], id[:])
			found = it.SeekGE(k) && bytes.Equal(it.Key(), k)
		}
		if !found {
			continue
		}
		if out[i], err = decode(it.Value()); err != nil {
			it.Close()
			return nil, err
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return nil, fmt.Errorf("embedded batch read: %w", err)
	}
	return out, nil
}

// commit commits b, synced, unless the disk is full. A commit error is
// fatal in Pebble (Fatalf); a panic (a failed WAL rotation panics) leaves
// its pipeline just as stuck, so it goes to OnFatal too, not to a
// recovering caller that would go on against a store that hangs.
func (s *Store) commit(b *pebble.Batch) error {
	if err := s.disk.writable(); err != nil {
		return err
	}
	defer s.fatalOnPanic()
	if !s.decoded.on() {
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("embedded commit: %w", err)
		}
		return nil
	}
	users, messages, ranges := writtenDocs(b)
	err := b.Commit(pebble.Sync)
	// Dropped even if the commit failed: whether it applied is not known.
	s.decoded.drop(users, messages, ranges)
	if err != nil {
		return fmt.Errorf("embedded commit: %w", err)
	}
	return nil
}

func (s *Store) fatalOnPanic() {
	if r := recover(); r != nil {
		cause, _ := r.(error)
		s.fatal(&fatalError{msg: fmt.Sprintf("pebble: panic in commit: %v", r), cause: cause})
		select {}
	}
}

// lock locks the stripes of up to three keys (user ids, message ids or
// handles) in one fixed order, ascending stripe index, whatever the keys
// (a user's, a message's and a reply's parent's stripes are of one kind),
// so that concurrent multi-key operations cannot deadlock, and returns the
// unlock. A caller holding stripes must not call lock again; inboxMu, when
// needed, is taken first.
func (s *Store) lock(keys ...[]byte) func() {
	if len(keys) > 3 {
		panic("embedded: lock takes at most three keys")
	}
	var stripes [3]int
	n := 0
next:
	for _, k := range keys {
		st := int(maphash.Bytes(s.seed, k) % uint64(len(s.userLocks)))
		for _, have := range stripes[:n] {
			if have == st {
				continue next
			}
		}
		// Insertion in ascending order.
		i := n
		for ; i > 0 && stripes[i-1] > st; i-- {
			stripes[i] = stripes[i-1]
		}
		stripes[i] = st
		n++
	}
	for _, st := range stripes[:n] {
		s.userLocks[st].Lock()
	}
	return func() {
		for i := n - 1; i >= 0; i-- {
			s.userLocks[stripes[i]].Unlock()
		}
	}
}
