package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// testSecret is the token secret of serve's signer.
var testSecret = []byte(strings.Repeat("k", 32))

// dialProtocols opens a websocket offering protocols (none when empty),
// and checks the handshake succeeded.
func dialProtocols(t *testing.T, base string, protocols ...string) (*wsClient, string) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: protocols, HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.Dial(wsURL(base), nil)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { conn.Close() })
	return &wsClient{t: t, conn: conn}, conn.Subprotocol()
}

func TestWS_SubprotocolNotAcceptable4406(t *testing.T) {
	srv := newTestServer(t, nil)
	for _, tc := range []struct {
		name      string
		protocols []string
	}{
		{"None", nil},
		{"Unknown", []string{"graphql-something-else"}},
		{"UnknownTwo", []string{"chat", "superchat"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := dialProtocols(t, srv.URL, tc.protocols...)
			assert.Empty(t, got, "no subprotocol is negotiated")
			requireClose(t, c, closeSubprotocolNotAcceptable, "Subprotocol not acceptable")
		})
	}
	assert.Equal(t, 3.0, scrape(t, srv.URL).value("herald_websocket_refused_total", "reason="+refusedSubprotocol))
	assert.Zero(t, srv.app.ws.Len(), "a refused connection is not counted")

	t.Run("KnownAmongUnknown", func(t *testing.T) {
		alice := mustSignUp(t, srv.URL, "alice")
		for _, p := range []string{subprotocolTransportWS, subprotocolGraphQLWS} {
			c, got := dialProtocols(t, srv.URL, "chat", p)
			require.Equal(t, p, got)
			c.send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
			require.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
			c.closeNormally()
		}
	})
}

// requireOpErrorCode reads the next message and checks it is an error for
// id whose (first) error carries code; legacy payloads are one object,
// graphql-transport-ws ones a list.
func requireOpErrorCode(t *testing.T, c *wsClient, id, code string, legacy bool) {
	t.Helper()
	m := c.mustRead(5 * time.Second)
	require.Equal(t, "error", m.Type, "%s %s", m.ID, m.Payload)
	require.Equal(t, id, m.ID)
	var e struct {
		Message    string
		Extensions map[string]any
	}
	if legacy {
		require.NoError(t, json.Unmarshal(m.Payload, &e), "an object: %s", m.Payload)
	} else {
		var errs []json.RawMessage
		require.NoError(t, json.Unmarshal(m.Payload, &errs), "a list: %s", m.Payload)
		require.Len(t, errs, 1)
		require.NoError(t, json.Unmarshal(errs[0], &e))
	}
	assert.Equal(t, code, e.Extensions["code"])
	assert.NotEmpty(t, e.Message)
}

