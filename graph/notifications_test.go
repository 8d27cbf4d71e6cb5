package graph_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/store"
)

type notifGroup struct {
	ID           string `json:"id"`
	Kind         string `json:"kind"`
	Count        int    `json:"count"`
	LatestActors []struct {
		Handle string `json:"handle"`
	} `json:"latestActors"`
	Message *struct {
		ID   string `json:"id"`
		Text string `json:"text"`
	} `json:"message"`
	LatestAt string `json:"latestAt"`
	Unread   bool   `json:"unread"`
}

type notifPage struct {
	Notifications struct {
		Edges []struct {
			Cursor string     `json:"cursor"`
			Node   notifGroup `json:"node"`
		} `json:"edges"`
		PageInfo    pageInfoJSON `json:"pageInfo"`
		TotalCount  int          `json:"totalCount"`
		UnreadCount int          `json:"unreadCount"`
	} `json:"notifications"`
}

type pageInfoJSON struct {
	HasNextPage     bool    `json:"hasNextPage"`
	HasPreviousPage bool    `json:"hasPreviousPage"`
	StartCursor     *string `json:"startCursor"`
	EndCursor       *string `json:"endCursor"`
}

const notifGroupFields = `id kind count latestActors { handle } message { id text } latestAt unread`

const notificationsQuery = `query($first: Int, $after: String, $last: Int, $before: String) {
  notifications(first: $first, after: $after, last: $last, before: $before) {
    edges { cursor node { ` + notifGroupFields + ` } }
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    totalCount unreadCount
  }
}`

func notifications(t *testing.T, e *env, token string, vars map[string]any) notifPage {
	t.Helper()
	var p notifPage
	e.mustExec(t, token, notificationsQuery, vars, &p)
	return p
}

func kindsOf(p notifPage) []string {
	var out []string
	for _, ed := range p.Notifications.Edges {
		out = append(out, ed.Node.Kind)
	}
	return out
}

func mustLike(t *testing.T, e *env, token, msg string) {
	t.Helper()
	e.mustExec(t, token, `mutation($id: ID!) { like(messageId: $id) { id } }`, map[string]any{"id": msg}, nil)
}

func TestNotifications(t *testing.T) { forBackends(t, testNotifications) }

