package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/graph/auth"
	"herald/server/internal/servertest"
	"herald/store"
	"herald/store/service"
)

// These tests play the attacker of issue 11 against the real HTTP stack:
// each shape of request that once bought more work than the limits say.

// aliased returns n copies of field, each under its own alias.
func aliased(n int, field string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "a%d: %s ", i, field)
	}
	return b.String()
}

// postJSON posts a raw body to /graphql with extra headers and returns the
// status and the decoded response.
func postJSON(t *testing.T, base string, body any, header map[string]string) (int, servertest.GQLResponse) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(b))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out servertest.GQLResponse
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	out.Status = resp.StatusCode
	return resp.StatusCode, out
}

// Finding 1: aliases and batches once cost one rate-limit token whatever
// they held.
func TestAbuse_AliasedMutations(t *testing.T) {
	ts := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, ts.URL, "alice")

	t.Run("LogInAliasesRefused", func(t *testing.T) {
		start := time.Now()
		r := servertest.GQL(t, ts.URL, "", `mutation { `+aliased(100, `logIn(input: {handle: "alice", password: "guess-guess"}) { token }`)+` }`, nil)
		assert.Equal(t, graph.CodeAliasLimit, r.Code(), "100 password guesses in one request")
		assert.Nil(t, r.Data)
		assert.Less(t, time.Since(start), time.Second, "refused before any password is checked")
	})
	t.Run("RootFieldsRefused", func(t *testing.T) {
		q := `mutation { ` + aliased(21, `markInboxRead`) + ` }`
		r := servertest.GQL(t, ts.URL, alice.Token, q, nil)
		assert.Equal(t, graph.CodeRootFieldLimit, r.Code(), "21 mutations in one request, within the alias limit of 30")
	})
	t.Run("EachRootFieldCharged", func(t *testing.T) {
		// The user's bucket holds 20: two requests of ten posts drain it.
		posts := `mutation { ` + aliased(10, `postMessage(input: {text: "spam"}) { id }`) + ` }`
		for range 2 {
			r := servertest.GQL(t, ts.URL, alice.Token, posts, nil)
			require.Empty(t, r.Errors)
		}
		r := servertest.GQL(t, ts.URL, alice.Token, posts, nil)
		assert.Equal(t, graph.CodeRateLimited, r.Code(), "300 posts in 6 requests against 60 a minute")
		assert.Positive(t, r.Errors[0].Extensions["retryAfter"])
		d := servertest.MustGQL(t, ts.URL, alice.Token, `{ viewer { messageCount } }`, nil)
		assert.EqualValues(t, 20, d["viewer"].(map[string]any)["messageCount"], "the refused request posted nothing")
	})
	t.Run("BatchCharged", func(t *testing.T) {
		bob := servertest.MustSignUp(t, ts.URL, "bob")
		op := map[string]any{"query": `mutation { ` + aliased(3, `markInboxRead`) + ` }`}
		batch := []any{op, op, op, op, op, op, op, op}
		b, err := json.Marshal(batch)
		require.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, ts.URL+"/graphql", bytes.NewReader(b))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+bob.Token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out []servertest.GQLResponse
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		require.Len(t, out, 8)
		ok := 0
		for _, r := range out {
			if len(r.Errors) == 0 {
				ok++
			} else {
				assert.Equal(t, graph.CodeRateLimited, r.Code())
			}
		}
		assert.Equal(t, 6, ok, "6 operations of 3 mutations fill a burst of 20; the 7th does not fit")
	})
}

