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

// TestRoundTrips_FanoutChunkOwnerLanes measures the same delivery on two
// owner lanes, run by one process: each lane reads the author's followers
// page by page, keeping its own, until it has a chunk's worth, so a
// lane's chunk costs about as many follower pages as there are lanes,
// plus a chunk's 8 other round trips; a lane's share begins with 1 and
// ends with 1 more for the last lane (it finds itself last, then ends the
// job).
func TestRoundTrips_FanoutChunkOwnerLanes(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	var n, docs atomic.Int64
	st := mongostore.New(countingClient{client, &n, &docs}, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	calls := &callCounter{by: map[string]int{}, trip: &n}
	const lanes, chunk, perLane = 2, 12, 15 // each lane: chunks of 12 and 3
	now := time.Now().UTC().Truncate(time.Millisecond)
	author := &store.User{ID: store.NewID(now), Handle: "author", CreatedAt: now, LastSeenAt: now}
	require.NoError(t, st.CreateUser(ctx, author))
	count := make([]int, lanes)
	for i := 0; count[0] < perLane || count[1] < perLane; i++ {
		id := store.NewID(now)
		l := storage.OwnerLane(id, lanes)
		if count[l] == perLane {
			continue
		}
		count[l]++
		u := &store.User{ID: id, Handle: fmt.Sprintf("f%d", i), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		_, err := st.Follow(ctx, u.ID, author.ID, now)
		require.NoError(t, err)
	}
	gate := &followersGate{Backend: st, open: make(chan struct{})}
	svc := service.NewService(storage.Observe(gate, calls), pubsub.NewHub(), service.Options{
		Strategy: service.StrategyBucket, ChunkSize: chunk, LeaseTTL: time.Hour, JobPoll: time.Hour, Lanes: lanes,
	})
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	require.Len(t, heldLanes(svc), lanes)
	require.Eventually(t, svc.Idle, 5*time.Second, time.Millisecond)

	// Counted from the post's return: two lanes start at once, so their
	// first ListFollowers is no clean start; they wait for it.
	_, err = svc.PostMessage(ctx, author.ID, service.PostInput{Text: "hello"})
	require.NoError(t, err)
	before := n.Load()
	close(gate.open)
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)
	calls.mu.Lock()
	by, trips := maps.Clone(calls.by), n.Load()-before
	calls.mu.Unlock()
	b, err := st.JobBacklog(ctx, 10)
	require.NoError(t, err)
	require.Zero(t, b.Jobs, "the job ended")
	const chunks = 2 * lanes
	var names []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		names = append(names, fmt.Sprintf("%s %d", k, by[k]))
	}
	t.Logf("delivery to %d followers on %d lanes in chunks of %d: %d round trips (%.1f a lane's chunk); backend calls: %s",
		lanes*perLane, lanes, chunk, trips, float64(trips)/chunks, strings.Join(names, ", "))
	assert.Equal(t, chunks, by["DeliverInbox"])
	assert.Equal(t, chunks, by["FindBlockers"])
	assert.GreaterOrEqual(t, by["ListFollowers"], chunks)
	// Per lane's chunk: its follower pages, find blockers, DeliverInbox's
	// 7; per lane, 1 to record its job as running; 1 for the last lane.
	assert.Equal(t, int64(by["ListFollowers"]+chunks*8+lanes+1), trips)

	// A small author's post, every follower on lane 0: lane 0's share is
	// a one-chunk job (list, blockers, deliver's 7, record it running);
	// lane 1's, with no owner, still lists the followers, checks its job,
	// records it running and ends its share: the fixed cost every lane
	// pays for every message job.
	small := &store.User{ID: store.NewID(now), Handle: "small", CreatedAt: now, LastSeenAt: now}
	require.NoError(t, st.CreateUser(ctx, small))
	for i := 0; i < 3; {
		id := store.NewID(now)
		if storage.OwnerLane(id, lanes) != 0 {
			continue
		}
		i++
		u := &store.User{ID: id, Handle: fmt.Sprintf("s%d", i), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		_, err := st.Follow(ctx, u.ID, small.ID, now)
		require.NoError(t, err)
	}
	_, err = svc.PostMessage(ctx, small.ID, service.PostInput{Text: "small"})
	require.NoError(t, err)
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)
	before = n.Load()
	_, err = svc.PostMessage(ctx, small.ID, service.PostInput{Text: "small again"})
	require.NoError(t, err)
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)
	t.Logf("a small author's post on %d lanes: %d round trips, 5 of them the post's", lanes, n.Load()-before)
	assert.Equal(t, int64(5+10+4+1), n.Load()-before, "the post: 5; lane 0: 10; lane 1: 4; the last lane's end: 1")
}

// followersGate holds every ListFollowers until open is closed.
type followersGate struct {
	storage.Backend
	open chan struct{}
}

func (g *followersGate) ListFollowers(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	<-g.open
	return g.Backend.ListFollowers(ctx, user, r)
}

func (g *followersGate) Unwrap() storage.Backend { return g.Backend }
