package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
)

// limitedResult is what a client sees of an operation that may be rate
// limited: the status, Retry-After and the first error's code and
// extensions.retryAfter.
type limitedResult struct {
	Status     int
	RetryAfter string
	Code       string
	Wait       int
	HasData    bool
}

// limitedDo posts query, with a token and X-Forwarded-For when not empty.
func limitedDo(t *testing.T, base, accept, token, xff, query string) limitedResult {
	t.Helper()
	h := map[string]string{"Content-Type": "application/json", "Accept": accept}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	if xff != "" {
		h["X-Forwarded-For"] = xff
	}
	b, err := json.Marshal(map[string]any{"query": query})
	require.NoError(t, err)
	resp, body := corsDo(t, base, http.MethodPost, h, string(b))
	var out struct {
		Data   json.RawMessage
		Errors []struct {
			Extensions struct {
				Code       string
				RetryAfter int
			}
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &out), body)
	r := limitedResult{Status: resp.StatusCode, RetryAfter: resp.Header.Get("Retry-After"), HasData: out.Data != nil}
	if len(out.Errors) > 0 {
		r.Code, r.Wait = out.Errors[0].Extensions.Code, out.Errors[0].Extensions.RetryAfter
	}
	return r
}

const gqlResponseType = "application/graphql-response+json"

func signUpQuery(handle string) string {
	return `mutation { signUp(input: {handle: "` + handle + `", password: "correct horse"}) { token } }`
}

// Through the whole stack, the peer's address has a bucket: after two
// sign-ups from 127.0.0.1 the third is refused with RATE_LIMITED, 429 and
// Retry-After (200 and Retry-After with application/json); queries go on.
func TestRateLimit_Address(t *testing.T) {
	srv := newTestServer(t, func(c *config) {
		c.RateLimitUser = graph.Rate{}
		c.RateLimitAddress = graph.Rate{Count: 1, Per: time.Hour, Burst: 2}
	})
	mustSignUp(t, srv.URL, "alice")
	mustSignUp(t, srv.URL, "bob")

	r := limitedDo(t, srv.URL, gqlResponseType, "", "", signUpQuery("carol"))
	assert.Equal(t, limitedResult{Status: http.StatusTooManyRequests, RetryAfter: "3600", Code: graph.CodeRateLimited, Wait: 3600}, r)
	r = limitedDo(t, srv.URL, "application/json", "", "", signUpQuery("carol"))
	assert.Equal(t, limitedResult{Status: http.StatusOK, RetryAfter: "3600", Code: graph.CodeRateLimited, Wait: 3600}, r)

	d := mustGQL(t, srv.URL, "", `{ user(handle: "carol") { id } }`, nil)
	assert.Nil(t, d["user"], "queries are not limited; carol was never signed up")
}

