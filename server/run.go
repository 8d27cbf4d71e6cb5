package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"herald/graph/auth"
	"herald/server/cli"
	"herald/server/datadir"
	"herald/server/httpserver"
	"herald/server/metrics"
	"herald/store/mongostore"
)

// run is the whole program, apart from signal handling: it parses args and
// the environment, opens the store, serves until ctx ends, then shuts down.
// It returns nil after a clean shutdown. stdout receives the usage text
// asked for with -h; logs go to stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "subscribe" {
		return cli.Subscribe(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "bench" {
		return runBench(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "seed" {
		return runSeed(ctx, args[1:], getenv, stdout, stderr)
	}
	if len(args) > 0 && args[0] == "mongo" {
		return cli.Mongo(ctx, args[1:], getenv, stdout, stderr)
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
	secret, err := datadir.LoadTokenSecret(cfg.DataDir, cfg.TokenSecret, log)
	if err != nil {
		return err
	}
	var m *metrics.Metrics
	if cfg.Metrics {
		m = metrics.New()
	}
	var be *backend
	if cfg.MongoURI != "" {
		be, err = openMongo(ctx, cfg, log, m.WrapBackend)
	} else {
		be, err = openEmbedded(ctx, cfg, log, m.WrapBackend)
	}
	if err != nil {
		return err
	}
	if m != nil && be.eventsMode != nil {
		m.WatchEvents(func() (bool, bool) {
			mode := be.eventsMode()
			return mode == mongostore.EventsChangeStream, mode != mongostore.EventsAuto
		})
	}

	opts := cfg.Options
	opts.StorageTimeout = be.requestTimeout
	a, err := httpserver.New(opts, log, be.svc, auth.NewSigner(secret, cfg.TokenTTL), m)
	if err != nil {
		return errors.Join(err, stopAll(context.Background(), log, be))
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return errors.Join(fmt.Errorf("listen: %w", err), stopAll(context.Background(), log, be))
	}
	hs := a.HTTPServer(a.Routes())
	if cfg.PprofAddr != "" {
		ps, err := httpserver.StartPprof(cfg.PprofAddr, log)
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
			be.up(upCtx, a.Readiness())
		}()
	} else {
		close(upDone)
		a.Readiness().Store(true)
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
	return errors.Join(runErr, a.Shutdown(sctx, hs), stopAll(sctx, log, be))
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
