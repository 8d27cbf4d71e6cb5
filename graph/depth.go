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
	// it runs: 422 over HTTP rather than 200 with errors. gqlgen keeps the
	// kinds in a global map that must be written before any request.
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
