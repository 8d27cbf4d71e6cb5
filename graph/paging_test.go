package graph_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

// conn is the part of any connection a paging test reads.
type conn struct {
	PageInfo pageInfo `json:"pageInfo"`
	Edges    []struct {
		Cursor string `json:"cursor"`
		Node   struct {
			ID     string `json:"id"`
			Text   string `json:"text"`
			Handle string `json:"handle"`
		} `json:"node"`
	} `json:"edges"`
}

// names returns the page's items, each by its text or handle.
func (c conn) names() []string {
	out := make([]string, len(c.Edges))
	for i, e := range c.Edges {
		out[i] = e.Node.Text + e.Node.Handle
	}
	return out
}

// connField is one connection of the schema: how to query it and where
// its connection sits in the response.
type connField struct {
	name  string
	query string // with $first, $after, $last and $before
	path  []string
}

// readConn runs f's query with vars and returns its connection.
func readConn(t *testing.T, e *env, token string, f connField, vars map[string]any) conn {
	t.Helper()
	var data map[string]json.RawMessage
	e.mustExec(t, token, f.query, vars, &data)
	raw := data[f.path[0]]
	for _, p := range f.path[1:] {
		var m map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(raw, &m))
		raw = m[p]
	}
	var c conn
	require.NoError(t, json.Unmarshal(raw, &c))
	return c
}

// TestPaging pages every connection forward and backward, as Relay
// clients do: backward pages hold the same items as forward ones, in the
// list's order, and pageInfo tells what lies beyond in the direction read.
func TestPaging(t *testing.T) { forStrategies(t, testPaging) }

func testPaging(t *testing.T) {
	e := newEnv(t, nil)
	star, starID := mustSignUp(t, e, "star")
	reader, _ := mustSignUp(t, e, "reader")
	var fans []string
	for i := range 7 {
		tok, _ := mustSignUp(t, e, fmt.Sprintf("fan%d", i))
		mustFollow(t, e, tok, starID)
		mustSetAttributes(t, e, tok, change("team", ptr("blue")))
		fans = append(fans, fmt.Sprintf("fan%d", i))
	}
	mustFollow(t, e, reader, starID)
	var posts []string
	for i := range 7 {
		text := fmt.Sprintf("post %d", i)
		mustPost(t, e, star, text)
		posts = append([]string{text}, posts...) // newest first
	}
	waitFanOut(t, e)

	const args = `first: $first, after: $after, last: $last, before: $before`
	const vars = `$first: Int, $after: String, $last: Int, $before: String`
	const page = `pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { cursor node { id `
	fields := []struct {
		connField
		token string
		want  []string
	}{
		{connField{"inbox", `query(` + vars + `) { inbox(` + args + `) { ` + page + `text } } } }`, []string{"inbox"}}, reader, posts},
		{connField{"messages", `query(` + vars + `) { user(handle: "star") { messages(` + args + `) { ` + page + `text } } } } }`, []string{"user", "messages"}}, "", posts},
		{connField{"followers", `query(` + vars + `) { user(handle: "star") { followers(` + args + `) { ` + page + `handle } } } } }`, []string{"user", "followers"}}, "", append([]string{"reader"}, fans...)},
		{connField{"usersByAttribute", `query(` + vars + `) { usersByAttribute(name: "team", value: "blue", ` + args + `) { ` + page + `handle } } } }`, []string{"usersByAttribute"}}, "", fans},
	}
	for _, f := range fields {
		t.Run(f.name, func(t *testing.T) {
			read := func(v map[string]any) conn { return readConn(t, e, f.token, f.connField, v) }

			// Forward through everything, 3 at a time.
			var forward []string
			var cursors []string
			vars := map[string]any{"first": 3}
			for {
				c := read(vars)
				forward = append(forward, c.names()...)
				for _, e := range c.Edges {
					cursors = append(cursors, e.Cursor)
				}
				assert.False(t, c.PageInfo.HasPreviousPage, "a forward page does not look back")
				if !c.PageInfo.HasNextPage {
					break
				}
				vars = map[string]any{"first": 3, "after": *c.PageInfo.EndCursor}
			}
			require.Equal(t, f.want, forward)

			// Backward from the end, 3 at a time: the same items, each
			// page in the list's order.
			var backward []string
			vars = map[string]any{"last": 3}
			pages := 0
			for {
				c := read(vars)
				pages++
				backward = append(c.names(), backward...)
				assert.False(t, c.PageInfo.HasNextPage, "a backward page does not look forward")
				if pages == 1 {
					assert.Equal(t, f.want[len(f.want)-3:], c.names(), "last: 3 is the list's last 3 items, in its order")
					assert.Equal(t, cursors[len(cursors)-3], *c.PageInfo.StartCursor)
					assert.Equal(t, cursors[len(cursors)-1], *c.PageInfo.EndCursor)
				}
				if !c.PageInfo.HasPreviousPage {
					break
				}
				vars = map[string]any{"last": 3, "before": *c.PageInfo.StartCursor}
			}
			assert.Equal(t, f.want, backward)
			assert.Equal(t, 3, pages, "7 items in pages of 3")

			// From a cursor in the middle, both ways.
			mid := cursors[3]
			c := read(map[string]any{"last": 2, "before": mid})
			assert.Equal(t, f.want[1:3], c.names())
			assert.True(t, c.PageInfo.HasPreviousPage)
			c = read(map[string]any{"last": 5, "before": mid})
			assert.Equal(t, f.want[:3], c.names())
			assert.False(t, c.PageInfo.HasPreviousPage, "nothing before the first item")
			c = read(map[string]any{"first": 2, "after": mid})
			assert.Equal(t, f.want[4:6], c.names())
			assert.True(t, c.PageInfo.HasNextPage)

			c = read(map[string]any{"last": 0})
			assert.Empty(t, c.Edges)
			assert.Nil(t, c.PageInfo.StartCursor)

			// Directions do not mix, and last has first's bounds.
			for _, bad := range []map[string]any{
				{"first": 2, "last": 2},
				{"after": mid, "before": mid},
				{"first": 2, "before": mid},
				{"last": 2, "after": mid},
				{"last": store.MaxPageSize + 1},
				{"last": -1},
				{"last": 2, "before": "bm90IGEgY3Vyc29y"},
			} {
				_, errs := e.exec(t, f.token, f.query, bad)
				require.NotEmpty(t, errs, "%v", bad)
				assert.Equal(t, store.EINVALID, errs[0].Extensions.Code, "%v", bad)
				if _, ok := bad["last"]; ok && len(bad) == 1 {
					assert.True(t, strings.HasPrefix(errs[0].Message, "last must be between"), errs[0].Message)
				}
			}
		})
	}
}
