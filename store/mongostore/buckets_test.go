package mongostore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// The bucket layout's placement (schema.go, collBuckets): buckets keyed by
// their first message, filled to 50 in order, older entries in their
// covering bucket, pages exact after out-of-order arrivals.

// message stores a message by author made at t, without a job.
func message(t *testing.T, st *mongostore.Store, author store.ID, at time.Time) *store.Message {
	m := &store.Message{ID: store.NewID(at), AuthorID: author, Text: "m", Kind: store.KindPost, CreatedAt: at}
	require.NoError(t, st.CreateMessage(context.Background(), m, nil))
	return m
}

// deliverTo delivers m to owner in the bucket layout, in one chunk.
func deliverTo(t *testing.T, st *mongostore.Store, m *store.Message, owner store.ID) {
	ctx := context.Background()
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
	// Stored as a post with a job would be: the job rides in the message.
	_, err := st.Database().Collection("messages").UpdateOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(m.ID)}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "j", Value: bson.D{{Key: "k", Value: int32(storage.JobDeliver)}, {Key: "l", Value: int32(storage.LayoutBuckets)}}}}}})
	require.NoError(t, err)
	_, err = st.DeliverInbox(ctx, storage.Delivery{Job: j, Owners: []store.ID{owner}, At: tickClock(), Done: true})
	require.NoError(t, err)
}

type bucketRow struct {
	Key     primitive.ObjectID `bson:"k"`
	Entries []struct {
		Message primitive.ObjectID `bson:"m"`
	} `bson:"e"`
}

func bucketsOf(t *testing.T, st *mongostore.Store, owner store.ID) []bucketRow {
	cur, err := st.Database().Collection("buckets").Find(context.Background(), bson.D{{Key: "o", Value: primitive.ObjectID(owner)}})
	require.NoError(t, err)
	var bs []bucketRow
	require.NoError(t, cur.All(context.Background(), &bs))
	slices.SortFunc(bs, func(a, b bucketRow) int { return store.ID(a.Key).Compare(store.ID(b.Key)) })
	return bs
}

// checkInvariant asserts that every entry of a bucket is at or above its
// key and below the next bucket's.
func checkInvariant(t *testing.T, bs []bucketRow) {
	for i, b := range bs {
		for _, e := range b.Entries {
			assert.GreaterOrEqual(t, store.ID(e.Message).Compare(store.ID(b.Key)), 0, "entry below its bucket's key")
			if i+1 < len(bs) {
				assert.Less(t, store.ID(e.Message).Compare(store.ID(bs[i+1].Key)), 0, "entry at or above the next bucket's key")
			}
		}
	}
}

func pages(t *testing.T, st *mongostore.Store, owner store.ID, size int) []store.ID {
	var all []store.ID
	before := store.NilID
	for {
		items, _, err := st.ReadInbox(context.Background(), storage.InboxFilter{Owner: owner, Layout: storage.LayoutBuckets, Range: store.Forward(before, size)})
		require.NoError(t, err)
		for _, it := range items {
			all = append(all, it.MessageID)
		}
		if len(items) < size {
			return all
		}
		before = items[len(items)-1].MessageID
	}
}

func TestBuckets_Placement(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	base := tickClock()
	var want []store.ID
	// Messages made before the deliveries, some held back to arrive late.
	var late, backfill []*store.Message
	// IDs only increase within a process: the oldest messages come first.
	for i := range 3 {
		m := message(t, st, a, base.Add(time.Duration(i)*time.Minute))
		backfill = append(backfill, m)
		want = append(want, m.ID)
	}
	for i := range 120 {
		m := message(t, st, a, base.Add(time.Duration(10+i)*time.Minute))
		want = append(want, m.ID)
		switch {
		case i == 30 || i == 75:
			late = append(late, m) // clock skew: delivered after newer ones
		default:
			deliverTo(t, st, m, x)
		}
	}
	bs := bucketsOf(t, st, x)
	require.Len(t, bs, 3)
	assert.Equal(t, []int{50, 50, 18}, []int{len(bs[0].Entries), len(bs[1].Entries), len(bs[2].Entries)}, "filled to 50 in order")
	for _, m := range late {
		deliverTo(t, st, m, x)
	}
	// A backfill of messages older than every bucket.
	follow := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobFollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: a}
	require.NoError(t, st.StoreJob(ctx, follow))
	var es []store.InboxEntry
	for _, m := range backfill {
		es = append(es, store.InboxEntry{MessageID: m.ID, AuthorID: a, CreatedAt: m.CreatedAt})
	}
	changes, err := st.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: es, At: tickClock()})
	require.NoError(t, err)
	require.Len(t, changes, 3)

	bs = bucketsOf(t, st, x)
	checkInvariant(t, bs)
	require.Len(t, bs, 4, "the backfill starts a bucket of its own")
	assert.Equal(t, []int{3, 51, 51, 18}, []int{len(bs[0].Entries), len(bs[1].Entries), len(bs[2].Entries), len(bs[3].Entries)},
		"late entries join their covering bucket, past 50")

	slices.SortFunc(want, func(a, b store.ID) int { return b.Compare(a) })
	for _, size := range []int{1, 7, 50, 200} {
		assert.Equal(t, want, pages(t, st, x, size), "pages of %d", size)
	}
	_, c, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: x, Layout: storage.LayoutBuckets})
	require.NoError(t, err)
	assert.Equal(t, len(want), c.Total)
	assert.Equal(t, len(want), c.Unread)

	// The mark in the middle of a bucket: unread counts the entries above.
	c, err = st.MarkInboxRead(ctx, x, storage.LayoutBuckets, want[60])
	require.NoError(t, err)
	assert.Equal(t, 60, c.Unread)
}

