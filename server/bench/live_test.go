package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLiveClient_Ended checks that a subscriber notes the server ending its
// subscription while the connection stays open: it then misses every
// later event, and the sustained section counts it.
func TestLiveClient_Ended(t *testing.T) {
	up := websocket.Upgrader{Subprotocols: []string{"graphql-transport-ws"}}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		var m struct{ Type string }
		for _, want := range []string{"connection_init", "subscribe"} {
			if conn.ReadJSON(&m) != nil || m.Type != want {
				return
			}
			if want == "connection_init" {
				_ = conn.WriteJSON(map[string]string{"type": "connection_ack"})
			}
		}
		_ = conn.WriteJSON(map[string]any{"id": "1", "type": "next", "payload": map[string]any{"data": map[string]any{"inboxEvents": map[string]string{"type": "ADDED", "messageId": "m1"}}}})
		_ = conn.WriteJSON(map[string]string{"id": "1", "type": "complete"})
		<-release // the connection stays open
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialLive(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), "token", nil)
	require.NoError(t, err)
	defer c.close()
	require.Eventually(t, c.ended.Load, 5*time.Second, time.Millisecond, "the server ended the subscription")
	_, ok := c.arrival("m1")
	assert.True(t, ok, "the event before the end arrived")
	select {
	case <-c.done:
		t.Fatal("the connection stays open")
	default:
	}
}