func testNotifications(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	dave, _ := mustSignUp(t, e, "dave")
	post := mustPost(t, e, alice, "a post by @alice")
	mustLike(t, e, alice, post)
	assert.Empty(t, notifications(t, e, alice, nil).Notifications.Edges, "no notification to yourself")

	t.Run("LikesGroup", func(t *testing.T) {
		for _, tok := range []string{bob, carol, dave} {
			mustLike(t, e, tok, post)
		}
		e.mustExec(t, bob, `mutation($id: ID!) { unlike(messageId: $id) { id } }`, map[string]any{"id": post}, nil)
		mustLike(t, e, bob, post)
		p := notifications(t, e, alice, nil).Notifications
		require.Len(t, p.Edges, 1, "three likes of one post are one group")
		g := p.Edges[0].Node
		assert.Equal(t, "LIKED", g.Kind)
		assert.Equal(t, 3, g.Count, "bob liked twice, counted once")
		assert.Equal(t, []string{"dave", "carol", "bob"}, []string{g.LatestActors[0].Handle, g.LatestActors[1].Handle, g.LatestActors[2].Handle})
		require.NotNil(t, g.Message)
		assert.Equal(t, post, g.Message.ID)
		assert.True(t, g.Unread)
		_, err := time.Parse(time.RFC3339Nano, g.LatestAt)
		assert.NoError(t, err)
		assert.Equal(t, 1, p.TotalCount)
		assert.Equal(t, 1, p.UnreadCount)

		var actors struct {
			Node struct {
				Actors struct {
					Edges []struct {
						Cursor string `json:"cursor"`
						Node   struct {
							Handle string `json:"handle"`
						} `json:"node"`
					} `json:"edges"`
					PageInfo   pageInfoJSON `json:"pageInfo"`
					TotalCount int          `json:"totalCount"`
				} `json:"actors"`
			} `json:"node"`
		}
		q := `query($id: ID!, $first: Int, $after: String) { node(id: $id) { ... on NotificationGroup { actors(first: $first, after: $after) { edges { cursor node { handle } } pageInfo { hasNextPage endCursor } totalCount } } } }`
		e.mustExec(t, alice, q, map[string]any{"id": g.ID, "first": 2}, &actors)
		a := actors.Node.Actors
		require.Len(t, a.Edges, 2)
		assert.Equal(t, "dave", a.Edges[0].Node.Handle)
		assert.True(t, a.PageInfo.HasNextPage)
		assert.Equal(t, 3, a.TotalCount)
		e.mustExec(t, alice, q, map[string]any{"id": g.ID, "first": 2, "after": *a.PageInfo.EndCursor}, &actors)
		require.Len(t, actors.Node.Actors.Edges, 1)
		assert.Equal(t, "bob", actors.Node.Actors.Edges[0].Node.Handle)

		var other struct {
			Node *struct {
				ID string `json:"id"`
			} `json:"node"`
		}
		e.mustExec(t, bob, `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": g.ID}, &other)
		assert.Nil(t, other.Node, "another user's notifications are never readable")
		e.mustExec(t, "", `query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": g.ID}, &other)
		assert.Nil(t, other.Node)
	})

	t.Run("ReplyMentionFollow", func(t *testing.T) {
		reply := mustReply(t, e, bob, "@alice I agree", post)
		mention := mustPost(t, e, carol, "hello @alice and @bob")
		mustFollow(t, e, dave, aliceID)
		p := notifications(t, e, alice, nil).Notifications
		assert.Equal(t, []string{"FOLLOWED", "MENTIONED", "REPLIED", "LIKED"}, kindsOf(notifPage{Notifications: p}),
			"the reply that mentions alice is one REPLIED")
		assert.Nil(t, p.Edges[0].Node.Message, "a follow has no message")
		assert.Equal(t, mention, p.Edges[1].Node.Message.ID)
		assert.Equal(t, reply, p.Edges[2].Node.Message.ID, "the reply is the group's message")
		assert.Equal(t, 4, p.TotalCount)
		assert.Equal(t, 4, p.UnreadCount)

		// Deleting the message leaves the group, its message null.
		e.mustExec(t, carol, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": mention}, nil)
		p = notifications(t, e, alice, nil).Notifications
		assert.Equal(t, "MENTIONED", p.Edges[1].Node.Kind)
		assert.Nil(t, p.Edges[1].Node.Message)
	})

	t.Run("Paging", func(t *testing.T) {
		all := notifications(t, e, alice, nil).Notifications
		require.Len(t, all.Edges, 4)
		p := notifications(t, e, alice, map[string]any{"first": 2}).Notifications
		require.Len(t, p.Edges, 2)
		assert.True(t, p.PageInfo.HasNextPage)
		assert.Equal(t, all.Edges[0].Cursor, p.Edges[0].Cursor)
		rest := notifications(t, e, alice, map[string]any{"first": 5, "after": *p.PageInfo.EndCursor}).Notifications
		require.Len(t, rest.Edges, 2)
		assert.False(t, rest.PageInfo.HasNextPage)
		assert.Equal(t, all.Edges[3].Node.ID, rest.Edges[1].Node.ID)
		back := notifications(t, e, alice, map[string]any{"last": 1, "before": rest.Edges[0].Cursor}).Notifications
		require.Len(t, back.Edges, 1)
		assert.Equal(t, all.Edges[1].Node.ID, back.Edges[0].Node.ID)
		assert.True(t, back.PageInfo.HasPreviousPage)

		assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, notificationsQuery, map[string]any{"after": "bogus"}))
		inboxCursor := base64Cursor('i')
		assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, notificationsQuery, map[string]any{"after": inboxCursor}), "another connection's cursor")
		assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, notificationsQuery, map[string]any{"first": 101}))
		assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, notificationsQuery, map[string]any{"first": 1, "last": 1}))
	})

	t.Run("MarkRead", func(t *testing.T) {
		all := notifications(t, e, alice, nil).Notifications
		var r struct {
			MarkNotificationsRead int `json:"markNotificationsRead"`
		}
		e.mustExec(t, alice, `mutation($id: ID) { markNotificationsRead(upTo: $id) }`, map[string]any{"id": all.Edges[2].Node.ID}, &r)
		assert.Equal(t, 2, r.MarkNotificationsRead, "the two groups above the mark stay unread")
		p := notifications(t, e, alice, nil).Notifications
		assert.Equal(t, 2, p.UnreadCount)
		assert.Equal(t, []bool{true, true, false, false}, []bool{p.Edges[0].Node.Unread, p.Edges[1].Node.Unread, p.Edges[2].Node.Unread, p.Edges[3].Node.Unread})
		e.mustExec(t, alice, `mutation { markNotificationsRead }`, nil, &r)
		assert.Equal(t, 0, r.MarkNotificationsRead)

		// A new actor on a read group makes it unread and moves it up,
		// keeping its id.
		eve, _ := mustSignUp(t, e, "eve")
		mustLike(t, e, eve, post)
		p = notifications(t, e, alice, nil).Notifications
		assert.Equal(t, 1, p.UnreadCount)
		assert.Equal(t, all.Edges[3].Node.ID, p.Edges[0].Node.ID)
		assert.Equal(t, 4, p.Edges[0].Node.Count)
		assert.True(t, p.Edges[0].Node.Unread)

		assert.Equal(t, "NOT_FOUND", e.errCode(t, bob, `mutation($id: ID) { markNotificationsRead(upTo: $id) }`, map[string]any{"id": all.Edges[0].Node.ID}), "another user's group")
		assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, `mutation($id: ID) { markNotificationsRead(upTo: $id) }`, map[string]any{"id": post}), "a message id")
	})

	t.Run("Cost", func(t *testing.T) {
		// Each page of actors is costed per group of the page.
		q := `{ notifications(first: 100) { edges { node { actors(first: 100) { edges { node { id } } } } } } }`
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, alice, q, nil))
		e.mustExec(t, alice, `{ notifications(first: 10) { edges { node { latestActors { id } actors(first: 10) { edges { node { id } } } } } } }`, nil, nil)
	})

	t.Run("Unauthenticated", func(t *testing.T) {
		assert.Equal(t, "UNAUTHENTICATED", e.errCode(t, "", notificationsQuery, nil))
		assert.Equal(t, "UNAUTHENTICATED", e.errCode(t, "", `mutation { markNotificationsRead }`, nil))
	})
}

