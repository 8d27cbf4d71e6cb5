package mongostore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/storage"
)

// A JobHideReposts's chunk whose process dies after its count step,
// before the entries are removed, then runs again: the entries go, the
// counts are taken down once (the re-run finds the stored plan), and the
// job advances; a third run of the chunk changes nothing.
func TestFaults_HideChunkRetried(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, owner := mkUser(t, st, "author"), mkUser(t, st, "owner")
	var ms []*store.Message
	for range 3 {
		m, j := mkPost(t, st, a)
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j, Owners: []store.ID{owner}, At: tickClock(), Done: true})
		require.NoError(t, err)
		ms = append(ms, m)
	}
	job := &storage.Job{ID: store.NewID(tickClock()), Kind: storage.JobHideReposts, Layout: storage.LayoutBuckets, OwnerID: owner, AuthorID: a}
	require.NoError(t, st.StoreJob(ctx, job))
	r := storage.OwnerRemoval{Job: job, MessageIDs: []store.ID{ms[2].ID, ms[0].ID}, Cursor: ms[1].ID[:]}
	read := func() ([]store.ID, store.InboxCounts) {
		items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 10)})
		require.NoError(t, err)
		var ids []store.ID
		for _, it := range items {
			ids = append(ids, it.MessageID)
		}
		return ids, counts
	}

	f.bucketsBulk.Store(1) // the removal of the planned entries
	_, err := st.RemoveOwnerEntries(ctx, r)
	require.ErrorIs(t, err, errInjected)
	ids, counts := read()
	assert.Equal(t, []store.ID{ms[1].ID}, ids, "a read leaves out the entries of a removal plan not yet written")
	assert.Equal(t, 1, counts.Total, "counted down by the count step")
	n, err := st.Database().Collection("buckets").CountDocuments(ctx, bson.D{{Key: "e.m", Value: primitive.ObjectID(ms[0].ID)}})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "the entry is still stored")

	changes, err := st.RemoveOwnerEntries(ctx, r)
	require.NoError(t, err)
	assert.Len(t, changes, 2, "the stored plan")
	n, err = st.Database().Collection("buckets").CountDocuments(ctx, bson.D{{Key: "e.m", Value: primitive.ObjectID(ms[0].ID)}})
	require.NoError(t, err)
	assert.Zero(t, n, "removed")
	ids, counts = read()
	assert.Equal(t, []store.ID{ms[1].ID}, ids)
	assert.Equal(t, 1, counts.Total, "counted once")
	assert.Equal(t, 1, counts.Unread)
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, []byte(ms[1].ID[:]), pending[0].Cursor, "advanced")

	changes, err = st.RemoveOwnerEntries(ctx, r)
	require.NoError(t, err)
	assert.Empty(t, changes, "applied already")
	_, counts = read()
	assert.Equal(t, 1, counts.Total)
}
