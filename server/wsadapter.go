package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"

	"herald/graph"
	"herald/store"
	"herald/store/service"
)

// maxCloseReason is the most bytes a close frame's reason may hold: a control
// frame carries at most 125 bytes, two of which are the status code.
const maxCloseReason = 123

// wsAdapter implements gqlgen's transport.WebsocketImplementation over
// gorilla/websocket, so buffer sizes, compression and the origin check are
// ours to choose. It also keeps the set of open connections, so shutdown can
// close them: http.Server.Shutdown neither waits for nor closes hijacked
// connections.
type wsAdapter struct {
	upgrader     websocket.Upgrader
	writeTimeout time.Duration
	// initTimeout is how long a graphql-transport-ws client has to send
	// connection_init before it is closed with 4408.
	initTimeout time.Duration
	// pingInterval is how often a graphql-transport-ws connection is
	// pinged once acknowledged; one that answers no ping within two
	// intervals is dropped. Zero turns the pings off.
	pingInterval time.Duration
	// limits caps connections and their operations; the zero value
	// limits nothing (see enforce).
	limits wsLimits
	// sessions checks the sessions of open connections (see enforce);
	// nil: they are never checked again after connection_init.
	sessions authenticator
	// sweepEvery is how often every open connection's session is checked
	// again (service.SessionRecheck).
	sweepEvery time.Duration
	// refused, if not nil, counts a refused or closed connection or
	// operation by reason (herald_websocket_refused_total).
	refused func(reason string)

	mu      sync.Mutex
	conns   map[*wsConn]struct{}
	byAddr  map[netip.Addr]int     // open connections per client address key, with a per-address cap
	byUser  map[store.ID][]*wsConn // open connections with a session, per user
	sweep   *time.Timer            // the next sweep (sweepSessions); nil while no connection has a session
	closing bool
}

var _ transport.WebsocketImplementation = (*wsAdapter)(nil)

// newWSAdapter returns an adapter that accepts only origins allowed by
// origins and gives up on any write that takes longer than writeTimeout.
func newWSAdapter(origins *originPolicy, writeTimeout time.Duration) *wsAdapter {
	return &wsAdapter{
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			ReadBufferSize:   1024,
			WriteBufferSize:  4096,
			// Idle connections hold no write buffer: with thousands of
			// subscribers mostly waiting, that is most of their memory.
			WriteBufferPool: &sync.Pool{},
			// Messages are small JSON documents; per-connection deflate
			// state would cost more memory and CPU than it saves.
			EnableCompression: false,
			CheckOrigin:       origins.allowed,
			// Leave the response to gqlgen, which answers 400 when Accept
			// fails; writing here too would write the header twice. A
			// refused origin is answered with 403 before gqlgen runs (see
			// originPolicy.middleware).
			Error: func(http.ResponseWriter, *http.Request, int, error) {},
		},
		writeTimeout: writeTimeout,
		initTimeout:  wsInitTimeout,
		pingInterval: wsPingInterval,
		sweepEvery:   service.SessionRecheck,
		conns:        make(map[*wsConn]struct{}),
		byAddr:       make(map[netip.Addr]int),
		byUser:       make(map[store.ID][]*wsConn),
	}
}

