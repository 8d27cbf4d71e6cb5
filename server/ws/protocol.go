package ws

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// The graphql-transport-ws subprotocol (github.com/enisdenjo/graphql-ws,
// PROTOCOL.md); its close codes are in closecodes.go. gqlgen's transport
// implements most of the message flow but closes with 1002 where the
// protocol names its own codes, reuses a subscription id without complaint
// and may send a complete after an error; transportWS, sitting in our
// adapter between gorilla and gqlgen, enforces the rest.
const subprotocolTransportWS = "graphql-transport-ws"

// errProtocolClosed is what NextReader returns after the protocol state
// (transportWS, legacyWS) closed the connection for a violation; gqlgen's
// read loop then ends.
var errProtocolClosed = errors.New("websocket: connection closed for a protocol violation")

// wsProtocol is the state of one connection's subprotocol, sitting in the
// adapter between gorilla and gqlgen: transportWS or legacyWS.
type wsProtocol interface {
	// receive checks one client message. It returns what gqlgen should
	// see (the message, or a copy under gqlgen's operation id), or nil
	// for a message gqlgen must not see. A violation closes the
	// connection and returns an error.
	receive(data []byte) ([]byte, error)
	// outgoing returns gqlgen's message v as the client gets it (under
	// the client's operation id), or nil when it must not go out. The
	// caller holds the connection's write lock, so what outgoing decides
	// and the write happen in one step.
	outgoing(v any) ([]byte, error)
	// translateClose maps gqlgen's close codes to the protocol's.
	translateClose(code int, reason string) (int, string)
	// stop releases the protocol's timers once the connection closed.
	stop()
}

// transportWS is the graphql-transport-ws state of one connection. receive
// sees every client message before gqlgen does; outgoing sees every
// message gqlgen writes.
type transportWS struct {
	conn *wsConn

	mu        sync.Mutex
	initSeen  bool  // a connection_init was passed to gqlgen
	acked     bool  // gqlgen wrote connection_ack
	ops       wsOps // operations subscribed and not yet ended
	initTimer *time.Timer

	// Keep-alive, from connection_ack on: a ping every pingInterval, and a
	// read deadline of two intervals that each pong lifts until the next
	// ping, as gqlgen's PingPongInterval does. gqlgen's runs a goroutine
	// (a ticker loop) per connection; a timer costs no goroutine between
	// pings, which matters with thousands of idle subscribers.
	pingInterval time.Duration
	pingTimer    *time.Timer
	receivedPong bool
	stopped      bool // the connection closed: no more pings
}

// newTransportWS returns the state of a new connection, which may run at
// most maxOps operations at once (0: any number).
func newTransportWS(c *wsConn, pingInterval time.Duration, maxOps int) *transportWS {
	return &transportWS{conn: c, ops: wsOps{max: maxOps}, pingInterval: pingInterval}
}

// startInitTimer closes the connection with 4408 unless a connection_init
// arrives within d. gqlgen has its own init timeout, but closes with 1002.
func (p *transportWS) startInitTimer(d time.Duration) {
	if d <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.initTimer = time.AfterFunc(d, func() {
		p.mu.Lock()
		seen := p.initSeen
		p.mu.Unlock()
		if !seen {
			p.conn.closeWith(closeInitTimeout, "Connection initialisation timeout")
		}
	})
}

// startPingsLocked starts the keep-alive once the connection is
// acknowledged; a client that answers no ping within two intervals is then
// dropped by the read deadline. Call with p.mu held.
func (p *transportWS) startPingsLocked() {
	if p.pingInterval <= 0 || p.stopped || p.pingTimer != nil {
		return
	}
	_ = p.conn.SetReadDeadline(time.Now().Add(2 * p.pingInterval))
	p.pingTimer = time.AfterFunc(p.pingInterval, p.ping)
}

// ping sends a keep-alive ping, pushes the read deadline two intervals out
// if the previous ping was answered, and schedules the next.
func (p *transportWS) ping() {
	if err := p.conn.writeText([]byte(`{"type":"ping"}`)); err != nil {
		return // writeText closed the connection
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if p.receivedPong {
		_ = p.conn.SetReadDeadline(time.Now().Add(2 * p.pingInterval))
	}
	p.receivedPong = false
	p.pingTimer.Reset(p.pingInterval)
}

func (p *transportWS) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.initTimer != nil {
		p.initTimer.Stop()
	}
	if p.pingTimer != nil {
		p.pingTimer.Stop()
	}
}

