package graph_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHome_OwnMessages(t *testing.T) { forStrategies(t, testHome_OwnMessages) }

// testHome_OwnMessages checks read-your-writes: one's own post is in one's
// home timeline when postMessage returns, before any fan-out has run, with
// the events a client cache needs, and without counting as unread.
func testHome_OwnMessages(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	mustFollow(t, e, alice, bobID)
	fromBob := mustPost(t, e, bob, "from bob")
	waitFanOut(t, e)

	sub := e.client.Websocket(inboxEventsQuery, opts(alice, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	const q = `{ inbox(first: 10) { totalCount unreadCount edges { cursor deliveredAt node { id text author { handle } } } } }`
	type page struct {
		Inbox struct {
			TotalCount  int        `json:"totalCount"`
			UnreadCount int        `json:"unreadCount"`
			Edges       []homeEdge `json:"edges"`
		} `json:"inbox"`
	}
	own := mustPost(t, e, alice, "my own")
	var p page
	e.mustExec(t, alice, q, nil, &p) // no waitFanOut: the post is home already
	require.Len(t, p.Inbox.Edges, 2)
	assert.Equal(t, own, p.Inbox.Edges[0].Node.ID, "the newest item is one's own post")
	assert.Equal(t, "alice", p.Inbox.Edges[0].Node.Author.Handle)
	assert.Equal(t, fromBob, p.Inbox.Edges[1].Node.ID)
	assert.Equal(t, 1, p.Inbox.TotalCount, "one's own messages are not counted")
	assert.Equal(t, 1, p.Inbox.UnreadCount, "nor ever unread")

	raw := next(t, sub)
	if ev := raw.InboxEvents; ev.Type == "ADDED" && ev.Edge != nil && ev.Edge.Node.ID == fromBob {
		// On MongoDB bob's delivery event reaches this process's hub through
		// the change stream, which can trail waitFanOut: the subscription,
		// newer than the fan-out, may still get it first.
		raw = next(t, sub)
	}
	onlyFields(t, raw, true, false, false)
	ev := raw.InboxEvents
	assert.Equal(t, "ADDED", ev.Type)
	require.NotNil(t, ev.Edge)
	assert.Equal(t, own, ev.Edge.Node.ID)
	assert.Equal(t, p.Inbox.Edges[0].Cursor, ev.Edge.Cursor, "the edge is the one the connection gives")
	assert.Equal(t, p.Inbox.Edges[0].DeliveredAt, ev.Edge.DeliveredAt)
	assert.Equal(t, 1, ev.TotalCount)
	assert.Equal(t, 1, ev.UnreadCount)

	// A reply to someone one does not follow is at home too: it is one's own.
	var carolPost string
	{
		carol, _ := mustSignUp(t, e, "carol")
		carolPost = mustPost(t, e, carol, "from carol")
	}
	var r struct {
		PostMessage message `json:"postMessage"`
	}
	e.mustExec(t, alice, `mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"text": "my reply", "replyTo": carolPost}}, &r)
	assert.Equal(t, "ADDED", next(t, sub).InboxEvents.Type)
	e.mustExec(t, alice, q, nil, &p)
	assert.Equal(t, []string{"my reply", "my own", "from bob"}, edgeTexts(p.Inbox.Edges))

	e.mustExec(t, alice, `mutation($id: ID!) { editMessage(id: $id, text: "my own, edited") { id } }`, map[string]any{"id": own}, nil)
	raw = next(t, sub)
	onlyFields(t, raw, false, false, false)
	assert.Equal(t, "EDITED", raw.InboxEvents.Type)
	require.NotNil(t, raw.InboxEvents.Message)
	assert.Equal(t, "my own, edited", raw.InboxEvents.Message.Text)

	e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": own}, nil)
	raw = next(t, sub)
	onlyFields(t, raw, false, true, false)
	assert.Equal(t, "DELETED", raw.InboxEvents.Type)
	assert.Equal(t, own, *raw.InboxEvents.DeletedMessageID)
	e.mustExec(t, alice, q, nil, &p)
	assert.Equal(t, []string{"my reply", "from bob"}, edgeTexts(p.Inbox.Edges), "a deleted own post leaves at once")

	// Marking read up to one's own newest post marks everything read.
	e.mustExec(t, alice, `mutation { markInboxRead }`, nil, nil)
	e.mustExec(t, alice, q, nil, &p)
	assert.Equal(t, 0, p.Inbox.UnreadCount)
}

// homeEdge is an inbox edge as these tests read it.
type homeEdge struct {
	Cursor      string  `json:"cursor"`
	DeliveredAt string  `json:"deliveredAt"`
	Node        message `json:"node"`
}

func edgeTexts(edges []homeEdge) []string {
	out := make([]string, len(edges))
	for i, e := range edges {
		out[i] = e.Node.Text
	}
	return out
}

func TestHome_RepliesAtHome(t *testing.T) { forStrategies(t, testHome_RepliesAtHome) }

// testHome_RepliesAtHome checks the rule of replies at home, as Mastodon
// and Twitter apply it: a reply reaches a follower of its author only if
// the follower follows the user answered too, or is that user; a reply to
// oneself reaches every follower. The follower it does not reach gets no
// event for it either, and counts only what it shows.
func testHome_RepliesAtHome(t *testing.T) {
	e := newEnv(t, nil)
	author, authorID := mustSignUp(t, e, "author")
	answered, answeredID := mustSignUp(t, e, "answered")
	both, _ := mustSignUp(t, e, "both")    // follows the author and the answered user
	onlyA, _ := mustSignUp(t, e, "only_a") // follows the author alone
	for _, tok := range []string{both, onlyA, answered} {
		mustFollow(t, e, tok, authorID)
	}
	mustFollow(t, e, both, answeredID)
	question := mustPost(t, e, answered, "a question")
	waitFanOut(t, e)

	sub := e.client.Websocket(inboxEventsQuery, opts(onlyA, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	reply := func(text, to string) {
		e.mustExec(t, author, `mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"text": text, "replyTo": to}}, nil)
	}
	reply("an answer", question)
	first := mustPost(t, e, author, "a post")
	reply("a follow-up to myself", first)
	waitFanOut(t, e)

	const q = `{ inbox(first: 10) { totalCount unreadCount edges { cursor deliveredAt node { id text } } } }`
	var p struct {
		Inbox struct {
			TotalCount  int        `json:"totalCount"`
			UnreadCount int        `json:"unreadCount"`
			Edges       []homeEdge `json:"edges"`
		} `json:"inbox"`
	}
	e.mustExec(t, both, q, nil, &p)
	assert.Equal(t, []string{"a follow-up to myself", "a post", "an answer", "a question"}, edgeTexts(p.Inbox.Edges), "following both, one sees the answer")
	assert.Equal(t, 4, p.Inbox.TotalCount)
	e.mustExec(t, answered, q, nil, &p)
	assert.Equal(t, []string{"a follow-up to myself", "a post", "an answer", "a question"}, edgeTexts(p.Inbox.Edges), "the answered user sees the answer, and their own question")
	assert.Equal(t, 3, p.Inbox.TotalCount, "one's own question is not counted")
	e.mustExec(t, onlyA, q, nil, &p)
	assert.Equal(t, []string{"a follow-up to myself", "a post"}, edgeTexts(p.Inbox.Edges), "following the author alone, one does not see the answer")
	assert.Equal(t, 2, p.Inbox.TotalCount)
	assert.Equal(t, 2, p.Inbox.UnreadCount)

	// The first event the left-out follower gets is the post's, not the answer's.
	ev := next(t, sub).InboxEvents
	assert.Equal(t, "ADDED", ev.Type)
	require.NotNil(t, ev.Message)
	assert.Equal(t, "a post", ev.Message.Text)
	ev = next(t, sub).InboxEvents
	require.NotNil(t, ev.Message)
	assert.Equal(t, "a follow-up to myself", ev.Message.Text)
}
