package graph_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

type pageInfo struct {
	HasNextPage     bool    `json:"hasNextPage"`
	HasPreviousPage bool    `json:"hasPreviousPage"`
	StartCursor     *string `json:"startCursor"`
	EndCursor       *string `json:"endCursor"`
}

type message struct {
	ID       string  `json:"id"`
	Text     string  `json:"text"`
	Kind     string  `json:"kind"`
	EditedAt *string `json:"editedAt"`
	Author   struct {
		Handle string `json:"handle"`
	} `json:"author"`
	ReplyTo *struct {
		ID string `json:"id"`
	} `json:"replyTo"`
}

const messageFields = `id text kind editedAt author { handle } replyTo { id }`

type inbox struct {
	TotalCount  int      `json:"totalCount"`
	UnreadCount int      `json:"unreadCount"`
	Rebuilding  bool     `json:"rebuilding"`
	PageInfo    pageInfo `json:"pageInfo"`
	Edges       []struct {
		Cursor      string  `json:"cursor"`
		DeliveredAt string  `json:"deliveredAt"`
		Node        message `json:"node"`
	} `json:"edges"`
}

const inboxQuery = `query($first: Int, $after: String) { inbox(first: $first, after: $after) {
	totalCount unreadCount rebuilding
	pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
	edges { cursor deliveredAt node { ` + messageFields + ` } } } }`

func readInbox(t *testing.T, e *env, token string, vars map[string]any) inbox {
	t.Helper()
	var resp struct {
		Inbox inbox `json:"inbox"`
	}
	e.mustExec(t, token, inboxQuery, vars, &resp)
	return resp.Inbox
}

func texts(ib inbox) []string {
	out := make([]string, len(ib.Edges))
	for i, e := range ib.Edges {
		out[i] = e.Node.Text
	}
	return out
}

// TestContract walks the schema's contract end to end, one scenario after
// another over the same server, as a client would.
func TestContract(t *testing.T) { forStrategies(t, testContract) }