// Accept implements transport.WebsocketImplementation. It negotiates one of
// the subprotocols gqlgen offers (graphql-transport-ws or the legacy
// graphql-ws), in the client's order of preference. A client that offers
// neither is closed at once with 4406, as the graphql-ws reference server
// does, and one over the caps on connections (in all, from its address)
// with 1013 Try Again Later, which graphql-ws clients retry with backoff.
// Either way the connection is handed to gqlgen already closed, so that
// it ends quietly. A connection is counted from before its handshake is
// answered, so a client that saw its handshake succeed is counted.
func (a *wsAdapter) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
	c := &wsConn{writeTimeout: a.writeTimeout, adapter: a}
	proto := negotiate(websocket.Subprotocols(r), opts.Subprotocols)
	addr, hasAddr := graph.ClientAddrFromContext(r.Context())
	code, refusal, why := closeSubprotocolNotAcceptable, "Subprotocol not acceptable", refusedSubprotocol
	a.mu.Lock()
	if a.closing {
		a.mu.Unlock()
		return nil, errors.New("server is shutting down")
	}
	if proto != "" {
		code = closeTryAgainLater
		refusal, why = a.admitLocked(c, addr, hasAddr)
	}
	a.mu.Unlock()

	up := a.upgrader // a copy, so concurrent Accepts never share Subprotocols
	up.Subprotocols = []string{}
	if proto != "" {
		up.Subprotocols = []string{proto}
	}
	raw, err := up.Upgrade(w, r, opts.ResponseHeader)
	if err != nil {
		a.forget(c)
		return nil, err
	}
	var p wsProtocol
	var tws *transportWS
	switch {
	case refusal != "":
	case proto == subprotocolTransportWS:
		tws = newTransportWS(c, a.pingInterval, a.limits.subscriptionsPerConn)
		p = tws
	default:
		p = newLegacyWS(c, a.limits.subscriptionsPerConn)
	}
	a.mu.Lock()
	// Under the lock, for closeAll.
	c.conn, c.proto = raw, p
	closing := a.closing
	a.mu.Unlock()
	if h, ok := r.Context().Value(connHolderKey{}).(*connHolder); ok {
		h.set(c)
	}
	if closing {
		c.closeWith(websocket.CloseGoingAway, "server shutting down")
		return nil, errors.New("server is shutting down")
	}
	if refusal != "" {
		a.count(why)
		c.closeWith(code, refusal)
		return c, nil
	}
	if tws != nil {
		tws.startInitTimer(a.initTimeout)
	}
	return c, nil
}

// negotiate returns the first of the client's subprotocols that the server
// supports, "" if none.
func negotiate(client, server []string) string {
	for _, p := range client {
		if slices.Contains(server, p) {
			return p
		}
	}
	return ""
}

// Len returns the number of open websocket connections.
func (a *wsAdapter) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.conns)
}

// closeAll refuses new connections and closes every open one with 1001
// Going Away. gqlgen's read loop then fails, which cancels the connection's
// subscriptions.
func (a *wsAdapter) closeAll() {
	a.mu.Lock()
	a.closing = true
	if a.sweep != nil {
		a.sweep.Stop()
	}
	conns := make([]*wsConn, 0, len(a.conns))
	for c := range a.conns {
		if c.conn != nil { // else Accept closes it, seeing closing
			conns = append(conns, c)
		}
	}
	a.mu.Unlock()
	for _, c := range conns {
		_ = c.WriteClose(websocket.CloseGoingAway, "server shutting down")
		_ = c.Close()
	}
}

// wsConn is one accepted connection. gqlgen reads from one goroutine and
// writes from several (each subscription, the keep-alive ticker, close), but
// gorilla allows one concurrent writer: mu serializes the data writes.
// Close and WriteControl are safe to call concurrently with anything.
type wsConn struct {
	conn         *websocket.Conn
	writeTimeout time.Duration
	adapter      *wsAdapter
	// proto is the subprotocol's state (transportWS or legacyWS); nil for
	// a connection refused at once, which gqlgen only sees fail.
	proto wsProtocol

	mu        sync.Mutex // held while writing a data frame
	closeOnce sync.Once

	closeMu   sync.Mutex
	closeSent bool // the first close frame wins; later ones are dropped

	// What the adapter keeps of the connection, under adapter.mu (see
	// wslimits.go).
	counted bool          // in adapter.conns
	addrKey netip.Addr    // its client address key, if counted in adapter.byAddr
	sess    store.Session // its session, from connection_init; zero if none
	expiry  *time.Timer   // closes it when sess expires
	gone    bool          // closed: it must not be registered again
}

