package graph_test

import (
	"strings"
	"testing"
	"time"

	"github.com/99designs/gqlgen/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
)

// convMessage is a conversation message as a client reads it.
type convMessage struct {
	ID             string  `json:"id"`
	ConversationID string  `json:"conversationId"`
	Seq            int     `json:"seq"`
	Text           string  `json:"text"`
	Deleted        bool    `json:"deleted"`
	EditedAt       *string `json:"editedAt"`
	Author         *struct {
		Handle string `json:"handle"`
	} `json:"author"`
}

const convMessageFields = `id conversationId seq text deleted editedAt author { handle }`

// conversation is a conversation as a client reads it.
type conversation struct {
	ID          string  `json:"id"`
	IsGroup     bool    `json:"isGroup"`
	Name        *string `json:"name"`
	MemberCount int     `json:"memberCount"`
	Members     []struct {
		Handle string `json:"handle"`
	} `json:"members"`
	Admins []struct {
		Handle string `json:"handle"`
	} `json:"admins"`
	Peer *struct {
		Handle string `json:"handle"`
	} `json:"peer"`
	LastMessage   *convMessage `json:"lastMessage"`
	UnreadCount   int          `json:"unreadCount"`
	ReadPositions []struct {
		Member struct {
			Handle string `json:"handle"`
		} `json:"member"`
		Seq int `json:"seq"`
	} `json:"readPositions"`
}

const conversationFields = `id isGroup name memberCount members { handle } admins { handle } peer { handle }
	lastMessage { ` + convMessageFields + ` } unreadCount readPositions { member { handle } seq }`

// conversationListFields is what a list of conversations shows of each:
// members cost as the largest group, so a list shows peer or name.
const conversationListFields = `id isGroup name memberCount peer { handle } lastMessage { ` + convMessageFields + ` } unreadCount`

func (c conversation) handles() []string {
	out := []string{}
	for _, m := range c.Members {
		out = append(out, m.Handle)
	}
	return out
}

// readSeqs maps each member's handle to its read position.
func (c conversation) readSeqs() map[string]int {
	out := map[string]int{}
	for _, p := range c.ReadPositions {
		out[p.Member.Handle] = p.Seq
	}
	return out
}

func sendDM(t *testing.T, e *env, token, to, text string) convMessage {
	t.Helper()
	var r struct {
		M convMessage `json:"sendDirectMessage"`
	}
	e.mustExec(t, token, `mutation($to: ID!, $t: String!) { sendDirectMessage(to: $to, text: $t) { `+convMessageFields+` } }`, map[string]any{"to": to, "t": text}, &r)
	return r.M
}

func sendTo(t *testing.T, e *env, token, conv, text string) convMessage {
	t.Helper()
	var r struct {
		M convMessage `json:"sendGroupMessage"`
	}
	e.mustExec(t, token, `mutation($c: ID!, $t: String!) { sendGroupMessage(conversationId: $c, text: $t) { `+convMessageFields+` } }`, map[string]any{"c": conv, "t": text}, &r)
	return r.M
}

func createGroup(t *testing.T, e *env, token, name string, members ...string) conversation {
	t.Helper()
	var r struct {
		C conversation `json:"createGroup"`
	}
	e.mustExec(t, token, `mutation($n: String!, $m: [ID!]!) { createGroup(name: $n, memberIds: $m) { `+conversationFields+` } }`, map[string]any{"n": name, "m": members}, &r)
	return r.C
}

func readConversation(t *testing.T, e *env, token, id string) conversation {
	t.Helper()
	var r struct {
		C conversation `json:"conversation"`
	}
	e.mustExec(t, token, `query($id: ID!) { conversation(id: $id) { `+conversationFields+` } }`, map[string]any{"id": id}, &r)
	return r.C
}

type convPage struct {
	Edges []struct {
		Cursor string       `json:"cursor"`
		Node   conversation `json:"node"`
	} `json:"edges"`
	PageInfo pageInfoJSON `json:"pageInfo"`
}

const pageInfoFields = `pageInfo { hasNextPage hasPreviousPage startCursor endCursor }`

func listConversations(t *testing.T, e *env, token string, vars map[string]any) convPage {
	t.Helper()
	var r struct {
		C convPage `json:"conversations"`
	}
	e.mustExec(t, token, `query($first: Int, $after: String, $last: Int, $before: String) { conversations(first: $first, after: $after, last: $last, before: $before) {
		edges { cursor node { `+conversationListFields+` } } `+pageInfoFields+` } }`, vars, &r)
	return r.C
}

type msgPage struct {
	Edges []struct {
		Cursor string      `json:"cursor"`
		Node   convMessage `json:"node"`
	} `json:"edges"`
	PageInfo pageInfoJSON `json:"pageInfo"`
}

func (p msgPage) texts() []string {
	out := []string{}
	for _, e := range p.Edges {
		out = append(out, e.Node.Text)
	}
	return out
}

func listMessages(t *testing.T, e *env, token, conv string, vars map[string]any) msgPage {
	t.Helper()
	all := map[string]any{"id": conv}
	for k, v := range vars {
		all[k] = v
	}
	var r struct {
		C struct {
			Messages msgPage `json:"messages"`
		} `json:"conversation"`
	}
	e.mustExec(t, token, `query($id: ID!, $first: Int, $after: String, $last: Int, $before: String) { conversation(id: $id) {
		messages(first: $first, after: $after, last: $last, before: $before) { edges { cursor node { `+convMessageFields+` } } `+pageInfoFields+` } } }`, all, &r)
	return r.C.Messages
}

func unreadTotal(t *testing.T, e *env, token string) int {
	t.Helper()
	var r struct {
		N int `json:"conversationsUnreadCount"`
	}
	e.mustExec(t, token, `{ conversationsUnreadCount }`, nil, &r)
	return r.N
}

