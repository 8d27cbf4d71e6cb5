package ws_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"herald/server/internal/servertest"
	"herald/server/ws"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// legacyAcked opens a graphql-ws connection acknowledged for u.
func legacyAcked(t *testing.T, srv *servertest.Server, u servertest.User) *servertest.WSClient {
	t.Helper()
	c, _, err := servertest.DialWS(t, srv.URL, ws.SubprotocolGraphQLWS, nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + u.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	return c
}

// burst writes msgs as one batch of frames, as fast as the socket takes
// them, and stops at the first failed write (the server closed).
func burst(t *testing.T, c *servertest.WSClient, msgs ...[]byte) {
	t.Helper()
	require.NoError(t, c.Conn.SetWriteDeadline(time.Now().Add(10*time.Second)))
	for _, m := range msgs {
		if c.Conn.WriteMessage(websocket.TextMessage, m) != nil {
			return
		}
	}
}

func legacyStart(id, query string) []byte {
	b, _ := json.Marshal(map[string]any{"type": "start", "id": id, "payload": map[string]any{"query": query}})
	return b
}

// requireNoWSLeft checks that the hub, the adapter and the goroutines of
// websockets are back to nothing.
func requireNoWSLeft(t *testing.T, srv *servertest.Server) {
	t.Helper()
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 10*time.Second, 10*time.Millisecond,
		"every subscription leaves the hub")
	require.Eventually(t, func() bool { return srv.App.WS.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the adapter forgets the connection")
	if !assert.Eventually(t, func() bool { return len(wsGoroutines()) == 0 }, 10*time.Second, 20*time.Millisecond,
		"every goroutine of the connection and its subscriptions ends") {
		g := wsGoroutines()
		t.Logf("%d left behind, the first:\n%s", len(g), strings.Join(g[:min(3, len(g))], "\n\n"))
	}
}

// TestWSLegacy_DuplicateStart4409 repeats a start with one id thousands of
// times: gqlgen replaced its record of the id at each, so every earlier
// subscription outlived stop and the connection. The second start now
// closes the connection with 4409, and nothing is left.
func TestWSLegacy_DuplicateStart4409(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	require.Empty(t, wsGoroutines(), "no websocket goroutine before the test")

	c := legacyAcked(t, srv, alice)
	const repeats = 3000
	msgs := make([][]byte, repeats)
	for i := range msgs {
		msgs[i] = legacyStart("dup", servertest.InboxSubscription)
	}
	burst(t, c, msgs...)
	requireClose(t, c, 4409, "Subscriber for dup already exists")
	burst(t, c, []byte(`{"type":"stop","id":"dup"}`))
	c.CloseNormally()
	requireNoWSLeft(t, srv)
}

// TestWSLegacy_RestartSameID stops and starts one id over and over, in one
// burst: gqlgen removes an operation's id from its records when the
// operation ends, which used to remove the restarted operation's record,
// so that the next stop stopped nothing. Every stop now ends its own
// subscription, the connection stays open and nothing is left.
func TestWSLegacy_RestartSameID(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxSubscriptionsPerConnection = 0 })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	c := legacyAcked(t, srv, alice)
	const rounds = 500
	var msgs [][]byte
	for range rounds {
		msgs = append(msgs, legacyStart("r", servertest.InboxSubscription), []byte(`{"type":"stop","id":"r"}`))
	}
	burst(t, c, msgs...)
	// Each stop is answered with its complete, and nothing else comes.
	for i := range rounds {
		m := c.MustRead(5 * time.Second)
		require.Equal(t, "complete", m.Type, "message %d: %s %s", i, m.ID, m.Payload)
		require.Equal(t, "r", m.ID)
	}
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 10*time.Second, 10*time.Millisecond,
		"every stopped subscription leaves the hub")

	// The connection still works, and the id is free again.
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustFollow(t, srv.URL, alice, bob)
	burst(t, c, legacyStart("r", servertest.InboxSubscription))
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	servertest.MustPost(t, srv.URL, bob, "to r")
	m := c.MustRead(5 * time.Second)
	require.Equal(t, "data", m.Type, "payload %s", m.Payload)
	assert.Equal(t, "r", m.ID)
	assert.Contains(t, string(m.Payload), `"text":"to r"`)
	c.CloseNormally()
	requireNoWSLeft(t, srv)
}

// TestWSLegacy_NothingAfterStop checks that a stopped id gets its complete
// and then nothing, not even gqlgen's own complete, and that a stop of an
// unknown id is ignored.
func TestWSLegacy_NothingAfterStop(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustFollow(t, srv.URL, bob, alice)
	c := legacyAcked(t, srv, bob)
	burst(t, c, legacyStart("1", servertest.InboxSubscription))
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	burst(t, c, []byte(`{"type":"stop","id":"1"}`), []byte(`{"type":"stop","id":"never"}`))
	m := c.MustRead(5 * time.Second)
	require.Equal(t, "complete", m.Type)
	require.Equal(t, "1", m.ID)
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
	servertest.MustPost(t, srv.URL, alice, "after stop")
	servertest.WaitIdle(t, srv.Svc) // delivered before "2" starts
	// The next message is the event of a new subscription: nothing came
	// for "1".
	burst(t, c, legacyStart("2", servertest.InboxSubscription))
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
	servertest.MustPost(t, srv.URL, alice, "to 2")
	m = c.MustRead(5 * time.Second)
	require.Equal(t, "data", m.Type, "unexpected %s %s %s", m.Type, m.ID, m.Payload)
	require.Equal(t, "2", m.ID)
	assert.Contains(t, string(m.Payload), `"text":"to 2"`)
}

// TestWSLegacy_KeepAlive checks graphql-ws keep-alives with a short
// interval: a "ka" with the acknowledgement, then one every interval, sent
// by a timer rather than a goroutine of the connection's.
func TestWSLegacy_KeepAlive(t *testing.T) {
	const interval = 100 * time.Millisecond
	srv := newProtoServer(t)
	srv.App.WS.SetKeepAlive(interval) // read at the next Accept
	alice := servertest.MustSignUp(t, srv.URL, "alice")

	c, _, err := servertest.DialWS(t, srv.URL, ws.SubprotocolGraphQLWS, nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
	require.NoError(t, c.Conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	var m servertest.WSMsg
	require.NoError(t, c.Conn.ReadJSON(&m))
	require.Equal(t, "connection_ack", m.Type)
	start := time.Now()
	const want = 4 // the first with the acknowledgement
	for range want {
		require.NoError(t, c.Conn.ReadJSON(&m))
		require.Equal(t, "ka", m.Type)
	}
	elapsed := time.Since(start)
	assert.GreaterOrEqual(t, elapsed, (want-1)*interval-interval/2, "one ka an interval")
	assert.Less(t, elapsed, (want-1)*interval+2*time.Second)
	for _, g := range wsGoroutines() {
		assert.NotContains(t, g, "keepAlive", "keep-alives need no goroutine")
	}

	c.CloseNormally()
	requireNoWSLeft(t, srv)
}
