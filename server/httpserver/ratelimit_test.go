package httpserver_test

import (
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/server/internal/servertest"
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
	srv := servertest.New(t, func(c *servertest.Config) {
		c.RateLimitUser = graph.Rate{}
		c.RateLimitAddress = graph.Rate{Count: 1, Per: time.Hour, Burst: 2}
	})
	servertest.MustSignUp(t, srv.URL, "alice")
	servertest.MustSignUp(t, srv.URL, "bob")

	r := limitedDo(t, srv.URL, gqlResponseType, "", "", signUpQuery("carol"))
	assert.Equal(t, limitedResult{Status: http.StatusTooManyRequests, RetryAfter: "3600", Code: graph.CodeRateLimited, Wait: 3600}, r)
	r = limitedDo(t, srv.URL, "application/json", "", "", signUpQuery("carol"))
	assert.Equal(t, limitedResult{Status: http.StatusOK, RetryAfter: "3600", Code: graph.CodeRateLimited, Wait: 3600}, r)

	d := servertest.MustGQL(t, srv.URL, "", `{ user(handle: "carol") { id } }`, nil)
	assert.Nil(t, d["user"], "queries are not limited; carol was never signed up")
}

// Per user, over HTTP and over the websocket alike: a mutation sent as a
// graphql-transport-ws subscribe message takes a token from the same
// bucket, and one over the limit gets an "error" message for its id, with
// the connection left open.
func TestRateLimit_UserWebsocket(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) {
		c.RateLimitUser = graph.Rate{Count: 1, Per: time.Hour, Burst: 2}
		c.RateLimitAddress = graph.Rate{}
	})
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	servertest.MustGQL(t, srv.URL, alice.Token, `mutation { markInboxRead }`, nil)

	c := servertest.Acked(t, srv, alice)
	mutation := map[string]any{"query": "mutation { markInboxRead }"}
	c.Send("subscribe", "1", mutation)
	m := c.MustRead(5 * time.Second)
	assert.Equal(t, "next", m.Type, "%s", m.Payload)
	assert.Equal(t, "complete", c.MustRead(5*time.Second).Type)

	c.Send("subscribe", "2", mutation)
	m = c.MustRead(5 * time.Second)
	require.Equal(t, "error", m.Type, "%s", m.Payload)
	assert.Equal(t, "2", m.ID)
	var errs []struct {
		Extensions map[string]any `json:"extensions"`
	}
	require.NoError(t, json.Unmarshal(m.Payload, &errs))
	require.NotEmpty(t, errs)
	assert.Equal(t, graph.CodeRateLimited, errs[0].Extensions["code"])
	assert.EqualValues(t, 3600, errs[0].Extensions["retryAfter"])

	c.Send("subscribe", "3", map[string]any{"query": "{ viewer { handle } }"})
	m = c.MustRead(5 * time.Second)
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
	limits := func(c *servertest.Config) {
		c.RateLimitUser = graph.Rate{}
		c.RateLimitAddress = graph.Rate{Count: 1, Per: time.Hour, Burst: 1}
	}
	mark := `mutation { markInboxRead }` // anonymous: UNAUTHENTICATED once it runs

	t.Run("Trusted", func(t *testing.T) {
		srv := servertest.New(t, func(c *servertest.Config) {
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
		srv := servertest.New(t, limits)
		assert.Equal(t, "UNAUTHENTICATED", limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.5", mark).Code)
		assert.Equal(t, graph.CodeRateLimited, limitedDo(t, srv.URL, gqlResponseType, "", "203.0.113.6", mark).Code,
			"all from 127.0.0.1, whatever the header says")
	})
}

// A batch goes through the whole stack: at most -max-batch operations, and
// the body limit applies to the batch as a whole.
func TestBatch_Stack(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) {
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
