package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"herald/store/seed"
	"herald/store/service"
)

// postAndTrack has author post n times, one at a time with the fan-out
// idle in between, and returns each post's mutation latency and the time
// from its request until the author's last follower by id, subscribed,
// had it (the fan-out visits followers in id order).
func (b *bench) postAndTrack(ctx context.Context, author, n int) (posts, delivered []time.Duration, err error) {
	followers := b.net.FollowersOf(author)
	if len(followers) == 0 {
		return nil, nil, fmt.Errorf("user %d has no followers", author)
	}
	last := int(followers[len(followers)-1])
	token, err := b.token(author)
	if err != nil {
		return nil, nil, err
	}
	lastToken, err := b.token(last)
	if err != nil {
		return nil, nil, err
	}
	arrived := make(chan struct{}, 64)
	sub, err := dialLive(ctx, b.wsURL(), lastToken, func() {
		select {
		case arrived <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("subscribe the last follower: %w", err)
	}
	defer sub.close()
	if err := b.waitSubscribed(ctx, 1); err != nil {
		return nil, nil, err
	}
	for i := range n {
		if err := b.waitIdle(ctx); err != nil {
			return nil, nil, err
		}
		t0 := time.Now()
		id, err := b.post(ctx, token, fmt.Sprintf("bench post %d by %s at %s", i, seed.Handle(author), t0.Format(time.RFC3339Nano)))
		if err != nil {
			return nil, nil, err
		}
		posts = append(posts, time.Since(t0))
		deadline := time.After(30 * time.Second)
		for {
			if at, ok := sub.arrival(id); ok {
				delivered = append(delivered, at.Sub(t0))
				break
			}
			select {
			case <-arrived:
			case <-deadline:
				return nil, nil, fmt.Errorf("post %d did not reach %s within 30s", i, seed.Handle(last))
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
	}
	return posts, delivered, b.waitIdle(ctx)
}

// fanoutAuthors returns the authors the fan-out section posts as: the
// pinned ones, or at -url those whose follower counts are nearest 1k, 10k
// and 100k, fewest followers first.
func (b *bench) fanoutAuthors() []int {
	var authors []int
	if len(b.net.Config().Pinned) > 0 {
		for j := len(b.net.Config().Pinned) - 1; j >= 0; j-- {
			authors = append(authors, b.net.Pinned(j))
		}
		return authors
	}
	for _, want := range []int{1_000, 10_000, 100_000} {
		best := -1
		for i := range b.net.Users() {
			if best < 0 || abs(b.net.Followers(i)-want) < abs(b.net.Followers(best)-want) {
				best = i
			}
		}
		if !slices.Contains(authors, best) {
			authors = append(authors, best)
		}
	}
	return authors
}

func abs(n int) int { return max(n, -n) }

func (b *bench) measureFanout(ctx context.Context) error {
	for _, a := range b.fanoutAuthors() {
		followers := b.net.Followers(a)
		fmt.Fprintf(b.stderr, "bench: fanout: %d posts by an author of %d followers\n", b.f.posts, followers)
		posts, delivered, err := b.postAndTrack(ctx, a, b.f.posts)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("author of %d followers: ", followers)
		big := followers >= 100_000
		p99 := percentile(posts, .99)
		fig := figure{Section: "fanout", Name: name + "postMessage p99", Value: p99, Unit: "ms", Samples: len(posts),
			Note: fmt.Sprintf("p50 %.2f ms", percentile(posts, .5))}
		if big {
			fig.Target, fig.Pass = atMost(p99, 20, "%.0f ms")
		}
		b.add(fig)
		d50, d99 := percentile(delivered, .5), percentile(delivered, .99)
		fig = figure{Section: "fanout", Name: name + "until the last follower has it, p99", Value: d99, Unit: "ms", Samples: len(delivered),
			Note: fmt.Sprintf("p50 %.1f ms", d50)}
		if big {
			fig.Target, fig.Pass = atMost(d99, 1000, "%.0f ms")
		}
		b.add(fig)
		pulled := b.cfg.Fanout == service.StrategyHybrid && followers > b.cfg.CelebrityThreshold
		if b.cfg.Fanout.Layout().Stores() && !pulled {
			rate := float64(followers) / (d50 / 1000)
			b.add(figure{Section: "fanout", Name: name + "deliveries/s (followers / p50)", Value: rate, Unit: "/s"})
			if big && b.raw > 0 {
				ratio := rate / b.raw
				fig := figure{Section: "fanout", Name: name + "deliveries/s ÷ engine append limit", Value: ratio, Unit: "×"}
				fig.Target, fig.Pass = atLeast(ratio, 0.5, "%.2f")
				b.add(fig)
			}
		}
	}
	return nil
}
