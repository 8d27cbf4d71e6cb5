package graph_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

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

// aliases returns n copies of field, each under its own alias.
func aliases(n int, field string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "a%d: %s ", i, field)
	}
	return b.String()
}

// fragmentBomb is a document of n fragments each spreading the next twice:
// 2^n fields once expanded, a few hundred bytes written.
func fragmentBomb(n int) string {
	var b strings.Builder
	b.WriteString(`{ viewer { ...F0 } } `)
	for i := range n {
		fmt.Fprintf(&b, "fragment F%d on User { ...F%d ...F%d } ", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on User { handle }", n)
	return b.String()
}

// deepBomb is fragmentBomb nesting each level inside a field, so that its
// depth, not only its breadth, is n.
func deepBomb(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "fragment F%d on User { followers { edges { node { ...F%d } } } following { edges { node { ...F%d } } } } ", i, i+1, i+1)
	}
	fmt.Fprintf(&b, "fragment F%d on User { handle }", n)
	return b.String()
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
		{"AliasedRootFields", `{ ` + aliases(graph.DefaultMaxAliases, `viewer { id }`) + ` }`, graph.CodeRootFieldLimit},
		{"AliasesNested", `{ viewer { ` + aliases(graph.DefaultMaxAliases+1, `handle`) + ` } }`, graph.CodeAliasLimit},
		{"AliasesThroughFragments", `{ viewer { ...A ...A } } fragment A on User { ` + aliases(graph.DefaultMaxAliases/2+1, `handle`) + ` }`, graph.CodeAliasLimit},
		{"RootFieldsAtLimit", `{ ` + aliases(graph.DefaultMaxRootFields, `viewer { id }`) + ` }`, ""},
		{"RootFieldsOverLimit", `{ ` + aliases(graph.DefaultMaxRootFields+1, `viewer { id }`) + ` }`, graph.CodeRootFieldLimit},
		{"TypenameIsNoRootField", `{ ` + strings.Repeat(`__typename `, 50) + ` }`, ""},
		{"OneSchema", `{ __schema { queryType { name } } __type(name: "User") { name } }`, ""},
		{"TwoSchemas", `{ __schema { queryType { name } } s: __schema { queryType { name } } }`, graph.CodeIntrospectionLimit},
		{"Tokens", `{ viewer { ` + strings.Repeat(`id `, graph.DefaultMaxTokens) + ` } }`, graph.CodeTokenLimit},
		{"FragmentBomb", fragmentBomb(50), "COMPLEXITY_LIMIT_EXCEEDED"},
		{"DeepFragmentBomb", `{ user(handle: "alice") { ...F0 } } ` + deepBomb(40), graph.CodeQueryTooDeep},
		// An export reads the whole account: priced so that a few fill an
		// operation.
		{"ExportsCost", `{ ` + aliases(graph.DefaultComplexityLimit/graph.ExportCost+1, `exportAccount`) + ` }`, "COMPLEXITY_LIMIT_EXCEEDED"},
		{"CountCosts", `{ ` + aliases(20, `usersByAttribute(name: "plan", value: "pro", first: 100) { totalCount edges { cursor node { id handle displayName } } }`) + ` }`, "COMPLEXITY_LIMIT_EXCEEDED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			_, errs := e.exec(t, "", tt.query, nil)
			assert.Less(t, time.Since(start), time.Second, "a limit is checked in time proportional to the document")
			if tt.code == "" {
				assert.Empty(t, errs)
				return
			}
			require.NotEmpty(t, errs)
			assert.Equal(t, tt.code, errs[0].Extensions.Code, errs[0].Message)
		})
	}
}

func TestServer_ResponseSize(t *testing.T) { forBackends(t, testServer_ResponseSize) }

func testServer_ResponseSize(t *testing.T) {
	e := newEnv(t, func(c *graph.Config) { c.MaxResponseBytes = 600 })
	mustSignUp(t, e, "alice")
	_, errs := e.exec(t, "", `{ user(handle: "alice") { handle } }`, nil)
	require.Empty(t, errs)
	data, errs := e.exec(t, "", `{ `+aliases(20, `user(handle: "alice") { handle displayName }`)+` }`, nil)
	require.NotEmpty(t, errs)
	assert.Equal(t, graph.CodeResponseTooLarge, errs[0].Extensions.Code, errs[0].Message)
	assert.JSONEq(t, "null", string(data), "the data is dropped, not cut")
}

func TestServer_QueryTimeout(t *testing.T) { forBackends(t, testServer_QueryTimeout) }

func testServer_QueryTimeout(t *testing.T) {
	e := newEnv(t, func(c *graph.Config) { c.QueryTimeout = time.Nanosecond })
	_, errs := e.exec(t, "", `{ user(handle: "alice") { handle } }`, nil)
	require.NotEmpty(t, errs)
	assert.Equal(t, graph.CodeTimeout, errs[0].Extensions.Code)
	assert.NotContains(t, e.logs.String(), "internal error", "a timeout is not the server's fault")
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
