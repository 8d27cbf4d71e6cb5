package httpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"math"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/httpserver"
	"herald/server/internal/servertest"
	"herald/server/metrics"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// readyz is /readyz's JSON detail, as a client decodes it.
type readyz struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason"`
	Fanout *struct {
		LagSeconds    float64 `json:"lagSeconds"`
		QueueJobs     int     `json:"queueJobs"`
		MaxLagSeconds float64 `json:"maxLagSeconds"`
		Behind        bool    `json:"behind"`
	} `json:"fanout"`
}

func getReadyz(t *testing.T, base string, accept string) (int, readyz) {
	t.Helper()
	url := base + "/readyz?detail"
	if accept != "" {
		url = base + "/readyz"
	}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var r readyz
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
	return resp.StatusCode, r
}

// TestFanoutLag runs a server whose fan-out is held back: the lag and queue
// depth rise in /metrics and /readyz while posts wait, postMessage and
// repost answer RATE_LIMITED with a retry hint past -fanout-max-lag (and
// not below it), and all falls back to 0, posts taken again, once the
// fan-out runs and drains.
func TestFanoutLag(t *testing.T) {
	const maxLag = 30 * time.Second
	var skew atomic.Int64 // how far the service's clock is ahead
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	m := metrics.New()
	svc := service.NewService(m.WrapBackend(st), hub, service.Options{Logger: log, PasswordCost: 4, Now: now, FanoutMaxLag: maxLag})
	srv := servertest.Serve(t, httpserver.DefaultOptions(), log, svc, m, nil, func() {
		hub.Close()
		_ = st.Close()
	})
	// Not started: the jobs wait in the queue.

	alice := servertest.MustSignUp(t, srv.URL, "alice")
	bob := servertest.MustSignUp(t, srv.URL, "bob")
	lag := func() (float64, float64) {
		s := servertest.Scrape(t, srv.URL)
		return s.Value("herald_fanout_lag_seconds"), s.Value("herald_fanout_queue_jobs")
	}
	seconds, jobs := lag()
	assert.Zero(t, seconds)
	assert.Zero(t, jobs)
	status, r := getReadyz(t, srv.URL, "")
	assert.Equal(t, http.StatusOK, status)
	assert.True(t, r.Ready)
	require.NotNil(t, r.Fanout)
	assert.Zero(t, r.Fanout.QueueJobs)
	assert.Equal(t, maxLag.Seconds(), r.Fanout.MaxLagSeconds)
	assert.False(t, r.Fanout.Behind)

	first := servertest.MustPost(t, srv.URL, alice, "first")
	skew.Add(int64(20 * time.Second))
	servertest.MustPost(t, srv.URL, alice, "below the limit")
	seconds, jobs = lag()
	assert.InDelta(t, 20, seconds, 2)
	assert.Equal(t, 2.0, jobs)

	skew.Add(int64(15 * time.Second))
	seconds, jobs = lag()
	assert.Greater(t, seconds, maxLag.Seconds())
	assert.Equal(t, 2.0, jobs)
	status, r = getReadyz(t, srv.URL, "application/json")
	assert.Equal(t, http.StatusOK, status, "a backlog does not make the server unready")
	assert.True(t, r.Ready)
	assert.Equal(t, 2, r.Fanout.QueueJobs)
	assert.Greater(t, r.Fanout.LagSeconds, maxLag.Seconds())
	assert.True(t, r.Fanout.Behind)

	for _, op := range []struct{ query, id string }{
		{`mutation { postMessage(input: {text: "refused"}) { id } }`, ""},
		{`mutation($id: ID!) { repost(messageId: $id) { id } }`, first},
	} {
		vars := map[string]any{}
		if op.id != "" {
			vars["id"] = op.id
		}
		got := servertest.GQL(t, srv.URL, bob.Token, op.query, vars)
		require.Equal(t, "RATE_LIMITED", got.Code(), "%s: %+v", op.query, got.Errors)
		assert.Equal(t, http.StatusOK, got.Status, "a GraphQL error of an executed mutation, as logIn's RATE_LIMITED")
		retry, ok := got.Errors[0].Extensions["retryAfter"].(float64)
		require.True(t, ok, "extensions.retryAfter: %v", got.Errors[0].Extensions)
		assert.Equal(t, math.Trunc(retry), retry, "whole seconds")
		assert.GreaterOrEqual(t, retry, 1.0)
		assert.LessOrEqual(t, retry, maxLag.Seconds())
		assert.Contains(t, got.Errors[0].Message, "behind")
	}
	_, jobs = lag()
	assert.Equal(t, 2.0, jobs, "a refused post stores nothing")

	require.NoError(t, svc.Start(context.Background()))
	servertest.WaitIdle(t, svc)
	seconds, jobs = lag()
	assert.Zero(t, seconds)
	assert.Zero(t, jobs)
	_, r = getReadyz(t, srv.URL, "")
	assert.Zero(t, r.Fanout.QueueJobs)
	assert.False(t, r.Fanout.Behind)
	servertest.MustPost(t, srv.URL, bob, "taken again")

	// The plain answer is as it was.
	resp, err := http.Get(srv.URL + "/readyz")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	assert.Equal(t, "ok\n", string(body))
}
