package graph_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestThreads(t *testing.T) { forBackends(t, testThreads) }

// threadNode is a message of a thread as a client renders one.
type threadNode struct {
	ID         string `json:"id"`
	Text       string `json:"text"`
	ReplyCount int    `json:"replyCount"`
	Root       *struct {
		ID string `json:"id"`
	} `json:"root"`
	Author  struct{ Handle string } `json:"author"`
	Replies struct {
		TotalCount int `json:"totalCount"`
		Edges      []struct {
			Cursor string `json:"cursor"`
			Node   struct {
				ID         string                  `json:"id"`
				Text       string                  `json:"text"`
				ReplyCount int                     `json:"replyCount"`
				Author     struct{ Handle string } `json:"author"`
			} `json:"node"`
		} `json:"edges"`
		PageInfo struct {
			HasNextPage bool `json:"hasNextPage"`
		} `json:"pageInfo"`
	} `json:"replies"`
}

func testThreads(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	post := mustPost(t, e, alice, "a post")
	r1 := mustReply(t, e, bob, "first reply", post)
	r2 := mustReply(t, e, alice, "second reply", post)
	r3 := mustReply(t, e, carol, "a reply to the first reply", r1)

	read := func(id string, vars map[string]any) threadNode {
		t.Helper()
		if vars == nil {
			vars = map[string]any{}
		}
		vars["id"] = id
		var r struct {
			Node threadNode `json:"node"`
		}
		e.mustExec(t, "", `query($id: ID!, $first: Int, $after: String) { node(id: $id) { ... on Message {
			id text replyCount root { id } author { handle }
			replies(first: $first, after: $after) { totalCount edges { cursor node { id text replyCount author { handle } } } pageInfo { hasNextPage } } } } }`, vars, &r)
		return r.Node
	}

	t.Run("a post's replies, oldest first, with their own counts", func(t *testing.T) {
		p := read(post, nil)
		assert.Nil(t, p.Root, "a post roots its own thread")
		assert.Equal(t, 2, p.ReplyCount)
		assert.Equal(t, 2, p.Replies.TotalCount)
		require.Len(t, p.Replies.Edges, 2)
		assert.Equal(t, r1, p.Replies.Edges[0].Node.ID)
		assert.Equal(t, "bob", p.Replies.Edges[0].Node.Author.Handle)
		assert.Equal(t, 1, p.Replies.Edges[0].Node.ReplyCount)
		assert.Equal(t, r2, p.Replies.Edges[1].Node.ID)

		page := read(post, map[string]any{"first": 1})
		require.Len(t, page.Replies.Edges, 1)
		assert.True(t, page.Replies.PageInfo.HasNextPage)
		next := read(post, map[string]any{"first": 1, "after": page.Replies.Edges[0].Cursor})
		require.Len(t, next.Replies.Edges, 1)
		assert.Equal(t, r2, next.Replies.Edges[0].Node.ID)
		assert.False(t, next.Replies.PageInfo.HasNextPage)
	})
	t.Run("every reply points at its thread's root", func(t *testing.T) {
		for _, id := range []string{r1, r2, r3} {
			n := read(id, nil)
			require.NotNil(t, n.Root, id)
			assert.Equal(t, post, n.Root.ID)
		}
		n := read(r1, nil)
		require.Len(t, n.Replies.Edges, 1)
		assert.Equal(t, r3, n.Replies.Edges[0].Node.ID)
	})
	t.Run("a deleted reply leaves its parent's count and list", func(t *testing.T) {
		e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": r2}, nil)
		p := read(post, nil)
		assert.Equal(t, 1, p.ReplyCount)
		require.Len(t, p.Replies.Edges, 1)
		assert.Equal(t, r1, p.Replies.Edges[0].Node.ID)
	})
	t.Run("a deleted root leaves its replies, rootless", func(t *testing.T) {
		e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": post}, nil)
		n := read(r3, nil)
		assert.Nil(t, n.Root)
		assert.Equal(t, "a reply to the first reply", n.Text)
	})
	t.Run("a page of replies reads its authors in one batch", func(t *testing.T) {
		e.backend.Reset()
		read(r1, map[string]any{"first": 10})
		calls, _ := e.backend.Snapshot()
		assert.Equal(t, int64(1), calls["ListReplies"])
		assert.LessOrEqual(t, calls["FindUsersByIDs"], int64(2), "the message's author, then the replies' authors")
	})
}
