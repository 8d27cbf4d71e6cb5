package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The timeline reads, and the page of items they ask for. BenchHomeRich
// asks for what a social client shows beside each item: its counts,
// whether the viewer likes and has reposted it, whom it mentions, and who
// reposted it into the timeline.
const (
	benchHomeQuery     = `query BenchHome { inbox(first: 50) { totalCount unreadCount edges { cursor node { id text createdAt author { handle displayName } } } pageInfo { hasNextPage endCursor } } }`
	benchHomeRichQuery = `query BenchHomeRich { inbox(first: 50) { totalCount unreadCount edges { cursor repostedBy { handle } node { id text createdAt likeCount replyCount repostCount viewerHasLiked viewerHasReposted mentions { handle } author { handle displayName } } } pageInfo { hasNextPage endCursor } } }`
	benchPageSize      = 50
)

// processCPU returns the CPU seconds this process has used.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return math.NaN()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// readResult is one run of timeline reads at one concurrency.
type readResult struct {
	requests           int
	perSec             float64
	serverP50, p99     float64 // ms, from the server's histogram
	clientP50, client9 float64
	calls              float64 // storage calls per request
	callsBy            string  // the calls by backend method
	serverCPU          float64 // µs per request
	clientCPU          float64 // µs per request, the bench's own
}

