package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"

	"herald/store"
	"herald/store/mongostore"
)

// A removal of an actor (a block or a mute) whose process dies at each of
// its writes leaves every group old or new with counts that agree: the
// owner's next notice finishes the group under way, and a re-run (the
// durable job's) finishes the rest, exactly once; a third run changes
// nothing.
func TestFaults_RemoveActorRetried(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(mongostore.SetNotifClaimTTL(50 * time.Millisecond))
	// Writes: claim, plan, group, actor, head and next plan, group, actor,
	// head and release.
	for step := 1; step <= 8; step++ {
		t.Run(fmt.Sprintf("Write%d", step), func(t *testing.T) {
			st, f := openFaulty(t)
			author, x, y, z := mkUser(t, st, "author"), mkUser(t, st, "x"), mkUser(t, st, "y"), mkUser(t, st, "z")
			m1, _ := mkPost(t, st, author)
			m2, _ := mkPost(t, st, author)
			m3, _ := mkPost(t, st, author)
			for _, n := range []struct {
				m     *store.Message
				actor store.ID
			}{{m1, x}, {m2, y}, {m2, x}} {
				_, err := st.Notify(ctx, likeNoticeOf(n.m, n.actor, tickClock()))
				require.NoError(t, err)
			}

			f.notifWrite.Store(int32(step))
			_, err := st.RemoveNotificationActor(ctx, author, x)
			require.ErrorIs(t, err, errInjected)
			f.notifWrite.Store(0)

			// The owner's next notice finishes the group under way first.
			wait, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err = st.Notify(wait, likeNoticeOf(m3, z, tickClock()))
			require.NoError(t, err)
			gs, c, err := st.ReadNotifications(ctx, author, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			assert.Equal(t, len(gs), c.Total, "the total agrees with the groups")
			assert.Equal(t, len(gs), c.Unread, "all unread")

			res, err := st.RemoveNotificationActor(wait, author, x)
			require.NoError(t, err)
			assert.Equal(t, store.NotificationCounts{Total: 2, Unread: 2}, res.Counts)
			counts, c, actors := feedState(t, st, author)
			assert.Equal(t, []int{1, 1}, counts, "z's group, then y's without x")
			assert.Equal(t, []int{1, 1}, actors)
			assert.Equal(t, store.NotificationCounts{Total: 2, Unread: 2}, c)
			gs, _, err = st.ReadNotifications(ctx, author, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			require.Len(t, gs, 2)
			assert.Equal(t, []store.ID{y}, gs[1].LatestActors)

			res, err = st.RemoveNotificationActor(wait, author, x)
			require.NoError(t, err)
			assert.Empty(t, res.Removed)
			assert.Empty(t, res.Updated)
			assert.Equal(t, store.NotificationCounts{Total: 2, Unread: 2}, res.Counts)
		})
	}
}

// An actor in more groups than one find reads: the removal goes on batch
// after batch, under a claim taken again for each, and finds them all.
func TestRemoveActor_Batches(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(mongostore.SetRemoveActorBatch(2))
	st, _ := openFaulty(t)
	author, x, y := mkUser(t, st, "author"), mkUser(t, st, "x"), mkUser(t, st, "y")
	for i := range 5 {
		m, _ := mkPost(t, st, author)
		if i%2 == 0 {
			_, err := st.Notify(ctx, likeNoticeOf(m, y, tickClock()))
			require.NoError(t, err)
		}
		_, err := st.Notify(ctx, likeNoticeOf(m, x, tickClock()))
		require.NoError(t, err)
	}
	res, err := st.RemoveNotificationActor(ctx, author, x)
	require.NoError(t, err)
	assert.Len(t, res.Removed, 2)
	assert.Len(t, res.Updated, 3)
	assert.Equal(t, store.NotificationCounts{Total: 3, Unread: 3}, res.Counts)
	counts, c, actors := feedState(t, st, author)
	assert.Equal(t, []int{1, 1, 1}, counts)
	assert.Equal(t, []int{1, 1, 1}, actors)
	assert.Equal(t, res.Counts, c)
}

// A removal of many groups may take longer than a claim lives: it renews
// its claim with each group, so that a notice to the owner meanwhile waits
// for it rather than taking the claim over under it, and both count.
func TestRemoveActor_LongerThanClaim(t *testing.T) {
	ctx := context.Background()
	t.Cleanup(mongostore.SetNotifClaimTTL(60 * time.Millisecond))
	st, f := openFaulty(t)
	author, x, y, z := mkUser(t, st, "author"), mkUser(t, st, "x"), mkUser(t, st, "y"), mkUser(t, st, "z")
	var last *store.Message
	for range 3 {
		m, _ := mkPost(t, st, author)
		for _, a := range []store.ID{y, x} {
			_, err := st.Notify(ctx, likeNoticeOf(m, a, tickClock()))
			require.NoError(t, err)
		}
		last = m
	}
	// Each of the removal's three group writes is held 40 ms: 120 ms in
	// all, twice the claim's life, each step well within it.
	f.notifMu.Lock()
	f.notifSeen = nil
	f.notifMu.Unlock()
	holds := []*hold{newHold(), newHold(), newHold()}
	f.notifHolds = map[string]*hold{"notifications#1": holds[0], "notifications#2": holds[1], "notifications#3": holds[2]}
	notified := make(chan error, 1)
	go func() {
		for i, h := range holds {
			select {
			case <-h.reached:
			case <-time.After(5 * time.Second):
			}
			if i == 0 {
				go func() {
					_, err := st.Notify(ctx, likeNoticeOf(last, z, tickClock()))
					notified <- err
				}()
			}
			time.Sleep(40 * time.Millisecond)
			close(h.release)
		}
	}()
	res, err := st.RemoveNotificationActor(ctx, author, x)
	require.NoError(t, err, "the removal kept its claim")
	assert.Len(t, res.Updated, 3)
	select {
	case err := <-notified:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the notice never finished")
	}
	counts, c, actors := feedState(t, st, author)
	assert.Equal(t, []int{2, 1, 1}, counts, "z joined the last group after the removal; x left each")
	assert.Equal(t, []int{2, 1, 1}, actors)
	assert.Equal(t, store.NotificationCounts{Total: 3, Unread: 3}, c)
}

// The bytes a removal under way adds to the owner's head: its plan, there
// only while the removal runs (here, left by a removal cut short).
func TestBytes_RemovalPlan(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	author, x, y, z, w := mkUser(t, st, "author"), mkUser(t, st, "x"), mkUser(t, st, "y"), mkUser(t, st, "z"), mkUser(t, st, "w")
	m, _ := mkPost(t, st, author)
	for _, a := range []store.ID{x, y, z, w} {
		_, err := st.Notify(ctx, likeNoticeOf(m, a, tickClock()))
		require.NoError(t, err)
	}
	head := func() bson.Raw {
		var r bson.Raw
		require.NoError(t, st.Database().Collection("notifheads").FindOne(ctx, bson.D{}).Decode(&r))
		return r
	}
	idle := len(head())
	f.notifWrite.Store(3) // the group's write, after the plan
	_, err := st.RemoveNotificationActor(ctx, author, w)
	require.ErrorIs(t, err, errInjected)
	f.notifWrite.Store(0)
	planned := head()
	require.NotNil(t, planned.Lookup("np", "nq").Value, "the plan is in the claim")
	t.Logf("notifications head: %d bytes idle, %d with a removal's plan (3 latest actors)", idle, len(planned))
	assert.Less(t, len(planned)-idle, 250, "a plan is a group's id, key, count and latest actors, and an actor's id")
}
