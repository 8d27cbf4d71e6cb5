package ws

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// subprotocolGraphQLWS is the legacy graphql-ws subprotocol of Apollo's
// subscriptions-transport-ws (its PROTOCOL.md): start, stop, data, error,
// complete and server keep-alives ("ka").
const subprotocolGraphQLWS = "graphql-ws"

// legacyWS is the graphql-ws state of one connection. gqlgen speaks the
// message flow; legacyWS keeps its operations apart, as transportWS does
// for graphql-transport-ws: gqlgen replaces its record of an id that is
// started again, so before it every repeated start left a subscription
// running that no stop and no close could end.
//
//   - start with an id already active closes the connection with 4409
//     "Subscriber for <id> already exists", as graphql-transport-ws does;
//   - start over the connection's cap is answered with an error for that
//     id (TOO_MANY_SUBSCRIPTIONS), and the connection stays;
//   - stop of an active id ends it at once: the server answers with its
//     complete, as the reference server does, and sends nothing more for
//     it; a stop of any other id is ignored;
//   - the server's error or complete for an id ends it too.
//
// Everything else (connection_init, connection_terminate, malformed
// messages, a start before the acknowledgement) is left to gqlgen.
type legacyWS struct {
	conn *wsConn

	mu    sync.Mutex
	acked bool  // gqlgen wrote connection_ack
	ops   wsOps // operations started and not yet ended

	// Keep-alive: a "ka" every keepAlive from connection_ack on (gqlgen
	// sends the first with the ack). gqlgen's runs a goroutine with a
	// ticker per connection; a timer costs no goroutine between two.
	keepAlive time.Duration
	kaTimer   *time.Timer
	stopped   bool // the connection closed: no more keep-alives
}

// newLegacyWS returns the state of a new connection, which gets a "ka"
// every keepAlive once acknowledged (0: never) and may run at most maxOps
// operations at once (0: any number).
func newLegacyWS(c *wsConn, keepAlive time.Duration, maxOps int) *legacyWS {
	return &legacyWS{conn: c, ops: wsOps{max: maxOps}, keepAlive: keepAlive}
}

// legacyMsg is a client message of graphql-ws, decoded as gqlgen decodes
// it.
type legacyMsg struct {
	Type    string          `json:"type"`
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

func (p *legacyWS) receive(data []byte) ([]byte, error) {
	var m legacyMsg
	if json.Unmarshal(data, &m) != nil {
		return data, nil // gqlgen refuses it
	}
	p.mu.Lock()
	acked := p.acked
	p.mu.Unlock()
	if !acked {
		return data, nil // only connection_init is valid, which gqlgen checks
	}
	switch m.Type {
	case "start":
		// Only this goroutine (gqlgen's reader) starts operations, so
		// what is read here still holds when the operation is added.
		p.mu.Lock()
		taken, full := p.ops.active(m.ID), p.ops.full()
		p.mu.Unlock()
		if taken {
			p.conn.closeWith(closeSubscriberTaken, fmt.Sprintf("Subscriber for %s already exists", m.ID))
			return nil, fmt.Errorf("%w: %d start with an active id", errProtocolClosed, closeSubscriberTaken)
		}
		if full {
			// graphql-ws's error payload is one error object.
			return nil, p.conn.refuseOperation(m.ID, tooManySubscriptions(p.ops.max))
		}
		if err := p.conn.checkSession(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		gid := p.ops.start(m.ID)
		p.mu.Unlock()
		return withID(m.Type, gid, m.Payload)

	case "stop":
		p.mu.Lock()
		gid, ok := p.ops.end(m.ID)
		p.mu.Unlock()
		if !ok {
			return nil, nil
		}
		// The complete goes out before gqlgen sees the stop, and under the
		// write lock: no data for the id can follow it.
		b, err := json.Marshal(outMsg{Type: "complete", ID: m.ID})
		if err != nil {
			return nil, err
		}
		if err := p.conn.writeText(b); err != nil {
			return nil, err
		}
		return withID(m.Type, gid, nil)
	}
	return data, nil
}

// outgoing returns gqlgen's message v under the client's id. Nothing is
// sent for an id after its error or complete, or after the client stopped
// it.
func (p *legacyWS) outgoing(v any) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	b, ack, err := p.ops.route(v, "data")
	if ack {
		p.acked = true
		if p.keepAlive > 0 && !p.stopped && p.kaTimer == nil {
			p.kaTimer = time.AfterFunc(p.keepAlive, p.sendKeepAlive)
		}
	}
	return b, err
}

// sendKeepAlive sends a "ka" and schedules the next.
func (p *legacyWS) sendKeepAlive() {
	if err := p.conn.writeText([]byte(`{"type":"ka"}`)); err != nil {
		return // writeText closed the connection
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopped {
		p.kaTimer.Reset(p.keepAlive)
	}
}

// translateClose leaves gqlgen's close codes as they are: the legacy
// protocol has none of its own.
func (p *legacyWS) translateClose(code int, reason string) (int, string) { return code, reason }

func (p *legacyWS) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	if p.kaTimer != nil {
		p.kaTimer.Stop()
	}
}
