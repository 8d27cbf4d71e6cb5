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
	"herald/store/pubsub"
)

type inboxEvent struct {
	InboxEvents struct {
		Type string `json:"type"`
		Edge *struct {
			Cursor      string `json:"cursor"`
			DeliveredAt string `json:"deliveredAt"`
			Node        struct {
				ID string `json:"id"`
			} `json:"node"`
		} `json:"edge"`
		DeletedMessageID *string `json:"deletedMessageId"`
		RemovedMessageID *string `json:"removedMessageId"`
		MessageID        *string `json:"messageId"`
		UnreadCount      int     `json:"unreadCount"`
		TotalCount       int     `json:"totalCount"`
		Cursor           string  `json:"cursor"`
		Message          *struct {
			ID     string `json:"id"`
			Text   string `json:"text"`
			Author struct {
				Handle string `json:"handle"`
			} `json:"author"`
		} `json:"message"`
	} `json:"inboxEvents"`
}

const inboxEventsQuery = `subscription($after: String) { inboxEvents(after: $after) { type edge { cursor deliveredAt node { id } }
	deletedMessageId removedMessageId messageId unreadCount totalCount cursor message { id text author { handle } } } }`

// onlyFields checks that an event sets the fields of its own type and no
// others, as a client cache applying it by field expects.
func onlyFields(t *testing.T, ev inboxEvent, edge, deleted, removed bool) {
	t.Helper()
	e := ev.InboxEvents
	assert.Equal(t, edge, e.Edge != nil, "%s: edge", e.Type)
	assert.Equal(t, deleted, e.DeletedMessageID != nil, "%s: deletedMessageId", e.Type)
	assert.Equal(t, removed, e.RemovedMessageID != nil, "%s: removedMessageId", e.Type)
}

// next waits for the subscription's next inbox event (see nextOf).
func next(t *testing.T, sub *client.Subscription) inboxEvent {
	t.Helper()
	return nextOf[inboxEvent](t, sub)
}

// nextOf waits for the subscription's next payload, failing after a timeout
// rather than hanging the test.
func nextOf[T any](t *testing.T, sub *client.Subscription) T {
	t.Helper()
	type result struct {
		ev  T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var r result
		r.err = sub.Next(&r.ev)
		ch <- r
	}()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.ev
	case <-time.After(5 * time.Second):
		t.Fatal("no subscription event within 5s")
		var zero T
		return zero
	}
}

func TestSubscription_InboxEvents(t *testing.T) { forStrategies(t, testSubscription_InboxEvents) }

