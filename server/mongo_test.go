package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/server/internal/servertest"
	"herald/store/mongostore"
	"herald/store/service"
)

// newLungo opens an in-memory lungo engine, closed in t.Cleanup after the
// servers over it (cleanups run last in, first out).
func newLungo(t *testing.T) (lungo.IClient, *lungo.Engine) {
	t.Helper()
	client, engine, err := lungo.Open(context.Background(), lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(engine.Close)
	return client, engine
}

// newTestServerOnMongo starts the real handler over the MongoDB backend on
// client (a lungo engine's: several servers over clients of one engine are
// instances sharing one MongoDB), brought up by the same steps as the
// program's (mongoUp). Everything is closed in t.Cleanup.
func newTestServerOnMongo(t *testing.T, client lungo.IClient, edit func(*config)) *servertest.Server {
	t.Helper()
	cfg, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	if edit != nil {
		edit(&cfg)
	}
	log := slog.New(slog.DiscardHandler)
	st := mongostore.New(client, cfg.MongoDatabase, mongostore.Options{Logger: log})
	mode, err := eventsMode(cfg.MongoEvents)
	require.NoError(t, err)
	events := mongostore.NewEvents(st.Database(), mongostore.EventsOptions{Logger: log, Mode: mode, PollInterval: cfg.MongoPollInterval})
	svc := service.NewService(st, events, service.Options{Logger: log, PasswordCost: 4})
	up := &mongoUp{log: log, timeout: cfg.MongoTimeout, ping: st.Ping, ensureIndexes: st.EnsureIndexes, events: events, svc: svc}
	require.NoError(t, up.check(context.Background()))

	opts := cfg.Options
	opts.StorageTimeout = cfg.MongoTimeout // as run sets it from the backend
	ts := servertest.Serve(t, opts, log, svc, nil, nil, func() {
		events.Close()
		_ = st.Close()
	})
	ts.Events = events
	return ts
}

// inboxEvent is the part of an inboxEvents payload the tests check.
type inboxEvent struct {
	Type        string
	UnreadCount int
	TotalCount  int
	Message     *struct {
		Text   string
		Author struct{ Handle string }
	}
}

// subscribeInbox opens a graphql-transport-ws subscription to u's inbox
// events on srv and waits until it is registered.
func subscribeInbox(t *testing.T, srv *servertest.Server, u servertest.User) *servertest.WSClient {
	t.Helper()
	c, _, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + u.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	before := srv.Events.Len()
	c.Send("subscribe", "1", map[string]any{"query": servertest.InboxSubscription})
	require.Eventually(t, func() bool { return srv.Events.Len() == before+1 }, 5*time.Second, 10*time.Millisecond,
		"the subscription reaches the events hub")
	return c
}

// nextInboxEvent reads the subscription's next event.
func nextInboxEvent(t *testing.T, c *servertest.WSClient, timeout time.Duration) inboxEvent {
	t.Helper()
	m := c.MustRead(timeout)
	require.Equal(t, "next", m.Type, "payload: %s", m.Payload)
	var next struct {
		Data   struct{ InboxEvents inboxEvent }
		Errors []any
	}
	require.NoError(t, json.Unmarshal(m.Payload, &next))
	require.Empty(t, next.Errors)
	return next.Data.InboxEvents
}

func TestMongo_InboxEvents(t *testing.T) {
	client, _ := newLungo(t)
	srv := newTestServerOnMongo(t, client, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustFollow(t, srv.URL, bob, alice)
	c := subscribeInbox(t, srv, bob)

	servertest.MustPost(t, srv.URL, alice, "hello from alice")
	ev := nextInboxEvent(t, c, 10*time.Second)
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, 1, ev.UnreadCount)
	assert.Equal(t, 1, ev.TotalCount)
	require.NotNil(t, ev.Message)
	assert.Equal(t, "hello from alice", ev.Message.Text)
	assert.Equal(t, "alice", ev.Message.Author.Handle)

	d := servertest.MustGQL(t, srv.URL, bob.Token, `{ inbox(first: 10) { totalCount edges { node { text } } } }`, nil)
	inbox := d["inbox"].(map[string]any)
	assert.EqualValues(t, 1, inbox["totalCount"])
	assert.Equal(t, "hello from alice", inbox["edges"].([]any)[0].(map[string]any)["node"].(map[string]any)["text"])

	c.CloseNormally()
	require.Eventually(t, func() bool { return srv.Events.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the subscription ends with its connection")
}

// TestMongo_TwoInstances runs two Herald instances over one MongoDB (two
// lungo clients of one engine): events produced by one reach a websocket
// subscriber of the other.
func TestMongo_TwoInstances(t *testing.T) {
	c1, engine := newLungo(t)
	a := newTestServerOnMongo(t, c1, nil)
	b := newTestServerOnMongo(t, lungo.NewClient(engine), nil)

	alice := servertest.MustSignUp(t, a.URL, "alice")
	bob := servertest.MustSignUp(t, b.URL, "bob")
	servertest.MustFollow(t, b.URL, bob, alice)
	onB := subscribeInbox(t, b, bob)

	// A post on A: whichever instance holds the fan-out lease delivers it
	// to bob's inbox, and the event crosses to B through the change stream.
	servertest.MustPost(t, a.URL, alice, "hello from A")
	ev := nextInboxEvent(t, onB, 10*time.Second)
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, 1, ev.UnreadCount)
	require.NotNil(t, ev.Message)
	assert.Equal(t, "hello from A", ev.Message.Text)
	assert.Equal(t, "alice", ev.Message.Author.Handle)

	// Marking read on A publishes from A itself (a request, not the
	// fan-out), so this one certainly crosses instances.
	servertest.MustGQL(t, a.URL, bob.Token, `mutation { markInboxRead }`, nil)
	ev = nextInboxEvent(t, onB, 10*time.Second)
	assert.Equal(t, "READ", ev.Type)
	assert.Equal(t, 0, ev.UnreadCount)
	assert.Equal(t, 1, ev.TotalCount)

	// Once each: no second copy of either event comes.
	_, err := onB.Read(300 * time.Millisecond)
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "no further message, got %v", err)
}

// TestMongo_Polling runs two instances over one MongoDB that they read by
// polling, as they do where it has no change streams: a post on one reaches
// a follower's inbox and the follower's subscription on the other, once.
func TestMongo_Polling(t *testing.T) {
	poll := func(cfg *config) { cfg.MongoEvents, cfg.MongoPollInterval = "poll", 20*time.Millisecond }
	c1, engine := newLungo(t)
	a := newTestServerOnMongo(t, c1, poll)
	b := newTestServerOnMongo(t, lungo.NewClient(engine), poll)
	require.Equal(t, mongostore.EventsPoll, a.Events.Mode())

	alice := servertest.MustSignUp(t, a.URL, "alice")
	bob := servertest.MustSignUp(t, b.URL, "bob")
	servertest.MustFollow(t, b.URL, bob, alice)
	onB := subscribeInbox(t, b, bob)

	servertest.MustPost(t, a.URL, alice, "hello by polling")
	ev := nextInboxEvent(t, onB, 10*time.Second)
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, 1, ev.UnreadCount)
	require.NotNil(t, ev.Message)
	assert.Equal(t, "hello by polling", ev.Message.Text)
	d := servertest.MustGQL(t, b.URL, bob.Token, `{ inbox(first: 10) { totalCount } }`, nil)
	assert.EqualValues(t, 1, d["inbox"].(map[string]any)["totalCount"])

	servertest.MustGQL(t, a.URL, bob.Token, `mutation { markInboxRead }`, nil)
	ev = nextInboxEvent(t, onB, 10*time.Second)
	assert.Equal(t, "READ", ev.Type)
	_, err := onB.Read(300 * time.Millisecond)
	var ne net.Error
	assert.True(t, errors.As(err, &ne) && ne.Timeout(), "no further message, got %v", err)
}

