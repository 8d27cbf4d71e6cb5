package graph_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoaders_InboxBatching proves a home timeline page costs a fixed number
// of backend calls whatever its size: ReadInbox, FindMessagesByIDs (both in
// Service.Inbox) and one FindUsersByIDs for all the authors.
func TestLoaders_InboxBatching(t *testing.T) {
	e := newEnv(t, nil)
	reader, _ := mustSignUp(t, e, "reader")
	var authors []string
	for i := range 5 {
		tok, id := mustSignUp(t, e, fmt.Sprintf("author%d", i))
		mustFollow(t, e, reader, id)
		authors = append(authors, tok)
	}
	for i := range 60 {
		mustPost(t, e, authors[i%len(authors)], fmt.Sprintf("message %d", i))
	}
	waitFanOut(t, e)

	const q = `query($first: Int) { inbox(first: $first) {
		totalCount unreadCount
		edges { node { id text author { handle displayName } } } } }`
	for _, first := range []int{5, 50} {
		t.Run(fmt.Sprintf("First%d", first), func(t *testing.T) {
			e.backend.reset()
			var r struct {
				Inbox struct {
					TotalCount int `json:"totalCount"`
					Edges      []struct {
						Node struct {
							Text   string `json:"text"`
							Author struct {
								Handle string `json:"handle"`
							} `json:"author"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"inbox"`
			}
			e.mustExec(t, reader, q, map[string]any{"first": first}, &r)
			require.Len(t, r.Inbox.Edges, first)
			assert.Equal(t, 60, r.Inbox.TotalCount)
			assert.Equal(t, "message 59", r.Inbox.Edges[0].Node.Text)
			assert.Equal(t, "author4", r.Inbox.Edges[0].Node.Author.Handle)

			calls, total := e.backend.snapshot()
			t.Logf("inbox(first: %d): %d backend calls %v", first, total, calls)
			assert.Equal(t, map[string]int64{"ReadInbox": 1, "FindMessagesByIDs": 1, "FindUsersByIDs": 1}, calls)
			assert.EqualValues(t, 3, total)
		})
	}

	t.Run("WithViewerFollows", func(t *testing.T) {
		e.backend.reset()
		e.mustExec(t, reader, `{ inbox(first: 50) { edges { node { author { handle viewerFollows } replyTo { id } } } } }`, nil, nil)
		calls, total := e.backend.snapshot()
		assert.Equal(t, map[string]int64{"ReadInbox": 1, "FindMessagesByIDs": 1, "FindUsersByIDs": 1, "FindFollowing": 1}, calls)
		assert.EqualValues(t, 4, total)
	})

	t.Run("Followers", func(t *testing.T) {
		e.backend.reset()
		e.mustExec(t, reader, `{ viewer { following(first: 50) { edges { node { handle viewerFollows messageCount } } } } }`, nil, nil)
		calls, _ := e.backend.snapshot()
		// viewer: FindUsersByIDs; following: ListFollowing + FindUsersByIDs;
		// viewerFollows: FindFollowing.
		assert.Equal(t, map[string]int64{"FindUsersByIDs": 2, "ListFollowing": 1, "FindFollowing": 1}, calls)
	})

	t.Run("FreshPerOperation", func(t *testing.T) {
		e.backend.reset()
		for range 3 {
			e.mustExec(t, reader, `{ viewer { handle } }`, nil, nil)
		}
		calls, _ := e.backend.snapshot()
		assert.Equal(t, int64(3), calls["FindUsersByIDs"], "no caching across operations")
	})
}
