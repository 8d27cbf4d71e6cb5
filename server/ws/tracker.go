package ws

import (
	"bufio"
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// connHolderKey is the context key of the connHolder of an upgrade request.
type connHolderKey struct{}

// connHolder lets the handler that wraps a websocket upgrade find the
// connection gqlgen accepted, to close it once the handler returns: gqlgen
// leaves it open on a few error paths (for example an init payload that is
// not a JSON object).
type connHolder struct {
	mu   sync.Mutex
	conn *wsConn
}

func (h *connHolder) set(c *wsConn) {
	h.mu.Lock()
	h.conn = c
	h.mu.Unlock()
}

func (h *connHolder) get() *wsConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conn
}

func (h *connHolder) close() {
	h.mu.Lock()
	c := h.conn
	h.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// Tracker wraps the handler of websocket upgrades: it counts the handlers
// still running, so shutdown can wait for them, and closes each connection
// when its handler returns. Its zero value is ready to use.
type Tracker struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	closing bool
}

// Middleware passes non-upgrade requests through untouched. It refuses new
// upgrades with 503 once shutdown has begun.
func (t *Tracker) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !IsUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		t.mu.Lock()
		if t.closing {
			t.mu.Unlock()
			http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
			return
		}
		// Add under the lock that Wait takes first, so Add never races wg.Wait.
		t.wg.Add(1)
		t.mu.Unlock()

		// The connection outlives this handler (see detachWriter), so its
		// context must not end with the request's.
		h := &connHolder{}
		ctx := context.WithValue(context.WithoutCancel(r.Context()), connHolderKey{}, h)
		dw := &detachWriter{rw: w, done: make(chan struct{})}
		// The goroutine keeps the request gqlgen gets, whose header Accept
		// lets go, and not the one net/http made.
		req, remote := r.WithContext(ctx), r.RemoteAddr
		go func() {
			defer t.wg.Done()
			defer dw.finish()
			defer h.close()
			// net/http recovers a handler's panic in its own goroutine,
			// which this one is not.
			defer func() {
				if p := recover(); p != nil && p != http.ErrAbortHandler {
					dw.panicked.Store(true)
					log.Printf("http: panic serving %v: %v\n%s", remote, p, debug.Stack())
				}
			}()
			next.ServeHTTP(dw, req)
		}()
		<-dw.done
		if dw.panicked.Load() && !dw.hijacked.Load() {
			panic(http.ErrAbortHandler) // net/http closes the connection
		}
	})
}

// detachWriter lets an upgrade handler return to net/http as soon as the
// connection is hijacked, while the websocket carries on in a goroutine of
// its own. net/http's per-connection state (a 4 KiB read buffer, a 4 KiB
// write buffer, the request and response) then becomes garbage instead of
// living as long as the websocket, and the goroutine's stack lacks the
// frames of the server and the outer middleware: with thousands of idle
// subscribers that is a good part of their memory.
//
// done is closed once the handler may return: after a successful Hijack
// (net/http no longer touches the response), or when the handler is done
// with the response without hijacking. After Hijack the writer forgets
// net/http's response, since gqlgen's handler keeps this writer alive.
type detachWriter struct {
	mu       sync.Mutex
	rw       http.ResponseWriter // nil once hijacked
	once     sync.Once
	done     chan struct{}
	hijacked atomic.Bool
	panicked atomic.Bool
}

func (d *detachWriter) finish() { d.once.Do(func() { close(d.done) }) }

func (d *detachWriter) writer() http.ResponseWriter {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rw
}

// Header implements http.ResponseWriter; after Hijack it returns a
// header that goes nowhere.
func (d *detachWriter) Header() http.Header {
	if w := d.writer(); w != nil {
		return w.Header()
	}
	return http.Header{}
}

// Write implements http.ResponseWriter; after Hijack it fails with
// http.ErrHijacked, as net/http's response does.
func (d *detachWriter) Write(p []byte) (int, error) {
	if w := d.writer(); w != nil {
		return w.Write(p)
	}
	return 0, http.ErrHijacked
}

// WriteHeader implements http.ResponseWriter; after Hijack it does
// nothing.
func (d *detachWriter) WriteHeader(code int) {
	if w := d.writer(); w != nil {
		w.WriteHeader(code)
	}
}

// Hijack implements http.Hijacker, and lets the handler's caller return.
func (d *detachWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w := d.writer()
	if w == nil {
		return nil, nil, http.ErrHijacked
	}
	h, ok := w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("response writer does not support hijacking")
	}
	c, brw, err := h.Hijack()
	if err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	d.rw = nil
	d.mu.Unlock()
	d.hijacked.Store(true)
	d.finish()
	return c, brw, nil
}

// Wait refuses new upgrades and waits until every upgrade handler has
// returned or ctx ends.
func (t *Tracker) Wait(ctx context.Context) error {
	t.mu.Lock()
	t.closing = true
	t.mu.Unlock()
	done := make(chan struct{})
	go func() {
		t.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// IsUpgrade reports whether r asks to switch protocols. It is the same test
// gqlgen's websocket transport uses to claim a request.
func IsUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != ""
}
