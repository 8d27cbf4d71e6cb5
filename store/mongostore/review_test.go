package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// Regression tests of a review of the backend's multi-step writes, each a
// crash (an injected failure) or a race at one step, then what a restarted
// fan-out does next. Every inbox must end with counts that match its
// entries.

// deliverAll runs j's delivery to owners in one chunk.
func deliverAll(t *testing.T, st *mongostore.Store, j *storage.Job, owners ...store.ID) {
	t.Helper()
	_, err := st.DeliverInbox(context.Background(), storage.Delivery{Job: j, Owners: owners, At: tickClock(), Done: true})
	require.NoError(t, err)
}

// An empty inbox marked read stores no mark; a zero mark stored by an
// older version still lets count steps match. Neither stops delivery.
func TestReview_MarkEmptyInboxThenDeliver(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	a, x, y := mkUser(t, st, "author"), mkUser(t, st, "xxx"), mkUser(t, st, "yyy")
	c, err := st.MarkInboxRead(ctx, x, storage.LayoutBuckets, store.NilID)
	require.NoError(t, err)
	require.Equal(t, store.InboxCounts{}, c)
	var raw bson.M
	require.NoError(t, st.Database().Collection("users").FindOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(x)}}).Decode(&raw))
	require.NotContains(t, raw, "ir", "a zero mark changes nothing")
	_, err = st.Database().Collection("users").UpdateOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(y)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "ir", Value: primitive.ObjectID{}}}}})
	require.NoError(t, err)

	_, j := mkPost(t, st, a)
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = st.DeliverInbox(dctx, storage.Delivery{Job: j, Owners: []store.ID{x, y}, At: tickClock(), Done: true})
	require.NoError(t, err)
	for _, o := range []store.ID{x, y} {
		c, n := inboxCounts(t, st, o)
		require.Equal(t, 1, n)
		require.Equal(t, 1, c.Total)
		require.Equal(t, 1, c.Unread)
	}
}

// A mark-read cut short changes nothing, so the user's retry with the same
// mark recounts: unread stays right, now and after the next delivery.
func TestReview_MarkReadCutShort(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	var last store.ID
	for range 3 {
		m, j := mkPost(t, st, a)
		deliverAll(t, st, j, x)
		last = m.ID
	}
	f.usersUpdate.Store(1) // the mark's write fails (the process is killed)
	_, err := st.MarkInboxRead(ctx, x, storage.LayoutBuckets, last)
	require.Error(t, err)
	c, n := inboxCounts(t, st, x)
	require.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, c, "nothing moved")
	require.Equal(t, 3, n)
	c, err = st.MarkInboxRead(ctx, x, storage.LayoutBuckets, last) // the user taps again
	require.NoError(t, err)
	require.Equal(t, 0, c.Unread)
	require.Equal(t, last, c.ReadMark)
	_, j := mkPost(t, st, a)
	deliverAll(t, st, j, x)
	c, _ = inboxCounts(t, st, x)
	require.Equal(t, store.InboxCounts{Total: 4, Unread: 1, ReadMark: last}, c)
}

// checkInbox asserts that x's bucket inbox holds as many entries as its
// counts say, all unread (no mark in these tests), and returns how many.
func checkInbox(t *testing.T, st *mongostore.Store, x store.ID) int {
	t.Helper()
	c, n := inboxCounts(t, st, x)
	require.Equal(t, n, c.Total, "total matches the entries")
	require.Equal(t, n, c.Unread, "unread matches the entries")
	return n
}

// An unfollow cut after its count step, then a follow again before it
// resumes: the Service finishes the unfollow (followed again), which must
// remove what it counted out, before the follow's backfill brings it back.
func TestReview_UnfollowCountedThenFollowAgain(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	_, err := st.Follow(ctx, x, a, tickClock())
	require.NoError(t, err)
	for range 2 {
		_, j := mkPost(t, st, a)
		deliverAll(t, st, j, x)
	}
	_, err = st.Unfollow(ctx, x, a)
	require.NoError(t, err)
	u := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobUnfollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: a}
	require.NoError(t, st.StoreJob(ctx, u))
	f.bucketsBulk.Store(1)
	_, err = st.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: u})
	require.ErrorIs(t, err, errInjected)

	fj := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobFollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: a}
	require.NoError(t, st.StoreJob(ctx, fj))
	_, err = st.Follow(ctx, x, a, tickClock())
	require.NoError(t, err)
	require.NoError(t, st.FinishJob(ctx, u)) // followed again since
	require.Equal(t, 0, checkInbox(t, st, x))
	out, err := st.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{a}, Range: store.Forward(store.NilID, 50)})
	require.NoError(t, err)
	var es []store.InboxEntry
	for _, e := range out {
		es = append(es, e.InboxEntry)
	}
	_, err = st.InsertInbox(ctx, storage.Insertion{Job: fj, Entries: es, At: tickClock()})
	require.NoError(t, err)
	require.Equal(t, 2, checkInbox(t, st, x))
}

