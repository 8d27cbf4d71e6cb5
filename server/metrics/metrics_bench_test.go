package metrics

import (
	"context"
	"testing"

	"herald/store"
	"herald/store/storage"
)

// nullBackend answers FindUserByID at once, so that a benchmark over it
// measures only what wraps it.
type nullBackend struct {
	storage.Backend
	u store.User
}

func (n *nullBackend) FindUserByID(context.Context, store.ID) (*store.User, error) { return &n.u, nil }

// BenchmarkMeteredBackend measures what the storage metrics add to a call:
// compare with BenchmarkPlainBackend.
func BenchmarkMeteredBackend(b *testing.B) {
	benchFind(b, newStoreMetrics().wrap(&nullBackend{}))
}

func BenchmarkPlainBackend(b *testing.B) {
	benchFind(b, &nullBackend{})
}

func benchFind(b *testing.B, be storage.Backend) {
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = be.FindUserByID(ctx, store.NilID)
		}
	})
}

// BenchmarkOperationSeries measures finding the series of an operation,
// done once per GraphQL operation.
func BenchmarkOperationSeries(b *testing.B) {
	m := newOpMetrics()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.lookup("Inbox", "query", true).ok.Inc()
		}
	})
}
