package graph

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"herald/graph/generated"
	"herald/store"
)

// fastResolved are the fields the fast path writes from the same resolvers
// gqlgen calls (or, for the ids, the function those resolvers return);
// every other field it writes must be a plain struct field in gqlgen's
// generated code.
var fastResolved = map[string]bool{"Message.id": true, "Message.author": true, "Message.viewerHasLiked": true, "Message.mentions": true, "Message.viewerHasReposted": true, "InboxEdge.repostedBy": true, "User.id": true}

// TestInboxFastPath_MatchesSchema walks the parsed schema and fails when
// a field the inbox fast path writes goes away, changes type, gains an
// argument or a directive, or gains a resolver: the fast path would then
// silently answer something gqlgen would not (the differential test,
// TestInboxFastPath, only sees the selections it tries).
func TestInboxFastPath_MatchesSchema(t *testing.T) {
	es := generated.NewExecutableSchema(generated.Config{Resolvers: &Resolver{}})
	schema := es.Schema()

	// The fields gqlgen resolves with a resolver: the methods of each
	// type's resolver interface, found through ResolverRoot.
	resolvers := map[string]bool{}
	root := reflect.TypeFor[generated.ResolverRoot]()
	for i := range root.NumMethod() {
		m := root.Method(i)
		iface := m.Type.Out(0)
		for j := range iface.NumMethod() {
			// gqlgen names the methods in Go's style (id: ID).
			resolvers[m.Name+"."+strings.ToLower(iface.Method(j).Name)] = true
		}
	}
	isResolver := func(typ, field string) bool {
		return resolvers[typ+"."+strings.ToLower(field)]
	}

	inbox := schema.Query.Fields.ForName("inbox")
	require.NotNil(t, inbox)
	assert.Equal(t, "InboxConnection", inbox.Type.Name(), "Query.inbox")
	assert.True(t, isResolver("Query", "inbox"), "the fast path calls Query.inbox's resolver")

	for typ, ft := range fastTypes {
		def := schema.Types[typ]
		require.NotNil(t, def, "fast type %s is not in the schema", typ)
		assert.Equal(t, ast.Object, def.Kind, typ)
		want := []string{typ}
		for _, iface := range schema.GetImplements(def) {
			want = append(want, iface.Name)
		}
		assert.ElementsMatch(t, want, ft.implementors, "%s's implementors, which fragments match", typ)
		for name, child := range ft.fields {
			if name == "__typename" {
				continue
			}
			coord := typ + "." + name
			f := def.Fields.ForName(name)
			if !assert.NotNil(t, f, "%s is written by the fast path but not in the schema", coord) {
				continue
			}
			assert.Empty(t, f.Arguments, "%s has arguments the fast path does not read", coord)
			assert.Empty(t, f.Directives, "%s has directives the fast path does not apply", coord)
			ret := schema.Types[f.Type.Name()]
			require.NotNil(t, ret, coord)
			if child == "" {
				assert.Contains(t, []ast.DefinitionKind{ast.Scalar, ast.Enum}, ret.Kind, "%s is written as a leaf", coord)
			} else {
				assert.Equal(t, child, ret.Name, "%s is written as a %s", coord, child)
			}
			assert.Equal(t, fastResolved[coord], isResolver(typ, name), "%s: the fast path reads it %s", coord,
				map[bool]string{true: "through its resolver", false: "from the struct field"}[fastResolved[coord]])
		}
	}
	// The enum values the fast path writes are the schema's.
	kind := schema.Types["MessageKind"]
	require.NotNil(t, kind)
	var names []string
	for _, v := range kind.EnumValues {
		names = append(names, v.Name)
	}
	var written []string
	for k, n := range messageKindNames {
		assert.Equal(t, string(k), n, "MessageKind %s is written as %s", k, n)
		written = append(written, n)
	}
	slices.Sort(names)
	slices.Sort(written)
	assert.Equal(t, names, written, "every MessageKind value")
	assert.Equal(t, string(store.KindPost), messageKindNames[store.KindPost])
}
