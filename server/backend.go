package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"herald/server/datadir"
	"herald/server/httpserver"
	"herald/store/embedded"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// backend is the storage run serves over: a Service with its Events and
// store, and how to stop them.
type backend struct {
	svc         *service.Service
	closeEvents func()
	closeStore  func() error
	// up, when set, brings the backend up in the background and keeps
	// ready true exactly while it can serve, until ctx ends; without it the
	// backend is ready once open.
	up func(ctx context.Context, ready *httpserver.Readiness)
	// requestTimeout bounds the storage work of one HTTP request; 0 means
	// no bound (the embedded store does not wait on a network).
	requestTimeout time.Duration
	// eventsMode, on MongoDB, says how events cross instances: a change
	// stream or polling ("" until decided).
	eventsMode func() mongostore.EventsMode
}

// openEmbedded opens the embedded store in the data directory and starts
// the fan-out, as the default, single-node server does.
// wrap instruments the store (metrics.Metrics.WrapBackend).
func openEmbedded(ctx context.Context, cfg config, log *slog.Logger, wrap func(storage.Backend) storage.Backend) (*backend, error) {
	dbDir := filepath.Join(cfg.DataDir, datadir.EmbeddedDir)
	opts := embedded.Options{Logger: log}
	if editEmbeddedOptions != nil {
		editEmbeddedOptions(&opts)
	}
	st, err := embedded.Open(dbDir, opts)
	if err != nil {
		return nil, err
	}
	log.Info("store open", "backend", "embedded", "dir", dbDir, "fanout", cfg.Fanout)
	hub := pubsub.NewHub()
	svc := service.NewService(wrap(st), hub, cfg.serviceOptions(log))
	if err := svc.Start(ctx); err != nil {
		hub.Close()
		_ = st.Close()
		return nil, fmt.Errorf("start fan-out: %w", err)
	}
	return &backend{svc: svc, closeEvents: hub.Close, closeStore: st.Close, up: embeddedUp(st)}, nil
}

// editEmbeddedOptions, when set (by tests), edits the embedded store's
// options: a filesystem with faults injected.
var editEmbeddedOptions func(*embedded.Options)

// embeddedUp is the embedded store's readiness: ready at once, and not
// while its disk is full, which /readyz asks the store each time.
func embeddedUp(st *embedded.Store) func(context.Context, *httpserver.Readiness) {
	return func(ctx context.Context, ready *httpserver.Readiness) {
		ready.Watch(st.Health)
		ready.Store(true)
		<-ctx.Done()
	}
}

// openMongo prepares the MongoDB backend without waiting for MongoDB: the
// driver connects lazily, and the server starts (not ready) while MongoDB
// is unreachable. Only a malformed URI or option fails here. wrap
// instruments the store.
func openMongo(ctx context.Context, cfg config, log *slog.Logger, wrap func(storage.Backend) storage.Backend) (*backend, error) {
	client, err := mongostore.Connect(ctx, mongostore.ConnectOptions{
		URI:            cfg.MongoURI,
		Database:       cfg.MongoDatabase,
		MaxPoolSize:    cfg.MongoPoolSize,
		ConnectTimeout: cfg.MongoTimeout,
		WriteConcern:   cfg.MongoWriteConcern,
	})
	if err != nil {
		return nil, err
	}
	st := mongostore.New(client, cfg.MongoDatabase, mongostore.Options{Logger: log})
	mode, err := eventsMode(cfg.MongoEvents)
	if err != nil {
		return nil, err
	}
	events := mongostore.NewEvents(st.Database(), mongostore.EventsOptions{Logger: log, Mode: mode, PollInterval: cfg.MongoPollInterval})
	svc := service.NewService(wrap(st), events, cfg.serviceOptions(log))
	log.Info("store open", "backend", "mongodb", "database", cfg.MongoDatabase, "fanout", cfg.Fanout)
	if cfg.TokenSecret == nil {
		log.Warn("the token secret comes from the data directory: every instance sharing this MongoDB must verify the same tokens, so give them all one HERALD_TOKEN_SECRET")
	}
	m := &mongoUp{
		log: log, timeout: cfg.MongoTimeout, ping: st.Ping, ensureIndexes: st.EnsureIndexes,
		events: events, svc: svc, retryEvery: mongoRetryEvery, pingEvery: mongoPingEvery,
	}
	return &backend{
		svc:         svc,
		closeEvents: events.Close,
		closeStore:  st.Close,
		up: func(ctx context.Context, ready *httpserver.Readiness) {
			ready.Detail(func() string { return eventsDetail(events.Mode()) })
			m.run(ctx, ready)
		},
		requestTimeout: cfg.MongoTimeout,
		eventsMode:     events.Mode,
	}, nil
}

