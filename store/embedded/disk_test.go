package embedded_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/embedded/faultfs"
	"herald/store/storage"
)

// logBuffer is a bytes.Buffer safe for a logger's writes and a test's reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// within runs f and returns its error, failing the test if it has not
// returned after 10s: a write must answer, never hang.
func within(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10s", what)
		return nil
	}
}

// requireFull requires err to be the disk-full refusal.
func requireFull(t *testing.T, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	assert.Equal(t, store.ESTORAGEFULL, store.ErrorCode(err), "%s: %v", what, err)
	assert.Contains(t, store.ErrorMessage(err), "disk is full", what)
}

// world is a small social graph written through a store, remembering what
// was acknowledged.
type world struct {
	t         *testing.T
	st        *embedded.Store
	now       time.Time
	author    store.ID
	followers []store.ID
	users     []string       // handles acknowledged
	messages  []store.ID     // messages acknowledged
	delivered []store.ID     // messages acknowledged as delivered to every follower
	pending   []*storage.Job // delivery jobs stored, not delivered yet
}

func (w *world) tick() time.Time {
	w.now = w.now.Add(time.Millisecond)
	return w.now
}

func (w *world) createUser(handle string) (store.ID, error) {
	u := &store.User{ID: store.NewID(w.tick()), Handle: handle, CreatedAt: w.now, LastSeenAt: w.now}
	err := within(w.t, "CreateUser", func() error { return w.st.CreateUser(context.Background(), u) })
	if err == nil {
		w.users = append(w.users, handle)
	}
	return u.ID, err
}

func (w *world) post(text string) error {
	m := &store.Message{ID: store.NewID(w.tick()), AuthorID: w.author, Text: text, Kind: store.KindPost, CreatedAt: w.now}
	job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: w.author, CreatedAt: w.now}
	err := within(w.t, "CreateMessage", func() error { return w.st.CreateMessage(context.Background(), m, job) })
	if err == nil {
		w.messages = append(w.messages, m.ID)
		w.pending = append(w.pending, job)
	}
	return err
}

// deliver delivers the oldest pending job to every follower in one chunk.
func (w *world) deliver() error {
	job := w.pending[0]
	err := within(w.t, "DeliverInbox", func() error {
		_, err := w.st.DeliverInbox(context.Background(), storage.Delivery{Job: job, Owners: w.followers, At: w.tick(), Done: true})
		return err
	})
	if err == nil {
		w.delivered = append(w.delivered, job.MessageID)
		w.pending = w.pending[1:]
	}
	return err
}

func newWorld(t *testing.T, st *embedded.Store) *world {
	t.Helper()
	w := &world{t: t, st: st, now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	var err error
	w.author, err = w.createUser("author")
	require.NoError(t, err)
	for i := range 3 {
		f, err := w.createUser(fmt.Sprintf("follower%d", i))
		require.NoError(t, err)
		w.followers = append(w.followers, f)
		_, err = st.Follow(context.Background(), f, w.author, w.now)
		require.NoError(t, err)
	}
	return w
}

// check requires st to hold exactly what w says was acknowledged: every
// user and message, and in each follower's inbox every delivered message
// once, counted once.
func (w *world) check(st *embedded.Store) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	for _, h := range w.users {
		_, err := st.FindUserByHandle(ctx, h)
		require.NoError(t, err, "user %s", h)
	}
	author, err := st.FindUserByID(ctx, w.author)
	require.NoError(t, err)
	assert.Equal(t, len(w.messages), author.MessageCount, "the author's message count")
	for _, id := range w.messages {
		_, err := st.FindMessageByID(ctx, id)
		require.NoError(t, err, "message %s", id)
	}
	for _, f := range w.followers {
		items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: f, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 100)})
		require.NoError(t, err)
		var got []store.ID
		for _, it := range items {
			got = append([]store.ID{it.MessageID}, got...)
		}
		assert.Equal(t, w.delivered, got, "inbox of %s", f)
		assert.Equal(t, len(w.delivered), counts.Total, "inbox total of %s", f)
		assert.Equal(t, len(w.delivered), counts.Unread, "inbox unread of %s", f)
	}
}

func ballastSize(t *testing.T, dir string) int64 {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dir, embedded.BallastName))
	if os.IsNotExist(err) {
		return -1
	}
	require.NoError(t, err)
	return fi.Size()
}

// failOnFatal is an OnFatal for tests where Pebble must always go on.
func failOnFatal(t *testing.T) func(error) {
	return func(err error) { t.Errorf("OnFatal: %v", err) }
}