// fakePing is a MongoDB that answers or not, as the test says.
type fakePing struct {
	mu    sync.Mutex
	err   error
	calls int
}

func (f *fakePing) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakePing) ping(context.Context) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.err
}

// countingStep counts the calls of a start step and fails while told to.
type countingStep struct {
	calls atomic.Int32
	fail  atomic.Bool
}

func (c *countingStep) do(context.Context) error {
	c.calls.Add(1)
	if c.fail.Load() {
		return errors.New("not yet")
	}
	return nil
}

type startFunc func(context.Context) error

func (f startFunc) Run(ctx context.Context) error   { return f(ctx) }
func (f startFunc) Start(ctx context.Context) error { return f(ctx) }

// TestMongoUp follows readiness through an outage at start, a start step
// failing, and an outage later: ready exactly while MongoDB answers and
// everything is started, and each start step done once.
func TestMongoUp(t *testing.T) {
	p := &fakePing{err: errors.New("server selection error: connection refused")}
	var indexes, stream, fanout countingStep
	fanout.fail.Store(true)
	m := &mongoUp{
		log: slog.New(slog.DiscardHandler), timeout: time.Second, ping: p.ping,
		ensureIndexes: indexes.do, events: startFunc(stream.do), svc: startFunc(fanout.do),
		retryEvery: 5 * time.Millisecond, pingEvery: 5 * time.Millisecond,
	}
	var ready atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx, &ready) }()

	time.Sleep(50 * time.Millisecond)
	assert.False(t, ready.Load(), "not ready while MongoDB is unreachable")
	assert.Zero(t, indexes.calls.Load(), "nothing starts before MongoDB answers")

	p.set(nil)
	require.Eventually(t, func() bool { return fanout.calls.Load() >= 2 }, 5*time.Second, time.Millisecond)
	assert.False(t, ready.Load(), "not ready while the fan-out cannot start")
	fanout.fail.Store(false)
	require.Eventually(t, ready.Load, 5*time.Second, time.Millisecond, "ready once MongoDB answers and everything started")

	p.set(errors.New("connection reset"))
	require.Eventually(t, func() bool { return !ready.Load() }, 5*time.Second, time.Millisecond, "not ready while pings fail")
	p.set(nil)
	require.Eventually(t, ready.Load, 5*time.Second, time.Millisecond, "ready again")

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return after ctx ended")
	}
	assert.EqualValues(t, 1, indexes.calls.Load(), "indexes created once")
	assert.EqualValues(t, 1, stream.calls.Load(), "event stream opened once")
	assert.Greater(t, fanout.calls.Load(), int32(1), "fan-out start retried until it succeeded")
}