// A follow's insertion killed after its count step: run again, it writes
// what it counted, once; a mark-read in between counts the pending entries
// as they will be.
func TestFaults_InsertInboxInterrupted(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, b, x := mkUser(t, st, "aaa"), mkUser(t, st, "bbb"), mkUser(t, st, "xxx")
	base := tickClock()
	var delivered, backfill []*store.Message
	for i := range 4 {
		m := message(t, st, a, base.Add(time.Duration(2*i+1)*time.Minute))
		deliverTo(t, st, m, x)
		delivered = append(delivered, m)
		backfill = append(backfill, message(t, st, b, base.Add(time.Duration(2*i+2)*time.Minute)))
	}
	follow := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobFollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: b}
	require.NoError(t, st.StoreJob(ctx, follow))
	var es []store.InboxEntry
	for _, m := range backfill {
		es = append(es, store.InboxEntry{MessageID: m.ID, AuthorID: b, CreatedAt: m.CreatedAt})
	}
	f.bucketsBulk.Store(1)
	_, err := st.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: es, At: tickClock()})
	require.ErrorIs(t, err, errInjected)

	// Counted, not yet written: a mark between the entries.
	c, err := st.MarkInboxRead(ctx, x, storage.LayoutBuckets, delivered[1].ID)
	require.NoError(t, err)
	assert.Equal(t, store.InboxCounts{Total: 8, Unread: 5, ReadMark: delivered[1].ID}, c)

	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, follow.ID, pending[0].ID, "the interrupted job is still stored")
	changes, err := st.InsertInbox(ctx, storage.Insertion{Job: pending[0], Entries: es[:2], At: tickClock()})
	require.NoError(t, err)
	assert.Len(t, changes, 4, "the stored plan, not the entries of the repeat")
	items, c, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: x, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 20)})
	require.NoError(t, err)
	assert.Len(t, items, 8)
	assert.Equal(t, store.InboxCounts{Total: 8, Unread: 5, ReadMark: delivered[1].ID}, c)
	checkInvariant(t, bucketsOf(t, st, x))

	// The retraction finds the inserted entry through its record.
	m := backfill[3]
	r := retractJob(m)
	require.NoError(t, st.DeleteMessage(ctx, m.ID, r))
	refs, next, err := st.FindDeliveries(ctx, m.ID, nil, 10)
	require.NoError(t, err)
	require.Len(t, refs, 1)
	_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: r, Refs: refs, Cursor: next, Done: next == nil})
	require.NoError(t, err)
	items, c, err = st.ReadInbox(ctx, storage.InboxFilter{Owner: x, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 20)})
	require.NoError(t, err)
	assert.Len(t, items, 7)
	assert.Equal(t, store.InboxCounts{Total: 7, Unread: 4, ReadMark: delivered[1].ID}, c)

	// An unfollow interrupted after its count step, run again.
	unfollow := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobUnfollow, Layout: storage.LayoutBuckets, OwnerID: x, AuthorID: b}
	require.NoError(t, st.StoreJob(ctx, unfollow))
	f.bucketsBulk.Store(1)
	_, err = st.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
	require.ErrorIs(t, err, errInjected)
	changes, err = st.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
	require.NoError(t, err)
	assert.Len(t, changes, 3)
	items, c, err = st.ReadInbox(ctx, storage.InboxFilter{Owner: x, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 20)})
	require.NoError(t, err)
	assert.Len(t, items, 4)
	assert.Equal(t, store.InboxCounts{Total: 4, Unread: 2, ReadMark: delivered[1].ID}, c)
}
