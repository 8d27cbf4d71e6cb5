package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/server/httpserver"
	"herald/server/internal/servertest"
	"herald/server/metrics"
	"herald/server/ws"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// dialProtocols opens a websocket offering protocols (none when empty),
// and checks the handshake succeeded.
func dialProtocols(t *testing.T, base string, protocols ...string) (*servertest.WSClient, string) {
	t.Helper()
	d := websocket.Dialer{Subprotocols: protocols, HandshakeTimeout: 5 * time.Second}
	conn, resp, err := d.Dial(servertest.WSURL(base), nil)
	require.NoError(t, err)
	resp.Body.Close()
	t.Cleanup(func() { conn.Close() })
	return &servertest.WSClient{T: t, Conn: conn}, conn.Subprotocol()
}

func TestWS_SubprotocolNotAcceptable4406(t *testing.T) {
	srv := servertest.New(t, nil)
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
			requireClose(t, c, ws.CloseSubprotocolNotAcceptable, "Subprotocol not acceptable")
		})
	}
	assert.Equal(t, 3.0, servertest.Scrape(t, srv.URL).Value("herald_websocket_refused_total", "reason="+ws.RefusedSubprotocol))
	assert.Zero(t, srv.App.WS.Len(), "a refused connection is not counted")

	t.Run("KnownAmongUnknown", func(t *testing.T) {
		alice := servertest.MustSignUp(t, srv.URL, "alice")
		for _, p := range []string{ws.SubprotocolTransportWS, ws.SubprotocolGraphQLWS} {
			c, got := dialProtocols(t, srv.URL, "chat", p)
			require.Equal(t, p, got)
			c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
			require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
			c.CloseNormally()
		}
	})
}

// requireOpErrorCode reads the next message and checks it is an error for
// id whose (first) error carries code; legacy payloads are one object,
// graphql-transport-ws ones a list.
func requireOpErrorCode(t *testing.T, c *servertest.WSClient, id, code string, legacy bool) {
	t.Helper()
	m := c.MustRead(5 * time.Second)
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
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxSubscriptionsPerConnection = maxSubs })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustFollow(t, srv.URL, bob, alice)

	t.Run("TransportWS", func(t *testing.T) {
		c := servertest.Acked(t, srv, bob)
		for i := range maxSubs {
			c.Send("subscribe", string(rune('a'+i)), map[string]any{"query": servertest.InboxSubscription})
		}
		require.Eventually(t, func() bool { return srv.Hub.Len() == maxSubs }, 5*time.Second, 10*time.Millisecond)
		c.Send("subscribe", "over", map[string]any{"query": servertest.InboxSubscription})
		requireOpErrorCode(t, c, "over", ws.CodeTooManySubscriptions, false)
		// A query counts too while it runs; refused, it is not run.
		c.Send("subscribe", "q", map[string]any{"query": `{ viewer { handle } }`})
		requireOpErrorCode(t, c, "q", ws.CodeTooManySubscriptions, false)
		assert.Equal(t, maxSubs, srv.Hub.Len())

		// The connection goes on: pings, and events for every subscription.
		requireQuiet(t, c)
		servertest.MustPost(t, srv.URL, alice, "to all three")
		got := map[string]bool{}
		for range maxSubs {
			m := c.MustRead(5 * time.Second)
			require.Equal(t, "next", m.Type, "%s %s", m.ID, m.Payload)
			got[m.ID] = true
		}
		assert.Len(t, got, maxSubs)

		// Once one ends, there is room again (once gqlgen has finished it:
		// until then a subscribe is refused, and tried again).
		c.Send("complete", "a", nil)
		require.Eventually(t, func() bool { return srv.Hub.Len() == maxSubs-1 }, 5*time.Second, 10*time.Millisecond)
		attempt := 0
		require.Eventually(t, func() bool {
			attempt++
			id := "again" + strconv.Itoa(attempt)
			c.Send("subscribe", id, map[string]any{"query": servertest.InboxSubscription})
			c.Send("ping", "", nil)
			m := c.MustRead(5 * time.Second)
			if m.Type == "error" {
				require.Equal(t, id, m.ID)
				require.Equal(t, "pong", c.MustRead(5*time.Second).Type)
				return false
			}
			require.Equal(t, "pong", m.Type, "%s %s %s", m.Type, m.ID, m.Payload)
			return true
		}, 5*time.Second, 10*time.Millisecond)
		require.Eventually(t, func() bool { return srv.Hub.Len() == maxSubs }, 5*time.Second, 10*time.Millisecond)
		c.CloseNormally()
		requireNoWSLeft(t, srv)
	})

	t.Run("Legacy", func(t *testing.T) {
		c := legacyAcked(t, srv, bob)
		for i := range maxSubs {
			c.Send("start", string(rune('a'+i)), map[string]any{"query": servertest.InboxSubscription})
		}
		require.Eventually(t, func() bool { return srv.Hub.Len() == maxSubs }, 5*time.Second, 10*time.Millisecond)
		c.Send("start", "over", map[string]any{"query": servertest.InboxSubscription})
		requireOpErrorCode(t, c, "over", ws.CodeTooManySubscriptions, true)
		assert.Equal(t, maxSubs, srv.Hub.Len())
		servertest.MustPost(t, srv.URL, alice, "legacy, to all three")
		for range maxSubs {
			m := c.MustRead(5 * time.Second)
			require.Equal(t, "data", m.Type, "%s %s", m.ID, m.Payload)
		}
		c.CloseNormally()
		require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
	})

	assert.Equal(t, 3.0, servertest.Scrape(t, srv.URL).Value("herald_websocket_refused_total", "reason="+ws.RefusedSubscriptions))
}

