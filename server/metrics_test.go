package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/service"
	"herald/store/storage"
)

// scraped is one scrape of /metrics.
type scraped map[string]*dto.MetricFamily

// scrape reads base+"/metrics" in the text format.
func scrape(t *testing.T, base string) scraped {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return fams
}

// find returns the metric of family name whose labels are exactly labels
// ("k=v" pairs), or nil.
func (s scraped) find(name string, labels ...string) *dto.Metric {
	f := s[name]
	if f == nil {
		return nil
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for i, l := range m.GetLabel() {
			if l.GetName()+"="+l.GetValue() != labels[i] {
				match = false
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value returns the value of a counter or gauge, 0 if absent.
func (s scraped) value(name string, labels ...string) float64 {
	m := s.find(name, labels...)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// samples returns a histogram's sample count, 0 if absent.
func (s scraped) samples(name string, labels ...string) uint64 {
	if m := s.find(name, labels...); m != nil && m.Histogram != nil {
		return m.Histogram.GetSampleCount()
	}
	return 0
}

// op returns the count of herald_graphql_operations_total for one series.
func (s scraped) op(name, typ, outcome string) float64 {
	return s.value("herald_graphql_operations_total", "operation="+name, "outcome="+outcome, "type="+typ)
}

func waitIdle(t *testing.T, svc *service.Service) {
	t.Helper()
	require.Eventually(t, svc.Idle, 10*time.Second, 5*time.Millisecond, "fan-out drains")
}

// TestMetrics_Scenario drives a server through sign-ups, follows, posts, a
// named query, refused operations and a subscription, and checks what
// /metrics says of each.
func TestMetrics_Scenario(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxDepth = 3 })
	base := srv.URL
	s0 := scrape(t, base)
	for _, name := range []string{"go_goroutines", "process_open_fds", "herald_fanout_jobs_queued", "herald_websocket_connections", "herald_subscriptions"} {
		assert.Contains(t, s0, name)
	}
	assert.Zero(t, s0.value("herald_fanout_deliveries_total"))

	alice := mustSignUp(t, base, "alice")
	bob := mustSignUp(t, base, "bob")
	carol := mustSignUp(t, base, "carol")
	mustFollow(t, base, bob, alice)
	mustFollow(t, base, carol, alice)
	waitIdle(t, srv.svc)
	mustPost(t, base, alice, "hello")
	waitIdle(t, srv.svc)

	mustGQL(t, base, alice.Token, `query Me { viewer { handle } }`, nil)
	mustGQL(t, base, alice.Token, `query Me { viewer { id } }`, nil)
	mustGQL(t, base, alice.Token, `query Nobody { user(handle: "nobody") { id } }`, nil)
	// Refused before execution: too deep, under a name already known; then
	// a field the schema lacks and a document that does not parse, whose
	// name and type are unknown (the request gives no operationName).
	r := gql(t, base, alice.Token, deepQuery("Me"), nil)
	require.NotEmpty(t, r.Errors)
	require.Nil(t, r.Data)
	r = gql(t, base, alice.Token, `query Me { nope }`, nil)
	require.Equal(t, "GRAPHQL_VALIDATION_FAILED", r.code())
	r = gql(t, base, alice.Token, `{`, nil)
	require.Equal(t, "GRAPHQL_PARSE_FAILED", r.code())
	// Executed with an error: a page too large, refused by the resolver.
	r = gql(t, base, alice.Token, `query Who { inbox(first: 500) { __typename } }`, nil)
	require.Equal(t, "BAD_USER_INPUT", r.code())

	s1 := scrape(t, base)
	// 3 sign-ups, 2 follows, 1 post: all anonymous mutations.
	assert.Equal(t, 6.0, s1.op("anonymous", "mutation", "ok"))
	assert.Equal(t, uint64(6), s1.samples("herald_graphql_operation_duration_seconds", "operation=anonymous", "type=mutation"))
	assert.Equal(t, 2.0, s1.op("Me", "query", "ok"))
	assert.Equal(t, 1.0, s1.op("Me", "query", "refused"))
	assert.Equal(t, uint64(2), s1.samples("herald_graphql_operation_duration_seconds", "operation=Me", "type=query"),
		"refused operations are not timed")
	assert.Equal(t, 2.0, s1.op("anonymous", "unknown", "refused"))
	assert.Equal(t, 1.0, s1.op("Nobody", "query", "ok"))
	assert.Equal(t, 1.0, s1.op("Who", "query", "error"))
	assert.Zero(t, s1.op("Who", "query", "ok"))

	assert.Equal(t, 3.0, s1.value("herald_store_calls_total", "method=CreateUser", "outcome=ok"))
	assert.Equal(t, 1.0, s1.value("herald_store_calls_total", "method=CreateMessage", "outcome=ok"))
	assert.Equal(t, uint64(1), s1.samples("herald_store_call_duration_seconds", "method=CreateMessage"))
	assert.Equal(t, 1.0, s1.value("herald_store_calls_total", "method=FindUserByHandle", "outcome=not_found"))

	assert.Equal(t, 2.0, s1.value("herald_fanout_deliveries_total"), "one entry per follower")
	assert.Equal(t, 1.0, s1.value("herald_fanout_jobs_done_total", "kind=deliver"))
	assert.Equal(t, 2.0, s1.value("herald_fanout_jobs_done_total", "kind=follow"))
	assert.Zero(t, s1.value("herald_fanout_jobs_done_total", "kind=rebuild"))
	assert.Zero(t, s1.value("herald_fanout_jobs_queued"))
	assert.Zero(t, s1.value("herald_fanout_jobs_running"))
	assert.Zero(t, s1.value("herald_websocket_connections"))

	// A subscription: counted once, at its first event.
	c, _, err := dialWS(t, base, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.send("connection_init", "", map[string]any{"authorization": "Bearer " + bob.Token})
	require.Equal(t, "connection_ack", c.mustRead(5*time.Second).Type)
	c.send("subscribe", "1", map[string]any{"query": `subscription Live { inboxEvents { type } }`})
	require.Eventually(t, func() bool { return srv.hub.Len() == 1 }, 5*time.Second, 5*time.Millisecond)
	s2 := scrape(t, base)
	assert.Equal(t, 1.0, s2.value("herald_websocket_connections"))
	assert.Equal(t, 1.0, s2.value("herald_subscriptions"))

	mustPost(t, base, alice, "again")
	require.Equal(t, "next", c.mustRead(5*time.Second).Type)
	waitIdle(t, srv.svc)
	s3 := scrape(t, base)
	assert.Equal(t, 1.0, s3.op("Live", "subscription", "ok"))
	assert.Zero(t, s3.samples("herald_graphql_operation_duration_seconds", "operation=Live", "type=subscription"))
	assert.Equal(t, 4.0, s3.value("herald_fanout_deliveries_total"))
	assert.Equal(t, 2.0, s3.value("herald_fanout_jobs_done_total", "kind=deliver"))

	c.closeNormally()
	require.Eventually(t, func() bool {
		s := scrape(t, base)
		return s.value("herald_websocket_connections") == 0 && s.value("herald_subscriptions") == 0
	}, 5*time.Second, 10*time.Millisecond, "the connection and its subscription end")
	assert.Equal(t, 1.0, scrape(t, base).op("Live", "subscription", "ok"), "the subscription's end counts nothing more")
}

// TestMetrics_OperationNamesCapped checks that at most maxOperationNames
// names get series of their own; the rest, and refused operations under
// unknown names, count as other.
func TestMetrics_OperationNamesCapped(t *testing.T) {
	srv := newTestServer(t, func(c *config) { c.MaxDepth = 3 })
	alice := mustSignUp(t, srv.URL, "alice")
	for i := range maxOperationNames + 1 {
		mustGQL(t, srv.URL, alice.Token, fmt.Sprintf(`query Q%d { viewer { id } }`, i), nil)
	}
	r := gql(t, srv.URL, alice.Token, deepQuery("Unknown"), nil)
	require.NotEmpty(t, r.Errors)
	require.Nil(t, r.Data)

	s := scrape(t, srv.URL)
	names := map[string]bool{}
	for _, m := range s["herald_graphql_operations_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "operation" {
				names[l.GetValue()] = true
			}
		}
	}
	// Q0..Q99, the sign-up's anonymous, and other.
	assert.Len(t, names, maxOperationNames+2)
	assert.True(t, names["Q99"])
	assert.False(t, names["Q100"])
	assert.False(t, names["Unknown"])
	assert.Equal(t, 1.0, s.op("Q0", "query", "ok"))
	assert.Equal(t, 1.0, s.op("other", "query", "ok"))
	assert.Equal(t, 1.0, s.op("other", "query", "refused"))
}

// deepQuery is a valid query named name, deeper than 3.
func deepQuery(name string) string {
	return "query " + name + " { viewer { followers { edges { node { id } } } } }"
}

// TestMetrics_Flag checks the wiring of run: /metrics is served by
// default, with the storage metrics of the embedded store, and not at all
// with -metrics=false.
func TestMetrics_Flag(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			args := []string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), fmt.Sprintf("-metrics=%v", on)}
			r := startRun(t, args, env("HERALD_TOKEN_SECRET", strings.Repeat("x", 32)))
			defer r.stop(t)
			base := "http://" + r.addr
			if !on {
				resp, err := http.Get(base + "/metrics")
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusNotFound, resp.StatusCode)
				return
			}
			s := scrape(t, base)
			// Start reads the pending jobs through the instrumented store.
			assert.Equal(t, 1.0, s.value("herald_store_calls_total", "method=PendingJobs", "outcome=ok"))
			assert.Contains(t, s, "herald_fanout_deliveries_total")
		})
	}
}