func testContract(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "Alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")

	t.Run("SignUp", func(t *testing.T) {
		var resp struct {
			SignUp struct {
				Token     string `json:"token"`
				ExpiresAt string `json:"expiresAt"`
				User      user   `json:"user"`
			} `json:"signUp"`
		}
		e.mustExec(t, "", `mutation { signUp(input: {handle: "Dave_1", password: "password123", displayName: " Dave "}) {
			token expiresAt user { `+userFields+` } } }`, nil, &resp)
		assert.NotEmpty(t, resp.SignUp.Token)
		assert.NotEmpty(t, resp.SignUp.ExpiresAt)
		assert.Equal(t, "dave_1", resp.SignUp.User.Handle, "handles are stored lowercase")
		assert.Equal(t, "Dave", resp.SignUp.User.DisplayName)
		assert.False(t, resp.SignUp.User.ViewerFollows)
	})

	t.Run("LogIn", func(t *testing.T) {
		var resp struct {
			LogIn struct {
				Token string `json:"token"`
				User  user   `json:"user"`
			} `json:"logIn"`
		}
		e.mustExec(t, "", `mutation { logIn(input: {handle: "ALICE", password: "password123"}) { token user { id handle } } }`, nil, &resp)
		assert.Equal(t, aliceID, resp.LogIn.User.ID)
		assert.Equal(t, "alice", resp.LogIn.User.Handle)

		var v struct {
			Viewer *user `json:"viewer"`
		}
		e.mustExec(t, resp.LogIn.Token, `{ viewer { id handle } }`, nil, &v)
		require.NotNil(t, v.Viewer)
		assert.Equal(t, aliceID, v.Viewer.ID)
	})

	t.Run("Viewer", func(t *testing.T) {
		var v struct {
			Viewer *user `json:"viewer"`
		}
		e.mustExec(t, bob, `{ viewer { `+userFields+` } }`, nil, &v)
		require.NotNil(t, v.Viewer)
		assert.Equal(t, bobID, v.Viewer.ID)
		assert.Equal(t, "bob", v.Viewer.Handle)

		e.mustExec(t, "", `{ viewer { id } }`, nil, &v)
		assert.Nil(t, v.Viewer, "anonymous viewer is null, not an error")
	})

	t.Run("User", func(t *testing.T) {
		var r struct {
			User *user `json:"user"`
		}
		e.mustExec(t, "", `{ user(handle: "ALICE") { `+userFields+` } }`, nil, &r)
		require.NotNil(t, r.User)
		assert.Equal(t, aliceID, r.User.ID)
		assert.False(t, r.User.ViewerFollows, "false when anonymous")

		e.mustExec(t, "", `{ user(handle: "nobody") { id } }`, nil, &r)
		assert.Nil(t, r.User)
		e.mustExec(t, "", `{ user(handle: "not a handle!") { id } }`, nil, &r)
		assert.Nil(t, r.User)
	})

	t.Run("Follow", func(t *testing.T) {
		got := mustFollow(t, e, bob, aliceID)
		assert.Equal(t, aliceID, got.ID)
		assert.Equal(t, 1, got.FollowerCount)
		assert.True(t, got.ViewerFollows)

		got = mustFollow(t, e, bob, aliceID)
		assert.Equal(t, 1, got.FollowerCount, "following twice counts once")

		got = mustFollow(t, e, carol, aliceID)
		assert.Equal(t, 2, got.FollowerCount)

		var v struct {
			Viewer user `json:"viewer"`
		}
		e.mustExec(t, bob, `{ viewer { `+userFields+` } }`, nil, &v)
		assert.Equal(t, 1, v.Viewer.FollowingCount)
	})

	t.Run("Unfollow", func(t *testing.T) {
		q := `mutation($id: ID!) { unfollow(userId: $id) { ` + userFields + ` } }`
		var r struct {
			Unfollow user `json:"unfollow"`
		}
		e.mustExec(t, carol, q, map[string]any{"id": aliceID}, &r)
		assert.Equal(t, 1, r.Unfollow.FollowerCount)
		assert.False(t, r.Unfollow.ViewerFollows)

		e.mustExec(t, carol, q, map[string]any{"id": aliceID}, &r)
		assert.Equal(t, 1, r.Unfollow.FollowerCount, "unfollowing twice changes nothing")
	})

	t.Run("FollowThenUnfollowInOneOperation", func(t *testing.T) {
		var r struct {
			A user `json:"a"`
			B user `json:"b"`
		}
		e.mustExec(t, carol, `mutation($id: ID!) {
			a: follow(userId: $id) { followerCount viewerFollows }
			b: unfollow(userId: $id) { followerCount viewerFollows } }`, map[string]any{"id": aliceID}, &r)
		assert.True(t, r.A.ViewerFollows)
		assert.Equal(t, 2, r.A.FollowerCount)
		assert.False(t, r.B.ViewerFollows, "the operation's loader cache must not serve the state before the second mutation")
		assert.Equal(t, 1, r.B.FollowerCount)
	})

	var posts []string
	t.Run("PostMessage", func(t *testing.T) {
		for _, text := range []string{"one", "two", "three"} {
			var r struct {
				PostMessage message `json:"postMessage"`
			}
			e.mustExec(t, alice, `mutation($t: String!) { postMessage(input: {text: $t}) { `+messageFields+` } }`,
				map[string]any{"t": text}, &r)
			assert.Equal(t, text, r.PostMessage.Text)
			assert.Equal(t, "POST", r.PostMessage.Kind)
			assert.Equal(t, "alice", r.PostMessage.Author.Handle)
			assert.Nil(t, r.PostMessage.ReplyTo)
			assert.Nil(t, r.PostMessage.EditedAt)
			posts = append(posts, r.PostMessage.ID)
		}
	})
	require.Len(t, posts, 3)

	t.Run("Reply", func(t *testing.T) {
		var r struct {
			PostMessage message `json:"postMessage"`
		}
		e.mustExec(t, bob, `mutation($in: PostMessageInput!) { postMessage(input: $in) { `+messageFields+` } }`,
			map[string]any{"in": map[string]any{"text": "nice", "replyTo": posts[0]}}, &r)
		assert.Equal(t, "REPLY", r.PostMessage.Kind)
		require.NotNil(t, r.PostMessage.ReplyTo)
		assert.Equal(t, posts[0], r.PostMessage.ReplyTo.ID)
	})

	waitFanOut(t, e)

	t.Run("Inbox", func(t *testing.T) {
		ib := readInbox(t, e, bob, nil)
		assert.Equal(t, []string{"nice", "three", "two", "one"}, texts(ib), "newest first, bob's own reply with alice's posts")
		assert.Equal(t, 3, ib.TotalCount, "one's own messages are not counted")
		assert.Equal(t, 3, ib.UnreadCount)
		assert.False(t, ib.Rebuilding)
		assert.False(t, ib.PageInfo.HasNextPage)
		assert.False(t, ib.PageInfo.HasPreviousPage)
		assert.Equal(t, "bob", ib.Edges[0].Node.Author.Handle)
		for _, edge := range ib.Edges[1:] {
			assert.Equal(t, "alice", edge.Node.Author.Handle)
			assert.NotEmpty(t, edge.DeliveredAt)
		}

		carolInbox := readInbox(t, e, carol, nil)
		assert.Empty(t, carolInbox.Edges, "carol unfollowed before alice posted")
		assert.Nil(t, carolInbox.PageInfo.StartCursor)
		assert.Nil(t, carolInbox.PageInfo.EndCursor)
	})

	t.Run("InboxPaging", func(t *testing.T) {
		p1 := readInbox(t, e, bob, map[string]any{"first": 2})
		assert.Equal(t, []string{"nice", "three"}, texts(p1))
		assert.True(t, p1.PageInfo.HasNextPage)
		assert.Equal(t, 3, p1.TotalCount, "totalCount is the whole inbox")
		require.NotNil(t, p1.PageInfo.StartCursor)
		require.NotNil(t, p1.PageInfo.EndCursor)
		assert.Equal(t, p1.Edges[0].Cursor, *p1.PageInfo.StartCursor)
		assert.Equal(t, p1.Edges[1].Cursor, *p1.PageInfo.EndCursor)

		p2 := readInbox(t, e, bob, map[string]any{"first": 2, "after": *p1.PageInfo.EndCursor})
		assert.Equal(t, []string{"two", "one"}, texts(p2))
		assert.False(t, p2.PageInfo.HasNextPage)

		p0 := readInbox(t, e, bob, map[string]any{"first": 0})
		assert.Empty(t, p0.Edges)
		assert.Equal(t, 3, p0.TotalCount)
	})

	t.Run("Outbox", func(t *testing.T) {
		q := `query($h: String!, $after: String) { user(handle: $h) { messageCount
			messages(first: 2, after: $after) { totalCount pageInfo { hasNextPage endCursor } edges { cursor node { text author { handle } } } } } }`
		type page struct {
			User struct {
				MessageCount int `json:"messageCount"`
				Messages     struct {
					TotalCount int      `json:"totalCount"`
					PageInfo   pageInfo `json:"pageInfo"`
					Edges      []struct {
						Node message `json:"node"`
					} `json:"edges"`
				} `json:"messages"`
			} `json:"user"`
		}
		var p1, p2 page
		e.mustExec(t, "", q, map[string]any{"h": "alice"}, &p1)
		assert.Equal(t, 3, p1.User.MessageCount)
		assert.Equal(t, 3, p1.User.Messages.TotalCount)
		require.Len(t, p1.User.Messages.Edges, 2)
		assert.Equal(t, "three", p1.User.Messages.Edges[0].Node.Text)
		assert.Equal(t, "two", p1.User.Messages.Edges[1].Node.Text)
		require.True(t, p1.User.Messages.PageInfo.HasNextPage)

		e.mustExec(t, "", q, map[string]any{"h": "alice", "after": *p1.User.Messages.PageInfo.EndCursor}, &p2)
		require.Len(t, p2.User.Messages.Edges, 1)
		assert.Equal(t, "one", p2.User.Messages.Edges[0].Node.Text)
		assert.False(t, p2.User.Messages.PageInfo.HasNextPage)
	})

	t.Run("FollowersAndFollowing", func(t *testing.T) {
		var r struct {
			User struct {
				Followers struct {
					TotalCount int `json:"totalCount"`
					Edges      []struct {
						Cursor string `json:"cursor"`
						Node   user   `json:"node"`
					} `json:"edges"`
					PageInfo pageInfo `json:"pageInfo"`
				} `json:"followers"`
			} `json:"user"`
		}
		e.mustExec(t, carol, `{ user(handle: "alice") { followers { totalCount pageInfo { hasNextPage } edges { cursor node { `+userFields+` } } } } }`, nil, &r)
		assert.Equal(t, 1, r.User.Followers.TotalCount)
		require.Len(t, r.User.Followers.Edges, 1)
		assert.Equal(t, bobID, r.User.Followers.Edges[0].Node.ID)
		assert.False(t, r.User.Followers.Edges[0].Node.ViewerFollows, "carol does not follow bob")
		assert.False(t, r.User.Followers.PageInfo.HasNextPage)

		var f struct {
			Viewer struct {
				Following struct {
					TotalCount int `json:"totalCount"`
					Edges      []struct {
						Node user `json:"node"`
					} `json:"edges"`
				} `json:"following"`
			} `json:"viewer"`
		}
		e.mustExec(t, bob, `{ viewer { following(first: 10) { totalCount edges { node { `+userFields+` } } } } }`, nil, &f)
		assert.Equal(t, 1, f.Viewer.Following.TotalCount)
		require.Len(t, f.Viewer.Following.Edges, 1)
		assert.Equal(t, aliceID, f.Viewer.Following.Edges[0].Node.ID)
		assert.True(t, f.Viewer.Following.Edges[0].Node.ViewerFollows)
	})

	t.Run("EditMessage", func(t *testing.T) {
		var r struct {
			EditMessage message `json:"editMessage"`
		}
		e.mustExec(t, alice, `mutation($id: ID!) { editMessage(id: $id, text: "two, edited") { `+messageFields+` } }`,
			map[string]any{"id": posts[1]}, &r)
		assert.Equal(t, "two, edited", r.EditMessage.Text)
		assert.NotNil(t, r.EditMessage.EditedAt)

		ib := readInbox(t, e, bob, nil)
		assert.Equal(t, []string{"nice", "three", "two, edited", "one"}, texts(ib), "the follower sees the edit at once")
		assert.NotNil(t, ib.Edges[2].Node.EditedAt)
	})

	t.Run("DeleteMessage", func(t *testing.T) {
		var r struct {
			DeleteMessage string `json:"deleteMessage"`
		}
		e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": posts[2]}, &r)
		assert.Equal(t, posts[2], r.DeleteMessage)

		ib := readInbox(t, e, bob, nil)
		assert.Equal(t, []string{"nice", "two, edited", "one"}, texts(ib), "the deleted message vanishes at once")

		waitFanOut(t, e)
		ib = readInbox(t, e, bob, nil)
		assert.Equal(t, 2, ib.TotalCount)
		assert.Equal(t, 2, ib.UnreadCount)
	})

	t.Run("MarkInboxRead", func(t *testing.T) {
		var r struct {
			MarkInboxRead int `json:"markInboxRead"`
		}
		e.mustExec(t, bob, `mutation { markInboxRead }`, nil, &r)
		assert.Equal(t, 0, r.MarkInboxRead)
		ib := readInbox(t, e, bob, nil)
		assert.Equal(t, 0, ib.UnreadCount)
		assert.Equal(t, 2, ib.TotalCount)
	})

	t.Run("Node", func(t *testing.T) {
		q := `query($id: ID!) { node(id: $id) { __typename id ... on User { handle } ... on Message { text } } }`
		var r struct {
			Node *struct {
				Typename string `json:"__typename"`
				ID       string `json:"id"`
				Handle   string `json:"handle"`
				Text     string `json:"text"`
			} `json:"node"`
		}
		e.mustExec(t, "", q, map[string]any{"id": aliceID}, &r)
		require.NotNil(t, r.Node)
		assert.Equal(t, "User", r.Node.Typename)
		assert.Equal(t, aliceID, r.Node.ID)
		assert.Equal(t, "alice", r.Node.Handle)

		e.mustExec(t, "", q, map[string]any{"id": posts[0]}, &r)
		require.NotNil(t, r.Node)
		assert.Equal(t, "Message", r.Node.Typename)
		assert.Equal(t, "one", r.Node.Text)

		r.Node = nil
		e.mustExec(t, "", q, map[string]any{"id": posts[2]}, &r)
		assert.Nil(t, r.Node, "a deleted message is null")
		e.mustExec(t, "", q, map[string]any{"id": fakeGlobalID("User")}, &r)
		assert.Nil(t, r.Node, "an unknown user is null")

		// The types above are every Node type: a new one must be added
		// here, and to node and nodes.
		var schema struct {
			Type struct {
				PossibleTypes []struct {
					Name string `json:"name"`
				} `json:"possibleTypes"`
			} `json:"__type"`
		}
		e.mustExec(t, "", `{ __type(name: "Node") { possibleTypes { name } } }`, nil, &schema)
		var names []string
		for _, pt := range schema.Type.PossibleTypes {
			names = append(names, pt.Name)
		}
		assert.ElementsMatch(t, []string{"User", "Message", "NotificationGroup", "Conversation", "ConversationMessage"}, names)
	})

	t.Run("Nodes", func(t *testing.T) {
		var r struct {
			Nodes []*struct {
				Typename string `json:"__typename"`
				ID       string `json:"id"`
			} `json:"nodes"`
		}
		e.mustExec(t, "", `query($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }`,
			map[string]any{"ids": []string{aliceID, posts[0], posts[2], bobID}}, &r)
		require.Len(t, r.Nodes, 4)
		require.NotNil(t, r.Nodes[0])
		assert.Equal(t, "User", r.Nodes[0].Typename)
		assert.Equal(t, aliceID, r.Nodes[0].ID)
		require.NotNil(t, r.Nodes[1])
		assert.Equal(t, "Message", r.Nodes[1].Typename)
		assert.Equal(t, posts[0], r.Nodes[1].ID)
		assert.Nil(t, r.Nodes[2], "deleted")
		require.NotNil(t, r.Nodes[3])
		assert.Equal(t, bobID, r.Nodes[3].ID)
	})
}

