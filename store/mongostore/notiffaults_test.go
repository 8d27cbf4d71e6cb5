package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

func likeNoticeOf(m *store.Message, actor store.ID, at time.Time) storage.Notice {
	return storage.Notice{Owner: m.AuthorID, Kind: store.NotifyLiked, Key: store.NotificationGroupKey(store.NotifyLiked, m.ID, at), Actor: actor, Message: m.Key(), ID: store.NewID(at)}
}

// feedState is what a feed shows: its groups' counts, its counts, and each
// group's actors listed.
func feedState(t *testing.T, st *mongostore.Store, owner store.ID) (counts []int, c store.NotificationCounts, actors []int) {
	t.Helper()
	ctx := context.Background()
	gs, c, err := st.ReadNotifications(ctx, owner, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	for _, g := range gs {
		counts = append(counts, g.Count)
		as, err := st.ListNotificationActors(ctx, owner, g.ID, store.Forward(store.NilID, 100))
		require.NoError(t, err)
		actors = append(actors, len(as))
	}
	return counts, c, actors
}

// A notice whose process dies at each of its writes, then the same notice
// again: it completes, counted exactly once. A second actor's notice then
// counts once more, and a third retry of the first changes nothing.
func TestFaults_NotifyRetried(t *testing.T) {
	ctx := context.Background()
	for step := 1; step <= 5; step++ {
		t.Run(fmt.Sprintf("Write%d", step), func(t *testing.T) {
			st, f := openFaulty(t)
			author, fan, other := mkUser(t, st, "author"), mkUser(t, st, "fan"), mkUser(t, st, "other")
			m, _ := mkPost(t, st, author)
			n := likeNoticeOf(m, fan, tickClock())

			f.notifWrite.Store(int32(step))
			_, err := st.Notify(ctx, n)
			require.ErrorIs(t, err, errInjected)
			f.notifWrite.Store(0)

			res, err := st.Notify(ctx, n)
			require.NoError(t, err)
			assert.True(t, res.Changed, "the retry reports the change")
			assert.Equal(t, 1, res.Group.Count)
			assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, res.Counts)
			counts, c, actors := feedState(t, st, author)
			assert.Equal(t, []int{1}, counts)
			assert.Equal(t, []int{1}, actors)
			assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, c)

			second := n
			second.Actor, second.ID = other, store.NewID(tickClock())
			res, err = st.Notify(ctx, second)
			require.NoError(t, err)
			assert.Equal(t, 2, res.Group.Count)
			res, err = st.Notify(ctx, n)
			require.NoError(t, err)
			assert.False(t, res.Changed, "a retry of a finished notice changes nothing")
			counts, c, _ = feedState(t, st, author)
			assert.Equal(t, []int{2}, counts)
			assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, c)
		})
	}
}

// A notice cut short and never retried is finished by the owner's next
// operation once its claim expired: another actor's notice, or a read mark.
func TestFaults_NotifyTakenOver(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(mongostore.SetNotifClaimTTL(50 * time.Millisecond))
	for step := 2; step <= 5; step++ {
		t.Run(fmt.Sprintf("Write%d", step), func(t *testing.T) {
			st, f := openFaulty(t)
			author, fan, other := mkUser(t, st, "author"), mkUser(t, st, "fan"), mkUser(t, st, "other")
			m, _ := mkPost(t, st, author)
			f.notifWrite.Store(int32(step))
			_, err := st.Notify(ctx, likeNoticeOf(m, fan, tickClock()))
			require.ErrorIs(t, err, errInjected)
			f.notifWrite.Store(0)

			wait, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			res, err := st.Notify(wait, likeNoticeOf(m, other, tickClock()))
			require.NoError(t, err)
			assert.Equal(t, 2, res.Group.Count, "the cut notice counted once, then this one")
			assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, res.Counts)
			c, err := st.MarkNotificationsRead(wait, author, res.Group.LatestID)
			require.NoError(t, err)
			assert.Equal(t, store.NotificationCounts{Total: 1, ReadMark: res.Group.LatestID}, c)
		})
	}
}

