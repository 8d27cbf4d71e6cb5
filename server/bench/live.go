package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"herald/store"
)

// benchLiveQuery is what a live subscriber subscribes to.
const benchLiveQuery = `subscription BenchLive { inboxEvents { type messageId } }`

// liveClient is one graphql-transport-ws subscriber of inboxEvents that
// records when each ADDED event arrives.
type liveClient struct {
	conn    *websocket.Conn
	writeMu sync.Mutex
	mu      sync.Mutex
	added   map[string]time.Time // message id → arrival
	onAdded func()
	done    chan struct{}
	// ended is set when the server ends the subscription (complete or
	// error) while the connection stays open: every later event is lost
	// though no connection closed.
	ended atomic.Bool
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
		case "complete", "error":
			c.ended.Store(true)
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
