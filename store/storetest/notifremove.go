package storetest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

// A block or a mute removes the actor from every group of the owner's
// feed: a group they alone made goes, the others lose them from their
// count and latest actors and keep their place, and the counts stay exact;
// another feed is untouched, a re-run changes nothing, and a later notice
// counts the actor again.
func testNotifyRemoveActor(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, x, y, z, w := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	other := mustCreateUser(t, b, c)
	ms := make([]*store.Message, 5)
	for i := range ms {
		ms[i] = storeMessage(t, b, c, author.ID)
	}
	likes := func(m *store.Message, actors ...*store.User) store.NotificationGroup {
		var g store.NotificationGroup
		for _, a := range actors {
			g = mustNotify(t, b, likeNotice(c, m, a.ID)).Group
		}
		return g
	}
	alone := likes(ms[0], x) // read below
	_, err := b.MarkNotificationsRead(ctx, author.ID, alone.LatestID)
	require.NoError(t, err)
	oldest := likes(ms[1], x, y, z, w) // x not among the latest
	newest := likes(ms[2], y, x)       // x the newest of two
	shown := likes(ms[3], y, z, w, x)  // x shown, y comes back
	aloneUnread := likes(ms[4], x)     // unread
	kept := likes(storeMessage(t, b, c, other.ID), x)
	_, before := feed(t, b, author.ID)
	require.Equal(t, 5, before.Total)
	require.Equal(t, 4, before.Unread)

	res, err := b.RemoveNotificationActor(ctx, author.ID, x.ID)
	require.NoError(t, err)
	assert.ElementsMatch(t, []store.ID{alone.ID, aloneUnread.ID}, res.Removed, "the groups x alone made")
	assert.ElementsMatch(t, []store.ID{oldest.ID, newest.ID, shown.ID}, res.Updated)
	want := store.NotificationCounts{Total: 3, Unread: 3, ReadMark: alone.LatestID}
	assert.Equal(t, want, res.Counts)

	gs, counts := feed(t, b, author.ID)
	assert.Equal(t, want, counts)
	require.Len(t, gs, 3)
	byID := map[store.ID]store.NotificationGroup{}
	for _, g := range gs {
		byID[g.ID] = g
		assert.NotContains(t, g.LatestActors, x.ID)
	}
	assert.Equal(t, []store.ID{shown.ID, newest.ID, oldest.ID}, []store.ID{gs[0].ID, gs[1].ID, gs[2].ID}, "the groups keep their places")
	assert.Equal(t, 3, byID[oldest.ID].Count)
	assert.Equal(t, []store.ID{w.ID, z.ID, y.ID}, byID[oldest.ID].LatestActors)
	assert.Equal(t, oldest.LatestID, byID[oldest.ID].LatestID)
	assert.Equal(t, 1, byID[newest.ID].Count)
	assert.Equal(t, []store.ID{y.ID}, byID[newest.ID].LatestActors)
	assert.Equal(t, newest.LatestID, byID[newest.ID].LatestID, "a group keeps its place (and cursor) when its newest actor leaves")
	assert.Equal(t, 3, byID[shown.ID].Count)
	assert.Equal(t, []store.ID{w.ID, z.ID, y.ID}, byID[shown.ID].LatestActors, "the next actor takes the freed place")
	actors, err := b.ListNotificationActors(ctx, author.ID, shown.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, actors, 3)
	for _, a := range actors {
		assert.NotEqual(t, x.ID, a.UserID)
	}
	_, err = b.FindNotificationGroup(ctx, author.ID, alone.ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a removed group is gone")

	gs, counts = feed(t, b, other.ID)
	require.Len(t, gs, 1, "another owner's feed keeps x")
	assert.Equal(t, kept.ID, gs[0].ID)
	assert.Equal(t, 1, counts.Total)

	again, err := b.RemoveNotificationActor(ctx, author.ID, x.ID)
	require.NoError(t, err)
	assert.Empty(t, again.Removed, "a re-run changes nothing")
	assert.Empty(t, again.Updated)
	assert.Equal(t, want, again.Counts)
	none, err := b.RemoveNotificationActor(ctx, author.ID, mustCreateUser(t, b, c).ID)
	require.NoError(t, err)
	assert.Equal(t, want, none.Counts, "an actor never in the feed")

	// A new activity of x (after an unmute) counts them again; the old
	// ones do not come back.
	back := mustNotify(t, b, likeNotice(c, ms[3], x.ID))
	assert.True(t, back.Changed)
	assert.Equal(t, 4, back.Group.Count)
	assert.Equal(t, []store.ID{x.ID, w.ID, z.ID}, back.Group.LatestActors)
	fresh := mustNotify(t, b, likeNotice(c, ms[0], x.ID))
	assert.NotEqual(t, alone.ID, fresh.Group.ID, "a removed group is made anew")
	_, counts = feed(t, b, author.ID)
	assert.Equal(t, store.NotificationCounts{Total: 4, Unread: 4, ReadMark: alone.LatestID}, counts)
	res, err = b.RemoveNotificationActor(ctx, author.ID, x.ID)
	require.NoError(t, err)
	assert.Equal(t, []store.ID{fresh.Group.ID}, res.Removed, "removed again after the new notices")
	assert.Equal(t, []store.ID{shown.ID}, res.Updated)
	assert.Equal(t, want, res.Counts)
}
