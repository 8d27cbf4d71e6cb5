package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/store"
)

const inboxSubscription = `subscription { inboxEvents { type unreadCount totalCount message { id text author { handle } } } }`

func TestWebsocket_Init(t *testing.T) {
	srv := newTestServer(t, nil)
	alice := mustSignUp(t, srv.URL, "alice")

	refused := func(t *testing.T, payload any, wantReason string) {
		t.Helper()
		c, _, err := dialWS(t, srv.URL, "graphql-transport-ws", nil)
		require.NoError(t, err)
		c.send("connection_init", "", payload)
		_, err = c.read(5 * time.Second)
		var ce *websocket.CloseError
		require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
		assert.Equal(t, closeForbidden, ce.Code)
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
			c, _, err := dialWS(t, srv.URL, "graphql-transport-ws", nil)
			require.NoError(t, err)
			c.send("connection_init", "", map[string]any{key: "Bearer " + alice.Token})
			assert.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type, key)
			c.closeNormally()
		}
	})

	t.Run("OKHeaderToken", func(t *testing.T) {
		// A non-browser client may authenticate the handshake itself.
		c, _, err := dialWS(t, srv.URL, "graphql-transport-ws", http.Header{"Authorization": {"Bearer " + alice.Token}})
		require.NoError(t, err)
		c.send("connection_init", "", nil)
		assert.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
		c.closeNormally()
	})

	t.Run("ErrBadHeaderToken", func(t *testing.T) {
		_, resp, err := dialWS(t, srv.URL, "graphql-transport-ws", http.Header{"Authorization": {"Bearer nope"}})
		require.Error(t, err)
		require.NotNil(t, resp)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	})

	t.Run("LegacyProtocol", func(t *testing.T) {
		c, resp, err := dialWS(t, srv.URL, "graphql-ws", nil)
		require.NoError(t, err)
		assert.Equal(t, "graphql-ws", resp.Header.Get("Sec-Websocket-Protocol"))
		c.send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
		assert.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
		c.closeNormally()
	})

	t.Run("ErrLegacyNoToken", func(t *testing.T) {
		// The legacy protocol has connection_error before the close.
		c, _, err := dialWS(t, srv.URL, "graphql-ws", nil)
		require.NoError(t, err)
		c.send("connection_init", "", nil)
		m := c.mustRead(5 * time.Second)
		assert.Equal(t, "connection_error", m.Type)
		assert.Contains(t, string(m.Payload), "Forbidden")
		_, err = c.read(5 * time.Second)
		var ce *websocket.CloseError
		require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
		assert.Equal(t, closeForbidden, ce.Code)
	})
}