// Per user, over HTTP and over the websocket alike: a mutation sent as a
// graphql-transport-ws subscribe message takes a token from the same
// bucket, and one over the limit gets an "error" message for its id, with
// the connection left open.
func TestRateLimit_UserWebsocket(t *testing.T) {
	srv := newTestServer(t, func(c *config) {
		c.RateLimitUser = graph.Rate{Count: 1, Per: time.Hour, Burst: 2}
		c.RateLimitAddress = graph.Rate{}
	})
	alice := mustSignUp(t, srv.URL, "alice")
	bob := mustSignUp(t, srv.URL, "bob")
	mustGQL(t, srv.URL, alice.Token, `mutation { markInboxRead }`, nil)

	c := protoAcked(t, srv, alice)
	mutation := map[string]any{"query": "mutation { markInboxRead }"}
	c.send("subscribe", "1", mutation)
	m := c.mustRead(5 * time.Second)
	assert.Equal(t, "next", m.Type, "%s", m.Payload)
	assert.Equal(t, "complete", c.mustRead(5*time.Second).Type)

	c.send("subscribe", "2", mutation)
	m = c.mustRead(5 * time.Second)
	require.Equal(t, "error", m.Type, "%s", m.Payload)
	assert.Equal(t, "2", m.ID)
	var errs []struct {
		Extensions map[string]any `json:"extensions"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &errs))
	require.NotEmpty(t, errs)
	assert.Equal(t, graph.CodeRateLimited, errs[0].Extensions["code"])
	assert.EqualValues(t, 3600, errs[0].Extensions["retryAfter"])

	c.send("subscribe", "3", map[string]any{"query": "{ viewer { handle } }"})
	m = c.mustRead(5 * time.Second)
	assert.Equal(t, "next", m.Type, "queries are not limited: %s", m.Payload)
	assert.JSONEq(t, `{"data":{"viewer":{"handle":"alice"}}}`, string(m.Payload))

	r := limitedDo(t, srv.URL, gqlResponseType, alice.Token, "", `mutation { markInboxRead }`)
	assert.Equal(t, http.StatusTooManyRequests, r.Status)
	r = limitedDo(t, srv.URL, gqlResponseType, bob.Token, "", `mutation { markInboxRead }`)
	assert.Equal(t, http.StatusOK, r.Status, "bob has a bucket of his own")
	assert.Empty(t, r.Code)
}

// Behind a trusted proxy the client is the rightmost X-Forwarded-For entry
// that is not a trusted proxy, so clients behind it have buckets of their
// own and cannot pick another's by writing the header themselves. Without
// -trusted-proxies the header is ignored.
func TestRateLimit_TrustedProxies(t *testing.T) {
	limits := func(c *config) {
		c.RateLimitUser = graph.Rate{}
		c.RateLimitAddress = graph.Rate{Count: 1, Per: time.Hour, Burst: 1}
	}
	mark := `mutation { markInboxRead }` // anonymous: UNAUTHENTICATED once it runs

	t.Run("Trusted", func(t *testing.T) {
		srv := newTestServer(t, func(c *config) {
			limits(c)
			c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		})
		assert.Equal(t, "UNAUTHENTICATED", limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.5", mark).Code)
		assert.Equal(t, graph.CodeRateLimited, limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.5", mark).Code)
		assert.Equal(t, graph.CodeRateLimited, limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.6, 203.0.113.5", mark).Code,
			"the entries left of the client's are the client's own words")
		assert.Equal(t, "UNAUTHENTICATED", limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.6", mark).Code)
		assert.Equal(t, "UNAUTHENTICATED", limitedDo(t, srv.URL, gqlResponseType, "", "", mark).Code, "the proxy itself")
	})
	t.Run("NotTrusted", func(t *testing.T) {
		srv := newTestServer(t, limits)
		assert.Equal(t, "UNAUTHENTICATED", limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.5", mark).Code)
		assert.Equal(t, graph.CodeRateLimited, limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.6", mark).Code,
			"all from 127.0.0.1, whatever the header says")
	})
}

// TestClientAddr covers the choice of the client address, one rule per case.
func TestClientAddr(t *testing.T) {
	trusted, err := parseTrustedProxies("10.0.0.0/8, 192.0.2.7, fd00::/8")
	require.NoError(t, err)
	for _, tt := range []struct {
		name, remote string
		xff          []string
		trusted      []netip.Prefix
		want         string // "" when no address
	}{
		{"Peer", "198.51.100.1:5000", nil, nil, "198.51.100.1"},
		{"PeerIPv6", "[2001:db8::1]:5000", nil, nil, "2001:db8::1"},
		{"PeerMapped", "[::ffff:198.51.100.1]:5000", nil, nil, "198.51.100.1"},
		{"NoPeer", "@", nil, nil, ""},
		{"HeaderIgnoredWithoutTrust", "198.51.100.1:5000", []string{"203.0.113.5"}, nil, "198.51.100.1"},
		{"HeaderIgnoredFromUntrustedPeer", "198.51.100.1:5000", []string{"203.0.113.5"}, trusted, "198.51.100.1"},
		{"FromTrustedPeer", "10.1.2.3:5000", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"SingleAddressTrusted", "192.0.2.7:5000", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"NeighbourNotTrusted", "192.0.2.8:5000", []string{"203.0.113.5"}, trusted, "192.0.2.8"},
		{"RightmostUntrusted", "10.1.2.3:5000", []string{"203.0.113.9, 203.0.113.5, 10.9.9.9"}, trusted, "203.0.113.5"},
		{"SeveralHeaders", "10.1.2.3:5000", []string{"203.0.113.9", "203.0.113.5", "10.9.9.9"}, trusted, "203.0.113.5"},
		{"WithPorts", "10.1.2.3:5000", []string{"[2001:db8::5]:443, 10.9.9.9:80"}, trusted, "2001:db8::5"},
		{"IPv6Proxy", "[fd00::1]:5000", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"AllTrusted", "10.1.2.3:5000", []string{"10.0.0.1, 10.0.0.2"}, trusted, "10.0.0.1"},
		{"GarbageStopsAtLastTrusted", "10.1.2.3:5000", []string{"203.0.113.5, unknown, 10.0.0.2"}, trusted, "10.0.0.2"},
		{"EmptyHeader", "10.1.2.3:5000", []string{""}, trusted, "10.1.2.3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/graphql", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, ok := clientAddr(r, tt.trusted)
			if tt.want == "" {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, netip.MustParseAddr(tt.want), got)
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := parseTrustedProxies(" 10.0.0.0/8 ,192.0.2.7,, 2001:db8::/32, 10.1.2.3/16, ::ffff:192.0.2.9")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("192.0.2.9/32"),
	}, got)
	empty, err := parseTrustedProxies("")
	require.NoError(t, err)
	assert.Empty(t, empty)
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0", "::ffff:10.0.0.0/104"} {
		_, err := parseTrustedProxies(bad)
		assert.Error(t, err, bad)
	}
}

// A batch goes through the whole stack: at most -max-batch operations, and
// the body limit applies to the batch as a whole.
func TestBatch_Stack(t *testing.T) {
	srv := newTestServer(t, func(c *config) {
		c.MaxBatch = 2
		c.MaxBodyBytes = 200
	})
	h := map[string]string{"Content-Type": "application/json", "Accept": gqlResponseType}
	q := `{"query":"{ __typename }"}`

	resp, body := corsDo(t, srv.URL, http.MethodPost, h, "["+q+","+q+"]")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `[{"data":{"__typename":"Query"}},{"data":{"__typename":"Query"}}]`, body)

	resp, body = corsDo(t, srv.URL, http.MethodPost, h, "["+q+","+q+","+q+"]")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body, graph.CodeBatchTooLarge)

	pad := `{"query":"{ __typename }` + strings.Repeat(" ", 100) + `"}`
	require.Less(t, len(pad), 200)
	resp, _ = corsDo(t, srv.URL, http.MethodPost, h, "["+pad+","+pad+"]")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
}

// Behind a trusted proxy the access log names the client the rate limiter
// keys on, beside the proxy that sent the request.
func TestAccessLog_ClientBehindProxy(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	trusted, err := parseTrustedProxies("10.0.0.0/8")
	require.NoError(t, err)
	h := accessLogMiddleware(log, trusted, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.RemoteAddr = "10.1.2.3:4567"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	h.ServeHTTP(httptest.NewRecorder(), req)
	var rec struct{ Remote, Client string }
	require.NoError(t, json.Unmarshal(logs.Bytes(), &rec), logs.String())
	assert.Equal(t, "10.1.2.3:4567", rec.Remote)
	assert.Equal(t, "203.0.113.9", rec.Client)
}