// base64Cursor is a well-formed cursor of another kind.
func base64Cursor(kind byte) string {
	id := store.NewID(time.Now())
	return base64.RawURLEncoding.EncodeToString(append([]byte{kind}, id[:]...))
}

type notifEvent struct {
	NotificationEvents struct {
		Type string `json:"type"`
		Edge *struct {
			Cursor string     `json:"cursor"`
			Node   notifGroup `json:"node"`
		} `json:"edge"`
		UnreadCount int `json:"unreadCount"`
		TotalCount  int `json:"totalCount"`
	} `json:"notificationEvents"`
}

const notificationEventsQuery = `subscription { notificationEvents { type edge { cursor node { ` + notifGroupFields + ` } } unreadCount totalCount } }`

func nextNotif(t *testing.T, sub *client.Subscription) notifEvent {
	t.Helper()
	return nextOf[notifEvent](t, sub)
}

func TestSubscription_NotificationEvents(t *testing.T) {
	forBackends(t, testSubscriptionNotificationEvents)
}

func testSubscriptionNotificationEvents(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	post := mustPost(t, e, alice, "hello")
	waitFanOut(t, e)

	sub := e.client.Websocket(notificationEventsQuery, opts(alice, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	inbox := e.client.Websocket(inboxEventsQuery, opts(alice, nil)...)
	t.Cleanup(func() { _ = inbox.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 2 }, 5*time.Second, 5*time.Millisecond, "the subscriptions did not register")

	mustLike(t, e, bob, post)
	ev := nextNotif(t, sub).NotificationEvents
	assert.Equal(t, "ADDED", ev.Type)
	require.NotNil(t, ev.Edge)
	assert.Equal(t, "LIKED", ev.Edge.Node.Kind)
	assert.Equal(t, 1, ev.Edge.Node.Count)
	assert.True(t, ev.Edge.Node.Unread)
	assert.Equal(t, 1, ev.UnreadCount)
	assert.Equal(t, 1, ev.TotalCount)
	page := notifications(t, e, alice, nil).Notifications
	require.Len(t, page.Edges, 1)
	assert.Equal(t, page.Edges[0].Cursor, ev.Edge.Cursor, "the edge is the one the connection gives")
	first := ev.Edge.Node.ID

	mustLike(t, e, carol, post)
	ev = nextNotif(t, sub).NotificationEvents
	require.NotNil(t, ev.Edge)
	assert.Equal(t, first, ev.Edge.Node.ID, "a group that moved keeps its node id")
	assert.Equal(t, 2, ev.Edge.Node.Count)
	assert.Equal(t, "carol", ev.Edge.Node.LatestActors[0].Handle)
	assert.Equal(t, 1, ev.TotalCount)

	e.mustExec(t, alice, `mutation { markNotificationsRead }`, nil, nil)
	ev = nextNotif(t, sub).NotificationEvents
	assert.Equal(t, "READ", ev.Type)
	assert.Nil(t, ev.Edge)
	assert.Equal(t, 0, ev.UnreadCount)
	assert.Equal(t, 1, ev.TotalCount)

	// The inbox subscription saw none of it: its first event is the
	// follow's, not a notification.
	mustFollow(t, e, bob, aliceID)
	ev = nextNotif(t, sub).NotificationEvents
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, "FOLLOWED", ev.Edge.Node.Kind)
	e.mustExec(t, alice, `mutation { markInboxRead }`, nil, nil)
	for i := 0; ; i++ {
		// Each event decodes (a notification event would not: its type
		// is no InboxEventType), up to the READ.
		if next(t, inbox).InboxEvents.Type == "READ" {
			break
		}
		require.Less(t, i, 10, "no READ on the inbox subscription")
	}

	require.NoError(t, sub.Close())
	require.NoError(t, inbox.Close())
	assert.Eventually(t, func() bool { return e.hub.Len() == 0 }, 5*time.Second, 5*time.Millisecond)
}

func TestSubscription_NotificationEventsUnauthenticated(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		e := newEnv(t, nil)
		sub := e.client.Websocket(notificationEventsQuery)
		t.Cleanup(func() { _ = sub.Close() })
		var ev notifEvent
		err := sub.Next(&ev)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "UNAUTHENTICATED")
		assert.Equal(t, 0, e.hub.Len())
	})
}