// A follow's backfill cut after its count step, then an unfollow before it
// resumes: the Service finishes the follow (not followed any more), which
// must write what it counted, so the unfollow removes it with its counts.
func TestReview_FollowCountedThenUnfollow(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	var es []store.InboxEntry
	for range 3 {
		m := message(t, st, a, tickClock())
		es = append(es, store.InboxEntry{MessageID: m.ID, AuthorID: a, CreatedAt: m.CreatedAt})
	}
	fj := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobFollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: a}
	require.NoError(t, st.StoreJob(ctx, fj))
	_, err := st.Follow(ctx, x, a, tickClock())
	require.NoError(t, err)
	f.bucketsBulk.Store(1)
	_, err = st.InsertInbox(ctx, storage.Insertion{Job: fj, Entries: es, At: tickClock()})
	require.ErrorIs(t, err, errInjected)

	u := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobUnfollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: a}
	require.NoError(t, st.StoreJob(ctx, u))
	_, err = st.Unfollow(ctx, x, a)
	require.NoError(t, err)
	require.NoError(t, st.FinishJob(ctx, fj)) // not followed any more
	require.Equal(t, 3, checkInbox(t, st, x))
	refs, _, err := st.FindDeliveries(ctx, es[0].MessageID, nil, 10)
	require.NoError(t, err)
	require.Len(t, refs, 1, "the written entries are recorded")
	_, err = st.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: u})
	require.NoError(t, err)
	require.Equal(t, 0, checkInbox(t, st, x))
}

// deleteAndRetract deletes m with its retraction job, then runs the pending
// retractions to their end.
func deleteAndRetract(t *testing.T, st *mongostore.Store, m *store.Message) {
	t.Helper()
	require.NoError(t, st.DeleteMessage(context.Background(), m.ID, retractJob(m)))
	runRetractions(t, st)
}

// runRetractions runs the pending jobs (retractions) to their end, as a
// restarted fan-out would.
func runRetractions(t *testing.T, st *mongostore.Store) {
	t.Helper()
	ctx := context.Background()
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	for _, j := range pending {
		require.Equal(t, storage.JobRetract, j.Kind)
		for done := false; !done; {
			refs, next, err := st.FindDeliveries(ctx, j.MessageID, j.Cursor, 1000)
			require.NoError(t, err)
			done = next == nil
			_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: j, Refs: refs, Cursor: next, Done: done})
			require.NoError(t, err)
			j.Cursor = next
		}
	}
}

// A delivery chunk cut after its count step, then the message deleted
// before it resumes: the retraction takes back what the chunk counted,
// though it wrote no entry and no record.
func TestReview_DeliverCountedThenDeleted(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x, y := mkUser(t, st, "author"), mkUser(t, st, "xxx"), mkUser(t, st, "yyy")
	m, j := mkPost(t, st, a)
	f.bucketsBulk.Store(1)
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j, Owners: []store.ID{x, y}, At: tickClock(), Done: true})
	require.ErrorIs(t, err, errInjected)
	deleteAndRetract(t, st, m)
	for _, o := range []store.ID{x, y} {
		require.Equal(t, 0, checkInbox(t, st, o))
	}
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	require.Empty(t, pending)
}

// A delivery chunk cut after its count step, then a counted owner
// unfollows and a new follower appears inside the chunk's range before it
// resumes: the repeat delivers to the owners it planned (the one who left
// too: the unfollow removes it after) and to the newcomer, records them
// all, and a retraction then finds every one of them.
func TestReview_DeliverCountedThenFollowersChange(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x, fo, z := mkUser(t, st, "author"), mkUser(t, st, "xxx"), mkUser(t, st, "fff"), mkUser(t, st, "zzz")
	for _, o := range []store.ID{x, z} {
		_, err := st.Follow(ctx, o, a, tickClock())
		require.NoError(t, err)
	}
	m, j := mkPost(t, st, a)
	f.bucketsBulk.Store(1)
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j, Owners: []store.ID{x, z}, At: tickClock(), Done: true})
	require.ErrorIs(t, err, errInjected)

	u := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobUnfollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: a}
	require.NoError(t, st.StoreJob(ctx, u))
	_, err = st.Unfollow(ctx, x, a)
	require.NoError(t, err)
	_, err = st.Follow(ctx, fo, a, tickClock())
	require.NoError(t, err)

	// The restart: the delivery first, its followers listed again.
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	require.Equal(t, j.ID, pending[0].ID, "the delivery cut short first")
	fs, err := st.ListFollowers(ctx, a, store.Forward(store.NilID, 1000))
	require.NoError(t, err)
	require.Equal(t, []store.ID{fo, z}, fs)
	deliverAll(t, st, j, fs...)
	for _, o := range []store.ID{x, fo, z} {
		require.Equal(t, 1, checkInbox(t, st, o))
	}
	refs, _, err := st.FindDeliveries(ctx, m.ID, nil, 10)
	require.NoError(t, err)
	require.Len(t, refs, 3)
	_, err = st.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: u})
	require.NoError(t, err)
	require.Equal(t, 0, checkInbox(t, st, x))

	deleteAndRetract(t, st, m)
	for _, o := range []store.ID{x, fo, z} {
		require.Equal(t, 0, checkInbox(t, st, o))
	}
}

