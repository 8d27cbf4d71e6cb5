package ws

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// CodeTooManySubscriptions is the extensions.code of the error that
// refuses a subscribe (or a legacy start) over -max-subscriptions-per-
// connection; the connection stays open.
const CodeTooManySubscriptions = "TOO_MANY_SUBSCRIPTIONS"

// wsOps is the table of one connection's operations, shared by both
// subprotocols. gqlgen never sees the client's ids: each operation gets an
// id of its own (gid, a counter), so gqlgen's record of one can never be
// replaced or removed by another that reuses its client id. gqlgen keeps
// its operations in a map by id, and an operation removes its id from the
// map when it ends, after its last message: a client id reused in
// between (a subscribe right after a complete) would otherwise lose the
// new operation's cancel, leaving it running and uncounted until the
// connection closes.
//
// An operation is in the table from the subscribe gqlgen was given until
// gqlgen's last message for it (error or complete), so the per-connection
// cap counts what gqlgen runs; it is active, and its messages reach the
// client, until the client or that last message ends it. Callers hold
// their tracker's lock.
type wsOps struct {
	max int    // most operations at once; 0: no limit
	seq uint64 // the last gid handed out
	ops []wsOp // ordered by gid
}

type wsOp struct {
	gid    uint64
	client string
	ended  bool // the client may no longer hear of it
}

// full reports whether another operation would pass the cap.
func (o *wsOps) full() bool { return o.max > 0 && len(o.ops) >= o.max }

// active reports whether the client id names an active operation.
func (o *wsOps) active(client string) bool { return o.find(client) >= 0 }

func (o *wsOps) find(client string) int {
	for i := range o.ops {
		if !o.ops[i].ended && o.ops[i].client == client {
			return i
		}
	}
	return -1
}

// start records a new operation of the client id and returns its gid.
func (o *wsOps) start(client string) string {
	o.seq++
	o.ops = append(o.ops, wsOp{gid: o.seq, client: client})
	return strconv.FormatUint(o.seq, 10)
}

// end ends the client's active operation with that id (the client completed
// or stopped it) and returns its gid; ok is false for an id not active.
func (o *wsOps) end(client string) (gid string, ok bool) {
	i := o.find(client)
	if i < 0 {
		return "", false
	}
	o.ops[i].ended = true
	return strconv.FormatUint(o.ops[i].gid, 10), true
}

// out sees a message gqlgen writes for gid: it returns the client's id and
// whether the message may go out. last is true for gqlgen's error or
// complete, after which the operation leaves the table.
func (o *wsOps) out(gid string, last bool) (client string, send bool) {
	n, err := strconv.ParseUint(gid, 10, 64)
	if err != nil {
		return "", false
	}
	i, found := slices.BinarySearchFunc(o.ops, n, func(op wsOp, n uint64) int {
		switch {
		case op.gid < n:
			return -1
		case op.gid > n:
			return 1
		}
		return 0
	})
	if !found {
		return "", false
	}
	op := o.ops[i]
	if last {
		o.ops = slices.Delete(o.ops, i, i+1)
	}
	return op.client, !op.ended
}

// route readies gqlgen's message v for the client: under the client's id,
// or nil when nothing more may be sent for that id (after its error or
// complete, or after the client ended it). result is the protocol's name
// for an operation's result ("next", or "data" in graphql-ws). ack reports
// the connection's acknowledgement. Call it under the protocol's lock.
func (o *wsOps) route(v any, result string) (b []byte, ack bool, err error) {
	m, err := readOut(v)
	if err != nil {
		return nil, false, err
	}
	switch m.Type {
	case "connection_ack":
		ack = true
	case result, "error", "complete":
		id, send := o.out(m.ID, m.Type != result)
		if !send {
			return nil, false, nil
		}
		m.ID = id
	}
	b, err = json.Marshal(m)
	return b, ack, err
}

// clientMsg is a client message as the protocols define it; pointers tell
// an absent field from an empty one.
type clientMsg struct {
	Type    *string         `json:"type"`
	ID      *string         `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// withID returns a client message of type typ for gqlgen, under gqlgen's
// id gid, with payload.
func withID(typ, gid string, payload json.RawMessage) ([]byte, error) {
	return json.Marshal(outMsg{Type: typ, ID: gid, Payload: payload})
}

// outMsg is a message of either protocol as it goes out: gqlgen's, read
// by readOut, with the client's id in place of gqlgen's, or one of ours.
type outMsg struct {
	Payload json.RawMessage `json:"payload,omitempty"`
	ID      string          `json:"id,omitempty"`
	Type    string          `json:"type"`
}

// readOut reads the message gqlgen hands WriteJSON: a pointer to gqlgen's
// message struct (one per protocol, unexported, with the same exported
// fields), whose JSON fields payload, id and type are read directly,
// without encoding the message to decode it again. Any other value is
// read through its JSON.
func readOut(v any) (outMsg, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if rv.Kind() == reflect.Struct {
		if f := outFieldsOf(rv.Type()); f.ok {
			return outMsg{
				Payload: rv.Field(f.payload).Bytes(),
				ID:      rv.Field(f.id).String(),
				Type:    rv.Field(f.typ).String(),
			}, nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return outMsg{}, err
	}
	var m outMsg
	if err := json.Unmarshal(b, &m); err != nil {
		return outMsg{}, fmt.Errorf("websocket: unexpected message %.100s: %w", b, err)
	}
	return m, nil
}

// outFields are the indices of a message struct's payload, id and type
// fields; ok is false when the struct lacks one of them.
type outFields struct {
	payload, id, typ int
	ok               bool
}

var outFieldCache sync.Map // reflect.Type → outFields

func outFieldsOf(t reflect.Type) outFields {
	if f, ok := outFieldCache.Load(t); ok {
		return f.(outFields)
	}
	f := outFields{payload: -1, id: -1, typ: -1}
	for i := range t.NumField() {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case name == "payload" && sf.Type.Kind() == reflect.Slice && sf.Type.Elem().Kind() == reflect.Uint8:
			f.payload = i
		case name == "id" && sf.Type.Kind() == reflect.String:
			f.id = i
		case name == "type" && sf.Type.Kind() == reflect.String:
			f.typ = i
		}
	}
	f.ok = f.payload >= 0 && f.id >= 0 && f.typ >= 0
	outFieldCache.Store(t, f)
	return f
}

// tooManySubscriptions is the error of a subscribe over the cap.
func tooManySubscriptions(max int) map[string]any {
	return map[string]any{
		"message":    fmt.Sprintf("too many subscriptions on this connection (at most %d): complete one first", max),
		"extensions": map[string]any{"code": CodeTooManySubscriptions},
	}
}
