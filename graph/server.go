package graph

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/99designs/gqlgen/graphql/errcode"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/gqlerror"

	"herald/graph/auth"
	"herald/graph/generated"
	"herald/graph/loader"
	"herald/store"
	"herald/store/service"
)

// Defaults of the Config limits, used where a field is zero. Each is far
// above what Herald's own clients and GraphiQL send (the playground's
// document of example operations has about 270 tokens, its introspection
// query about 160 and a complexity near 600) and far below what makes a
// request expensive: see README.md#limits.
const (
	DefaultComplexityLimit  = 5000
	DefaultMaxDepth         = 12
	DefaultMaxAliases       = 30
	DefaultMaxRootFields    = 20
	DefaultMaxTokens        = 2000
	DefaultMaxResponseBytes = 4 << 20
	DefaultQueryTimeout     = 10 * time.Second
	DefaultQueryCacheSize   = 1000
	DefaultAPQCacheSize     = 100
	DefaultMaxBatch         = 10
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
	Service *service.Service
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
	// MaxAliases caps the aliased fields of an operation
	// (ALIAS_LIMIT_EXCEEDED), MaxRootFields its root fields
	// (ROOT_FIELD_LIMIT_EXCEEDED), MaxTokens the lexical tokens of its
	// document (TOKEN_LIMIT_EXCEEDED), and MaxResponseBytes the JSON of
	// one response's data (RESPONSE_SIZE_LIMIT_EXCEEDED). An operation
	// may ask for __schema once (INTROSPECTION_LIMIT_EXCEEDED).
	MaxAliases       int
	MaxRootFields    int
	MaxTokens        int
	MaxResponseBytes int
	// QueryTimeout bounds each query and mutation, over HTTP and
	// websocket alike (TIMEOUT); a subscription lives as long as its
	// socket, each event under the same bound.
	QueryTimeout time.Duration
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
	// RateLimits limits mutations and query cost per user and per client
	// address, and failed logIns per handle (RateLimiter); the zero value,
	// also DefaultConfig's, limits nothing.
	RateLimits RateLimits
}

// DefaultConfig returns a Config with every limit at its default and
// introspection and batching on; the caller sets the dependencies.
func DefaultConfig() Config {
	return Config{
		ComplexityLimit:  DefaultComplexityLimit,
		MaxDepth:         DefaultMaxDepth,
		MaxAliases:       DefaultMaxAliases,
		MaxRootFields:    DefaultMaxRootFields,
		MaxTokens:        DefaultMaxTokens,
		MaxResponseBytes: DefaultMaxResponseBytes,
		QueryTimeout:     DefaultQueryTimeout,
		Introspection:    true,
		QueryCacheSize:   DefaultQueryCacheSize,
		APQCacheSize:     DefaultAPQCacheSize,
		MaxBatch:         DefaultMaxBatch,
	}
}

