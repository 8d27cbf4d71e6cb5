package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"
)

// benchPostMutation is the post every section makes.
const benchPostMutation = `mutation BenchPost($text: String!) { postMessage(input: {text: $text}) { id } }`

// percentile returns the q-quantile of ds (nearest rank), in milliseconds.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return math.NaN()
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return float64(s[max(0, min(i, len(s)-1))]) / float64(time.Millisecond)
}

// waitIdle waits until the server's fan-out has no job queued or running.
func (b *bench) waitIdle(ctx context.Context) error {
	return b.waitMetrics(ctx, "no fan-out job queued or running", func(ms metricsSnapshot) bool {
		return ms.sum("herald_fanout_jobs_queued", nil)+ms.sum("herald_fanout_jobs_running", nil) == 0
	})
}

// waitSubscribed waits until the server counts at least n subscriptions.
func (b *bench) waitSubscribed(ctx context.Context, n int) error {
	return b.waitMetrics(ctx, fmt.Sprintf("%d subscriptions", n), func(ms metricsSnapshot) bool {
		return ms.sum("herald_subscriptions", nil) >= float64(n)
	})
}

// waitMetrics scrapes the server's metrics every 10 ms until done holds,
// for 2 minutes at most.
func (b *bench) waitMetrics(ctx context.Context, what string, done func(metricsSnapshot) bool) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ms, err := b.srv.scrape(ctx)
		if err != nil {
			return err
		}
		if done(ms) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited 2 minutes for %s", what)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// post posts text as author and returns the message's id.
func (b *bench) post(ctx context.Context, token, text string) (string, error) {
	var out struct {
		PostMessage struct{ ID string } `json:"postMessage"`
	}
	if err := b.srv.gql(ctx, token, benchPostMutation, map[string]any{"text": text}, &out); err != nil {
		return "", err
	}
	return out.PostMessage.ID, nil
}
