package mongostore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
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

// TestRoundTrips_GroupCommit measures the MongoDB round trips of a burst
// of small posts (32 authors of 8 followers each, one post each) as the
// Service's fan-out runs them on one lane: one DeliverInbox a job (as
// before group commit, Options.NoGroupCommit), and in groups
// (DeliverInboxes). The follower and blocker reads of each job are the
// same in both; the writes of a group are a fixed number whatever its
// jobs (docs/design.md, "Group commit on MongoDB").
func TestRoundTrips_GroupCommit(t *testing.T) {
	const authors, fans = 32, 8
	for _, lanes := range []int{1, 2} {
		before, beforeBy := measureSmallPosts(t, lanes, authors, fans, true)
		after, afterBy := measureSmallPosts(t, lanes, authors, fans, false)
		t.Logf("%d lane(s), %d small jobs (%d followers each): one job at a time %d round trips (%.1f a job; %s); grouped %d (%.1f a job; %s)",
			lanes, authors, fans, before, float64(before)/authors, beforeBy, after, float64(after)/authors, afterBy)
		assert.Less(t, after*2, before, "grouping at least halves the round trips of small jobs")
	}
}

func measureSmallPosts(t *testing.T, lanes, authors, fans int, alone bool) (int64, string) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	var n, docs atomic.Int64
	st := mongostore.New(countingClient{client, &n, &docs}, "herald", mongostore.Options{NoGroupCommit: alone})
	require.NoError(t, st.EnsureIndexes(ctx))
	if lanes > 1 {
		n, err := st.FanoutLanes(ctx, lanes)
		require.NoError(t, err)
		require.Equal(t, lanes, n)
	}
	calls := &callCounter{by: map[string]int{}, trip: &n}
	now := time.Now().UTC().Truncate(time.Millisecond)
	var as []store.ID
	for i := range authors {
		a := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("a%d", i), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, a))
		as = append(as, a.ID)
		for k := range fans {
			u := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("f%d_%d", i, k), CreatedAt: now, LastSeenAt: now}
			require.NoError(t, st.CreateUser(ctx, u))
			_, err := st.Follow(ctx, u.ID, a.ID, now)
			require.NoError(t, err)
		}
	}
	svc := service.NewService(storage.Observe(st, calls), pubsub.NewHub(), service.Options{
		Strategy: service.StrategyWrite, LeaseTTL: time.Hour, JobPoll: time.Hour, Lanes: lanes,
	})
	for i, a := range as {
		_, err := svc.PostMessage(ctx, a, service.PostInput{Text: fmt.Sprintf("post %d", i)})
		require.NoError(t, err)
	}
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	require.Eventually(t, svc.Idle, 20*time.Second, time.Millisecond)
	calls.mu.Lock()
	by, trips := maps.Clone(calls.by), n.Load()-calls.base
	calls.mu.Unlock()
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	require.Empty(t, pending)
	var names []string
	for _, k := range slices.Sorted(maps.Keys(by)) {
		names = append(names, fmt.Sprintf("%s %d", k, by[k]))
	}
	return trips, strings.Join(names, ", ")
}