func TestWebsocket_InboxEvents(t *testing.T) {
	srv := newTestServer(t, nil)
	alice := mustSignUp(t, srv.URL, "alice")
	bob := mustSignUp(t, srv.URL, "bob")
	mustFollow(t, srv.URL, bob, alice)

	require.Zero(t, len(wsGoroutines()), "no websocket goroutine before the test")

	c, _, err := dialWS(t, srv.URL, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
	require.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
	c.send("subscribe", "1", map[string]any{"query": inboxSubscription})
	require.Eventually(t, func() bool { return srv.hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the subscription reaches the hub")
	assert.NotEmpty(t, wsGoroutines(), "the leak check sees the connection's goroutines")

	mustPost(t, srv.URL, alice, "hello from alice")

	m := c.mustRead(5 * time.Second)
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
	c.closeNormally()
	require.Eventually(t, func() bool { return srv.hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the hub drops the subscriber")
	require.Eventually(t, func() bool { return srv.app.ws.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
		"the adapter forgets the connection")
	if !assert.Eventually(t, func() bool { return len(wsGoroutines()) == 0 }, 5*time.Second, 20*time.Millisecond,
		"every goroutine of the connection and its subscription ends") {
		t.Logf("left behind:\n%s", strings.Join(wsGoroutines(), "\n\n"))
	}

	t.Run("EndsOnComplete", func(t *testing.T) {
		c, _, err := dialWS(t, srv.URL, "graphql-transport-ws", nil)
		require.NoError(t, err)
		c.send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
		require.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
		c.send("subscribe", "s", map[string]any{"query": inboxSubscription})
		require.Eventually(t, func() bool { return srv.hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)
		c.send("complete", "s", nil)
		require.Eventually(t, func() bool { return srv.hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond,
			"a completed subscription leaves the hub while the connection stays open")
		c.closeNormally()
	})
}

func TestWebsocket_LegacyInboxEvents(t *testing.T) {
	srv := newTestServer(t, nil)
	alice := mustSignUp(t, srv.URL, "alice")
	bob := mustSignUp(t, srv.URL, "bob")
	mustFollow(t, srv.URL, bob, alice)

	c, _, err := dialWS(t, srv.URL, "graphql-ws", nil)
	require.NoError(t, err)
	c.send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
	require.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
	c.send("start", "1", map[string]any{"query": inboxSubscription})
	require.Eventually(t, func() bool { return srv.hub.Len() == 1 }, 5*time.Second, 10*time.Millisecond)

	mustPost(t, srv.URL, alice, "legacy hello")
	m := c.mustRead(5 * time.Second)
	require.Equal(t, "data", m.Type, "payload: %s", m.Payload)
	assert.Contains(t, string(m.Payload), `"type":"ADDED"`)
	assert.Contains(t, string(m.Payload), `"text":"legacy hello"`)

	c.send("stop", "1", nil)
	assert.Equal(t, "complete", c.mustRead(5*time.Second).Type)
	require.Eventually(t, func() bool { return srv.hub.Len() == 0 }, 5*time.Second, 10*time.Millisecond)
	c.closeNormally()
}

// wsGoroutines returns the stacks of the goroutines that serve websockets
// or subscriptions: those running code of gorilla/websocket, gqlgen's
// websocket transport, the graph package, the event hub or this package's
// websocket handling. Counting all goroutines would be flaky, since the
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
			"herald/store.(*Hub)", "herald/server.(*ws", "herald/server.(*connHolder)",
		} {
			if strings.Contains(g, marker) {
				out = append(out, g)
				break
			}
		}
	}
	return out
}

func TestWebsocket_Origin(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.AllowedOrigins = []string{"https://app.example.com"} })

	tests := []struct {
		name   string
		origin string
		want   int // 101 accepted, else the refusal status
	}{
		{"OKNoOrigin", "", http.StatusSwitchingProtocols},
		{"OKSameOrigin", srv.URL, http.StatusSwitchingProtocols},
		{"OKAllowed", "https://app.example.com", http.StatusSwitchingProtocols},
		{"OKAllowedCase", "HTTPS://App.Example.com", http.StatusSwitchingProtocols},
		{"ErrForeign", "https://evil.example.com", http.StatusForbidden},
		{"ErrSchemeDiffers", "http://app.example.com", http.StatusForbidden},
		{"ErrMalformed", "::not a url", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			c, resp, err := dialWS(t, srv.URL, "graphql-transport-ws", h)
			require.NotNil(t, resp)
			assert.Equal(t, tt.want, resp.StatusCode)
			if tt.want == http.StatusSwitchingProtocols {
				require.NoError(t, err)
				c.closeNormally()
			} else {
				require.Error(t, err)
			}
		})
	}
}

func TestWebsocket_PayloadLimit(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxBodyBytes = 1024 })
	alice := mustSignUp(t, srv.URL, "alice")
	c, _, err := dialWS(t, srv.URL, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token, "pad": strings.Repeat("x", 2048)})
	_, err = c.read(5 * time.Second)
	var ce *websocket.CloseError
	require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
	assert.Equal(t, websocket.CloseMessageTooBig, ce.Code)
}