// nodeKind returns the __typename node and nodes give id as the token's
// user reads it ("" for null); the two must agree.
func nodeKind(t *testing.T, e *env, token, id string) string {
	t.Helper()
	var r struct {
		Node *struct {
			Typename string `json:"__typename"`
		} `json:"node"`
		Nodes []*struct {
			Typename string `json:"__typename"`
		} `json:"nodes"`
	}
	e.mustExec(t, token, `query($id: ID!) { node(id: $id) { __typename } nodes(ids: [$id]) { __typename } }`, map[string]any{"id": id}, &r)
	require.Len(t, r.Nodes, 1)
	if r.Node == nil {
		assert.Nil(t, r.Nodes[0], "nodes agrees with node")
		return ""
	}
	require.NotNil(t, r.Nodes[0])
	assert.Equal(t, r.Node.Typename, r.Nodes[0].Typename)
	return r.Node.Typename
}

func TestConversations_Direct(t *testing.T) { forBackends(t, testConversationsDirect) }

func testConversationsDirect(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")

	hi := sendDM(t, e, alice, bobID, "hi bob")
	assert.Equal(t, 1, hi.Seq)
	assert.Equal(t, "hi bob", hi.Text)
	assert.Equal(t, "alice", hi.Author.Handle)
	conv := hi.ConversationID

	assert.Equal(t, 1, unreadTotal(t, e, bob))
	assert.Equal(t, 0, unreadTotal(t, e, alice), "one's own message is read")

	page := listConversations(t, e, bob, nil)
	require.Len(t, page.Edges, 1)
	c := page.Edges[0].Node
	assert.Equal(t, conv, c.ID)
	assert.False(t, c.IsGroup)
	assert.Nil(t, c.Name)
	require.NotNil(t, c.Peer)
	assert.Equal(t, "alice", c.Peer.Handle)
	assert.Equal(t, 2, c.MemberCount)
	require.NotNil(t, c.LastMessage)
	assert.Equal(t, hi.ID, c.LastMessage.ID)
	assert.Equal(t, 1, c.UnreadCount)
	one := readConversation(t, e, bob, conv)
	assert.Equal(t, []string{"alice", "bob"}, one.handles())
	assert.Empty(t, one.Admins)
	assert.Equal(t, map[string]int{"alice": 1, "bob": 0}, one.readSeqs())
	one.Members, one.Admins, one.ReadPositions = nil, nil, nil
	assert.Equal(t, c, one, "the conversation reads the same alone as in the list")

	// Either member answers through the conversation's id.
	yo := sendTo(t, e, bob, conv, "yo")
	assert.Equal(t, 2, yo.Seq)
	assert.Equal(t, 1, unreadTotal(t, e, alice))
	assert.Equal(t, 0, unreadTotal(t, e, bob), "sending reads up to one's message")

	// Reads: up to a message, then to the newest; never back.
	third := sendDM(t, e, alice, bobID, "three")
	assert.Equal(t, 1, unreadTotal(t, e, bob))
	var r struct {
		M conversation `json:"markConversationRead"`
	}
	e.mustExec(t, alice, `mutation($id: ID!, $up: ID) { markConversationRead(id: $id, upTo: $up) { `+conversationFields+` } }`, map[string]any{"id": conv, "up": yo.ID}, &r)
	assert.Equal(t, 0, r.M.UnreadCount)
	assert.Equal(t, 3, r.M.readSeqs()["alice"], "her own message stays read")
	e.mustExec(t, bob, `mutation($id: ID!) { markConversationRead(id: $id) { `+conversationFields+` } }`, map[string]any{"id": conv}, &r)
	assert.Equal(t, 0, r.M.UnreadCount)
	assert.Equal(t, map[string]int{"alice": 3, "bob": 3}, r.M.readSeqs(), "the read receipt")
	assert.Equal(t, 0, unreadTotal(t, e, bob))
	assert.Equal(t, map[string]int{"alice": 3, "bob": 3}, readConversation(t, e, alice, conv).readSeqs(), "the other member sees it")
	e.mustExec(t, bob, `mutation($id: ID!, $up: ID) { markConversationRead(id: $id, upTo: $up) { unreadCount } }`, map[string]any{"id": conv, "up": hi.ID}, &r)
	assert.Equal(t, 3, readConversation(t, e, bob, conv).readSeqs()["bob"], "a read position never moves back")

	// Edit and delete one's own message; others' are FORBIDDEN.
	var ed struct {
		M convMessage `json:"editConversationMessage"`
	}
	e.mustExec(t, alice, `mutation($id: ID!) { editConversationMessage(id: $id, text: "three!") { `+convMessageFields+` } }`, map[string]any{"id": third.ID}, &ed)
	assert.Equal(t, "three!", ed.M.Text)
	assert.NotNil(t, ed.M.EditedAt)
	assert.Equal(t, "FORBIDDEN", e.errCode(t, bob, `mutation($id: ID!) { editConversationMessage(id: $id, text: "mine") { id } }`, map[string]any{"id": third.ID}))
	assert.Equal(t, "FORBIDDEN", e.errCode(t, bob, `mutation($id: ID!) { deleteConversationMessage(id: $id) }`, map[string]any{"id": third.ID}))
	assert.Equal(t, "three!", readConversation(t, e, bob, conv).LastMessage.Text, "the list's last message shows the edit")

	four := sendDM(t, e, alice, bobID, "four")
	assert.Equal(t, 1, unreadTotal(t, e, bob))
	var del struct {
		ID string `json:"deleteConversationMessage"`
	}
	e.mustExec(t, alice, `mutation($id: ID!) { deleteConversationMessage(id: $id) }`, map[string]any{"id": four.ID}, &del)
	assert.Equal(t, four.ID, del.ID)
	assert.Equal(t, 1, unreadTotal(t, e, bob), "a deleted message keeps its place, and the counts theirs")
	msgs := listMessages(t, e, bob, conv, nil)
	assert.Equal(t, []string{"", "three!", "yo", "hi bob"}, msgs.texts())
	assert.True(t, msgs.Edges[0].Node.Deleted)
	assert.Equal(t, "NOT_FOUND", e.errCode(t, alice, `mutation($id: ID!) { editConversationMessage(id: $id, text: "back") { id } }`, map[string]any{"id": four.ID}), "a deleted message is not edited")
	e.mustExec(t, bob, `mutation($id: ID!) { markConversationRead(id: $id) { id } }`, map[string]any{"id": conv}, nil)
	assert.Equal(t, 0, unreadTotal(t, e, bob))

	// Node ids resolve for members only.
	assert.Equal(t, "Conversation", nodeKind(t, e, bob, conv))
	assert.Equal(t, "ConversationMessage", nodeKind(t, e, bob, hi.ID))
	assert.Equal(t, "", nodeKind(t, e, carol, conv), "not a member: null")
	assert.Equal(t, "", nodeKind(t, e, carol, hi.ID))
	assert.Equal(t, "", nodeKind(t, e, "", conv), "anonymous: null")

	// A non-member finds nothing: the conversation, its messages, sending,
	// marking, editing.
	vars := map[string]any{"id": conv}
	for _, q := range []string{
		`query($id: ID!) { conversation(id: $id) { id } }`,
		`mutation($id: ID!) { sendGroupMessage(conversationId: $id, text: "let me in") { id } }`,
		`mutation($id: ID!) { markConversationRead(id: $id) { id } }`,
	} {
		assert.Equal(t, "NOT_FOUND", e.errCode(t, carol, q, vars), q)
	}
	assert.Equal(t, "NOT_FOUND", e.errCode(t, carol, `mutation($id: ID!) { editConversationMessage(id: $id, text: "x") { id } }`, map[string]any{"id": hi.ID}))
	assert.Empty(t, listConversations(t, e, carol, nil).Edges)
	assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, bob, `query { conversation(id: "nope") { id } }`, nil))
	assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, bob, `query($id: ID!) { conversation(id: $id) { id } }`, map[string]any{"id": hi.ID}), "a message id is no conversation id")
}

