package ws_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/httpserver"
	"herald/server/internal/servertest"
	"herald/server/ws"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// The graphql-transport-ws rules of github.com/enisdenjo/graphql-ws
// PROTOCOL.md, one test each, as a client on 127.0.0.1 sees them.

// protoInitTimeout is the connection_init timeout in these tests.
const protoInitTimeout = 300 * time.Millisecond

// newProtoServer is servertest.New with a short connection_init timeout.
func newProtoServer(t *testing.T) *servertest.Server {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	svc := service.NewService(st, hub, service.Options{Logger: log, PasswordCost: 4})
	require.NoError(t, svc.Start(context.Background()))
	ts := servertest.Serve(t, httpserver.DefaultOptions(), log, svc, nil, func(a *httpserver.Server) { a.WS.SetInitTimeout(protoInitTimeout) }, func() {
		hub.Close()
		_ = st.Close()
	})
	ts.Hub = hub
	return ts
}

// protoDial opens a graphql-transport-ws connection.
func protoDial(t *testing.T, srv *servertest.Server) *servertest.WSClient {
	t.Helper()
	c, _, err := servertest.DialWS(t, srv.URL, ws.SubprotocolTransportWS, nil)
	require.NoError(t, err)
	return c
}

// requireClose reads until the server's close frame and checks its code and
// reason (reason "" skips the reason).
func requireClose(t *testing.T, c *servertest.WSClient, code int, reason string) {
	t.Helper()
	var err error
	for err == nil {
		var m servertest.WSMsg
		m, err = c.Read(5 * time.Second)
		if err == nil {
			t.Logf("message before the close: %s %s %s", m.Type, m.ID, m.Payload)
		}
	}
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
	assert.Equal(t, code, ce.Code, "reason %q", ce.Text)
	if reason != "" {
		assert.Equal(t, reason, ce.Text)
	}
}

// requireQuiet checks that nothing but what a ping provokes arrives: the
// next message is the pong.
func requireQuiet(t *testing.T, c *servertest.WSClient) {
	t.Helper()
	c.Send("ping", "", map[string]any{"quiet": true})
	m := c.MustRead(5 * time.Second)
	require.Equal(t, "pong", m.Type, "unexpected %s %s %s", m.Type, m.ID, m.Payload)
}

func TestTransportWS_InitTimeout4408(t *testing.T) {
	srv := newProtoServer(t)
	c := protoDial(t, srv)
	start := time.Now()
	requireClose(t, c, 4408, "Connection initialisation timeout")
	assert.GreaterOrEqual(t, time.Since(start), protoInitTimeout-50*time.Millisecond)

	t.Run("InitInTimeIsKept", func(t *testing.T) {
		alice := servertest.MustSignUp(t, srv.URL, "alice")
		c := servertest.Acked(t, srv, alice)
		time.Sleep(2 * protoInitTimeout)
		requireQuiet(t, c)
	})
}

func TestTransportWS_InvalidToken4403(t *testing.T) {
	srv := newProtoServer(t)
	c := protoDial(t, srv)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer not-a-token"})
	requireClose(t, c, 4403, "Forbidden: invalid or expired token")
}

func TestTransportWS_SubscribeBeforeAck4401(t *testing.T) {
	srv := newProtoServer(t)
	c := protoDial(t, srv)
	c.Send("subscribe", "1", map[string]any{"query": servertest.InboxSubscription})
	requireClose(t, c, 4401, "Unauthorized")
}

func TestTransportWS_DuplicateID4409(t *testing.T) {
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")

	t.Run("ReuseAfterComplete", func(t *testing.T) {
		// An id is free again once its operation completed.
		c := servertest.Acked(t, srv, alice)
		for range 2 {
			c.Send("subscribe", "q", map[string]any{"query": `{ viewer { handle } }`})
			m := c.MustRead(5 * time.Second)
			require.Equal(t, "next", m.Type, "payload %s", m.Payload)
			assert.Contains(t, string(m.Payload), `"handle":"alice"`)
			m = c.MustRead(5 * time.Second)
			require.Equal(t, "complete", m.Type)
			require.Equal(t, "q", m.ID)
		}
		c.CloseNormally()
	})

	c := servertest.Acked(t, srv, alice)
	c.Send("subscribe", "dup", map[string]any{"query": servertest.InboxSubscription})
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	c.Send("subscribe", "dup", map[string]any{"query": servertest.InboxSubscription})
	requireClose(t, c, 4409, "Subscriber for dup already exists")
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the closed connection's subscription ends")
}

