package bench

import (
	"context"
	"fmt"
	"time"

	"herald/graph/auth"
	"herald/store/seed"
	"herald/store/service"
)

// measureStrategies measures every strategy on one network, each with a
// server of its own on a data directory seeded for it.
func (b *bench) measureStrategies(ctx context.Context) error {
	main, mainSrv, mainSigner := b.net, b.srv, b.signer
	defer func() { b.net, b.srv, b.signer = main, mainSrv, mainSigner }()
	posts := min(b.f.posts, 10)
	d := min(b.f.duration, 3*time.Second)
	for _, st := range service.Strategies {
		n, err := seed.Generate(seed.Config{Seed: b.f.seed, Users: b.f.stratUsers, AvgFollows: b.f.avgFollows, Messages: b.f.stratUsers,
			Pinned: []int{min(1000, b.f.stratUsers-1)}, Strategy: st, CelebrityThreshold: b.cfg.CelebrityThreshold})
		if err != nil {
			return err
		}
		b.net = n
		b.report.StrategiesNetwork = describeNetwork(n)
		fmt.Fprintf(b.stderr, "bench: strategy %s\n", st)
		dir, secret, err := b.seedDir(ctx, n, string(st))
		if err != nil {
			return err
		}
		seeded, err := dirSize(dir)
		if err != nil {
			return err
		}
		srv, err := startBenchServer(ctx, dir, b.serverFlags(st), b.stderr)
		if err != nil {
			return err
		}
		b.srv, b.signer = srv, auth.NewSigner(secret, 24*time.Hour)
		row := strategyRow{Strategy: string(st), StoredBytesUser: float64(seeded) / float64(n.Users())}
		err = func() error {
			if err := b.waitIdle(ctx); err != nil {
				return err
			}
			before, err := dirSize(dir)
			if err != nil {
				return err
			}
			postLat, delivered, err := b.postAndTrack(ctx, n.Pinned(0), posts)
			if err != nil {
				return err
			}
			after, err := dirSize(dir)
			if err != nil {
				return err
			}
			row.PostP50Ms, row.DeliveryP50Ms = percentile(postLat, .5), percentile(delivered, .5)
			row.DiskPerPostKiB = float64(after-before) / float64(posts) / 1024
			return b.measureReads(ctx, "strategies", []int{8}, d, &row)
		}()
		srv.stop()
		if err != nil {
			return fmt.Errorf("strategy %s: %w", st, err)
		}
		b.report.Strategies = append(b.report.Strategies, row)
	}
	return nil
}
