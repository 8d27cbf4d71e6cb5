package graph

import (
	"cmp"
	"context"
	"log/slog"
	"strings"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"herald/graph/auth"
	"herald/graph/generated"
	"herald/graph/loader"
	"herald/store"
)

// Defaults of the Config limits, used where a field is zero.
const (
	DefaultComplexityLimit = 5000
	DefaultMaxDepth        = 12
	DefaultQueryCacheSize  = 1000
	DefaultAPQCacheSize    = 100
	DefaultMaxBatch        = 10
)

// Config is what NewServer needs: the resolvers' dependencies and the query
// limits. A zero limit means its default; a negative ComplexityLimit or
// MaxDepth turns that limit off. Introspection is off in the zero value (the
// safe choice for a server built by hand); DefaultConfig turns it on, since
// Herald serves its own playground. Batching is off in the zero value too,
// and on in DefaultConfig. Rate limits are a deployment's choice: off in
// both, set by the server's flags.
type Config struct {
	// Service is the domain API the resolvers call. Required.
	Service *store.Service
	// Tokens issues the tokens returned by signUp and logIn. Required.
	Tokens *auth.Signer
	// Logger receives internal errors and recovered panics; slog.Default()
	// if nil.
	Logger *slog.Logger

	// ComplexityLimit caps an operation's complexity: each field costs 1 plus
	// its children, and a connection's children count once per requested
	// item (first, default 20). Over it: COMPLEXITY_LIMIT_EXCEEDED.
	ComplexityLimit int
	// MaxDepth caps how deep selections nest. Over it: QUERY_TOO_DEEP.
	MaxDepth int
	// Introspection enables __schema and __type queries.
	Introspection bool
	// QueryCacheSize is the number of parsed and validated queries kept.
	QueryCacheSize int
	// APQCacheSize is the number of automatic persisted queries kept.
	APQCacheSize int
	// MaxBatch is the most operations one batched POST may hold
	// (HTTPTransport.MaxBatch); 0 or 1 turns batching off, as in the zero
	// value.
	MaxBatch int
	// RateLimits limits mutations per user and per client address
	// (RateLimiter); the zero value, also DefaultConfig's, limits nothing.
	RateLimits RateLimits
}

// DefaultConfig returns a Config with every limit at its default and
// introspection and batching on; the caller sets the dependencies.
func DefaultConfig() Config {
	return Config{
		ComplexityLimit: DefaultComplexityLimit,
		MaxDepth:        DefaultMaxDepth,
		Introspection:   true,
		QueryCacheSize:  DefaultQueryCacheSize,
		APQCacheSize:    DefaultAPQCacheSize,
		MaxBatch:        DefaultMaxBatch,
	}
}

// NewServer returns the GraphQL handler over cfg.Service with the HTTP
// transports (HTTPTransport for GET and POST, following GraphQL over HTTP,
// and OPTIONS), the caches, the limits, the error
// presenter and recover function, and fresh dataloaders for every operation
// and every subscription event. The caller adds the websocket transport with
// AddTransport and puts the viewer into the request context with
// NewContextWithViewer before the handler runs.
func NewServer(cfg Config) *handler.Server {
	return newServer(cfg, true)
}

