package graph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

// attribute is an Attribute as the API returns it.
type attribute struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

const setAttributes = `mutation($in: [AttributeInput!]!) { setAttributes(input: $in) { id handle attributes { name value } } }`

// change is one AttributeInput; a nil value removes the attribute.
func change(name string, value *string) map[string]any {
	return map[string]any{"name": name, "value": value}
}

func ptr(s string) *string { return &s }

// mustSetAttributes applies changes as the token's user and returns the
// attributes the mutation reports.
func mustSetAttributes(t *testing.T, e *env, token string, changes ...map[string]any) []attribute {
	t.Helper()
	var r struct {
		SetAttributes struct {
			Attributes []attribute `json:"attributes"`
		} `json:"setAttributes"`
	}
	e.mustExec(t, token, setAttributes, map[string]any{"in": changes}, &r)
	require.NotNil(t, r.SetAttributes.Attributes, "attributes is a list, never null")
	return r.SetAttributes.Attributes
}

// attributesOf reads a user's attributes by handle, anonymously.
func attributesOf(t *testing.T, e *env, handle string) []attribute {
	t.Helper()
	var r struct {
		User *struct {
			Attributes []attribute `json:"attributes"`
		} `json:"user"`
	}
	e.mustExec(t, "", `query($h: String!) { user(handle: $h) { attributes { name value } } }`, map[string]any{"h": handle}, &r)
	require.NotNil(t, r.User)
	require.NotNil(t, r.User.Attributes, "attributes is a list, never null")
	return r.User.Attributes
}

func TestAttributes(t *testing.T) { forBackends(t, testAttributes) }

func testAttributes(t *testing.T) {
	e := newEnv(t, nil)
	alice, _ := mustSignUp(t, e, "alice")
	bob, _ := mustSignUp(t, e, "bob")

	// Sorted by name, byte-wise: "$" < "a" < "p" < the emoji's lead byte.
	want := []attribute{
		{"$set", "{\"injected\": true}"},
		{"a.b", "dotted"},
		{"plan", "pro"},
		{"🎉 party", "yes ✓"},
	}

	t.Run("Set", func(t *testing.T) {
		got := mustSetAttributes(t, e, alice,
			change("plan", ptr("pro")),
			change("🎉 party", ptr("yes ✓")),
			change("a.b", ptr("dotted")),
			change("$set", ptr(`{"injected": true}`)),
		)
		assert.Equal(t, want, got)
	})

	t.Run("Viewer", func(t *testing.T) {
		var r struct {
			Viewer struct {
				Attributes []attribute `json:"attributes"`
			} `json:"viewer"`
		}
		e.mustExec(t, alice, `{ viewer { attributes { name value } } }`, nil, &r)
		assert.Equal(t, want, r.Viewer.Attributes)
	})

	t.Run("UserByHandle", func(t *testing.T) {
		assert.Equal(t, want, attributesOf(t, e, "alice"))
		assert.Empty(t, attributesOf(t, e, "bob"), "no attributes is an empty list")
	})

	t.Run("RemoveWithNull", func(t *testing.T) {
		got := mustSetAttributes(t, e, alice, change("a.b", nil), change("plan", ptr("team")))
		assert.Equal(t, []attribute{{"$set", `{"injected": true}`}, {"plan", "team"}, {"🎉 party", "yes ✓"}}, got,
			"a.b removed, plan changed, the others left as they were")
		assert.Equal(t, got, attributesOf(t, e, "alice"))

		e.mustExec(t, alice, `mutation { setAttributes(input: [{name: "$set"}]) { id } }`, nil, nil)
		assert.Equal(t, []attribute{{"plan", "team"}, {"🎉 party", "yes ✓"}}, attributesOf(t, e, "alice"), "an omitted value removes too")

		got = mustSetAttributes(t, e, bob, change("never-set", nil))
		assert.Empty(t, got, "removing an attribute the user lacks changes nothing")
	})

	t.Run("Limits", func(t *testing.T) {
		name := strings.Repeat("é", store.AttrNameMaxLen) // 64 characters, 128 bytes
		value := strings.Repeat("v", store.AttrValueMaxLen)
		got := mustSetAttributes(t, e, bob, change(name, ptr(value)), change("empty", ptr("")))
		assert.Equal(t, []attribute{{"empty", ""}, {name, value}}, got)
	})

	t.Run("InvalidChangesNothing", func(t *testing.T) {
		before := attributesOf(t, e, "alice")
		code := e.errCode(t, alice, setAttributes, map[string]any{"in": []map[string]any{
			change("plan", ptr("enterprise")), change("", ptr("x")),
		}})
		assert.Equal(t, store.EINVALID, code)
		assert.Equal(t, before, attributesOf(t, e, "alice"))
	})

	t.Run("SeenByLaterFieldsOfTheOperation", func(t *testing.T) {
		type authored struct {
			Author struct {
				Attributes []attribute `json:"attributes"`
			} `json:"author"`
		}
		var r struct {
			A authored `json:"a"`
			C authored `json:"c"`
		}
		// a caches bob in the operation's UserByID; c must see what b set.
		e.mustExec(t, bob, `mutation {
			a: postMessage(input: {text: "before"}) { author { attributes { name value } } }
			b: setAttributes(input: [{name: "x", value: "2"}]) { id }
			c: postMessage(input: {text: "after"}) { author { attributes { name value } } } }`, nil, &r)
		assert.NotContains(t, r.A.Author.Attributes, attribute{"x", "2"})
		assert.Contains(t, r.C.Author.Attributes, attribute{"x", "2"})
	})
}

