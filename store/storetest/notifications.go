package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

func testNotifications(t *testing.T, open OpenFunc) {
	t.Run("Grouping", func(t *testing.T) { testNotifyGrouping(t, open) })
	t.Run("MoveToTop", func(t *testing.T) { testNotifyMoveToTop(t, open) })
	t.Run("ReadMark", func(t *testing.T) { testNotifyReadMark(t, open) })
	t.Run("Paging", func(t *testing.T) { testNotifyPaging(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testNotifyConcurrent(t, open) })
	t.Run("Service", func(t *testing.T) { testNotifyService(t, open) })
	t.Run("RemoveActor", func(t *testing.T) { testNotifyRemoveActor(t, open) })
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
	theirs, err := b.ListNotificationActors(ctx, x.ID, g.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, theirs, "another user's group has no actors to list")

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

// The activities the service notifies: follows, likes, reposts, replies and
// mentions, never to oneself, each told to its subscriptions.
func testNotifyService(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, hub := newService(t, b, c)
	alice, bob, carol := mustSignUp(t, svc, "alice"), mustSignUp(t, svc, "bob"), mustSignUp(t, svc, "carol")
	events, err := hub.Subscribe(t.Context(), alice.ID)
	require.NoError(t, err)
	next := func() store.Event {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(5 * time.Second):
			require.FailNow(t, "no event")
			return store.Event{}
		}
	}
	// nextNotice skips inbox events (alice's own post reaches nobody's
	// inbox, but a follow's backfill may tell her of items).
	nextNotice := func() store.Event {
		t.Helper()
		for range 100 {
			if ev := next(); ev.Type.Notification() {
				return ev
			}
		}
		require.FailNow(t, "no notification event")
		return store.Event{}
	}
	kinds := func() []store.NotificationKind {
		t.Helper()
		page, err := svc.Notifications(ctx, alice.ID, store.Forward(store.NilID, 100))
		require.NoError(t, err)
		out := make([]store.NotificationKind, len(page.Groups))
		for i, g := range page.Groups {
			out[i] = g.Kind
		}
		return out
	}

	post, err := svc.PostMessage(ctx, alice.ID, service.PostInput{Text: "hello @alice"})
	require.NoError(t, err)
	_, err = svc.Like(ctx, alice.ID, post.ID)
	require.NoError(t, err)
	assert.Empty(t, kinds(), "no notification to yourself: a self mention, a like of your own post")

	_, err = svc.Follow(ctx, bob.ID, alice.ID)
	require.NoError(t, err)
	ev := nextNotice()
	assert.Equal(t, store.EventNotified, ev.Type)
	assert.Equal(t, 1, ev.Counts.Unread)
	for _, u := range []store.ID{bob.ID, carol.ID} {
		_, err = svc.Like(ctx, u, post.ID)
		require.NoError(t, err)
	}
	_, err = svc.Unlike(ctx, bob.ID, post.ID)
	require.NoError(t, err)
	_, err = svc.Like(ctx, bob.ID, post.ID)
	require.NoError(t, err)
	svc.NotifyReposted(ctx, carol.ID, post)
	svc.NotifyReposted(ctx, bob.ID, post)
	assert.Equal(t, []store.NotificationKind{store.NotifyReposted, store.NotifyLiked, store.NotifyFollowed}, kinds())
	page, err := svc.Notifications(ctx, alice.ID, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	assert.Equal(t, 2, page.Groups[0].Count, "reposts group")
	assert.Equal(t, []store.ID{carol.ID, bob.ID}, page.Groups[1].LatestActors, "like, unlike, like again neither counts twice nor moves the group")

	// A reply that mentions its parent's author is one REPLIED; a mention
	// added by an edit is told once, and only to the newly mentioned.
	reply, err := svc.PostMessage(ctx, bob.ID, service.PostInput{Text: "@alice yes", ReplyToID: post.ID})
	require.NoError(t, err)
	other, err := svc.PostMessage(ctx, carol.ID, service.PostInput{Text: "nobody yet"})
	require.NoError(t, err)
	_, err = svc.EditMessage(ctx, carol.ID, other.ID, "now @alice")
	require.NoError(t, err)
	_, err = svc.EditMessage(ctx, carol.ID, other.ID, "still @alice, and @bob")
	require.NoError(t, err)
	page, err = svc.Notifications(ctx, alice.ID, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	require.Len(t, page.Groups, 5)
	assert.Equal(t, store.NotifyMentioned, page.Groups[0].Kind)
	assert.Equal(t, other.ID, page.Groups[0].Message.ID)
	assert.Equal(t, store.NotifyReplied, page.Groups[1].Kind)
	assert.Equal(t, reply.ID, page.Groups[1].Message.ID, "the reply is the group's message")
	assert.Equal(t, store.NotificationCounts{Total: 5, Unread: 5}, page.Counts)
	bobs, err := svc.Notifications(ctx, bob.ID, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	require.Len(t, bobs.Groups, 1, "bob, newly mentioned by the edit")
	assert.Equal(t, carol.ID, bobs.Groups[0].LatestActors[0])

	counts, err := svc.MarkNotificationsRead(ctx, alice.ID, page.Groups[1].ID)
	require.NoError(t, err)
	assert.Equal(t, 1, counts.Unread, "marked up to the reply: the mention above it stays unread")
	_, err = svc.MarkNotificationsRead(ctx, alice.ID, bobs.Groups[0].ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "another user's group")
	counts, err = svc.MarkNotificationsRead(ctx, alice.ID, store.NilID)
	require.NoError(t, err)
	assert.Equal(t, store.NotificationCounts{Total: 5, ReadMark: page.Groups[0].LatestID}, counts)
	var read store.Event
	for range 100 {
		if read = nextNotice(); read.Type == store.EventNotificationsRead && read.Counts.Unread == 0 {
			break
		}
	}
	assert.Equal(t, store.EventNotificationsRead, read.Type)
	assert.Equal(t, 5, read.Counts.Total)
}
