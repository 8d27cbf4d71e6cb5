package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// testDeliverGroup stores the chunks of five delivery jobs in one
// DeliverInboxes: one whose job is gone (its message deleted), one at a
// cursor the stored job has moved past, one that leaves its job half done,
// and two that end theirs. Each applies as DeliverInbox would, a chunk
// counting on top of the chunks before it.
func testDeliverGroup(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	var authors [5]store.ID
	for i := range authors {
		authors[i] = mustCreateUser(t, b, c).ID
	}
	o1, o2, o3 := mustCreateUser(t, b, c).ID, mustCreateUser(t, b, c).ID, mustCreateUser(t, b, c).ID
	var ms [5]*store.Message
	var jobs [5]*storage.Job
	for i, a := range authors {
		ms[i] = newMessage(c, a, "hi")
		jobs[i] = newDeliverJob(ms[i], l)
		require.NoError(t, b.CreateMessage(ctx, ms[i], jobs[i]))
	}
	require.NoError(t, b.DeleteMessage(ctx, ms[1].ID, nil))
	// ms[2]'s first chunk is stored already: the group's is a stale retry.
	_, err := b.DeliverInbox(ctx, storage.Delivery{Job: jobs[2], Owners: []store.ID{o1}, At: c.Now(), Cursor: o1[:]})
	require.NoError(t, err)

	at := c.Now()
	ds := []storage.Delivery{
		{Job: jobs[0], Owners: []store.ID{o1, o2}, At: at, Done: true},
		{Job: jobs[1], Owners: []store.ID{o1, o2, o3}, At: at, Done: true},
		{Job: jobs[2], Owners: []store.ID{o1}, At: at, Cursor: o1[:]},
		{Job: jobs[3], Owners: []store.ID{o1, o3}, At: at, Cursor: o3[:]},
		{Job: jobs[4], Owners: []store.ID{o1, o2, o3}, At: at, Done: true},
	}
	r, err := storage.DeliverInboxes(ctx, b, ds)
	require.NoError(t, err)
	require.Len(t, r, len(ds))

	counts := func(changes []storage.InboxChange) map[store.ID]int {
		out := map[store.ID]int{}
		for _, ch := range changes {
			assert.Equal(t, ch.Counts.Total, ch.Counts.Unread)
			out[ch.Owner] = ch.Counts.Total
		}
		return out
	}
	for i, d := range r {
		if i != 1 {
			assert.NoError(t, d.Err, "chunk %d", i)
		}
	}
	assert.Equal(t, map[store.ID]int{o1: 2, o2: 1}, counts(r[0].Changes), "o1 had ms[2] already")
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(r[1].Err), "the gone job is reported")
	assert.Empty(t, r[1].Changes)
	assert.Empty(t, r[2].Changes, "a chunk applied before changes nothing")
	assert.Equal(t, map[store.ID]int{o1: 3, o3: 1}, counts(r[3].Changes), "counts follow the chunks before")
	assert.Equal(t, map[store.ID]int{o1: 4, o2: 2, o3: 2}, counts(r[4].Changes))

	for owner, want := range map[store.ID][]*store.Message{
		o1: {ms[0], ms[2], ms[3], ms[4]},
		o2: {ms[0], ms[4]},
		o3: {ms[3], ms[4]},
	} {
		ids, cs := inboxOf(t, b, owner, l)
		assert.ElementsMatch(t, idsOf(want...), ids)
		assert.Equal(t, store.InboxCounts{Total: len(want), Unread: len(want)}, cs)
	}
	for m, want := range map[*store.Message][]store.ID{ms[0]: {o1, o2}, ms[1]: nil, ms[3]: {o1, o3}, ms[4]: {o1, o2, o3}} {
		refs, next, err := b.FindDeliveries(ctx, m.ID, nil, 10)
		require.NoError(t, err)
		assert.Nil(t, next)
		var owners []store.ID
		for _, ref := range refs {
			owners = append(owners, ref.Owner)
		}
		assert.ElementsMatch(t, want, owners, "the delivery records of %s", m.Text)
	}

	pending, err := b.PendingJobs(ctx)
	require.NoError(t, err)
	cursors := map[store.ID][]byte{}
	for _, j := range pending {
		cursors[j.ID] = j.Cursor
	}
	assert.Equal(t, map[store.ID][]byte{jobs[2].ID: o1[:], jobs[3].ID: o3[:]}, cursors, "the ended jobs are gone, the others at their cursors")
}