// TestErrors checks the code of every kind of bad input.
func TestErrors(t *testing.T) { forBackends(t, testErrors) }

func testErrors(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	msg := mustPost(t, e, alice, "hello")
	deleted := mustPost(t, e, alice, "gone")
	e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": deleted}, nil)

	const (
		follow   = `mutation($id: ID!) { follow(userId: $id) { id } }`
		edit     = `mutation($id: ID!, $t: String!) { editMessage(id: $id, text: $t) { id } }`
		del      = `mutation($id: ID!) { deleteMessage(id: $id) }`
		post     = `mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }`
		node     = `query($id: ID!) { node(id: $id) { id } }`
		inboxQ   = `query($first: Int, $after: String) { inbox(first: $first, after: $after) { totalCount } }`
		signUp   = `mutation($in: SignUpInput!) { signUp(input: $in) { token } }`
		logIn    = `mutation($in: LogInInput!) { logIn(input: $in) { token } }`
		outboxQ  = `query($after: String) { user(handle: "alice") { messages(after: $after) { totalCount } } }`
		followsQ = `query($first: Int) { user(handle: "alice") { followers(first: $first) { totalCount } } }`
		setAttrs = `mutation($in: [AttributeInput!]!) { setAttributes(input: $in) { id } }`
		byAttrQ  = `query($n: String!, $v: String!, $first: Int, $after: String) {
			usersByAttribute(name: $n, value: $v, first: $first, after: $after) { totalCount edges { cursor } } }`
	)
	attr := func(name, value string) map[string]any {
		return map[string]any{"in": []map[string]any{{"name": name, "value": value}}}
	}
	longName := strings.Repeat("n", store.AttrNameMaxLen+1)
	longValue := strings.Repeat("v", store.AttrValueMaxLen+1)
	var msgCursor struct {
		User struct {
			Messages struct {
				Edges []struct {
					Cursor string `json:"cursor"`
				} `json:"edges"`
			} `json:"messages"`
		} `json:"user"`
	}
	e.mustExec(t, "", `{ user(handle: "alice") { messages { edges { cursor } } } }`, nil, &msgCursor)
	require.NotEmpty(t, msgCursor.User.Messages.Edges)
	messagesCursor := msgCursor.User.Messages.Edges[0].Cursor

	tests := []struct {
		name  string
		token string
		query string
		vars  map[string]any
		code  string
	}{
		{"FollowUnknownUser", bob, follow, map[string]any{"id": fakeGlobalID("User")}, store.ENOTFOUND},
		{"EditUnknownMessage", alice, edit, map[string]any{"id": fakeGlobalID("Message"), "t": "x"}, store.ENOTFOUND},
		{"EditDeletedMessage", alice, edit, map[string]any{"id": deleted, "t": "x"}, store.ENOTFOUND},
		{"DeleteUnknownMessage", alice, del, map[string]any{"id": fakeGlobalID("Message")}, store.ENOTFOUND},
		{"ReplyToUnknown", bob, post, map[string]any{"in": map[string]any{"text": "hi", "replyTo": fakeGlobalID("Message")}}, store.ENOTFOUND},

		{"NodeMalformedID", "", node, map[string]any{"id": "not-an-id"}, store.EINVALID},
		{"NodeRawHexID", "", node, map[string]any{"id": store.NewID(time.Now()).String()}, store.EINVALID},
		{"FollowMalformedID", bob, follow, map[string]any{"id": "%%%"}, store.EINVALID},
		{"FollowMessageID", bob, follow, map[string]any{"id": msg}, store.EINVALID},
		{"EditUserID", alice, edit, map[string]any{"id": aliceID, "t": "x"}, store.EINVALID},
		{"ReplyToUserID", bob, post, map[string]any{"in": map[string]any{"text": "hi", "replyTo": aliceID}}, store.EINVALID},
		{"NodesMalformedID", "", `query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": []string{aliceID, "bad"}}, store.EINVALID},

		{"InboxBadCursor", bob, inboxQ, map[string]any{"after": "garbage"}, store.EINVALID},
		{"InboxOtherConnectionsCursor", bob, inboxQ, map[string]any{"after": messagesCursor}, store.EINVALID},
		{"OutboxBadCursor", "", outboxQ, map[string]any{"after": "garbage"}, store.EINVALID},
		{"InboxFirst101", bob, inboxQ, map[string]any{"first": 101}, store.EINVALID},
		{"InboxFirstNegative", bob, inboxQ, map[string]any{"first": -1}, store.EINVALID},
		{"FollowersFirst101", "", followsQ, map[string]any{"first": 101}, store.EINVALID},
		{"UsersByAttributeBadCursor", "", byAttrQ, map[string]any{"n": "plan", "v": "pro", "after": "garbage"}, store.EINVALID},
		{"UsersByAttributeOtherConnectionsCursor", "", byAttrQ, map[string]any{"n": "plan", "v": "pro", "after": messagesCursor}, store.EINVALID},
		{"UsersByAttributeFirst101", "", byAttrQ, map[string]any{"n": "plan", "v": "pro", "first": 101}, store.EINVALID},
		{"UsersByAttributeEmptyName", "", byAttrQ, map[string]any{"n": "", "v": "pro"}, store.EINVALID},
		{"UsersByAttributeLongName", "", byAttrQ, map[string]any{"n": longName, "v": "pro"}, store.EINVALID},
		{"UsersByAttributeLongValue", "", byAttrQ, map[string]any{"n": "plan", "v": longValue}, store.EINVALID},

		{"SetAttributesEmptyName", alice, setAttrs, attr("", "x"), store.EINVALID},
		{"SetAttributesLongName", alice, setAttrs, attr(longName, "x"), store.EINVALID},
		{"SetAttributesLongValue", alice, setAttrs, attr("plan", longValue), store.EINVALID},
		{"SetAttributesSameNameTwice", alice, setAttrs, map[string]any{"in": []map[string]any{{"name": "a", "value": "1"}, {"name": "a"}}}, store.EINVALID},
		{"SetAttributesTooMany", alice, setAttrs, map[string]any{"in": tooManyAttributes()}, store.EINVALID},

		{"PostEmptyText", alice, post, map[string]any{"in": map[string]any{"text": ""}}, store.EINVALID},
		{"PostBlankText", alice, post, map[string]any{"in": map[string]any{"text": " \n\t "}}, store.EINVALID},
		{"PostTooLong", alice, post, map[string]any{"in": map[string]any{"text": strings.Repeat("a", store.MessageMaxLen+1)}}, store.EINVALID},
		{"EditEmptyText", alice, edit, map[string]any{"id": msg, "t": ""}, store.EINVALID},

		{"InboxNoToken", "", inboxQ, nil, store.EUNAUTHENTICATED},
		{"InboxBadToken", "not.a.token", inboxQ, nil, store.EUNAUTHENTICATED},
		{"PostNoToken", "", post, map[string]any{"in": map[string]any{"text": "hi"}}, store.EUNAUTHENTICATED},
		{"FollowNoToken", "", follow, map[string]any{"id": aliceID}, store.EUNAUTHENTICATED},
		{"MarkReadNoToken", "", `mutation { markInboxRead }`, nil, store.EUNAUTHENTICATED},
		{"SetAttributesNoToken", "", setAttrs, attr("plan", "pro"), store.EUNAUTHENTICATED},
		{"SetAttributesBadToken", "not.a.token", setAttrs, attr("plan", "pro"), store.EUNAUTHENTICATED},
		{"LogInWrongPassword", "", logIn, map[string]any{"in": map[string]any{"handle": "alice", "password": "wrong-password"}}, store.EUNAUTHENTICATED},
		{"LogInUnknownHandle", "", logIn, map[string]any{"in": map[string]any{"handle": "nobody", "password": "password123"}}, store.EUNAUTHENTICATED},

		{"EditSomeoneElses", bob, edit, map[string]any{"id": msg, "t": "mine now"}, store.EFORBIDDEN},
		{"DeleteSomeoneElses", bob, del, map[string]any{"id": msg}, store.EFORBIDDEN},

		{"DuplicateHandle", "", signUp, map[string]any{"in": map[string]any{"handle": "ALICE", "password": "password123"}}, store.ECONFLICT},
		{"InvalidHandle", "", signUp, map[string]any{"in": map[string]any{"handle": "no spaces!", "password": "password123"}}, store.EINVALID},
		{"ShortHandle", "", signUp, map[string]any{"in": map[string]any{"handle": "ab", "password": "password123"}}, store.EINVALID},
		{"ShortPassword", "", signUp, map[string]any{"in": map[string]any{"handle": "newuser", "password": "short"}}, store.EINVALID},
		{"FollowYourself", bob, follow, map[string]any{"id": bobID}, store.EINVALID},
		{"UnfollowYourself", bob, `mutation($id: ID!) { unfollow(userId: $id) { id } }`, map[string]any{"id": bobID}, store.EINVALID},

		{"UnknownField", "", `{ nope }`, nil, "GRAPHQL_VALIDATION_FAILED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.code, e.errCode(t, tt.token, tt.query, tt.vars))
		})
	}

	t.Run("MaxLengthTextIsFine", func(t *testing.T) {
		mustPost(t, e, alice, strings.Repeat("é", store.MessageMaxLen))
	})

	t.Run("ErrorMessages", func(t *testing.T) {
		_, errs := e.exec(t, "", inboxQ, nil)
		require.Len(t, errs, 1)
		assert.Equal(t, "authentication required", errs[0].Message)
		assert.Equal(t, []any{"inbox"}, errs[0].Path)

		_, errs = e.exec(t, bob, inboxQ, map[string]any{"after": "garbage"})
		require.Len(t, errs, 1)
		assert.Equal(t, "invalid cursor", errs[0].Message)
	})

	assert.NotContains(t, e.logs.String(), "internal error", "no bad input may surface as INTERNAL")
}

// tooManyAttributes returns one change more than a setAttributes call may make.
func tooManyAttributes() []map[string]any {
	out := make([]map[string]any, store.MaxAttributes+1)
	for i := range out {
		out[i] = map[string]any{"name": fmt.Sprintf("attr%d", i), "value": "x"}
	}
	return out
}
