package graph

import (
	"context"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
)

// CodeQueryTooDeep is the extensions.code of an operation refused by
// DepthLimit.
const CodeQueryTooDeep = "QUERY_TOO_DEEP"

// codeComplexityLimit is the code gqlgen's complexity extension sets; gqlgen
// does not export it.
const codeComplexityLimit = "COMPLEXITY_LIMIT_EXCEEDED"

func init() {
	// Like a validation failure, an operation over a limit is refused before
	// it runs: a request error, answered without data (400 with
	// application/graphql-response+json, see HTTPTransport). gqlgen keeps
	// the kinds in a global map that must be written before any request.
	errcode.RegisterErrorType(CodeQueryTooDeep, errcode.KindProtocol)
	errcode.RegisterErrorType(codeComplexityLimit, errcode.KindProtocol)
}

// DepthLimit is a gqlgen handler extension that refuses an operation whose
// selections nest deeper than Max fields, counting through fragments, with
// QUERY_TOO_DEEP. The complexity limit alone does not bound nesting, and
// nesting is what multiplies the work of connection fields.
//
// Introspection fields (__schema, __type) are not counted: the standard
// introspection query is deep by design, and gqlparser already bounds it.
type DepthLimit struct {
	// Max is the deepest nesting allowed; `{ viewer { id } }` has depth 2.
	Max int
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = DepthLimit{}

// ExtensionName implements graphql.HandlerExtension.
func (DepthLimit) ExtensionName() string { return "DepthLimit" }

// Validate implements graphql.HandlerExtension.
func (DepthLimit) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator; it runs
// after the operation is parsed and validated and before it executes.
func (d DepthLimit) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil {
		return nil
	}
	if depth := selectionDepth(opCtx.Doc, opCtx.Operation.SelectionSet, d.Max, nil); depth > d.Max {
		err := gqlerror.Errorf("operation is nested deeper than the limit of %d", d.Max)
		errcode.Set(err, CodeQueryTooDeep)
		return err
	}
	return nil
}

// selectionDepth returns the depth of set, stopping early once it exceeds
// limit (so a pathological document costs little). visiting holds the fragments on
// the current path, guarding against cycles the validator would reject
// anyway.
func selectionDepth(doc *ast.QueryDocument, set ast.SelectionSet, limit int, visiting map[string]bool) int {
	deepest := 0
	for _, sel := range set {
		var d int
		switch sel := sel.(type) {
		case *ast.Field:
			if strings.HasPrefix(sel.Name, "__") && sel.Name != "__typename" {
				continue
			}
			if limit > 0 {
				d = 1 + selectionDepth(doc, sel.SelectionSet, limit-1, visiting)
			} else {
				d = 1 // already over the limit; no need to look further
			}
		case *ast.InlineFragment:
			d = selectionDepth(doc, sel.SelectionSet, limit, visiting)
		case *ast.FragmentSpread:
			def := sel.Definition
			if def == nil && doc != nil {
				def = doc.Fragments.ForName(sel.Name)
			}
			if def == nil || visiting[sel.Name] {
				continue
			}
			if visiting == nil {
				visiting = map[string]bool{}
			}
			visiting[sel.Name] = true
			d = selectionDepth(doc, def.SelectionSet, limit, visiting)
			delete(visiting, sel.Name)
		}
		deepest = max(deepest, d)
		if deepest > limit {
			break
		}
	}
	return deepest
}

// noIntrospection refuses __schema and __type when introspection is off,
// with GRAPHQL_VALIDATION_FAILED. Without it, gqlgen runs the operation and
// fails those fields with an uncoded error, which the presenter would have to
// treat as INTERNAL.
type noIntrospection struct{}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = noIntrospection{}

// ExtensionName implements graphql.HandlerExtension.
func (noIntrospection) ExtensionName() string { return "NoIntrospection" }

// Validate implements graphql.HandlerExtension.
func (noIntrospection) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationContext implements graphql.OperationContextMutator.
func (noIntrospection) MutateOperationContext(_ context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil || !introspects(opCtx.Doc, opCtx.Operation.SelectionSet, map[string]bool{}) {
		return nil
	}
	err := gqlerror.Errorf("introspection is disabled")
	errcode.Set(err, errcode.ValidationFailed)
	return err
}

// introspects reports whether a root selection set asks for __schema or
// __type (valid only at the root, possibly through fragments).
func introspects(doc *ast.QueryDocument, set ast.SelectionSet, seen map[string]bool) bool {
	for _, sel := range set {
		switch sel := sel.(type) {
		case *ast.Field:
			if sel.Name == "__schema" || sel.Name == "__type" {
				return true
			}
		case *ast.InlineFragment:
			if introspects(doc, sel.SelectionSet, seen) {
				return true
			}
		case *ast.FragmentSpread:
			def := sel.Definition
			if def == nil && doc != nil {
				def = doc.Fragments.ForName(sel.Name)
			}
			if def != nil && !seen[sel.Name] {
				seen[sel.Name] = true
				if introspects(doc, def.SelectionSet, seen) {
					return true
				}
			}
		}
	}
	return false
}
