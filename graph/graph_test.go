package graph_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/99designs/gqlgen/client"
	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/graph"
	"herald/graph/auth"
	"herald/store"
	"herald/store/embedded"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
	"herald/store/storetest"
)

// The backends every GraphQL behaviour is proven on: the embedded store,
// and the MongoDB backend over lungo's in-memory engine.
const (
	backendEmbedded = "embedded"
	backendMongo    = "mongo"
)

// forBackends runs body once per backend, as the subtests "embedded" and
// "mongo"; newEnv called within builds the server over that backend.
func forBackends(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	for _, b := range []string{backendEmbedded, backendMongo} {
		t.Run(b, body)
	}
}

// forStrategies runs body on both backends under every timeline strategy,
// as subtests named backend/strategy.
func forStrategies(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	forBackends(t, func(t *testing.T) {
		for _, st := range service.Strategies {
			t.Run(string(st), body)
		}
	})
}

// strategyOf returns the strategy the test runs under: the forStrategies
// subtest it is in, or the default.
func strategyOf(t testing.TB) service.Strategy {
	for _, part := range strings.Split(t.Name(), "/") {
		if st, err := service.ParseStrategy(part); err == nil {
			return st
		}
	}
	return service.StrategyBucket
}

// backendOf returns the backend the test runs on: the forBackends subtest
// it is in. A test that calls newEnv outside forBackends fails.
func backendOf(t testing.TB) string {
	t.Helper()
	for _, part := range strings.Split(t.Name(), "/") {
		if part == backendEmbedded || part == backendMongo {
			return part
		}
	}
	t.Fatalf("%s: newEnv must run inside forBackends", t.Name())
	return ""
}

// events is the pubsub.Events of either backend (pubsub.Hub for the embedded
// store, mongostore.Events for MongoDB), with its count of this process's
// subscriptions.
type events interface {
	pubsub.Events
	Len() int
}

var (
	_ events = (*pubsub.Hub)(nil)
	_ events = (*mongostore.Events)(nil)
)

// env is one Herald GraphQL server over a fresh store (embedded or MongoDB
// over lungo, as backendOf says), with the backend wrapped in a call
// counter.
type env struct {
	svc     *service.Service
	hub     events
	backend *storetest.Counting
	tokens  *auth.Signer
	srv     *handler.Server
	cfg     graph.Config // srv's configuration
	client  *client.Client
	logs    *syncBuffer
	clock   *clock // the service's
}

// clock is an injected clock that moves forward 1ms at every reading, so
// every stored time is distinct and ordering assertions are deterministic.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

// advance moves the clock forward by d.
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(time.Millisecond)
	return c.now
}

// syncBuffer collects log output from the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newEnv starts a server with cfg's limits (graph.DefaultConfig() when mod
// is nil), stopped in t.Cleanup.
func newEnv(t testing.TB, mod func(*graph.Config)) *env {
	t.Helper()
	logs := &syncBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var (
		st      storage.Backend
		hub     events
		closeEv func()
	)
	switch backendOf(t) {
	case backendEmbedded:
		es, err := embedded.Open(t.TempDir(), embedded.Options{Logger: logger, CacheBytes: 8 << 20})
		require.NoError(t, err)
		h := pubsub.NewHub()
		st, hub, closeEv = es, h, h.Close
	case backendMongo:
		client, engine, err := lungo.Open(context.Background(), lungo.Options{Store: lungo.NewMemoryStore()})
		require.NoError(t, err)
		t.Cleanup(engine.Close) // registered first, so it runs after the cleanup below
		ms := mongostore.New(client, "herald", mongostore.Options{Logger: logger})
		require.NoError(t, ms.EnsureIndexes(context.Background()))
		ev := mongostore.NewEvents(ms.Database(), mongostore.EventsOptions{Logger: logger})
		require.NoError(t, ev.Run(context.Background()))
		st, hub, closeEv = ms, ev, ev.Close
	}
	cb := storetest.NewCounting(st)
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	// On MongoDB the fan-out holds a lease, as in production. It is taken
	// at the start and kept for the whole test, and no other process
	// stores jobs, so nothing polls: the calls a test counts are its
	// requests' alone.
	svc := service.NewService(cb, hub, service.Options{Strategy: strategyOf(t), PasswordCost: bcrypt.MinCost, Now: clk.Now, Logger: logger,
		LeaseTTL: time.Hour, JobPoll: time.Hour})
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, svc.Close(ctx))
		closeEv()
		require.NoError(t, st.Close())
	})

	tokens := auth.NewSigner([]byte("graph-test-secret"), time.Hour)
	cfg := graph.DefaultConfig()
	cfg.Service, cfg.Tokens, cfg.Logger = svc, tokens, logger
	if mod != nil {
		mod(&cfg)
	}
	srv := graph.NewServer(cfg)
	// The server package adds its own websocket transport; gqlgen's client
	// speaks the legacy graphql-ws protocol and expects a keep-alive at once.
	srv.AddTransport(transport.Websocket{KeepAlivePingInterval: 10 * time.Second})

	return &env{
		svc: svc, hub: hub, backend: cb, tokens: tokens, srv: srv, cfg: cfg, logs: logs, clock: clk,
		client: client.New(withViewer(tokens, srv)),
	}
}

// withViewer stands in for the server package's authentication: a valid
// bearer token puts its user into the request context.
func withViewer(tokens *auth.Signer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := auth.FromHeader(r.Header.Get("Authorization")); ok {
			if sess, err := tokens.Verify(tok); err == nil {
				r = r.WithContext(graph.NewContextWithSession(r.Context(), sess))
			}
		}
		next.ServeHTTP(w, r)
	})
}