func TestHTTP_Auth(t *testing.T) {
	srv := newTestServer(t, nil)
	alice := mustSignUp(t, srv.URL, "alice")

	t.Run("OK", func(t *testing.T) {
		d := mustGQL(t, srv.URL, alice.Token, `{ viewer { handle } }`, nil)
		assert.Equal(t, "alice", d["viewer"].(map[string]any)["handle"])
	})
	t.Run("OKAnonymous", func(t *testing.T) {
		d := mustGQL(t, srv.URL, "", `{ viewer { handle } }`, nil)
		assert.Nil(t, d["viewer"])
	})
	t.Run("ErrInvalidToken", func(t *testing.T) {
		r := gql(t, srv.URL, "forged", `{ viewer { handle } }`, nil)
		assert.Equal(t, http.StatusOK, r.Status, "application/json clients learn from the body")
		assert.Equal(t, "UNAUTHENTICATED", r.code())
		assert.Nil(t, r.Data)
	})
	t.Run("ErrOtherSecret", func(t *testing.T) {
		tok, _, err := auth.NewSigner([]byte(strings.Repeat("z", 32)), time.Hour).IssueFor(store.NewID(time.Now()), 0)
		require.NoError(t, err)
		r := gql(t, srv.URL, tok, `{ viewer { handle } }`, nil)
		assert.Equal(t, "UNAUTHENTICATED", r.code())
	})
	t.Run("ErrGraphQLResponseJSON", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { id } }"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/graphql-response+json")
		req.Header.Set("Authorization", "Bearer forged")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Equal(t, "application/graphql-response+json; charset=utf-8", resp.Header.Get("Content-Type"))
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
		body, _ := io.ReadAll(resp.Body)
		assert.Contains(t, string(body), `"code":"UNAUTHENTICATED"`)
	})
	t.Run("ErrMalformedHeader", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { id } }"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", alice.Token) // no "Bearer "
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		assert.Contains(t, string(body), `"code":"UNAUTHENTICATED"`)
	})
}

func TestHTTP_BodyLimit(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxBodyBytes = 64 })
	t.Run("OK", func(t *testing.T) {
		r := gql(t, srv.URL, "", `{ __typename }`, nil)
		assert.Empty(t, r.Errors)
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		body := `{"query":"{ __typename }","variables":{"pad":"` + strings.Repeat("x", 100) + `"}}`
		resp, err := http.Post(srv.URL+"/graphql", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})
	t.Run("ErrTooLargeChunked", func(t *testing.T) {
		// No Content-Length: the limit must hold while reading.
		body := io.MultiReader(strings.NewReader(`{"query":"{ __typename }","pad":"`), strings.NewReader(strings.Repeat("x", 100)+`"}`))
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})
}

func TestHTTP_Routes(t *testing.T) {
	srv := newTestServer(t, nil)
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), resp.Header
	}

	status, body, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok\n", body)

	status, _, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, status)
	srv.app.health.ready.Store(false)
	status, _, _ = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	srv.app.health.ready.Store(true)

	status, body, h := get("/")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, h.Get("Content-Type"), "text/html")
	assert.Contains(t, body, "/graphql")

	status, body, _ = get("/graphql?query=" + "%7B__typename%7D")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"data":{"__typename":"Query"}}`, body)

	status, _, _ = get("/nope")
	assert.Equal(t, http.StatusNotFound, status)
}

func TestOriginPolicy(t *testing.T) {
	p, err := newOriginPolicy([]string{"https://a.example", " http://b.example:8080 "})
	require.NoError(t, err)
	tests := []struct {
		origin, host string
		want         bool
	}{
		{"", "herald.local", true},
		{"http://herald.local", "herald.local", true},
		{"https://HERALD.local:8443", "herald.local:8443", true},
		{"https://a.example", "herald.local", true},
		{"https://a.example/", "herald.local", true},
		{"http://b.example:8080", "herald.local", true},
		{"http://b.example", "herald.local", false},
		{"https://a.example.evil", "herald.local", false},
		{"null", "herald.local", false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodGet, "http://"+tt.host+"/graphql", nil)
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		assert.Equal(t, tt.want, p.allowed(r), "origin %q host %q", tt.origin, tt.host)
	}

	all, err := newOriginPolicy([]string{"*"})
	require.NoError(t, err)
	r, _ := http.NewRequest(http.MethodGet, "http://herald.local/graphql", nil)
	r.Header.Set("Origin", "https://anything.example")
	assert.True(t, all.allowed(r))

	_, err = newOriginPolicy([]string{"https://a.example/path"})
	assert.Error(t, err)
}

func TestTruncateUTF8(t *testing.T) {
	assert.Equal(t, "abc", truncateUTF8("abc", 5))
	assert.Equal(t, "ab", truncateUTF8("abc", 2))
	assert.Equal(t, "a", truncateUTF8("aé", 2), "never splits a character")
	assert.Equal(t, "aé", truncateUTF8("aéb", 3))
}