// eventsDetail is /readyz's line on how events cross instances.
func eventsDetail(m mongostore.EventsMode) string {
	if m == mongostore.EventsAuto {
		return "events: not started"
	}
	return "events: " + string(m)
}

// Readiness loop timing: while MongoDB is down it is tried every second,
// so the server is ready soon after MongoDB answers; once up, a ping every
// few seconds notices an outage without adding load.
const (
	mongoRetryEvery = time.Second
	mongoPingEvery  = 5 * time.Second
	// mongoLogEvery bounds how often a continuing outage is logged again.
	mongoLogEvery = time.Minute
)

// mongoUp brings the MongoDB backend up and reports its readiness. Each
// start step is done once and retried until it succeeds: the indexes
// (idempotent), the event stream (from then on, events of every instance
// reach this one's subscribers: a change stream, or polling where MongoDB
// has none), then the fan-out (which resumes the stored jobs, so it comes
// after the stream when it can, for this instance's subscribers to have
// their events). The fan-out does not wait for the stream: it stores every
// follower's inbox, which is the truth, and its events reach the other
// instances whatever this one's stream does. The server is ready only once
// both run.
type mongoUp struct {
	log           *slog.Logger
	timeout       time.Duration
	ping          func(context.Context) error
	ensureIndexes func(context.Context) error
	events        interface{ Run(context.Context) error }
	svc           interface{ Start(context.Context) error }
	// retryEvery and pingEvery are mongoRetryEvery and mongoPingEvery,
	// shorter in tests.
	retryEvery, pingEvery time.Duration

	indexed, streaming, started bool
}

// readyFlag is where mongoUp reports readiness: *httpserver.Readiness in
// the program.
type readyFlag interface {
	Load() bool
	Store(ok bool)
}

// run checks MongoDB until ctx ends, setting ready after each check. It
// returns only when ctx ends, so whoever cancels ctx and waits for run
// knows no start step is still running (svc.Close must not race Start).
func (m *mongoUp) run(ctx context.Context, ready readyFlag) {
	var (
		lastErr string
		lastLog time.Time
	)
	for {
		err := m.check(ctx)
		if ctx.Err() != nil {
			return
		}
		ok := err == nil
		switch {
		case ok && !ready.Load():
			m.log.Info("mongodb ready")
		case !ok && (ready.Load() || err.Error() != lastErr || time.Since(lastLog) >= mongoLogEvery):
			m.log.Warn("mongodb not ready", "err", err, "retry_in", m.retryEvery.String())
			lastErr, lastLog = err.Error(), time.Now()
		}
		if ok {
			lastErr = ""
		}
		ready.Store(ok)
		every := m.pingEvery
		if !ok {
			every = m.retryEvery
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// check pings MongoDB and runs the start steps not done yet, each bounded
// by the MongoDB timeout.
func (m *mongoUp) check(ctx context.Context) error {
	step := func(name string, f func(context.Context) error) error {
		sctx, cancel := context.WithTimeout(ctx, m.timeout)
		defer cancel()
		if err := f(sctx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	}
	if err := step("ping", m.ping); err != nil {
		return err
	}
	if !m.indexed {
		if err := step("create indexes", m.ensureIndexes); err != nil {
			return err
		}
		m.indexed = true
	}
	var streamErr error
	if !m.streaming {
		if streamErr = step("open event stream", m.events.Run); streamErr == nil {
			m.streaming = true
		}
	}
	if !m.started {
		if err := step("start fan-out", m.svc.Start); err != nil {
			return errors.Join(streamErr, err)
		}
		m.started = true
	}
	return streamErr
}

// serviceOptions are the store options the configuration sets.
func (cfg config) serviceOptions(log *slog.Logger) service.Options {
	backfill := cfg.FollowBackfill
	if backfill == 0 {
		backfill = -1 // none, in service.Options
	}
	return service.Options{
		Strategy:           cfg.Fanout,
		CelebrityThreshold: cfg.CelebrityThreshold,
		InactiveAfter:      cfg.InactiveAfter,
		InboxCap:           cfg.InboxCap,
		CacheTTL:           cfg.CacheTTL,
		FollowBackfill:     backfill,
		DeletionGrace:      cfg.DeletionGrace,
		Lanes:              cfg.FanoutLanes,
		FanoutMaxLag:       cfg.FanoutMaxLag,
		Logger:             log,
		// A request changes its edge within -mongodb-timeout, which bounds
		// its storage work; the grace outlasts it.
		EdgeJobGrace: max(15*time.Second, cfg.MongoTimeout+5*time.Second),
	}
}
