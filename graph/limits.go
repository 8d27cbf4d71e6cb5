package graph

import (
	"context"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"
	"github.com/vektah/gqlparser/v2/lexer"
)

// CodeQueryTooDeep is the extensions.code of an operation nested deeper
// than Limits.MaxDepth.
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

// Codes of operations refused by Limits and TokenLimit, before they run.
const (
	CodeAliasLimit         = "ALIAS_LIMIT_EXCEEDED"
	CodeRootFieldLimit     = "ROOT_FIELD_LIMIT_EXCEEDED"
	CodeIntrospectionLimit = "INTROSPECTION_LIMIT_EXCEEDED"
	CodeTokenLimit         = "TOKEN_LIMIT_EXCEEDED"
)

func init() {
	for _, c := range []string{CodeAliasLimit, CodeRootFieldLimit, CodeIntrospectionLimit, CodeTokenLimit} {
		errcode.RegisterErrorType(c, errcode.KindProtocol)
	}
}

// Limits is a gqlgen handler extension that measures an operation once
// (measure) and refuses it, before it runs, when its selections nest
// deeper than MaxDepth fields (QUERY_TOO_DEEP: the complexity limit alone
// does not bound nesting, and nesting is what multiplies the work of
// connection fields; introspection is not counted, since the standard
// introspection query is deep by design and gqlparser bounds it), when it
// asks for more than one
// __schema (INTROSPECTION_LIMIT_EXCEEDED: one is the whole schema, and a
// response of many is only a way to make the server build a large one),
// more than MaxAliases aliases (ALIAS_LIMIT_EXCEEDED), more than
// MaxRootFields root fields (ROOT_FIELD_LIMIT_EXCEEDED), or a complexity
// above MaxComplexity (COMPLEXITY_LIMIT_EXCEEDED). A zero limit is no
// limit. The measure stays in the operation's stats for the RateLimiter,
// which charges it.
//
// Aliases and root fields are what multiply a request's work without
// making it deeper: 100 aliased logIn fields are 100 password checks, and
// 20 aliased scans of the same index are 20 scans. Complexity bounds what
// one operation reads; the rate limiter, what a client reads over time.
type Limits struct {
	// MaxDepth is the deepest nesting allowed; `{ viewer { id } }` has
	// depth 2.
	MaxDepth      int
	MaxComplexity int
	MaxAliases    int
	MaxRootFields int

	es graphql.ExecutableSchema
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationContextMutator
} = (*Limits)(nil)

// ExtensionName implements graphql.HandlerExtension.
func (*Limits) ExtensionName() string { return "Limits" }

// Validate implements graphql.HandlerExtension.
func (l *Limits) Validate(es graphql.ExecutableSchema) error {
	l.es = es
	return nil
}

// MutateOperationContext implements graphql.OperationContextMutator.
func (l *Limits) MutateOperationContext(ctx context.Context, opCtx *graphql.OperationContext) *gqlerror.Error {
	if opCtx.Operation == nil {
		return nil
	}
	c := measure(ctx, l.es, opCtx)
	opCtx.Stats.SetExtension(opCostKey, c)
	refuse := func(code, format string, args ...any) *gqlerror.Error {
		err := gqlerror.Errorf(format, args...)
		errcode.Set(err, code)
		return err
	}
	switch {
	// Depth first: a deep operation is usually also too complex, but "too
	// deep" is the more useful error.
	case l.MaxDepth > 0 && c.Depth > l.MaxDepth:
		return refuse(CodeQueryTooDeep, "operation is nested deeper than the limit of %d", l.MaxDepth)
	case c.Schemas > 1:
		return refuse(CodeIntrospectionLimit, "an operation may ask for __schema once; this one asks %d times", c.Schemas)
	case l.MaxAliases > 0 && c.Aliases > l.MaxAliases:
		return refuse(CodeAliasLimit, "operation has %d aliases, which exceeds the limit of %d", c.Aliases, l.MaxAliases)
	case l.MaxRootFields > 0 && c.RootFields > l.MaxRootFields:
		return refuse(CodeRootFieldLimit, "operation has %d root fields, which exceeds the limit of %d", c.RootFields, l.MaxRootFields)
	case l.MaxComplexity > 0 && c.Complexity > l.MaxComplexity:
		return refuse(codeComplexityLimit, "operation has complexity %d, which exceeds the limit of %d", c.Complexity, l.MaxComplexity)
	}
	return nil
}

// TokenLimit is a gqlgen handler extension that refuses a document of more
// than Max lexical tokens (names, punctuators, values) with
// TOKEN_LIMIT_EXCEEDED, before it is parsed: parsing and validating cost in
// proportion to tokens, and the body limit alone lets through a megabyte
// of them. A document already in the query cache passed before and is not
// counted again.
type TokenLimit struct {
	Max   int
	Cache graphql.Cache[*ast.QueryDocument]
}

var _ interface {
	graphql.HandlerExtension
	graphql.OperationParameterMutator
} = TokenLimit{}

// ExtensionName implements graphql.HandlerExtension.
func (TokenLimit) ExtensionName() string { return "TokenLimit" }

// Validate implements graphql.HandlerExtension.
func (TokenLimit) Validate(graphql.ExecutableSchema) error { return nil }

// MutateOperationParameters implements graphql.OperationParameterMutator.
func (t TokenLimit) MutateOperationParameters(ctx context.Context, raw *graphql.RawParams) *gqlerror.Error {
	if t.Max <= 0 || raw.Query == "" {
		return nil
	}
	if t.Cache != nil {
		if _, ok := t.Cache.Get(ctx, raw.Query); ok {
			return nil
		}
	}
	if n := countTokens(raw.Query, t.Max); n > t.Max {
		err := gqlerror.Errorf("the document has more than %d tokens", t.Max)
		errcode.Set(err, CodeTokenLimit)
		return err
	}
	return nil
}

// countTokens counts the tokens of query, stopping once past limit; a
// lexical error ends the count there (the parser reports it).
func countTokens(query string, limit int) int {
	lx := lexer.New(&ast.Source{Input: query})
	n := 0
	for n <= limit {
		tok, err := lx.ReadToken()
		if err != nil || tok.Kind == lexer.EOF {
			break
		}
		n++
	}
	return n
}