// TestTransportWS_ResubscribeSameID completes and subscribes one id over
// and over, in one burst: gqlgen removes an operation's id from its
// records when the operation ends, which used to remove the new
// subscription's record, so that the next complete ended nothing, and the
// subscriptions piled up past every cap.
func TestTransportWS_ResubscribeSameID(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxSubscriptionsPerConnection = 0 })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	c := servertest.Acked(t, srv, alice)
	sub, _ := json.Marshal(map[string]any{"type": "subscribe", "id": "s", "payload": map[string]any{"query": servertest.InboxSubscription}})
	var msgs [][]byte
	for range 500 {
		msgs = append(msgs, sub, []byte(`{"type":"complete","id":"s"}`))
	}
	burst(t, c, msgs...)
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 10*time.Second, 10*time.Millisecond,
		"every completed subscription leaves the hub")
	requireQuiet(t, c) // no message for any of them
	c.CloseNormally()
	requireNoWSLeft(t, srv)
}

// refusedConn dials, and reads the close that refuses the connection.
func requireRefusedDial(t *testing.T, srv *servertest.Server, reason string) {
	t.Helper()
	c := protoDial(t, srv)
	requireClose(t, c, ws.CloseTryAgainLater, reason)
}

func TestWS_ConnectionsPerAddress(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxWebsocketsPerAddress = 2; c.MaxWebsockets = 0 })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	first := servertest.Acked(t, srv, alice)
	_ = protoDial(t, srv) // counted from the handshake, before connection_init
	requireRefusedDial(t, srv, "Try again later: too many connections from this address")
	requireRefusedDial(t, srv, "Try again later: too many connections from this address")
	assert.Equal(t, 2, srv.App.WS.Len(), "a refused connection is not counted")
	assert.Equal(t, 2.0, servertest.Scrape(t, srv.URL).Value("herald_websocket_refused_total", "reason="+ws.RefusedAddress))

	// A closed connection frees its slot.
	first.CloseNormally()
	require.Eventually(t, func() bool { return srv.App.WS.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	c := servertest.Acked(t, srv, alice)
	requireQuiet(t, c)
}

func TestWS_ConnectionsTotal(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxWebsocketsPerAddress = 0; c.MaxWebsockets = 2 })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	first := servertest.Acked(t, srv, alice)
	_ = servertest.Acked(t, srv, alice)
	requireRefusedDial(t, srv, "Try again later: too many connections")
	assert.Equal(t, 2, srv.App.WS.Len())
	assert.Equal(t, 1.0, servertest.Scrape(t, srv.URL).Value("herald_websocket_refused_total", "reason="+ws.RefusedTotal))

	first.CloseNormally()
	require.Eventually(t, func() bool { return srv.App.WS.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	c := servertest.Acked(t, srv, alice)
	requireQuiet(t, c)
}

func TestWS_ConnectionsPerUser(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxWebsocketsPerUser = 2 })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	first := servertest.Acked(t, srv, alice)
	_ = servertest.Acked(t, srv, alice)

	for _, proto := range []string{ws.SubprotocolTransportWS, ws.SubprotocolGraphQLWS} {
		c, _, err := servertest.DialWS(t, srv.URL, proto, nil)
		require.NoError(t, err)
		c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
		requireClose(t, c, ws.CloseTryAgainLater, "Try again later: too many connections for this user")
	}
	// Another user is not affected.
	requireQuiet(t, servertest.Acked(t, srv, bob))
	require.Eventually(t, func() bool { return srv.App.WS.Len() == 3 }, 5*time.Second, 10*time.Millisecond,
		"the refused connections are not counted")
	assert.Equal(t, 2.0, servertest.Scrape(t, srv.URL).Value("herald_websocket_refused_total", "reason="+ws.RefusedUser))

	first.CloseNormally()
	require.Eventually(t, func() bool { return srv.App.WS.Len() == 2 }, 5*time.Second, 10*time.Millisecond)
	requireQuiet(t, servertest.Acked(t, srv, alice))
}

