package embedded_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
)

// quietOpts are options for the WAL and lock tests: no log, a small reserve.
func quietOpts() embedded.Options {
	return embedded.Options{Logger: slog.New(slog.DiscardHandler), ReserveBytes: 1 << 20}
}

func handle(i int) string { return fmt.Sprintf("u%05d", i) }

// createUsers creates n users, each an acknowledged (synced) write.
func createUsers(t *testing.T, st *embedded.Store, n int) {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		require.NoError(t, st.CreateUser(context.Background(), &store.User{ID: store.NewID(at), Handle: handle(i), CreatedAt: at, LastSeenAt: at}))
	}
}

// present returns how many of the n users the store has, requiring them to
// be the first ones: a log replayed up to some point.
func present(t *testing.T, st *embedded.Store, n int) int {
	t.Helper()
	var found []bool
	for i := range n {
		_, err := st.FindUserByHandle(context.Background(), handle(i))
		if err != nil {
			require.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "%v", err)
		}
		found = append(found, err == nil)
	}
	k := slices.Index(found, false)
	if k < 0 {
		return n
	}
	require.NotContains(t, found[k:], true, "the users found are a prefix of those written")
	return k
}

// newestWAL returns the path of the highest-numbered WAL in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	slices.Sort(logs)
	return logs[len(logs)-1]
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.Size()
}

// damage flips the bits of 8 bytes of path at off, as a bad disk would.
func damage(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	b := make([]byte, 8)
	_, err = f.ReadAt(b, off)
	require.NoError(t, err)
	for i := range b {
		b[i] ^= 0xff
	}
	_, err = f.WriteAt(b, off)
	require.NoError(t, err)
}

// TestWAL_Damage damages the newest WAL of a cleanly closed store at
// several places, each with acknowledged records after it. Pebble alone
// would open the store without them, logging only at info level (this
// store's WAL format has no sync offsets to tell damage from a torn tail).
// Open refuses, naming the file and offset and what to do; doing what the
// message says (truncating the file there) opens the store with the
// writes before the damage.
func TestWAL_Damage(t *testing.T) {
	const n = 2000 // several 32 KiB blocks of records
	for _, tc := range []struct {
		name string
		at   func(size int64) int64
	}{
		{"FirstBlock", func(int64) int64 { return 1000 }},
		{"Middle", func(size int64) int64 { return size / 2 }},
		{"LastBlock", func(size int64) int64 { return size - 2000 }},
		// The last record: only the EOF trailer a clean close writes
		// follows it.
		{"LastRecord", func(size int64) int64 { return size - 60 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			st, err := embedded.Open(dir, quietOpts())
			require.NoError(t, err)
			createUsers(t, st, n)
			require.NoError(t, st.Close())
			wal := newestWAL(t, dir)
			size := fileSize(t, wal)
			at := tc.at(size)
			damage(t, wal, at)

			_, err = embedded.Open(dir, quietOpts())
			var de *embedded.WALDamageError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, wal, de.File)
			assert.LessOrEqual(t, de.Offset, at, "the damaged record starts at or before the damage")
			assert.Greater(t, de.Offset, at-1000)
			assert.Greater(t, de.Next, at)
			assert.Equal(t, size, de.Size)
			msg := err.Error()
			assert.Contains(t, msg, wal)
			assert.Contains(t, msg, fmt.Sprintf("damaged at byte %d", de.Offset))
			assert.Contains(t, msg, "refuses to start")
			assert.Contains(t, msg, "Restore the data directory from a backup")
			assert.Contains(t, msg, fmt.Sprintf("truncate -s %d %s", de.Offset, wal))

			// What the message says: the writes before the damage, and
			// the store works.
			require.NoError(t, os.Truncate(wal, de.Offset))
			st, err = embedded.Open(dir, quietOpts())
			require.NoError(t, err)
			defer st.Close()
			k := present(t, st, n)
			assert.Less(t, k, n)
			if tc.name == "LastRecord" {
				assert.Equal(t, n-1, k, "only the damaged record is lost")
			}
			createUsers(t, st, 0)
			_, err = st.FindUserByHandle(context.Background(), handle(0))
			require.NoError(t, err)
		})
	}
}

// TestWAL_DamageOlderLog damages a WAL older than the newest that Pebble
// still replays: Pebble refuses (it expects older logs to end cleanly);
// the message names the file and offset.
func TestWAL_DamageOlderLog(t *testing.T) {
	dir := t.TempDir()
	st, err := embedded.Open(dir, quietOpts())
	require.NoError(t, err)
	createUsers(t, st, 2000) // fills the first, small memtable, so two logs
	require.NoError(t, st.Close())
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(logs), 2)
	slices.Sort(logs)
	damage(t, logs[0], 5000)

	_, err = embedded.Open(dir, quietOpts())
	var de *embedded.WALDamageError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, logs[0], de.File)
	assert.Contains(t, err.Error(), fmt.Sprintf("truncate -s %d %s", de.Offset, logs[0]))
}

