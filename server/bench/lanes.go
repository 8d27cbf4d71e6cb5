package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"herald/graph/auth"
	"herald/server/datadir"
	"herald/store/seed"
)

// laneCounts are the -fanout-lanes values the lanes section compares.
var laneCounts = []int{1, 2, 4}

// laneAuthors is how many authors post at once in the lanes section.
const laneAuthors = 32

// measureLanes measures fan-out with 1, 2 and 4 lanes on one network:
// its most followed authors post at once, and the section times from the
// first post until the fan-out is idle (the last follower has every
// post). Each server runs on its own copy of one seeded directory, so
// every lane count starts from the same data.
func (b *bench) measureLanes(ctx context.Context) error {
	main, mainSrv, mainSigner := b.net, b.srv, b.signer
	defer func() { b.net, b.srv, b.signer = main, mainSrv, mainSigner }()
	n, err := seed.Generate(seed.Config{Seed: b.f.seed, Users: b.f.stratUsers, AvgFollows: b.f.avgFollows, Messages: b.f.stratUsers,
		Pinned: []int{min(1000, b.f.stratUsers-1)}, Strategy: b.cfg.Fanout, CelebrityThreshold: b.cfg.CelebrityThreshold})
	if err != nil {
		return err
	}
	b.net = n
	b.report.StrategiesNetwork = describeNetwork(n) // the strategies section's network
	dir, secret, err := b.seedDir(ctx, n, "lanes")
	if err != nil {
		return err
	}
	b.signer = auth.NewSigner(secret, 24*time.Hour)
	authors := make([]int, n.Users())
	for i := range authors {
		authors[i] = i
	}
	slices.SortStableFunc(authors, func(x, y int) int { return n.Followers(y) - n.Followers(x) })
	authors = authors[:min(laneAuthors, len(authors))]
	tokens := make([]string, len(authors))
	followers := 0
	for i, a := range authors {
		if tokens[i], err = b.token(a); err != nil {
			return err
		}
		followers += n.Followers(a)
	}
	posts := min(b.f.posts, 5)
	for _, lanes := range laneCounts {
		fmt.Fprintf(b.stderr, "bench: lanes: %d authors of %d followers in all post %d times each at once, on %d lanes\n", len(authors), followers, posts, lanes)
		copyDir, err := os.MkdirTemp("", "herald-bench-lanes-copy-")
		if err != nil {
			return err
		}
		b.cleanup = append(b.cleanup, copyDir)
		if err := os.CopyFS(copyDir, os.DirFS(dir)); err != nil {
			return err
		}
		// CopyFS makes files readable by all; the secret is kept private.
		if err := os.Chmod(filepath.Join(copyDir, datadir.SecretFile), 0o600); err != nil {
			return err
		}
		srv, err := startBenchServer(ctx, copyDir, append(b.serverFlags(b.cfg.Fanout), "-fanout-lanes", fmt.Sprint(lanes)), b.stderr)
		if err != nil {
			return err
		}
		b.srv = srv
		err = b.laneBurst(ctx, lanes, tokens, posts)
		srv.stop()
		if err != nil {
			return fmt.Errorf("%d lanes: %w", lanes, err)
		}
	}
	return nil
}

// laneBurst has each of tokens' users post posts times, all at once, and
// adds the deliveries per second and the time until the fan-out is idle.
func (b *bench) laneBurst(ctx context.Context, lanes int, tokens []string, posts int) error {
	if err := b.waitIdle(ctx); err != nil {
		return err
	}
	before, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(tokens))
	for i, tok := range tokens {
		wg.Go(func() {
			for p := range posts {
				if _, err := b.post(ctx, tok, fmt.Sprintf("lanes bench post %d of author %d", p, i)); err != nil {
					errs[i] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if err := b.waitIdle(ctx); err != nil {
		return err
	}
	elapsed := time.Since(t0)
	after, err := b.srv.scrape(ctx)
	if err != nil {
		return err
	}
	delivered := after.sum("herald_fanout_deliveries_total", nil) - before.sum("herald_fanout_deliveries_total", nil)
	name := fmt.Sprintf("%d lanes: ", lanes)
	b.add(figure{Section: "lanes", Name: name + "deliveries/s", Value: delivered / elapsed.Seconds(), Unit: "/s",
		Note: fmt.Sprintf("%.0f deliveries of %d posts by %d authors at once", delivered, posts*len(tokens), len(tokens))})
	b.add(figure{Section: "lanes", Name: name + "until the last follower has every post", Value: float64(elapsed.Microseconds()) / 1000, Unit: "ms"})
	return nil
}
