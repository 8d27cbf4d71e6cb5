// Package httpserver is Herald's HTTP server: the routes (/graphql over
// HTTP and websocket, /healthz, /readyz, /metrics and the web build), the
// middleware of /graphql (access log, CORS and the origin check,
// authentication, client address, body limit, deadline), and the runtime
// profiles' server of their own.
package httpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"herald/graph"
	"herald/graph/auth"
	"herald/server/metrics"
	"herald/server/ws"
	"herald/store"
	"herald/store/service"
	"herald/web"
)

// Server is the HTTP face of Herald: routes, middleware and the websocket
// transport, over a running service.Service.
type Server struct {
	// WS is the websocket transport, whose connections Shutdown closes.
	WS *ws.Adapter

	cfg     Options
	log     *slog.Logger
	svc     *service.Service
	signer  *auth.Signer
	origins *originPolicy
	wsTrack ws.Tracker
	health  health
	// metrics is nil when -metrics=false.
	metrics *metrics.Metrics
	// requestTimeout bounds each GraphQL HTTP request, a batch as a
	// whole: -query-timeout, or less where the backend needs it.
	requestTimeout time.Duration
}

// New returns the server over svc. m, if not nil, is the registry that
// /metrics serves, whose storage metrics svc's backend already feeds (see
// metrics.Metrics.WrapBackend); the server adds its own.
func New(cfg Options, log *slog.Logger, svc *service.Service, signer *auth.Signer, m *metrics.Metrics) (*Server, error) {
	origins, err := newOriginPolicy(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	a := &Server{
		cfg:     cfg,
		log:     log,
		svc:     svc,
		signer:  signer,
		origins: origins,
		WS:      ws.NewAdapter(origins.allowed, ws.WriteTimeout),
		metrics: m,

		requestTimeout: cfg.QueryTimeout,
	}
	a.health.svc = svc
	if cfg.StorageTimeout > 0 {
		a.requestTimeout = min(a.requestTimeout, cfg.StorageTimeout)
	}
	if m != nil {
		m.Watch(svc, a.WS)
	}
	a.WS.Enforce(websocketLimits(cfg), svc)
	return a, nil
}

// Readiness is what /readyz reports: false until the program sets it,
// false again from the start of Shutdown.
func (a *Server) Readiness() *Readiness { return &a.health.ready }

// Routes returns the server's handler; call it once. The middleware of /graphql runs
// outside in: access log, CORS, origin check (websocket only), body limit,
// client address, authentication, deadline, upgrade tracking, then gqlgen.
func (a *Server) Routes() http.Handler {
	gql := graph.NewServer(graph.Config{
		Service:          a.svc,
		Tokens:           a.signer,
		Logger:           a.log,
		ComplexityLimit:  a.cfg.ComplexityLimit,
		MaxDepth:         a.cfg.MaxDepth,
		MaxAliases:       a.cfg.MaxAliases,
		MaxRootFields:    a.cfg.MaxRootFields,
		MaxTokens:        a.cfg.MaxTokens,
		MaxResponseBytes: a.cfg.MaxResponseBytes,
		QueryTimeout:     a.requestTimeout,
		Introspection:    a.cfg.Introspection,
		MaxBatch:         a.cfg.MaxBatch,
		RateLimits: graph.RateLimits{
			User: a.cfg.RateLimitUser, Address: a.cfg.RateLimitAddress,
			QueryUser: a.cfg.RateLimitQueryUser, QueryAddress: a.cfg.RateLimitQueryAddress,
			LogInFailures: a.cfg.RateLimitLogIn, Exports: a.cfg.RateLimitExport,
		},
	})
	if a.metrics != nil {
		gql.Use(a.metrics.Operations())
	}
	limit := a.cfg.MaxBodyBytes
	gql.AddTransport(transport.Websocket{
		Implementation: a.WS,
		InitFunc: a.WS.InitFunc(func(ctx context.Context, token string) (store.Session, error) {
			return authenticate(ctx, a.signer, a.svc, token)
		}),
		InitTimeout: ws.InitTimeout,
		// graphql-ws keep-alives (ws.KeepAlive) and graphql-transport-ws
		// pings (ws.PingInterval) are the adapter's: gqlgen's would run a
		// goroutine per connection.
		KeepAlivePingInterval: 0,
		PingPongInterval:      0,
		PayloadReadLimit:      &limit,
		ErrorFunc: func(ctx context.Context, err error) {
			a.log.DebugContext(ctx, "websocket error", "err", err)
		},
	})

	var h http.Handler = gql
	// Innermost, so that the goroutine a websocket lives on holds no frame
	// of the middleware above it: its stack, as it waits for the next
	// message, then fits the size the runtime shrinks it to.
	h = a.wsTrack.Middleware(h)
	h = deadlineMiddleware(a.requestTimeout, h)
	h = authMiddleware(a.signer, a.svc, h)
	h = clientAddrMiddleware(a.cfg.TrustedProxies, h)
	h = bodyLimitMiddleware(a.cfg.MaxBodyBytes, a.requestTimeout+a.cfg.WriteTimeout, h)
	h = a.origins.middleware(h)
	// Outermost, so that every answer, a 401 or a 413 too, reaches the
	// page that asked.
	h = a.origins.cors().Handler(h)

	mux := http.NewServeMux()
	mux.Handle("/graphql", h)
	mux.HandleFunc("GET /healthz", a.health.live)
	mux.HandleFunc("GET /readyz", a.health.readyz)
	if a.metrics != nil {
		// Unauthenticated, like the health checks: keep it off the public
		// side of the proxy, or turn it off with -metrics=false.
		mux.Handle("GET /metrics", a.metrics.Handler())
	}
	// "/" without a method: a method-qualified "GET /" would conflict with
	// the method-less "/graphql" in ServeMux's precedence rules.
	mux.Handle("/", getOnly(staticHandler(web.Assets)))
	return accessLogMiddleware(a.log, a.cfg.TrustedProxies, mux)
}

// HTTPServer returns the HTTP server of h with the timeouts that keep a
// slow or stalled client from holding a connection: the request's headers
// and body within -read-timeout (the body middleware lifts the read
// deadline once the body is in, so that the query can run; a body not in
// by then closes the connection), its response written within
// -write-timeout of being ready, and an idle keep-alive connection closed
// after two minutes. A websocket's deadlines are its own (gorilla clears
// these at the upgrade).
func (a *Server) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(10*time.Second, a.cfg.ReadTimeout),
		ReadTimeout:       a.cfg.ReadTimeout,
		// What no response outlives, static files included; a GraphQL
		// response gets its own, tighter deadline (bodyLimitMiddleware).
		WriteTimeout: a.cfg.ReadTimeout + a.requestTimeout + a.cfg.WriteTimeout,
		IdleTimeout:  2 * time.Minute,
		ErrorLog:     slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
}

// getOnly answers 405 to any method but GET and HEAD, which is all static
// files support.
func getOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Shutdown stops the HTTP side: readiness goes false, http.Server.Shutdown
// stops listening and waits for in-flight requests, then every websocket
// (hijacked, so Shutdown does not see them) is closed with 1001 Going Away
// and their handlers are waited for, so their subscriptions have ended
// before the hub and store close.
func (a *Server) Shutdown(ctx context.Context, hs *http.Server) error {
	a.health.ready.Store(false)
	var errs []error
	if err := hs.Shutdown(ctx); err != nil {
		a.log.Warn("http requests still running at the deadline; closing them", "err", err)
		_ = hs.Close()
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	} else {
		a.log.Info("http server stopped")
	}
	n := a.WS.Len()
	a.WS.CloseAll()
	if err := a.wsTrack.Wait(ctx); err != nil {
		a.log.Warn("websocket handlers still running at the deadline", "err", err)
		errs = append(errs, fmt.Errorf("websocket shutdown: %w", err))
	} else {
		a.log.Info("websockets closed", "connections", n)
	}
	return errors.Join(errs...)
}
