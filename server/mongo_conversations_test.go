package main

import (
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/internal/servertest"
)

// convEvent is the part of a conversationEvents payload the tests check.
type convEvent struct {
	Type           string
	ConversationID string
	Edge           *struct {
		Cursor string
		Node   struct{ ID, Text string }
	}
	Message          *struct{ ID, Text string }
	DeletedMessageID *string
	Member           *struct{ Handle string }
	ReadSeq          *int
	Conversation     *struct {
		ID      string
		Members []struct{ Handle string }
	}
	UnreadCount int
}

const conversationEventsSubscription = `subscription { conversationEvents { type conversationId
	edge { cursor node { id text } } message { id text } deletedMessageId member { handle } readSeq
	conversation { id members { handle } } unreadCount } }`

// subscribeConversations opens u's conversationEvents subscription on srv
// and waits until it is registered.
func subscribeConversations(t *testing.T, srv *servertest.Server, u servertest.User) *servertest.WSClient {
	t.Helper()
	c := servertest.Acked(t, srv, u)
	before := srv.Events.Len()
	c.Send("subscribe", "1", map[string]any{"query": conversationEventsSubscription})
	require.Eventually(t, func() bool { return srv.Events.Len() == before+1 }, 5*time.Second, 10*time.Millisecond,
		"the subscription reaches the events hub")
	return c
}

// nextConvEvent reads the subscription's next event.
func nextConvEvent(t *testing.T, c *servertest.WSClient) convEvent {
	t.Helper()
	m := c.MustRead(10 * time.Second)
	require.Equal(t, "next", m.Type, "payload: %s", m.Payload)
	var next struct {
		Data   struct{ ConversationEvents convEvent }
		Errors []any
	}
	require.NoError(t, json.Unmarshal(m.Payload, &next))
	require.Empty(t, next.Errors)
	return next.Data.ConversationEvents
}

