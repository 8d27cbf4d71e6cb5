package graph_test

import (
	"context"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/store"
)

// filterEvent is a notificationEvents event as a client cache applies it.
type filterEvent struct {
	NotificationEvents struct {
		Type           string  `json:"type"`
		RemovedGroupID *string `json:"removedGroupId"`
		Edge           *struct {
			Cursor string     `json:"cursor"`
			Node   notifGroup `json:"node"`
		} `json:"edge"`
		UnreadCount int    `json:"unreadCount"`
		TotalCount  int    `json:"totalCount"`
		Cursor      string `json:"cursor"`
	} `json:"notificationEvents"`
}

const filterEventsQuery = `subscription($after: String) { notificationEvents(after: $after) { type removedGroupId edge { cursor node { ` + notifGroupFields + ` } } unreadCount totalCount cursor } }`

// actorsOf names a page's groups by their latest actors' handles.
func actorsOf(p notifPage) map[string][]string {
	out := map[string][]string{}
	for _, ed := range p.Notifications.Edges {
		var hs []string
		for _, a := range ed.Node.LatestActors {
			hs = append(hs, a.Handle)
		}
		out[ed.Node.ID] = hs
	}
	return out
}

// exact checks that a page's counts are those of its groups.
func exact(t *testing.T, p notifPage) {
	t.Helper()
	unread := 0
	for _, ed := range p.Notifications.Edges {
		if ed.Node.Unread {
			unread++
		}
	}
	assert.Equal(t, len(p.Notifications.Edges), p.Notifications.TotalCount, "total counts the groups")
	assert.Equal(t, unread, p.Notifications.UnreadCount, "unread counts the unread groups")
}

// applyEvents reads n events and applies them to a cache of the feed (node
// id to latest actors and count), as a client would: REMOVED deletes the
// node, UPDATED and ADDED write it. It returns the last event.
func applyEvents(t *testing.T, sub *client.Subscription, n int, cache map[string][]string, counts map[string]int) filterEvent {
	t.Helper()
	var last filterEvent
	for range n {
		last = nextOf[filterEvent](t, sub)
		ev := last.NotificationEvents
		switch ev.Type {
		case "REMOVED":
			require.NotNil(t, ev.RemovedGroupID)
			assert.Nil(t, ev.Edge)
			_, had := cache[*ev.RemovedGroupID]
			assert.True(t, had, "REMOVED names a group the client has")
			delete(cache, *ev.RemovedGroupID)
		case "UPDATED", "ADDED":
			require.NotNil(t, ev.Edge, ev.Type)
			assert.Nil(t, ev.RemovedGroupID)
			var hs []string
			for _, a := range ev.Edge.Node.LatestActors {
				hs = append(hs, a.Handle)
			}
			cache[ev.Edge.Node.ID] = hs
			counts[ev.Edge.Node.ID] = ev.Edge.Node.Count
		default:
			t.Fatalf("unexpected event %s", ev.Type)
		}
	}
	return last
}

func TestNotifications_BlockMute(t *testing.T) { forBackends(t, testNotificationsBlockMute) }

