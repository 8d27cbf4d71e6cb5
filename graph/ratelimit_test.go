package graph_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/store"
)

// manualClock is a clock that moves only when told.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// withClientAddr stands in for the server's client address middleware: the
// request's RemoteAddr is the client.
func withClientAddr(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ap := netip.MustParseAddrPort(r.RemoteAddr)
		next.ServeHTTP(w, r.WithContext(graph.NewContextWithClientAddr(r.Context(), ap.Addr())))
	})
}

// rateEnv is a server with rate limits on a manual clock; fixtures made
// through e.client carry no address and are charged to no address bucket.
func rateEnv(t *testing.T, limits graph.RateLimits) (*env, http.Handler, *manualClock) {
	t.Helper()
	clk := &manualClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	limits.Now = clk.Now
	e := newEnv(t, func(c *graph.Config) { c.RateLimits = limits })
	return e, withClientAddr(withViewer(e.tokens, e.srv)), clk
}

// rlPost posts body from the client address remote ("ip:port"), as the
// token's user when token is not empty.
func rlPost(t *testing.T, h http.Handler, accept, token, remote, body string) httpResult {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(body))
	req.RemoteAddr = remote
	req.Header.Set("Content-Type", mtJSON)
	req.Header.Set("Accept", accept)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return serveReq(t, h, req)
}

// retryAfterExt returns the first error's extensions.retryAfter.
func retryAfterExt(t *testing.T, r httpResult) int {
	t.Helper()
	var errs []struct {
		Extensions struct {
			RetryAfter int `json:"retryAfter"`
		} `json:"extensions"`
	}
	require.NoError(t, json.Unmarshal(r.Body["errors"], &errs), r.Raw)
	require.NotEmpty(t, errs)
	return errs[0].Extensions.RetryAfter
}

// requireOK requires an executed operation without errors.
func requireOK(t *testing.T, r httpResult, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status, msgAndArgs...)
	require.True(t, r.hasData(), r.Raw)
	require.NotContains(t, r.Body, "errors", r.Raw)
}

// requireLimited requires a RATE_LIMITED request error that says to wait
// retryAfter seconds, in the body and in Retry-After: 429 with
// application/graphql-response+json, 200 with application/json.
func requireLimited(t *testing.T, r httpResult, accept string, retryAfter int) {
	t.Helper()
	want := http.StatusTooManyRequests
	if accept == mtJSON {
		want = http.StatusOK
	}
	require.Equal(t, want, r.Status, r.Raw)
	assert.Equal(t, accept+"; charset=utf-8", r.ContentType)
	assert.False(t, r.hasData(), "refused before it ran: %s", r.Raw)
	assert.Equal(t, graph.CodeRateLimited, r.code(t))
	assert.Equal(t, retryAfter, retryAfterExt(t, r))
	assert.Equal(t, strconv.Itoa(retryAfter), r.Header.Get("Retry-After"))
}

const markRead = `{"query":"mutation { markInboxRead }"}`

func signUpBody(handle string) string {
	return `{"query":"mutation { signUp(input: {handle: \"` + handle + `\", password: \"correct-horse\"}) { token } }"}`
}

// Each signed-in user has a bucket: 2 mutations at once, then one per 30
// minutes. The third is refused before it runs; other users and queries are
// not affected; the bucket refills with time.
func TestRateLimit_PerUser(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, clk := rateEnv(t, graph.RateLimits{User: graph.Rate{Count: 2, Per: time.Hour, Burst: 2}})
		alice, _ := mustSignUp(t, e, "alice")
		bob, _ := mustSignUp(t, e, "bob")
		const addr = "192.0.2.1:1234"

		requireOK(t, rlPost(t, h, mtGQL, alice, addr, markRead))
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, markRead))
		requireLimited(t, rlPost(t, h, mtGQL, alice, addr, markRead), mtGQL, 1800)
		requireLimited(t, rlPost(t, h, mtJSON, alice, addr, markRead), mtJSON, 1800)
		requireLimited(t, rlPost(t, h, mtGQL, alice, "198.51.100.9:1", markRead), mtGQL, 1800)

		requireOK(t, rlPost(t, h, mtGQL, bob, addr, markRead), "another user has a bucket of their own")
		for range 5 {
			requireOK(t, rlPost(t, h, mtGQL, alice, addr, `{"query":"{ viewer { handle } }"}`), "queries are never limited")
		}

		clk.Advance(29 * time.Minute)
		requireLimited(t, rlPost(t, h, mtGQL, alice, addr, markRead), mtGQL, 60)
		clk.Advance(time.Minute)
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, markRead), "a token is back after 30 minutes")
		requireLimited(t, rlPost(t, h, mtGQL, alice, addr, markRead), mtGQL, 1800)
	})
}

