package main

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

	"github.com/gorilla/websocket"

	"herald/graph/auth"
	"herald/store"
	"herald/store/seed"
	"herald/store/service"
)

const (
	benchPostMutation = `mutation BenchPost($text: String!) { postMessage(input: {text: $text}) { id } }`
	benchHomeQuery    = `query BenchHome { inbox(first: 50) { totalCount unreadCount edges { cursor node { id text createdAt author { handle displayName } } } pageInfo { hasNextPage endCursor } } }`
	benchLiveQuery    = `subscription BenchLive { inboxEvents { type messageId } }`
	benchPageSize     = 50
)

// percentile returns the q-quantile of ds (nearest rank), in milliseconds.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return float64(s[max(0, min(i, len(s)-1))]) / float64(time.Millisecond)
}

// processCPU returns the CPU seconds this process has used.
func processCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return math.NaN()
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// waitIdle waits until the server's fan-out has no job queued or running.
func (b *bench) waitIdle(ctx context.Context) error {
	return b.waitMetrics(ctx, "no fan-out job queued or running", func(ms metricsSnapshot) bool {
		return ms.sum("herald_fanout_jobs_queued", nil)+ms.sum("herald_fanout_jobs_running", nil) == 0
	})
}

// waitSubscribed waits until the server counts at least n subscriptions.
func (b *bench) waitSubscribed(ctx context.Context, n int) error {
	return b.waitMetrics(ctx, fmt.Sprintf("%d subscriptions", n), func(ms metricsSnapshot) bool {
		return ms.sum("herald_subscriptions", nil) >= float64(n)
	})
}