// A block and a mute take the user's items out of the owner's feed, with
// live events a client cache applies to end up with the feed as the server
// reads it; the user's later activity notifies nothing, nor does a
// blocker's mention of the user blocked; an unmute brings nothing back, but
// new activity notifies again.
func testNotificationsBlockMute(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	dave, _ := mustSignUp(t, e, "dave")
	owner, err := graph.ParseUserIDForTest(aliceID)
	require.NoError(t, err)
	bobUser, err := graph.ParseUserIDForTest(bobID)
	require.NoError(t, err)

	p1 := mustPost(t, e, alice, "first")
	p2 := mustPost(t, e, alice, "second")
	mustLike(t, e, bob, p1)  // LIKED p1: bob alone
	mustLike(t, e, bob, p2)  // LIKED p2: bob, dave, carol
	mustLike(t, e, dave, p2) //
	mustLike(t, e, carol, p2)
	mustFollow(t, e, bob, aliceID) // FOLLOWED: bob, dave
	mustFollow(t, e, dave, aliceID)
	mustReply(t, e, bob, "a reply", p1)           // REPLIED: bob
	mustPost(t, e, bob, "hi @alice")              // MENTIONED: bob
	mustRepost(t, e, bob, p1)                     // REPOSTED: bob
	mustPost(t, e, carol, "hi @alice from carol") // MENTIONED: carol
	waitFanOut(t, e)
	before := notifications(t, e, alice, nil)
	require.Len(t, before.Notifications.Edges, 7)
	// Read up to the follows, so that removed groups are read and unread.
	var mark struct {
		MarkNotificationsRead int `json:"markNotificationsRead"`
	}
	follows := before.Notifications.Edges[4].Node
	require.Equal(t, "FOLLOWED", follows.Kind)
	e.mustExec(t, alice, `mutation($id: ID) { markNotificationsRead(upTo: $id) }`, map[string]any{"id": follows.ID}, &mark)
	require.Equal(t, 4, mark.MarkNotificationsRead)
	before = notifications(t, e, alice, nil)
	exact(t, before)
	cache, counts := actorsOf(before), map[string]int{}
	for _, ed := range before.Notifications.Edges {
		counts[ed.Node.ID] = ed.Node.Count
	}

	sub := e.client.Websocket(filterEventsQuery, opts(alice, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	// alice blocks bob: the block stores the relation, then hides.
	e.mustExec(t, alice, `mutation($id: ID!) { block(userId: $id) { id } }`, map[string]any{"id": bobID}, nil)
	after := notifications(t, e, alice, nil)
	exact(t, after)
	assert.Equal(t, []string{"MENTIONED", "FOLLOWED", "LIKED"}, kindsOf(after), "bob's reply, mention, repost and lone like are gone")
	assert.Equal(t, 3, after.Notifications.TotalCount)
	assert.Equal(t, 1, after.Notifications.UnreadCount, "carol's mention; the two left below the mark stay read")
	got := actorsOf(after)
	for id, hs := range got {
		assert.NotContains(t, hs, "bob", id)
	}
	byKind := map[string]notifGroup{}
	for _, ed := range after.Notifications.Edges {
		byKind[ed.Node.Kind] = ed.Node
	}
	assert.Equal(t, 2, byKind["LIKED"].Count, "bob left the likes of p2")
	assert.Equal(t, 1, byKind["FOLLOWED"].Count)
	// Events: four groups removed, two updated; applied to the client's
	// cache, it holds what the server reads.
	last := applyEvents(t, sub, 6, cache, counts)
	assert.Equal(t, got, cache, "the cache, events applied, is the feed")
	assert.Equal(t, 2, counts[byKind["LIKED"].ID])
	assert.Equal(t, 3, last.NotificationEvents.TotalCount)
	assert.Equal(t, 1, last.NotificationEvents.UnreadCount)
	again := e.svc.HideNotificationsFrom(ctx, owner, bobUser)
	require.NoError(t, again, "a re-run, as blocking again makes")

	// bob's activity notifies alice of nothing, and publishes nothing: the
	// next event is dave's like.
	// alice's messages are hidden from bob: his like, repost and reply of
	// one are refused as of a message that is not there.
	p3 := mustPost(t, e, alice, "third")
	byID := map[string]any{"id": p3}
	assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, `mutation($id: ID!) { like(messageId: $id) { id } }`, byID))
	assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, `mutation($id: ID!) { repost(messageId: $id) { id } }`, byID))
	assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, `mutation($id: ID!) { postMessage(input: {text: "another reply", replyTo: $id}) { id } }`, byID))
	assert.Equal(t, store.EFORBIDDEN, e.errCode(t, bob, `mutation($id: ID!) { follow(userId: $id) { id } }`, map[string]any{"id": aliceID}), "bob cannot follow alice again")
	mustPost(t, e, bob, "hey @alice")
	waitFanOut(t, e)
	assert.Equal(t, after.Notifications.Edges, notifications(t, e, alice, nil).Notifications.Edges, "nothing from bob")
	mustLike(t, e, dave, p3)
	last = applyEvents(t, sub, 1, cache, counts)
	require.Equal(t, "ADDED", last.NotificationEvents.Type, "bob's activity published nothing before dave's like")
	assert.Equal(t, []string{"dave"}, cache[last.NotificationEvents.Edge.Node.ID])

	// The blocker's mention, reply and like reach the user blocked: none.
	bobBefore := notifications(t, e, bob, nil)
	bobPost := mustPost(t, e, bob, "bob's own")
	mustPost(t, e, alice, "about @bob")
	mustReply(t, e, alice, "replying", bobPost)
	mustLike(t, e, alice, bobPost)
	waitFanOut(t, e)
	assert.Equal(t, bobBefore.Notifications.TotalCount, notifications(t, e, bob, nil).Notifications.TotalCount, "alice blocks bob: her mention, reply and like notify him of nothing")

	// alice mutes carol: her mention goes, the likes of p2 lose her.
	e.mustExec(t, alice, `mutation($id: ID!) { mute(userId: $id) { id } }`, map[string]any{"id": carolID}, nil)
	muted := notifications(t, e, alice, nil)
	exact(t, muted)
	assert.Equal(t, []string{"LIKED", "FOLLOWED", "LIKED"}, kindsOf(muted))
	for id, hs := range actorsOf(muted) {
		assert.NotContains(t, hs, "carol", id)
	}
	applyEvents(t, sub, 2, cache, counts)
	assert.Equal(t, actorsOf(muted), cache)
	assert.Equal(t, 1, counts[byKind["LIKED"].ID])
	mustLike(t, e, carol, p3)
	mustPost(t, e, carol, "again @alice")
	waitFanOut(t, e)
	assert.Equal(t, muted.Notifications.Edges, notifications(t, e, alice, nil).Notifications.Edges, "nothing from carol while muted")

	// Unmuted: the old notifications stay gone; new ones arrive.
	e.mustExec(t, alice, `mutation($id: ID!) { unmute(userId: $id) { id } }`, map[string]any{"id": carolID}, nil)
	assert.Equal(t, muted.Notifications.Edges, notifications(t, e, alice, nil).Notifications.Edges, "an unmute brings nothing back")
	mustPost(t, e, carol, "hello again @alice")
	waitFanOut(t, e)
	back := notifications(t, e, alice, nil)
	exact(t, back)
	require.Len(t, back.Notifications.Edges, 4)
	assert.Equal(t, "MENTIONED", back.Notifications.Edges[0].Node.Kind)
	assert.Equal(t, "carol", back.Notifications.Edges[0].Node.LatestActors[0].Handle)
	last = applyEvents(t, sub, 1, cache, counts)
	assert.Equal(t, "ADDED", last.NotificationEvents.Type)
	assert.Equal(t, actorsOf(back), cache)
}

