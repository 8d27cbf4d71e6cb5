package mongostore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/require"

	"herald/store/mongostore"
	"herald/store/storage"
	"herald/store/storetest"
)

// openLungo returns a store over a fresh in-memory lungo engine.
func openLungo(t *testing.T) storage.Backend {
	t.Helper()
	client, engine, err := lungo.Open(context.Background(), lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(engine.Close)
	s := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, s.EnsureIndexes(context.Background()))
	return s
}

func TestStore_Lungo(t *testing.T) {
	storetest.Run(t, openLungo)
}

var dbSeq atomic.Int64

// TestStore_MongoDB runs the suite against the MongoDB server at
// HERALD_TEST_MONGODB_URI, each test in a database of its own, dropped after.
func TestStore_MongoDB(t *testing.T) {
	uri := os.Getenv("HERALD_TEST_MONGODB_URI")
	if uri == "" {
		t.Skip("HERALD_TEST_MONGODB_URI is not set: skipping the suite against a real MongoDB (it ran on lungo above)")
	}
	ctx := context.Background()
	client, err := mongostore.Connect(ctx, mongostore.ConnectOptions{URI: uri})
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(ctx) })
	require.NoError(t, client.Ping(ctx, nil), "HERALD_TEST_MONGODB_URI is set but MongoDB does not answer")
	run := time.Now().UnixNano()
	storetest.Run(t, func(t *testing.T) storage.Backend {
		name := fmt.Sprintf("herald_test_%d_%d", run, dbSeq.Add(1))
		s := mongostore.New(client, name, mongostore.Options{})
		require.NoError(t, s.EnsureIndexes(ctx))
		t.Cleanup(func() { _ = client.Database(name).Drop(ctx) })
		return noClose{s}
	})
}

// noClose leaves the shared client connected when the suite closes a backend.
type noClose struct{ *mongostore.Store }

func (noClose) Close() error { return nil }