func TestSubscription_NotificationEventsResume(t *testing.T) {
	forBackends(t, testSubscriptionNotificationEventsResume)
}

// testSubscriptionNotificationEventsResume drops a notifications
// subscription, makes two notifications and an inbox event while it is
// away, and resumes after the last event it had: it gets exactly the two
// notifications it missed, then live ones, none twice, and no inbox event.
func testSubscriptionNotificationEventsResume(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	post := mustPost(t, e, alice, "hello")
	mustFollow(t, e, alice, bobID)
	waitFanOut(t, e)

	const q = `subscription($after: String) { notificationEvents(after: $after) { type cursor edge { node { kind count } } } }`
	type event struct {
		NotificationEvents struct {
			Type   string `json:"type"`
			Cursor string `json:"cursor"`
			Edge   *struct {
				Node struct {
					Kind  string `json:"kind"`
					Count int    `json:"count"`
				} `json:"node"`
			} `json:"edge"`
		} `json:"notificationEvents"`
	}
	recv := func(sub *client.Subscription) event {
		t.Helper()
		return nextOf[event](t, sub)
	}

	sub := e.client.Websocket(q, opts(alice, nil)...)
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	mustLike(t, e, bob, post)
	last := recv(sub).NotificationEvents
	require.Equal(t, "ADDED", last.Type)
	require.NotEmpty(t, last.Cursor)
	require.NoError(t, sub.Close())
	require.Eventually(t, func() bool { return e.hub.Len() == 0 }, 5*time.Second, 5*time.Millisecond)

	// Away: carol likes (the group moves), bob follows, and bob posts (an
	// inbox event, not this subscription's).
	mustLike(t, e, carol, post)
	mustFollow(t, e, bob, aliceID)
	mustPost(t, e, bob, "for alice's inbox")
	waitFanOut(t, e)

	sub = e.client.Websocket(q, opts(alice, map[string]any{"after": last.Cursor})...)
	t.Cleanup(func() { _ = sub.Close() })
	got := []event{recv(sub), recv(sub)}
	assert.Equal(t, "LIKED", got[0].NotificationEvents.Edge.Node.Kind)
	assert.Equal(t, 2, got[0].NotificationEvents.Edge.Node.Count)
	assert.Equal(t, "FOLLOWED", got[1].NotificationEvents.Edge.Node.Kind)
	e.mustExec(t, alice, `mutation { markNotificationsRead }`, nil, nil)
	assert.Equal(t, "READ", recv(sub).NotificationEvents.Type, "then live, with nothing replayed twice")

	// A malformed cursor is BAD_USER_INPUT.
	bad := e.client.Websocket(q, opts(alice, map[string]any{"after": "not a cursor"})...)
	t.Cleanup(func() { _ = bad.Close() })
	var ev event
	err := bad.Next(&ev)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "BAD_USER_INPUT")
}