// TestDiskFull_Reserve fills the disk behind the store's back: the write
// that meets ENOSPC still succeeds, on the reserve's space; every write
// after it is refused with STORAGE_FULL at once, reads work and Health
// says why; once space is back, writes work again without reopening, and
// after a reopen everything acknowledged is there, once.
func TestDiskFull_Reserve(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	disk := faultfs.New(vfs.Default, 1<<30)
	logs := &logBuffer{}
	opts := embedded.Options{
		FS: disk, ReserveBytes: 1 << 20, MinFreeBytes: 1 << 20,
		DiskCheckEvery: time.Hour, // the test runs the check itself
		Logger:         slog.New(slog.NewTextHandler(logs, nil)),
		OnFatal:        failOnFatal(t),
	}
	st, err := embedded.Open(dir, opts)
	require.NoError(t, err)
	require.Equal(t, int64(1<<20), ballastSize(t, dir), "the reserve is made at open")
	w := newWorld(t, st)
	require.NoError(t, w.post("one"))
	require.NoError(t, w.deliver())
	require.NoError(t, w.post("two"))
	require.NoError(t, st.Checkpoint()) // nothing but the test writes from here on
	require.NoError(t, st.Health())

	disk.SetFree(0) // another process fills the disk
	require.NoError(t, w.post("three"), "the write that found the disk full finishes on the reserve's space")
	assert.Equal(t, int64(-1), ballastSize(t, dir), "the reserve was given up")
	assert.Contains(t, logs.String(), "the disk is full")
	requireFull(t, st.Health(), "Health")

	_, err = w.createUser("late")
	requireFull(t, err, "CreateUser")
	requireFull(t, w.post("four"), "CreateMessage")
	requireFull(t, w.deliver(), "DeliverInbox")
	_, err = st.Follow(ctx, w.followers[0], w.followers[1], w.now)
	requireFull(t, err, "Follow")
	_, err = st.MarkInboxRead(ctx, w.followers[0], storage.LayoutBuckets, w.messages[0])
	requireFull(t, err, "MarkInboxRead")
	name := "x"
	_, err = st.UpdateUser(ctx, w.author, storage.UserUpdate{DisplayName: &name})
	requireFull(t, err, "UpdateUser")

	// Reads work, and show what was acknowledged.
	w.check(st)

	disk.SetFree(1 << 30) // space is back
	st.CheckDisk()
	require.NoError(t, st.Health())
	assert.Equal(t, int64(1<<20), ballastSize(t, dir), "the reserve is made again")
	assert.Contains(t, logs.String(), "writes resume")
	require.NoError(t, w.deliver(), "the delivery refused while full")
	require.NoError(t, w.deliver())
	_, err = w.createUser("later")
	require.NoError(t, err)
	w.check(st)

	require.NoError(t, st.Close())
	st, err = embedded.Open(dir, opts)
	require.NoError(t, err)
	defer st.Close()
	w.check(st)
}

// TestDiskFull_Close closes the store while the disk is full: the close
// needs no space (its checkpoint waits for the next open's journal
// replay), and the reopened store has every acknowledged write, counted
// once.
func TestDiskFull_Close(t *testing.T) {
	dir := t.TempDir()
	disk := faultfs.New(vfs.Default, 1<<30)
	opts := embedded.Options{FS: disk, ReserveBytes: 1 << 20, MinFreeBytes: 1 << 20, DiskCheckEvery: time.Hour,
		Logger: slog.New(slog.DiscardHandler), OnFatal: failOnFatal(t)}
	st, err := embedded.Open(dir, opts)
	require.NoError(t, err)
	w := newWorld(t, st)
	require.NoError(t, w.post("one"))
	require.NoError(t, w.deliver()) // a journal record no checkpoint has written yet
	disk.SetFree(0)
	st.CheckDisk()
	requireFull(t, st.Health(), "Health")
	require.NoError(t, within(t, "Close", st.Close))

	disk.SetFree(1 << 30)
	st, err = embedded.Open(dir, opts)
	require.NoError(t, err)
	defer st.Close()
	w.check(st)
}

