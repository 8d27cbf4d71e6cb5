package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/store/embedded"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
)

// testServer is the real handler over an embedded store in t.TempDir(),
// served by httptest on 127.0.0.1.
type testServer struct {
	*httptest.Server
	app    *app
	hub    *pubsub.Hub        // the embedded store's; nil on MongoDB
	events *mongostore.Events // MongoDB's; nil on the embedded store
	svc    *service.Service
	signer *auth.Signer
}

// newTestServer starts a server; edit may change the default configuration.
// Everything is closed in t.Cleanup.
func newTestServer(t testing.TB, edit func(*config)) *testServer {
	t.Helper()
	return newTestServerLog(t, edit, slog.New(slog.DiscardHandler))
}

// newTestServerLog is newTestServer logging to log.
func newTestServerLog(t testing.TB, edit func(*config), log *slog.Logger) *testServer {
	t.Helper()
	cfg, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	if edit != nil {
		edit(&cfg)
	}
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	var m *metrics
	if cfg.Metrics {
		m = newMetrics()
	}
	// The lowest bcrypt cost keeps sign-ups fast; the server uses the default.
	svc := service.NewService(m.wrapBackend(st), hub, service.Options{Logger: log, PasswordCost: 4})
	require.NoError(t, svc.Start(context.Background()))
	ts := serve(t, cfg, log, svc, m, nil, func() {
		hub.Close()
		_ = st.Close()
	})
	ts.hub = hub
	return ts
}

// serve serves the real handler over svc on 127.0.0.1, ready at once,
// with metrics m (nil: none). In
// t.Cleanup it stops HTTP, websockets and the fan-out in the program's
// order, then calls stop to close what lies below the service.
func serve(t testing.TB, cfg config, log *slog.Logger, svc *service.Service, m *metrics, edit func(*app), stop func()) *testServer {
	t.Helper()
	signer := auth.NewSigner([]byte(strings.Repeat("k", 32)), time.Hour)
	a, err := newApp(cfg, log, svc, signer, m)
	require.NoError(t, err)
	if edit != nil {
		edit(a)
	}
	a.health.ready.Store(true)
	// The program's HTTP server, timeouts included, on a test listener.
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = a.httpServer(a.routes())
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		a.ws.closeAll()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = a.wsTrack.wait(ctx)
		_ = svc.Close(ctx)
		stop()
	})
	return &testServer{Server: srv, app: a, svc: svc, signer: signer}
}

// gqlResponse is a GraphQL response as a client sees it.
type gqlResponse struct {
	Status int
	Data   map[string]any
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	}
}

// code returns the extensions.code of the first error, "" if none.
func (r gqlResponse) code() string {
	if len(r.Errors) == 0 {
		return ""
	}
	c, _ := r.Errors[0].Extensions["code"].(string)
	return c
}

// gql posts a GraphQL operation to base+"/graphql" and decodes the answer.
// token may be "". It fails the test on transport errors, not GraphQL ones.
func gql(t testing.TB, base, token, query string, vars map[string]any) gqlResponse {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out gqlResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	out.Status = resp.StatusCode
	return out
}

// mustGQL is gql that also requires the response to carry no errors.
func mustGQL(t testing.TB, base, token, query string, vars map[string]any) map[string]any {
	t.Helper()
	r := gql(t, base, token, query, vars)
	require.Empty(t, r.Errors, "query %q", query)
	return r.Data
}

// user is a signed-up user as the tests know it.
type user struct {
	ID, Handle, Token string
}

// mustSignUp signs a user up over HTTP and returns its id and token.
func mustSignUp(t testing.TB, base, handle string) user {
	t.Helper()
	d := mustGQL(t, base, "", `mutation($h: String!) { signUp(input: {handle: $h, password: "correct horse"}) { token user { id handle } } }`,
		map[string]any{"h": handle})
	p := d["signUp"].(map[string]any)
	u := p["user"].(map[string]any)
	return user{ID: u["id"].(string), Handle: u["handle"].(string), Token: p["token"].(string)}
}

// mustFollow makes follower follow followee over HTTP.
func mustFollow(t testing.TB, base string, follower, followee user) {
	t.Helper()
	mustGQL(t, base, follower.Token, `mutation($id: ID!) { follow(userId: $id) { id } }`, map[string]any{"id": followee.ID})
}

// mustPost posts text as author over HTTP and returns the message id.
func mustPost(t testing.TB, base string, author user, text string) string {
	t.Helper()
	d := mustGQL(t, base, author.Token, `mutation($t: String!) { postMessage(input: {text: $t}) { id } }`, map[string]any{"t": text})
	return d["postMessage"].(map[string]any)["id"].(string)
}

// wsURL turns an http:// base URL into the ws:// URL of /graphql.
func wsURL(base string) string {
	return "ws" + strings.TrimPrefix(base, "http") + "/graphql"
}

// wsMsg is a message of either websocket protocol.
type wsMsg struct {
	Type    string          `json:"type"`
	ID      string          `json:"id,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// wsClient is a minimal graphql-transport-ws / graphql-ws client. Every
// read is bounded by a deadline, and pings are answered, so a test never
// hangs on a silent server.
type wsClient struct {
	t    *testing.T
	conn *websocket.Conn
}

// dialWS opens a websocket to the server speaking protocol. It returns the
// handshake response and error as they are, for tests that expect refusal.
func dialWS(t *testing.T, base, protocol string, header http.Header) (*wsClient, *http.Response, error) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: []string{protocol}, HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.Dial(wsURL(base), header)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil, resp, err
	}
	c := &wsClient{t: t, conn: conn}
	t.Cleanup(func() { conn.Close() })
	return c, resp, nil
}

func (c *wsClient) send(typ, id string, payload any) {
	c.t.Helper()
	m := map[string]any{"type": typ}
	if id != "" {
		m["id"] = id
	}
	if payload != nil {
		m["payload"] = payload
	}
	require.NoError(c.t, c.conn.SetWriteDeadline(time.Now().Add(5*time.Second)))
	require.NoError(c.t, c.conn.WriteJSON(m))
}

// read returns the next message other than a ping (answered) or a legacy
// keep-alive, or the read error (a *websocket.CloseError when the server
// closed the connection).
func (c *wsClient) read(timeout time.Duration) (wsMsg, error) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if err := c.conn.SetReadDeadline(deadline); err != nil {
			return wsMsg{}, err
		}
		var m wsMsg
		if err := c.conn.ReadJSON(&m); err != nil {
			return wsMsg{}, err
		}
		switch m.Type {
		case "ping":
			c.send("pong", "", nil)
		case "ka":
		default:
			return m, nil
		}
	}
}

// mustRead is read that fails the test on an error.
func (c *wsClient) mustRead(timeout time.Duration) wsMsg {
	c.t.Helper()
	m, err := c.read(timeout)
	require.NoError(c.t, err)
	return m
}

// closeNormally sends a 1000 close frame and closes the connection, as a
// well-behaved client leaving does.
func (c *wsClient) closeNormally() {
	_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"), time.Now().Add(time.Second))
	_ = c.conn.Close()
}