// newServer is NewServer, with the inbox fast path (inboxFastPath) only if
// fast is true: tests compare the two.
func newServer(cfg Config, fast bool) *handler.Server {
	if cfg.Service == nil || cfg.Tokens == nil {
		panic("graph: NewServer needs a Service and a token Signer")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cfg.ComplexityLimit = orDefault(cfg.ComplexityLimit, DefaultComplexityLimit)
	cfg.MaxDepth = orDefault(cfg.MaxDepth, DefaultMaxDepth)
	cfg.QueryCacheSize = orDefault(cfg.QueryCacheSize, DefaultQueryCacheSize)
	cfg.APQCacheSize = orDefault(cfg.APQCacheSize, DefaultAPQCacheSize)

	resolver := &Resolver{Service: cfg.Service, Tokens: cfg.Tokens, Logger: cfg.Logger}
	gcfg := generated.Config{Resolvers: resolver}
	setComplexity(&gcfg.Complexity)
	srv := handler.New(generated.NewExecutableSchema(gcfg))
	if fast {
		srv.AroundRootFields(inboxFastPath(resolver))
	}

	// GET and POST (and every other method but OPTIONS) go to HTTPTransport,
	// which follows GraphQL over HTTP where gqlgen's GET and POST do not.
	srv.AddTransport(HTTPTransport{MaxBatch: cfg.MaxBatch})
	srv.AddTransport(transport.Options{AllowedMethods: strings.Split(allowedMethods, ", ")})

	srv.SetQueryCache(lru.New[*ast.QueryDocument](cfg.QueryCacheSize))
	if cfg.Introspection {
		srv.Use(extension.Introspection{})
	} else {
		srv.Use(noIntrospection{})
	}
	srv.Use(httpSubscriptions{})
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](cfg.APQCacheSize)})
	// Depth first: it is the cheaper check, and a deep operation is usually
	// also too complex, but "too deep" is the more useful error.
	if cfg.MaxDepth > 0 {
		srv.Use(DepthLimit{Max: cfg.MaxDepth})
	}
	if cfg.ComplexityLimit > 0 {
		srv.Use(extension.FixedComplexityLimit(cfg.ComplexityLimit))
	}
	// Last, so that a mutation refused by another check costs no token.
	if !cfg.RateLimits.Off() {
		srv.Use(NewRateLimiter(cfg.RateLimits))
	}

	srv.SetErrorPresenter(ErrorPresenter(cfg.Logger))
	srv.SetRecoverFunc(RecoverFunc(cfg.Logger))

	svc := cfg.Service
	// Loaders cache for one operation. Queries and mutations resolve under
	// the operation's context, so one Loaders per operation is enough.
	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		if viewer, ok := ViewerFromContext(ctx); ok {
			svc.Seen(ctx, viewer)
		}
		return next(withLoaders(ctx, svc))
	})
	// A subscription's events all resolve under the subscription's context;
	// gqlgen calls the response middleware once per event, around the
	// resolution of that event's fields, so each event gets its own Loaders
	// there and never sees what an earlier event cached.
	srv.AroundResponses(func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		if graphql.HasOperationContext(ctx) {
			if op := graphql.GetOperationContext(ctx).Operation; op != nil && op.Operation == ast.Subscription {
				ctx = withLoaders(ctx, svc)
			}
		}
		return next(ctx)
	})
	return srv
}

// withLoaders returns ctx with fresh Loaders for the viewer in ctx.
func withLoaders(ctx context.Context, svc *store.Service) context.Context {
	viewer, ok := ViewerFromContext(ctx)
	return loader.NewContext(ctx, loader.New(svc, viewer, ok))
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// setComplexity makes each connection's children count once per requested
// item, because that is how often they are resolved.
func setComplexity(c *generated.ComplexityRoot) {
	page := func(child int, first *int, _ *string, last *int, _ *string) int {
		n := store.DefaultPageSize
		// A page reads first or last items; both given is refused when the
		// field runs.
		if size := cmp.Or(first, last); size != nil {
			// A size outside 0..MaxPageSize is refused when the field runs;
			// capping it here keeps nested products from overflowing.
			n = min(max(*size, 1), store.MaxPageSize+1)
		}
		return 1 + n*child
	}
	c.Query.Inbox = page
	c.User.Followers = page
	c.User.Following = page
	c.User.Messages = page
	c.Query.UsersByAttribute = func(child int, _, _ string, first *int, after *string, last *int, before *string) int {
		return page(child, first, after, last, before)
	}
	c.Query.Nodes = func(child int, ids []string) int { return 1 + len(ids)*child }
}