func TestConversations_Refusals(t *testing.T) { forBackends(t, testConversationsRefusals) }

func testConversationsRefusals(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	dm := `mutation($to: ID!, $t: String!) { sendDirectMessage(to: $to, text: $t) { id } }`
	send := func(token, to, text string) string {
		_, errs := e.exec(t, token, dm, map[string]any{"to": to, "t": text})
		if len(errs) == 0 {
			return ""
		}
		return errs[0].Extensions.Code
	}

	assert.Equal(t, "UNAUTHENTICATED", send("", bobID, "hi"))
	for _, q := range []string{`{ conversations { edges { cursor } } }`, `{ conversationsUnreadCount }`,
		`mutation { setMessagesFrom(policy: NOBODY) { id } }`, `mutation { createGroup(name: "g", memberIds: []) { id } }`} {
		assert.Equal(t, "UNAUTHENTICATED", e.errCode(t, "", q, nil), q)
	}
	assert.Equal(t, "BAD_USER_INPUT", send(alice, bobID, strings.Repeat("x", 5001)), "text as long as a post's at most")
	assert.Equal(t, "BAD_USER_INPUT", send(alice, bobID, "   "))
	assert.Equal(t, "BAD_USER_INPUT", send(alice, aliceID, "me"))
	assert.Equal(t, "", send(alice, bobID, strings.Repeat("x", 5000)))

	// The recipient's setting.
	var u struct {
		U struct {
			MessagesFrom string `json:"messagesFrom"`
		} `json:"setMessagesFrom"`
	}
	e.mustExec(t, bob, `mutation { setMessagesFrom(policy: NOBODY) { messagesFrom } }`, nil, &u)
	assert.Equal(t, "NOBODY", u.U.MessagesFrom)
	assert.Equal(t, "FORBIDDEN", send(alice, bobID, "hi"), "in an existing conversation too")
	assert.Equal(t, "FORBIDDEN", send(carol, bobID, "hi"))
	e.mustExec(t, bob, `mutation { setMessagesFrom(policy: FOLLOWING) { messagesFrom } }`, nil, &u)
	assert.Equal(t, "FOLLOWING", u.U.MessagesFrom)
	var viewer struct {
		User struct {
			MessagesFrom string `json:"messagesFrom"`
		} `json:"user"`
	}
	e.mustExec(t, carol, `{ user(handle: "bob") { messagesFrom } }`, nil, &viewer)
	assert.Equal(t, "FOLLOWING", viewer.User.MessagesFrom, "others see it")
	assert.Equal(t, "FORBIDDEN", send(carol, bobID, "hi"))
	mustFollow(t, e, carol, bobID)
	assert.Equal(t, "FORBIDDEN", send(carol, bobID, "hi"), "being a follower is not enough")
	mustFollow(t, e, bob, carolID)
	assert.Equal(t, "", send(carol, bobID, "hi"), "bob follows carol")
	e.mustExec(t, bob, `mutation { setMessagesFrom(policy: EVERYONE) { messagesFrom } }`, nil, &u)
	assert.Equal(t, "", send(alice, bobID, "hi again"))

	// Blocks, either way.
	e.mustExec(t, bob, `mutation($id: ID!) { block(userId: $id) { id } }`, map[string]any{"id": aliceID}, nil)
	assert.Equal(t, "FORBIDDEN", send(alice, bobID, "hi"))
	assert.Equal(t, "FORBIDDEN", send(bob, aliceID, "hi"))
	assert.Equal(t, "NOT_FOUND", send(alice, fakeGlobalID("User"), "hi"))
}

