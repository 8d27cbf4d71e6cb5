package graph_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/store"
)

func TestBlocks(t *testing.T) { forBackends(t, testBlocks) }

// relatedUser is a user as the block and mute mutations return it.
type relatedUser struct {
	Handle         string `json:"handle"`
	FollowerCount  int    `json:"followerCount"`
	FollowingCount int    `json:"followingCount"`
	ViewerFollows  bool   `json:"viewerFollows"`
	ViewerBlocks   bool   `json:"viewerBlocks"`
	ViewerMutes    bool   `json:"viewerMutes"`
}

const relatedFields = `handle followerCount followingCount viewerFollows viewerBlocks viewerMutes`

// relationList is a page of viewer.blocked or viewer.muted.
type relationList struct {
	TotalCount int `json:"totalCount"`
	Edges      []struct {
		Cursor string `json:"cursor"`
		Node   struct {
			Handle       string `json:"handle"`
			ViewerBlocks bool   `json:"viewerBlocks"`
			ViewerMutes  bool   `json:"viewerMutes"`
		} `json:"node"`
	} `json:"edges"`
	PageInfo struct {
		HasNextPage     bool `json:"hasNextPage"`
		HasPreviousPage bool `json:"hasPreviousPage"`
	} `json:"pageInfo"`
}

func (l relationList) handles() []string {
	out := []string{}
	for _, e := range l.Edges {
		out = append(out, e.Node.Handle)
	}
	return out
}

