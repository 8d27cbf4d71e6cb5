package storetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testNotifications(t *testing.T, open OpenFunc) {
	t.Run("Grouping", func(t *testing.T) { testNotifyGrouping(t, open) })
	t.Run("MoveToTop", func(t *testing.T) { testNotifyMoveToTop(t, open) })
	t.Run("ReadMark", func(t *testing.T) { testNotifyReadMark(t, open) })
	t.Run("Paging", func(t *testing.T) { testNotifyPaging(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testNotifyConcurrent(t, open) })
}

// like is a LIKED notice of m to its author by actor at the clock's time.
func likeNotice(c *clock, m *store.Message, actor store.ID) storage.Notice {
	at := c.Now()
	return storage.Notice{Owner: m.AuthorID, Kind: store.NotifyLiked, Key: store.NotificationGroupKey(store.NotifyLiked, m.ID, at), Actor: actor, Message: m.Key(), ID: store.NewID(at)}
}

func mustNotify(t *testing.T, b storage.Backend, n storage.Notice) storage.NotifyResult {
	t.Helper()
	res, err := b.Notify(ctx, n)
	require.NoError(t, err)
	return res
}

// feed reads owner's whole feed (up to 100 groups).
func feed(t *testing.T, b storage.Backend, owner store.ID) ([]store.NotificationGroup, store.NotificationCounts) {
	t.Helper()
	gs, c, err := b.ReadNotifications(ctx, owner, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	return gs, c
}

func testNotifyGrouping(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, x, y, z := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)

	gs, counts := feed(t, b, author.ID)
	assert.Empty(t, gs)
	assert.Equal(t, store.NotificationCounts{}, counts, "a feed never notified is empty, not missing")

	first := mustNotify(t, b, likeNotice(c, m, x.ID))
	assert.True(t, first.Changed)
	assert.Equal(t, 1, first.Group.Count)
	assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, first.Counts)
	mustNotify(t, b, likeNotice(c, m, y.ID))
	last := mustNotify(t, b, likeNotice(c, m, z.ID))
	again := mustNotify(t, b, likeNotice(c, m, x.ID))
	assert.False(t, again.Changed, "an actor already in the group changes nothing")
	assert.Equal(t, last.Group, again.Group)

	gs, counts = feed(t, b, author.ID)
	require.Len(t, gs, 1, "likes of one message in one slot are one group")
	g := gs[0]
	assert.Equal(t, first.Group.ID, g.ID, "the group keeps its ID")
	assert.Equal(t, store.NotifyLiked, g.Kind)
	assert.Equal(t, m.ID, g.Message.ID)
	assert.Equal(t, 3, g.Count)
	assert.Equal(t, []store.ID{z.ID, y.ID, x.ID}, g.LatestActors, "newest first")
	assert.Equal(t, last.Group.LatestID, g.LatestID, "the repeat did not move the group")
	assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, counts)

	found, err := b.FindNotificationGroup(ctx, author.ID, g.ID)
	require.NoError(t, err)
	assert.Equal(t, g, *found)
	_, err = b.FindNotificationGroup(ctx, x.ID, g.ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "another user's group is not found")

	actors, err := b.ListNotificationActors(ctx, author.ID, g.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, actors, 3)
	assert.Equal(t, []store.ID{z.ID, y.ID, x.ID}, []store.ID{actors[0].UserID, actors[1].UserID, actors[2].UserID})
	older, err := b.ListNotificationActors(ctx, author.ID, g.ID, store.Forward(actors[0].ID, 10))
	require.NoError(t, err)
	assert.Len(t, older, 2)
	newer, err := b.ListNotificationActors(ctx, author.ID, g.ID, store.Backward(actors[2].ID, 1))
	require.NoError(t, err)
	require.Len(t, newer, 1)
	assert.Equal(t, y.ID, newer[0].UserID, "backward, nearest first")

	// Another slot, another message, another kind: other groups.
	later := likeNotice(c, m, x.ID)
	later.Key = store.NotificationGroupKey(store.NotifyLiked, m.ID, c.Now().Add(store.NotificationGroupSpan))
	mustNotify(t, b, later)
	at := c.Now()
	mustNotify(t, b, storage.Notice{Owner: author.ID, Kind: store.NotifyFollowed, Key: store.NotificationGroupKey(store.NotifyFollowed, store.NilID, at), Actor: y.ID, ID: store.NewID(at)})
	gs, counts = feed(t, b, author.ID)
	require.Len(t, gs, 3)
	assert.Equal(t, store.NotifyFollowed, gs[0].Kind)
	assert.True(t, gs[0].Message.ID.IsZero())
	assert.Equal(t, 3, counts.Total)
}