func TestConversations_Groups(t *testing.T) { forBackends(t, testConversationsGroups) }

func testConversationsGroups(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	dave, daveID := mustSignUp(t, e, "dave")

	g := createGroup(t, e, alice, "  trip  ", bobID)
	assert.True(t, g.IsGroup)
	require.NotNil(t, g.Name)
	assert.Equal(t, "trip", *g.Name)
	assert.Nil(t, g.Peer)
	assert.Nil(t, g.LastMessage)
	assert.Equal(t, []string{"alice", "bob"}, g.handles())
	assert.Equal(t, "alice", g.Admins[0].Handle)
	assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, `mutation { createGroup(name: " ", memberIds: []) { id } }`, nil))
	assert.Equal(t, "NOT_FOUND", e.errCode(t, alice, `mutation($m: [ID!]!) { createGroup(name: "x", memberIds: $m) { id } }`, map[string]any{"m": []string{fakeGlobalID("User")}}))

	add := `mutation($c: ID!, $u: [ID!]!) { addMembers(conversationId: $c, userIds: $u) { ` + conversationFields + ` } }`
	remove := `mutation($c: ID!, $u: ID!) { removeMember(conversationId: $c, userId: $u) { ` + conversationFields + ` } }`
	assert.Equal(t, "FORBIDDEN", e.errCode(t, bob, add, map[string]any{"c": g.ID, "u": []string{carolID}}), "bob is no admin")
	assert.Equal(t, "NOT_FOUND", e.errCode(t, carol, add, map[string]any{"c": g.ID, "u": []string{carolID}}), "carol is no member")
	assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, add, map[string]any{"c": g.ID, "u": []string{}}), "no one to add")
	var r struct {
		Add    conversation `json:"addMembers"`
		Remove conversation `json:"removeMember"`
	}
	e.mustExec(t, alice, add, map[string]any{"c": g.ID, "u": []string{carolID, daveID}}, &r)
	assert.Equal(t, []string{"alice", "bob", "carol", "dave"}, r.Add.handles())

	sendTo(t, e, bob, g.ID, "one")
	sendTo(t, e, carol, g.ID, "two")
	assert.Equal(t, 2, unreadTotal(t, e, dave))
	assert.Equal(t, 1, unreadTotal(t, e, bob))

	assert.Equal(t, "FORBIDDEN", e.errCode(t, bob, remove, map[string]any{"c": g.ID, "u": carolID}))
	e.mustExec(t, alice, remove, map[string]any{"c": g.ID, "u": daveID}, &r)
	assert.Equal(t, []string{"alice", "bob", "carol"}, r.Remove.handles())
	assert.Equal(t, "NOT_FOUND", e.errCode(t, alice, remove, map[string]any{"c": g.ID, "u": daveID}), "no longer a member")
	// dave lost it all at once.
	assert.Equal(t, "NOT_FOUND", e.errCode(t, dave, `query($id: ID!) { conversation(id: $id) { id } }`, map[string]any{"id": g.ID}))
	assert.Equal(t, "NOT_FOUND", e.errCode(t, dave, `mutation($id: ID!) { sendGroupMessage(conversationId: $id, text: "hey") { id } }`, map[string]any{"id": g.ID}))
	assert.Empty(t, listConversations(t, e, dave, nil).Edges)
	assert.Equal(t, "", nodeKind(t, e, dave, g.ID))

	var left struct {
		ID string `json:"leaveConversation"`
	}
	e.mustExec(t, carol, `mutation($id: ID!) { leaveConversation(conversationId: $id) }`, map[string]any{"id": g.ID}, &left)
	assert.Equal(t, g.ID, left.ID)
	assert.Equal(t, []string{"alice", "bob"}, readConversation(t, e, alice, g.ID).handles())
	assert.Equal(t, 0, unreadTotal(t, e, carol), "a conversation one left has nothing unread")

	direct := sendDM(t, e, alice, bobID, "psst").ConversationID
	assert.Equal(t, "BAD_USER_INPUT", e.errCode(t, alice, `mutation($id: ID!) { leaveConversation(conversationId: $id) }`, map[string]any{"id": direct}))
	// The list: most recently active first.
	page := listConversations(t, e, bob, nil)
	require.Len(t, page.Edges, 2)
	assert.Equal(t, direct, page.Edges[0].Node.ID)
	assert.Equal(t, g.ID, page.Edges[1].Node.ID)
	assert.Equal(t, "two", page.Edges[1].Node.LastMessage.Text)
	sendTo(t, e, alice, g.ID, "three")
	page = listConversations(t, e, bob, nil)
	assert.Equal(t, g.ID, page.Edges[0].Node.ID, "a new message moves its conversation to the top")
	assert.Equal(t, 2, page.Edges[0].Node.UnreadCount)
	assert.Equal(t, 1, page.Edges[1].Node.UnreadCount)
	assert.Equal(t, 3, unreadTotal(t, e, bob))
}

func TestConversations_Paging(t *testing.T) { forBackends(t, testConversationsPaging) }