// TestNotifications_NodesCost: nodes(ids:) of notification groups reads
// the feed's counts once, whatever the number of groups, and each group
// once; another user's group costs a read and resolves to null.
func TestNotifications_NodesCost(t *testing.T) { forBackends(t, testNotificationsNodesCost) }

func testNotificationsNodesCost(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	for range 6 {
		mustLike(t, e, bob, mustPost(t, e, alice, "a post"))
	}
	p := notifications(t, e, alice, nil).Notifications
	require.Len(t, p.Edges, 6, "a group per post")
	ids := make([]string, len(p.Edges))
	for i, ed := range p.Edges {
		ids[i] = ed.Node.ID
	}
	calls := func(token string, ids []string) (map[string]int64, int) {
		t.Helper()
		var out struct {
			Nodes []*struct {
				ID     string `json:"id"`
				Unread bool   `json:"unread"`
			} `json:"nodes"`
		}
		e.backend.Reset()
		e.mustExec(t, token, `query($ids: [ID!]!) { nodes(ids: $ids) { ... on NotificationGroup { id unread } } }`, map[string]any{"ids": ids}, &out)
		c, _ := e.backend.Snapshot()
		found := 0
		for _, nd := range out.Nodes {
			if nd != nil {
				found++
			}
		}
		return c, found
	}
	c, found := calls(alice, ids)
	assert.Equal(t, 6, found)
	assert.Equal(t, int64(6), c["FindNotificationGroup"], "one read a group")
	assert.Equal(t, int64(1), c["ReadNotifications"], "the counts once")
	c, found = calls(bob, ids)
	assert.Zero(t, found, "another user's groups are not readable")
	assert.Zero(t, c["ReadNotifications"], "no counts without a group")
}

// TestSubscription_NotificationEventsCountsNow: a notification event shows
// the feed's counts as they are when it is sent, not those its publisher
// read: two notices to one owner publish in either order, and a client
// keeps the last event's counts.
func TestSubscription_NotificationEventsCountsNow(t *testing.T) {
	forBackends(t, testSubscriptionNotificationEventsCountsNow)
}

func testSubscriptionNotificationEventsCountsNow(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceGID := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	aliceID, err := graph.ParseUserIDForTest(aliceGID)
	require.NoError(t, err)
	first, second := mustPost(t, e, alice, "one"), mustPost(t, e, alice, "two")

	sub := e.client.Websocket(notificationEventsQuery, opts(alice, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	mustLike(t, e, bob, first)
	ev := nextNotif(t, sub).NotificationEvents
	require.Equal(t, 1, ev.TotalCount)
	mustLike(t, e, carol, second)
	ev = nextNotif(t, sub).NotificationEvents
	require.Equal(t, 2, ev.TotalCount)

	// The first notice's event, published late, as a racing request would:
	// its counts are a feed of one.
	require.NotNil(t, ev.Edge)
	group, err := graph.ParseGroupIDForTest(ev.Edge.Node.ID)
	require.NoError(t, err)
	e.hub.Publish(context.Background(), store.Event{Type: store.EventNotified, UserID: aliceID, Group: group, Counts: store.InboxCounts{Total: 1, Unread: 1}})
	ev = nextNotif(t, sub).NotificationEvents
	assert.Equal(t, 2, ev.TotalCount, "the feed as it is, not as the late publisher read it")
	assert.Equal(t, 2, ev.UnreadCount)
}