func testSubscription_InboxEvents(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	stranger, _ := mustSignUp(t, e, "stranger") // not followed: their posts must not arrive
	var aliceUser struct {
		User user `json:"user"`
	}
	e.mustExec(t, "", `{ user(handle: "alice") { id } }`, nil, &aliceUser)
	mustFollow(t, e, bob, aliceUser.User.ID)

	sub := e.client.Websocket(inboxEventsQuery, opts(bob, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	mustPost(t, e, stranger, "not for bob")
	msg := mustPost(t, e, alice, "first")
	raw := next(t, sub)
	onlyFields(t, raw, true, false, false)
	ev := raw.InboxEvents
	assert.Equal(t, "ADDED", ev.Type)
	// The edge is the one the inbox connection gives the same item, so a
	// client inserts it where a refetch would put it.
	var page struct {
		Inbox struct {
			Edges []struct {
				Cursor      string `json:"cursor"`
				DeliveredAt string `json:"deliveredAt"`
			} `json:"edges"`
		} `json:"inbox"`
	}
	e.mustExec(t, bob, `{ inbox(first: 1) { edges { cursor deliveredAt } } }`, nil, &page)
	require.Len(t, page.Inbox.Edges, 1)
	require.NotNil(t, ev.Edge)
	assert.Equal(t, msg, ev.Edge.Node.ID)
	assert.Equal(t, page.Inbox.Edges[0].Cursor, ev.Edge.Cursor)
	assert.Equal(t, page.Inbox.Edges[0].DeliveredAt, ev.Edge.DeliveredAt)
	assert.Equal(t, 1, ev.UnreadCount)
	assert.Equal(t, 1, ev.TotalCount)
	require.NotNil(t, ev.Message)
	assert.Equal(t, msg, ev.Message.ID)
	require.NotNil(t, ev.MessageID)
	assert.Equal(t, msg, *ev.MessageID)
	assert.Equal(t, "first", ev.Message.Text)
	assert.Equal(t, "alice", ev.Message.Author.Handle)

	// The EDITED event resolves the same message again: with loaders shared
	// across events it would show the cached old text.
	e.mustExec(t, alice, `mutation($id: ID!) { editMessage(id: $id, text: "first, edited") { id } }`, map[string]any{"id": msg}, nil)
	raw = next(t, sub)
	onlyFields(t, raw, false, false, false)
	ev = raw.InboxEvents
	assert.Equal(t, "EDITED", ev.Type)
	require.NotNil(t, ev.Message)
	assert.Equal(t, "first, edited", ev.Message.Text, "each event resolves with fresh loaders")
	assert.Equal(t, 1, ev.UnreadCount, "EDITED counts are read, not left zero")
	assert.Equal(t, 1, ev.TotalCount)

	e.mustExec(t, bob, `mutation { markInboxRead }`, nil, nil)
	raw = next(t, sub)
	onlyFields(t, raw, false, false, false)
	ev = raw.InboxEvents
	assert.Equal(t, "READ", ev.Type)
	assert.Nil(t, ev.Message)
	assert.Nil(t, ev.MessageID)
	assert.Equal(t, 0, ev.UnreadCount)
	assert.Equal(t, 1, ev.TotalCount)

	e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": msg}, nil)
	raw = next(t, sub)
	onlyFields(t, raw, false, true, false)
	ev = raw.InboxEvents
	assert.Equal(t, "DELETED", ev.Type)
	assert.Nil(t, ev.Message)
	assert.Equal(t, msg, *ev.DeletedMessageID, "DELETED names the message to remove")
	require.NotNil(t, ev.MessageID, "the deprecated messageId stays set")
	assert.Equal(t, msg, *ev.MessageID)
	assert.Equal(t, 0, ev.TotalCount)

	// An unfollow takes the author's items out of a stored inbox: REMOVED,
	// since the messages still exist. Where the inbox is read from outboxes
	// (read, cache) nothing is stored to remove and no event is sent: the
	// READ that follows comes first.
	second := mustPost(t, e, alice, "second")
	require.Equal(t, "ADDED", next(t, sub).InboxEvents.Type)
	e.mustExec(t, bob, `mutation($id: ID!) { unfollow(userId: $id) { id } }`, map[string]any{"id": aliceUser.User.ID}, nil)
	if strategyOf(t).Layout().Stores() {
		raw = next(t, sub)
		onlyFields(t, raw, false, false, true)
		ev = raw.InboxEvents
		assert.Equal(t, "REMOVED", ev.Type)
		assert.Equal(t, second, *ev.RemovedMessageID)
		require.NotNil(t, ev.Message, "a removed item's message still exists")
		assert.Equal(t, second, ev.Message.ID)
		assert.Equal(t, 0, ev.TotalCount)
	}
	e.mustExec(t, bob, `mutation { markInboxRead }`, nil, nil)
	assert.Equal(t, "READ", next(t, sub).InboxEvents.Type)

	require.NoError(t, sub.Close())
	assert.Eventually(t, func() bool { return e.hub.Len() == 0 }, 5*time.Second, 5*time.Millisecond,
		"closing the socket must end the subscription and unregister it")
}

func TestSubscription_Unauthenticated(t *testing.T) { forBackends(t, testSubscription_Unauthenticated) }

func testSubscription_Unauthenticated(t *testing.T) {
	e := newEnv(t, nil)
	sub := e.client.Websocket(inboxEventsQuery)
	t.Cleanup(func() { _ = sub.Close() })
	var ev inboxEvent
	err := sub.Next(&ev)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "UNAUTHENTICATED")
	assert.Equal(t, 0, e.hub.Len())
}

// TestSubscription_Resume drops one of two subscriptions of the same
// viewer, makes every kind of change while it is away, and resumes it with
// the last cursor it received: it gets exactly what the one that stayed
// got meanwhile, in the same order, then the live events, none twice.
func TestSubscription_Resume(t *testing.T) { forStrategies(t, testSubscription_Resume) }

func testSubscription_Resume(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	mustFollow(t, e, bob, aliceID)

	stayed := e.client.Websocket(inboxEventsQuery, opts(bob, nil)...)
	t.Cleanup(func() { _ = stayed.Close() })
	dropped := e.client.Websocket(inboxEventsQuery, opts(bob, nil)...)
	require.Eventually(t, func() bool { return e.hub.Len() == 2 }, 5*time.Second, 5*time.Millisecond, "the subscriptions did not register")

	mustPost(t, e, alice, "first")
	ev := next(t, stayed)
	require.Equal(t, ev, next(t, dropped), "both subscriptions see the same event, cursor included")
	require.NotEmpty(t, ev.InboxEvents.Cursor)
	cursor := ev.InboxEvents.Cursor
	first := *ev.InboxEvents.MessageID
	require.NoError(t, dropped.Close())
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the dropped subscription did not end")

	// While it is away: every kind of event, as the one that stayed sees it.
	var missed []inboxEvent
	see := func() { missed = append(missed, next(t, stayed)) }
	second := mustPost(t, e, alice, "second")
	see()
	e.mustExec(t, alice, `mutation($id: ID!) { editMessage(id: $id, text: "first, edited") { id } }`, map[string]any{"id": first}, nil)
	see()
	e.mustExec(t, bob, `mutation { markInboxRead }`, nil, nil)
	see()
	e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": first}, nil)
	see()
	e.mustExec(t, bob, `mutation($id: ID!) { unfollow(userId: $id) { id } }`, map[string]any{"id": aliceID}, nil)
	if strategyOf(t).Layout().Stores() {
		see()
		require.Equal(t, second, *missed[len(missed)-1].InboxEvents.RemovedMessageID)
	}
	types, want := []string{}, []string{"ADDED", "EDITED", "READ", "DELETED"}
	if strategyOf(t).Layout().Stores() {
		want = append(want, "REMOVED")
	}
	for _, m := range missed {
		types = append(types, m.InboxEvents.Type)
	}
	require.Equal(t, want, types)

	resumed := e.client.Websocket(inboxEventsQuery, opts(bob, map[string]any{"after": cursor})...)
	t.Cleanup(func() { _ = resumed.Close() })
	// The events resolve now, not when they happened: a message deleted
	// since is null, counts a strategy reads are today's. Which events, in
	// which order, naming which messages, is what must match.
	for i, want := range missed {
		got := next(t, resumed)
		assert.Equal(t, eventKey(want), eventKey(got), "missed event %d", i)
	}
	// Then live, and nothing twice: the next event is the new one.
	e.mustExec(t, bob, `mutation { markInboxRead }`, nil, nil)
	live := next(t, stayed)
	assert.Equal(t, live, next(t, resumed))
	assert.Equal(t, "READ", live.InboxEvents.Type)
	require.NoError(t, resumed.Close())
}

// eventKey is what identifies an event: its type, cursor and messages.
func eventKey(ev inboxEvent) []string {
	e := ev.InboxEvents
	deref := func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	}
	edge := ""
	if e.Edge != nil {
		edge = e.Edge.Node.ID
	}
	return []string{e.Type, e.Cursor, deref(e.MessageID), edge, deref(e.DeletedMessageID), deref(e.RemovedMessageID)}
}

