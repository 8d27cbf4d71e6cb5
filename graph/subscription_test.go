package graph_test

import (
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		Message          *struct {
			ID     string `json:"id"`
			Text   string `json:"text"`
			Author struct {
				Handle string `json:"handle"`
			} `json:"author"`
		} `json:"message"`
	} `json:"inboxEvents"`
}

const inboxEventsQuery = `subscription { inboxEvents { type edge { cursor deliveredAt node { id } } deletedMessageId removedMessageId
	messageId unreadCount totalCount message { id text author { handle } } } }`

// onlyFields checks that an event sets the fields of its own type and no
// others, as a client cache applying it by field expects.
func onlyFields(t *testing.T, ev inboxEvent, edge, deleted, removed bool) {
	t.Helper()
	e := ev.InboxEvents
	assert.Equal(t, edge, e.Edge != nil, "%s: edge", e.Type)
	assert.Equal(t, deleted, e.DeletedMessageID != nil, "%s: deletedMessageId", e.Type)
	assert.Equal(t, removed, e.RemovedMessageID != nil, "%s: removedMessageId", e.Type)
}

// next waits for the subscription's next payload, failing after a timeout
// rather than hanging the test.
func next(t *testing.T, sub *client.Subscription) inboxEvent {
	t.Helper()
	type result struct {
		ev  inboxEvent
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
		return inboxEvent{}
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
