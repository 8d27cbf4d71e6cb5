package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"herald/store/seed"
)

const (
	// sustainedMaxPosts bounds the posts of one run whatever its
	// duration.
	sustainedMaxPosts = 2_000_000
	// sustainedDrainMax bounds the wait for the backlog to drain and the
	// events to arrive after posting stops.
	sustainedDrainMax = 2 * time.Minute
	// sustainedQuiet is how long, once the fan-out is idle, bench waits
	// for events still missing before it counts them as never arriving
	// (a subscriber dropped for falling behind).
	sustainedQuiet = 5 * time.Second
	// celebrityShare is the share of users, those with the most
	// followers, that are not typical authors.
	celebrityShare = 0.005
)

// sustainedPost is one acknowledged post of the sustained section.
type sustainedPost struct {
	author int
	id     string
	start  time.Time
	took   time.Duration // until the acknowledgement
}

// typicalAuthors returns the users who post in the sustained section:
// those with followers, neither pinned nor among the celebrityShare with
// the most followers, whose posts are what most fan-out jobs deliver.
func (b *bench) typicalAuthors() []int {
	counts := make([]int, b.net.Users())
	for i := range counts {
		counts[i] = b.net.Followers(i)
	}
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	limit := sorted[min(len(sorted)-1, int(float64(len(sorted))*(1-celebrityShare)))]
	pinned := map[int]bool{}
	for j := range b.net.Config().Pinned {
		pinned[b.net.Pinned(j)] = true
	}
	var authors []int
	for i, c := range counts {
		if c > 0 && c < limit && !pinned[i] {
			authors = append(authors, i)
		}
	}
	return authors
}

// sustainedPool draws up to -sustained-followers authors among the typical
// ones and, for each, one follower not drawn before, who subscribes.
func (b *bench) sustainedPool(rng *rand.Rand) (authors, subscribers []int) {
	typical := b.typicalAuthors()
	rng.Shuffle(len(typical), func(i, j int) { typical[i], typical[j] = typical[j], typical[i] })
	taken := map[int]bool{}
	for _, a := range typical {
		if len(authors) == b.f.sustainedFollowers {
			break
		}
		fs := b.net.FollowersOf(a)
		for range 8 { // a few tries: most followers are not taken
			f := int(fs[rng.IntN(len(fs))])
			if !taken[f] && f != a {
				taken[f] = true
				authors = append(authors, a)
				subscribers = append(subscribers, f)
				break
			}
		}
	}
	return authors, subscribers
}