// NewServer returns the GraphQL handler over cfg.Service with the HTTP
// transports (HTTPTransport for GET and POST, following GraphQL over HTTP,
// and OPTIONS), the caches, the limits, the error
// presenter and recover function, and fresh dataloaders for every operation
// and every subscription event. The caller adds the websocket transport with
// AddTransport and puts the viewer's session into the request context with
// NewContextWithSession before the handler runs.
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
	cfg.MaxAliases = orDefault(cfg.MaxAliases, DefaultMaxAliases)
	cfg.MaxRootFields = orDefault(cfg.MaxRootFields, DefaultMaxRootFields)
	cfg.MaxTokens = orDefault(cfg.MaxTokens, DefaultMaxTokens)
	cfg.MaxResponseBytes = orDefault(cfg.MaxResponseBytes, DefaultMaxResponseBytes)
	cfg.QueryCacheSize = orDefault(cfg.QueryCacheSize, DefaultQueryCacheSize)
	cfg.APQCacheSize = orDefault(cfg.APQCacheSize, DefaultAPQCacheSize)
	if cfg.QueryTimeout == 0 {
		cfg.QueryTimeout = DefaultQueryTimeout
	}

	var limiter *RateLimiter
	if !cfg.RateLimits.Off() {
		limiter = NewRateLimiter(cfg.RateLimits)
	}
	resolver := &Resolver{Service: cfg.Service, Tokens: cfg.Tokens, Logger: cfg.Logger, LogIns: limiter}
	gcfg := generated.Config{Resolvers: resolver}
	setComplexity(&gcfg.Complexity)
	srv := handler.New(generated.NewExecutableSchema(gcfg))
	// Root fields run one after another in a mutation, so a request whose
	// client left, or whose time is up, stops between them; this runs
	// before the fast path, which otherwise answers at once.
	srv.AroundRootFields(func(ctx context.Context, next graphql.RootResolver) graphql.Marshaler {
		if err := ctx.Err(); err != nil {
			graphql.AddError(ctx, err)
			return graphql.Null
		}
		return next(ctx)
	})
	if fast {
		srv.AroundRootFields(inboxFastPath(resolver))
	}

	// GET and POST (and every other method but OPTIONS) go to HTTPTransport,
	// which follows GraphQL over HTTP where gqlgen's GET and POST do not.
	srv.AddTransport(HTTPTransport{MaxBatch: cfg.MaxBatch})
	srv.AddTransport(transport.Options{AllowedMethods: strings.Split(allowedMethods, ", ")})

	queryCache := lru.New[*ast.QueryDocument](cfg.QueryCacheSize)
	srv.SetQueryCache(queryCache)
	if cfg.Introspection {
		srv.Use(extension.Introspection{})
	} else {
		srv.Use(noIntrospection{})
	}
	srv.Use(httpSubscriptions{})
	// Persisted queries first: the token limit counts the document they
	// fill in.
	srv.Use(PersistedQueries{Cache: lru.New[string](cfg.APQCacheSize)})
	srv.Use(TokenLimit{Max: cfg.MaxTokens, Cache: queryCache})
	srv.Use(&Limits{
		MaxDepth: max(cfg.MaxDepth, 0), MaxComplexity: max(cfg.ComplexityLimit, 0),
		MaxAliases: max(cfg.MaxAliases, 0), MaxRootFields: max(cfg.MaxRootFields, 0),
	})
	// Last, so that an operation refused by another check costs no token.
	if limiter != nil {
		srv.Use(limiter)
	}

	srv.SetErrorPresenter(ErrorPresenter(cfg.Logger))
	srv.SetRecoverFunc(RecoverFunc(cfg.Logger))

	svc := cfg.Service
	// Loaders cache for one operation. Queries and mutations resolve under
	// the operation's context, so one Loaders per operation is enough. A
	// subscription's are made only if its resolver asks for them.
	srv.AroundOperations(func(ctx context.Context, next graphql.OperationHandler) graphql.ResponseHandler {
		if isSubscription(ctx) {
			// Subscribing is using the app: a follower who only
			// subscribes must not be skipped by the fan-out as inactive
			// (no inbox entry, no event). Counted as it starts, as a
			// query is.
			if viewer, ok := ViewerFromContext(ctx); ok {
				seenCtx, cancel := context.WithTimeout(ctx, cfg.QueryTimeout)
				svc.Seen(seenCtx, viewer)
				cancel()
			}
			return next(withLazyLoaders(ctx, svc))
		}
		// An HTTP request comes with its deadline (the server's, for a
		// batch as a whole); an operation over a websocket gets its own.
		cancel := context.CancelFunc(func() {})
		if _, ok := ctx.Deadline(); !ok {
			ctx, cancel = context.WithTimeout(ctx, cfg.QueryTimeout)
		}
		if viewer, ok := ViewerFromContext(ctx); ok {
			svc.Seen(ctx, viewer)
		}
		h := next(withLoaders(ctx, svc))
		first := true
		return func(ctx context.Context) *graphql.Response {
			defer cancel()
			resp := h(ctx)
			if resp == nil && first {
				// gqlgen answers nothing for an operation whose context
				// ended before it ran: say why. Only the first time: a
				// transport reads responses until nil (the websocket
				// does), and a query or mutation has one.
				resp = &graphql.Response{Errors: gqlerror.List{ErrorPresenter(cfg.Logger)(ctx, cmp.Or(ctx.Err(), context.DeadlineExceeded))}}
			}
			first = false
			return resp
		}
	})
	// A subscription's events all resolve under the subscription's context;
	// gqlgen calls the response middleware once per event, around the wait
	// for the event and the resolution of its fields, so each event gets
	// its own Loaders there, made when its fields first load, and never
	// sees what an earlier event cached. The wait is unbounded: an idle
	// subscription lives as long as its connection.
	srv.AroundResponses(func(ctx context.Context, next graphql.ResponseHandler) *graphql.Response {
		if isSubscription(ctx) {
			ctx = withLazyLoaders(ctx, svc)
			var d *eventDeadline
			ctx, d = withEventDeadline(ctx, cfg.QueryTimeout)
			defer d.release()
		}
		return limitResponse(ctx, next(ctx), cfg.MaxResponseBytes)
	})
	// A subscription event's fields are bounded as a query is: by
	// QueryTimeout from when the first of them starts resolving. gqlgen
	// resolves a field's children under the context its resolver got here.
	srv.AroundFields(boundEventFields)
	return srv
}

// boundEventFields puts a subscription event's field under the event's
// deadline (see eventDeadline); other fields are left as they are.
func boundEventFields(ctx context.Context, next graphql.Resolver) (any, error) {
	if d, ok := ctx.Value(eventDeadlineKey{}).(*eventDeadline); ok {
		if _, bounded := ctx.Deadline(); !bounded {
			ctx = d.bound(ctx)
		}
	}
	return next(ctx)
}

