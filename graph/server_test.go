package graph_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/99designs/gqlgen/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
)

// nest returns a query nesting followers connections n times: each level
// adds 3 to the depth (followers, edges, node).
func nest(n int) string {
	return strings.Repeat(`followers(first: 1) { edges { node { `, n) + `id` + strings.Repeat(` } } }`, n)
}

func TestServer_Limits(t *testing.T) { forBackends(t, testServer_Limits) }

func testServer_Limits(t *testing.T) {
	e := newEnv(t, nil)
	mustSignUp(t, e, "alice")

	tests := []struct {
		name  string
		query string
		code  string // "" when the operation must succeed
	}{
		// depth = 1 (user) + 3n + 1 (id)
		{"DepthAtLimit", `{ user(handle: "alice") { ` + nest(3) + ` } }`, ""},
		{"TooDeep", `{ user(handle: "alice") { ` + nest(4) + ` } }`, graph.CodeQueryTooDeep},
		{"TooDeepThroughFragments", `{ user(handle: "alice") { ...A } }
			fragment A on User { followers { edges { node { ...B } } } }
			fragment B on User { followers { edges { node { ...C } } } }
			fragment C on User { followers { edges { node { ...D } } } }
			fragment D on User { followers { edges { node { id } } } }`, graph.CodeQueryTooDeep},
		{"TooDeepThroughInlineFragments", `{ node(id: "x") { ... on User { ` + nest(4) + ` } } }`, graph.CodeQueryTooDeep},
		{"TooComplex", `{ user(handle: "alice") { followers(first: 100) { edges { node { followers(first: 100) { totalCount } } } } } }`, "COMPLEXITY_LIMIT_EXCEEDED"},
		{"LargePageIsFine", `{ user(handle: "alice") { followers(first: 100) { edges { cursor node { id handle displayName } } } } }`, ""},
		{"UsersByAttributeTooComplex", `{ usersByAttribute(name: "plan", value: "pro", first: 100) { edges { node { followers(first: 100) { totalCount } } } } }`, "COMPLEXITY_LIMIT_EXCEEDED"},
		{"UsersByAttributeLargePageIsFine", `{ usersByAttribute(name: "plan", value: "pro", first: 100) { totalCount edges { cursor node { id handle attributes { name value } } } } }`, ""},
		{"IntrospectionIsNotDepthLimited", `{ __schema { types { name fields { name type { name ofType { name ofType { name ofType { name ofType { name ofType { name } } } } } } } } } }`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := e.exec(t, "", tt.query, nil)
			if tt.code == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Equal(t, tt.code, errs[0].Extensions.Code, errs[0].Message)
		})
	}
}

func TestServer_IntrospectionOff(t *testing.T) { forBackends(t, testServer_IntrospectionOff) }

func testServer_IntrospectionOff(t *testing.T) {
	e := newEnv(t, func(c *graph.Config) { c.Introspection = false })
	for _, q := range []string{
		`{ __schema { queryType { name } } }`,
		`{ __type(name: "User") { name } }`,
		`{ ...F } fragment F on Query { ... on Query { __schema { queryType { name } } } }`,
	} {
		_, errs := e.exec(t, "", q, nil)
		require.NotEmpty(t, errs, q)
		assert.Equal(t, "GRAPHQL_VALIDATION_FAILED", errs[0].Extensions.Code, q)
		assert.Equal(t, "introspection is disabled", errs[0].Message)
	}
	_, errs := e.exec(t, "", `{ __typename viewer { __typename } }`, nil)
	assert.Empty(t, errs, "__typename is not introspection")
	assert.NotContains(t, e.logs.String(), "internal error")
}

func TestServer_PersistedQuery(t *testing.T) { forBackends(t, testServer_PersistedQuery) }

func testServer_PersistedQuery(t *testing.T) {
	e := newEnv(t, nil)
	mustSignUp(t, e, "alice")
	const q = `{ user(handle: "alice") { handle } }`
	sum := sha256.Sum256([]byte(q))
	ext := client.Extensions(map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": hex.EncodeToString(sum[:])}})

	resp, err := e.client.RawPost("", ext)
	require.NoError(t, err)
	assert.Contains(t, string(resp.Errors), "PERSISTED_QUERY_NOT_FOUND", "an unknown hash asks for the query")

	resp, err = e.client.RawPost(q, ext)
	require.NoError(t, err)
	require.Empty(t, resp.Errors)

	resp, err = e.client.RawPost("", ext)
	require.NoError(t, err)
	require.Empty(t, resp.Errors)
	assert.Equal(t, map[string]any{"user": map[string]any{"handle": "alice"}}, resp.Data)
}

func TestDefaultConfig(t *testing.T) {
	c := graph.DefaultConfig()
	assert.Equal(t, graph.DefaultComplexityLimit, c.ComplexityLimit)
	assert.Equal(t, graph.DefaultMaxDepth, c.MaxDepth)
	assert.True(t, c.Introspection)
	assert.Positive(t, c.QueryCacheSize)
	assert.Positive(t, c.APQCacheSize)
}