// measureSustained has -sustained-concurrency clients post for
// -sustained-duration as typical authors, and times each post until the
// subscribed followers of its author have it.
func (b *bench) measureSustained(ctx context.Context) error {
	rng := rand.New(rand.NewPCG(b.f.seed, 0x73757374)) // "sust"
	authors, subs := b.sustainedPool(rng)
	if len(authors) == 0 {
		return errors.New("no typical author has followers")
	}
	meanFollowers := 0.0
	for _, a := range authors {
		meanFollowers += float64(b.net.Followers(a))
	}
	meanFollowers /= float64(len(authors))
	fmt.Fprintf(b.stderr, "bench: sustained: %d authors (%.0f followers on average), %d followers subscribed, %d posting for %v\n",
		len(authors), meanFollowers, len(subs), b.f.sustainedConcurrency, b.f.sustainedDuration)

	if err := b.waitIdle(ctx); err != nil {
		return err
	}
	base, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	subsBefore := int(base.sum("herald_subscriptions", nil))

	// Every subscriber is an active follower of the authors it follows
	// among those posting, not only of the one it was drawn for.
	clients := make([]*liveClient, len(subs))
	for i, u := range subs {
		token, err := b.token(u)
		if err == nil {
			clients[i], err = dialLive(ctx, b.wsURL(), token, nil)
		}
		if err != nil {
			for _, c := range clients[:i] {
				c.close()
			}
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
	}
	defer func() {
		for _, c := range clients {
			c.close()
		}
	}()
	if err := b.waitSubscribed(ctx, subsBefore+len(subs)); err != nil {
		return err
	}
	watchers := map[int][]*liveClient{}
	for _, a := range authors {
		watchers[a] = nil
	}
	for i, u := range subs {
		for _, a := range b.net.Following(u) {
			if ws, ok := watchers[int(a)]; ok {
				watchers[int(a)] = append(ws, clients[i])
			}
		}
	}
	tokens := make(map[int]string, len(authors))
	for _, a := range authors {
		if tokens[a], err = b.token(a); err != nil {
			return err
		}
	}

	before, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		posts    []sustainedPost
		failed   atomic.Int64
		firstErr error
		n        atomic.Int64
	)
	start := time.Now()
	end := start.Add(b.f.sustainedDuration)
	for w := range b.f.sustainedConcurrency {
		r := rand.New(rand.NewPCG(b.f.seed, uint64(w)))
		wg.Go(func() {
			var mine []sustainedPost
			for time.Now().Before(end) && ctx.Err() == nil && n.Add(1) <= sustainedMaxPosts {
				a := authors[r.IntN(len(authors))]
				t0 := time.Now()
				id, err := b.post(ctx, tokens[a], fmt.Sprintf("sustained post by %s at %s", seed.Handle(a), t0.Format(time.RFC3339Nano)))
				if err != nil {
					if failed.Add(1) == 1 {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
					continue
				}
				mine = append(mine, sustainedPost{author: a, id: id, start: t0, took: time.Since(t0)})
			}
			mu.Lock()
			posts = append(posts, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	stopped := time.Now()
	window := stopped.Sub(start)
	after, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	if len(posts) == 0 {
		return fmt.Errorf("no post acknowledged: %v", firstErr)
	}
	if firstErr != nil {
		fmt.Fprintf(b.stderr, "bench: sustained: %d posts failed, the first: %v\n", failed.Load(), firstErr)
	}
	backlog := after.sum("herald_fanout_jobs_queued", nil)
	fmt.Fprintf(b.stderr, "bench: sustained: %d posts in %v, %0.f jobs queued; draining\n", len(posts), window.Round(time.Millisecond), backlog)

	// Drain: wait until the fan-out is idle, within sustainedDrainMax of
	// the end of posting, and then until every post has reached its
	// watchers, within sustainedQuiet of the idle.
	lats := make([]time.Duration, 0, len(posts))
	pending := posts
	var drained time.Duration
	var idleAt time.Time
	deadline := stopped.Add(sustainedDrainMax)
	for {
		now := time.Now()
		kept := pending[:0]
		for _, p := range pending {
			if at, ok := lastArrival(watchers[p.author], p.id); ok {
				lats = append(lats, at.Sub(p.start))
			} else {
				kept = append(kept, p)
			}
		}
		pending = kept
		if idleAt.IsZero() {
			ms, err := b.srv.scrape(ctx)
			if err != nil {
				return err
			}
			if ms.sum("herald_fanout_jobs_queued", nil)+ms.sum("herald_fanout_jobs_running", nil) == 0 {
				idleAt, drained = now, now.Sub(stopped)
			}
		}
		if (!idleAt.IsZero() && (len(pending) == 0 || now.Sub(idleAt) > sustainedQuiet)) || (idleAt.IsZero() && now.After(deadline)) {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	// A post still missing counts from its request to the end of the
	// wait, a lower bound: the backlog shows in the tail.
	waitEnd := time.Now()
	for _, p := range pending {
		lats = append(lats, waitEnd.Sub(p.start))
	}
	if idleAt.IsZero() {
		drained = waitEnd.Sub(stopped)
	}
	final, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	// A connection the server closed, or a subscription it ended, misses
	// every later event.
	closed, ended := 0, 0
	for _, c := range clients {
		select {
		case <-c.done:
			closed++
		default:
		}
		if c.ended.Load() {
			ended++
		}
	}

	acks := make([]time.Duration, len(posts))
	for i, p := range posts {
		acks[i] = p.took
	}
	secs := window.Seconds()
	rate := float64(len(posts)) / secs
	b.add(figure{Section: "sustained", Name: fmt.Sprintf("posts acknowledged/s, %d clients posting for %v as typical authors", b.f.sustainedConcurrency, b.f.sustainedDuration),
		Value: rate, Unit: "/s", Samples: len(posts),
		Note: fmt.Sprintf("%d authors of %.0f followers on average; %d posts failed; postMessage p50 %.1f / p99 %.1f ms", len(authors), meanFollowers, failed.Load(), percentile(acks, .5), percentile(acks, .99))})
	deliveries := after.sum("herald_fanout_deliveries_total", nil) - before.sum("herald_fanout_deliveries_total", nil)
	total := final.sum("herald_fanout_deliveries_total", nil) - before.sum("herald_fanout_deliveries_total", nil)
	note := fmt.Sprintf("%.0f posts/s delivered; %.0f entries in all", deliveries/secs/meanFollowers, total)
	if drained > 0 {
		note += fmt.Sprintf(", %.0f /s while draining", (total-deliveries)/drained.Seconds())
	}
	b.add(figure{Section: "sustained", Name: "deliveries/s while posting (herald_fanout_deliveries_total)", Value: deliveries / secs, Unit: "/s", Note: note})
	p99 := percentile(lats, .99)
	dropped := final.sum("herald_subscribers_dropped_total", nil) - base.sum("herald_subscribers_dropped_total", nil)
	fig := figure{Section: "sustained", Name: fmt.Sprintf("post until the last subscribed follower of its author has it (%d subscribed), p99", len(subs)),
		Value: p99, Unit: "ms", Samples: len(lats),
		Note: fmt.Sprintf("p50 %.1f ms, max %.0f ms; %d never arrived (counted until the end of the wait); %.0f subscribers dropped, %d connections closed, %d subscriptions ended by the server",
			percentile(lats, .5), percentile(lats, 1), len(pending), dropped, closed, ended)}
	fig.Target, fig.Pass = atMost(p99, 1000, "%.0f ms")
	b.add(fig)
	// A backlog of a second's posts drains in about a second if the
	// fan-out keeps up, within the delivery target above.
	fig = figure{Section: "sustained", Name: "fan-out jobs queued when posting stops", Value: backlog, Unit: "jobs",
		Note: fmt.Sprintf("%.0f s of posts", backlog/rate)}
	fig.Target, fig.Pass = atMost(backlog, rate, "%.0f (1 s of posts)")
	b.add(fig)
	fig = figure{Section: "sustained", Name: "time until the fan-out is idle after posting stops", Value: drained.Seconds() * 1000, Unit: "ms"}
	if idleAt.IsZero() {
		fig.Note = fmt.Sprintf("not idle after %v", sustainedDrainMax)
	}
	b.add(fig)
	return nil
}

// lastArrival returns when the last of cs had the event of message id.
func lastArrival(cs []*liveClient, id string) (time.Time, bool) {
	var last time.Time
	for _, c := range cs {
		at, ok := c.arrival(id)
		if !ok {
			return time.Time{}, false
		}
		if at.After(last) {
			last = at
		}
	}
	return last, len(cs) > 0
}
