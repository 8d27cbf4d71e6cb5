package metrics_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"herald/server/internal/servertest"
	"herald/server/metrics"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMetrics_Scenario drives a server through sign-ups, follows, posts, a
// named query, refused operations and a subscription, and checks what
// /metrics says of each.
func TestMetrics_Scenario(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxDepth = 3 })
	base := srv.URL
	s0 := servertest.Scrape(t, base)
	for _, name := range []string{"go_goroutines", "process_open_fds", "herald_fanout_jobs_queued", "herald_websocket_connections", "herald_subscriptions"} {
		assert.Contains(t, s0, name)
	}
	assert.Zero(t, s0.Value("herald_fanout_deliveries_total"))

	alice := servertest.MustSignUp(t, base, "alice")
	bob := servertest.MustSignUp(t, base, "bob")
	carol := servertest.MustSignUp(t, base, "carol")
	servertest.MustFollow(t, base, bob, alice)
	servertest.MustFollow(t, base, carol, alice)
	servertest.WaitIdle(t, srv.Svc)
	servertest.MustPost(t, base, alice, "hello")
	servertest.WaitIdle(t, srv.Svc)

	servertest.MustGQL(t, base, alice.Token, `query Me { viewer { handle } }`, nil)
	servertest.MustGQL(t, base, alice.Token, `query Me { viewer { id } }`, nil)
	servertest.MustGQL(t, base, alice.Token, `query Nobody { user(handle: "nobody") { id } }`, nil)
	// Refused before execution: too deep, under a name already known; then
	// a field the schema lacks and a document that does not parse, whose
	// name and type are unknown (the request gives no operationName).
	r := servertest.GQL(t, base, alice.Token, deepQuery("Me"), nil)
	require.NotEmpty(t, r.Errors)
	require.Nil(t, r.Data)
	r = servertest.GQL(t, base, alice.Token, `query Me { nope }`, nil)
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", r.Code())
	r = servertest.GQL(t, base, alice.Token, `{`, nil)
	require.Equal(t, "GRAPHQL_PARSE_FAILED", r.Code())
	// Executed with an error: a page too large, refused by the resolver.
	r = servertest.GQL(t, base, alice.Token, `query Who { inbox(first: 500) { __typename } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", r.Code())

	s1 := servertest.Scrape(t, base)
	// 3 sign-ups, 2 follows, 1 post: all anonymous mutations.
	assert.Equal(t, 6.0, s1.Op("anonymous", "mutation", "ok"))
	assert.Equal(t, uint64(6), s1.Samples("herald_graphql_operation_duration_seconds", "operation=anonymous", "type=mutation"))
	assert.Equal(t, 2.0, s1.Op("Me", "query", "ok"))
	assert.Equal(t, 1.0, s1.Op("Me", "query", "refused"))
	assert.Equal(t, uint64(2), s1.Samples("herald_graphql_operation_duration_seconds", "operation=Me", "type=query"),
		"refused operations are not timed")
	assert.Equal(t, 2.0, s1.Op("anonymous", "unknown", "refused"))
	assert.Equal(t, 1.0, s1.Op("Nobody", "query", "ok"))
	assert.Equal(t, 1.0, s1.Op("Who", "query", "error"))
	assert.Zero(t, s1.Op("Who", "query", "ok"))

	assert.Equal(t, 3.0, s1.Value("herald_store_calls_total", "method=CreateUser", "outcome=ok"))
	assert.Equal(t, 1.0, s1.Value("herald_store_calls_total", "method=CreateMessage", "outcome=ok"))
	assert.Equal(t, uint64(1), s1.Samples("herald_store_call_duration_seconds", "method=CreateMessage"))
	assert.Equal(t, 1.0, s1.Value("herald_store_calls_total", "method=FindUserByHandle", "outcome=not_found"))
	assert.Equal(t, 1.0, s1.Value("herald_store_calls_total", "method=DeliverInboxes", "outcome=ok"), "the post's delivery, stored as a group of one")

	assert.Equal(t, 2.0, s1.Value("herald_fanout_deliveries_total"), "one entry per follower")
	assert.Equal(t, 1.0, s1.Value("herald_fanout_jobs_done_total", "kind=deliver"))
	assert.Equal(t, 2.0, s1.Value("herald_fanout_jobs_done_total", "kind=follow"))
	assert.Zero(t, s1.Value("herald_fanout_jobs_done_total", "kind=rebuild"))
	assert.Zero(t, s1.Value("herald_fanout_jobs_queued"))
	assert.Zero(t, s1.Value("herald_fanout_jobs_running"))
	assert.Equal(t, 1.0, s1.Value("herald_fanout_lane_held", "lane=0"), "the embedded engine runs its one lane")
	assert.Zero(t, s1.Value("herald_fanout_lane_queue_jobs", "lane=0"))
	assert.Zero(t, s1.Value("herald_websocket_connections"))

	// A subscription: counted once, at its first event.
	c, _, err := servertest.DialWS(t, base, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	c.Send("subscribe", "1", map[string]any{"query": `subscription Live { inboxEvents { type } }`})
	require.Eventually(t, func() bool { return srv.Hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	s2 := servertest.Scrape(t, base)
	assert.Equal(t, 1.0, s2.Value("herald_websocket_connections"))
	assert.Equal(t, 1.0, s2.Value("herald_subscriptions"))

	servertest.MustPost(t, base, alice, "again")
	require.Equal(t, "next", c.MustRead(5*time.Second).Type)
	servertest.WaitIdle(t, srv.Svc)
	s3 := servertest.Scrape(t, base)
	assert.Equal(t, 1.0, s3.Op("Live", "subscription", "ok"))
	assert.Zero(t, s3.Samples("herald_graphql_operation_duration_seconds", "operation=Live", "type=subscription"))
	assert.Equal(t, 4.0, s3.Value("herald_fanout_deliveries_total"))
	assert.Equal(t, 2.0, s3.Value("herald_fanout_jobs_done_total", "kind=deliver"))

	c.CloseNormally()
	require.Eventually(t, func() bool {
		s := servertest.Scrape(t, base)
		return s.Value("herald_websocket_connections") == 0 && s.Value("herald_subscriptions") == 0
	}, 5*time.Second, 10*time.Millisecond, "the connection and its subscription end")
	assert.Equal(t, 1.0, servertest.Scrape(t, base).Op("Live", "subscription", "ok"), "the subscription's end counts nothing more")
}

// TestMetrics_OperationNamesCapped checks that at most maxOperationNames
// names get series of their own; the rest, and refused operations under
// unknown names, count as other.
func TestMetrics_OperationNamesCapped(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxDepth = 3 })
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	for i := range metrics.MaxOperationNames + 1 {
		servertest.MustGQL(t, srv.URL, alice.Token, fmt.Sprintf(`query Q%d { viewer { id } }`, i), nil)
	}
	r := servertest.GQL(t, srv.URL, alice.Token, deepQuery("Unknown"), nil)
	require.NotEmpty(t, r.Errors)
	require.Nil(t, r.Data)

	s := servertest.Scrape(t, srv.URL)
	names := map[string]bool{}
	for _, m := range s["herald_graphql_operations_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "operation" {
				names[l.GetValue()] = true
			}
		}
	}
	// Q0..Q99, the sign-up's anonymous, and other.
	assert.Len(t, names, metrics.MaxOperationNames+2)
	assert.True(t, names["Q99"])
	assert.False(t, names["Q100"])
	assert.False(t, names["Unknown"])
	assert.Equal(t, 1.0, s.Op("Q0", "query", "ok"))
	assert.Equal(t, 1.0, s.Op("other", "query", "ok"))
	assert.Equal(t, 1.0, s.Op("other", "query", "refused"))
}

// deepQuery is a valid query named name, deeper than 3.
func deepQuery(name string) string {
	return "query " + name + " { viewer { followers { edges { node { id } } } } }"
}

func TestMetrics_WatchEvents(t *testing.T) {
	m := metrics.New()
	var mode atomic.Int32 // 0 undecided, 1 change stream, 2 polling
	m.WatchEvents(func() (bool, bool) { return mode.Load() == 1, mode.Load() != 0 })
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		return rec.Body.String()
	}
	assert.NotContains(t, scrape(), "herald_events_change_stream", "left out until decided")
	mode.Store(1)
	assert.Contains(t, scrape(), "herald_events_change_stream 1\n")
	mode.Store(2)
	assert.Contains(t, scrape(), "herald_events_change_stream 0\n")
}