// waitMetrics scrapes the server's metrics every 10 ms until done holds,
// for 2 minutes at most.
func (b *bench) waitMetrics(ctx context.Context, what string, done func(metricsSnapshot) bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ms, err := b.srv.scrape(ctx)
		if err != nil {
			return err
		}
		if done(ms) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited 2 minutes for %s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// post posts text as author and returns the message's id.
func (b *bench) post(ctx context.Context, token, text string) (string, error) {
	var out struct {
		PostMessage struct{ ID string } `json:"postMessage"`
	}
	if err := b.srv.gql(ctx, token, benchPostMutation, map[string]any{"text": text}, &out); err != nil {
		return "", err
	}
	return out.PostMessage.ID, nil
}

// liveClient is one graphql-transport-ws subscriber of inboxEvents that
// records when each ADDED event arrives.
type liveClient struct {
	conn    *websocket.Conn
	writeMu sync.Mutex
	mu      sync.Mutex
	added   map[string]time.Time // message id → arrival
	onAdded func()
	done    chan struct{}
}

func (b *bench) wsURL() string {
	return "ws" + strings.TrimPrefix(b.srv.base, "http") + "/graphql"
}

// dialLive connects a subscriber with token and subscribes it; its
// reader runs until the connection closes.
func dialLive(ctx context.Context, url, token string, onAdded func()) (*liveClient, error) {
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 30 * time.Second,
		ReadBufferSize: 1024, WriteBufferSize: 1024}
	conn, _, err := d.DialContext(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	c := &liveClient{conn: conn, added: make(map[string]time.Time), onAdded: onAdded, done: make(chan struct{})}
	fail := func(err error) (*liveClient, error) {
		_ = conn.Close()
		return nil, err
	}
	if err := c.send(map[string]any{"type": "connection_init", "payload": map[string]string{"authorization": "Bearer " + token}}); err != nil {
		return fail(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	var ack struct{ Type string }
	if err := conn.ReadJSON(&ack); err != nil {
		return fail(err)
	}
	if ack.Type != "connection_ack" {
		return fail(fmt.Errorf("connection_init answered with %q", ack.Type))
	}
	_ = conn.SetReadDeadline(time.Time{})
	if err := c.send(map[string]any{"id": "1", "type": "subscribe", "payload": map[string]string{"query": benchLiveQuery}}); err != nil {
		return fail(err)
	}
	go c.read()
	return c, nil
}

func (c *liveClient) send(v any) error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return c.conn.WriteJSON(v)
}

func (c *liveClient) read() {
	defer close(c.done)
	for {
		_, data, err := c.conn.ReadMessage()
		if err != nil {
			return
		}
		at := time.Now()
		var m struct {
			Type    string
			Payload struct {
				Data struct {
					InboxEvents struct{ Type, MessageID string } `json:"inboxEvents"`
				}
			}
		}
		if json.Unmarshal(data, &m) != nil {
			continue
		}
		switch m.Type {
		case "ping":
			_ = c.send(map[string]string{"type": "pong"})
		case "next":
			if ev := m.Payload.Data.InboxEvents; ev.Type == string(store.EventAdded) {
				c.mu.Lock()
				c.added[ev.MessageID] = at
				c.mu.Unlock()
				if c.onAdded != nil {
					c.onAdded()
				}
			}
		}
	}
}

// arrival returns when the event of message id arrived.
func (c *liveClient) arrival(id string) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.added[id]
	return at, ok
}

func (c *liveClient) close() {
	c.writeMu.Lock()
	_ = c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.writeMu.Unlock()
	_ = c.conn.Close()
	<-c.done
}

// postAndTrack has author post n times, one at a time with the fan-out
// idle in between, and returns each post's mutation latency and the time
// from its request until the author's last follower by id, subscribed,
// had it (the fan-out visits followers in id order).
func (b *bench) postAndTrack(ctx context.Context, author, n int) (posts, delivered []time.Duration, err error) {
	followers := b.net.FollowersOf(author)
	if len(followers) == 0 {
		return nil, nil, fmt.Errorf("user %d has no followers", author)
	}
	last := int(followers[len(followers)-1])
	token, err := b.token(author)
	if err != nil {
		return nil, nil, err
	}
	lastToken, err := b.token(last)
	if err != nil {
		return nil, nil, err
	}
	arrived := make(chan struct{}, 64)
	sub, err := dialLive(ctx, b.wsURL(), lastToken, func() {
		select {
		case arrived <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("subscribe the last follower: %w", err)
	}
	defer sub.close()
	if err := b.waitSubscribed(ctx, 1); err != nil {
		return nil, nil, err
	}
	for i := range n {
		if err := b.waitIdle(ctx); err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		id, err := b.post(ctx, token, fmt.Sprintf("bench post %d by %s at %s", i, seed.Handle(author), t0.Format(time.RFC3339Nano)))
		if err != nil {
			return nil, nil, err
		}
		posts = append(posts, time.Since(t0))
		deadline := time.After(30 * time.Second)
		for {
			if at, ok := sub.arrival(id); ok {
				delivered = append(delivered, at.Sub(t0))
				break
			}
			select {
			case <-arrived:
			case <-deadline:
				return nil, nil, fmt.Errorf("post %d did not reach %s within 30s", i, seed.Handle(last))
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
	}
	return posts, delivered, b.waitIdle(ctx)
}

// fanoutAuthors returns the authors the fan-out section posts as: the
// pinned ones, or at -url those whose follower counts are nearest 1k, 10k
// and 100k, fewest followers first.
func (b *bench) fanoutAuthors() []int {
	var authors []int
	if len(b.net.Config().Pinned) > 0 {
		for j := len(b.net.Config().Pinned) - 1; j >= 0; j-- {
			authors = append(authors, b.net.Pinned(j))
		}
		return authors
	}
	for _, want := range []int{1_000, 10_000, 100_000} {
		best := -1
		for i := range b.net.Users() {
			if best < 0 || abs(b.net.Followers(i)-want) < abs(b.net.Followers(best)-want) {
				best = i
			}
		}
		if !slices.Contains(authors, best) {
			authors = append(authors, best)
		}
	}
	return authors
}

func abs(n int) int { return max(n, -n) }

func (b *bench) measureFanout(ctx context.Context) error {
	for _, a := range b.fanoutAuthors() {
		followers := b.net.Followers(a)
		fmt.Fprintf(b.stderr, "bench: fanout: %d posts by an author of %d followers\n", b.f.posts, followers)
		posts, delivered, err := b.postAndTrack(ctx, a, b.f.posts)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("author of %d followers: ", followers)
		big := followers >= 100_000
		p99 := percentile(posts, .99)
		fig := figure{Section: "fanout", Name: name + "postMessage p99", Value: p99, Unit: "ms", Samples: len(posts),
			Note: fmt.Sprintf("p50 %.2f ms", percentile(posts, .5))}
		if big {
			fig.Target, fig.Pass = atMost(p99, 20, "%.0f ms")
		}
		b.add(fig)
		d50, d99 := percentile(delivered, .5), percentile(delivered, .99)
		fig = figure{Section: "fanout", Name: name + "until the last follower has it, p99", Value: d99, Unit: "ms", Samples: len(delivered),
			Note: fmt.Sprintf("p50 %.1f ms", d50)}
		if big {
			fig.Target, fig.Pass = atMost(d99, 1000, "%.0f ms")
		}
		b.add(fig)
		pulled := b.cfg.Fanout == service.StrategyHybrid && followers > b.cfg.CelebrityThreshold
		if b.cfg.Fanout.Layout().Stores() && !pulled {
			rate := float64(followers) / (d50 / 1000)
			b.add(figure{Section: "fanout", Name: name + "deliveries/s (followers / p50)", Value: rate, Unit: "/s"})
			if big && b.raw > 0 {
				ratio := rate / b.raw
				fig := figure{Section: "fanout", Name: name + "deliveries/s ÷ engine append limit", Value: ratio, Unit: "×"}
				fig.Target, fig.Pass = atLeast(ratio, 0.5, "%.2f")
				b.add(fig)
			}
		}
	}
	return nil
}

// readResult is one run of timeline reads at one concurrency.
type readResult struct {
	requests           int
	perSec             float64
	serverP50, p99     float64 // ms, from the server's histogram
	clientP50, client9 float64
	calls              float64 // storage calls per request
	callsBy            string  // the calls by backend method
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

// measureReads reads viewers' home timelines at each concurrency for d
// and, for a strategy row, fills row from concurrency 8.
func (b *bench) measureReads(ctx context.Context, section string, levels []int, d time.Duration, row *strategyRow) error {
	var viewers []int
	for i := 0; i < b.net.Users() && len(viewers) < b.f.viewers; i++ {
		if b.net.InboxSize(i) >= benchPageSize {
			viewers = append(viewers, i)
		}
	}
	if len(viewers) == 0 {
		return errors.New("no user's inbox holds a page of 50 items; raise -avg-follows or -messages")
	}
	tokens := make([]string, len(viewers))
	for i, v := range viewers {
		t, err := b.token(v)
		if err != nil {
			return err
		}
		tokens[i] = t
	}
	body, err := json.Marshal(map[string]string{"query": benchHomeQuery})
	if err != nil {
		return err
	}
	// One read by each viewer first: the server's query cache, and its
	// last-seen writes, which a user's first request makes.
	if _, err := b.readLoad(ctx, body, tokens, min(8, len(tokens)), time.Minute, len(tokens)); err != nil {
		return err
	}
	for _, c := range levels {
		if err := b.waitIdle(ctx); err != nil {
			return err
		}
		before, err := b.srv.scrape(ctx)
		if err != nil {
			return err
		}
		cpu0 := processCPU()
		res, err := b.readLoad(ctx, body, tokens, c, d, 0)
		if err != nil {
			return err
		}
		clientCPU := (processCPU() - cpu0) / float64(res.requests) * 1e6
		after, err := b.srv.scrape(ctx)
		if err != nil {
			return err
		}
		// CPU per request does not depend on what else the machine runs
		// the way requests per second do.
		serverCPU := (after.sum("process_cpu_seconds_total", nil) - before.sum("process_cpu_seconds_total", nil)) / float64(res.requests) * 1e6
		op := map[string]string{"operation": "BenchHome"}
		h := after.histogram("herald_graphql_operation_duration_seconds", op).since(before.histogram("herald_graphql_operation_duration_seconds", op))
		res.serverP50, res.p99 = h.quantile(.5)*1000, h.quantile(.99)*1000
		res.calls = (after.sum("herald_store_calls_total", nil) - before.sum("herald_store_calls_total", nil)) / float64(res.requests)
		res.callsBy = callsByMethod(before, after, res.requests)
		if row != nil {
			row.ReadsPerSec, row.ReadP50Ms, row.ReadP99Ms, row.RoundTrips = res.perSec, res.serverP50, res.p99, res.calls
			continue
		}
		name := fmt.Sprintf("inbox page of 50 with authors, concurrency %d: ", c)
		fig := figure{Section: section, Name: name + "requests/s", Value: res.perSec, Unit: "/s", Samples: res.requests,
			Note: fmt.Sprintf("client p50 %.2f ms, p99 %.2f ms; CPU per request: server %.0f µs, bench's client %.0f µs", res.clientP50, res.client9, serverCPU, clientCPU)}
		if c == 8 {
			fig.Target, fig.Pass = atLeast(res.perSec, 4000, "%.0f/s")
		}
		b.add(fig)
		fig = figure{Section: section, Name: name + "server p99", Value: res.p99, Unit: "ms", Note: fmt.Sprintf("p50 %.2f ms", res.serverP50)}
		if c == 8 {
			fig.Target, fig.Pass = atMost(res.p99, 5, "%.0f ms")
		}
		b.add(fig)
		fig = figure{Section: section, Name: name + "storage calls per request", Value: res.calls, Unit: "", Note: res.callsBy}
		fig.Target, fig.Pass = atMost(res.calls, 3, "%.0f")
		b.add(fig)
	}
	return nil
}

// readLoad runs c clients reading timelines, the tokens in turn, until d
// passes or (if limit > 0) limit requests are made, and checks that each
// response is a page of 50 items.
func (b *bench) readLoad(ctx context.Context, body []byte, tokens []string, c int, d time.Duration, limit int) (readResult, error) {
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
	auths := make([][]string, len(tokens))
	for i, t := range tokens {
		auths[i] = []string{"Bearer " + t}
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
				err := b.readOnce(ctx, body, auths[i%int64(len(auths))], &buf)
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

func (b *bench) readOnce(ctx context.Context, body []byte, auth []string, buf *bytes.Buffer) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.base+"/graphql", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = http.Header{"Content-Type": jsonContentType, "Authorization": auth}
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
	if resp.StatusCode != http.StatusOK || bytes.Contains(data, []byte(`"errors"`)) || bytes.Count(data, cursorField) != benchPageSize {
		return fmt.Errorf("a timeline read answered HTTP %d: %.300s", resp.StatusCode, data)
	}
	return nil
}

// measureLive connects subscribers following one author, measures the
// server's memory per idle subscriber, and times a post's arrival at all.
func (b *bench) measureLive(ctx context.Context) error {
	author := b.liveAuthor()
	followers := b.net.FollowersOf(author)
	n := min(b.f.subscribers, len(followers))
	fmt.Fprintf(b.stderr, "bench: live: %d subscribers following an author of %d followers\n", n, len(followers))
	if err := b.waitIdle(ctx); err != nil {
		return err
	}
	memBefore, err := b.serverMemory(ctx)
	if err != nil {
		return err
	}
	base, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	subsBefore := int(base.sum("herald_subscriptions", nil))

	var received atomic.Int64
	clients := make([]*liveClient, n)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		dialErr error
		nextIdx atomic.Int64
	)
	url := b.wsURL()
	t0 := time.Now()
	for range 32 {
		wg.Go(func() {
			for {
				i := int(nextIdx.Add(1) - 1)
				if i >= n {
					return
				}
				token, err := b.token(int(followers[i]))
				if err == nil {
					clients[i], err = dialLive(ctx, url, token, func() { received.Add(1) })
				}
				if err != nil {
					mu.Lock()
					dialErr = errors.Join(dialErr, fmt.Errorf("subscriber %d: %w", i, err))
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.close()
			}
		}
	}()
	if dialErr != nil {
		return dialErr
	}
	if err := b.waitSubscribed(ctx, subsBefore+n); err != nil {
		return err
	}
	fmt.Fprintf(b.stderr, "bench: live: %d subscribed in %v\n", n, time.Since(t0).Round(time.Millisecond))
	time.Sleep(time.Second) // let the connections' first allocations settle
	memAfter, err := b.serverMemory(ctx)
	if err != nil {
		return err
	}
	perRSS := (memAfter.rss - memBefore.rss) / float64(n) / 1024
	perGo := (memAfter.heap + memAfter.stack - memBefore.heap - memBefore.stack) / float64(n) / 1024
	fig := figure{Section: "live", Name: fmt.Sprintf("server memory per idle subscriber (RSS, %d subscribers)", n), Value: perRSS, Unit: "KiB",
		Note: fmt.Sprintf("heap+stacks %.1f KiB", perGo)}
	fig.Target, fig.Pass = atMost(perRSS, 30, "%.0f KiB")
	b.add(fig)

	token, err := b.token(author)
	if err != nil {
		return err
	}
	const livePosts = 3
	var lats []time.Duration
	missing := 0
	for p := range livePosts {
		if err := b.waitIdle(ctx); err != nil {
			return err
		}
		received.Store(0)
		start := time.Now()
		id, err := b.post(ctx, token, fmt.Sprintf("live post %d", p))
		if err != nil {
			return err
		}
		deadline := time.Now().Add(b.f.liveTimeout)
		for received.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		for _, c := range clients {
			if at, ok := c.arrival(id); ok {
				lats = append(lats, at.Sub(start))
			} else {
				missing++
			}
		}
	}
	p99 := percentile(lats, .99)
	fig = figure{Section: "live", Name: fmt.Sprintf("%d subscribers: post until each has the event, p99", n), Value: p99, Unit: "ms", Samples: len(lats),
		Note: fmt.Sprintf("p50 %.1f ms, max %.1f ms, %d posts, %d events missing after %v", percentile(lats, .5), percentile(lats, 1), livePosts, missing, b.f.liveTimeout)}
	pass := p99 <= 1000 && missing == 0
	fig.Target, fig.Pass = "≤ 1000 ms, none missing", &pass
	b.add(fig)
	return nil
}

// liveAuthor is the author whose followers subscribe: the one with the
// fewest followers that still has -subscribers of them.
func (b *bench) liveAuthor() int {
	best := -1
	for i := range b.net.Users() {
		f := b.net.Followers(i)
		if best < 0 {
			best = i
			continue
		}
		bf := b.net.Followers(best)
		if (f >= b.f.subscribers && (bf < b.f.subscribers || f < bf)) || (bf < b.f.subscribers && f > bf) {
			best = i
		}
	}
	return best
}

// serverMem is the server's memory after a garbage collection, in bytes.
type serverMem struct{ heap, stack, rss float64 }

func (b *bench) serverMemory(ctx context.Context) (serverMem, error) {
	if err := b.srv.collectGarbage(ctx); err != nil {
		return serverMem{}, err
	}
	ms, err := b.srv.scrape(ctx)
	if err != nil {
		return serverMem{}, err
	}
	return serverMem{
		heap:  ms.sum("go_memstats_heap_alloc_bytes", nil),
		stack: ms.sum("go_memstats_stack_inuse_bytes", nil),
		rss:   ms.sum("process_resident_memory_bytes", nil),
	}, nil
}

// measureStrategies measures every strategy on one network, each with a
// server of its own on a data directory seeded for it.
func (b *bench) measureStrategies(ctx context.Context) error {
	main, mainSrv, mainSigner := b.net, b.srv, b.signer
	defer func() { b.net, b.srv, b.signer = main, mainSrv, mainSigner }()
	posts := min(b.f.posts, 10)
	d := min(b.f.duration, 3*time.Second)
	for _, st := range service.Strategies {
		n, err := seed.Generate(seed.Config{Seed: b.f.seed, Users: b.f.stratUsers, AvgFollows: b.f.avgFollows, Messages: b.f.stratUsers,
			Pinned: []int{min(1000, b.f.stratUsers-1)}, Strategy: st, CelebrityThreshold: b.cfg.CelebrityThreshold})
		if err != nil {
			return err
		}
		b.net = n
		b.report.StrategiesNetwork = describeNetwork(n)
		fmt.Fprintf(b.stderr, "bench: strategy %s\n", st)
		dir, secret, err := b.seedDir(ctx, n, string(st))
		if err != nil {
			return err
		}
		seeded, err := dirSize(dir)
		if err != nil {
			return err
		}
		srv, err := startBenchServer(ctx, dir, b.serverFlags(st), b.stderr)
		if err != nil {
			return err
		}
		b.srv, b.signer = srv, auth.NewSigner(secret, 24*time.Hour)
		row := strategyRow{Strategy: string(st), StoredBytesUser: float64(seeded) / float64(n.Users())}
		err = func() error {
			if err := b.waitIdle(ctx); err != nil {
				return err
			}
			before, err := dirSize(dir)
			if err != nil {
				return err
			}
			postLat, delivered, err := b.postAndTrack(ctx, n.Pinned(0), posts)
			if err != nil {
				return err
			}
			after, err := dirSize(dir)
			if err != nil {
				return err
			}
			row.PostP50Ms, row.DeliveryP50Ms = percentile(postLat, .5), percentile(delivered, .5)
			row.DiskPerPostKiB = float64(after-before) / float64(posts) / 1024
			return b.measureReads(ctx, "strategies", []int{8}, d, &row)
		}()
		srv.stop()
		if err != nil {
			return fmt.Errorf("strategy %s: %w", st, err)
		}
		b.report.Strategies = append(b.report.Strategies, row)
	}
	return nil
}