func testNotifyMoveToTop(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, x, y := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m1, m2 := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
	g1 := mustNotify(t, b, likeNotice(c, m1, x.ID)).Group
	g2 := mustNotify(t, b, likeNotice(c, m2, x.ID)).Group
	gs, _ := feed(t, b, author.ID)
	require.Len(t, gs, 2)
	assert.Equal(t, []store.ID{g2.ID, g1.ID}, []store.ID{gs[0].ID, gs[1].ID})

	moved := mustNotify(t, b, likeNotice(c, m1, y.ID))
	assert.Equal(t, g1.ID, moved.Group.ID)
	gs, counts := feed(t, b, author.ID)
	require.Len(t, gs, 2, "moving a group does not copy it")
	assert.Equal(t, []store.ID{g1.ID, g2.ID}, []store.ID{gs[0].ID, gs[1].ID}, "a new actor moves the group to the top")
	assert.Equal(t, moved.Group.LatestID, gs[0].LatestID)
	assert.Equal(t, 2, counts.Total)
	assert.Equal(t, 2, counts.Unread)
}

func testNotifyReadMark(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, x, y := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m1, m2, m3 := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
	g1 := mustNotify(t, b, likeNotice(c, m1, x.ID)).Group
	g2 := mustNotify(t, b, likeNotice(c, m2, x.ID)).Group

	counts, err := b.MarkNotificationsRead(ctx, author.ID, g1.LatestID)
	require.NoError(t, err)
	assert.Equal(t, store.NotificationCounts{Total: 2, Unread: 1, ReadMark: g1.LatestID}, counts)
	counts, err = b.MarkNotificationsRead(ctx, author.ID, g2.LatestID)
	require.NoError(t, err)
	assert.Equal(t, 0, counts.Unread)
	counts, err = b.MarkNotificationsRead(ctx, author.ID, g1.LatestID)
	require.NoError(t, err)
	assert.Equal(t, g2.LatestID, counts.ReadMark, "the mark never moves back")

	// A read group that gains an actor is unread again, once; a new
	// group is unread; a repeat changes nothing.
	res := mustNotify(t, b, likeNotice(c, m1, y.ID))
	assert.True(t, res.Group.Unread(res.Counts))
	assert.Equal(t, 1, res.Counts.Unread)
	res = mustNotify(t, b, likeNotice(c, m3, y.ID))
	assert.Equal(t, store.NotificationCounts{Total: 3, Unread: 2, ReadMark: g2.LatestID}, res.Counts)
	mustNotify(t, b, likeNotice(c, m1, x.ID))
	gs, counts := feed(t, b, author.ID)
	assert.Equal(t, 2, counts.Unread)
	unread := 0
	for _, g := range gs {
		if g.Unread(counts) {
			unread++
		}
	}
	assert.Equal(t, counts.Unread, unread, "the count agrees with the groups")

	other, err := b.MarkNotificationsRead(ctx, x.ID, g2.LatestID)
	require.NoError(t, err)
	assert.Equal(t, store.NotificationCounts{ReadMark: g2.LatestID}, other, "an empty feed can be marked")
}

func testNotifyPaging(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, x := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	var want []store.ID // newest first
	for range 5 {
		m := storeMessage(t, b, c, author.ID)
		want = append([]store.ID{mustNotify(t, b, likeNotice(c, m, x.ID)).Group.ID}, want...)
	}
	ids := func(gs []store.NotificationGroup) []store.ID {
		out := make([]store.ID, len(gs))
		for i, g := range gs {
			out[i] = g.ID
		}
		return out
	}
	p1, _, err := b.ReadNotifications(ctx, author.ID, store.Forward(store.NilID, 2))
	require.NoError(t, err)
	assert.Equal(t, want[:2], ids(p1))
	p2, _, err := b.ReadNotifications(ctx, author.ID, store.Forward(p1[1].LatestID, 2))
	require.NoError(t, err)
	assert.Equal(t, want[2:4], ids(p2))
	end, _, err := b.ReadNotifications(ctx, author.ID, store.Backward(store.NilID, 2))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{want[4], want[3]}, ids(end), "backward from the end, nearest first")
	before, _, err := b.ReadNotifications(ctx, author.ID, store.Backward(p2[0].LatestID, 5))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{want[1], want[0]}, ids(before))
}

// Likes of one message by many users at once make one group counting each
// once, and the feed's counts stay exact.
func testNotifyConcurrent(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author := mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	const n = 8
	fans := make([]*store.User, n)
	for i := range fans {
		fans[i] = mustCreateUser(t, b, c)
	}
	key := store.NotificationGroupKey(store.NotifyLiked, m.ID, c.Now())
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nt := likeNotice(c, m, fans[i%n].ID)
			nt.Key = key
			_, err := b.Notify(ctx, nt)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	gs, counts := feed(t, b, author.ID)
	require.Len(t, gs, 1)
	assert.Equal(t, n, gs[0].Count)
	assert.Len(t, gs[0].LatestActors, store.LatestActorsShown)
	assert.Equal(t, store.NotificationCounts{Total: 1, Unread: 1}, counts)
	actors, err := b.ListNotificationActors(ctx, author.ID, gs[0].ID, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	assert.Len(t, actors, n)
}
