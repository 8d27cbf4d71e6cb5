package httpserver_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"herald/graph"
	"herald/graph/auth"
	"herald/server/httpserver"
	"herald/server/internal/servertest"
	"herald/server/metrics"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// homeQuery is the home-timeline read the throughput target is set for.
const homeQuery = `query Home { inbox(first: 50) { totalCount unreadCount edges { cursor node { id text createdAt author { handle displayName } } } pageInfo { hasNextPage endCursor } } }`

// timelineClients is the number of concurrent clients of the target.
const timelineClients = 8

// BenchmarkTimelineHTTP measures the home-timeline read as the target does:
// the whole handler chain of the server (metrics on, rate limits off) on
// 127.0.0.1, read by timelineClients concurrent keep-alive clients, each
// asking for inbox(first: 50) of a reader following five authors of 120
// messages. It reports requests per second and the server-side latency
// (from the handler's start to its return) at the median and the 99th
// percentile, and the CPU time per request. The clients run in this
// process, so they share its CPU, and the CPU time counts theirs.
//
//	go test -run '^$' -bench TimelineHTTP -benchmem ./server/httpserver/
func BenchmarkTimelineHTTP(b *testing.B) {
	cfg := httpserver.DefaultOptions()
	cfg.RateLimitUser, cfg.RateLimitAddress = graph.Rate{}, graph.Rate{}
	cfg.RateLimitQueryUser, cfg.RateLimitQueryAddress = graph.Rate{}, graph.Rate{}
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(b.TempDir(), embedded.Options{Logger: log})
	require.NoError(b, err)
	hub := pubsub.NewHub()
	m := metrics.New()
	// The server's default strategy (-fanout).
	svc := service.NewService(m.WrapBackend(st), hub, service.Options{Logger: log, PasswordCost: 4, Strategy: service.StrategyBucket})
	require.NoError(b, svc.Start(context.Background()))
	a, err := httpserver.New(cfg, log, svc, auth.NewSigner([]byte(strings.Repeat("k", 32)), time.Hour), m)
	require.NoError(b, err)
	a.Readiness().Store(true)

	// Server-side latencies, one slot per request of the timed run.
	var (
		lat     []time.Duration
		latNext atomic.Int64
		timing  atomic.Bool
	)
	routes := a.Routes()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		routes.ServeHTTP(w, r)
		if timing.Load() {
			if i := latNext.Add(1) - 1; i < int64(len(lat)) {
				lat[i] = time.Since(start)
			}
		}
	}))
	b.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = svc.Close(ctx)
		hub.Close()
		_ = st.Close()
	})

	reader := servertest.MustSignUp(b, srv.URL, "reader")
	var authors []servertest.User
	for i := range 5 {
		u := servertest.MustSignUp(b, srv.URL, fmt.Sprintf("author%d", i))
		servertest.MustFollow(b, srv.URL, reader, u)
		authors = append(authors, u)
	}
	for i := range 120 {
		servertest.MustPost(b, srv.URL, authors[i%len(authors)], fmt.Sprintf("message %d, of an ordinary length for a timeline", i))
	}
	require.Eventually(b, svc.Idle, 10*time.Second, 5*time.Millisecond, "fan-out did not finish")

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: timelineClients}, Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	body := []byte(`{"query":"` + homeQuery + `"}`)
	read := func(buf *bytes.Buffer) error {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+reader.Token)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		buf.Reset()
		if _, err := buf.ReadFrom(resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || bytes.Contains(buf.Bytes(), []byte(`"errors"`)) {
			return fmt.Errorf("status %d: %s", resp.StatusCode, buf.Bytes())
		}
		return nil
	}
	// Warm: a connection per client, and the parsed-query cache.
	var buf bytes.Buffer
	require.NoError(b, read(&buf))
	require.Contains(b, buf.String(), `"message 119,`)
	require.Equal(b, 50, strings.Count(buf.String(), `"cursor"`))

	lat = make([]time.Duration, b.N)
	timing.Store(true)
	cpuStart := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	// Exactly timelineClients goroutines share the b.N requests, whatever
	// GOMAXPROCS is (RunParallel would start a multiple of it).
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, timelineClients)
	for range timelineClients {
		wg.Go(func() {
			var buf bytes.Buffer
			for next.Add(1) <= int64(b.N) {
				if err := read(&buf); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpuStart
	timing.Store(false)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	// The machine's cores are shared: req/s depends on what else runs,
	// the CPU a request costs (server and client) much less.
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	lat = lat[:min(int(latNext.Load()), len(lat))]
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// cpuTime returns the CPU time the process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
