package graph

import (
	"context"
	"math"

	"github.com/99designs/gqlgen/graphql"
	"github.com/vektah/gqlparser/v2/ast"
)

// CountCost is what a count that scans costs on top of its field: today the
// totalCount of usersByAttribute, which counts the matching index entries
// and those of User.blocked and muted, which read the list (the other
// counts are kept on write and cost one point). It is priced as
// a page of 100 users, about what the scan of a common value costs.
const CountCost = 100

// ExportCost is what exportAccount costs: priced as 1,000 points, the
// cost of about a page of 50 timeline items, since an export reads up to a
// few hundred pages of the account's lists; its own rate limit
// (RateLimits.Exports) bounds how often a user may run one.
const ExportCost = 1000

// scanCounts are the fields that count by scanning, by the field that
// returns their connection. A test walks the schema to check they exist.
var scanCounts = map[string]string{
	"Query.usersByAttribute": "totalCount",
	"User.blocked":           "totalCount", // no count is kept: the list is read
	"User.muted":             "totalCount",
	"User.followRequests":    "totalCount",
}

// opCost is what the operation limits and the rate limiter need to know of
// an operation, measured once, through fragments as they would execute:
// a fragment spread twice counts twice.
type opCost struct {
	// Complexity is the operation's cost in points: gqlgen's complexity
	// (each field 1 plus its children, connections times their page
	// size), plus every introspection field at 1 point (gqlgen counts
	// none under __schema), plus CountCost per scanning count.
	Complexity int
	// Aliases counts the fields whose response name differs from their
	// name.
	Aliases int
	// RootFields counts the fields the operation asks of its root type,
	// __typename aside: for a mutation, the mutations it runs.
	RootFields int
	// Schemas counts __schema fields.
	Schemas int
	// Depth is how deep the selections nest, introspection aside:
	// `{ viewer { id } }` has depth 2.
	Depth int
}

// opCostKey is where the operation's opCost is kept in its
// OperationContext.Stats, for the extensions after Limits.
const opCostKey = "HeraldCost"

// costOf returns opCtx's opCost as Limits measured it, or nil.
func costOf(opCtx *graphql.OperationContext) *opCost {
	c, _ := opCtx.Stats.GetExtension(opCostKey).(*opCost)
	return c
}

// measure walks opCtx's operation. Each fragment's selection is measured
// once (twice at most: inside introspection and out) and then reused, so a document whose fragments spread each other
// twice over, which expands exponentially, costs time in proportion to its
// size, not to its expansion.
func measure(ctx context.Context, es graphql.ExecutableSchema, opCtx *graphql.OperationContext) *opCost {
	w := &costWalker{ctx: ctx, es: es, schema: es.Schema(), doc: opCtx.Doc, vars: opCtx.Variables}
	if len(opCtx.Doc.Fragments) > 0 {
		w.memo, w.roots = map[fragmentPlace]measured{}, map[string]int{}
	}
	m := w.set(opCtx.Operation.SelectionSet, false)
	return &opCost{Complexity: m.cost, Aliases: m.aliases, Schemas: m.schemas, Depth: m.depth, RootFields: w.rootFields(opCtx.Operation.SelectionSet)}
}

// measured is the measure of one selection set.
type measured struct {
	cost, aliases, schemas, depth int
}

// add adds the measure of a selection beside m's.
func (m *measured) add(o measured) {
	m.cost = satAdd(m.cost, o.cost)
	m.aliases = satAdd(m.aliases, o.aliases)
	m.schemas = satAdd(m.schemas, o.schemas)
	m.depth = max(m.depth, o.depth)
}

// fragmentPlace is a fragment inside introspection or not, which is what
// its measure depends on besides the fragment itself.
type fragmentPlace struct {
	name  string
	intro bool
}

type costWalker struct {
	ctx    context.Context
	es     graphql.ExecutableSchema
	schema *ast.Schema
	doc    *ast.QueryDocument
	vars   map[string]any
	memo   map[fragmentPlace]measured
	roots  map[string]int
}

func (w *costWalker) fragment(name string) *ast.FragmentDefinition {
	if w.doc == nil {
		return nil
	}
	return w.doc.Fragments.ForName(name)
}