// TestMongo_TwoInstancesConversations runs two instances over one MongoDB:
// members subscribed to conversationEvents on B learn of each change made
// through A (a group's creation, a message with its edge, an edit, a read
// position, a deletion, a removal), and a removed member hears nothing
// more of the group.
func TestMongo_TwoInstancesConversations(t *testing.T) {
	c1, engine := newLungo(t)
	a := newTestServerOnMongo(t, c1, nil)
	b := newTestServerOnMongo(t, lungo.NewClient(engine), nil)

	alice := servertest.MustSignUp(t, a.URL, "alice")
	bob := servertest.MustSignUp(t, b.URL, "bob")
	carol := servertest.MustSignUp(t, a.URL, "carol")
	bobOnB := subscribeConversations(t, b, bob)
	carolOnB := subscribeConversations(t, b, carol)

	d := servertest.MustGQL(t, a.URL, alice.Token, `mutation($m: [ID!]!) { createGroup(name: "g", memberIds: $m) { id } }`,
		map[string]any{"m": []string{bob.ID, carol.ID}})
	group := d["createGroup"].(map[string]any)["id"].(string)
	for _, c := range []*servertest.WSClient{bobOnB, carolOnB} {
		ev := nextConvEvent(t, c)
		assert.Equal(t, "MEMBER_ADDED", ev.Type)
		assert.Equal(t, group, ev.ConversationID)
		require.NotNil(t, ev.Conversation)
		assert.Len(t, ev.Conversation.Members, 3)
	}

	d = servertest.MustGQL(t, a.URL, alice.Token, `mutation($c: ID!) { sendGroupMessage(conversationId: $c, text: "hello from A") { id } }`,
		map[string]any{"c": group})
	msg := d["sendGroupMessage"].(map[string]any)["id"].(string)
	for _, c := range []*servertest.WSClient{bobOnB, carolOnB} {
		ev := nextConvEvent(t, c)
		assert.Equal(t, "MESSAGE", ev.Type)
		assert.Equal(t, group, ev.ConversationID)
		require.NotNil(t, ev.Edge)
		assert.Equal(t, msg, ev.Edge.Node.ID)
		assert.Equal(t, "hello from A", ev.Edge.Node.Text)
		assert.NotEmpty(t, ev.Edge.Cursor)
		assert.Equal(t, 1, ev.UnreadCount)
	}

	servertest.MustGQL(t, a.URL, alice.Token, `mutation($id: ID!) { editConversationMessage(id: $id, text: "edited on A") { id } }`,
		map[string]any{"id": msg})
	ev := nextConvEvent(t, bobOnB)
	assert.Equal(t, "EDITED", ev.Type)
	require.NotNil(t, ev.Message)
	assert.Equal(t, msg, ev.Message.ID)
	assert.Equal(t, "edited on A", ev.Message.Text)
	assert.Equal(t, "EDITED", nextConvEvent(t, carolOnB).Type)

	// carol reads through A: bob on B gets her read position.
	servertest.MustGQL(t, a.URL, carol.Token, `mutation($c: ID!) { markConversationRead(id: $c) { id } }`, map[string]any{"c": group})
	ev = nextConvEvent(t, bobOnB)
	assert.Equal(t, "READ", ev.Type)
	require.NotNil(t, ev.Member)
	assert.Equal(t, "carol", ev.Member.Handle)
	require.NotNil(t, ev.ReadSeq)
	assert.Equal(t, 1, *ev.ReadSeq)
	assert.Equal(t, 1, ev.UnreadCount, "bob has not read it")
	ev = nextConvEvent(t, carolOnB)
	assert.Equal(t, "READ", ev.Type, "carol's other devices")
	assert.Equal(t, 0, ev.UnreadCount)

	servertest.MustGQL(t, a.URL, alice.Token, `mutation($id: ID!) { deleteConversationMessage(id: $id) }`, map[string]any{"id": msg})
	ev = nextConvEvent(t, bobOnB)
	assert.Equal(t, "DELETED", ev.Type)
	require.NotNil(t, ev.DeletedMessageID)
	assert.Equal(t, msg, *ev.DeletedMessageID)
	assert.Equal(t, "DELETED", nextConvEvent(t, carolOnB).Type)

	// carol is removed through A: she gets her removal on B, then nothing
	// of the group; bob gets the removal and the group's next message.
	servertest.MustGQL(t, a.URL, alice.Token, `mutation($c: ID!, $u: ID!) { removeMember(conversationId: $c, userId: $u) { id } }`,
		map[string]any{"c": group, "u": carol.ID})
	ev = nextConvEvent(t, carolOnB)
	assert.Equal(t, "MEMBER_REMOVED", ev.Type)
	assert.Equal(t, "carol", ev.Member.Handle)
	assert.Nil(t, ev.Conversation, "the removed member is not shown the group")
	ev = nextConvEvent(t, bobOnB)
	assert.Equal(t, "MEMBER_REMOVED", ev.Type)
	require.NotNil(t, ev.Conversation)
	assert.Len(t, ev.Conversation.Members, 2)

	servertest.MustGQL(t, a.URL, alice.Token, `mutation($c: ID!) { sendGroupMessage(conversationId: $c, text: "without carol") { id } }`,
		map[string]any{"c": group})
	ev = nextConvEvent(t, bobOnB)
	assert.Equal(t, "MESSAGE", ev.Type)
	assert.Equal(t, "without carol", ev.Edge.Node.Text)
	// carol's next event is her own direct message: the group's came
	// between on no path.
	servertest.MustGQL(t, a.URL, alice.Token, `mutation($to: ID!) { sendDirectMessage(to: $to, text: "just you") { id } }`,
		map[string]any{"to": carol.ID})
	ev = nextConvEvent(t, carolOnB)
	assert.Equal(t, "MESSAGE", ev.Type)
	assert.Equal(t, "just you", ev.Edge.Node.Text)
	assert.NotEqual(t, group, ev.ConversationID)

	// Once each: no second copy of any event comes.
	for _, c := range []*servertest.WSClient{bobOnB, carolOnB} {
		_, err := c.Read(300 * time.Millisecond)
		var ne net.Error
		assert.True(t, errors.As(err, &ne) && ne.Timeout(), "no further message, got %v", err)
	}
}
