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
	"time"

	"github.com/gorilla/websocket"
)

// inboxEventsQuery is what `herald subscribe` asks for.
const inboxEventsQuery = `subscription { inboxEvents { type unreadCount totalCount
	edge { cursor deliveredAt node { id text createdAt editedAt author { handle displayName } } }
	message { id text createdAt editedAt author { handle displayName } } deletedMessageId removedMessageId } }`

// Subscribe is `herald subscribe`: a graphql-transport-ws client that
// prints the viewer's inbox events as JSON lines until ctx ends or the server
// closes the connection. It is the tour's realtime example and a quick way
// to watch a live inbox.
func Subscribe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("herald subscribe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("url", "ws://127.0.0.1:8080/graphql", "the server's GraphQL websocket URL")
	token := fs.String("token", getenv("HERALD_TOKEN"), "bearer token from signUp or logIn (env HERALD_TOKEN)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	if *token == "" {
		return errors.New("subscribe: a token is required (-token or HERALD_TOKEN)")
	}

	dialer := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 10 * time.Second}
	conn, resp, err := dialer.DialContext(ctx, *url, nil)
	if err != nil {
		if resp != nil {
			return fmt.Errorf("subscribe: dial %s: %w (HTTP %s)", *url, err, resp.Status)
		}
		return fmt.Errorf("subscribe: dial %s: %w", *url, err)
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
	if err := send(map[string]any{"type": "connection_init", "payload": map[string]string{"authorization": "Bearer " + *token}}); err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	enc := json.NewEncoder(stdout)
	for {
		var m msg
		if err := conn.ReadJSON(&m); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code == websocket.CloseNormalClosure || ce.Code == websocket.CloseGoingAway {
					return nil
				}
				return fmt.Errorf("subscribe: server closed the connection: %d %s", ce.Code, ce.Text)
			}
			return fmt.Errorf("subscribe: %w", err)
		}
		switch m.Type {
		case "connection_ack":
			sub := map[string]any{"id": "1", "type": "subscribe", "payload": map[string]string{"query": inboxEventsQuery}}
			if err := send(sub); err != nil {
				return fmt.Errorf("subscribe: %w", err)
			}
			fmt.Fprintln(stderr, "subscribed to inboxEvents; waiting for events (Ctrl-C to stop)")
		case "ping":
			if err := send(map[string]string{"type": "pong"}); err != nil {
				return fmt.Errorf("subscribe: %w", err)
			}
		case "next":
			var p struct {
				Data json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				return fmt.Errorf("subscribe: bad event: %w", err)
			}
			if err := enc.Encode(p.Data); err != nil {
				return err
			}
		case "error":
			return fmt.Errorf("subscribe: %s", m.Payload)
		case "complete":
			return nil
		}
	}
}
