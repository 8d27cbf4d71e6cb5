package bench

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// measureLikes likes and unlikes one message of token's timeline, one
// request at a time, a bounded number of times, and reports each
// mutation's latency and storage calls: a like is a round trip a client
// waits on.
func (b *bench) measureLikes(ctx context.Context, section, token string) error {
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
	const n, limit = 200, 30 * time.Second
	deadline := time.Now().Add(limit)
	var liked, unliked []time.Duration
	for range n {
		if time.Now().After(deadline) {
			break
		}
		t0 := time.Now()
		if err := b.srv.gql(ctx, token, `mutation BenchLike($id: ID!) { like(messageId: $id) { likeCount } }`, vars, nil); err != nil {
			return err
		}
		t1 := time.Now()
		if err := b.srv.gql(ctx, token, `mutation BenchUnlike($id: ID!) { unlike(messageId: $id) { likeCount } }`, vars, nil); err != nil {
			return err
		}
		liked, unliked = append(liked, t1.Sub(t0)), append(unliked, time.Since(t1))
	}
	after, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	ops := 2 * len(liked)
	calls := (after.sum("herald_store_calls_total", nil) - before.sum("herald_store_calls_total", nil)) / float64(ops)
	b.add(figure{Section: section, Name: "like, then unlike, one message: like p50", Value: percentile(liked, .5), Unit: "ms", Samples: len(liked),
		Note: fmt.Sprintf("like p99 %.2f ms; unlike p50 %.2f ms, p99 %.2f ms (client, one at a time)", percentile(liked, .99), percentile(unliked, .5), percentile(unliked, .99))})
	b.add(figure{Section: section, Name: "like, then unlike, one message: storage calls per mutation", Value: calls, Unit: "", Note: callsByMethod(before, after, ops)})
	return nil
}