func TestWS_SubscriptionsPerConnection(t *testing.T) {
	const maxSubs = 3
	srv := newTestServer(t, func(c *config) { c.MaxSubscriptionsPerConnection = maxSubs })
	alice := mustSignUp(t, srv.URL, "alice")
	bob := mustSignUp(t, srv.URL, "bob")
	mustFollow(t, srv.URL, bob, alice)

	t.Run("TransportWS", func(t *testing.T) {
		c := protoAcked(t, srv, bob)
		for i := range maxSubs {
			c.send("subscribe", string(rune('a'+i)), map[string]any{"query": inboxSubscription})
		}
		require.Eventually(t, func() bool { return srv.hub.Len() == maxSubs }, 5*time.Second, 10*time.Millisecond)
		c.send("subscribe", "over", map[string]any{"query": inboxSubscription})
		requireOpErrorCode(t, c, "over", CodeTooManySubscriptions, false)
		// A query counts too while it runs; refused, it is not run.
		c.send("subscribe", "q", map[string]any{"query": `{ viewer { handle } }`})
		requireOpErrorCode(t, c, "q", CodeTooManySubscriptions, false)
		assert.Equal(t, maxSubs, srv.hub.Len())

		// The connection goes on: pings, and events for every subscription.
		requireQuiet(t, c)
		mustPost(t, srv.URL, alice, "to all three")
		got := map[string]bool{}
		for range maxSubs {
			m := c.mustRead(5 * time.Second)
			require.Equal(t, "next", m.Type, "%s %s", m.ID, m.Payload)
			got[m.ID] = true
		}
		assert.Len(t, got, maxSubs)

		// Once one ends, there is room again (once gqlgen has finished it:
		// until then a subscribe is refused, and tried again).
		c.send("complete", "a", nil)
		require.Eventually(t, func() bool { return srv.hub.Len() == maxSubs-1 }, 5*time.Second, 10*time.Millisecond)
		attempt := 0
		require.Eventually(t, func() bool {
			attempt++
			id := "again" + strconv.Itoa(attempt)
			c.send("subscribe", id, map[string]any{"query": inboxSubscription})
			c.send("ping", "", nil)
			m := c.mustRead(5 * time.Second)
			if m.Type == "error" {
				require.Equal(t, id, m.ID)
				require.Equal(t, "pong", c.mustRead(5*time.Second).Type)
				return false
			}
			require.Equal(t, "pong", m.Type, "%s %s %s", m.Type, m.ID, m.Payload)
			return true
		}, 5*time.Second, 10*time.Millisecond)
		require.Eventually(t, func() bool { return srv.hub.Len() == maxSubs }, 5*time.Second, 10*time.Millisecond)
		c.closeNormally()
		requireNoWSLeft(t, srv)
	})

	t.Run("Legacy", func(t *testing.T) {
		c := legacyAcked(t, srv, bob)
		for i := range maxSubs {
			c.send("start", string(rune('a'+i)), map[string]any{"query": inboxSubscription})
		}
		require.Eventually(t, func() bool { return srv.hub.Len() == maxSubs }, 5*time.Second, 10*time.Millisecond)
		c.send("start", "over", map[string]any{"query": inboxSubscription})
		requireOpErrorCode(t, c, "over", CodeTooManySubscriptions, true)
		assert.Equal(t, maxSubs, srv.hub.Len())
		mustPost(t, srv.URL, alice, "legacy, to all three")
		for range maxSubs {
			m := c.mustRead(5 * time.Second)
			require.Equal(t, "data", m.Type, "%s %s", m.ID, m.Payload)
		}
		c.closeNormally()
		require.Eventually(t, func() bool { return srv.hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
	})

	assert.Equal(t, 3.0, scrape(t, srv.URL).value("herald_websocket_refused_total", "reason="+refusedSubscriptions))
}

// TestTransportWS_ResubscribeSameID completes and subscribes one id over
// and over, in one burst: gqlgen removes an operation's id from its
// records when the operation ends, which used to remove the new
// subscription's record, so that the next complete ended nothing, and the
// subscriptions piled up past every cap.
func TestTransportWS_ResubscribeSameID(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxSubscriptionsPerConnection = 0 })
	alice := mustSignUp(t, srv.URL, "alice")
	c := protoAcked(t, srv, alice)
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "s", "payload": map[string]any{"query": inboxSubscription}})
	var msgs [][]byte
	for range 500 {
		msgs = append(msgs, sub, []byte(`{"type":"complete","id":"s"}`))
	}
	burst(t, c, msgs...)
	require.Eventually(t, func() bool { return srv.hub.Len() == 0 }, 10*time.Second, 10*time.Millisecond,
		"every completed subscription leaves the hub")
	requireQuiet(t, c) // no message for any of them
	c.closeNormally()
	requireNoWSLeft(t, srv)
}

// refusedConn dials, and reads the close that refuses the connection.
func requireRefusedDial(t *testing.T, srv *testServer, reason string) {
	t.Helper()
	c := protoDial(t, srv)
	requireClose(t, c, closeTryAgainLater, reason)
}