var (
	_ transport.WebsocketConn          = (*wsConn)(nil)
	_ transport.WebsocketReadLimiter   = (*wsConn)(nil)
	_ transport.WebsocketReadDeadliner = (*wsConn)(nil)
)

// NextReader returns the next data message. A close by the peer with 1000
// Normal Closure, 1001 Going Away (a browser leaving the page) or no status
// is reported as transport.ErrWebsocketClosed, which gqlgen treats as an
// orderly end rather than an error.
//
// Each message is read whole and checked by proto first: a violation
// closes the connection with the protocol's close code, some messages are
// handled without gqlgen, and operations reach gqlgen under ids of their
// own (see transportWS.receive, legacyWS.receive).
func (c *wsConn) NextReader() (int, io.Reader, error) {
	for {
		t, r, err := c.conn.NextReader()
		if err != nil {
			return t, nil, readError(err)
		}
		if c.proto == nil {
			return t, r, nil
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return t, nil, readError(err)
		}
		out, err := c.proto.receive(data)
		if err != nil {
			return t, nil, err
		}
		if out != nil {
			return t, bytes.NewReader(out), nil
		}
	}
}

func readError(err error) error {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
		return transport.ErrWebsocketClosed
	}
	return err
}

// WriteJSON writes v as one text message. A write that does not finish
// within the write timeout (a client that stopped reading) fails, and the
// connection is closed so its subscriptions end instead of piling up.
// proto may drop the message or rewrite its id (see wsProtocol.outgoing);
// it decides under the write lock, so that nothing it let through can be
// written after a message that ended the operation.
func (c *wsConn) WriteJSON(v any) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b []byte
	var err error
	if c.proto != nil {
		b, err = c.proto.outgoing(v)
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil || b == nil {
		return err
	}
	return c.writeLocked(b)
}

// writeText writes b as one text message, as WriteJSON does.
func (c *wsConn) writeText(b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.writeLocked(b)
}

func (c *wsConn) writeLocked(b []byte) error {
	if err := c.conn.SetWriteDeadline(time.Now().Add(c.writeTimeout)); err != nil {
		return err
	}
	if err := c.conn.WriteMessage(websocket.TextMessage, b); err != nil {
		_ = c.Close()
		return err
	}
	return nil
}

// WriteClose sends a close frame with code and message (cut to fit a
// control frame). It does not wait for the peer's reply; gqlgen calls Close
// right after. Only the first close frame is sent: when the adapter closed
// the connection for a graphql-transport-ws violation, gqlgen's own close
// that follows is dropped. On graphql-transport-ws, gqlgen's 1002 closes
// become the protocol's codes.
func (c *wsConn) WriteClose(code int, message string) error {
	_, err := c.writeClose(code, message)
	return err
}

// writeClose is WriteClose that also reports whether its close frame was
// the first.
func (c *wsConn) writeClose(code int, message string) (first bool, err error) {
	if c.proto != nil {
		code, message = c.proto.translateClose(code, message)
	}
	c.closeMu.Lock()
	sent := c.closeSent
	c.closeSent = true
	c.closeMu.Unlock()
	if sent {
		return false, nil
	}
	if len(message) > maxCloseReason {
		message = truncateUTF8(message, maxCloseReason)
	}
	return true, c.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, message), time.Now().Add(c.writeTimeout))
}

// Close closes the underlying network connection. It is safe to call more
// than once and from any goroutine.
func (c *wsConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if c.proto != nil {
			c.proto.stop()
		}
		c.adapter.forget(c)
		err = c.conn.Close()
	})
	return err
}

// closeWith sends a close frame with code and reason and closes the
// connection. It reports whether it was the first to close it, so that
// what closed a connection is counted once.
func (c *wsConn) closeWith(code int, reason string) bool {
	first, _ := c.writeClose(code, reason)
	_ = c.Close()
	return first
}

// Subprotocol returns the negotiated subprotocol, "" if none.
func (c *wsConn) Subprotocol() string { return c.conn.Subprotocol() }

