package bench

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// The conversations section's shape: convMembers users each start direct
// conversations with the convPeers users after them (in a ring), so each
// is in 2·convPeers conversations, a list page; then each sends
// convPageSize messages to the next one, so that conversation holds a
// page of history.
const (
	convMembers  = 50
	convPeers    = 10
	convPageSize = 20

	benchSendDirect = `mutation BenchSendDirect($to: ID!, $text: String!) { sendDirectMessage(to: $to, text: $text) { id seq conversationId } }`
	benchConvPage   = `query BenchConversationPage($id: ID!) { conversation(id: $id) { messages(first: 20) { edges { cursor node { id seq text createdAt author { handle displayName } } } pageInfo { hasNextPage } } } }`
	benchConvList   = `query BenchConversations { conversationsUnreadCount conversations(first: 20) { edges { cursor node { id isGroup name memberCount peer { handle displayName } unreadCount lastMessage { id seq text createdAt author { handle } } } } pageInfo { hasNextPage } } }`
)

// measureConversations measures sending a direct message (one client, so
// that the latency is the send's own), reading a page of a conversation's
// history and reading the conversation list (both at concurrency 8), with
// the storage calls of each from the server's metrics.
func (b *bench) measureConversations(ctx context.Context) error {
	if b.net.Users() < convMembers {
		return fmt.Errorf("the conversations section needs %d users", convMembers)
	}
	tokens := make([]string, convMembers)
	ids := make([]string, convMembers)
	for i := range tokens {
		t, err := b.token(i)
		if err != nil {
			return err
		}
		tokens[i] = t
		ids[i] = userGlobalID(b.net.UserID(i).String())
	}
	send := func(from, to int, text string) (string, error) {
		var out struct {
			SendDirectMessage struct{ ConversationID string } `json:"sendDirectMessage"`
		}
		err := b.srv.gql(ctx, tokens[from], benchSendDirect, map[string]any{"to": ids[to], "text": text}, &out)
		return out.SendDirectMessage.ConversationID, err
	}
	fmt.Fprintf(b.stderr, "bench: conversations: %d users in %d direct conversations each\n", convMembers, 2*convPeers)
	// The conversations, made by 8 clients; not measured.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < convMembers; i += 8 {
				for j := 1; j <= convPeers; j++ {
					if _, err := send(i, (i+j)%convMembers, "hello"); err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}

	// Sends to an existing conversation, one at a time.
	if err := b.waitIdle(ctx); err != nil {
		return err
	}
	before, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	convs := make([]string, convMembers) // i's conversation with i+1
	var lats []time.Duration
	for r := range convPageSize {
		for i := range convMembers {
			t0 := time.Now()
			c, err := send(i, (i+1)%convMembers, fmt.Sprintf("bench message %d from %d", r, i))
			if err != nil {
				return err
			}
			lats = append(lats, time.Since(t0))
			convs[i] = c
		}
	}
	after, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	n := len(lats)
	op := map[string]string{"operation": "BenchSendDirect"}
	h := after.histogram("herald_graphql_operation_duration_seconds", op).since(before.histogram("herald_graphql_operation_duration_seconds", op))
	calls := (after.sum("herald_store_calls_total", nil) - before.sum("herald_store_calls_total", nil)) / float64(n)
	const sendName = "send a direct message (an existing conversation), one client: "
	note := fmt.Sprintf("client p50 %.2f ms, p99 %.2f ms", percentile(lats, .5), percentile(lats, .99))
	b.add(figure{Section: "conversations", Name: sendName + "server p50", Value: h.quantile(.5) * 1000, Unit: "ms", Samples: n, Note: note})
	b.add(figure{Section: "conversations", Name: sendName + "server p99", Value: h.quantile(.99) * 1000, Unit: "ms", Samples: n, Note: note})
	b.add(figure{Section: "conversations", Name: sendName + "storage calls per send", Value: calls, Note: callsByMethod(before, after, n)})

	// A page of history: each member reads its conversation with the next.
	page := make([]readReq, convMembers)
	list := make([]readReq, convMembers)
	listBody, err := json.Marshal(map[string]any{"query": benchConvList})
	if err != nil {
		return err
	}
	for i := range page {
		body, err := json.Marshal(map[string]any{"query": benchConvPage, "variables": map[string]any{"id": convs[i]}})
		if err != nil {
			return err
		}
		auth := []string{"Bearer " + tokens[i]}
		page[i] = readReq{body: body, auth: auth}
		list[i] = readReq{body: listBody, auth: auth}
	}
	for _, r := range []struct {
		op, name string
		reqs     []readReq
		want     int
	}{
		{"BenchConversationPage", "conversation page of 20 messages with authors, concurrency 8: ", page, convPageSize},
		{"BenchConversations", "conversation list page of 20 with peers, last messages and unread counts, concurrency 8: ", list, 2 * convPeers},
	} {
		res, err := b.readReqsAt(ctx, r.op, r.reqs, r.want, 8, b.f.duration)
		if err != nil {
			return fmt.Errorf("%s: %w", r.op, err)
		}
		b.add(figure{Section: "conversations", Name: r.name + "requests/s", Value: res.perSec, Unit: "/s", Samples: res.requests,
			Note: fmt.Sprintf("server p50 %.2f ms, p99 %.2f ms; CPU per request: server %.0f µs", res.serverP50, res.p99, res.serverCPU)})
		b.add(figure{Section: "conversations", Name: r.name + "storage calls per request", Value: res.calls, Note: res.callsBy})
	}
	return nil
}

// userGlobalID is the GraphQL id of a user, as graph/id.go spells it.
func userGlobalID(hexID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("User:" + hexID))
}