func testBlocks(t *testing.T) {
	e := newEnv(t, nil)
	alice, aliceID := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	_, daveID := mustSignUp(t, e, "dave")
	mustFollow(t, e, alice, bobID)
	mustFollow(t, e, bob, aliceID)
	mustFollow(t, e, alice, carolID)
	waitFanOut(t, e)

	relate := func(token, field, id string) relatedUser {
		t.Helper()
		var r map[string]relatedUser
		e.mustExec(t, token, `mutation($id: ID!) { `+field+`(userId: $id) { `+relatedFields+` } }`, map[string]any{"id": id}, &r)
		return r[field]
	}
	list := func(token, field, args string) relationList {
		t.Helper()
		var r struct {
			Viewer map[string]relationList `json:"viewer"`
		}
		e.mustExec(t, token, `{ viewer { `+field+args+` { totalCount edges { cursor node { handle viewerBlocks viewerMutes } } pageInfo { hasNextPage hasPreviousPage } } } }`, nil, &r)
		return r.Viewer[field]
	}
	profile := func(token, handle string) relatedUser {
		t.Helper()
		var r struct {
			User relatedUser `json:"user"`
		}
		e.mustExec(t, token, `query($h: String!) { user(handle: $h) { `+relatedFields+` } }`, map[string]any{"h": handle}, &r)
		return r.User
	}

	t.Run("block ends the follows both ways and refuses new ones", func(t *testing.T) {
		want := relatedUser{Handle: "bob", ViewerBlocks: true}
		assert.Equal(t, want, relate(alice, "block", bobID), "no follow left either way")
		assert.Equal(t, want, relate(alice, "block", bobID), "blocking twice changes nothing")
		assert.Equal(t, want, profile(alice, "bob"))
		assert.False(t, profile(bob, "alice").ViewerBlocks, "a block is one way")
		assert.False(t, profile("", "bob").ViewerBlocks, "false when nobody is signed in")
		follow := `mutation($id: ID!) { follow(userId: $id) { id } }`
		assert.Equal(t, store.EFORBIDDEN, e.errCode(t, alice, follow, map[string]any{"id": bobID}), "the blocker follows")
		assert.Equal(t, store.EFORBIDDEN, e.errCode(t, bob, follow, map[string]any{"id": aliceID}), "the blocked user follows")
		l := list(alice, "blocked", "(first: 10)")
		assert.Equal(t, []string{"bob"}, l.handles())
		assert.Equal(t, 1, l.TotalCount)
		assert.True(t, l.Edges[0].Node.ViewerBlocks)
	})
	t.Run("mute keeps the follow", func(t *testing.T) {
		assert.Equal(t, relatedUser{Handle: "carol", FollowerCount: 1, ViewerFollows: true, ViewerMutes: true}, relate(alice, "mute", carolID))
		assert.Equal(t, []string{"carol"}, list(alice, "muted", "(first: 10)").handles())
		assert.Empty(t, list(carol, "muted", "").handles(), "a mute is one way")
		assert.True(t, profile(alice, "carol").ViewerMutes)
		assert.False(t, profile(alice, "carol").ViewerBlocks, "kinds are kept apart")
	})
	t.Run("lists paged both ways, newest first", func(t *testing.T) {
		relate(alice, "block", daveID)
		relate(alice, "block", carolID)
		all := list(alice, "blocked", "(first: 10)")
		assert.Equal(t, []string{"carol", "dave", "bob"}, all.handles())
		assert.Equal(t, 3, all.TotalCount)
		first := list(alice, "blocked", "(first: 2)")
		assert.Equal(t, []string{"carol", "dave"}, first.handles())
		assert.True(t, first.PageInfo.HasNextPage)
		rest := list(alice, "blocked", fmt.Sprintf("(first: 2, after: %q)", first.Edges[1].Cursor))
		assert.Equal(t, []string{"bob"}, rest.handles())
		assert.False(t, rest.PageInfo.HasNextPage)
		back := list(alice, "blocked", fmt.Sprintf("(last: 1, before: %q)", all.Edges[2].Cursor))
		assert.Equal(t, []string{"dave"}, back.handles())
		assert.True(t, back.PageInfo.HasPreviousPage)
		last := list(alice, "blocked", "(last: 2)")
		assert.Equal(t, []string{"dave", "bob"}, last.handles())
		relate(alice, "unblock", carolID)
		relate(alice, "unblock", daveID)
	})
	t.Run("unblock and unmute", func(t *testing.T) {
		assert.Equal(t, relatedUser{Handle: "bob"}, relate(alice, "unblock", bobID), "the follows stay removed")
		assert.Equal(t, relatedUser{Handle: "bob"}, relate(alice, "unblock", bobID), "twice")
		assert.Empty(t, list(alice, "blocked", "").handles())
		mustFollow(t, e, bob, aliceID) // allowed again
		// The block of carol above ended alice's follow; the mute outlived
		// the block's undoing.
		assert.Equal(t, relatedUser{Handle: "carol"}, relate(alice, "unmute", carolID))
		assert.Empty(t, list(alice, "muted", "").handles())
		assert.Equal(t, 0, list(alice, "muted", "").TotalCount)
	})
	t.Run("refusals", func(t *testing.T) {
		for _, field := range []string{"block", "unblock", "mute", "unmute"} {
			q := `mutation($id: ID!) { ` + field + `(userId: $id) { id } }`
			assert.Equal(t, store.EUNAUTHENTICATED, e.errCode(t, "", q, map[string]any{"id": bobID}), field)
			assert.Equal(t, store.EINVALID, e.errCode(t, alice, q, map[string]any{"id": aliceID}), "%s yourself", field)
			assert.Equal(t, store.EINVALID, e.errCode(t, alice, q, map[string]any{"id": "not-an-id"}), field)
			assert.Equal(t, store.ENOTFOUND, e.errCode(t, alice, q, map[string]any{"id": fakeGlobalID("User")}), field)
		}
		for _, field := range []string{"blocked", "muted"} {
			other := `{ user(handle: "bob") { ` + field + ` { edges { node { id } } } } }`
			assert.Equal(t, store.EFORBIDDEN, e.errCode(t, alice, other, nil), "another user's %s", field)
			assert.Equal(t, store.EUNAUTHENTICATED, e.errCode(t, "", other, nil), "%s anonymous", field)
			assert.Equal(t, store.EINVALID, e.errCode(t, alice, `{ viewer { `+field+`(first: 101) { totalCount } } }`, nil), "%s page too large", field)
			assert.Equal(t, store.EINVALID, e.errCode(t, alice, `{ viewer { `+field+`(first: 1, last: 1) { totalCount } } }`, nil), "%s both ways", field)
		}
		relate(alice, "block", daveID)
		c := list(alice, "blocked", "").Edges[0].Cursor
		assert.Equal(t, store.EINVALID, e.errCode(t, alice, fmt.Sprintf(`{ viewer { muted(after: %q) { totalCount } } }`, c), nil), "a cursor of another list")
		relate(alice, "unblock", daveID)
	})
	t.Run("viewerBlocks and viewerMutes cost one call a page", func(t *testing.T) {
		relate(carol, "block", aliceID)
		relate(carol, "mute", bobID)
		mustFollow(t, e, carol, daveID)
		q := `{ viewer { following(first: 10) { edges { node { handle viewerBlocks viewerMutes } } } } }`
		_, erinID := mustSignUp(t, e, "erin")
		mustFollow(t, e, carol, erinID)
		e.backend.Reset()
		var r struct {
			Viewer struct {
				Following struct {
					Edges []struct {
						Node struct {
							Handle       string `json:"handle"`
							ViewerBlocks bool   `json:"viewerBlocks"`
							ViewerMutes  bool   `json:"viewerMutes"`
						} `json:"node"`
					} `json:"edges"`
				} `json:"following"`
			} `json:"viewer"`
		}
		e.mustExec(t, carol, q, nil, &r)
		calls, _ := e.backend.Snapshot()
		require.Len(t, r.Viewer.Following.Edges, 2)
		assert.Equal(t, int64(2), calls["FindBlocked"], "one for the page's blocks, one for its mutes")
		var blocked struct {
			User relatedUser `json:"user"`
		}
		e.mustExec(t, carol, `{ user(handle: "alice") { `+relatedFields+` } }`, nil, &blocked)
		assert.True(t, blocked.User.ViewerBlocks)
		e.mustExec(t, carol, `{ user(handle: "bob") { `+relatedFields+` } }`, nil, &blocked)
		assert.True(t, blocked.User.ViewerMutes)
	})
}