// receive checks one client message. It returns what gqlgen should see: a
// ping is answered here, and a pong or complete that gqlgen would refuse
// before the connection is acknowledged is dropped; subscribe and complete
// go on under gqlgen's operation id (see wsOps). A violation closes the
// connection with the protocol's code and returns an error.
func (p *transportWS) receive(data []byte) ([]byte, error) {
	var m clientMsg
	if err := json.Unmarshal(data, &m); err != nil || m.Type == nil {
		return nil, p.violation(closeBadRequest, "Invalid message received")
	}
	switch typ := *m.Type; typ {
	case "connection_init":
		if !nullOrObject(m.Payload) {
			return nil, p.violation(closeBadRequest, `Invalid message received: "connection_init" payload must be an object`)
		}
		p.mu.Lock()
		again := p.initSeen
		p.initSeen = true
		if p.initTimer != nil {
			p.initTimer.Stop()
			p.initTimer = nil // the connection lives on; the timer need not
		}
		p.mu.Unlock()
		if again {
			return nil, p.violation(closeTooManyInits, "Too many initialisation requests")
		}
		return data, nil

	case "ping":
		if !nullOrObject(m.Payload) {
			return nil, p.violation(closeBadRequest, `Invalid message received: "ping" payload must be an object`)
		}
		// Answered here, before or after the acknowledgement, echoing the
		// payload (gqlgen would refuse a ping before connection_ack).
		pong := map[string]any{"type": "pong"}
		if !isNull(m.Payload) {
			pong["payload"] = m.Payload
		}
		b, err := json.Marshal(pong)
		if err != nil {
			return nil, err
		}
		return nil, p.conn.writeText(b)

	case "pong":
		if !nullOrObject(m.Payload) {
			return nil, p.violation(closeBadRequest, `Invalid message received: "pong" payload must be an object`)
		}
		// After the acknowledgement it answers the keep-alive ping (see
		// startPingsLocked) and lifts the read deadline until the next
		// ping; before, it is an unsolicited heartbeat. gqlgen, whose own
		// pings are off, need not see it.
		p.mu.Lock()
		if p.acked {
			p.receivedPong = true
			_ = p.conn.SetReadDeadline(time.Time{})
		}
		p.mu.Unlock()
		return nil, nil

	case "subscribe":
		if m.ID == nil || *m.ID == "" {
			return nil, p.violation(closeBadRequest, `Invalid message received: "subscribe" needs a non-empty "id"`)
		}
		if reason := checkSubscribePayload(m.Payload); reason != "" {
			return nil, p.violation(closeBadRequest, "Invalid message received: "+reason)
		}
		id := *m.ID
		// Only this goroutine (gqlgen's reader) starts operations, so
		// what is read here still holds when the operation is added.
		p.mu.Lock()
		acked, taken, full := p.acked, p.ops.active(id), p.ops.full()
		p.mu.Unlock()
		if !acked {
			return nil, p.violation(closeUnauthorized, "Unauthorized")
		}
		if taken {
			return nil, p.violation(closeSubscriberTaken, fmt.Sprintf("Subscriber for %s already exists", id))
		}
		if full {
			// A list of GraphQL errors, as the protocol's error message
			// carries; the connection and its other operations go on.
			return nil, p.conn.refuseOperation(id, []any{tooManySubscriptions(p.ops.max)})
		}
		if err := p.conn.checkSession(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		gid := p.ops.start(id)
		p.mu.Unlock()
		return withID(typ, gid, m.Payload)

	case "complete":
		if m.ID == nil || *m.ID == "" {
			return nil, p.violation(closeBadRequest, `Invalid message received: "complete" needs a non-empty "id"`)
		}
		p.mu.Lock()
		// Nothing more is sent for this id, not even gqlgen's complete.
		gid, ok := p.ops.end(*m.ID)
		p.mu.Unlock()
		if !ok {
			// An unknown or finished id is ignored, as gqlgen does once
			// acknowledged (before, no id can be active).
			return nil, nil
		}
		return withID(typ, gid, nil)

	case "connection_ack", "next", "error":
		return nil, p.violation(closeBadRequest, fmt.Sprintf("Unexpected message of type %s received", typ))
	default:
		return nil, p.violation(closeBadRequest, "Invalid message type")
	}
}

// outgoing returns gqlgen's message v under the client's id, and tracks
// the acknowledgement and the operations that ended. Nothing is sent for
// an id after its error or complete, or after the client completed it.
func (p *transportWS) outgoing(v any) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ack, err := p.ops.route(v, "next")
	if ack {
		p.acked = true
		p.startPingsLocked()
	}
	return b, err
}

// translateClose maps gqlgen's 1002 closes to the protocol's codes.
func (p *transportWS) translateClose(code int, reason string) (int, string) {
	if code != closeProtocolError {
		return code, reason
	}
	if reason == "connection initialisation timeout" {
		return closeInitTimeout, "Connection initialisation timeout"
	}
	return closeBadRequest, reason
}

func (p *transportWS) violation(code int, reason string) error {
	p.conn.closeWith(code, reason)
	return fmt.Errorf("%w: %d %s", errProtocolClosed, code, reason)
}

// checkSubscribePayload returns why a subscribe payload is invalid, "" if
// it is valid: an object with a string query, and optional operationName
// (string), variables and extensions (objects).
func checkSubscribePayload(raw json.RawMessage) string {
	if isNull(raw) || !nullOrObject(raw) {
		return `"subscribe" payload must be an object`
	}
	var f map[string]json.RawMessage
	if json.Unmarshal(raw, &f) != nil {
		return `"subscribe" payload must be an object`
	}
	if q := f["query"]; len(q) == 0 || q[0] != '"' {
		return `"subscribe" payload needs a string "query"`
	}
	if n := f["operationName"]; !isNull(n) && n[0] != '"' {
		return `"operationName" must be a string or null`
	}
	for _, k := range []string{"variables", "extensions"} {
		if !nullOrObject(f[k]) {
			return fmt.Sprintf("%q must be an object or null", k)
		}
	}
	return ""
}

// isNull reports whether a decoded JSON value is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// nullOrObject reports whether a decoded JSON value is absent, null or an
// object. raw is valid JSON, so its first byte tells its kind.
func nullOrObject(raw json.RawMessage) bool {
	return isNull(raw) || raw[0] == '{'
}