func testConversationsPaging(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	var conv string
	for _, text := range []string{"1", "2", "3", "4", "5"} {
		conv = sendDM(t, e, alice, bobID, text).ConversationID
	}
	p := listMessages(t, e, bob, conv, map[string]any{"first": 2})
	assert.Equal(t, []string{"5", "4"}, p.texts())
	assert.True(t, p.PageInfo.HasNextPage)
	p = listMessages(t, e, bob, conv, map[string]any{"first": 2, "after": *p.PageInfo.EndCursor})
	assert.Equal(t, []string{"3", "2"}, p.texts())
	p = listMessages(t, e, bob, conv, map[string]any{"first": 2, "after": *p.PageInfo.EndCursor})
	assert.Equal(t, []string{"1"}, p.texts())
	assert.False(t, p.PageInfo.HasNextPage)
	// Backward: the newer ones, before a cursor.
	p = listMessages(t, e, bob, conv, map[string]any{"last": 2, "before": p.Edges[0].Cursor})
	assert.Equal(t, []string{"3", "2"}, p.texts())
	assert.True(t, p.PageInfo.HasPreviousPage)
	p = listMessages(t, e, bob, conv, map[string]any{"last": 2, "before": *p.PageInfo.StartCursor})
	assert.Equal(t, []string{"5", "4"}, p.texts())
	assert.False(t, p.PageInfo.HasPreviousPage)
	p = listMessages(t, e, bob, conv, map[string]any{"last": 2})
	assert.Equal(t, []string{"2", "1"}, p.texts(), "the oldest")

	_, errs := e.exec(t, bob, `query($id: ID!) { conversation(id: $id) { messages(first: 1, last: 1) { edges { cursor } } } }`, map[string]any{"id": conv})
	require.NotEmpty(t, errs)
	assert.Equal(t, "BAD_USER_INPUT", errs[0].Extensions.Code)
	cp := listConversations(t, e, bob, map[string]any{"first": 1})
	require.Len(t, cp.Edges, 1)
	_, errs = e.exec(t, bob, `query($id: ID!, $c: String!) { conversation(id: $id) { messages(after: $c) { edges { cursor } } } }`, map[string]any{"id": conv, "c": cp.Edges[0].Cursor})
	require.NotEmpty(t, errs)
	assert.Equal(t, "BAD_USER_INPUT", errs[0].Extensions.Code, "a conversation cursor is no message cursor")

	// Conversations: three, paged both ways.
	carol, carolID := mustSignUp(t, e, "carol")
	_ = carol
	sendDM(t, e, bob, carolID, "c")
	g := createGroup(t, e, bob, "g", carolID)
	sendTo(t, e, bob, g.ID, "g")
	cp = listConversations(t, e, bob, map[string]any{"first": 2})
	require.Len(t, cp.Edges, 2)
	assert.Equal(t, g.ID, cp.Edges[0].Node.ID)
	assert.True(t, cp.PageInfo.HasNextPage)
	rest := listConversations(t, e, bob, map[string]any{"first": 2, "after": *cp.PageInfo.EndCursor})
	require.Len(t, rest.Edges, 1)
	assert.Equal(t, conv, rest.Edges[0].Node.ID)
	assert.False(t, rest.PageInfo.HasNextPage)
	back := listConversations(t, e, bob, map[string]any{"last": 2, "before": rest.Edges[0].Cursor})
	require.Len(t, back.Edges, 2)
	assert.Equal(t, cp.Edges[0].Node.ID, back.Edges[0].Node.ID)
	assert.Equal(t, cp.Edges[1].Node.ID, back.Edges[1].Node.ID)
}

// TestConversations_Limits: the new root fields are costed, connections by
// their page size, members as the largest group.
func TestConversations_Limits(t *testing.T) {
	forBackends(t, func(t *testing.T) {
		e := newEnv(t, func(c *graph.Config) { c.ComplexityLimit = 250 })
		alice, _ := mustSignUp(t, e, "alice")
		_, bobID := mustSignUp(t, e, "bob")
		conv := sendDM(t, e, alice, bobID, "hi").ConversationID
		e.mustExec(t, alice, `{ conversations(first: 5) { edges { node { id name peer { handle } } } } }`, nil, nil)
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, alice, `{ conversations(first: 100) { edges { node { id name peer { handle } } } } }`, nil))
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, alice, `{ conversations(first: 1) { edges { node { members { handle } } } } }`, nil), "members cost as the largest group")
		vars := map[string]any{"id": conv}
		e.mustExec(t, alice, `query($id: ID!) { conversation(id: $id) { messages(first: 20) { edges { node { text author { handle } } } } } }`, vars, nil)
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, alice, `query($id: ID!) { conversation(id: $id) { messages(first: 100) { edges { node { text author { handle } } } } } }`, vars))
	})
}

// TestConversations_RateLimit: each conversation mutation takes a token
// of its user's bucket, and each query its cost of the query bucket.
func TestConversations_RateLimit(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, _ := rateEnv(t, graph.RateLimits{User: graph.Rate{Count: 2, Per: time.Hour, Burst: 2}})
		alice, _ := mustSignUp(t, e, "alice")
		_, bobID := mustSignUp(t, e, "bob")
		const addr = "192.0.2.1:1234"
		send := `{"query":"mutation { sendDirectMessage(to: \"` + bobID + `\", text: \"hi\") { id } }"}`
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, send))
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, `{"query":"mutation { setMessagesFrom(policy: EVERYONE) { id } }"}`))
		requireLimited(t, rlPost(t, h, mtGQL, alice, addr, send), mtGQL, 1800)
		requireLimited(t, rlPost(t, h, mtGQL, alice, addr, `{"query":"mutation { createGroup(name: \"g\", memberIds: []) { id } }"}`), mtGQL, 1800)
	})
	t.Run(backendMongo, func(t *testing.T) {
		// Queries spend their cost: a page of 30 conversations is about 90
		// points of 100, so the second is refused.
		e, h, _ := rateEnv(t, graph.RateLimits{QueryUser: graph.Rate{Count: 100, Per: time.Hour, Burst: 100}})
		alice, _ := mustSignUp(t, e, "alice")
		const addr = "192.0.2.1:1234"
		list := `{"query":"{ conversations(first: 30) { edges { node { id } } } }"}`
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, list))
		r := rlPost(t, h, mtGQL, alice, addr, list)
		assert.Equal(t, graph.CodeRateLimited, r.code(t), r.Raw)
	})
}