// callsByMethod lists the storage calls per request between two scrapes
// by backend method.
func callsByMethod(before, after metricsSnapshot, requests int) string {
	var parts []string
	for _, m := range after["herald_store_calls_total"].GetMetric() {
		labels := make(map[string]string, len(m.GetLabel()))
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		per := (m.GetCounter().GetValue() - before.sum("herald_store_calls_total", labels)) / float64(requests)
		if per >= 0.0005 {
			parts = append(parts, fmt.Sprintf("%s %.3f", labels["method"], per))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// callsAtMost is atMost for storage calls per request, which are read
// from the server's counter: the server's own background work (the
// fan-out lag probe, the sweepers) lands there too, a few calls a minute,
// so hundredths of a call per request are not the requests'.
func callsAtMost(v, target float64) (string, *bool) {
	return atMost(math.Floor(v*100)/100, target, "%.0f")
}

// measureReads reads viewers' home timelines at each concurrency for d
// and, for a strategy row, fills row from concurrency 8.
func (b *bench) measureReads(ctx context.Context, section string, levels []int, d time.Duration, row *strategyRow) error {
	tokens, err := b.readers(ctx)
	if err != nil {
		return err
	}
	for _, c := range levels {
		res, err := b.readAt(ctx, "BenchHome", benchHomeQuery, tokens, c, d)
		if err != nil {
			return err
		}
		if row != nil {
			row.ReadsPerSec, row.ReadP50Ms, row.ReadP99Ms, row.RoundTrips = res.perSec, res.serverP50, res.p99, res.calls
			continue
		}
		name := fmt.Sprintf("inbox page of 50 with authors, concurrency %d: ", c)
		fig := figure{Section: section, Name: name + "requests/s", Value: res.perSec, Unit: "/s", Samples: res.requests,
			Note: fmt.Sprintf("client p50 %.2f ms, p99 %.2f ms; CPU per request: server %.0f µs, bench's client %.0f µs", res.clientP50, res.client9, res.serverCPU, res.clientCPU)}
		if c == 8 {
			fig.Target, fig.Pass = atLeast(res.perSec, 4000, "%.0f/s")
		}
		b.add(fig)
		fig = figure{Section: section, Name: name + "server p99", Value: res.p99, Unit: "ms", Note: fmt.Sprintf("p50 %.2f ms", res.serverP50)}
		if c == 8 {
			fig.Target, fig.Pass = atMost(res.p99, 5, "%.0f ms")
		}
		b.add(fig)
		// The inbox, the reader's own outbox (their own posts are at
		// home, and their own reposts by the mark made with each:
		// docs/design.md#reposts-at-home), the messages, the messages
		// reposted (on a page that holds reposts), their authors.
		fig = figure{Section: section, Name: name + "storage calls per request", Value: res.calls, Unit: "", Note: res.callsBy}
		fig.Target, fig.Pass = callsAtMost(res.calls, 5)
		b.add(fig)
	}
	return nil
}

// measureRichReads reads the timelines of tokens (from readers) with each
// item's counts, whether the viewer likes and has reposted it, whom it
// mentions and who reposted it, at concurrency 8: the counts come with the
// messages, the mentioned users and the reposters with the authors, so the
// page costs two storage calls more (FindLiked, FindReposts) than the
// plain one.
func (b *bench) measureRichReads(ctx context.Context, section string, tokens []string, d time.Duration) error {
	const c = 8
	res, err := b.readAt(ctx, "BenchHomeRich", benchHomeRichQuery, tokens, c, d)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("inbox page of 50 with likes, replies, reposts and mentions, concurrency %d: ", c)
	b.add(figure{Section: section, Name: name + "requests/s", Value: res.perSec, Unit: "/s", Samples: res.requests,
		Note: fmt.Sprintf("server p50 %.2f ms, p99 %.2f ms; CPU per request: server %.0f µs", res.serverP50, res.p99, res.serverCPU)})
	fig := figure{Section: section, Name: name + "storage calls per request", Value: res.calls, Unit: "", Note: res.callsBy}
	fig.Target, fig.Pass = callsAtMost(res.calls, 7)
	b.add(fig)
	return nil
}

// readers returns the tokens of readerTokens, each having read once: the
// server's query cache, and its last-seen writes, which a user's first
// request makes.
func (b *bench) readers(ctx context.Context) ([]string, error) {
	tokens, err := b.readerTokens()
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(map[string]string{"query": benchHomeQuery})
	if err != nil {
		return nil, err
	}
	if _, err := b.readLoad(ctx, sameBody(body, tokens), benchPageSize, min(8, len(tokens)), time.Minute, len(tokens)); err != nil {
		return nil, err
	}
	return tokens, nil
}

// readerTokens returns the tokens of the users whose inboxes hold a page,
// up to -viewers of them.
func (b *bench) readerTokens() ([]string, error) {
	var viewers []int
	for i := 0; i < b.net.Users() && len(viewers) < b.f.viewers; i++ {
		if b.net.InboxSize(i) >= benchPageSize {
			viewers = append(viewers, i)
		}
	}
	if len(viewers) == 0 {
		return nil, errors.New("no user's inbox holds a page of 50 items; raise -avg-follows or -messages")
	}
	tokens := make([]string, len(viewers))
	for i, v := range viewers {
		t, err := b.token(v)
		if err != nil {
			return nil, err
		}
		tokens[i] = t
	}
	return tokens, nil
}

// readAt runs query (operation op) by c clients for d, once the server is
// idle, and returns the client's and the server's figures for it.
func (b *bench) readAt(ctx context.Context, op, query string, tokens []string, c int, d time.Duration) (readResult, error) {
	body, err := json.Marshal(map[string]string{"query": query})
	if err != nil {
		return readResult{}, err
	}
	return b.readReqsAt(ctx, op, sameBody(body, tokens), benchPageSize, c, d)
}

// readReq is one request of a read load: its body and its viewer's
// Authorization header.
type readReq struct {
	body []byte
	auth []string
}

// sameBody makes the requests of body, one per token.
func sameBody(body []byte, tokens []string) []readReq {
	reqs := make([]readReq, len(tokens))
	for i, t := range tokens {
		reqs[i] = readReq{body: body, auth: []string{"Bearer " + t}}
	}
	return reqs
}

// readReqsAt is readAt for requests reqs (operation op), each answer
// holding want cursors.
func (b *bench) readReqsAt(ctx context.Context, op string, reqs []readReq, want, c int, d time.Duration) (readResult, error) {
	if err := b.waitIdle(ctx); err != nil {
		return readResult{}, err
	}
	before, err := b.srv.scrape(ctx)
	if err != nil {
		return readResult{}, err
	}
	cpu0 := processCPU()
	res, err := b.readLoad(ctx, reqs, want, c, d, 0)
	if err != nil {
		return readResult{}, err
	}
	res.clientCPU = (processCPU() - cpu0) / float64(res.requests) * 1e6
	after, err := b.srv.scrape(ctx)
	if err != nil {
		return readResult{}, err
	}
	// CPU per request does not depend on what else the machine runs the
	// way requests per second do.
	res.serverCPU = (after.sum("process_cpu_seconds_total", nil) - before.sum("process_cpu_seconds_total", nil)) / float64(res.requests) * 1e6
	opl := map[string]string{"operation": op}
	h := after.histogram("herald_graphql_operation_duration_seconds", opl).since(before.histogram("herald_graphql_operation_duration_seconds", opl))
	res.serverP50, res.p99 = h.quantile(.5)*1000, h.quantile(.99)*1000
	res.calls = (after.sum("herald_store_calls_total", nil) - before.sum("herald_store_calls_total", nil)) / float64(res.requests)
	res.callsBy = callsByMethod(before, after, res.requests)
	return res, nil
}

// readLoad runs c clients making reqs in turn until d passes or (if
// limit > 0) limit requests are made, and checks that each response is a
// page of want items.
func (b *bench) readLoad(ctx context.Context, reqs []readReq, want, c int, d time.Duration, limit int) (readResult, error) {
	// Requests run to their end after d, so that the server's figures
	// and the client's count the same requests.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	deadline := time.Now().Add(d)
	var (
		next    atomic.Int64
		mu      sync.Mutex
		lats    []time.Duration
		firstEr error
		wg      sync.WaitGroup
	)
	// A bound on the count too: no loop runs unbounded.
	const maxRequests = 5_000_000
	if limit <= 0 {
		limit = maxRequests
	}
	start := time.Now()
	for range c {
		wg.Go(func() {
			var buf bytes.Buffer // a response body, reused: the client's cost is not the server's
			own := make([]time.Duration, 0, 4096)
			defer func() {
				mu.Lock()
				lats = append(lats, own...)
				mu.Unlock()
			}()
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := next.Add(1) - 1
				if i >= int64(limit) {
					return
				}
				t0 := time.Now()
				err := b.readOnce(ctx, reqs[i%int64(len(reqs))], want, &buf)
				if err != nil {
					if ctx.Err() != nil {
						return // another client failed, or bench stops
					}
					mu.Lock()
					if firstEr == nil {
						firstEr = err
					}
					mu.Unlock()
					cancel()
					return
				}
				own = append(own, time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstEr != nil {
		return readResult{}, firstEr
	}
	return readResult{
		requests: len(lats), perSec: float64(len(lats)) / elapsed.Seconds(),
		clientP50: percentile(lats, .5), client9: percentile(lats, .99),
	}, nil
}

var (
	cursorField     = []byte(`"cursor"`)
	jsonContentType = []string{"application/json"}
)

func (b *bench) readOnce(ctx context.Context, r readReq, want int, buf *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.base+"/graphql", bytes.NewReader(r.body))
	if err != nil {
		return err
	}
	req.Header = http.Header{"Content-Type": jsonContentType, "Authorization": r.auth}
	resp, err := b.srv.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return err
	}
	data := buf.Bytes()
	if resp.StatusCode != http.StatusOK || bytes.Contains(data, []byte(`"errors"`)) || bytes.Count(data, cursorField) != want {
		return fmt.Errorf("a read answered HTTP %d: %.300s", resp.StatusCode, data)
	}
	return nil
}
