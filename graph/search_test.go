package graph_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const searchUsers = `query($q: String!, $first: Int, $after: String) {
	searchUsers(query: $q, first: $first, after: $after) {
		totalCount edges { cursor node { handle displayName } } pageInfo { hasNextPage endCursor } } }`

type searchPage struct {
	SearchUsers struct {
		TotalCount int `json:"totalCount"`
		Edges      []struct {
			Cursor string `json:"cursor"`
			Node   user   `json:"node"`
		} `json:"edges"`
		PageInfo struct {
			HasNextPage bool    `json:"hasNextPage"`
			EndCursor   *string `json:"endCursor"`
		} `json:"pageInfo"`
	} `json:"searchUsers"`
}

func (p searchPage) handles() []string {
	out := []string{}
	for _, e := range p.SearchUsers.Edges {
		out = append(out, e.Node.Handle)
	}
	return out
}

func search(t *testing.T, e *env, q string, first int, after *string) searchPage {
	t.Helper()
	var r searchPage
	vars := map[string]any{"q": q, "first": first}
	if after != nil {
		vars["after"] = *after
	}
	e.mustExec(t, "", searchUsers, vars, &r)
	return r
}

func TestSearchUsers(t *testing.T) { forBackends(t, testSearchUsers) }

func testSearchUsers(t *testing.T) {
	e := newEnv(t, nil)
	ann, _ := mustSignUp(t, e, "ann")
	_, annaID := mustSignUp(t, e, "anna_b")
	_, andyID := mustSignUp(t, e, "andy")
	zed, _ := mustSignUp(t, e, "zed")
	mustUpdateProfile(t, e, zed, map[string]any{"displayName": "Ánnabel Zed"})
	// andy has two followers, anna_b one: the most followed first.
	for _, tok := range []string{ann, zed} {
		mustFollow(t, e, tok, andyID)
	}
	mustFollow(t, e, ann, annaID)

	t.Run("RankedPrefix", func(t *testing.T) {
		p := search(t, e, "an", 10, nil)
		assert.Equal(t, []string{"andy", "anna_b", "ann", "zed"}, p.handles(),
			"by followers, then oldest; zed by the accent-folded word of the name")
		assert.Equal(t, 4, p.SearchUsers.TotalCount)
	})

	t.Run("ExactHandleFirst", func(t *testing.T) {
		assert.Equal(t, []string{"ann", "anna_b", "zed"}, search(t, e, "ANN", 10, nil).handles(), "ann has no followers, but is the handle typed")
	})

	t.Run("SeveralWords", func(t *testing.T) {
		assert.Equal(t, []string{"zed"}, search(t, e, "zed ann", 10, nil).handles())
	})

	t.Run("RenameShowsAtOnce", func(t *testing.T) {
		mustUpdateProfile(t, e, zed, map[string]any{"displayName": "Zed"})
		assert.Equal(t, []string{"anna_b"}, search(t, e, "anna", 10, nil).handles(), "the old name no longer finds zed")
		mustUpdateProfile(t, e, zed, map[string]any{"displayName": "Ánnabel Zed"})
	})

	t.Run("FollowButtonsInOneCall", func(t *testing.T) {
		e.backend.Reset()
		var r struct {
			SearchUsers struct {
				Edges []struct {
					Node struct {
						Handle        string `json:"handle"`
						ViewerFollows bool   `json:"viewerFollows"`
					} `json:"node"`
				} `json:"edges"`
			} `json:"searchUsers"`
		}
		e.mustExec(t, ann, `{ searchUsers(query: "an", first: 10) { edges { node { handle viewerFollows } } } }`, nil, &r)
		follows := map[string]bool{}
		for _, edge := range r.SearchUsers.Edges {
			follows[edge.Node.Handle] = edge.Node.ViewerFollows
		}
		assert.Equal(t, map[string]bool{"andy": true, "anna_b": true, "ann": false, "zed": false}, follows)
		calls, _ := e.backend.Snapshot()
		assert.Equal(t, map[string]int64{"SearchUsers": 1, "FindFollowing": 1}, calls,
			"the search, and whether the viewer follows each user found")
	})

	t.Run("Pages", func(t *testing.T) {
		var got []string
		var after *string
		for range 4 {
			p := search(t, e, "an", 2, after)
			got = append(got, p.handles()...)
			if !p.SearchUsers.PageInfo.HasNextPage {
				break
			}
			after = p.SearchUsers.PageInfo.EndCursor
			require.NotNil(t, after)
		}
		assert.Equal(t, []string{"andy", "anna_b", "ann", "zed"}, got, "every user once, in rank order")
	})

	t.Run("Invalid", func(t *testing.T) {
		for _, c := range []struct {
			q     string
			first int
			after string
			want  string
		}{
			{"  ", 5, "", "query must contain a letter or digit"},
			{"-.-", 5, "", "query must contain a letter or digit"},
			{string(make([]byte, 65)), 5, "", "query must be valid text of at most 64 characters"},
			{"an", 51, "", "first must be between 0 and 50"},
			{"an", 5, "bm90LWEtY3Vyc29y", "invalid cursor"},
		} {
			vars := map[string]any{"q": c.q, "first": c.first}
			if c.after != "" {
				vars["after"] = c.after
			}
			_, errs := e.exec(t, "", searchUsers, vars)
			require.Len(t, errs, 1, c.want)
			assert.Equal(t, "BAD_USER_INPUT", errs[0].Extensions.Code, c.want)
			assert.Equal(t, c.want, errs[0].Message)
		}
	})
}