func TestTransportWS_SecondInit4429(t *testing.T) {
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	c := servertest.Acked(t, srv, alice)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
	requireClose(t, c, 4429, "Too many initialisation requests")
}

func TestTransportWS_InvalidMessage4400(t *testing.T) {
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	raw := func(c *servertest.WSClient, s string) {
		require.NoError(t, c.Conn.WriteMessage(websocket.TextMessage, []byte(s)))
	}
	for _, tc := range []struct {
		name  string
		acked bool
		msg   string
	}{
		{"BadJSON", false, `{"type":"connection_init"`},
		{"BadJSONAfterAck", true, `not json`},
		{"NotAnObject", true, `["ping"]`},
		{"NoType", false, `{"payload":{}}`},
		{"UnknownType", false, `{"type":"hello"}`},
		{"UnknownTypeAfterAck", true, `{"type":"start","id":"1","payload":{"query":"{ viewer { id } }"}}`},
		{"ServerType", true, `{"type":"next","id":"1","payload":{}}`},
		{"InitPayloadNotObject", false, `{"type":"connection_init","payload":"Bearer x"}`},
		{"SubscribeNoID", true, `{"type":"subscribe","payload":{"query":"{ viewer { id } }"}}`},
		{"SubscribeEmptyID", true, `{"type":"subscribe","id":"","payload":{"query":"{ viewer { id } }"}}`},
		{"SubscribeNoPayload", true, `{"type":"subscribe","id":"1"}`},
		{"SubscribeNoQuery", true, `{"type":"subscribe","id":"1","payload":{}}`},
		{"SubscribeVariablesNotObject", true, `{"type":"subscribe","id":"1","payload":{"query":"{ viewer { id } }","variables":[1]}}`},
		{"CompleteNoID", true, `{"type":"complete"}`},
		{"PingPayloadNotObject", true, `{"type":"ping","payload":7}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c *servertest.WSClient
			if tc.acked {
				c = servertest.Acked(t, srv, alice)
			} else {
				c = protoDial(t, srv)
			}
			raw(c, tc.msg)
			requireClose(t, c, 4400, "")
		})
	}
}

func TestTransportWS_NoCompleteAfterError(t *testing.T) {
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	c := servertest.Acked(t, srv, alice)
	for _, q := range []string{`subscription { inboxEvents {`, `subscription { noSuchField }`} {
		c.Send("subscribe", "bad", map[string]any{"query": q})
		m := c.MustRead(5 * time.Second)
		require.Equal(t, "error", m.Type, "payload %s", m.Payload)
		require.Equal(t, "bad", m.ID)
		var errs []map[string]any
		require.NoError(t, json.Unmarshal(m.Payload, &errs))
		require.NotEmpty(t, errs)
		requireQuiet(t, c) // no complete for "bad"
	}
}

func TestTransportWS_PingPong(t *testing.T) {
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	check := func(t *testing.T, c *servertest.WSClient) {
		c.Send("ping", "", map[string]any{"seq": 7})
		m := c.MustRead(5 * time.Second)
		require.Equal(t, "pong", m.Type)
		assert.JSONEq(t, `{"seq":7}`, string(m.Payload), "the payload is echoed")
		c.Send("ping", "", nil)
		m = c.MustRead(5 * time.Second)
		require.Equal(t, "pong", m.Type)
		assert.Empty(t, m.Payload)
	}
	t.Run("BeforeAck", func(t *testing.T) {
		c := protoDial(t, srv)
		check(t, c)
		// An unsolicited pong is a heartbeat, not an error.
		c.Send("pong", "", nil)
		c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
		require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	})
	t.Run("AfterAck", func(t *testing.T) {
		c := servertest.Acked(t, srv, alice)
		check(t, c)
		c.Send("pong", "", nil)
		requireQuiet(t, c)
	})
}

// TestTransportWS_ServerPingPongAccepted waits for the server's keep-alive
// pings (every ws.PingInterval) and answers them; a client that did not
// would be dropped after two intervals.
func TestTransportWS_ServerPingPongAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("waits two keep-alive intervals")
	}
	t.Parallel()
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	c := servertest.Acked(t, srv, alice)
	start := time.Now()
	for i := range 2 {
		require.NoError(t, c.Conn.SetReadDeadline(time.Now().Add(ws.PingInterval+5*time.Second)))
		var m servertest.WSMsg
		require.NoError(t, c.Conn.ReadJSON(&m), "ping %d", i)
		require.Equal(t, "ping", m.Type)
		c.Send("pong", "", nil)
	}
	require.Greater(t, time.Since(start), 2*ws.PingInterval-time.Second)
	// Past the 2-interval deadline the connection still works.
	requireQuiet(t, c)
}

// TestTransportWS_SilentClientDropped checks the adapter's keep-alive with a
// short interval: a client that answers no ping is dropped after two
// intervals, one that answers stays.
func TestTransportWS_SilentClientDropped(t *testing.T) {
	const interval = 200 * time.Millisecond
	srv := newProtoServer(t)
	srv.App.WS.SetPingInterval(interval) // read at the next Accept
	alice := servertest.MustSignUp(t, srv.URL, "alice")

	answering := servertest.Acked(t, srv, alice)
	var pings atomic.Int32
	go func() {
		for {
			var m servertest.WSMsg
			if answering.Conn.ReadJSON(&m) != nil {
				return // closed at cleanup
			}
			if m.Type == "ping" {
				pings.Add(1)
				_ = answering.Conn.WriteJSON(map[string]string{"type": "pong"})
			}
		}
	}()

	silent := servertest.Acked(t, srv, alice)
	start := time.Now()
	require.NoError(t, silent.Conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	var err error
	for err == nil {
		var m servertest.WSMsg
		if err = silent.Conn.ReadJSON(&m); err == nil {
			require.Equal(t, "ping", m.Type)
		}
	}
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server drops a client that answers no ping")
	assert.Less(t, time.Since(start), 2*interval+time.Second)

	require.Eventually(t, func() bool { return srv.App.WS.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(3 * interval)
	assert.Equal(t, 1, srv.App.WS.Len(), "the answering client outlives two intervals")
	assert.GreaterOrEqual(t, pings.Load(), int32(3))
}

func TestTransportWS_ClientCompleteStops(t *testing.T) {
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustFollow(t, srv.URL, bob, alice)
	c := servertest.Acked(t, srv, bob)
	c.Send("subscribe", "s", map[string]any{"query": servertest.InboxSubscription})
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	c.Send("complete", "s", nil)
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the subscription leaves the hub")
	servertest.MustPost(t, srv.URL, alice, "after complete")
	requireQuiet(t, c) // nothing more for "s", not even a complete
	// A complete for an unknown or finished id is ignored.
	c.Send("complete", "s", nil)
	c.Send("complete", "never", nil)
	requireQuiet(t, c)
}

// TestTransportWS_LegacyUnchanged checks that the legacy graphql-ws
// protocol is left to gqlgen: no 4408 timer, keep-alives and start/stop.
func TestTransportWS_LegacyUnchanged(t *testing.T) {
	srv := newProtoServer(t)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	c, _, err := servertest.DialWS(t, srv.URL, "graphql-ws", nil)
	require.NoError(t, err)
	time.Sleep(2 * protoInitTimeout)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	c.Send("start", "1", map[string]any{"query": `{ viewer { handle } }`})
	m := c.MustRead(5 * time.Second)
	require.Equal(t, "data", m.Type, "payload %s", m.Payload)
	assert.Contains(t, string(m.Payload), `"handle":"alice"`)
	require.Equal(t, "complete", c.MustRead(5*time.Second).Type)
	c.CloseNormally()
}