// gqlError is one entry of a response's errors.
type gqlError struct {
	Message    string `json:"message"`
	Path       []any  `json:"path"`
	Extensions struct {
		Code string `json:"code"`
	} `json:"extensions"`
}

// opts builds client options: the token (if any) and variables.
func opts(token string, vars map[string]any) []client.Option {
	var o []client.Option
	if token != "" {
		o = append(o, client.AddHeader("Authorization", "Bearer "+token))
	}
	for k, v := range vars {
		o = append(o, client.Var(k, v))
	}
	return o
}

// exec runs an operation and returns its data as JSON and its errors.
func (e *env) exec(t testing.TB, token, query string, vars map[string]any) (json.RawMessage, []gqlError) {
	t.Helper()
	resp, err := e.client.RawPost(query, opts(token, vars)...)
	if err != nil {
		// gqlgen's client refuses an HTTP error status (400 for an operation
		// refused before it runs, when the client accepts
		// application/graphql-response+json) but keeps the body in the
		// error text.
		m := httpErr.FindStringSubmatch(err.Error())
		require.NotNil(t, m, "request failed: %v", err)
		resp = &client.Response{}
		require.NoError(t, json.Unmarshal([]byte(m[1]), resp))
	}
	data, err := json.Marshal(resp.Data)
	require.NoError(t, err)
	var errs []gqlError
	if len(resp.Errors) > 0 {
		require.NoError(t, json.Unmarshal(resp.Errors, &errs))
	}
	return data, errs
}

var httpErr = regexp.MustCompile(`(?s)^http 4\d\d: (.*)$`)

// mustExec runs an operation that must succeed and decodes its data into out.
func (e *env) mustExec(t testing.TB, token, query string, vars map[string]any, out any) {
	t.Helper()
	data, errs := e.exec(t, token, query, vars)
	require.Empty(t, errs, "errors from %s", query)
	if out != nil {
		require.NoError(t, json.Unmarshal(data, out))
	}
}

// errCode runs an operation that must fail and returns its first error's
// code, checking the message is the client-safe one.
func (e *env) errCode(t *testing.T, token, query string, vars map[string]any) string {
	t.Helper()
	_, errs := e.exec(t, token, query, vars)
	require.NotEmpty(t, errs, "expected an error from %s", query)
	require.NotContains(t, errs[0].Message, "herald error", "clients get store.Error.Message, not Error()")
	return errs[0].Extensions.Code
}

// user is the part of a User the fixtures use.
type user struct {
	ID             string `json:"id"`
	Handle         string `json:"handle"`
	DisplayName    string `json:"displayName"`
	FollowerCount  int    `json:"followerCount"`
	FollowingCount int    `json:"followingCount"`
	MessageCount   int    `json:"messageCount"`
	ViewerFollows  bool   `json:"viewerFollows"`
}

const userFields = `id handle displayName followerCount followingCount messageCount viewerFollows`

// mustSignUp creates a user and returns its token and global id.
func mustSignUp(t testing.TB, e *env, handle string) (token, id string) {
	t.Helper()
	var resp struct {
		SignUp struct {
			Token string `json:"token"`
			User  user   `json:"user"`
		} `json:"signUp"`
	}
	e.mustExec(t, "", `mutation($in: SignUpInput!) { signUp(input: $in) { token user { `+userFields+` } } }`,
		map[string]any{"in": map[string]any{"handle": handle, "password": "password123"}}, &resp)
	require.NotEmpty(t, resp.SignUp.Token)
	return resp.SignUp.Token, resp.SignUp.User.ID
}

// mustFollow makes the token's user follow userID and returns the followee.
func mustFollow(t testing.TB, e *env, token, userID string) user {
	t.Helper()
	var resp struct {
		Follow user `json:"follow"`
	}
	e.mustExec(t, token, `mutation($id: ID!) { follow(userId: $id) { `+userFields+` } }`, map[string]any{"id": userID}, &resp)
	return resp.Follow
}

// mustPost posts text as the token's user and returns the message's id.
func mustPost(t testing.TB, e *env, token, text string) string {
	t.Helper()
	var resp struct {
		PostMessage struct {
			ID string `json:"id"`
		} `json:"postMessage"`
	}
	e.mustExec(t, token, `mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"text": text}}, &resp)
	return resp.PostMessage.ID
}

// mustReply posts text as the token's user in reply to the message with
// global id replyTo and returns the reply's id.
func mustReply(t *testing.T, e *env, token, text, replyTo string) string {
	t.Helper()
	var resp struct {
		PostMessage struct {
			ID string `json:"id"`
		} `json:"postMessage"`
	}
	e.mustExec(t, token, `mutation($in: PostMessageInput!) { postMessage(input: $in) { id } }`,
		map[string]any{"in": map[string]any{"text": text, "replyTo": replyTo}}, &resp)
	return resp.PostMessage.ID
}

// mustRepost makes the token's user repost the message with global id
// messageID.
func mustRepost(t testing.TB, e *env, token, messageID string) {
	t.Helper()
	e.mustExec(t, token, `mutation($id: ID!) { repost(messageId: $id) { id } }`, map[string]any{"id": messageID}, nil)
}

// waitFanOut waits until every queued fan-out job is done.
func waitFanOut(t testing.TB, e *env) {
	t.Helper()
	require.Eventually(t, e.svc.Idle, 10*time.Second, 5*time.Millisecond, "fan-out did not finish")
}

// fakeGlobalID builds the global id of an object that does not exist, in the
// format graph/id.go documents.
func fakeGlobalID(typ string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + ":" + store.NewID(time.Now()).String()))
}