// copyStore copies the files of an open store, as a crash would leave
// them (the lock and the reserve aside).
func copyStore(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	entries, err := os.ReadDir(from)
	require.NoError(t, err)
	for _, e := range entries {
		if e.Name() == "LOCK" || e.Name() == embedded.BallastName {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(to, e.Name()), b, 0o644))
	}
	return to
}

// TestWAL_CrashTail: a store copied while open, as a crash leaves it.
// A last record cut short (a write the crash interrupted, never
// acknowledged) is dropped quietly; a last record whole but unreadable may
// have been acknowledged and cannot be told from a power loss's torn
// write: it is dropped with an error-level log line and counted.
func TestWAL_CrashTail(t *testing.T) {
	const n = 50
	dir := t.TempDir()
	st, err := embedded.Open(dir, quietOpts())
	require.NoError(t, err)
	defer st.Close()
	createUsers(t, st, n)

	t.Run("Torn", func(t *testing.T) {
		crashed := copyStore(t, dir)
		wal := newestWAL(t, crashed)
		require.NoError(t, os.Truncate(wal, fileSize(t, wal)-20))
		logs := &logBuffer{}
		opts := quietOpts()
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
		st, err := embedded.Open(crashed, opts)
		require.NoError(t, err)
		defer st.Close()
		assert.Equal(t, n-1, present(t, st, n))
		assert.Zero(t, st.DamagedWALTails())
		assert.NotContains(t, logs.String(), "level=ERROR")
	})
	t.Run("Damaged", func(t *testing.T) {
		crashed := copyStore(t, dir)
		wal := newestWAL(t, crashed)
		damage(t, wal, fileSize(t, wal)-20)
		logs := &logBuffer{}
		opts := quietOpts()
		opts.Logger = slog.New(slog.NewTextHandler(logs, nil))
		st, err := embedded.Open(crashed, opts)
		require.NoError(t, err)
		defer st.Close()
		assert.Equal(t, n-1, present(t, st, n))
		assert.Equal(t, 1, st.DamagedWALTails())
		assert.Contains(t, logs.String(), "level=ERROR")
		assert.Contains(t, logs.String(), "ends with a damaged record")
		assert.Contains(t, logs.String(), wal)
	})
}

// TestLock_SameProcess: a second Open of a directory this process has
// open says what holds it, and leaves the first store working.
func TestLock_SameProcess(t *testing.T) {
	dir := t.TempDir()
	st, err := embedded.Open(dir, quietOpts())
	require.NoError(t, err)
	defer st.Close()
	_, err = embedded.Open(dir, quietOpts())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "another Herald process")
	assert.Contains(t, err.Error(), dir)
	assert.Contains(t, err.Error(), filepath.Join(dir, "LOCK"))
	createUsers(t, st, 1)
}

const lockChildEnv = "HERALD_LOCK_CHILD_DIR"

// TestLockChild holds a store open until killed.
func TestLockChild(t *testing.T) {
	dir := os.Getenv(lockChildEnv)
	if dir == "" {
		t.Skip("runs only as the child of TestLock_OtherProcess")
	}
	_, err := embedded.Open(dir, quietOpts())
	require.NoError(t, err)
	fmt.Println("open")
	time.Sleep(time.Minute) // the parent kills us long before this
}

// TestLock_OtherProcess: opening a directory another process has open
// names the directory and its lock file, not "resource temporarily
// unavailable" alone.
func TestLock_OtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockChild$", "-test.v")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(out)
	opened := false
	for sc.Scan() {
		if sc.Text() == "open" {
			opened = true
			break
		}
	}
	require.True(t, opened, "the child did not open the store")
	go func() { _, _ = io.Copy(io.Discard, out) }()

	_, err = embedded.Open(dir, quietOpts())
	require.Error(t, err)
	msg := err.Error()
	assert.Contains(t, msg, "another Herald process")
	assert.Contains(t, msg, dir)
	assert.Contains(t, msg, filepath.Join(dir, "LOCK"))
	assert.True(t, errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES), "the cause stays wrapped: %v", err)
	assert.True(t, strings.Index(msg, "another Herald process") < strings.Index(msg, "resource temporarily unavailable") || !strings.Contains(msg, "resource temporarily unavailable"))
}
