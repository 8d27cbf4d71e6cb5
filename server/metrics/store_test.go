package metrics

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/storage"
)

// TestStoreMetrics_Leaser checks that wrapping keeps the optional
// storage.Leaser of a backend that has it, measures its calls, and adds it
// to none that lacks it.
func TestStoreMetrics_Leaser(t *testing.T) {
	sm := newStoreMetrics()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	plain := sm.wrap(st)
	_, ok := storage.LeaserOf(plain)
	assert.False(t, ok, "the embedded store is no Leaser, nor is its wrapper")

	fl := &fakeLeaser{Backend: st}
	wrapped := sm.wrap(fl)
	l, ok := storage.LeaserOf(wrapped)
	require.True(t, ok, "a Leaser stays one when wrapped")
	held, err := l.TryFanoutLease(context.Background(), "me", time.Second)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, 1, fl.tries)
	assert.Equal(t, 1, testutilCount(t, sm, "TryFanoutLease", "ok"))

	_, err = wrapped.FindUserByID(context.Background(), store.NewID(time.Now()))
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	assert.Equal(t, 1, testutilCount(t, sm, "FindUserByID", "not_found"))
	assert.Equal(t, 0, testutilCount(t, sm, "FindUserByID", "ok"))
}

// fakeLeaser is a backend that is also a Leaser, as MongoDB's is.
type fakeLeaser struct {
	storage.Backend
	tries int
}

func (f *fakeLeaser) TryFanoutLease(context.Context, string, time.Duration) (bool, error) {
	f.tries++
	return true, nil
}

func (f *fakeLeaser) ReleaseFanoutLease(context.Context, string) error { return nil }

// testutilCount returns herald_store_calls_total for method and outcome.
func testutilCount(t *testing.T, sm *storeMetrics, method, outcome string) int {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, sm.total.WithLabelValues(method, outcome).Write(m))
	return int(m.GetCounter().GetValue())
}