// An operation that fails under its claim, its process alive (a write
// timed out, the connection dropped), must not hold the owner's feed for
// the claim's whole TTL: the service gives each notice 5 seconds
// (notifyTimeout), far less than the 30 s claim, so every notice to that
// owner in between would wait and fail, lost. The owner's next notice
// finishes the failed operation and counts its own within that bound.
func TestFaults_NotifyAfterFailureNotBlocked(t *testing.T) {
	ctx := context.Background()
	const notifyTimeout = 5 * time.Second // store/service's
	for _, tc := range []struct {
		name string
		step int
		mark bool
	}{{"NoticeWrite2", 2, false}, {"NoticeWrite3", 3, false}, {"NoticeWrite4", 4, false}, {"NoticeWrite5", 5, false}, {"MarkWrite2", 2, true}} {
		t.Run(tc.name, func(t *testing.T) {
			st, f := openFaulty(t)
			author, fan, other := mkUser(t, st, "author"), mkUser(t, st, "fan"), mkUser(t, st, "other")
			m, _ := mkPost(t, st, author)
			if tc.mark {
				res, err := st.Notify(ctx, likeNoticeOf(m, fan, tickClock()))
				require.NoError(t, err)
				f.notifWrite.Store(int32(tc.step))
				_, err = st.MarkNotificationsRead(ctx, author, res.Group.LatestID)
				require.ErrorIs(t, err, errInjected)
			} else {
				f.notifWrite.Store(int32(tc.step))
				_, err := st.Notify(ctx, likeNoticeOf(m, fan, tickClock()))
				require.ErrorIs(t, err, errInjected)
			}
			f.notifWrite.Store(0)

			wait, cancel := context.WithTimeout(ctx, notifyTimeout)
			defer cancel()
			res, err := st.Notify(wait, likeNoticeOf(m, other, tickClock()))
			require.NoError(t, err, "the next notice to the owner is not held up by the failed operation's claim")
			assert.Equal(t, 2, res.Group.Count, "the failed notice counted once, then this one")
			assert.Equal(t, 1, res.Counts.Total)
		})
	}
}

// A claim taken over while its holder still runs (the holder slower than
// the TTL, or its clock behind the taker's): the taker resumes the notice
// and inserts its actor first; the holder, not resuming, takes the
// duplicate for an actor counted before and releases the claim, which is
// still this notice's; the taker's count update then finds no claim and
// the feed's counts never count the group.
func TestFaults_NotifyTakenOverWhileRunning(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(mongostore.SetNotifClaimTTL(time.Millisecond))
	st, f := openFaulty(t)
	author, fan, other := mkUser(t, st, "author"), mkUser(t, st, "fan"), mkUser(t, st, "other")
	m, _ := mkPost(t, st, author)
	// The holder: group upsert, then its actor insert, held. The taker,
	// once the claim expired: the group upsert, the actor insert, then the
	// group update, held.
	holder, taker := newHold(), newHold()
	f.notifHolds = map[string]*hold{"notifactors#1": holder, "notifications#3": taker}
	wait := func(h *hold) {
		t.Helper()
		select {
		case <-h.reached:
		case <-time.After(5 * time.Second):
			require.FailNow(t, "the write was not reached")
		}
	}

	first := make(chan error, 1)
	go func() {
		_, err := st.Notify(ctx, likeNoticeOf(m, fan, tickClock()))
		first <- err
	}()
	wait(holder)
	second := make(chan error, 1)
	go func() {
		_, err := st.Notify(ctx, likeNoticeOf(m, other, tickClock()))
		second <- err
	}()
	wait(taker)
	close(holder.release)
	require.NoError(t, <-first)
	close(taker.release)
	require.NoError(t, <-second)

	counts, c, actors := feedState(t, st, author)
	assert.Equal(t, []int{2}, counts)
	assert.Equal(t, []int{2}, actors)
	assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, c, "one group, unread")
}