// TestMeteredBackend_Leaser checks that wrapping keeps the optional
// storage.Leaser of a backend that has it, measures its calls, and adds it
// to none that lacks it.
func TestMeteredBackend_Leaser(t *testing.T) {
	sm := newStoreMetrics()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	plain := sm.wrap(st)
	_, ok := plain.(storage.Leaser)
	assert.False(t, ok, "the embedded store is no Leaser, nor is its wrapper")

	fl := &fakeLeaser{Backend: st}
	wrapped := sm.wrap(fl)
	l, ok := wrapped.(storage.Leaser)
	require.True(t, ok, "a Leaser stays one when wrapped")
	held, err := l.TryFanoutLease(context.Background(), "me", time.Second)
	require.NoError(t, err)
	assert.True(t, held)
	assert.Equal(t, 1, fl.tries)
	assert.Equal(t, 1, testutilCount(t, sm, "TryFanoutLease", "ok"))

	_, err = wrapped.FindUserByID(context.Background(), store.NewID(time.Now()))
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	assert.Equal(t, 1, testutilCount(t, sm, "FindUserByID", "not_found"))
	assert.Equal(t, 0, testutilCount(t, sm, "FindUserByID", "ok"))
}

// fakeLeaser is a backend that is also a Leaser, as MongoDB's is.
type fakeLeaser struct {
	storage.Backend
	tries int
}

func (f *fakeLeaser) TryFanoutLease(context.Context, string, time.Duration) (bool, error) {
	f.tries++
	return true, nil
}

func (f *fakeLeaser) ReleaseFanoutLease(context.Context, string) error { return nil }

// testutilCount returns herald_store_calls_total for method and outcome.
func testutilCount(t *testing.T, sm *storeMetrics, method, outcome string) int {
	t.Helper()
	m := &dto.Metric{}
	require.NoError(t, sm.total.WithLabelValues(method, outcome).Write(m))
	return int(m.GetCounter().GetValue())
}