type convEvent struct {
	ConversationEvents struct {
		Type           string `json:"type"`
		ConversationID string `json:"conversationId"`
		Edge           *struct {
			Cursor string      `json:"cursor"`
			Node   convMessage `json:"node"`
		} `json:"edge"`
		Message          *convMessage `json:"message"`
		DeletedMessageID *string      `json:"deletedMessageId"`
		Member           *struct {
			Handle string `json:"handle"`
		} `json:"member"`
		ReadSeq      *int `json:"readSeq"`
		Conversation *struct {
			ID      string `json:"id"`
			Members []struct {
				Handle string `json:"handle"`
			} `json:"members"`
		} `json:"conversation"`
		UnreadCount int    `json:"unreadCount"`
		Cursor      string `json:"cursor"`
	} `json:"conversationEvents"`
}

const conversationEventsQuery = `subscription($after: String) { conversationEvents(after: $after) { type conversationId
	edge { cursor node { ` + convMessageFields + ` } } message { ` + convMessageFields + ` } deletedMessageId
	member { handle } readSeq conversation { id members { handle } } unreadCount cursor } }`

// fields lists which of an event's type-specific fields are set, so that a
// test checks each type sets its own and no others.
func (ev convEvent) fields() []string {
	e := ev.ConversationEvents
	out := []string{}
	for _, f := range []struct {
		name string
		set  bool
	}{{"edge", e.Edge != nil}, {"message", e.Message != nil}, {"deletedMessageId", e.DeletedMessageID != nil},
		{"member", e.Member != nil}, {"readSeq", e.ReadSeq != nil}, {"conversation", e.Conversation != nil}} {
		if f.set {
			out = append(out, f.name)
		}
	}
	return out
}

func TestSubscription_ConversationEvents(t *testing.T) {
	forBackends(t, testSubscriptionConversationEvents)
}

func testSubscriptionConversationEvents(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")

	subscribe := func(token string, after string) *client.Subscription {
		vars := map[string]any{}
		if after != "" {
			vars["after"] = after
		}
		sub := e.client.Websocket(conversationEventsQuery, opts(token, vars)...)
		t.Cleanup(func() { _ = sub.Close() })
		return sub
	}
	bobSub := subscribe(bob, "")
	carolSub := subscribe(carol, "")
	inbox := e.client.Websocket(inboxEventsQuery, opts(bob, nil)...)
	t.Cleanup(func() { _ = inbox.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 3 }, 5*time.Second, 5*time.Millisecond, "the subscriptions did not register")
	recv := func(sub *client.Subscription) convEvent {
		t.Helper()
		return nextOf[convEvent](t, sub)
	}

	hi := sendDM(t, e, alice, bobID, "hi")
	ev := recv(bobSub)
	assert.Equal(t, "MESSAGE", ev.ConversationEvents.Type)
	assert.Equal(t, []string{"edge"}, ev.fields())
	assert.Equal(t, hi.ConversationID, ev.ConversationEvents.ConversationID)
	assert.Equal(t, hi.ID, ev.ConversationEvents.Edge.Node.ID)
	assert.Equal(t, "hi", ev.ConversationEvents.Edge.Node.Text)
	assert.Equal(t, 1, ev.ConversationEvents.UnreadCount)
	page := listMessages(t, e, bob, hi.ConversationID, nil)
	assert.Equal(t, page.Edges[0].Cursor, ev.ConversationEvents.Edge.Cursor, "the edge is the one the connection gives")
	firstCursor := ev.ConversationEvents.Cursor

	e.mustExec(t, alice, `mutation($id: ID!) { editConversationMessage(id: $id, text: "hi!") { id } }`, map[string]any{"id": hi.ID}, nil)
	ev = recv(bobSub)
	assert.Equal(t, "EDITED", ev.ConversationEvents.Type)
	assert.Equal(t, []string{"message"}, ev.fields())
	assert.Equal(t, "hi!", ev.ConversationEvents.Message.Text)

	e.mustExec(t, bob, `mutation($id: ID!) { markConversationRead(id: $id) { id } }`, map[string]any{"id": hi.ConversationID}, nil)
	ev = recv(bobSub)
	assert.Equal(t, "READ", ev.ConversationEvents.Type, "the reader's other devices learn it")
	assert.Equal(t, []string{"member", "readSeq"}, ev.fields())
	assert.Equal(t, "bob", ev.ConversationEvents.Member.Handle)
	assert.Equal(t, 1, *ev.ConversationEvents.ReadSeq)
	assert.Equal(t, 0, ev.ConversationEvents.UnreadCount)

	e.mustExec(t, alice, `mutation($id: ID!) { deleteConversationMessage(id: $id) }`, map[string]any{"id": hi.ID}, nil)
	ev = recv(bobSub)
	assert.Equal(t, "DELETED", ev.ConversationEvents.Type)
	assert.Equal(t, []string{"deletedMessageId"}, ev.fields())
	assert.Equal(t, hi.ID, *ev.ConversationEvents.DeletedMessageID)

	// A group: each member learns it joined, with the group.
	g := createGroup(t, e, alice, "g", bobID, carolID)
	for _, sub := range []*client.Subscription{bobSub, carolSub} {
		ev = recv(sub)
		assert.Equal(t, "MEMBER_ADDED", ev.ConversationEvents.Type)
		assert.Equal(t, []string{"member", "conversation"}, ev.fields())
		assert.Equal(t, g.ID, ev.ConversationEvents.Conversation.ID)
		assert.Len(t, ev.ConversationEvents.Conversation.Members, 3)
	}
	one := sendTo(t, e, bob, g.ID, "one")
	assert.Equal(t, one.ID, recv(carolSub).ConversationEvents.Edge.Node.ID)
	assert.Equal(t, one.ID, recv(bobSub).ConversationEvents.Edge.Node.ID, "the sender's other devices")
	// A read receipt reaches the other members.
	e.mustExec(t, carol, `mutation($id: ID!) { markConversationRead(id: $id) { id } }`, map[string]any{"id": g.ID}, nil)
	for _, sub := range []*client.Subscription{bobSub, carolSub} {
		ev = recv(sub)
		assert.Equal(t, "READ", ev.ConversationEvents.Type)
		assert.Equal(t, "carol", ev.ConversationEvents.Member.Handle)
	}

	// carol is removed: she gets her MEMBER_REMOVED, with no conversation,
	// and nothing after.
	e.mustExec(t, alice, `mutation($c: ID!, $u: ID!) { removeMember(conversationId: $c, userId: $u) { id } }`, map[string]any{"c": g.ID, "u": carolID}, nil)
	ev = recv(carolSub)
	assert.Equal(t, "MEMBER_REMOVED", ev.ConversationEvents.Type)
	assert.Equal(t, []string{"member"}, ev.fields())
	assert.Equal(t, "carol", ev.ConversationEvents.Member.Handle)
	ev = recv(bobSub)
	assert.Equal(t, "MEMBER_REMOVED", ev.ConversationEvents.Type)
	assert.Equal(t, "carol", ev.ConversationEvents.Member.Handle)
	require.NotNil(t, ev.ConversationEvents.Conversation)
	assert.Len(t, ev.ConversationEvents.Conversation.Members, 2)
	sendTo(t, e, alice, g.ID, "after carol")
	assert.Equal(t, "after carol", recv(bobSub).ConversationEvents.Edge.Node.Text)
	// carol's next event is from her own direct conversation: nothing of
	// the group came between.
	sendDM(t, e, bob, carolID, "still there?")
	ev = recv(carolSub)
	assert.Equal(t, "still there?", ev.ConversationEvents.Edge.Node.Text)
	assert.Equal(t, recv(bobSub).ConversationEvents.Edge.Node.ID, ev.ConversationEvents.Edge.Node.ID)

	// The inbox subscription saw none of it.
	mustPost(t, e, bob, "a post")
	assert.Equal(t, "ADDED", next(t, inbox).InboxEvents.Type)

	// Resuming replays what came since a cursor.
	resumed := subscribe(bob, firstCursor)
	for _, want := range []string{"EDITED", "READ", "DELETED", "MEMBER_ADDED", "MESSAGE"} {
		assert.Equal(t, want, recv(resumed).ConversationEvents.Type)
	}

	unauth := e.client.Websocket(conversationEventsQuery)
	t.Cleanup(func() { _ = unauth.Close() })
	var none convEvent
	err := unauth.Next(&none)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "UNAUTHENTICATED")
}