// TestDiskFull_LowSpace lets the periodic check see the free space fall
// below the minimum: writes are refused before any of them fails (the
// reserve is kept), and let in again once the space is back, by the check
// alone.
func TestDiskFull_LowSpace(t *testing.T) {
	dir := t.TempDir()
	disk := faultfs.New(vfs.Default, 1<<30)
	st, err := embedded.Open(dir, embedded.Options{FS: disk, ReserveBytes: 1 << 20, MinFreeBytes: 1 << 20,
		DiskCheckEvery: time.Millisecond, Logger: slog.New(slog.DiscardHandler), OnFatal: failOnFatal(t)})
	require.NoError(t, err)
	defer st.Close()
	w := newWorld(t, st)
	require.NoError(t, w.post("one"))

	disk.SetFree(512 << 10)
	require.Eventually(t, func() bool { return st.Health() != nil }, 10*time.Second, time.Millisecond)
	requireFull(t, st.Health(), "Health")
	requireFull(t, w.post("two"), "CreateMessage")
	requireFull(t, w.deliver(), "DeliverInbox")
	assert.Equal(t, int64(1<<20), ballastSize(t, dir), "no write failed: the reserve is whole")
	w.check(st)

	disk.SetFree(1 << 30)
	require.Eventually(t, func() bool { return st.Health() == nil }, 10*time.Second, time.Millisecond)
	require.NoError(t, w.deliver())
	require.NoError(t, w.post("two"))
	w.check(st)
}

// TestDiskFull_OpenFull opens the store on a disk without room for the
// reserve: it opens, read-only in effect, and takes writes once space is
// back.
func TestDiskFull_OpenFull(t *testing.T) {
	dir := t.TempDir()
	disk := faultfs.New(vfs.Default, 1<<30)
	opts := embedded.Options{FS: disk, ReserveBytes: 1 << 20, MinFreeBytes: 1 << 20, DiskCheckEvery: time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), OnFatal: failOnFatal(t)}
	st, err := embedded.Open(dir, opts)
	require.NoError(t, err)
	w := newWorld(t, st)
	require.NoError(t, st.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, embedded.BallastName)))

	disk.SetFree(3 << 19) // above the minimum, short of the minimum and the reserve
	st, err = embedded.Open(dir, opts)
	require.NoError(t, err)
	defer st.Close()
	w.st = st
	requireFull(t, st.Health(), "Health at open")
	w.check(st)
	requireFull(t, w.post("one"), "CreateMessage")

	disk.SetFree(1 << 30)
	require.Eventually(t, func() bool { return st.Health() == nil }, 10*time.Second, time.Millisecond)
	assert.Equal(t, int64(1<<20), ballastSize(t, dir))
	require.NoError(t, w.post("one"))
}

const fatalChildEnv = "HERALD_DISKFULL_CHILD_DIR"

// TestDiskFullChild is the process TestDiskFull_Fatal runs: a store
// without a reserve on a disk that fills up.
func TestDiskFullChild(t *testing.T) {
	dir := os.Getenv(fatalChildEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestDiskFull_Fatal")
	}
	disk := faultfs.New(vfs.Default, 1<<30)
	st, err := embedded.Open(dir, embedded.Options{FS: disk, ReserveBytes: -1, MinFreeBytes: -1, DiskCheckEvery: time.Hour,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	require.NoError(t, err)
	w := newWorld(t, st)
	require.NoError(t, w.post("acknowledged"))
	fmt.Println("acknowledged")
	disk.SetFree(0)
	err = w.post("refused")
	fmt.Printf("the write returned: %v\n", err)
	os.Exit(3)
}

// TestDiskFull_Fatal: with no reserve to give, a write that meets ENOSPC
// fails inside Pebble, which cannot go on; the process exits with the
// cause named (a supervisor restarts it) instead of hanging or panicking
// into the caller, and the restarted store has every acknowledged write.
func TestDiskFull_Fatal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDiskFullChild$", "-test.v")
	cmd.Env = append(os.Environ(), fatalChildEnv+"="+dir)
	var out logBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "output:\n%s", out.String())
		assert.Equal(t, 1, exit.ExitCode(), "output:\n%s", out.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("the child did not exit:\n%s", out.String())
	}
	assert.Contains(t, out.String(), "acknowledged")
	assert.NotContains(t, out.String(), "the write returned", "the failed write never reports success")
	assert.Contains(t, out.String(), "the disk is full and the embedded store cannot go on; exiting")
	assert.Contains(t, out.String(), "no space left on device")

	st, err := embedded.Open(dir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer st.Close()
	ctx := context.Background()
	_, err = st.FindUserByHandle(ctx, "follower2")
	require.NoError(t, err)
	author, err := st.FindUserByHandle(ctx, "author")
	require.NoError(t, err)
	msgs, err := st.FindMessages(ctx, storage.MessageFilter{AuthorID: author.ID, Range: store.Forward(store.NilID, 10)})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	assert.Equal(t, "acknowledged", msgs[0].Text)
	assert.Equal(t, 1, author.MessageCount)
}
