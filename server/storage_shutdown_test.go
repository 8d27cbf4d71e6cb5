package main

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/datadir"
	"herald/server/internal/servertest"
	"herald/store/embedded"
	"herald/store/embedded/faultfs"
	"herald/store/pubsub"
	"herald/store/service"
)

// TestStorage_StopAllHangingClose: a store whose Close never returns does
// not hold stopAll past its context's deadline; stopAll says so.
func TestStorage_StopAllHangingClose(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log, ReserveBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	hub := pubsub.NewHub()
	svc := service.NewService(st, hub, service.Options{Logger: log})
	require.NoError(t, svc.Start(context.Background()))
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	be := &backend{svc: svc, closeEvents: hub.Close, closeStore: func() error { <-hang; return nil }}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = within(t, "stopAll", func() error { return stopAll(ctx, log, be) })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "close store: the store did not close before the shutdown deadline")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// within runs f and returns its error, failing the test if f has not
// returned within 10s.
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

// TestStorage_ShutdownStalledDisk: SIGTERM while the disk stalls (every
// fsync hangs, so closing the store does): run still returns at the
// shutdown deadline, reporting the store it could not close.
func TestStorage_ShutdownStalledDisk(t *testing.T) {
	disk := faultfs.New(vfs.Default, 1<<30)
	withEmbeddedDisk(t, disk)
	data := t.TempDir()
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-data", data, "-shutdown-timeout", "500ms"},
		servertest.Env("HERALD_TOKEN_SECRET", strings.Repeat("x", 32)))
	base := "http://" + r.addr
	servertest.MustSignUp(t, base, "alice")

	release := disk.StallSyncs()
	defer func() {
		// Let the abandoned close finish, then check it did: the store
		// opens again, with what was acknowledged.
		release()
		var st *embedded.Store
		require.Eventually(t, func() bool {
			var err error
			st, err = embedded.Open(filepath.Join(data, datadir.EmbeddedDir), embedded.Options{Logger: slog.New(slog.DiscardHandler), ReserveBytes: 1 << 20})
			return err == nil
		}, 10*time.Second, 10*time.Millisecond)
		_, err := st.FindUserByHandle(context.Background(), "alice")
		assert.NoError(t, err)
		require.NoError(t, st.Close())
	}()
	r.cancel()
	err := within(t, "run", func() error { return <-r.done })
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the store did not close before the shutdown deadline")
	assert.Contains(t, r.logs.String(), `"msg":"closing store"`)
	assert.Positive(t, disk.StalledSyncs(), "the close was stuck in a sync")
}