// TestConversations_Batching: a page of messages loads its authors in one
// batch, a page of conversations its peers.
func TestConversations_Batching(t *testing.T) { forBackends(t, testConversationsBatching) }

func testConversationsBatching(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	_, carolID := mustSignUp(t, e, "carol")
	g := createGroup(t, e, alice, "g", bobID, carolID)
	for range 3 {
		sendTo(t, e, alice, g.ID, "a")
		sendTo(t, e, bob, g.ID, "b")
	}
	e.backend.Reset()
	p := listMessages(t, e, bob, g.ID, nil)
	require.Len(t, p.Edges, 6)
	c, calls := e.backend.Snapshot()
	assert.Equal(t, int64(1), c["FindUsersByIDs"], "the authors in one batch")
	t.Logf("conversation(id) { messages }: %d FindConversations, %d ListConversationMessages, %d storage calls in all", c["FindConversations"], c["ListConversationMessages"], calls)
	assert.Equal(t, int64(1), c["FindConversations"], "one read of the conversation: messages use the one conversation loaded, with its membership check")
	assert.Equal(t, int64(1), c["ListConversationMessages"])
	outsider, _ := mustSignUp(t, e, "outsider")
	assert.Equal(t, "NOT_FOUND", e.errCode(t, outsider, `query($id: ID!) { conversation(id: $id) { messages { edges { cursor } } } }`, map[string]any{"id": g.ID}), "a non-member still gets NOT_FOUND")

	// A list of direct conversations loads its peers and last authors in
	// one batch, whatever its length.
	for _, h := range []string{"dave", "erin", "frank"} {
		_, id := mustSignUp(t, e, h)
		sendDM(t, e, bob, id, "hello "+h)
	}
	e.backend.Reset()
	cp := listConversations(t, e, bob, nil)
	require.Len(t, cp.Edges, 4)
	c, _ = e.backend.Snapshot()
	assert.Equal(t, int64(1), c["FindUsersByIDs"], "the peers and authors in one batch")
	assert.Equal(t, int64(1), c["ListConversations"])

	assert.Equal(t, "NOT_FOUND", e.errCode(t, bob, `mutation($c: ID!, $u: ID!) { removeMember(conversationId: $c, userId: $u) { messages { edges { cursor } } } }`, map[string]any{"c": g.ID, "u": bobID}),
		"the messages of a conversation one has just left are not one's to read: the membership is checked on the conversation as returned")
}

// TestConversations_LastAdminLeaves: when a group's last admin leaves (or
// is removed by another admin leaving at once), the longest-standing
// member left becomes its admin, and the MEMBER_REMOVED event shows it.
func TestConversations_LastAdminLeaves(t *testing.T) {
	forBackends(t, testConversationsLastAdminLeaves)
}

