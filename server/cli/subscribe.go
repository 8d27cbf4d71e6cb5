// Package cli holds the commands of the herald binary besides the server
// and its benchmark: subscribe (print a user's inbox events), seed (load a
// generated network into the store) and mongo setup (prepare MongoDB).
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/gorilla/websocket"
)

// inboxEventsQuery is what `herald subscribe` asks for.
const inboxEventsQuery = `subscription($after: String) { inboxEvents(after: $after) { type unreadCount totalCount cursor
	edge { cursor deliveredAt node { id text createdAt editedAt author { handle displayName } } }
	message { id text createdAt editedAt author { handle displayName } } deletedMessageId removedMessageId } }`

// maxReconnects is how many times in a row `herald subscribe` tries to
// reconnect after a dropped connection before it gives up.
const maxReconnects = 10

// netDial dials the server's TCP connection; tests replace it to cut or
// hold the connection.
var netDial = (&net.Dialer{}).DialContext

// reconnectWait is the wait before the nth reconnect in a row (from 0):
// none for the first, then doubling from a quarter second up to 10s.
func reconnectWait(n int) time.Duration {
	if n == 0 {
		return 0
	}
	return min(250*time.Millisecond<<(n-1), 10*time.Second)
}

// Subscribe is `herald subscribe`: a graphql-transport-ws client that
// prints the viewer's inbox events as JSON lines until ctx ends or the server
// closes the connection. It is the tour's realtime example and a quick way
// to watch a live inbox.
//
// When the connection drops (a network failure, or the server going away
// for a restart) it reconnects and resumes after the last event printed,
// so the lines have no gap and no repeat; if the server no longer has the
// events since (RESUME_EXPIRED), it says so on stderr and goes on from now.
func Subscribe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("herald subscribe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "ws://127.0.0.1:8080/graphql", "the server's GraphQL websocket URL")
	token := fs.String("token", getenv("HERALD_TOKEN"), "bearer token from signUp or logIn (env HERALD_TOKEN)")
	after := fs.String("after", "", "resume after the event with this cursor (an event's `cursor`) instead of from now")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if *token == "" {
		return errors.New("subscribe: a token is required (-token or HERALD_TOKEN)")
	}

	sub := &subscriber{url: *url, token: *token, cursor: *after, stdout: json.NewEncoder(stdout), stderr: stderr}
	for failures := 0; ; failures++ {
		connected, err := sub.session(ctx)
		var drop *droppedError
		switch {
		case ctx.Err() != nil:
			return nil
		case !errors.As(err, &drop):
			return err
		case !connected && sub.sessions == 0:
			// Never connected: the server is not there, or refuses.
			return drop.err
		}
		if connected {
			failures = 0
		}
		if failures >= maxReconnects {
			return fmt.Errorf("subscribe: gave up after %d reconnects: %w", failures, drop.err)
		}
		fmt.Fprintf(stderr, "connection lost (%v); reconnecting\n", drop.err)
		select {
		case <-time.After(reconnectWait(failures)):
		case <-ctx.Done():
			return nil
		}
	}
}

// subscriber is one run of `herald subscribe`, across its connections.
type subscriber struct {
	url, token string
	cursor     string // of the last event printed; "" before the first
	sessions   int    // connections acknowledged so far
	stdout     *json.Encoder
	stderr     io.Writer
}

// droppedError is a connection lost in a way a reconnect may mend.
type droppedError struct{ err error }

func (e *droppedError) Error() string { return e.err.Error() }
func (e *droppedError) Unwrap() error { return e.err }

// retryable reports whether a websocket close code is worth a reconnect:
// the server went away or failed, or asked to come back later (1013).
func retryable(code int) bool {
	switch code {
	case websocket.CloseGoingAway, websocket.CloseAbnormalClosure, websocket.CloseInternalServerErr,
		websocket.CloseServiceRestart, websocket.CloseTryAgainLater:
		return true
	}
	return false
}