// The last chunk cut between its record and the job's advance, then a new
// follower inside the chunk's range: the repeat adds the newcomer to the
// chunk's record rather than losing it to a duplicate, so the retraction
// reaches them.
func TestReview_DeliverRecordedThenNewFollower(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x, fo, z := mkUser(t, st, "author"), mkUser(t, st, "xxx"), mkUser(t, st, "fff"), mkUser(t, st, "zzz")
	for _, o := range []store.ID{x, z} {
		_, err := st.Follow(ctx, o, a, tickClock())
		require.NoError(t, err)
	}
	m, j := mkPost(t, st, a)
	f.msgsSkip.Store(1)   // the plan is stored,
	f.msgsUpdate.Store(1) // the advance fails
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j, Owners: []store.ID{x, z}, At: tickClock(), Done: true})
	require.ErrorIs(t, err, errInjected)
	_, err = st.Follow(ctx, fo, a, tickClock())
	require.NoError(t, err)
	fs, err := st.ListFollowers(ctx, a, store.Forward(store.NilID, 1000))
	require.NoError(t, err)
	deliverAll(t, st, j, fs...)
	for _, o := range []store.ID{x, fo, z} {
		require.Equal(t, 1, checkInbox(t, st, o))
	}
	deleteAndRetract(t, st, m)
	for _, o := range []store.ID{x, fo, z} {
		require.Equal(t, 0, checkInbox(t, st, o))
	}
}

// A page read between an unfollow's count step and its removal leaves out
// the entries the counts no longer have, and is still full.
func TestReview_PageDuringUnfollow(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, b, x := mkUser(t, st, "author"), mkUser(t, st, "bbb"), mkUser(t, st, "xxx")
	for _, au := range []store.ID{a, b} {
		_, err := st.Follow(ctx, x, au, tickClock())
		require.NoError(t, err)
		for range 2 {
			_, j := mkPost(t, st, au)
			deliverAll(t, st, j, x)
		}
	}
	_, err := st.Unfollow(ctx, x, b)
	require.NoError(t, err)
	u := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobUnfollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: b}
	require.NoError(t, st.StoreJob(ctx, u))
	f.bucketsBulk.Store(1) // stands for the window between the count step and the removal
	_, err = st.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: u})
	require.ErrorIs(t, err, errInjected)
	require.Equal(t, 2, checkInbox(t, st, x))
	items, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: x, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 2)})
	require.NoError(t, err)
	require.Len(t, items, 2)
	for _, it := range items {
		require.Equal(t, a, it.AuthorID)
	}
}

// Every write of a message document on the fan-out path names the author,
// the shard key's prefix: on a sharded cluster none asks every shard, and
// findAndModify works before MongoDB 7.0.
func TestReview_MessageWritesNameTheShardKey(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	m1, j1 := mkPost(t, st, a)
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j1, Owners: []store.ID{x}, At: tickClock(), Cursor: x[:]})
	require.NoError(t, err)
	j1.Cursor = x[:]
	deliverAll(t, st, j1)
	text := "edited"
	_, err = st.UpdateMessage(ctx, m1.ID, storage.MessageUpdate{Text: &text})
	require.NoError(t, err)
	deleteAndRetract(t, st, m1)
	m2, j2 := mkPost(t, st, a)
	require.NoError(t, st.FinishJob(ctx, j2))
	require.NoError(t, st.DeleteMessage(ctx, m2.ID, nil))
	require.Zero(t, f.unkeyed.Load())
}

// A message no job delivers (strategy read, a pulled post) is counted and,
// deleted, uncounted, leaving no pending-operation marker on its author:
// otherwise every deletion would grow the user's document for good.
func TestReview_JoblessDeleteLeavesNoMarker(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	a := mkUser(t, st, "author")
	for i := range 3 {
		now := tickClock()
		m := &store.Message{ID: store.NewID(now), AuthorID: a, Text: "x", Kind: store.KindPost, CreatedAt: now, Pulled: i%2 == 0}
		require.NoError(t, st.CreateMessage(ctx, m, nil))
		require.NoError(t, st.DeleteMessage(ctx, m.ID, nil))
	}
	u, err := st.FindUserByID(ctx, a)
	require.NoError(t, err)
	require.Zero(t, u.MessageCount)
	require.Zero(t, u.PulledCount)
	var raw bson.M
	require.NoError(t, st.Database().Collection("users").FindOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(a)}}).Decode(&raw))
	if po, ok := raw["po"]; ok {
		require.Empty(t, po, "pending-operation markers left behind")
	}
}