// set measures a selection set; intro is true inside __schema or __type.
func (w *costWalker) set(set ast.SelectionSet, intro bool) measured {
	var m measured
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			m.add(w.field(sel, intro))
		case *ast.InlineFragment:
			m.add(w.set(sel.SelectionSet, intro))
		case *ast.FragmentSpread:
			place := fragmentPlace{name: sel.Name, intro: intro}
			fm, ok := w.memo[place]
			if !ok {
				// Fragment cycles are refused by validation, which runs
				// first; the placeholder keeps a cycle from recursing
				// here if one ever got through.
				w.memo[place] = measured{}
				if def := w.fragment(sel.Name); def != nil {
					fm = w.set(def.SelectionSet, intro)
				}
				w.memo[place] = fm
			}
			m.add(fm)
		}
	}
	return m
}

func (w *costWalker) field(f *ast.Field, intro bool) measured {
	var m measured
	if f.Alias != "" && f.Alias != f.Name {
		m.aliases = 1
	}
	if f.Name == "__schema" {
		m.schemas = 1
	}
	if f.Definition == nil || f.ObjectDefinition == nil {
		m.depth = 1
		return m // refused by validation; nothing more to measure
	}
	coord := f.ObjectDefinition.Name + "." + f.Name
	startsIntro := f.Name == "__schema" || f.Name == "__type"
	intro = intro || startsIntro
	child := w.set(f.SelectionSet, intro)
	m.aliases = satAdd(m.aliases, child.aliases)
	m.schemas = satAdd(m.schemas, child.schemas)
	if !startsIntro {
		m.depth = 1 + child.depth
	}
	if intro {
		// Introspection resolves from the schema in memory: a point a
		// field, so that its size counts like any other response's.
		m.cost = satAdd(1, child.cost)
		return m
	}
	m.cost = w.fieldComplexity(f, child.cost)
	// Once per connection, not per item: the page's cost multiplies its
	// children, and the count is not one.
	if count, ok := scanCounts[coord]; ok && w.selects(f.SelectionSet, count, map[string]bool{}) {
		m.cost = satAdd(m.cost, CountCost)
	}
	return m
}

// selects reports whether set asks for the field name, through fragments.
func (w *costWalker) selects(set ast.SelectionSet, name string, seen map[string]bool) bool {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if sel.Name == name {
				return true
			}
		case *ast.InlineFragment:
			if w.selects(sel.SelectionSet, name, seen) {
				return true
			}
		case *ast.FragmentSpread:
			if seen[sel.Name] {
				continue
			}
			seen[sel.Name] = true
			if def := w.fragment(sel.Name); def != nil && w.selects(def.SelectionSet, name, seen) {
				return true
			}
		}
	}
	return false
}

// fieldComplexity is gqlgen's complexity of one field (complexity.Calculate
// does the same for a whole operation, without reusing fragments): the
// schema's complexity function where it has one, else 1 plus the
// children; an interface's field costs what its costliest implementation
// does.
func (w *costWalker) fieldComplexity(f *ast.Field, child int) int {
	kind := ast.Object
	if def := w.schema.Types[f.Definition.Type.Name()]; def != nil {
		kind = def.Kind
	}
	args := f.ArgumentMap(w.vars)
	one := func(typeName string) int {
		if c, ok := w.es.Complexity(w.ctx, typeName, f.Name, child, args); ok && c >= 1 {
			return c
		}
		if kind == ast.Scalar || kind == ast.Enum {
			return satAdd(1, 0)
		}
		return satAdd(1, child)
	}
	if f.ObjectDefinition.Kind != ast.Interface {
		return one(f.ObjectDefinition.Name)
	}
	worst := 0
	for _, t := range w.schema.GetPossibleTypes(f.ObjectDefinition) {
		worst = max(worst, one(t.Name))
	}
	return worst
}

// rootFields counts the fields of a root selection set, through fragments,
// __typename aside.
func (w *costWalker) rootFields(set ast.SelectionSet) int {
	n := 0
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if sel.Name != "__typename" {
				n = satAdd(n, 1)
			}
		case *ast.InlineFragment:
			n = satAdd(n, w.rootFields(sel.SelectionSet))
		case *ast.FragmentSpread:
			c, ok := w.roots[sel.Name]
			if !ok {
				w.roots[sel.Name] = 0
				if def := w.fragment(sel.Name); def != nil {
					c = w.rootFields(def.SelectionSet)
				}
				w.roots[sel.Name] = c
			}
			n = satAdd(n, c)
		}
	}
	return n
}

// satAdd adds without overflowing, so that a document built to wrap a
// count around cannot pass as cheap.
func satAdd(a, b int) int {
	if a > math.MaxInt-b {
		return math.MaxInt
	}
	return a + b
}