func TestBlocks_Home(t *testing.T) { forStrategies(t, testBlocksHome) }

// testBlocksHome: a muted user's messages leave the inbox, pages stay full
// and counts exact, later ones never arrive, and unmuting brings them back;
// a blocked user's messages likewise, and the blocker's leave theirs.
func testBlocksHome(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, bobID := mustSignUp(t, e, "bob")
	carol, carolID := mustSignUp(t, e, "carol")
	mustFollow(t, e, alice, bobID)
	mustFollow(t, e, alice, carolID)
	for i := range 3 {
		mustPost(t, e, bob, fmt.Sprintf("bob %d", i))
		mustPost(t, e, carol, fmt.Sprintf("carol %d", i))
	}
	waitFanOut(t, e)
	type page struct {
		Inbox struct {
			TotalCount  int `json:"totalCount"`
			UnreadCount int `json:"unreadCount"`
			Edges       []struct {
				Node struct {
					Text   string `json:"text"`
					Author struct {
						Handle string `json:"handle"`
					} `json:"author"`
				} `json:"node"`
			} `json:"edges"`
			PageInfo struct {
				HasNextPage bool `json:"hasNextPage"`
			} `json:"pageInfo"`
		} `json:"inbox"`
	}
	read := func(first int) page {
		t.Helper()
		var p page
		e.mustExec(t, alice, fmt.Sprintf(`{ inbox(first: %d) { totalCount unreadCount edges { node { text author { handle } } } pageInfo { hasNextPage } } }`, first), nil, &p)
		return p
	}
	texts := func(p page) []string {
		out := []string{}
		for _, e := range p.Inbox.Edges {
			out = append(out, e.Node.Text)
		}
		return out
	}
	require.Len(t, texts(read(10)), 6)

	e.mustExec(t, alice, `mutation($id: ID!) { mute(userId: $id) { id } }`, map[string]any{"id": carolID}, nil)
	waitFanOut(t, e)
	mustPost(t, e, carol, "carol later")
	mustPost(t, e, bob, "bob later")
	waitFanOut(t, e)
	p := read(2)
	assert.Equal(t, []string{"bob later", "bob 2"}, texts(p), "a page stays full")
	assert.True(t, p.Inbox.PageInfo.HasNextPage)
	assert.Equal(t, 4, p.Inbox.TotalCount, "bob's four messages")
	assert.Equal(t, 4, p.Inbox.UnreadCount)

	e.mustExec(t, alice, `mutation($id: ID!) { unmute(userId: $id) { id } }`, map[string]any{"id": carolID}, nil)
	waitFanOut(t, e)
	p = read(10)
	assert.Len(t, texts(p), 8, "carol's messages are back, the later one too")
	assert.Equal(t, 8, p.Inbox.TotalCount)

	e.mustExec(t, alice, `mutation($id: ID!) { block(userId: $id) { id } }`, map[string]any{"id": bobID}, nil)
	waitFanOut(t, e)
	mustPost(t, e, bob, "bob after the block")
	waitFanOut(t, e)
	p = read(10)
	assert.Equal(t, []string{"carol later", "carol 2", "carol 1", "carol 0"}, texts(p))
	assert.Equal(t, 4, p.Inbox.TotalCount)
	assert.Equal(t, 4, p.Inbox.UnreadCount)
}

func TestBlocks_Cost(t *testing.T) { forBackends(t, testBlocksCost) }

// testBlocksCost: viewer.blocked and muted cost as connections (their
// children once per item asked for), and their totalCount, which reads the
// list, as a scan.
func testBlocksCost(t *testing.T) {
	e := newEnv(t, func(c *graph.Config) { c.ComplexityLimit = 100 })
	alice, _ := mustSignUp(t, e, "alice")
	for _, field := range []string{"blocked", "muted"} {
		e.mustExec(t, alice, `{ viewer { `+field+`(first: 5) { edges { node { handle } } } } }`, nil, nil)
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, alice, `{ viewer { `+field+`(first: 40) { edges { node { handle } } } } }`, nil),
			"%s: 40 edges of 3 fields", field)
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", e.errCode(t, alice, `{ viewer { `+field+`(first: 1) { totalCount } } }`, nil),
			"%s: the count is a scan", field)
	}
}
