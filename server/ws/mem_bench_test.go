package ws_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"herald/server/internal/servertest"
	"herald/store/service"
)

var (
	idleSubscribers = flag.Int("idle-subscribers", 2000, "subscribers BenchmarkIdleSubscribers connects")
	idleProfiles    = flag.String("idle-profiles", "", "directory where BenchmarkIdleSubscribers writes heap.pb.gz and goroutine.txt while the subscribers are connected")
)

// BenchmarkIdleSubscribers measures the server's memory per idle
// subscriber, in process: -idle-subscribers graphql-transport-ws
// connections each send connection_init with a token and one inboxEvents
// subscription, then nothing. It reports the growth of HeapAlloc+StackInuse
// after a garbage collection (as herald bench does), its parts, and the
// goroutines per subscriber. The clients are raw sockets with no goroutine
// and no buffer, so what they add (a net.Conn each, well under 1 KiB) is
// counted in the figures. Run it with -benchtime=1x:
//
//	go test -run '^$' -bench IdleSubscribers -benchtime=1x ./server/ws/ -args -idle-subscribers=5000 -idle-profiles=/tmp/p
func BenchmarkIdleSubscribers(b *testing.B) {
	n := *idleSubscribers
	if *idleProfiles != "" {
		runtime.MemProfileRate = 1
	}
	// Every subscriber connects from 127.0.0.1.
	ts := servertest.New(b, func(c *servertest.Config) { c.Metrics = false; c.MaxWebsocketsPerAddress = 0 })
	srv, hub, signer := ts.Server, ts.Hub, ts.Signer
	// Tokens are minted for real users: the server refuses a token whose
	// user does not exist.
	tokens := make([]string, n)
	for i := range tokens {
		u, err := ts.Svc.SignUp(context.Background(), service.SignUpInput{Handle: fmt.Sprintf("idle%d", i), Password: "idle-subscriber"})
		require.NoError(b, err)
		tok, _, err := signer.Issue(u)
		require.NoError(b, err)
		tokens[i] = tok
	}
	addr := strings.TrimPrefix(srv.URL, "http://")

	for range b.N {
		before := idleMem()
		conns := make([]net.Conn, n)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			errs error
		)
		next := make(chan int)
		for range 32 {
			wg.Go(func() {
				for i := range next {
					c, err := dialIdleSubscriber(addr, tokens[i])
					if err != nil {
						mu.Lock()
						errs = errors.Join(errs, err)
						mu.Unlock()
						continue
					}
					conns[i] = c
				}
			})
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		require.NoError(b, errs)
		require.Eventually(b, func() bool { return hub.Len() == n }, time.Minute, 10*time.Millisecond)
		time.Sleep(time.Second) // let the connections' first allocations settle, as herald bench does
		after := idleMem()
		if d := *idleProfiles; d != "" {
			writeIdleProfiles(b, d)
		}

		per := func(a, b uint64) float64 { return (float64(a) - float64(b)) / float64(n) }
		b.ReportMetric(per(after.heap+after.stack, before.heap+before.stack)/1024, "KiB/sub")
		b.ReportMetric(per(after.heap, before.heap)/1024, "heapKiB/sub")
		b.ReportMetric(per(after.stack, before.stack)/1024, "stackKiB/sub")
		b.ReportMetric(per(uint64(after.goroutines), uint64(before.goroutines)), "goroutines/sub")

		for _, c := range conns {
			_ = c.Close()
		}
		require.Eventually(b, func() bool { return hub.Len() == 0 }, time.Minute, 10*time.Millisecond)
	}
}

// writeIdleProfiles writes the heap profile (every allocation sampled) and
// the goroutines, grouped by stack, into dir.
func writeIdleProfiles(tb testing.TB, dir string) {
	for name, debug := range map[string]int{"heap.pb.gz": 0, "goroutine.txt": 1} {
		f, err := os.Create(filepath.Join(dir, name))
		require.NoError(tb, err)
		require.NoError(tb, pprof.Lookup(strings.Split(name, ".")[0]).WriteTo(f, debug))
		require.NoError(tb, f.Close())
	}
}

type idleMemStats struct {
	heap, stack uint64
	goroutines  int
}

// idleMem collects garbage once, as herald bench does through
// /debug/pprof/heap?gc=1, and reads the figures.
func idleMem() idleMemStats {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return idleMemStats{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

// dialIdleSubscriber opens a graphql-transport-ws connection, sends
// connection_init with token and an inboxEvents subscription, and leaves
// it there: it never reads again, so the server's messages wait in the
// socket buffers, and it keeps no goroutine.
func dialIdleSubscriber(addr, token string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (net.Conn, error) {
		_ = c.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := "GET /graphql HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return fail(err)
	}
	var resp []byte
	buf := make([]byte, 512)
	for !bytes.Contains(resp, []byte("\r\n\r\n")) {
		k, err := c.Read(buf)
		if err != nil {
			return fail(err)
		}
		resp = append(resp, buf[:k]...)
	}
	if !bytes.HasPrefix(resp, []byte("HTTP/1.1 101 ")) {
		return fail(fmt.Errorf("handshake: %.100q", resp))
	}
	initMsg, _ := json.Marshal(map[string]any{"type": "connection_init", "payload": map[string]string{"authorization": "Bearer " + token}})
	subMsg := []byte(`{"type":"subscribe","id":"1","payload":{"query":"subscription { inboxEvents { type messageId } }"}}`)
	// The server acknowledges the init before it reads the next message,
	// so the subscribe may follow at once.
	if _, err := c.Write(append(clientTextFrame(initMsg), clientTextFrame(subMsg)...)); err != nil {
		return fail(err)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// clientTextFrame frames p as a client's text message, masked with the
// all-zero key (which leaves p as it is; the server only unmasks).
func clientTextFrame(p []byte) []byte {
	f := []byte{0x81}
	switch {
	case len(p) < 126:
		f = append(f, 0x80|byte(len(p)))
	case len(p) <= 0xFFFF:
		f = append(f, 0x80|126)
		f = binary.BigEndian.AppendUint16(f, uint16(len(p)))
	default:
		f = append(f, 0x80|127)
		f = binary.BigEndian.AppendUint64(f, uint64(len(p)))
	}
	f = append(f, 0, 0, 0, 0)
	return append(f, p...)
}