func TestWS_TokenExpiryCloses4403(t *testing.T) {
	srv := servertest.New(t, nil)
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	u, err := srv.Svc.FindUserByHandle(context.Background(), "bob")
	require.NoError(t, err)
	short := auth.NewSigner(servertest.Secret, 2*time.Second)

	for _, proto := range []string{ws.SubprotocolTransportWS, ws.SubprotocolGraphQLWS} {
		t.Run(proto, func(t *testing.T) {
			token, sess, err := short.Issue(u)
			require.NoError(t, err)
			c, _, err := servertest.DialWS(t, srv.URL, proto, nil)
			require.NoError(t, err)
			c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + token})
			require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
			start := "subscribe"
			if proto == ws.SubprotocolGraphQLWS {
				start = "start"
			}
			c.Send(start, "1", map[string]any{"query": servertest.InboxSubscription})
			require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)

			requireClose(t, c, ws.CloseForbidden, "Forbidden: token expired")
			assert.False(t, time.Now().Before(sess.ExpiresAt), "closed at the expiry, not before")
			require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
		})
	}
	assert.Equal(t, 2.0, servertest.Scrape(t, srv.URL).Value("herald_websocket_refused_total", "reason="+ws.RefusedTokenExpired))
	// A token that lives on keeps its connection.
	requireQuiet(t, servertest.Acked(t, srv, bob))
}

// requireClosedWithin reads until the server's close frame, which must
// come within d, and checks it is 4403.
func requireClosedWithin(t *testing.T, c *servertest.WSClient, d time.Duration, reason string) {
	t.Helper()
	var err error
	for err == nil {
		_, err = c.Read(d)
	}
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "want a close frame within %v, got %v", d, err)
	assert.Equal(t, ws.CloseForbidden, ce.Code)
	assert.Equal(t, reason, ce.Text)
}

func TestWS_LogOutClosesSockets(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	d := servertest.MustGQL(t, srv.URL, "", `mutation { logIn(input: {handle: "alice", password: "correct horse"}) { token } }`, nil)
	alice2 := alice
	alice2.Token = d["logIn"].(map[string]any)["token"].(string)

	a1 := servertest.Acked(t, srv, alice)
	a1legacy := legacyAcked(t, srv, alice)
	a2 := servertest.Acked(t, srv, alice2)
	b := servertest.Acked(t, srv, bob)
	a1.Send("subscribe", "1", map[string]any{"query": servertest.InboxSubscription})
	b.Send("subscribe", "1", map[string]any{"query": servertest.InboxSubscription})
	require.Eventually(t, func() bool { return srv.Hub.Len() == 2 }, 5*time.Second, 10*time.Millisecond)

	// logOut ends alice's first token: its sockets close, her other
	// token's and bob's stay.
	require.Equal(t, true, servertest.MustGQL(t, srv.URL, alice.Token, `mutation { logOut }`, nil)["logOut"])
	const reason = "Forbidden: this token was logged out: log in again"
	requireClosedWithin(t, a1, time.Second, reason)
	requireClosedWithin(t, a1legacy, time.Second, reason)
	requireQuiet(t, a2)
	requireQuiet(t, b)

	// logOutEverywhere ends the other.
	require.Equal(t, true, servertest.MustGQL(t, srv.URL, alice2.Token, `mutation { logOutEverywhere }`, nil)["logOutEverywhere"])
	requireClosedWithin(t, a2, time.Second, reason)
	requireQuiet(t, b)
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond,
		"only bob's subscription is left")
	assert.Equal(t, 3.0, servertest.Scrape(t, srv.URL).Value("herald_websocket_refused_total", "reason="+ws.RefusedTokenRevoked))
}

