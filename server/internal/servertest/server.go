// Package servertest is what the server's tests share: the real handler
// over an embedded store (or one the test opens) on 127.0.0.1, a GraphQL
// and websocket client of it, a scrape of its metrics, and the server
// binary built for the tests that run it.
package servertest

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/server/httpserver"
	"herald/server/metrics"
	"herald/store/embedded"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
)

// InboxSubscription subscribes to the viewer's inbox events.
const InboxSubscription = `subscription { inboxEvents { type unreadCount totalCount message { id text author { handle } } } }`

// Secret is the token secret of the signer Serve gives the server.
var Secret = []byte(strings.Repeat("k", 32))

// Server is the real handler over an embedded store in t.TempDir(),
// served by httptest on 127.0.0.1.
type Server struct {
	*httptest.Server
	App    *httpserver.Server
	Hub    *pubsub.Hub        // the embedded store's; nil on MongoDB
	Events *mongostore.Events // MongoDB's; nil on the embedded store
	Svc    *service.Service
	Signer *auth.Signer
}

// Config is what a test may change of the server: its options, and
// whether it collects and serves metrics.
type Config struct {
	httpserver.Options
	Metrics bool
}

// DefaultConfig is the server's default configuration: that of its flags.
func DefaultConfig() Config {
	return Config{Options: httpserver.DefaultOptions(), Metrics: true}
}

// New starts a server; edit may change the default configuration.
// Everything is closed in t.Cleanup.
func New(t testing.TB, edit func(*Config)) *Server {
	t.Helper()
	return NewLog(t, edit, slog.New(slog.DiscardHandler))
}

// NewLog is New logging to log.
func NewLog(t testing.TB, edit func(*Config), log *slog.Logger) *Server {
	t.Helper()
	cfg := DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	var m *metrics.Metrics
	if cfg.Metrics {
		m = metrics.New()
	}
	// The lowest bcrypt cost keeps sign-ups fast; the server uses the default.
	svc := service.NewService(m.WrapBackend(st), hub, service.Options{Logger: log, PasswordCost: 4})
	require.NoError(t, svc.Start(context.Background()))
	ts := Serve(t, cfg.Options, log, svc, m, nil, func() {
		hub.Close()
		_ = st.Close()
	})
	ts.Hub = hub
	return ts
}

// Serve serves the real handler over svc on 127.0.0.1, ready at once,
// with metrics m (nil: none); edit, if not nil, may change the server
// before its routes are built. In t.Cleanup it stops HTTP, websockets and
// the fan-out in the program's order, then calls stop to close what lies
// below the service.
func Serve(t testing.TB, opts httpserver.Options, log *slog.Logger, svc *service.Service, m *metrics.Metrics, edit func(*httpserver.Server), stop func()) *Server {
	t.Helper()
	signer := auth.NewSigner(Secret, time.Hour)
	a, err := httpserver.New(opts, log, svc, signer, m)
	require.NoError(t, err)
	if edit != nil {
		edit(a)
	}
	a.Readiness().Store(true)
	// The program's HTTP server, timeouts included, on a test listener.
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = a.HTTPServer(a.Routes())
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// What is left after the listener closed: the websockets.
		_ = a.Shutdown(ctx, srv.Config)
		_ = svc.Close(ctx)
		stop()
	})
	return &Server{Server: srv, App: a, Svc: svc, Signer: signer}
}

// WaitIdle waits until svc's fan-out has no job queued or running.
func WaitIdle(t testing.TB, svc *service.Service) {
	t.Helper()
	require.Eventually(t, svc.Idle, 10*time.Second, 5*time.Millisecond, "fan-out drains")
}
