package ws_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"herald/server/internal/servertest"
	"herald/server/ws"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWebsocket_Init(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")

	refused := func(t *testing.T, payload any, wantReason string) {
		t.Helper()
		c, _, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", nil)
		require.NoError(t, err)
		c.Send("connection_init", "", payload)
		_, err = c.Read(5 * time.Second)
		var ce *websocket.CloseError
		require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
		assert.Equal(t, ws.CloseForbidden, ce.Code)
		assert.Contains(t, ce.Text, wantReason)
	}

	t.Run("ErrNoToken", func(t *testing.T) {
		refused(t, nil, "Forbidden: connection_init payload needs")
	})
	t.Run("ErrEmptyPayload", func(t *testing.T) {
		refused(t, map[string]any{}, "Forbidden: connection_init payload needs")
	})
	t.Run("ErrBadToken", func(t *testing.T) {
		refused(t, map[string]any{"authorization": "Bearer not-a-token"}, "Forbidden: invalid or expired token")
	})
	t.Run("ErrNotBearer", func(t *testing.T) {
		refused(t, map[string]any{"authorization": "Basic YWxpY2U6cHc="}, "Forbidden: malformed authorization")
	})

	t.Run("OK", func(t *testing.T) {
		for _, key := range []string{"authorization", "Authorization"} {
			c, _, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", nil)
			require.NoError(t, err)
			c.Send("connection_init", "", map[string]any{key: "Bearer " + alice.Token})
			assert.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type, key)
			c.CloseNormally()
		}
	})

	t.Run("OKHeaderToken", func(t *testing.T) {
		// A non-browser client may authenticate the handshake itself.
		c, _, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", http.Header{"Authorization": {"Bearer " + alice.Token}})
		require.NoError(t, err)
		c.Send("connection_init", "", nil)
		assert.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
		c.CloseNormally()
	})

	t.Run("ErrBadHeaderToken", func(t *testing.T) {
		_, resp, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", http.Header{"Authorization": {"Bearer nope"}})
		require.Error(t, err)
		require.NotNil(t, resp)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})

	t.Run("LegacyProtocol", func(t *testing.T) {
		c, resp, err := servertest.DialWS(t, srv.URL, "graphql-ws", nil)
		require.NoError(t, err)
		assert.Equal(t, "graphql-ws", resp.Header.Get("Sec-Websocket-Protocol"))
		c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
		assert.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
		c.CloseNormally()
	})

	t.Run("ErrLegacyNoToken", func(t *testing.T) {
		// The legacy protocol has connection_error before the close.
		c, _, err := servertest.DialWS(t, srv.URL, "graphql-ws", nil)
		require.NoError(t, err)
		c.Send("connection_init", "", nil)
		m := c.MustRead(5 * time.Second)
		assert.Equal(t, "connection_error", m.Type)
		assert.Contains(t, string(m.Payload), "Forbidden")
		_, err = c.Read(5 * time.Second)
		var ce *websocket.CloseError
		require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
		assert.Equal(t, ws.CloseForbidden, ce.Code)
	})
}

func TestWebsocket_InboxEvents(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustFollow(t, srv.URL, bob, alice)

	require.Zero(t, len(wsGoroutines()), "no websocket goroutine before the test")

	c, _, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	c.Send("subscribe", "1", map[string]any{"query": servertest.InboxSubscription})
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the subscription reaches the hub")
	assert.NotEmpty(t, wsGoroutines(), "the leak check sees the connection's goroutines")

	servertest.MustPost(t, srv.URL, alice, "hello from alice")

	m := c.MustRead(5 * time.Second)
	require.Equal(t, "next", m.Type, "payload: %s", m.Payload)
	assert.Equal(t, "1", m.ID)
	var next struct {
		Data struct {
			InboxEvents struct {
				Type        string
				UnreadCount int
				TotalCount  int
				Message     struct {
					Text   string
					Author struct{ Handle string }
				}
			}
		}
		Errors []any
	}
	require.NoError(t, json.Unmarshal(m.Payload, &next))
	require.Empty(t, next.Errors)
	ev := next.Data.InboxEvents
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, 1, ev.UnreadCount)
	assert.Equal(t, 1, ev.TotalCount)
	assert.Equal(t, "hello from alice", ev.Message.Text)
	assert.Equal(t, "alice", ev.Message.Author.Handle)

	// The client leaves: its subscription must end and leave nothing behind.
	c.CloseNormally()
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the hub drops the subscriber")
	require.Eventually(t, func() bool { return srv.App.WS.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the adapter forgets the connection")
	if !assert.Eventually(t, func() bool { return len(wsGoroutines()) == 0 }, 5*time.Second, 20*time.Millisecond,
		"every goroutine of the connection and its subscription ends") {
		t.Logf("left behind:\n%s", strings.Join(wsGoroutines(), "\n\n"))
	}

	t.Run("EndsOnComplete", func(t *testing.T) {
		c, _, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", nil)
		require.NoError(t, err)
		c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
		require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
		c.Send("subscribe", "s", map[string]any{"query": servertest.InboxSubscription})
		require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
		c.Send("complete", "s", nil)
		require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
			"a completed subscription leaves the hub while the connection stays open")
		c.CloseNormally()
	})
}

func TestWebsocket_LegacyInboxEvents(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustFollow(t, srv.URL, bob, alice)

	c, _, err := servertest.DialWS(t, srv.URL, "graphql-ws", nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	c.Send("start", "1", map[string]any{"query": servertest.InboxSubscription})
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)

	servertest.MustPost(t, srv.URL, alice, "legacy hello")
	m := c.MustRead(5 * time.Second)
	require.Equal(t, "data", m.Type, "payload: %s", m.Payload)
	assert.Contains(t, string(m.Payload), `"type":"ADDED"`)
	assert.Contains(t, string(m.Payload), `"text":"legacy hello"`)

	c.Send("stop", "1", nil)
	assert.Equal(t, "complete", c.MustRead(5*time.Second).Type)
	require.Eventually(t, func() bool { return srv.Hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
	c.CloseNormally()
}

// wsGoroutines returns the stacks of the goroutines that serve websockets
// or subscriptions: those running code of gorilla/websocket, gqlgen's
// websocket transport, the graph package, the event hub or package ws. Counting all goroutines would be flaky, since the
// storage engine starts and stops background goroutines on its own.
func wsGoroutines() []string {
	buf := make([]byte, 4<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if strings.Contains(g, "[running]") && strings.Contains(g, "wsGoroutines") {
			continue // this one
		}
		for _, marker := range []string{
			"gorilla/websocket.", "gqlgen/graphql/handler/transport.", "herald/graph.",
			"herald/store.(*Hub)", "herald/server/ws.",
		} {
			if strings.Contains(g, marker) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func TestWebsocket_PayloadLimit(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxBodyBytes = 1024 })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	c, _, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token, "pad": strings.Repeat("x", 2048)})
	_, err = c.Read(5 * time.Second)
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
	assert.Equal(t, websocket.CloseMessageTooBig, ce.Code)
}