func testConversationsLastAdminLeaves(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	g := createGroup(t, e, alice, "g", bobID, carolID)

	sub := e.client.Websocket(`subscription { conversationEvents { type member { handle } conversation { admins { handle } } } }`, opts(carol, nil)...)
	t.Cleanup(func() { _ = sub.Close() })
	require.Eventually(t, func() bool { return e.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond, "the subscription did not register")

	admins := func(c conversation) []string {
		out := []string{}
		for _, a := range c.Admins {
			out = append(out, a.Handle)
		}
		return out
	}
	e.mustExec(t, alice, `mutation($id: ID!) { leaveConversation(conversationId: $id) }`, map[string]any{"id": g.ID}, nil)
	assert.Equal(t, []string{"bob"}, admins(readConversation(t, e, carol, g.ID)), "the longest-standing member is the admin")
	type adminEvent struct {
		ConversationEvents struct {
			Type   string `json:"type"`
			Member struct {
				Handle string `json:"handle"`
			} `json:"member"`
			Conversation *struct {
				Admins []struct {
					Handle string `json:"handle"`
				} `json:"admins"`
			} `json:"conversation"`
		} `json:"conversationEvents"`
	}
	ev := nextOf[adminEvent](t, sub)
	assert.Equal(t, "MEMBER_REMOVED", ev.ConversationEvents.Type)
	assert.Equal(t, "alice", ev.ConversationEvents.Member.Handle)
	require.NotNil(t, ev.ConversationEvents.Conversation)
	require.Len(t, ev.ConversationEvents.Conversation.Admins, 1)
	assert.Equal(t, "bob", ev.ConversationEvents.Conversation.Admins[0].Handle, "the event shows the new admin")

	// The new admin manages the group; removing itself hands it on.
	var r struct {
		Remove conversation `json:"removeMember"`
	}
	e.mustExec(t, bob, `mutation($c: ID!, $u: ID!) { removeMember(conversationId: $c, userId: $u) { `+conversationFields+` } }`, map[string]any{"c": g.ID, "u": bobID}, &r)
	assert.Equal(t, []string{"carol"}, r.Remove.handles())
	assert.Equal(t, []string{"carol"}, admins(r.Remove), "the group as it is after")
	assert.Equal(t, []string{"carol"}, admins(readConversation(t, e, carol, g.ID)))
	assert.Equal(t, "NOT_FOUND", e.errCode(t, bob, `mutation($c: ID!, $u: ID!) { removeMember(conversationId: $c, userId: $u) { id } }`, map[string]any{"c": g.ID, "u": carolID}), "bob is no member now")
}

func TestConversations_GroupsKeepDirectRules(t *testing.T) {
	forBackends(t, testConversationsGroupsKeepDirectRules)
}

// testConversationsGroupsKeepDirectRules checks that a group is no way
// around the direct message's rules: whom a user takes messages from, and
// blocks either way, decide who may put them in a group.
func testConversationsGroupsKeepDirectRules(t *testing.T) {
	e := newEnv(t, nil)
	spammer, spammerID := mustSignUp(t, e, "spammer")
	quiet, quietID := mustSignUp(t, e, "quiet")
	_, friendlyID := mustSignUp(t, e, "friendly")
	picky, pickyID := mustSignUp(t, e, "picky")
	blocker, blockerID := mustSignUp(t, e, "blocker")
	e.mustExec(t, quiet, `mutation { setMessagesFrom(policy: NOBODY) { id } }`, nil, nil)
	e.mustExec(t, picky, `mutation { setMessagesFrom(policy: FOLLOWING) { id } }`, nil, nil)
	e.mustExec(t, blocker, `mutation($id: ID!) { block(userId: $id) { id } }`, map[string]any{"id": spammerID}, nil)

	create := `mutation($m: [ID!]!) { createGroup(name: "deals", memberIds: $m) { id } }`
	refused := func(token, query string, vars map[string]any) string {
		t.Helper()
		_, errs := e.exec(t, token, query, vars)
		require.NotEmpty(t, errs, "expected a refusal")
		assert.Equal(t, "FORBIDDEN", errs[0].Extensions.Code)
		return errs[0].Message
	}
	msg := refused(spammer, create, map[string]any{"m": []string{friendlyID, quietID}})
	assert.Contains(t, msg, "@quiet")
	assert.NotContains(t, msg, "@friendly")
	refused(spammer, create, map[string]any{"m": []string{pickyID}})
	msg = refused(spammer, create, map[string]any{"m": []string{blockerID}})
	assert.NotContains(t, msg, "block you", "which of the settings or a block refused is not told")
	var none struct {
		Conversations struct {
			Edges []struct{ Cursor string } `json:"edges"`
		} `json:"conversations"`
	}
	e.mustExec(t, quiet, `{ conversations { edges { cursor } } }`, nil, &none)
	assert.Empty(t, none.Conversations.Edges, "a refused group is not created")

	// The same rules on addMembers, for users not yet in the group.
	g := createGroup(t, e, spammer, "deals", friendlyID)
	add := `mutation($c: ID!, $u: [ID!]!) { addMembers(conversationId: $c, userIds: $u) { id } }`
	refused(spammer, add, map[string]any{"c": g.ID, "u": []string{quietID}})
	refused(spammer, add, map[string]any{"c": g.ID, "u": []string{pickyID}})
	refused(spammer, add, map[string]any{"c": g.ID, "u": []string{blockerID}})
	// The spammer blocking someone is a block too.
	e.mustExec(t, spammer, `mutation($id: ID!) { block(userId: $id) { id } }`, map[string]any{"id": friendlyID}, nil)
	refused(spammer, create, map[string]any{"m": []string{friendlyID}})

	// Picky takes messages from the people picky follows.
	mustFollow(t, e, picky, spammerID)
	e.mustExec(t, spammer, add, map[string]any{"c": g.ID, "u": []string{pickyID}}, nil)
	// Friendly, in already, is not checked again on a repeat add.
	e.mustExec(t, spammer, add, map[string]any{"c": g.ID, "u": []string{friendlyID, pickyID}}, nil)
}