// Finding 1: failed logIns are limited per handle, whatever the address.
func TestAbuse_LogInPerHandle(t *testing.T) {
	ts := servertest.New(t, func(c *servertest.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	servertest.MustSignUp(t, ts.URL, "carol")
	logIn := func(from, handle, password string) servertest.GQLResponse {
		_, r := postJSON(t, ts.URL, map[string]any{
			"query":     `mutation($h: String!, $p: String!) { logIn(input: {handle: $h, password: $p}) { token } }`,
			"variables": map[string]any{"h": handle, "p": password},
		}, map[string]string{"X-Forwarded-For": from})
		return r
	}
	for i := range 10 {
		r := logIn(fmt.Sprintf("198.51.100.%d", i), "carol", "not-the-password")
		require.Equal(t, store.EUNAUTHENTICATED, r.Code(), "attempt %d", i)
	}
	r := logIn("203.0.113.9", "CAROL", "correct horse")
	assert.Equal(t, graph.CodeRateLimited, r.Code(), "the 11th try, from a fresh address, even with the right password")
	assert.Positive(t, r.Errors[0].Extensions["retryAfter"])
	assert.Equal(t, store.EUNAUTHENTICATED, logIn("203.0.113.9", "nobody_else", "x-x-x-x-x").Code(), "other handles are not held up")
}

// Finding 1's last part, bcrypt work that outlived its client, is
// store.TestService_PasswordsWaitTheirTurn: checks wait for a slot under
// their request's context.

// Finding 2: introspection once counted toward no limit.
func TestAbuse_Introspection(t *testing.T) {
	ts := servertest.New(t, nil)
	full := `__schema { types { name fields { name args { name type { name ofType { name } } } type { name ofType { name ofType { name } } } } } }`
	t.Run("OneSchemaIsFine", func(t *testing.T) {
		servertest.MustGQL(t, ts.URL, "", `{ `+full+` }`, nil)
	})
	t.Run("TwoSchemasRefused", func(t *testing.T) {
		r := servertest.GQL(t, ts.URL, "", `{ a: `+full+` b: `+full+` }`, nil)
		assert.Equal(t, graph.CodeIntrospectionLimit, r.Code())
		r = servertest.GQL(t, ts.URL, "", `{ ...S ...S } fragment S on Query { `+full+` }`, nil)
		assert.Equal(t, graph.CodeIntrospectionLimit, r.Code(), "twice through a fragment is twice")
	})
	t.Run("TypeCounted", func(t *testing.T) {
		ty := `__type(name: "User") { fields { name description args { name } type { name kind ofType { name kind } } } }`
		r := servertest.GQL(t, ts.URL, "", `{ `+aliased(20, ty)+` }`, nil)
		require.Empty(t, r.Errors, "20 small __type lookups are fine")
		// Three lookups of 200 small selections each, through fragments.
		big := `{ a: __type(name: "User") { ...T } b: __type(name: "Query") { ...T } c: __type(name: "Message") { ...T } }
			fragment T on __Type { ` + strings.Repeat(`...U `, 10) + ` }
			fragment U on __Type { ` + strings.Repeat(`fields { name args { name type { name } } type { name ofType { name } } } `, 20) + ` }`
		r = servertest.GQL(t, ts.URL, "", big, nil)
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", r.Code(), "introspection fields count toward complexity")
	})
	t.Run("FragmentBomb", func(t *testing.T) {
		// Each fragment spreads the next twice: 2^40 fields once expanded.
		var b strings.Builder
		b.WriteString(`{ viewer { ...F0 } } `)
		for i := range 40 {
			fmt.Fprintf(&b, "fragment F%d on User { ...F%d ...F%d } ", i, i+1, i+1)
		}
		b.WriteString("fragment F40 on User { handle }")
		start := time.Now()
		r := servertest.GQL(t, ts.URL, "", b.String(), nil)
		assert.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", r.Code())
		assert.Less(t, time.Since(start), 2*time.Second, "measured without expanding it")
	})
	t.Run("Tokens", func(t *testing.T) {
		r := servertest.GQL(t, ts.URL, "", `{ viewer { `+strings.Repeat("__typename ", 2500)+` } }`, nil)
		assert.Equal(t, graph.CodeTokenLimit, r.Code())
	})
}

// Finding 3: a stalled request body once held its connection for good.
func TestAbuse_StalledBody(t *testing.T) {
	ts := servertest.New(t, func(c *servertest.Config) { c.ReadTimeout = 500 * time.Millisecond })
	addr := strings.TrimPrefix(ts.URL, "http://")
	const n = 20
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		// A body of 1000 bytes is announced; 10 arrive.
		_, err = io.WriteString(c, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"query\":")
		require.NoError(t, err)
		conns[i] = c
	}
	for _, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "the server answers once the read deadline passes")
		assert.True(t, resp.Close, "Connection: close")
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		// And closes: what is left of the body is never read.
		_, err = c.Read(make([]byte, 1))
		assert.ErrorIs(t, err, io.EOF)
	}
	servertest.MustGQL(t, ts.URL, "", `{ viewer { id } }`, nil)
}