func TestSubscription_ResumeRefused(t *testing.T) { forBackends(t, testSubscription_ResumeRefused) }

func testSubscription_ResumeRefused(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	subscribe := func(token string, after any) *client.Subscription {
		sub := e.client.Websocket(inboxEventsQuery, opts(token, map[string]any{"after": after})...)
		t.Cleanup(func() { _ = sub.Close() })
		return sub
	}
	refused := func(token, after, code string) {
		t.Helper()
		var ev inboxEvent
		err := subscribe(token, after).Next(&ev)
		require.Error(t, err)
		assert.Contains(t, err.Error(), code)
	}
	onAlice, onBob, onCarol := subscribe(alice, nil), subscribe(bob, nil), subscribe(carol, nil)
	require.Eventually(t, func() bool { return e.hub.Len() == 3 }, 5*time.Second, 5*time.Millisecond)
	e.mustExec(t, alice, `mutation { markInboxRead }`, nil, nil)
	e.mustExec(t, bob, `mutation { markInboxRead }`, nil, nil)
	alices, bobs := next(t, onAlice).InboxEvents.Cursor, next(t, onBob).InboxEvents.Cursor

	refused(bob, "nope", "BAD_USER_INPUT")
	refused(bob, alices[:len(alices)-1], "BAD_USER_INPUT")
	refused(bob, alices, "RESUME_EXPIRED") // not bob's event: nothing of alice's is replayed to him

	// More events than a log holds since bob's cursor: the first ones are
	// gone. carol's event, last in the same publish, says they were routed.
	bobStore, err := graph.ParseUserIDForTest(bobID)
	require.NoError(t, err)
	carolStore, err := graph.ParseUserIDForTest(carolID)
	require.NoError(t, err)
	evs := make([]store.Event, pubsub.DefaultRetainEvents+1)
	for i := range evs {
		evs[i] = store.Event{Type: store.EventRead, UserID: bobStore}
	}
	e.hub.Publish(context.Background(), append(evs, store.Event{Type: store.EventRead, UserID: carolStore})...)
	next(t, onCarol)
	refused(bob, bobs, "RESUME_EXPIRED")
}

