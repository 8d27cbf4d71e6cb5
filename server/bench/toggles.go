package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// toggle is a pair of mutations a client sends on one message and that
// undo each other, such as like and unlike: the round trips a person waits
// on when pressing a button.
type toggle struct {
	name    string // "like": the figures' names and the operations'
	undo    string // "unlike"
	counted string // the count the mutations return, as a client asks for it
	// fanout says the mutations start fan-out jobs, which the calls per
	// mutation then include: the run waits for them to finish before
	// reading the server's counters.
	fanout bool
}

var (
	likeToggle   = toggle{name: "like", undo: "unlike", counted: "likeCount"}
	repostToggle = toggle{name: "repost", undo: "unrepost", counted: "repostCount", fanout: true}
)

// measureToggle sends tg's mutation and its undo on one message of token's
// timeline, one request at a time, a bounded number of times, and reports
// each mutation's latency and storage calls.
func (b *bench) measureToggle(ctx context.Context, section, token string, tg toggle) error {
	var page struct {
		Inbox struct {
			Edges []struct {
				Node struct{ ID string }
			}
		}
	}
	if err := b.srv.gql(ctx, token, `{ inbox(first: 1) { edges { node { id } } } }`, nil, &page); err != nil {
		return err
	}
	if len(page.Inbox.Edges) == 0 {
		return errors.New("the viewer's timeline is empty")
	}
	vars := map[string]any{"id": page.Inbox.Edges[0].Node.ID}
	if err := b.waitIdle(ctx); err != nil {
		return err
	}
	before, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	do := fmt.Sprintf(`mutation Bench%s($id: ID!) { %s(messageId: $id) { %s } }`, title(tg.name), tg.name, tg.counted)
	undo := fmt.Sprintf(`mutation Bench%s($id: ID!) { %s(messageId: $id) { %s } }`, title(tg.undo), tg.undo, tg.counted)
	const n, limit = 200, 30 * time.Second
	deadline := time.Now().Add(limit)
	var done, undone []time.Duration
	for range n {
		if time.Now().After(deadline) {
			break
		}
		t0 := time.Now()
		if err := b.srv.gql(ctx, token, do, vars, nil); err != nil {
			return err
		}
		t1 := time.Now()
		if err := b.srv.gql(ctx, token, undo, vars, nil); err != nil {
			return err
		}
		done, undone = append(done, t1.Sub(t0)), append(undone, time.Since(t1))
	}
	if tg.fanout {
		if err := b.waitIdle(ctx); err != nil {
			return err
		}
	}
	after, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	ops := 2 * len(done)
	calls := (after.sum("herald_store_calls_total", nil) - before.sum("herald_store_calls_total", nil)) / float64(ops)
	what := fmt.Sprintf("%s, then %s, one message", tg.name, tg.undo)
	b.add(figure{Section: section, Name: fmt.Sprintf("%s: %s p50", what, tg.name), Value: percentile(done, .5), Unit: "ms", Samples: len(done),
		Note: fmt.Sprintf("%s p99 %.2f ms; %s p50 %.2f ms, p99 %.2f ms (client, one at a time)", tg.name, percentile(done, .99), tg.undo, percentile(undone, .5), percentile(undone, .99))})
	b.add(figure{Section: section, Name: what + ": storage calls per mutation", Value: calls, Unit: "", Note: callsByMethod(before, after, ops)})
	return nil
}

// title returns s with its first letter in upper case, for an operation name.
func title(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