// SetReadLimit implements transport.WebsocketReadLimiter: a larger message
// fails the read and closes the connection with 1009 Message Too Big.
func (c *wsConn) SetReadLimit(limit int64) { c.conn.SetReadLimit(limit) }

// SetReadDeadline implements transport.WebsocketReadDeadliner; gqlgen uses
// it to drop graphql-transport-ws clients that stop answering pings.
func (c *wsConn) SetReadDeadline(t time.Time) error { return c.conn.SetReadDeadline(t) }

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !isRuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

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

// wsTracker wraps the handler of websocket upgrades: it counts the handlers
// still running, so shutdown can wait for them, and closes each connection
// when its handler returns.
type wsTracker struct {
	mu      sync.Mutex
	wg      sync.WaitGroup
	closing bool
}

// middleware passes non-upgrade requests through untouched. It refuses new
// upgrades with 503 once shutdown has begun.
func (t *wsTracker) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isUpgrade(r) {
			next.ServeHTTP(w, r)
			return
		}
		t.mu.Lock()
		if t.closing {
			t.mu.Unlock()
			http.Error(w, "server is shutting down", http.StatusServiceUnavailable)
			return
		}
		// Add under the lock that wait takes first, so Add never races Wait.
		t.wg.Add(1)
		t.mu.Unlock()

		// The connection outlives this handler (see detachWriter), so its
		// context must not end with the request's.
		h := &connHolder{}
		ctx := context.WithValue(context.WithoutCancel(r.Context()), connHolderKey{}, h)
		dw := &detachWriter{rw: w, done: make(chan struct{})}
		go func() {
			defer t.wg.Done()
			defer dw.finish()
			defer h.close()
			// net/http recovers a handler's panic in its own goroutine,
			// which this one is not.
			defer func() {
				if p := recover(); p != nil && p != http.ErrAbortHandler {
					dw.panicked.Store(true)
					log.Printf("http: panic serving %v: %v\n%s", r.RemoteAddr, p, debug.Stack())
				}
			}()
			next.ServeHTTP(dw, r.WithContext(ctx))
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

// wait refuses new upgrades and waits until every upgrade handler has
// returned or ctx ends.
func (t *wsTracker) wait(ctx context.Context) error {
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

// isUpgrade reports whether r asks to switch protocols. It is the same test
// gqlgen's websocket transport uses to claim a request.
func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != ""
}

// originPolicy decides which browser origins may open a websocket, and
// (through cors) which may call /graphql over HTTP. A websocket is not
// subject to CORS, so without this check any page a user visits could open
// one with the user's cookies (cross-site websocket hijacking). Herald
// authenticates with bearer tokens, not cookies, but the check is cheap and
// keeps that door shut for good.
type originPolicy struct {
	any  bool
	list map[string]bool // normalized "scheme://host[:port]"
}

// newOriginPolicy builds a policy from an allow-list of origins such as
// "https://app.example.com". The entry "*" allows every origin.
func newOriginPolicy(origins []string) (*originPolicy, error) {
	p := &originPolicy{list: make(map[string]bool)}
	for _, o := range origins {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o == "*" {
			p.any = true
			continue
		}
		n, ok := normalizeOrigin(o)
		if !ok {
			return nil, fmt.Errorf("invalid origin %q: want scheme://host[:port]", o)
		}
		p.list[n] = true
	}
	return p, nil
}

// allowed reports whether r may be upgraded: requests without an Origin
// (non-browser clients), same-origin requests, and listed origins.
func (p *originPolicy) allowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || p.any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	n, ok := normalizeOrigin(origin)
	return ok && p.list[n]
}

// middleware answers 403 to an upgrade request from an origin that is not
// allowed, before gqlgen sees it (gqlgen would answer any failed upgrade
// with 400).
func (p *originPolicy) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isUpgrade(r) && !p.allowed(r) {
			http.Error(w, "websocket origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func normalizeOrigin(o string) (string, bool) {
	u, err := url.Parse(o)
	if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host), true
}