// TestSubscription_IdleOutlivesQueryTimeout waits longer than QueryTimeout
// between events: the timeout bounds the resolution of an event, not the
// wait for it, so the subscription stays and gets the next event.
func TestSubscription_IdleOutlivesQueryTimeout(t *testing.T) {
	forBackends(t, testSubscription_IdleOutlivesQueryTimeout)
}

func testSubscription_IdleOutlivesQueryTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	e := newEnv(t, func(c *graph.Config) { c.QueryTimeout = timeout })
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	mustFollow(t, e, bob, aliceID)
	sub := e.client.Websocket(inboxEventsQuery, opts(bob, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	time.Sleep(3 * timeout)
	require.Equal(t, 1, e.hub.Len(), "an idle subscription must not end")
	msg := mustPost(t, e, alice, "after a quiet while")
	ev := next(t, sub).InboxEvents
	assert.Equal(t, "ADDED", ev.Type)
	require.NotNil(t, ev.Edge)
	assert.Equal(t, msg, ev.Edge.Node.ID)
}

// TestSubscription_CountsAsSeen: subscribing is using the app, so it counts
// as being seen, as a query does. The fan-out skips followers not seen for
// InactiveAfter, with no inbox entry and no event; a client that only
// subscribes (herald subscribe, an app resuming its socket) after such a
// while got no event of any post until it made a query.
func TestSubscription_CountsAsSeen(t *testing.T) { forBackends(t, testSubscriptionCountsAsSeen) }

func testSubscriptionCountsAsSeen(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	mustFollow(t, e, bob, aliceID)
	waitFanOut(t, e)
	e.clock.advance(31 * 24 * time.Hour) // past the default InactiveAfter

	sub := e.client.Websocket(inboxEventsQuery, opts(bob, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")
	waitFanOut(t, e) // the returning subscriber's rebuild, which brings nothing
	msg := mustPost(t, e, alice, "for a follower back after a month")
	ev := next(t, sub).InboxEvents
	assert.Equal(t, "ADDED", ev.Type)
	if assert.NotNil(t, ev.Edge) {
		assert.Equal(t, msg, ev.Edge.Node.ID)
	}
}
