// Package ws is Herald's websocket transport: gqlgen's websocket
// implementation over gorilla/websocket, speaking graphql-transport-ws and
// the legacy graphql-ws, with the connection and subscription caps, the
// sessions of open connections checked until they end, and the close codes
// of every refusal.
package ws

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/gorilla/websocket"

	"herald/graph"
	"herald/store"
	"herald/store/service"
)

// Websocket timing. The legacy graphql-ws protocol has only server-sent
// keep-alives ("ka"); graphql-transport-ws uses ping/pong, and a client that
// leaves a ping unanswered for two intervals is dropped, which frees its
// subscriptions when a network path dies silently.
const (
	// InitTimeout is how long a client has to send connection_init.
	InitTimeout = 10 * time.Second
	// KeepAlive is how often a graphql-ws connection gets a "ka".
	KeepAlive = 15 * time.Second
	// PingInterval is how often a graphql-transport-ws connection is
	// pinged once acknowledged.
	PingInterval = 15 * time.Second
	// WriteTimeout bounds each write to a connection.
	WriteTimeout = 10 * time.Second
)

// maxCloseReason is the most bytes a close frame's reason may hold: a control
// frame carries at most 125 bytes, two of which are the status code.
const maxCloseReason = 123

// Adapter implements gqlgen's transport.WebsocketImplementation over
// gorilla/websocket, so buffer sizes, compression and the origin check are
// ours to choose. It also keeps the set of open connections, so shutdown can
// close them: http.Server.Shutdown neither waits for nor closes hijacked
// connections.
type Adapter struct {
	upgrader     websocket.Upgrader
	writeTimeout time.Duration
	// initTimeout is how long a graphql-transport-ws client has to send
	// connection_init before it is closed with 4408.
	initTimeout time.Duration
	// pingInterval is how often a graphql-transport-ws connection is
	// pinged once acknowledged; one that answers no ping within two
	// intervals is dropped. Zero turns the pings off.
	pingInterval time.Duration
	// keepAlive is how often a graphql-ws connection gets a "ka" once
	// acknowledged. Zero turns them off.
	keepAlive time.Duration
	// limits caps connections and their operations; the zero value
	// limits nothing (see Enforce).
	limits Limits
	// sessions checks the sessions of open connections (see Enforce);
	// nil: they are never checked again after connection_init.
	sessions authenticator
	// sweepEvery is how often every open connection's session is checked
	// again (service.SessionRecheck).
	sweepEvery time.Duration
	// Refused, if not nil, counts a refused or closed connection or
	// operation by reason, one of RefusedReasons
	// (herald_websocket_refused_total). Set it before the adapter accepts
	// connections.
	Refused func(reason string)

	mu      sync.Mutex
	conns   map[*wsConn]struct{}
	byAddr  map[netip.Addr]int     // open connections per client address key, with a per-address cap
	byUser  map[store.ID][]*wsConn // open connections with a session, per user
	sweep   *time.Timer            // the next sweep (sweepSessions); nil while no connection has a session
	closing bool
	// checks counts the session checks running off a connection's own
	// goroutine (sweeps, revocations), which read the store: CloseAll
	// waits for them, so none outlives the store it reads.
	checks sync.WaitGroup
}

var _ transport.WebsocketImplementation = (*Adapter)(nil)

// NewAdapter returns an adapter that accepts only the origins checkOrigin
// allows and gives up on any write that takes longer than writeTimeout.
func NewAdapter(checkOrigin func(*http.Request) bool, writeTimeout time.Duration) *Adapter {
	return &Adapter{
		upgrader: websocket.Upgrader{
			HandshakeTimeout: 10 * time.Second,
			// Every connection keeps its read buffer while it waits.
			// Client messages are small, and a larger one is read in
			// several pieces; 256 bytes hold any control frame (125).
			ReadBufferSize:  256,
			WriteBufferSize: 4096,
			// Idle connections hold no write buffer: with thousands of
			// subscribers mostly waiting, that is most of their memory.
			WriteBufferPool: &sync.Pool{},
			// Messages are small JSON documents; per-connection deflate
			// state would cost more memory and CPU than it saves.
			EnableCompression: false,
			CheckOrigin:       checkOrigin,
			// Leave the response to gqlgen, which answers 400 when Accept
			// fails; writing here too would write the header twice. A
			// refused origin is answered with 403 before gqlgen runs (by
			// the HTTP server's origin check).
			Error: func(http.ResponseWriter, *http.Request, int, error) {},
		},
		writeTimeout: writeTimeout,
		initTimeout:  InitTimeout,
		pingInterval: PingInterval,
		keepAlive:    KeepAlive,
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
func (a *Adapter) Accept(w http.ResponseWriter, r *http.Request, opts transport.WebsocketAcceptOptions) (transport.WebsocketConn, error) {
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
	// gqlgen keeps the request's header for the life of the connection,
	// to hand to each operation, and nothing of ours reads it there: past
	// the handshake the request lets it go.
	r.Header = nil
	var p wsProtocol
	var tws *transportWS
	switch {
	case refusal != "":
	case proto == subprotocolTransportWS:
		tws = newTransportWS(c, a.pingInterval, a.limits.SubscriptionsPerConn)
		p = tws
	default:
		p = newLegacyWS(c, a.keepAlive, a.limits.SubscriptionsPerConn)
	}
	a.mu.Lock()
	// Under the lock, for CloseAll.
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
func (a *Adapter) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.conns)
}

// CloseAll refuses new connections and closes every open one with 1001
// Going Away. gqlgen's read loop then fails, which cancels the connection's
// subscriptions. It returns once no session check is running, so the store
// can be closed after it.
func (a *Adapter) CloseAll() {
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
	a.checks.Wait()
}

// wsConn is one accepted connection. gqlgen reads from one goroutine and
// writes from several (each subscription, the keep-alive ticker, close), but
// gorilla allows one concurrent writer: mu serializes the data writes.
// Close and WriteControl are safe to call concurrently with anything.
type wsConn struct {
	conn         *websocket.Conn
	writeTimeout time.Duration
	adapter      *Adapter
	// proto is the subprotocol's state (transportWS or legacyWS); nil for
	// a connection refused at once, which gqlgen only sees fail.
	proto wsProtocol

	mu        sync.Mutex // held while writing a data frame
	closeOnce sync.Once

	closeMu   sync.Mutex
	closeSent bool // the first close frame wins; later ones are dropped

	// What the adapter keeps of the connection, under adapter.mu (see
	// limits.go).
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
