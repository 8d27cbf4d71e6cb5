package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"

	"herald/graph"
	"herald/graph/auth"
	"herald/store/service"
	"herald/web"
)

// Websocket timing. The legacy graphql-ws protocol has only server-sent
// keep-alives ("ka"); graphql-transport-ws uses ping/pong, and a client that
// leaves a ping unanswered for two intervals is dropped, which frees its
// subscriptions when a network path dies silently.
const (
	wsInitTimeout  = 10 * time.Second
	wsKeepAlive    = 15 * time.Second
	wsPingInterval = 15 * time.Second
	wsWriteTimeout = 10 * time.Second
)

// closeForbidden is the graphql-transport-ws close code for a refused
// connection_init ("4403: Forbidden" in the protocol).
const closeForbidden = 4403

// embeddedDir is the embedded store's directory inside the data directory;
// the token secret sits beside it.
const embeddedDir = "embedded"

// run is the whole program, apart from signal handling: it parses args and
// the environment, opens the store, serves until ctx ends, then shuts down.
// It returns nil after a clean shutdown. stdout receives the usage text
// asked for with -h; logs go to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "subscribe" {
		return runSubscribe(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "bench" {
		return runBench(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "seed" {
		return runSeed(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "mongo" {
		return runMongo(ctx, args[1:], getenv, stdout, stderr)
	}
	cfg, err := parseConfig(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	// Libraries that log through the standard log package (gqlgen reports
	// failed websocket handshakes that way) then write structured records
	// too, instead of stray plain-text lines in the JSON stream.
	slog.SetDefault(log)

	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	secret, err := loadTokenSecret(cfg.DataDir, cfg.TokenSecret, log)
	if err != nil {
		return err
	}
	var m *metrics
	if cfg.Metrics {
		m = newMetrics()
	}
	var be *backend
	if cfg.MongoURI != "" {
		be, err = openMongo(ctx, cfg, log, m.wrapBackend)
	} else {
		be, err = openEmbedded(ctx, cfg, log, m.wrapBackend)
	}
	if err != nil {
		return err
	}

	a, err := newApp(cfg, log, be.svc, auth.NewSigner(secret, cfg.TokenTTL), m)
	if err != nil {
		return errors.Join(err, stopAll(context.Background(), log, be))
	}
	if be.requestTimeout > 0 {
		a.requestTimeout = min(a.requestTimeout, be.requestTimeout)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return errors.Join(fmt.Errorf("listen: %w", err), stopAll(context.Background(), log, be))
	}
	hs := a.httpServer(a.routes())
	if cfg.PprofAddr != "" {
		ps, err := startPprof(cfg.PprofAddr, log)
		if err != nil {
			_ = ln.Close()
			return errors.Join(fmt.Errorf("pprof listen: %w", err), stopAll(context.Background(), log, be))
		}
		// Closed at once on shutdown: a profile being taken is cut short.
		defer ps.Close()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	// A backend that comes up in the background (MongoDB) sets readiness
	// itself; the server listens meanwhile, answering /healthz, and 503 on
	// /readyz, so an orchestrator sees it alive but not ready.
	upCtx, stopUp := context.WithCancel(context.Background())
	defer stopUp()
	upDone := make(chan struct{})
	if be.up != nil {
		go func() {
			defer close(upDone)
			be.up(upCtx, &a.health.ready)
		}()
	} else {
		close(upDone)
		a.health.ready.Store(true)
	}
	log.Info("listening", "addr", ln.Addr().String())

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
		log.Error("server failed; shutting down", "err", err)
	}
	// The readiness loop stops first: it may be starting the fan-out,
	// which must not race its Close, and it must not set readiness again.
	stopUp()
	<-upDone
	// One deadline for the whole shutdown: fan-out cut short by it is not
	// lost, it is stored and resumes at the next start.
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return errors.Join(runErr, a.shutdown(sctx, hs), stopAll(sctx, log, be))
}

// stopAll stops what run started below the HTTP layer, in dependency order:
// the fan-out first (it publishes events and writes to the store), then
// the events (ending every subscription; on MongoDB, the change stream
// too), then the store.
func stopAll(ctx context.Context, log *slog.Logger, be *backend) error {
	var errs []error
	if err := be.svc.Close(ctx); err != nil {
		log.Warn("fan-out stopped before its queue was empty; the rest resumes at next start", "err", err)
		errs = append(errs, fmt.Errorf("stop fan-out: %w", err))
	} else {
		log.Info("fan-out drained")
	}
	be.closeEvents()
	log.Info("event hub closed")
	if err := closeWithin(ctx, be.closeStore); err != nil {
		log.Error("closing store", "err", err)
		errs = append(errs, fmt.Errorf("close store: %w", err))
	} else {
		log.Info("store closed")
	}
	return errors.Join(errs...)
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.LogLevel}
	if cfg.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// app is the HTTP face of the server: routes, middleware and the websocket
// transport, over a running service.Service.
type app struct {
	cfg     config
	log     *slog.Logger
	svc     *service.Service
	signer  *auth.Signer
	origins *originPolicy
	ws      *wsAdapter
	wsTrack wsTracker
	health  health
	// metrics is nil when -metrics=false.
	metrics *metrics
	// requestTimeout bounds each GraphQL HTTP request, a batch as a
	// whole: -query-timeout, or less where the backend needs it.
	requestTimeout time.Duration
}

// newApp returns the app over svc. m, if not nil, is the registry that
// /metrics serves, whose storage metrics svc's backend already feeds (see
// metrics.wrapBackend); the app adds its own.
func newApp(cfg config, log *slog.Logger, svc *service.Service, signer *auth.Signer, m *metrics) (*app, error) {
	origins, err := newOriginPolicy(cfg.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	a := &app{
		cfg:     cfg,
		log:     log,
		svc:     svc,
		signer:  signer,
		origins: origins,
		ws:      newWSAdapter(origins, wsWriteTimeout),
		metrics: m,

		requestTimeout: cfg.QueryTimeout,
	}
	if m != nil {
		m.watch(svc, a.ws)
	}
	a.ws.enforce(cfg, svc)
	return a, nil
}

// routes returns the server's handler; call it once. The middleware of /graphql runs
// outside in: access log, CORS, origin check (websocket only), upgrade
// tracking, body limit, client address, authentication, then gqlgen.
func (a *app) routes() http.Handler {
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
			LogInFailures: a.cfg.RateLimitLogIn,
		},
	})
	if a.metrics != nil {
		gql.Use(a.metrics.ops)
	}
	limit := a.cfg.MaxBodyBytes
	gql.AddTransport(transport.Websocket{
		Implementation:        a.ws,
		InitFunc:              a.wsInit,
		InitTimeout:           wsInitTimeout,
		KeepAlivePingInterval: wsKeepAlive,
		// graphql-transport-ws pings are the adapter's (wsAdapter.
		// pingInterval): gqlgen's would run a goroutine per connection.
		PingPongInterval: 0,
		PayloadReadLimit: &limit,
		ErrorFunc: func(ctx context.Context, err error) {
			a.log.DebugContext(ctx, "websocket error", "err", err)
		},
	})

	var h http.Handler = gql
	h = deadlineMiddleware(a.requestTimeout, h)
	h = authMiddleware(a.signer, a.svc, h)
	h = clientAddrMiddleware(a.cfg.TrustedProxies, h)
	h = bodyLimitMiddleware(a.cfg.MaxBodyBytes, a.requestTimeout+a.cfg.WriteTimeout, h)
	h = a.wsTrack.middleware(h)
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
		mux.Handle("GET /metrics", a.metrics.handler())
	}
	// "/" without a method: a method-qualified "GET /" would conflict with
	// the method-less "/graphql" in ServeMux's precedence rules.
	mux.Handle("/", getOnly(staticHandler(web.Assets)))
	return accessLogMiddleware(a.log, a.cfg.TrustedProxies, mux)
}

// httpServer returns the HTTP server of h with the timeouts that keep a
// slow or stalled client from holding a connection: the request's headers
// and body within -read-timeout (the body middleware lifts the read
// deadline once the body is in, so that the query can run; a body not in
// by then closes the connection), its response written within
// -write-timeout of being ready, and an idle keep-alive connection closed
// after two minutes. A websocket's deadlines are its own (gorilla clears
// these at the upgrade).
func (a *app) httpServer(h http.Handler) *http.Server {
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

// shutdown stops the HTTP side: readiness goes false, http.Server.Shutdown
// stops listening and waits for in-flight requests, then every websocket
// (hijacked, so Shutdown does not see them) is closed with 1001 Going Away
// and their handlers are waited for, so their subscriptions have ended
// before the hub and store close.
func (a *app) shutdown(ctx context.Context, hs *http.Server) error {
	a.health.ready.Store(false)
	var errs []error
	if err := hs.Shutdown(ctx); err != nil {
		a.log.Warn("http requests still running at the deadline; closing them", "err", err)
		_ = hs.Close()
		errs = append(errs, fmt.Errorf("http shutdown: %w", err))
	} else {
		a.log.Info("http server stopped")
	}
	n := a.ws.Len()
	a.ws.closeAll()
	if err := a.wsTrack.wait(ctx); err != nil {
		a.log.Warn("websocket handlers still running at the deadline", "err", err)
		errs = append(errs, fmt.Errorf("websocket shutdown: %w", err))
	} else {
		a.log.Info("websockets closed", "connections", n)
	}
	return errors.Join(errs...)
}