// Each client address has a bucket, signed in or not, so signUp and logIn
// are limited; an IPv6 address shares its /64's bucket, an IPv4-mapped one
// its IPv4 address's.
func TestRateLimit_PerAddress(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		_, h, clk := rateEnv(t, graph.RateLimits{Address: graph.Rate{Count: 1, Per: time.Minute, Burst: 2}})
		const a = "192.0.2.1:1000"

		requireOK(t, rlPost(t, h, mtGQL, "", a, signUpBody("addr_1")))
		requireOK(t, rlPost(t, h, mtGQL, "", "192.0.2.1:2000", signUpBody("addr_2")), "another port is the same address")
		requireLimited(t, rlPost(t, h, mtGQL, "", a, signUpBody("addr_3")), mtGQL, 60)
		requireLimited(t, rlPost(t, h, mtJSON, "", a, `{"query":"mutation { logIn(input: {handle: \"addr_1\", password: \"correct-horse\"}) { token } }"}`), mtJSON, 60)
		requireLimited(t, rlPost(t, h, mtGQL, "", "[::ffff:192.0.2.1]:3000", signUpBody("addr_3")), mtGQL, 60)
		r := rlPost(t, h, mtGQL, "", a, `{"query":"{ user(handle: \"addr_3\") { id } }"}`)
		requireOK(t, r, "queries are never limited")
		assert.JSONEq(t, `{"user":null}`, string(r.Body["data"]), "the refused signUp did not run")

		requireOK(t, rlPost(t, h, mtGQL, "", "192.0.2.2:1000", signUpBody("addr_4")), "another address has a bucket of its own")

		requireOK(t, rlPost(t, h, mtGQL, "", "[2001:db8:1:2::1]:1", signUpBody("v6_1")))
		requireOK(t, rlPost(t, h, mtGQL, "", "[2001:db8:1:2::2]:1", signUpBody("v6_2")))
		requireLimited(t, rlPost(t, h, mtGQL, "", "[2001:db8:1:2:ffff:ffff:ffff:ffff]:1", signUpBody("v6_3")), mtGQL, 60)
		requireOK(t, rlPost(t, h, mtGQL, "", "[2001:db8:1:3::1]:1", signUpBody("v6_4")), "another /64")

		clk.Advance(time.Minute)
		requireOK(t, rlPost(t, h, mtGQL, "", a, signUpBody("addr_3")), "refilled")
		requireLimited(t, rlPost(t, h, mtGQL, "", a, markRead), mtGQL, 60)
	})
}

// A mutation refused by one bucket takes no token from the other: alice's
// refused mutations leave the address's tokens for bob.
func TestRateLimit_RefusedCostsNothing(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, _ := rateEnv(t, graph.RateLimits{
			User:    graph.Rate{Count: 1, Per: time.Hour, Burst: 1},
			Address: graph.Rate{Count: 1, Per: time.Hour, Burst: 2},
		})
		alice, _ := mustSignUp(t, e, "alice")
		bob, _ := mustSignUp(t, e, "bob")
		const addr = "192.0.2.1:1"

		requireOK(t, rlPost(t, h, mtGQL, alice, addr, markRead))
		for range 3 {
			r := rlPost(t, h, mtGQL, alice, addr, markRead)
			requireLimited(t, r, mtGQL, 3600)
			assert.Contains(t, r.Raw, "by this user")
		}
		requireOK(t, rlPost(t, h, mtGQL, bob, addr, markRead), "the address still had a token")
		r := rlPost(t, h, mtGQL, bob, addr, markRead)
		requireLimited(t, r, mtGQL, 3600)
		assert.Contains(t, r.Raw, "from this address")
	})
}