// TestWS_MutationAfterLogOutFails sends a mutation over a socket right
// after its token was logged out, without waiting for the socket to close:
// it must not run.
func TestWS_MutationAfterLogOutFails(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	d := servertest.MustGQL(t, srv.URL, "", `mutation { logIn(input: {handle: "alice", password: "correct horse"}) { token } }`, nil)
	other := d["logIn"].(map[string]any)["token"].(string)

	c := servertest.Acked(t, srv, alice)
	servertest.MustGQL(t, srv.URL, alice.Token, `mutation { logOut }`, nil)
	if c.Conn.WriteJSON(map[string]any{"type": "subscribe", "id": "m", "payload": map[string]any{"query": `mutation { postMessage(input: {text: "after logOut"}) { id } }`}}) == nil {
		requireClosedWithin(t, c, 5*time.Second, "Forbidden: this token was logged out: log in again")
	}
	me := servertest.MustGQL(t, srv.URL, other, `{ viewer { messageCount } }`, nil)
	assert.EqualValues(t, 0, me["viewer"].(map[string]any)["messageCount"], "the mutation did not run")
}

// sessionServer is a test server whose service runs on a clock the test
// moves, over an embedded store the test can change behind the service's
// back, as another process sharing MongoDB would.
type sessionServer struct {
	*servertest.Server
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
func (s *sessionServer) revokeBehind(t *testing.T, u servertest.User) {
	t.Helper()
	id, err := servertest.GlobalStoreID("User", u.ID)
	require.NoError(t, err)
	_, err = s.st.RevokeTokens(context.Background(), id, store.TokenRevocation{All: true, Now: s.clock()})
	require.NoError(t, err)
}

func newSessionServer(t *testing.T, edit func(*httpserver.Server)) *sessionServer {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	s := &sessionServer{st: st, now: time.Now()}
	svc := service.NewService(st, hub, service.Options{Logger: log, PasswordCost: 4, Now: s.clock})
	require.NoError(t, svc.Start(context.Background()))
	s.Server = servertest.Serve(t, httpserver.DefaultOptions(), log, svc, metrics.New(), edit, func() {
		hub.Close()
		_ = st.Close()
	})
	s.Hub = hub
	return s
}

// TestWS_SweepClosesEndedSessions ends a user's tokens where no event
// reaches this process: the sweep finds it once the service reads the user
// again (service.SessionRecheck later), and closes the socket.
func TestWS_SweepClosesEndedSessions(t *testing.T) {
	srv := newSessionServer(t, func(a *httpserver.Server) { a.WS.SetSweepEvery(50 * time.Millisecond) })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	a := servertest.Acked(t, srv.Server, alice)
	b := servertest.Acked(t, srv.Server, bob)

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
	srv := newSessionServer(t, func(a *httpserver.Server) { a.WS.SetSweepEvery(time.Hour) })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	for _, proto := range []string{ws.SubprotocolTransportWS, ws.SubprotocolGraphQLWS} {
		t.Run(proto, func(t *testing.T) {
			c, _, err := servertest.DialWS(t, srv.URL, proto, nil)
			require.NoError(t, err)
			c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
			require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
			start := "subscribe"
			if proto == ws.SubprotocolGraphQLWS {
				start = "start"
			}
			c.Send(start, "1", map[string]any{"query": servertest.InboxSubscription})
			require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)

			srv.revokeBehind(t, alice)
			srv.advance(service.SessionRecheck)
			c.Send(start, "2", map[string]any{"query": `mutation { postMessage(input: {text: "after logOutEverywhere"}) { id } }`})
			requireClosedWithin(t, c, 5*time.Second, "Forbidden: this token was logged out: log in again")
			require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
		})
		// The next subtest's token.
		d := servertest.MustGQL(t, srv.URL, "", `mutation { logIn(input: {handle: "alice", password: "correct horse"}) { token } }`, nil)
		alice.Token = d["logIn"].(map[string]any)["token"].(string)
	}
	me := servertest.MustGQL(t, srv.URL, alice.Token, `{ viewer { messageCount } }`, nil)
	assert.EqualValues(t, 0, me["viewer"].(map[string]any)["messageCount"], "no mutation ran")
}