// Finding 3: a client that does not read its response once held it for
// minutes.
func TestAbuse_SlowReader(t *testing.T) {
	ts := servertest.New(t, func(c *servertest.Config) {
		c.QueryTimeout = time.Second
		c.WriteTimeout = 300 * time.Millisecond
		c.MaxResponseBytes = 32 << 20
	})
	// A response of about 8 MB: 8 pages of 100 messages of 5,000
	// characters, more than the socket buffers on both sides hold.
	ctx := t.Context()
	u, err := ts.Svc.SignUp(ctx, service.SignUpInput{Handle: "erin", Password: "correct horse"})
	require.NoError(t, err)
	for range 100 {
		_, err := ts.Svc.PostMessage(ctx, u.ID, service.PostInput{Text: strings.Repeat("x", store.MessageMaxLen)})
		require.NoError(t, err)
	}
	body, err := json.Marshal(map[string]any{"query": `{ ` + aliased(8, `user(handle: "erin") { messages(first: 100) { edges { node { text } } } }`) + ` }`})
	require.NoError(t, err)
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		// A small receive window, so the server's writes block soon.
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Read nothing until well past the write deadline (1.3 s after the
	// body arrived), then what the server sent before it gave up.
	time.Sleep(3 * time.Second)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	got, err := io.ReadAll(conn)
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "the server closed the connection")
	assert.Less(t, len(got), 8*100*store.MessageMaxLen, "and gave up a response it could not deliver")
}

// Finding 8: usersByAttribute's totalCount scans, and once cost 2 points.
func TestAbuse_CountCost(t *testing.T) {
	ts := servertest.New(t, func(c *servertest.Config) { c.ComplexityLimit = 1000 })
	count := `usersByAttribute(name: "plan", value: "pro") { totalCount }`
	servertest.MustGQL(t, ts.URL, "", `{ `+count+` }`, nil)
	r := servertest.GQL(t, ts.URL, "", `{ `+aliased(10, count)+` }`, nil)
	require.Equal(t, "COMPLEXITY_LIMIT_EXCEEDED", r.Code())
	// Each is a page of 20 (21 points) and a count (100).
	assert.Contains(t, r.Errors[0].Message, "complexity 1210", "ten counts cost ten scans")
	r = servertest.GQL(t, ts.URL, "", `{ `+aliased(10, `usersByAttribute(name: "plan", value: "pro") { edges { cursor } }`)+` }`, nil)
	assert.Empty(t, r.Errors, "a page without its count costs no scan")
}

// Finding 9: an APQ hash that does not match its query answered INTERNAL
// and logged an ERROR line per request.
func TestAbuse_PersistedQueries(t *testing.T) {
	var logs servertest.SyncBuffer
	ts := servertest.NewLog(t, nil, slog.New(slog.NewJSONHandler(&logs, nil)))
	query := `{ viewer { id } }`
	sum := sha256.Sum256([]byte(query))
	good := hex.EncodeToString(sum[:])
	for _, tt := range []struct {
		name string
		body map[string]any
		code string
	}{
		{"Mismatch", map[string]any{"query": query, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("0", 64)}}}, graph.CodePersistedQueryMismatch},
		{"Version2", map[string]any{"query": query, "extensions": map[string]any{"persistedQuery": map[string]any{"version": 2, "sha256Hash": good}}}, graph.CodePersistedQueryUnsupported},
		{"Malformed", map[string]any{"query": query, "extensions": map[string]any{"persistedQuery": "yes"}}, graph.CodePersistedQueryInvalid},
		{"NotFound", map[string]any{"extensions": map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("1", 64)}}}, graph.CodePersistedQueryNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, r := postJSON(t, ts.URL, tt.body, map[string]string{"Accept": graph.MediaTypeGraphQLResponse})
			assert.Equal(t, http.StatusBadRequest, status, "a request error")
			assert.Equal(t, tt.code, r.Code())
			assert.Nil(t, r.Data)
		})
	}
	t.Run("OK", func(t *testing.T) {
		ext := map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": good}}
		_, r := postJSON(t, ts.URL, map[string]any{"query": query, "extensions": ext}, nil)
		require.Empty(t, r.Errors)
		_, r = postJSON(t, ts.URL, map[string]any{"extensions": ext}, nil)
		require.Empty(t, r.Errors, "the hash alone finds the query")
	})
	assert.NotContains(t, logs.String(), `"level":"ERROR"`)
}