// session runs one connection until it ends. It reports whether the
// server acknowledged it, and returns nil for a normal end, a
// *droppedError for a connection to make again, or any other error to
// stop with.
func (s *subscriber) session(ctx context.Context) (bool, error) {
	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second, NetDialContext: netDial}
	conn, resp, err := dialer.DialContext(ctx, s.url, nil)
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("subscribe: dial %s: %w (HTTP %s)", s.url, err, resp.Status)
			if resp.StatusCode >= 500 {
				return false, &droppedError{err}
			}
			return false, err
		}
		return false, &droppedError{fmt.Errorf("subscribe: dial %s: %w", s.url, err)}
	}
	defer conn.Close()
	// Closing the connection is how ctx cancels the blocking reads below.
	stop := context.AfterFunc(ctx, func() {
		_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		_ = conn.Close()
	})
	defer stop()

	type msg struct {
		ID      string          `json:"id,omitempty"`
		Type    string          `json:"type"`
		Payload json.RawMessage `json:"payload,omitempty"`
	}
	send := func(m any) error {
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		return conn.WriteJSON(m)
	}
	ids := 0
	subscribe := func() error {
		ids++
		vars := map[string]any{}
		if s.cursor != "" {
			vars["after"] = s.cursor
		}
		payload := map[string]any{"query": inboxEventsQuery, "variables": vars}
		return send(map[string]any{"id": strconv.Itoa(ids), "type": "subscribe", "payload": payload})
	}
	if err := send(map[string]any{"type": "connection_init", "payload": map[string]string{"authorization": "Bearer " + s.token}}); err != nil {
		return false, &droppedError{fmt.Errorf("subscribe: %w", err)}
	}
	acked := false
	for {
		var m msg
		if err := conn.ReadJSON(&m); err != nil {
			if ctx.Err() != nil {
				return acked, nil
			}
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code == websocket.CloseNormalClosure {
					return acked, nil
				}
				err = fmt.Errorf("subscribe: server closed the connection: %d %s", ce.Code, ce.Text)
				if retryable(ce.Code) {
					return acked, &droppedError{err}
				}
				return acked, err
			}
			return acked, &droppedError{fmt.Errorf("subscribe: %w", err)}
		}
		switch m.Type {
		case "connection_ack":
			acked = true
			s.sessions++
			if err := subscribe(); err != nil {
				return acked, &droppedError{fmt.Errorf("subscribe: %w", err)}
			}
			if s.cursor != "" {
				fmt.Fprintln(s.stderr, "subscribed to inboxEvents, resuming after the last event; waiting for events (Ctrl-C to stop)")
			} else {
				fmt.Fprintln(s.stderr, "subscribed to inboxEvents; waiting for events (Ctrl-C to stop)")
			}
		case "ping":
			if err := send(map[string]string{"type": "pong"}); err != nil {
				return acked, &droppedError{fmt.Errorf("subscribe: %w", err)}
			}
		case "next":
			var p struct {
				Data json.RawMessage `json:"data"`
			}
			var ev struct {
				InboxEvents struct {
					Cursor string `json:"cursor"`
				} `json:"inboxEvents"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return acked, fmt.Errorf("subscribe: bad event: %w", err)
			}
			if json.Unmarshal(p.Data, &ev) == nil && ev.InboxEvents.Cursor != "" {
				s.cursor = ev.InboxEvents.Cursor
			}
			if err := s.stdout.Encode(p.Data); err != nil {
				return acked, err
			}
		case "error":
			var errs []struct {
				Extensions struct {
					Code string `json:"code"`
				} `json:"extensions"`
			}
			if json.Unmarshal(m.Payload, &errs) == nil && len(errs) > 0 && errs[0].Extensions.Code == "RESUME_EXPIRED" && s.cursor != "" {
				fmt.Fprintln(s.stderr, "the server no longer has the events since the last one printed: some may be missing; going on from now")
				s.cursor = ""
				if err := subscribe(); err != nil {
					return acked, &droppedError{fmt.Errorf("subscribe: %w", err)}
				}
				continue
			}
			return acked, fmt.Errorf("subscribe: %s", m.Payload)
		case "complete":
			return acked, nil
		}
	}
}