func TestWS_ConnectionsPerAddress(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxWebsocketsPerAddress = 2; c.MaxWebsockets = 0 })
	alice := mustSignUp(t, srv.URL, "alice")
	first := protoAcked(t, srv, alice)
	_ = protoDial(t, srv) // counted from the handshake, before connection_init
	requireRefusedDial(t, srv, "Try again later: too many connections from this address")
	requireRefusedDial(t, srv, "Try again later: too many connections from this address")
	assert.Equal(t, 2, srv.app.ws.Len(), "a refused connection is not counted")
	assert.Equal(t, 2.0, scrape(t, srv.URL).value("herald_websocket_refused_total", "reason="+refusedAddress))

	// A closed connection frees its slot.
	first.closeNormally()
	require.Eventually(t, func() bool { return srv.app.ws.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	c := protoAcked(t, srv, alice)
	requireQuiet(t, c)
}

func TestWS_ConnectionsTotal(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxWebsocketsPerAddress = 0; c.MaxWebsockets = 2 })
	alice := mustSignUp(t, srv.URL, "alice")
	first := protoAcked(t, srv, alice)
	_ = protoAcked(t, srv, alice)
	requireRefusedDial(t, srv, "Try again later: too many connections")
	assert.Equal(t, 2, srv.app.ws.Len())
	assert.Equal(t, 1.0, scrape(t, srv.URL).value("herald_websocket_refused_total", "reason="+refusedTotal))

	first.closeNormally()
	require.Eventually(t, func() bool { return srv.app.ws.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	c := protoAcked(t, srv, alice)
	requireQuiet(t, c)
}

func TestWS_ConnectionsPerUser(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxWebsocketsPerUser = 2 })
	alice := mustSignUp(t, srv.URL, "alice")
	bob := mustSignUp(t, srv.URL, "bob")
	first := protoAcked(t, srv, alice)
	_ = protoAcked(t, srv, alice)

	for _, proto := range []string{subprotocolTransportWS, subprotocolGraphQLWS} {
		c, _, err := dialWS(t, srv.URL, proto, nil)
		require.NoError(t, err)
		c.send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
		requireClose(t, c, closeTryAgainLater, "Try again later: too many connections for this user")
	}
	// Another user is not affected.
	requireQuiet(t, protoAcked(t, srv, bob))
	require.Eventually(t, func() bool { return srv.app.ws.Len() == 3 }, 5*time.Second, 10*time.Millisecond,
		"the refused connections are not counted")
	assert.Equal(t, 2.0, scrape(t, srv.URL).value("herald_websocket_refused_total", "reason="+refusedUser))

	first.closeNormally()
	require.Eventually(t, func() bool { return srv.app.ws.Len() == 2 }, 5*time.Second, 10*time.Millisecond)
	requireQuiet(t, protoAcked(t, srv, alice))
}

// TestWS_AddressKey checks the per-address count's keys: an IPv6 client is
// counted by its /64, an IPv4 one (mapped or not) by its address.
func TestWS_AddressKey(t *testing.T) {
	a := newWSAdapter(&originPolicy{}, time.Second)
	a.limits.perAddress = 2
	admit := func(s string) string {
		reason, _ := a.admitLocked(&wsConn{}, netip.MustParseAddr(s), true)
		return reason
	}
	assert.Empty(t, admit("2001:db8:1:2::1"))
	assert.Empty(t, admit("2001:db8:1:2:ffff::9"))
	assert.NotEmpty(t, admit("2001:db8:1:2:abcd::1"), "the same /64")
	assert.Empty(t, admit("2001:db8:1:3::1"), "another /64")
	assert.Empty(t, admit("192.0.2.1"))
	assert.Empty(t, admit("::ffff:192.0.2.1"))
	assert.NotEmpty(t, admit("192.0.2.1"))
	assert.Empty(t, admit("192.0.2.2"))
}