// eventDeadlineKey is the context key of a subscription event's
// eventDeadline.
type eventDeadlineKey struct{}

// eventDeadline is the deadline of one subscription event's fields, set
// when the first of them starts: the response middleware runs around the
// wait for the event too, which must not be bounded.
type eventDeadline struct {
	timeout time.Duration

	mu      sync.Mutex
	at      time.Time
	cancels []context.CancelFunc
}

// withEventDeadline returns ctx carrying a new eventDeadline of timeout.
func withEventDeadline(ctx context.Context, timeout time.Duration) (context.Context, *eventDeadline) {
	d := &eventDeadline{timeout: timeout}
	return context.WithValue(ctx, eventDeadlineKey{}, d), d
}

// bound returns ctx under the event's deadline.
func (d *eventDeadline) bound(ctx context.Context) context.Context {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.at.IsZero() {
		d.at = time.Now().Add(d.timeout)
	}
	ctx, cancel := context.WithDeadline(ctx, d.at)
	d.cancels = append(d.cancels, cancel)
	return ctx
}

// release frees the event's timers once its response is written.
func (d *eventDeadline) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, cancel := range d.cancels {
		cancel()
	}
	d.cancels = nil
}

// isSubscription reports whether ctx is that of a subscription operation.
func isSubscription(ctx context.Context) bool {
	if !graphql.HasOperationContext(ctx) {
		return false
	}
	op := graphql.GetOperationContext(ctx).Operation
	return op != nil && op.Operation == ast.Subscription
}

// CodeResponseTooLarge is the extensions.code of a response whose data
// exceeded Config.MaxResponseBytes: the data is dropped. A mutation's
// effects stay; only the answer is lost.
const CodeResponseTooLarge = "RESPONSE_SIZE_LIMIT_EXCEEDED"

// limitResponse replaces the data of resp by an error when it is larger
// than limit bytes (0: no limit).
func limitResponse(ctx context.Context, resp *graphql.Response, limit int) *graphql.Response {
	if resp == nil || limit <= 0 || len(resp.Data) <= limit {
		return resp
	}
	err := gqlerror.Errorf("the response's data is %d bytes, more than the limit of %d: ask for fewer items or fields", len(resp.Data), limit)
	errcode.Set(err, CodeResponseTooLarge)
	if graphql.HasOperationContext(ctx) {
		err.Path = nil
	}
	resp.Data = []byte("null")
	resp.Errors = append(resp.Errors, err)
	return resp
}

// withLoaders returns ctx with fresh Loaders for the viewer in ctx.
func withLoaders(ctx context.Context, svc *service.Service) context.Context {
	viewer, ok := ViewerFromContext(ctx)
	return loader.NewContext(ctx, loader.New(svc, viewer, ok))
}

// withLazyLoaders is withLoaders with Loaders made on first use.
func withLazyLoaders(ctx context.Context, svc *service.Service) context.Context {
	viewer, ok := ViewerFromContext(ctx)
	return loader.NewLazyContext(ctx, svc, viewer, ok)
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
			// A size outside 0..MaxPageSize is refused when the field runs.
			n = min(max(*size, 1), store.MaxPageSize+1)
		}
		return satAdd(1, satMul(n, child))
	}
	c.Query.Inbox = page
	c.User.Followers = page
	c.User.Following = page
	c.User.Messages = page
	c.User.Likes = page
	c.User.Blocked = page
	c.User.Muted = page
	c.User.FollowRequests = page
	c.Message.LikedBy = page
	c.Message.Replies = page
	c.Query.Notifications = page
	c.NotificationGroup.Actors = page
	c.NotificationGroup.LatestActors = func(child int) int { return satAdd(1, satMul(store.LatestActorsShown, child)) }
	c.Query.UsersByAttribute = func(child int, _, _ string, first *int, after *string, last *int, before *string) int {
		return page(child, first, after, last, before)
	}
	c.Query.SearchUsers = func(child int, _ string, first *int, after *string) int {
		return page(child, first, after, nil, nil)
	}
	c.Query.Nodes = func(child int, ids []string) int { return satAdd(1, satMul(len(ids), child)) }
	c.Message.Mentions = func(child int) int { return satAdd(1, satMul(store.MaxMentions, child)) }
	c.Query.ExportAccount = func(int) int { return ExportCost }
	c.Query.Conversations = page
	c.Conversation.Messages = page
	members := func(child int) int { return satAdd(1, satMul(membersCost, child)) }
	c.Conversation.Members = members
	c.Conversation.Admins = members
	c.Conversation.ReadPositions = members
}

// satMul multiplies non-negative a and b without overflowing: a product
// that wrapped around could make a costly nesting look cheap.
func satMul(a, b int) int {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt/b {
		return math.MaxInt
	}
	return a * b
}