// Finding 10: text that looks blank or lies.
func TestAbuse_Text(t *testing.T) {
	ts := servertest.New(t, nil)
	u := servertest.MustSignUp(t, ts.URL, "frank")
	for _, text := range []string{"\x00\x00\x00", "\u200b\u200c\u200d\ufeff", "\u3164\u3164", " \u2800 ", "bell\a"} {
		r := servertest.GQL(t, ts.URL, u.Token, `mutation($t: String!) { postMessage(input: {text: $t}) { id } }`, map[string]any{"t": text})
		assert.Equal(t, store.EINVALID, r.Code(), "%q", text)
	}
	for _, name := range []string{"\u202eevil", "Al\x00ice", "ali\u2066ce"} {
		r := servertest.GQL(t, ts.URL, "", `mutation($n: String!) { signUp(input: {handle: "grace", password: "correct horse", displayName: $n}) { token } }`, map[string]any{"n": name})
		assert.Equal(t, store.EINVALID, r.Code(), "%q", name)
	}
	d := servertest.MustGQL(t, ts.URL, "", `mutation { signUp(input: {handle: "heidi", password: "correct horse", displayName: "\u200b"}) { user { displayName } } }`, nil)
	assert.Equal(t, "heidi", d["signUp"].(map[string]any)["user"].(map[string]any)["displayName"], "an invisible name is no name")
	servertest.MustPost(t, ts.URL, u, "שלום \u200f!")
}

// Finding 12: tokens for users that do not exist, or from the future.
func TestAbuse_Tokens(t *testing.T) {
	ts := servertest.New(t, nil)
	ghost, _, err := ts.Signer.IssueFor(store.NewID(time.Now()), 0)
	require.NoError(t, err)
	r := servertest.GQL(t, ts.URL, ghost, `{ inbox { totalCount } }`, nil)
	assert.Equal(t, store.EUNAUTHENTICATED, r.Code(), "a signed token for a user that does not exist")

	u := servertest.MustSignUp(t, ts.URL, "ivan")
	ivan, err := ts.Svc.FindUserByHandle(t.Context(), "ivan")
	require.NoError(t, err)
	now := time.Now()
	future, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"iss": auth.Issuer, "sub": ivan.ID.String(), "jti": "future-token",
		"iat": now.Add(time.Hour).Unix(), "exp": now.Add(2 * time.Hour).Unix(),
	}).SignedString([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	r = servertest.GQL(t, ts.URL, future, `{ viewer { id } }`, nil)
	assert.Equal(t, store.EUNAUTHENTICATED, r.Code(), "a token issued in the future")

	// logOut ends the token it was sent with, and no other.
	second := servertest.GQL(t, ts.URL, "", `mutation { logIn(input: {handle: "ivan", password: "correct horse"}) { token } }`, nil)
	other := second.Data["logIn"].(map[string]any)["token"].(string)
	assert.Equal(t, true, servertest.MustGQL(t, ts.URL, u.Token, `mutation { logOut }`, nil)["logOut"])
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, u.Token, `{ viewer { id } }`, nil).Code())
	servertest.MustGQL(t, ts.URL, other, `{ viewer { id } }`, nil)
	servertest.MustGQL(t, ts.URL, other, `mutation { logOutEverywhere }`, nil)
	assert.Equal(t, store.EUNAUTHENTICATED, servertest.GQL(t, ts.URL, other, `{ viewer { id } }`, nil).Code())
}