// usersPage is a UserConnection as usersByAttribute returns it.
type usersPage struct {
	TotalCount *int     `json:"totalCount"`
	PageInfo   pageInfo `json:"pageInfo"`
	Edges      []struct {
		Cursor string `json:"cursor"`
		Node   struct {
			user
			Attributes []attribute `json:"attributes"`
		} `json:"node"`
	} `json:"edges"`
}

func handles(p usersPage) []string {
	out := make([]string, len(p.Edges))
	for i, e := range p.Edges {
		out[i] = e.Node.Handle
	}
	return out
}

func TestUsersByAttribute(t *testing.T) { forBackends(t, testUsersByAttribute) }

func testUsersByAttribute(t *testing.T) {
	e := newEnv(t, nil)
	var tokens, ids []string
	for i := range 5 {
		tok, id := mustSignUp(t, e, fmt.Sprintf("user%d", i))
		tokens, ids = append(tokens, tok), append(ids, id)
	}
	// user0, user2 and user4 are on "pro"; user1 on "free"; user3 on "pro"
	// under another name.
	for i, tok := range tokens {
		plan := map[bool]string{true: "pro", false: "free"}[i%2 == 0]
		mustSetAttributes(t, e, tok, change("plan", ptr(plan)))
	}
	mustSetAttributes(t, e, tokens[3], change("plan.old", ptr("pro")))

	const q = `query($n: String!, $v: String!, $first: Int, $after: String) {
		usersByAttribute(name: $n, value: $v, first: $first, after: $after) {
			totalCount pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
			edges { cursor node { ` + userFields + ` attributes { name value } } } } }`
	page := func(t *testing.T, token string, vars map[string]any) usersPage {
		t.Helper()
		var r struct {
			UsersByAttribute usersPage `json:"usersByAttribute"`
		}
		e.mustExec(t, token, q, vars, &r)
		return r.UsersByAttribute
	}

	t.Run("Paging", func(t *testing.T) {
		p1 := page(t, "", map[string]any{"n": "plan", "v": "pro", "first": 2})
		assert.Equal(t, []string{"user0", "user2"}, handles(p1), "in the order the accounts were created")
		require.NotNil(t, p1.TotalCount)
		assert.Equal(t, 3, *p1.TotalCount, "totalCount is the whole list")
		assert.True(t, p1.PageInfo.HasNextPage)
		assert.False(t, p1.PageInfo.HasPreviousPage)
		require.NotNil(t, p1.PageInfo.EndCursor)
		assert.Equal(t, p1.Edges[1].Cursor, *p1.PageInfo.EndCursor)

		p2 := page(t, "", map[string]any{"n": "plan", "v": "pro", "first": 2, "after": *p1.PageInfo.EndCursor})
		assert.Equal(t, []string{"user4"}, handles(p2))
		assert.False(t, p2.PageInfo.HasNextPage)
		assert.Equal(t, 3, *p2.TotalCount)

		all := page(t, "", map[string]any{"n": "plan", "v": "pro"})
		assert.Equal(t, []string{"user0", "user2", "user4"}, handles(all), "first defaults to 20")
		assert.Equal(t, []attribute{{"plan", "pro"}}, all.Edges[0].Node.Attributes)
	})

	t.Run("ExactNameAndValue", func(t *testing.T) {
		p := page(t, "", map[string]any{"n": "plan.old", "v": "pro"})
		assert.Equal(t, []string{"user3"}, handles(p))
		p = page(t, "", map[string]any{"n": "plan", "v": "PRO"})
		assert.Empty(t, p.Edges, "values match exactly")
		assert.Equal(t, 0, *p.TotalCount)
		p = page(t, "", map[string]any{"n": "unknown", "v": "pro"})
		assert.Empty(t, p.Edges, "an unknown name is an empty list, not an error")
		assert.Equal(t, 0, *p.TotalCount)
		assert.Nil(t, p.PageInfo.EndCursor)
	})

	t.Run("FirstZero", func(t *testing.T) {
		p := page(t, "", map[string]any{"n": "plan", "v": "pro", "first": 0})
		assert.Empty(t, p.Edges)
		assert.True(t, p.PageInfo.HasNextPage)
		assert.Equal(t, 3, *p.TotalCount)
	})

	t.Run("ViewerFollows", func(t *testing.T) {
		mustFollow(t, e, tokens[1], ids[2])
		waitFanOut(t, e) // the follow's job, before the next test counts calls
		p := page(t, tokens[1], map[string]any{"n": "plan", "v": "pro"})
		follows := map[string]bool{}
		for _, edge := range p.Edges {
			follows[edge.Node.Handle] = edge.Node.ViewerFollows
		}
		assert.Equal(t, map[string]bool{"user0": false, "user2": true, "user4": false}, follows)
	})

	t.Run("CountOnlyWhenSelected", func(t *testing.T) {
		vars := map[string]any{"n": "plan", "v": "pro"}
		e.backend.Reset()
		e.mustExec(t, "", `query($n: String!, $v: String!) { usersByAttribute(name: $n, value: $v) {
			edges { node { handle followerCount attributes { name } } } } }`, vars, nil)
		calls, _ := e.backend.Snapshot()
		assert.Equal(t, map[string]int64{"FindUsersByAttribute": 1}, calls,
			"no count unless asked for, and the users come with the page (no FindUsersByIDs)")

		e.backend.Reset()
		e.mustExec(t, "", `query($n: String!, $v: String!) { usersByAttribute(name: $n, value: $v) { totalCount } }`, vars, nil)
		calls, _ = e.backend.Snapshot()
		assert.Equal(t, map[string]int64{"FindUsersByAttribute": 1, "CountUsersByAttribute": 1}, calls)
	})

	t.Run("FollowersKeepTheirCounters", func(t *testing.T) {
		e.backend.Reset()
		var r struct {
			User struct {
				Followers usersPage `json:"followers"`
			} `json:"user"`
		}
		e.mustExec(t, "", `{ user(handle: "user2") { followers { totalCount } } }`, nil, &r)
		assert.Equal(t, 1, *r.User.Followers.TotalCount)
		calls, _ := e.backend.Snapshot()
		assert.Zero(t, calls["CountUsersByAttribute"])
	})
}
