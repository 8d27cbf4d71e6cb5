package mongostore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// callCounter counts a backend's calls by method (storage.Observer), from
// the first ListFollowers on: a delivery job's first call. base is the
// round trips counted before it.
type callCounter struct {
	mu   sync.Mutex
	by   map[string]int
	trip *atomic.Int64
	base int64
}

func (c *callCounter) Observe(method string, _ time.Time, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.by) == 0 {
		if method != "ListFollowers" {
			return
		}
		c.base = c.trip.Load() - 1 // reported once it returned
	}
	c.by[method]++
}

// TestRoundTrips_FanoutChunk measures the MongoDB round trips of a post's
// delivery as the Service's fan-out runs it, chunk by chunk: the backend
// calls of a chunk (list the followers, which of them block the author,
// deliver) and the round trips they make. The model of
// docs/design.md#scaling-fan-out-across-processes starts from this
// number; the test checks it does not grow with the chunk.
func TestRoundTrips_FanoutChunk(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	var n, docs atomic.Int64
	st := mongostore.New(countingClient{client, &n, &docs}, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	calls := &callCounter{by: map[string]int{}, trip: &n}
	const chunk, fans = 12, 30 // chunks of 12, 12 and 6
	now := time.Now().UTC().Truncate(time.Millisecond)
	author := &store.User{ID: store.NewID(now), Handle: "author", CreatedAt: now, LastSeenAt: now}
	require.NoError(t, st.CreateUser(ctx, author))
	for i := range fans {
		u := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("f%d", i), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		_, err := st.Follow(ctx, u.ID, author.ID, now)
		require.NoError(t, err)
	}
	// No poll or renewal within the test: only the job's calls count.
	svc := service.NewService(storage.Observe(st, calls), pubsub.NewHub(), service.Options{
		Strategy: service.StrategyBucket, ChunkSize: chunk, LeaseTTL: time.Hour, JobPoll: time.Hour,
	})
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	require.Eventually(t, svc.Idle, 5*time.Second, time.Millisecond)

	_, err = svc.PostMessage(ctx, author.ID, service.PostInput{Text: "hello"})
	require.NoError(t, err)
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)
	calls.mu.Lock()
	by, trips := maps.Clone(calls.by), n.Load()-calls.base
	calls.mu.Unlock()
	const chunks = 3
	var names []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		names = append(names, fmt.Sprintf("%s %d", k, by[k]))
	}
	t.Logf("delivery to %d followers in %d chunks of %d: %d round trips (%.1f a chunk); backend calls: %s",
		fans, chunks, chunk, trips, float64(trips)/chunks, strings.Join(names, ", "))
	assert.Equal(t, chunks, by["DeliverInbox"])
	assert.Equal(t, chunks, by["ListFollowers"])
	assert.Equal(t, chunks, by["FindBlockers"], "which owners block the author: one call a chunk")
	// Per chunk: list followers, find blockers, and DeliverInbox's 7 (check
	// job, read owners, store the plan, count, write entries, record,
	// advance); one per job records it as running.
	assert.Equal(t, int64(chunks*9+1), trips)
}
