package graph_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

func TestLikes(t *testing.T) { forBackends(t, testLikes) }

// likedMessage is a message's likes as a client reads them.
type likedMessage struct {
	LikeCount      int  `json:"likeCount"`
	ViewerHasLiked bool `json:"viewerHasLiked"`
	LikedBy        struct {
		TotalCount int `json:"totalCount"`
		Edges      []struct {
			Cursor string `json:"cursor"`
			Node   struct{ Handle string }
		} `json:"edges"`
	} `json:"likedBy"`
}

type likeResult struct {
	ID             string `json:"id"`
	LikeCount      int    `json:"likeCount"`
	ViewerHasLiked bool   `json:"viewerHasLiked"`
}

func testLikes(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")
	carol, _ := mustSignUp(t, e, "carol")
	msg := mustPost(t, e, alice, "likeable")

	setLike := func(token, field, id string) likeResult {
		t.Helper()
		var r map[string]likeResult
		e.mustExec(t, token, `mutation($id: ID!) { `+field+`(messageId: $id) { id likeCount viewerHasLiked } }`, map[string]any{"id": id}, &r)
		return r[field]
	}
	message := func(token string) likedMessage {
		t.Helper()
		var r struct {
			Node likedMessage `json:"node"`
		}
		e.mustExec(t, token, `query($id: ID!) { node(id: $id) { ... on Message { likeCount viewerHasLiked likedBy(first: 10) { totalCount edges { cursor node { handle } } } } } }`, map[string]any{"id": msg}, &r)
		return r.Node
	}

	t.Run("like, twice, and by another", func(t *testing.T) {
		assert.Equal(t, likeResult{ID: msg, LikeCount: 1, ViewerHasLiked: true}, setLike(bob, "like", msg))
		assert.Equal(t, likeResult{ID: msg, LikeCount: 1, ViewerHasLiked: true}, setLike(bob, "like", msg), "idempotent")
		assert.Equal(t, likeResult{ID: msg, LikeCount: 2, ViewerHasLiked: true}, setLike(carol, "like", msg))
		m := message(bob)
		assert.Equal(t, 2, m.LikeCount)
		assert.True(t, m.ViewerHasLiked)
		assert.Equal(t, 2, m.LikedBy.TotalCount)
		require.Len(t, m.LikedBy.Edges, 2)
		assert.Equal(t, "carol", m.LikedBy.Edges[0].Node.Handle, "most recent like first")
		assert.Equal(t, "bob", m.LikedBy.Edges[1].Node.Handle)
		assert.False(t, message(alice).ViewerHasLiked, "the author has not liked it")
		assert.False(t, message("").ViewerHasLiked, "nobody is signed in")

		var page struct {
			Node struct {
				LikedBy struct {
					Edges []struct {
						Node struct{ Handle string }
					} `json:"edges"`
					PageInfo struct {
						HasNextPage bool `json:"hasNextPage"`
					} `json:"pageInfo"`
				} `json:"likedBy"`
			} `json:"node"`
		}
		e.mustExec(t, "", `query($id: ID!, $after: String) { node(id: $id) { ... on Message { likedBy(first: 1, after: $after) { edges { node { handle } } pageInfo { hasNextPage } } } } }`,
			map[string]any{"id": msg, "after": m.LikedBy.Edges[0].Cursor}, &page)
		require.Len(t, page.Node.LikedBy.Edges, 1)
		assert.Equal(t, "bob", page.Node.LikedBy.Edges[0].Node.Handle)
		assert.False(t, page.Node.LikedBy.PageInfo.HasNextPage)
	})
	t.Run("a user's likes", func(t *testing.T) {
		other := mustPost(t, e, carol, "also likeable")
		setLike(bob, "like", other)
		var r struct {
			User struct {
				Likes struct {
					Edges []struct {
						Node    struct{ ID string }
						LikedAt string `json:"likedAt"`
					} `json:"edges"`
				} `json:"likes"`
			} `json:"user"`
		}
		e.mustExec(t, "", `{ user(handle: "bob") { likes(first: 10) { edges { node { id } likedAt } } } }`, nil, &r)
		require.Len(t, r.User.Likes.Edges, 2)
		assert.Equal(t, other, r.User.Likes.Edges[0].Node.ID, "most recently liked first")
		assert.Equal(t, msg, r.User.Likes.Edges[1].Node.ID)
		assert.NotEmpty(t, r.User.Likes.Edges[0].LikedAt)

		e.mustExec(t, carol, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": other}, nil)
		e.mustExec(t, "", `{ user(handle: "bob") { likes(first: 10) { edges { node { id } likedAt } } } }`, nil, &r)
		require.Len(t, r.User.Likes.Edges, 1, "a deleted message leaves the list")
		assert.Equal(t, msg, r.User.Likes.Edges[0].Node.ID)

		// The newest like is of the deleted message: a page of one reads
		// past it and stays full.
		var one struct {
			User struct {
				Likes struct {
					Edges []struct {
						Node struct{ ID string }
					} `json:"edges"`
					PageInfo struct {
						HasNextPage bool `json:"hasNextPage"`
					} `json:"pageInfo"`
				} `json:"likes"`
			} `json:"user"`
		}
		e.mustExec(t, "", `{ user(handle: "bob") { likes(first: 1) { edges { node { id } } pageInfo { hasNextPage } } } }`, nil, &one)
		require.Len(t, one.User.Likes.Edges, 1, "a page past a deleted message's like is full")
		assert.Equal(t, msg, one.User.Likes.Edges[0].Node.ID)
		assert.False(t, one.User.Likes.PageInfo.HasNextPage)
	})
	t.Run("unlike", func(t *testing.T) {
		assert.Equal(t, likeResult{ID: msg, LikeCount: 1, ViewerHasLiked: false}, setLike(carol, "unlike", msg))
		assert.Equal(t, likeResult{ID: msg, LikeCount: 1, ViewerHasLiked: false}, setLike(carol, "unlike", msg), "idempotent")
		m := message(carol)
		assert.Equal(t, 1, m.LikeCount)
		assert.False(t, m.ViewerHasLiked)
	})
	t.Run("refusals", func(t *testing.T) {
		like := `mutation($id: ID!) { like(messageId: $id) { id } }`
		assert.Equal(t, store.EUNAUTHENTICATED, e.errCode(t, "", like, map[string]any{"id": msg}))
		assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, like, map[string]any{"id": fakeGlobalID("Message")}))
		assert.Equal(t, store.EINVALID, e.errCode(t, bob, like, map[string]any{"id": "not-an-id"}))
		gone := mustPost(t, e, alice, "soon gone")
		e.mustExec(t, alice, `mutation($id: ID!) { deleteMessage(id: $id) }`, map[string]any{"id": gone}, nil)
		assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, like, map[string]any{"id": gone}))
		assert.Equal(t, store.ENOTFOUND, e.errCode(t, bob, `mutation($id: ID!) { unlike(messageId: $id) { id } }`, map[string]any{"id": gone}))
	})
	t.Run("a timeline page reads its counts free, and whether the viewer likes each in one call", func(t *testing.T) {
		var aliceID struct {
			User struct{ ID string } `json:"user"`
		}
		e.mustExec(t, "", `{ user(handle: "alice") { id } }`, nil, &aliceID)
		mustFollow(t, e, bob, aliceID.User.ID)
		for i := range 3 {
			setLike(bob, "like", mustPost(t, e, alice, strings.Repeat("x", i+1)))
		}
		waitFanOut(t, e)
		calls := func(q string) map[string]int64 {
			e.backend.Reset()
			raw, errs := e.exec(t, bob, q, nil)
			require.Empty(t, errs)
			if strings.Contains(q, "viewerHasLiked") {
				assert.Contains(t, string(raw), `"viewerHasLiked":true`)
			}
			n, _ := e.backend.Snapshot()
			return n
		}
		plain := calls(`{ inbox(first: 5) { edges { node { text author { handle } } } } }`)
		counted := calls(`{ inbox(first: 5) { edges { node { text likeCount author { handle } } } } }`)
		liked := calls(`{ inbox(first: 5) { edges { node { text likeCount viewerHasLiked author { handle } } } } }`)
		assert.Equal(t, plain, counted, "likeCount is read with the message")
		assert.Equal(t, int64(1), liked["FindLiked"], "one batch for the page")
		delete(liked, "FindLiked")
		assert.Equal(t, plain, liked)
	})
}