func TestNotifications_FilterCost(t *testing.T) { forBackends(t, testNotificationsFilterCost) }

// The relations a notice is checked against cost two reads per activity,
// however many users a message mentions (one call each, one round trip on
// MongoDB); a refused notice writes nothing.
func testNotificationsFilterCost(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	mustSignUp(t, e, "carol")
	mustSignUp(t, e, "dave")
	post := mustPost(t, e, alice, "hello")
	waitFanOut(t, e)
	calls := func(do func()) map[string]int64 {
		t.Helper()
		e.backend.Reset()
		do()
		waitFanOut(t, e)
		n, _ := e.backend.Snapshot()
		return n
	}
	n := calls(func() { mustLike(t, e, bob, post) })
	assert.Equal(t, []int64{2, 1, 1}, []int64{n["FindBlockers"], n["FindBlocked"], n["Notify"]}, "a like: whether the author blocks the liker (visibility), both directions for the notice, then the notice")
	n = calls(func() { mustPost(t, e, bob, "@alice @carol @dave") })
	assert.Equal(t, []int64{1, 1, 3}, []int64{n["FindBlockers"], n["FindBlocked"], n["Notify"]}, "three mentions: the relations read once for all")

	owner, err := graph.ParseUserIDForTest(aliceID)
	require.NoError(t, err)
	target, err := graph.ParseUserIDForTest(bobID)
	require.NoError(t, err)
	_, err = e.backend.Block(ctx, owner, target, store.RelationMute, time.Now())
	require.NoError(t, err)
	n = calls(func() { mustRepost(t, e, bob, post) })
	assert.Equal(t, []int64{2, 1, 0}, []int64{n["FindBlockers"], n["FindBlocked"], n["Notify"]}, "a muted user's repost: visibility, then the notice's check, and no notice written")
}

func TestSubscription_NotificationEventsResumeRemoved(t *testing.T) {
	forBackends(t, testSubscriptionNotificationEventsResumeRemoved)
}

// A client away while its owner blocks a user resumes after its last
// event and gets the REMOVED and UPDATED events it missed, none twice.
func testSubscriptionNotificationEventsResumeRemoved(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	p1, p2 := mustPost(t, e, alice, "one"), mustPost(t, e, alice, "two")
	waitFanOut(t, e)

	sub := e.client.Websocket(filterEventsQuery, opts(alice, nil)...)
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	mustLike(t, e, bob, p1)
	mustLike(t, e, bob, p2)
	mustLike(t, e, carol, p2)
	cache, counts := map[string][]string{}, map[string]int{}
	last := applyEvents(t, sub, 3, cache, counts)
	require.NoError(t, sub.Close())
	require.Eventually(t, func() bool { return e.hub.Len() == 0 }, 5*time.Second, 5*time.Millisecond)

	owner, err := graph.ParseUserIDForTest(aliceID)
	require.NoError(t, err)
	target, err := graph.ParseUserIDForTest(bobID)
	require.NoError(t, err)
	_, err = e.backend.Block(ctx, owner, target, store.RelationBlock, time.Now())
	require.NoError(t, err)
	require.NoError(t, e.svc.HideNotificationsFrom(ctx, owner, target))

	sub = e.client.Websocket(filterEventsQuery, opts(alice, map[string]any{"after": last.NotificationEvents.Cursor})...)
	t.Cleanup(func() { _ = sub.Close() })
	applyEvents(t, sub, 2, cache, counts)
	assert.Equal(t, actorsOf(notifications(t, e, alice, nil)), cache, "resumed, the cache is the feed")
	e.mustExec(t, alice, `mutation { markNotificationsRead }`, nil, nil)
	ev := nextOf[filterEvent](t, sub).NotificationEvents
	assert.Equal(t, "READ", ev.Type, "then live, nothing replayed")
	assert.Equal(t, 1, ev.TotalCount)
}
