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

// The fan-out's delivery rate on the embedded backend, under StrategyWrite:
// posts stored with their delivery jobs at once (as a burst of posting
// leaves them queued), timed from Start until the fan-out is idle.
//
//	go test ./store/service -run '^$' -bench Fanout_ -benchtime=3x -count=3
//
// SmallJobs is many authors of typical reach (63 followers each), one post
// each; BigJob is posts by one author of 5,000 followers.

const (
	fanoutPool      = 5000 // users following the authors
	fanoutAuthors   = 500  // small authors, one post each per iteration
	fanoutFollowers = 63   // followers of each small author
	fanoutBigPosts  = 10   // the big author's posts per iteration
)

type fanoutGraph struct {
	st      *embedded.Store
	authors []store.ID
	big     store.ID // followed by the whole pool
}

func buildFanoutGraph(b *testing.B) *fanoutGraph {
	b.Helper()
	ctx := context.Background()
	st, err := embedded.Open(b.TempDir(), embedded.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(handle string) store.ID {
		u := &store.User{ID: store.NewID(now), Handle: handle, DisplayName: handle, CreatedAt: now, LastSeenAt: now}
		if err := st.CreateUser(ctx, u); err != nil {
			b.Error(err)
		}
		return u.ID
	}
	g := &fanoutGraph{st: st, big: mk("big"), authors: make([]store.ID, fanoutAuthors)}
	pool := make([]store.ID, fanoutPool)
	parallel(len(g.authors), func(i int) { g.authors[i] = mk(fmt.Sprintf("a%05d", i)) })
	parallel(len(pool), func(i int) { pool[i] = mk(fmt.Sprintf("p%05d", i)) })
	rng := rand.New(rand.NewPCG(3, 4))
	follows := make([][]store.ID, len(pool))
	for _, a := range g.authors {
		for _, p := range rng.Perm(len(pool))[:fanoutFollowers] {
			follows[p] = append(follows[p], a)
		}
	}
	parallel(len(pool), func(i int) {
		for _, a := range append(follows[i], g.big) {
			if _, err := st.Follow(ctx, pool[i], a, now); err != nil {
				b.Error(err)
			}
		}
	})
	if b.Failed() {
		b.FailNow()
	}
	return g
}

// runFanout stores one post by each of authors with its delivery job,
// then times a service's fan-out of them until idle, and reports the
// deliveries per second.
func (g *fanoutGraph) runFanout(b *testing.B, authors []store.ID) {
	ctx := context.Background()
	var delivered, posts uint64
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		parallel(len(authors), func(i int) {
			at := time.Now().UTC().Truncate(time.Millisecond)
			m := &store.Message{ID: store.NewID(at), AuthorID: authors[i], Text: messageText, Kind: store.KindPost, CreatedAt: at}
			job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutEntries, MessageID: m.ID, AuthorID: authors[i], CreatedAt: at}
			if err := g.st.CreateMessage(ctx, m, job); err != nil {
				b.Error(err)
			}
		})
		svc := service.NewService(g.st, pubsub.NewHub(), service.Options{
			Strategy: service.StrategyWrite,
			Logger:   slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		b.StartTimer()
		start := time.Now()
		if err := svc.Start(ctx); err != nil {
			b.Fatal(err)
		}
		deadline := start.Add(2 * time.Minute)
		for !svc.Idle() {
			if time.Now().After(deadline) {
				b.Fatal("fan-out still busy after 2 minutes")
			}
			time.Sleep(100 * time.Microsecond)
		}
		elapsed += time.Since(start)
		b.StopTimer()
		delivered += svc.Stats().Delivered
		posts += uint64(len(authors))
		if err := svc.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(delivered)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(posts)/elapsed.Seconds(), "posts/s")
}

func BenchmarkFanout_SmallJobs(b *testing.B) {
	g := buildFanoutGraph(b)
	g.runFanout(b, g.authors)
}

func BenchmarkFanout_BigJob(b *testing.B) {
	g := buildFanoutGraph(b)
	authors := make([]store.ID, fanoutBigPosts)
	for i := range authors {
		authors[i] = g.big
	}
	g.runFanout(b, authors)
}
