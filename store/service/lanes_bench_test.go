package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// BenchmarkLanes measures fan-out on the embedded engine with 1, 2 and 4
// lanes while many authors post at once: their delivery jobs are stored
// as PostMessage stores them, then Start runs them all, as after a burst
// of posts. It reports deliveries per second and the time until the last
// follower has their post (until the fan-out is idle).
//
//	go test -run '^$' -bench Lanes -benchtime=3x -count=3 ./store/service/
//
// HERALD_BENCH_LANES_AUTHORS and _FOLLOWERS resize the graph (default 32
// authors of 2,000 followers, drawn from a pool of 10,000).
func BenchmarkLanes(b *testing.B) {
	authors, followers := envInt("HERALD_BENCH_LANES_AUTHORS", 32), envInt("HERALD_BENCH_LANES_FOLLOWERS", 2000)
	dir, ids := buildLanesGraph(b, authors, followers, max(10_000, followers))
	for _, lanes := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("lanes=%d", lanes), func(b *testing.B) {
			var delivered uint64
			var total time.Duration
			for b.Loop() {
				b.StopTimer()
				d, elapsed := runLanesBurst(b, dir, ids, lanes)
				b.StartTimer()
				delivered += d
				total += elapsed
			}
			b.ReportMetric(float64(delivered)/total.Seconds(), "deliveries/s")
			b.ReportMetric(total.Seconds()*1000/float64(b.N), "ms-to-last")
		})
	}
}

func envInt(name string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(name), &n); err != nil || n <= 0 {
		return def
	}
	return n
}

// buildLanesGraph makes authors, each followed by followers users drawn
// from a pool, in a closed data directory.
func buildLanesGraph(tb testing.TB, authors, followers, pool int) (string, []store.ID) {
	ctx := context.Background()
	dir := tb.TempDir()
	st, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(handle string) store.ID {
		u := &store.User{ID: store.NewID(now), Handle: handle, DisplayName: handle, CreatedAt: now, LastSeenAt: now}
		if err := st.CreateUser(ctx, u); err != nil {
			tb.Error(err)
		}
		return u.ID
	}
	ids := make([]store.ID, authors)
	users := make([]store.ID, pool)
	parallel(authors, func(i int) { ids[i] = mk(fmt.Sprintf("author%d", i)) })
	parallel(pool, func(i int) { users[i] = mk(fmt.Sprintf("u%d", i)) })
	rng := rand.New(rand.NewPCG(3, 4))
	draws := make([][]int, authors)
	for a := range draws {
		draws[a] = rng.Perm(pool)[:followers]
	}
	parallel(authors*followers, func(i int) {
		a := i / followers
		if _, err := st.Follow(ctx, users[draws[a][i%followers]], ids[a], now); err != nil {
			tb.Error(err)
		}
	})
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
	if tb.Failed() {
		tb.FailNow()
	}
	return dir, ids
}

// runLanesBurst opens a copy of dir, stores two posts by every author with
// their delivery jobs, and times the fan-out on lanes lanes from Start to
// idle. It returns the entries delivered and the time.
func runLanesBurst(tb testing.TB, dir string, authors []store.ID, lanes int) (uint64, time.Duration) {
	ctx := context.Background()
	copyDir := tb.TempDir()
	if err := os.CopyFS(copyDir, os.DirFS(dir)); err != nil {
		tb.Fatal(err)
	}
	st, err := embedded.Open(copyDir, embedded.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = st.Close() }()
	parallel(len(authors), func(i int) {
		for range 2 {
			at := time.Now().UTC().Truncate(time.Millisecond)
			m := &store.Message{ID: store.NewID(at), AuthorID: authors[i], Text: messageText, Kind: store.KindPost, CreatedAt: at}
			job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: authors[i], CreatedAt: at}
			if err := st.CreateMessage(ctx, m, job); err != nil {
				tb.Error(err)
			}
		}
	})
	svc := service.NewService(st, pubsub.NewHub(), service.Options{Lanes: lanes,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	t0 := time.Now()
	if err := svc.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	for !svc.Idle() {
		time.Sleep(100 * time.Microsecond)
	}
	elapsed := time.Since(t0)
	delivered := svc.Stats().Delivered
	if err := svc.Close(ctx); err != nil {
		tb.Fatal(err)
	}
	if want := uint64(2 * len(authors)); svc.Stats().JobsDone[storage.JobDeliver] != want {
		tb.Fatalf("%d delivery jobs done, want %d", svc.Stats().JobsDone[storage.JobDeliver], want)
	}
	return delivered, elapsed
}
