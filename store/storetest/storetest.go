// Package storetest is the conformance suite every storage.Backend passes:
// the storage primitives one by one, then the timeline scenarios run by a
// service.Service over the backend, concurrency included.
package storetest

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// OpenFunc returns a fresh, empty backend for one test; the suite closes it.
type OpenFunc func(t *testing.T) storage.Backend

// Run runs the whole suite against backends made by open.
func Run(t *testing.T, open OpenFunc) {
	t.Run("Users", func(t *testing.T) { testUsers(t, open) })
	t.Run("RevokeTokens", func(t *testing.T) { testRevokeTokens(t, open) })
	t.Run("DeleteUser", func(t *testing.T) { testDeleteUser(t, open) })
	t.Run("Sessions", func(t *testing.T) { testSessions(t, open) })
	t.Run("Follows", func(t *testing.T) { testFollows(t, open) })
	t.Run("Messages", func(t *testing.T) { testMessages(t, open) })
	t.Run("Likes", func(t *testing.T) { testLikes(t, open) })
	t.Run("Blocks", func(t *testing.T) { testBlocks(t, open) })
	t.Run("FollowRequests", func(t *testing.T) { testFollowRequests(t, open) })
	t.Run("Conversations", func(t *testing.T) { testConversations(t, open) })
	t.Run("Notifications", func(t *testing.T) { testNotifications(t, open) })
	t.Run("Threads", func(t *testing.T) { testThreads(t, open) })
	t.Run("Reposts", func(t *testing.T) { testReposts(t, open) })
	t.Run("Attributes", func(t *testing.T) { testAttributes(t, open) })
	t.Run("DocReads", func(t *testing.T) { testDocReads(t, open) })
	t.Run("Inbox", func(t *testing.T) { testInbox(t, open) })
	t.Run("Ranges", func(t *testing.T) { testRanges(t, open) })
	t.Run("Jobs", func(t *testing.T) { testJobs(t, open) })
	for _, st := range service.Strategies {
		t.Run("Service/"+string(st), func(t *testing.T) { testService(t, open, st) })
		t.Run("Concurrency/"+string(st), func(t *testing.T) { testConcurrency(t, open, st) })
		t.Run("AccountLife/"+string(st), func(t *testing.T) { testAccountLife(t, open, st) })
	}
	t.Run("SameTimelines", func(t *testing.T) { testSameTimelines(t, open) })
	t.Run("HomeRuleCosts", func(t *testing.T) { testHomeRuleCosts(t, open) })
	t.Run("RepostsOfDeleted", func(t *testing.T) { testRepostsOfDeleted(t, open) })
	t.Run("Seen", func(t *testing.T) { testSeen(t, open) })
	t.Run("Inactive", func(t *testing.T) { testInactive(t, open) })
	t.Run("Hybrid", func(t *testing.T) { testHybrid(t, open) })
	t.Run("FollowWhilePosting", func(t *testing.T) { testFollowWhilePosting(t, open) })
	for _, st := range []service.Strategy{service.StrategyWrite, service.StrategyBucket} {
		t.Run("GroupCommit/"+string(st), func(t *testing.T) { testGroupCommit(t, open, st) })
	}
	t.Run("EdgeCases", func(t *testing.T) { testEdgeCases(t, open) })
	t.Run("Bulk", func(t *testing.T) { testBulk(t, open) })
	t.Run("FanoutLag", func(t *testing.T) { testFanoutLag(t, open) })
}

var ctx = context.Background()

// clock is a test clock that moves one millisecond per reading, so times
// and IDs are distinct and ordered.
type clock struct{ ms atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.ms.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	return c
}

func (c *clock) Now() time.Time { return time.UnixMilli(c.ms.Add(1)).UTC() }

func openBackend(t *testing.T, open OpenFunc) storage.Backend {
	t.Helper()
	b := open(t)
	t.Cleanup(func() { _ = b.Close() })
	return b
}

var userSeq atomic.Int64

func mustCreateUser(t *testing.T, b storage.Backend, c *clock) *store.User {
	t.Helper()
	now := c.Now()
	u := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("user_%d", userSeq.Add(1)), DisplayName: "User", PasswordHash: []byte("x"), CreatedAt: now, LastSeenAt: now, NeverBlocked: true}
	require.NoError(t, b.CreateUser(ctx, u))
	return u
}

func mustFollow(t *testing.T, b storage.Backend, c *clock, follower, followee store.ID) {
	t.Helper()
	created, err := b.Follow(ctx, follower, followee, c.Now())
	require.NoError(t, err)
	require.True(t, created)
}

func mustUser(t *testing.T, b storage.Backend, id store.ID) *store.User {
	t.Helper()
	u, err := b.FindUserByID(ctx, id)
	require.NoError(t, err)
	return u
}

func newMessage(c *clock, author store.ID, text string) *store.Message {
	now := c.Now()
	return &store.Message{ID: store.NewID(now), AuthorID: author, Text: text, Kind: store.KindPost, CreatedAt: now}
}

func newService(t *testing.T, b storage.Backend, c *clock) (*service.Service, *pubsub.Hub) {
	t.Helper()
	return newServiceWith(t, b, c, service.Options{})
}

// newServiceWith starts a Service with opts, completed with the test clock,
// a cheap password hash and fan-out chunks of 7 followers.
func newServiceWith(t *testing.T, b storage.Backend, c *clock, opts service.Options) (*service.Service, *pubsub.Hub) {
	t.Helper()
	svc, hub := newServiceStopped(t, b, c, opts)
	require.NoError(t, svc.Start(ctx))
	return svc, hub
}

// newServiceStopped is newServiceWith without Start: its fan-out runs
// nothing until the test starts it.
func newServiceStopped(t *testing.T, b storage.Backend, c *clock, opts service.Options) (*service.Service, *pubsub.Hub) {
	t.Helper()
	hub := pubsub.NewHub()
	opts.Now, opts.PasswordCost, opts.ChunkSize, opts.Logger = c.Now, bcrypt.MinCost, 7, slog.New(slog.DiscardHandler)
	svc := service.NewService(b, hub, opts)
	t.Cleanup(func() {
		cctx, cancel := contextWithTimeout()
		defer cancel()
		assert.NoError(t, svc.Close(cctx))
		hub.Close()
	})
	return svc, hub
}

func contextWithTimeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, 10*time.Second)
}

// waitIdle waits until the service has no fan-out work left.
func waitIdle(t *testing.T, svc *service.Service) {
	t.Helper()
	require.Eventually(t, svc.Idle, 20*time.Second, 2*time.Millisecond, "fan-out did not finish")
}
