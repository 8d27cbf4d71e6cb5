package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// testFanoutLag checks the fan-out backlog (Service.FanoutBacklog) while
// jobs wait and once they are drained, and Options.FanoutMaxLag's refusal
// of posts and reposts past it. The service is not started while the jobs
// pile up: on a backend without a lease its queue holds them, on one with
// a lease (before it is taken) storage is read.
func testFanoutLag(t *testing.T, open OpenFunc) {
	const maxLag = 30 * time.Second
	backlog := func(t *testing.T, svc *service.Service) service.FanoutBacklog {
		t.Helper()
		b, err := svc.FanoutBacklog(ctx)
		require.NoError(t, err)
		return b
	}
	refused := func(t *testing.T, err error) {
		t.Helper()
		require.Error(t, err)
		assert.Equal(t, store.ERATELIMITED, store.ErrorCode(err))
		var fb *service.FanoutBehindError
		require.True(t, errors.As(err, &fb), "%v", err)
		assert.Greater(t, fb.Lag, maxLag)
		assert.Equal(t, maxLag, fb.MaxLag)
		assert.GreaterOrEqual(t, fb.RetryAfter, time.Second)
		assert.LessOrEqual(t, fb.RetryAfter, maxLag)
		assert.Contains(t, store.ErrorMessage(err), "retry in")
	}

	t.Run("RisesRefusesDrains", func(t *testing.T) {
		b := openBackend(t, open)
		c := newClock()
		svc, _ := newServiceStopped(t, b, c, service.Options{FanoutMaxLag: maxLag, LagReadEvery: time.Nanosecond})
		alice, bob := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		mustFollow(t, b, c, bob.ID, alice.ID)
		assert.Equal(t, service.FanoutBacklog{}, stripSource(backlog(t, svc)))

		first, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "first"})
		require.NoError(t, err)
		got := backlog(t, svc)
		assert.Equal(t, 1, got.Jobs)
		assert.Less(t, got.Lag, time.Second)
		// Not started, a process on a backend with a lease does not hold
		// it: it reads storage.
		_, leased := storage.LeaserOf(b)
		assert.Equal(t, leased, got.FromStorage)

		// Below the limit: taken.
		c.ms.Add((maxLag - 10*time.Second).Milliseconds())
		second, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "second"})
		require.NoError(t, err)
		got = backlog(t, svc)
		assert.Equal(t, 2, got.Jobs)
		assert.GreaterOrEqual(t, got.Lag, maxLag-10*time.Second)
		assert.Less(t, got.Lag, maxLag)

		// Past it: refused, nothing stored.
		c.ms.Add((11 * time.Second).Milliseconds())
		_, err = svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "refused"})
		refused(t, err)
		_, err = svc.Repost(ctx, bob.ID, first.ID)
		refused(t, err)
		got = backlog(t, svc)
		assert.Equal(t, 2, got.Jobs)
		assert.Greater(t, got.Lag, maxLag)
		// A message that costs no fan-out is not refused: a reply is
		// fanned out, so it is; an edit is not a post.
		_, err = svc.PostMessage(ctx, bob.ID, service.PostInput{Text: "reply", ReplyToID: first.ID})
		refused(t, err)
		_, err = svc.EditMessage(ctx, alice.ID, first.ID, "first, edited")
		require.NoError(t, err)

		// Drained: back to 0, posts taken, nothing accepted lost.
		require.NoError(t, svc.Start(ctx))
		waitIdle(t, svc)
		require.Eventually(t, func() bool { return backlog(t, svc).Jobs == 0 }, 20*time.Second, 5*time.Millisecond)
		got = backlog(t, svc)
		assert.Equal(t, service.FanoutBacklog{}, got)
		third, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "third"})
		require.NoError(t, err)
		waitIdle(t, svc)
		ids, _ := inboxOf(t, b, bob.ID, service.StrategyBucket.Layout())
		assert.Equal(t, []store.ID{third.ID, second.ID, first.ID}, ids)
	})

	t.Run("PulledTaken", func(t *testing.T) {
		// Under hybrid a celebrity's post is pulled, costing no fan-out:
		// it is taken whatever the lag.
		b := openBackend(t, open)
		c := newClock()
		svc, _ := newServiceStopped(t, b, c, service.Options{Strategy: service.StrategyHybrid, CelebrityThreshold: 1,
			FanoutMaxLag: maxLag, LagReadEvery: time.Nanosecond})
		celeb, carol, bob, dan := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		mustFollow(t, b, c, bob.ID, celeb.ID)
		mustFollow(t, b, c, dan.ID, celeb.ID)
		mustFollow(t, b, c, bob.ID, carol.ID)
		_, err := svc.PostMessage(ctx, carol.ID, service.PostInput{Text: "pushed"})
		require.NoError(t, err)
		c.ms.Add((maxLag + time.Second).Milliseconds())
		_, err = svc.PostMessage(ctx, carol.ID, service.PostInput{Text: "refused"})
		refused(t, err)
		m, err := svc.PostMessage(ctx, celeb.ID, service.PostInput{Text: "pulled"})
		require.NoError(t, err)
		assert.True(t, m.Pulled)
	})

	t.Run("StorageReadCached", func(t *testing.T) {
		// A process without the lease reads storage at most once every
		// LagReadEvery and reports that read in between.
		b := openBackend(t, open)
		if _, ok := storage.LeaserOf(b); !ok {
			t.Skip("the backend has no lease: the queue is read, never storage")
		}
		c := newClock()
		calls := &callCounter{calls: map[string]int{}}
		svc, _ := newServiceStopped(t, storage.Observe(b, calls), c, service.Options{LagReadEvery: time.Hour})
		alice := mustCreateUser(t, b, c)
		assert.Equal(t, service.FanoutBacklog{FromStorage: true}, backlog(t, svc))
		got, _ := calls.take()
		assert.Equal(t, map[string]int{"JobBacklog": 1}, got, "one bounded read, not every pending job")
		_, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "unseen until the next read"})
		require.NoError(t, err)
		assert.Equal(t, service.FanoutBacklog{FromStorage: true}, backlog(t, svc))
	})

	t.Run("OnlyNewFanoutRefused", func(t *testing.T) {
		// Behind, only a call that would queue a new fan-out is refused:
		// reposting again (no job), likes, follows, unfollows, unreposts
		// and deletions (retractions) are taken.
		b := openBackend(t, open)
		c := newClock()
		svc, _ := newServiceStopped(t, b, c, service.Options{FanoutMaxLag: maxLag, LagReadEvery: time.Nanosecond})
		alice, bob, carol := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		mustFollow(t, b, c, bob.ID, alice.ID)
		first, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "first"})
		require.NoError(t, err)
		second, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "second"})
		require.NoError(t, err)
		_, err = svc.Repost(ctx, bob.ID, first.ID)
		require.NoError(t, err)
		c.ms.Add((maxLag + time.Second).Milliseconds())
		_, err = svc.Repost(ctx, carol.ID, first.ID)
		refused(t, err)

		m, err := svc.Repost(ctx, bob.ID, first.ID)
		require.NoError(t, err, "reposting again queues nothing")
		assert.Equal(t, first.ID, m.ID)
		assert.Equal(t, 1, m.RepostCount)
		_, err = svc.Like(ctx, bob.ID, first.ID)
		require.NoError(t, err)
		_, err = svc.Unlike(ctx, bob.ID, first.ID)
		require.NoError(t, err)
		_, err = svc.Follow(ctx, carol.ID, alice.ID)
		require.NoError(t, err)
		_, err = svc.Unfollow(ctx, carol.ID, alice.ID)
		require.NoError(t, err)
		_, err = svc.Unrepost(ctx, bob.ID, first.ID)
		require.NoError(t, err)
		require.NoError(t, svc.DeleteMessage(ctx, alice.ID, second.ID))
		_, err = svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "still behind"})
		refused(t, err)
	})

	t.Run("JobBacklog", func(t *testing.T) {
		// The backend's bounded summary: a count stopped at the limit,
		// and the oldest job's stored time, a retraction's being its
		// deletion's (or its first count's), not its message's.
		b := openBackend(t, open)
		c := newClock()
		got, err := b.JobBacklog(ctx, 10)
		require.NoError(t, err)
		assert.Equal(t, storage.JobBacklog{}, got)

		alice, bob := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		l := service.StrategyBucket.Layout()
		old := storeMessage(t, b, c, alice.ID) // no job; retracted below
		c.ms.Add(time.Hour.Milliseconds())
		m1 := newMessage(c, alice.ID, "one")
		require.NoError(t, b.CreateMessage(ctx, m1, newDeliverJob(m1, l)))
		c.ms.Add(time.Minute.Milliseconds())
		m2 := newMessage(c, alice.ID, "two")
		require.NoError(t, b.CreateMessage(ctx, m2, newDeliverJob(m2, l)))
		got, err = b.JobBacklog(ctx, 10)
		require.NoError(t, err)
		assert.Equal(t, storage.JobBacklog{Jobs: 2, Oldest: m1.CreatedAt}, got)

		follow := newOwnerJob(c, storage.JobFollow, l, bob.ID, alice.ID)
		follow.CreatedAt = m1.CreatedAt.Add(-time.Second)
		require.NoError(t, b.StoreJob(ctx, follow))
		got, err = b.JobBacklog(ctx, 10)
		require.NoError(t, err)
		assert.Equal(t, storage.JobBacklog{Jobs: 3, Oldest: follow.CreatedAt}, got, "a follow job, older")
		got, err = b.JobBacklog(ctx, 2)
		require.NoError(t, err)
		assert.Equal(t, 2, got.Jobs, "counted up to the limit")

		require.NoError(t, b.FinishJob(ctx, follow))
		before := time.Now()
		retract := &storage.Job{ID: old.ID, Kind: storage.JobRetract, Layout: l, MessageID: old.ID, AuthorID: old.AuthorID, CreatedAt: old.CreatedAt}
		require.NoError(t, b.DeleteMessage(ctx, old.ID, retract))
		got, err = b.JobBacklog(ctx, 10)
		after := time.Now()
		require.NoError(t, err)
		assert.Equal(t, 3, got.Jobs)
		// The retraction is newer (by the wall clock) than the deliveries
		// (by the test's clock, in the past): the oldest is still m1.
		assert.Equal(t, m1.CreatedAt, got.Oldest, "a retraction's message time is not its stored time")
		require.NoError(t, b.FinishJob(ctx, newDeliverJob(m1, l)))
		require.NoError(t, b.FinishJob(ctx, newDeliverJob(m2, l)))
		got, err = b.JobBacklog(ctx, 10)
		require.NoError(t, err)
		assert.Equal(t, 1, got.Jobs)
		assert.False(t, got.Oldest.Before(before.Truncate(time.Millisecond)), "%v before the deletion %v", got.Oldest, before)
		assert.False(t, got.Oldest.After(after), "%v after %v", got.Oldest, after)
	})

	t.Run("Disabled", func(t *testing.T) {
		b := openBackend(t, open)
		c := newClock()
		svc, _ := newServiceStopped(t, b, c, service.Options{LagReadEvery: time.Nanosecond})
		alice := mustCreateUser(t, b, c)
		_, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "first"})
		require.NoError(t, err)
		c.ms.Add(time.Hour.Milliseconds())
		_, err = svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "second"})
		require.NoError(t, err)
		got := backlog(t, svc)
		assert.Equal(t, 2, got.Jobs)
		assert.Greater(t, got.Lag, time.Hour-time.Second)
	})
}

// stripSource returns b without FromStorage, which depends on the backend.
func stripSource(b service.FanoutBacklog) service.FanoutBacklog {
	b.FromStorage = false
	return b
}