// In a batch each mutation takes its own token: the one over the limit is
// refused in place, the batch stays 200, and Retry-After says how long to
// wait.
func TestRateLimit_Batch(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, _ := rateEnv(t, graph.RateLimits{User: graph.Rate{Count: 2, Per: time.Minute, Burst: 2}})
		alice, _ := mustSignUp(t, e, "alice")
		for _, accept := range []string{mtGQL, mtJSON} {
			req := httptest.NewRequest(http.MethodPost, "/graphql", strings.NewReader(`[`+markRead+`,{"query":"{ __typename }"},`+markRead+`,`+markRead+`]`))
			req.RemoteAddr = "192.0.2.1:1"
			req.Header.Set("Content-Type", mtJSON)
			req.Header.Set("Accept", accept)
			req.Header.Set("Authorization", "Bearer "+alice)
			res := serveReq(t, h, req)
			assert.Equal(t, http.StatusOK, res.Status)
			assert.Equal(t, "30", res.Header.Get("Retry-After"))
			var elems []batchElem
			require.NoError(t, json.Unmarshal([]byte(res.Raw), &elems), res.Raw)
			require.Len(t, elems, 4)
			if accept == mtGQL {
				assert.Contains(t, elems[0], "data")
				assert.NotContains(t, elems[0], "errors")
				assert.NotContains(t, elems[2], "errors")
			} else {
				assert.Equal(t, graph.CodeRateLimited, elems[0].code(t), "the bucket is still empty")
				assert.Equal(t, graph.CodeRateLimited, elems[2].code(t))
			}
			assert.JSONEq(t, `{"__typename":"Query"}`, string(elems[1]["data"]))
			assert.NotContains(t, elems[3], "data")
			assert.Equal(t, graph.CodeRateLimited, elems[3].code(t))
		}
	})
}

// Each root mutation field takes a token, however the fields are named or
// spread: aliases and fragments buy nothing.
func TestRateLimit_PerRootField(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, clk := rateEnv(t, graph.RateLimits{User: graph.Rate{Count: 5, Per: time.Minute, Burst: 5}})
		alice, _ := mustSignUp(t, e, "alice")
		const addr = "192.0.2.1:1"
		three := `{"query":"mutation { a: markInboxRead b: markInboxRead ...M } fragment M on Mutation { c: markInboxRead }"}`
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, three))
		r := rlPost(t, h, mtGQL, alice, addr, three)
		requireLimited(t, r, mtGQL, 12)
		assert.Contains(t, r.Raw, "too much mutations by this user")
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, `{"query":"mutation { a: markInboxRead b: markInboxRead }"}`), "two tokens were left")
		clk.Advance(time.Minute)
		r = rlPost(t, h, mtGQL, alice, addr, `{"query":"mutation { `+aliases(6, "markInboxRead")+` }"}`)
		assert.Equal(t, graph.CodeRateLimited, r.code(t), "more than the burst can never pass")
		assert.Contains(t, r.Raw, "costs 6 in mutations, more than may be spent at once")
	})
}

// A query costs its complexity in points of the query buckets.
func TestRateLimit_QueryCost(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, clk := rateEnv(t, graph.RateLimits{
			QueryUser:    graph.Rate{Count: 100, Per: time.Minute, Burst: 100},
			QueryAddress: graph.Rate{Count: 150, Per: time.Minute, Burst: 150},
		})
		alice, _ := mustSignUp(t, e, "alice")
		bob, _ := mustSignUp(t, e, "bob")
		const addr = "192.0.2.1:1"
		// user 1 + followers (1 + 20 × (edges 1 + node 1 + handle 1)) = 62.
		page := `{"query":"{ user(handle: \"alice\") { followers { edges { node { handle } } } } }"}`
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, page))
		r := rlPost(t, h, mtGQL, alice, addr, page)
		requireLimited(t, r, mtGQL, 15) // (62 - 38 left) / (100/60 a second)
		assert.Contains(t, r.Raw, "too much query cost by this user")
		for range 3 {
			requireOK(t, rlPost(t, h, mtGQL, alice, addr, `{"query":"{ viewer { handle } }"}`), "cheap queries fit in what is left")
		}
		requireOK(t, rlPost(t, h, mtGQL, bob, addr, page), "bob has his own bucket")
		// The address paid 62 + 3×2 + 62 of its 150: 62 more lack 42,
		// which take 16.8 s at 150 a minute.
		r = rlPost(t, h, mtGQL, "", addr, page)
		requireLimited(t, r, mtGQL, 17)
		assert.Contains(t, r.Raw, "from this address")
		clk.Advance(time.Minute)
		requireOK(t, rlPost(t, h, mtGQL, alice, addr, page))
	})
}