func TestWS_TokenExpiryCloses4403(t *testing.T) {
	srv := newTestServer(t, nil)
	bob := mustSignUp(t, srv.URL, "bob")
	u, err := srv.svc.FindUserByHandle(context.Background(), "bob")
	require.NoError(t, err)
	short := auth.NewSigner(testSecret, 2*time.Second)

	for _, proto := range []string{subprotocolTransportWS, subprotocolGraphQLWS} {
		t.Run(proto, func(t *testing.T) {
			token, sess, err := short.Issue(u)
			require.NoError(t, err)
			c, _, err := dialWS(t, srv.URL, proto, nil)
			require.NoError(t, err)
			c.send("connection_init", "", map[string]any{"authorization": "Bearer " + token})
			require.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
			start := "subscribe"
			if proto == subprotocolGraphQLWS {
				start = "start"
			}
			c.send(start, "1", map[string]any{"query": inboxSubscription})
			require.Eventually(t, func() bool { return srv.hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)

			requireClose(t, c, closeForbidden, "Forbidden: token expired")
			assert.False(t, time.Now().Before(sess.ExpiresAt), "closed at the expiry, not before")
			require.Eventually(t, func() bool { return srv.hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
		})
	}
	assert.Equal(t, 2.0, scrape(t, srv.URL).value("herald_websocket_refused_total", "reason="+refusedTokenExpired))
	// A token that lives on keeps its connection.
	requireQuiet(t, protoAcked(t, srv, bob))
}

// requireClosedWithin reads until the server's close frame, which must
// come within d, and checks it is 4403.
func requireClosedWithin(t *testing.T, c *wsClient, d time.Duration, reason string) {
	t.Helper()
	var err error
	for err == nil {
		_, err = c.read(d)
	}
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "want a close frame within %v, got %v", d, err)
	assert.Equal(t, closeForbidden, ce.Code)
	assert.Equal(t, reason, ce.Text)
}

func TestWS_LogOutClosesSockets(t *testing.T) {
	srv := newTestServer(t, nil)
	alice := mustSignUp(t, srv.URL, "alice")
	bob := mustSignUp(t, srv.URL, "bob")
	d := mustGQL(t, srv.URL, "", `mutation { logIn(input: {handle: "alice", password: "correct horse"}) { token } }`, nil)
	alice2 := alice
	alice2.Token = d["logIn"].(map[string]any)["token"].(string)

	a1 := protoAcked(t, srv, alice)
	a1legacy := legacyAcked(t, srv, alice)
	a2 := protoAcked(t, srv, alice2)
	b := protoAcked(t, srv, bob)
	a1.send("subscribe", "1", map[string]any{"query": inboxSubscription})
	b.send("subscribe", "1", map[string]any{"query": inboxSubscription})
	require.Eventually(t, func() bool { return srv.hub.Len() == 2 }, 5*time.Second, 10*time.Millisecond)

	// logOut ends alice's first token: its sockets close, her other
	// token's and bob's stay.
	require.Equal(t, true, mustGQL(t, srv.URL, alice.Token, `mutation { logOut }`, nil)["logOut"])
	const reason = "Forbidden: this token was logged out: log in again"
	requireClosedWithin(t, a1, time.Second, reason)
	requireClosedWithin(t, a1legacy, time.Second, reason)
	requireQuiet(t, a2)
	requireQuiet(t, b)

	// logOutEverywhere ends the other.
	require.Equal(t, true, mustGQL(t, srv.URL, alice2.Token, `mutation { logOutEverywhere }`, nil)["logOutEverywhere"])
	requireClosedWithin(t, a2, time.Second, reason)
	requireQuiet(t, b)
	require.Eventually(t, func() bool { return srv.hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond,
		"only bob's subscription is left")
	assert.Equal(t, 3.0, scrape(t, srv.URL).value("herald_websocket_refused_total", "reason="+refusedTokenRevoked))
}

// TestWS_MutationAfterLogOutFails sends a mutation over a socket right
// after its token was logged out, without waiting for the socket to close:
// it must not run.
func TestWS_MutationAfterLogOutFails(t *testing.T) {
	srv := newTestServer(t, nil)
	alice := mustSignUp(t, srv.URL, "alice")
	d := mustGQL(t, srv.URL, "", `mutation { logIn(input: {handle: "alice", password: "correct horse"}) { token } }`, nil)
	other := d["logIn"].(map[string]any)["token"].(string)

	c := protoAcked(t, srv, alice)
	mustGQL(t, srv.URL, alice.Token, `mutation { logOut }`, nil)
	if c.conn.WriteJSON(map[string]any{"type": "subscribe", "id": "m", "payload": map[string]any{"query": `mutation { postMessage(input: {text: "after logOut"}) { id } }`}}) == nil {
		requireClosedWithin(t, c, 5*time.Second, "Forbidden: this token was logged out: log in again")
	}
	me := mustGQL(t, srv.URL, other, `{ viewer { messageCount } }`, nil)
	assert.EqualValues(t, 0, me["viewer"].(map[string]any)["messageCount"], "the mutation did not run")
}

// sessionServer is a test server whose service runs on a clock the test
// moves, over an embedded store the test can change behind the service's
// back, as another process sharing MongoDB would.
type sessionServer struct {
	*testServer
	st *embedded.Store

	mu  sync.Mutex
	now time.Time
}

func (s *sessionServer) clock() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

func (s *sessionServer) advance(d time.Duration) {
	s.mu.Lock()
	s.now = s.now.Add(d)
	s.mu.Unlock()
}

// revokeBehind ends every token of user in the store, without the service
// (its cache, its events) hearing of it.
func (s *sessionServer) revokeBehind(t *testing.T, u user) {
	t.Helper()
	id, err := globalStoreID("User", u.ID)
	require.NoError(t, err)
	_, err = s.st.RevokeTokens(context.Background(), id, store.TokenRevocation{All: true, Now: s.clock()})
	require.NoError(t, err)
}

func newSessionServer(t *testing.T, edit func(*app)) *sessionServer {
	t.Helper()
	cfg, err := parseConfig(nil, func(string) string { return "" }, io.Discard)
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	s := &sessionServer{st: st, now: time.Now()}
	svc := service.NewService(st, hub, service.Options{Logger: log, PasswordCost: 4, Now: s.clock})
	require.NoError(t, svc.Start(context.Background()))
	s.testServer = serve(t, cfg, log, svc, newMetrics(), edit, func() {
		hub.Close()
		_ = st.Close()
	})
	s.hub = hub
	return s
}

// TestWS_SweepClosesEndedSessions ends a user's tokens where no event
// reaches this process: the sweep finds it once the service reads the user
// again (service.SessionRecheck later), and closes the socket.
func TestWS_SweepClosesEndedSessions(t *testing.T) {
	srv := newSessionServer(t, func(a *app) { a.ws.sweepEvery = 50 * time.Millisecond })
	alice := mustSignUp(t, srv.URL, "alice")
	bob := mustSignUp(t, srv.URL, "bob")
	a := protoAcked(t, srv.testServer, alice)
	b := protoAcked(t, srv.testServer, bob)

	srv.revokeBehind(t, alice)
	requireQuiet(t, a) // the service still trusts what it read
	srv.advance(service.SessionRecheck)
	requireClosedWithin(t, a, 5*time.Second, "Forbidden: this token was logged out: log in again")
	requireQuiet(t, b)
}

// TestWS_OperationChecksSession ends a user's tokens where no event reaches
// this process and no sweep runs: an operation started on the socket once
// the service knows it is refused, and the socket closed.
func TestWS_OperationChecksSession(t *testing.T) {
	srv := newSessionServer(t, func(a *app) { a.ws.sweepEvery = time.Hour })
	alice := mustSignUp(t, srv.URL, "alice")
	for _, proto := range []string{subprotocolTransportWS, subprotocolGraphQLWS} {
		t.Run(proto, func(t *testing.T) {
			c, _, err := dialWS(t, srv.URL, proto, nil)
			require.NoError(t, err)
			c.send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
			require.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
			start := "subscribe"
			if proto == subprotocolGraphQLWS {
				start = "start"
			}
			c.send(start, "1", map[string]any{"query": inboxSubscription})
			require.Eventually(t, func() bool { return srv.hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)

			srv.revokeBehind(t, alice)
			srv.advance(service.SessionRecheck)
			c.send(start, "2", map[string]any{"query": `mutation { postMessage(input: {text: "after logOutEverywhere"}) { id } }`})
			requireClosedWithin(t, c, 5*time.Second, "Forbidden: this token was logged out: log in again")
			require.Eventually(t, func() bool { return srv.hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
		})
		// The next subtest's token.
		d := mustGQL(t, srv.URL, "", `mutation { logIn(input: {handle: "alice", password: "correct horse"}) { token } }`, nil)
		alice.Token = d["logIn"].(map[string]any)["token"].(string)
	}
	me := mustGQL(t, srv.URL, alice.Token, `{ viewer { messageCount } }`, nil)
	assert.EqualValues(t, 0, me["viewer"].(map[string]any)["messageCount"], "no mutation ran")
}
