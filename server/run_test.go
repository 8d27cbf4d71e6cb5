package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/server/internal/servertest"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// running is run going on in the background, as a test started it.
type running struct {
	addr   string // where it listens
	logs   *servertest.SyncBuffer
	done   <-chan error
	cancel context.CancelFunc
}

// startRun runs run with args and getenv in the background, logging to its
// logs, and returns once it listens. The test's end stops it if the test
// did not.
func startRun(t *testing.T, args []string, getenv func(string) string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	logs := &servertest.SyncBuffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, getenv, io.Discard, logs) }()
	return &running{addr: loggedAddr(t, logs, done, "listening"), logs: logs, done: done, cancel: cancel}
}

// stop cancels run and requires it to return nil within 30s.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	r.wait(t)
}

// wait requires run, cancelled, to return nil within 30s.
func (r *running) wait(t *testing.T) {
	t.Helper()
	select {
	case err := <-r.done:
		require.NoError(t, err, "logs:\n%s", r.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not return within 30s of cancel:\n%s", r.logs.String())
	}
}

// loggedAddr waits for run's log line with message msg ("listening") and
// returns its address.
func loggedAddr(t *testing.T, logs *servertest.SyncBuffer, done <-chan error, msg string) string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			var rec struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg {
				return rec.Addr
			}
		}
		select {
		case err := <-done:
			t.Fatalf("run returned before logging %q: %v\n%s", msg, err, logs.String())
		case <-deadline:
			t.Fatalf("run did not log %q within 30s:\n%s", msg, logs.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// requireLogOrder requires each of steps (log text) in logs, each after the
// one before.
func requireLogOrder(t *testing.T, logs string, steps ...string) {
	t.Helper()
	last := -1
	for _, s := range steps {
		i := strings.Index(logs, s)
		if assert.GreaterOrEqual(t, i, 0, "log has %s", s) {
			assert.Greater(t, i, last, "%s comes after the previous step", s)
			last = i
		}
	}
}

// TestRun_Shutdown cancels run's context while a subscriber is connected:
// the subscriber gets 1001 Going Away, readiness was up before, and run
// returns nil after closing everything in order.
func TestRun_Shutdown(t *testing.T) {
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-data", t.TempDir()}, servertest.Env("HERALD_TOKEN_SECRET", strings.Repeat("x", 32)))
	base := "http://" + r.addr

	resp, err := http.Get(base + "/readyz")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	alice := servertest.MustSignUp(t, base, "alice")
	c, _, err := servertest.DialWS(t, base, "graphql-transport-ws", nil)
	require.NoError(t, err)
	c.Send("connection_init", "", map[string]any{"authorization": "Bearer " + alice.Token})
	require.Equal(t, "connection_ack", c.MustRead(5*time.Second).Type)
	c.Send("subscribe", "1", map[string]any{"query": servertest.InboxSubscription})
	time.Sleep(50 * time.Millisecond) // let the subscription start; its end is what is checked

	r.cancel()
	// The subscription may complete first (its hub closed); then the close.
	var ce *websocket.CloseError
	for i := 0; i < 10; i++ {
		_, err = c.Read(10 * time.Second)
		if err != nil {
			break
		}
	}
	require.True(t, errors.As(err, &ce), "want a close frame, got %v", err)
	assert.Equal(t, websocket.CloseGoingAway, ce.Code)

	r.wait(t)
	requireLogOrder(t, r.logs.String(), `"msg":"shutting down"`, `"msg":"http server stopped"`, `"msg":"websockets closed"`,
		`"msg":"fan-out drained"`, `"msg":"event hub closed"`, `"msg":"store closed"`)
}

// TestRun_Errors covers configuration and startup failures: run reports
// them instead of starting.
func TestRun_Errors(t *testing.T) {
	t.Run("ErrBadFlag", func(t *testing.T) {
		err := run(context.Background(), []string{"-log-level", "loud"}, servertest.Env(), io.Discard, io.Discard)
		assert.ErrorContains(t, err, "invalid log level")
	})
	t.Run("ErrShortSecret", func(t *testing.T) {
		err := run(context.Background(), []string{"-data", t.TempDir()}, servertest.Env("HERALD_TOKEN_SECRET", "short"), io.Discard, io.Discard)
		assert.ErrorContains(t, err, "HERALD_TOKEN_SECRET is 5 bytes")
	})
	t.Run("ErrAddrInUse", func(t *testing.T) {
		r := startRun(t, []string{"-addr", "127.0.0.1:0", "-data", t.TempDir()}, servertest.Env())
		err := run(context.Background(), []string{"-addr", r.addr, "-data", t.TempDir()}, servertest.Env(), io.Discard, io.Discard)
		assert.ErrorContains(t, err, "listen")
		r.stop(t)
	})
	t.Run("OKHelp", func(t *testing.T) {
		var out bytes.Buffer
		require.NoError(t, run(context.Background(), []string{"-h"}, servertest.Env(), &out, io.Discard))
		assert.Contains(t, out.String(), "Usage: herald")
	})
}

// TestRun_Pprof: with -pprof the profiles are served on their own address,
// and never on the API's; without it there are none.
func TestRun_Pprof(t *testing.T) {
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), "-pprof", "127.0.0.1:0"}, servertest.Env("HERALD_TOKEN_SECRET", strings.Repeat("x", 32)))
	api := "http://" + r.addr
	require.Contains(t, r.logs.String(), `"msg":"pprof listening"`, "pprof logs its address before the API listens")
	pprofAddr := loggedAddr(t, r.logs, r.done, "pprof listening")
	require.NotEqual(t, r.addr, pprofAddr)

	resp, err := http.Get("http://" + pprofAddr + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), "goroutine profile:")

	resp, err = http.Get(api + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.NotContains(t, string(body), "goroutine profile:", "the API's address serves no profiles")

	r.stop(t)
	_, err = http.Get("http://" + pprofAddr + "/debug/pprof/")
	assert.Error(t, err, "the profiles stop with the server")
}

// TestMetrics_Flag checks the wiring of run: /metrics is served by
// default, with the storage metrics of the embedded store, and not at all
// with -metrics=false.
func TestMetrics_Flag(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			args := []string{"-addr", "127.0.0.1:0", "-data", t.TempDir(), fmt.Sprintf("-metrics=%v", on)}
			r := startRun(t, args, servertest.Env("HERALD_TOKEN_SECRET", strings.Repeat("x", 32)))
			defer r.stop(t)
			base := "http://" + r.addr
			if !on {
				resp, err := http.Get(base + "/metrics")
				require.NoError(t, err)
				resp.Body.Close()
				assert.Equal(t, http.StatusNotFound, resp.StatusCode)
				return
			}
			s := servertest.Scrape(t, base)
			// Start reads the pending jobs through the instrumented store.
			assert.Equal(t, 1.0, s.Value("herald_store_calls_total", "method=PendingJobs", "outcome=ok"))
			assert.Contains(t, s, "herald_fanout_deliveries_total")
		})
	}
}