// TestMongoUp_StreamFails: the fan-out starts though the event stream does
// not open; the server is ready once the stream opens too.
func TestMongoUp_StreamFails(t *testing.T) {
	var indexes, stream, fanout countingStep
	stream.fail.Store(true)
	m := &mongoUp{
		log: slog.New(slog.DiscardHandler), timeout: time.Second, ping: (&fakePing{}).ping,
		ensureIndexes: indexes.do, events: startFunc(stream.do), svc: startFunc(fanout.do),
		retryEvery: 5 * time.Millisecond, pingEvery: 5 * time.Millisecond,
	}
	var ready atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.run(ctx, &ready) }()
	require.Eventually(t, func() bool { return stream.calls.Load() >= 3 }, 5*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, fanout.calls.Load(), "the fan-out started, once, without the stream")
	assert.False(t, ready.Load(), "not ready without the stream")
	stream.fail.Store(false)
	require.Eventually(t, ready.Load, 5*time.Second, time.Millisecond)
	cancel()
	<-done
	assert.EqualValues(t, 1, fanout.calls.Load())
}

// closedPort returns a local port nothing listens on.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// TestRun_MongoUnreachable starts the program on a MongoDB that does not
// answer: it serves, alive but not ready; requests fail quickly with a
// coded error and no driver text; shutdown goes in order.
func TestRun_MongoUnreachable(t *testing.T) {
	uri := "mongodb://127.0.0.1:" + strconv.Itoa(closedPort(t)) + "/?connect=direct"
	getenv := servertest.Env("HERALD_TOKEN_SECRET", strings.Repeat("x", 32), "HERALD_MONGODB_URI", uri)
	srv := startRun(t, []string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-mongodb-timeout", "300ms"}, getenv)
	logs := srv.logs
	base := "http://" + srv.addr

	get := func(path string) int {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	assert.Equal(t, http.StatusOK, get("/healthz"))
	assert.Equal(t, http.StatusServiceUnavailable, get("/readyz"))

	start := time.Now()
	r := servertest.GQL(t, base, "", `mutation { signUp(input: {handle: "alice", password: "correct horse"}) { token } }`, nil)
	assert.Less(t, time.Since(start), 5*time.Second, "the driver's timeout bounds the request")
	require.NotEmpty(t, r.Errors)
	assert.Equal(t, graph.CodeTimeout, r.Code(), "the request ran out of time waiting for MongoDB")
	assert.NotContains(t, r.Errors[0].Message, "mongo", "no driver text reaches the client")

	require.Eventually(t, func() bool { return strings.Contains(logs.String(), `"msg":"mongodb not ready"`) },
		5*time.Second, 10*time.Millisecond)
	assert.Equal(t, http.StatusServiceUnavailable, get("/readyz"))
	assert.NotContains(t, logs.String(), uri, "the URI (it may hold a password) is not logged")

	srv.stop(t)
	requireLogOrder(t, logs.String(), `"msg":"shutting down"`, `"msg":"http server stopped"`, `"msg":"fan-out drained"`,
		`"msg":"event hub closed"`, `"msg":"store closed"`)
}

func TestEventsDetail(t *testing.T) {
	assert.Equal(t, "events: not started", eventsDetail(mongostore.EventsAuto))
	assert.Equal(t, "events: polling", eventsDetail(mongostore.EventsPoll))
	assert.Equal(t, "events: change stream", eventsDetail(mongostore.EventsChangeStream))
}