// Failed logIns are counted per handle, from any address; a success
// costs nothing, and the limit holds even for the right password.
func TestRateLimit_LogInFailures(t *testing.T) {
	t.Run(backendEmbedded, func(t *testing.T) {
		e, h, clk := rateEnv(t, graph.RateLimits{LogInFailures: graph.Rate{Count: 1, Per: time.Minute, Burst: 3}})
		mustSignUp(t, e, "alice")
		logIn := func(handle, password string) string {
			return `{"query":"mutation { logIn(input: {handle: \"` + handle + `\", password: \"` + password + `\"}) { token } }"}`
		}
		for i := range 3 {
			r := rlPost(t, h, mtGQL, "", fmt.Sprintf("192.0.2.%d:1", i+1), logIn("alice", "wrong-password"))
			assert.Equal(t, store.EUNAUTHENTICATED, r.code(t))
		}
		r := rlPost(t, h, mtGQL, "", "198.51.100.1:1", logIn("ALICE", "password123"))
		assert.Equal(t, graph.CodeRateLimited, r.code(t), "the right password from a new address, after 3 failures")
		assert.Equal(t, 60, retryAfterExt(t, r))
		assert.True(t, r.hasData(), "refused as it runs: a field error")
		assert.Equal(t, store.EUNAUTHENTICATED, rlPost(t, h, mtGQL, "", "198.51.100.1:1", logIn("bob_x", "wrong-password")).code(t), "other handles go on")
		clk.Advance(time.Minute)
		for range 3 {
			requireOK(t, rlPost(t, h, mtGQL, "", "198.51.100.1:1", logIn("alice", "password123")), "successes take no token")
		}
	})
}

// ParseRate reads COUNT/PERIOD[,burst=N]; String writes it back.
func TestParseRate(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    graph.Rate
		str     string
		wantErr string
	}{
		{in: "60/m,burst=20", want: graph.Rate{Count: 60, Per: time.Minute, Burst: 20}, str: "60/m,burst=20"},
		{in: " 10/s ", want: graph.Rate{Count: 10, Per: time.Second, Burst: 10}, str: "10/s"},
		{in: "100/h", want: graph.Rate{Count: 100, Per: time.Hour, Burst: 100}, str: "100/h"},
		{in: "5/10s, burst=1", want: graph.Rate{Count: 5, Per: 10 * time.Second, Burst: 1}, str: "5/10s,burst=1"},
		{in: "3/1m30s", want: graph.Rate{Count: 3, Per: 90 * time.Second, Burst: 3}, str: "3/1m30s"},
		{in: "0", want: graph.Rate{}, str: "0"},
		{in: "off", want: graph.Rate{}, str: "0"},
		{in: "", wantErr: "no /"},
		{in: "60", wantErr: "no /"},
		{in: "0/m", wantErr: "COUNT"},
		{in: "-1/m", wantErr: "COUNT"},
		{in: "x/m", wantErr: "COUNT"},
		{in: "60/d", wantErr: "PERIOD"},
		{in: "60/0s", wantErr: "PERIOD"},
		{in: "60/m,20", wantErr: "burst=N"},
		{in: "60/m,burst=0", wantErr: "burst"},
		{in: "60/m,burst=many", wantErr: "burst"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := graph.ParseRate(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.str, got.String())
			again, err := graph.ParseRate(got.String())
			require.NoError(t, err)
			assert.Equal(t, got, again)
		})
	}
}