// hostileWS opens a websocket from an attacker's address speaking
// protocol, with connection_init sent when token is not empty; nil if the
// server refused the handshake.
func hostileWS(t *testing.T, base, protocol, token string) *websocket.Conn {
	d := websocket.Dialer{Subprotocols: []string{protocol}, HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.Dial(servertest.WSURL(base), http.Header{"X-Forwarded-For": {"198.51.100.10"}})
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		return nil
	}
	if token != "" {
		_ = c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + token}})
	}
	return c
}

// drain reads c until it fails: the server closed it, or d passed.
func drain(c *websocket.Conn, d time.Duration) {
	if err := c.SetReadDeadline(time.Now().Add(d)); err != nil {
		return
	}
	for {
		if _, _, err := c.NextReader(); err != nil {
			return
		}
	}
}

// openFDs counts the process's open file descriptors, sockets included.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd on this system: open connections cannot be counted")
	}
	return len(ents)
}

// heapAfterGC returns the live heap after a collection.
func heapAfterGC() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestAbuse_Bounded sends a few hundred hostile requests of each kind the
// issue found against one server, from attackers' addresses, then checks
// that the server's memory, goroutines and open connections are back near
// where they were, and that a normal user's requests still succeed. Every
// loop is bounded in count, and the whole test takes seconds.
func TestAbuse_Bounded(t *testing.T) {
	ts := servertest.New(t, func(c *servertest.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.ReadTimeout = 300 * time.Millisecond
		c.WriteTimeout = 300 * time.Millisecond
		c.QueryTimeout = 2 * time.Second
	})
	base := ts.URL
	victim := servertest.MustSignUp(t, base, "victim")
	attacker := servertest.MustSignUp(t, base, "attacker")
	servertest.MustPost(t, base, victim, "hello")
	http.DefaultClient.CloseIdleConnections()

	baseG, baseFD, baseHeap := runtime.NumGoroutine(), openFDs(t), heapAfterGC()
	client := &http.Client{Timeout: 10 * time.Second}
	hostile := func(addr, token, query string, extensions map[string]any) {
		body := map[string]any{"query": query}
		if extensions != nil {
			body["extensions"] = extensions
		}
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, base+"/graphql", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", addr)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var bomb strings.Builder
	bomb.WriteString(`{ viewer { ...F0 } } `)
	for i := range 40 {
		fmt.Fprintf(&bomb, "fragment F%d on User { ...F%d ...F%d } ", i, i+1, i+1)
	}
	bomb.WriteString("fragment F40 on User { handle }")
	schema := `__schema { types { name fields { name args { name } type { name ofType { name } } } } }`
	kinds := map[string]func(i int){
		"aliased logIns": func(i int) {
			hostile(fmt.Sprintf("198.51.100.%d", i%200), "", `mutation { `+aliased(100, `logIn(input: {handle: "victim", password: "guess"}) { token }`)+` }`, nil)
		},
		"aliased posts": func(i int) {
			hostile("198.51.100.1", attacker.Token, `mutation { `+aliased(10, `postMessage(input: {text: "spam"}) { id }`)+` }`, nil)
		},
		"two schemas":    func(i int) { hostile("198.51.100.2", "", `{ a: `+schema+` b: `+schema+` }`, nil) },
		"fragment bombs": func(i int) { hostile("198.51.100.3", "", bomb.String(), nil) },
		"token floods":   func(i int) { hostile("198.51.100.4", "", `{ viewer { `+strings.Repeat("id ", 5000)+` } }`, nil) },
		"scanning counts": func(i int) {
			hostile("198.51.100.5", "", `{ `+aliased(20, `usersByAttribute(name: "plan", value: "pro") { totalCount }`)+` }`, nil)
		},
		"APQ mismatches": func(i int) {
			hostile("198.51.100.6", "", `{ viewer { id } }`, map[string]any{"persistedQuery": map[string]any{"version": 1, "sha256Hash": strings.Repeat("a", 64)}})
		},
		"blank posts": func(i int) {
			hostile("198.51.100.7", attacker.Token, `mutation { postMessage(input: {text: "\u200b\u200b"}) { id } }`, nil)
		},
		"forged tokens":   func(i int) { hostile("198.51.100.8", "not.a.token", `{ viewer { id } }`, nil) },
		"tampered tokens": func(i int) { hostile("198.51.100.9", victim.Token+"x", `{ inbox { totalCount } }`, nil) },
		"legacy duplicate starts": func(i int) {
			c := hostileWS(t, base, "graphql-ws", attacker.Token)
			if c == nil {
				return
			}
			defer c.Close()
			for range 50 {
				_ = c.WriteJSON(map[string]any{"type": "start", "id": "1", "payload": map[string]any{"query": "subscription { inboxEvents { type } }"}})
			}
			drain(c, 5*time.Second) // until the server closes it: 4409
		},
		"subscription floods": func(i int) {
			c := hostileWS(t, base, "graphql-transport-ws", attacker.Token)
			if c == nil {
				return
			}
			defer c.Close()
			for id := range 50 {
				_ = c.WriteJSON(map[string]any{"type": "subscribe", "id": strconv.Itoa(id), "payload": map[string]any{"query": "subscription { inboxEvents { type } }"}})
			}
			drain(c, 200*time.Millisecond) // 30 refusals, then the client leaves
		},
		"unknown subprotocols": func(i int) {
			if c := hostileWS(t, base, "graphql-whatever", ""); c != nil {
				drain(c, 5*time.Second) // 4406
				c.Close()
			}
		},
		"stalled bodies": func(i int) {
			c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
			if err != nil {
				return
			}
			defer c.Close()
			_, _ = io.WriteString(c, "POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.Copy(io.Discard, c) // until the server closes it
		},
	}
	const perKind, workers = 200, 16
	for name, send := range kinds {
		start := time.Now()
		next := make(chan int)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range next {
					send(i)
				}
			})
		}
		for i := range perKind {
			next <- i
		}
		close(next)
		wg.Wait()
		t.Logf("%d %s: %v", perKind, name, time.Since(start).Round(time.Millisecond))
	}
	client.CloseIdleConnections()

	// Back near the baseline: what the attacks held is released.
	assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= baseG+5 }, 10*time.Second, 50*time.Millisecond,
		"goroutines: %d before, %d after", baseG, runtime.NumGoroutine())
	assert.Eventually(t, func() bool { return openFDs(t) <= baseFD+2 }, 10*time.Second, 50*time.Millisecond,
		"open files and connections: %d before, %d after", baseFD, openFDs(t))
	heap := heapAfterGC()
	t.Logf("heap: %d KiB before, %d KiB after", baseHeap>>10, heap>>10)
	assert.Less(t, heap, baseHeap+32<<20, "memory is back near its baseline")

	// The attacker bought nothing: 20 posts (the burst) at most, and the
	// victim's password was never guessed.
	d := servertest.MustGQL(t, base, attacker.Token, `{ viewer { messageCount } }`, nil)
	assert.LessOrEqual(t, d["viewer"].(map[string]any)["messageCount"], float64(20))
	// And a normal user, from another address, is served.
	_, r := postJSON(t, base, map[string]any{"query": `mutation { logIn(input: {handle: "victim", password: "correct horse"}) { token } }`}, map[string]string{"X-Forwarded-For": "203.0.113.5"})
	require.Empty(t, r.Errors, "the victim can still log in: failed guesses stopped at the limit per handle, but successes are not charged")
	servertest.MustPost(t, base, victim, "still here")
	servertest.MustGQL(t, base, victim.Token, `{ inbox(first: 10) { totalCount edges { node { text } } } }`, nil)
}
