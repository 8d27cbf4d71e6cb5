package embedded_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// benchUser creates a user with the given handle directly through the
// backend and returns its ID.
func benchUser(b testing.TB, st *embedded.Store, handle string) store.ID {
	b.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := &store.User{ID: store.NewID(now), Handle: handle, DisplayName: handle, CreatedAt: now, LastSeenAt: now}
	require.NoError(b, st.CreateUser(context.Background(), u))
	return u.ID
}

// graph makes an author with n followers directly through the backend,
// concurrently so that synced commits share fsyncs.
func graph(b testing.TB, st *embedded.Store, n int) (author store.ID, followers []store.ID) {
	b.Helper()
	ctx := context.Background()
	author = benchUser(b, st, "author")
	followers = make([]store.ID, n)
	var wg sync.WaitGroup
	const par = 32
	for w := range par {
		wg.Go(func() {
			for i := w; i < n; i += par {
				followers[i] = benchUser(b, st, fmt.Sprintf("f%d", i))
				_, err := st.Follow(ctx, followers[i], author, time.Now())
				require.NoError(b, err)
			}
		})
	}
	wg.Wait()
	return author, followers
}

// BenchmarkFanout measures the time from postMessage until every follower
// has the message in their inbox, and the delivery rate, under strategy
// bucket (LayoutBuckets).
func BenchmarkFanout(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("followers=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := embedded.Open(b.TempDir(), embedded.Options{})
			require.NoError(b, err)
			defer st.Close()
			author, _ := graph(b, st, n)
			svc := service.NewService(st, pubsub.NewHub(), service.Options{Strategy: service.StrategyBucket, PasswordCost: bcrypt.MinCost})
			require.NoError(b, svc.Start(ctx))
			defer svc.Close(ctx)

			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				_, err := svc.PostMessage(ctx, author, service.PostInput{Text: "hello followers"})
				require.NoError(b, err)
				for !svc.Idle() {
					time.Sleep(50 * time.Microsecond)
				}
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/post")
			b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "deliveries/s")
		})
	}
}

// BenchmarkInbox measures reading a 50-item inbox page with its messages,
// as the timeline query does before loading authors, under strategy bucket.
func BenchmarkInbox(b *testing.B) {
	ctx := context.Background()
	st, err := embedded.Open(b.TempDir(), embedded.Options{})
	require.NoError(b, err)
	defer st.Close()
	author, followers := graph(b, st, 10)
	svc := service.NewService(st, pubsub.NewHub(), service.Options{Strategy: service.StrategyBucket, PasswordCost: bcrypt.MinCost})
	require.NoError(b, svc.Start(ctx))
	defer svc.Close(ctx)
	for range 120 {
		_, err := svc.PostMessage(ctx, author, service.PostInput{Text: "a message of ordinary length, say eighty characters or so, to read"})
		require.NoError(b, err)
	}
	for !svc.Idle() {
		time.Sleep(time.Millisecond)
	}
	// Forward from the newest, and backward (last/before) from the middle.
	first, err := svc.Inbox(ctx, followers[0], store.Forward(store.NilID, 60))
	require.NoError(b, err)
	mid := first.Items[len(first.Items)-1].MessageID
	for _, tc := range []struct {
		name string
		r    store.Range
	}{
		{"forward", store.Forward(store.NilID, 50)},
		{"backward", store.Backward(mid, 50)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				page, err := svc.Inbox(ctx, followers[i%len(followers)], tc.r)
				if err != nil || len(page.Items) != 50 {
					b.Fatalf("page: %d items, %v", len(page.Items), err)
				}
				i++
			}
		})
	}
}

// BenchmarkDeliverChunk measures the backend alone: one DeliverInbox chunk
// of 1000 owners in LayoutBuckets, one synced batch.
func BenchmarkDeliverChunk(b *testing.B) {
	ctx := context.Background()
	st, err := embedded.Open(b.TempDir(), embedded.Options{})
	require.NoError(b, err)
	defer st.Close()
	author, followers := graph(b, st, 1000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := time.Now()
		m := &store.Message{ID: store.NewID(now), AuthorID: author, Text: "hi", Kind: store.KindPost, CreatedAt: now}
		job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: now}
		require.NoError(b, st.CreateMessage(ctx, m, job))
		changes, err := st.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: followers, ActiveSince: now.Add(-time.Hour), At: now, Done: true})
		require.NoError(b, err)
		require.Len(b, changes, len(followers))
	}
	b.ReportMetric(float64(len(followers)*b.N)/b.Elapsed().Seconds(), "deliveries/s")
}

// BenchmarkFindOutbox measures fan-out on read's k-way merge (strategy
// read, and hybrid's celebrities): a page of 51 (50 and one to tell
// whether more follow) over 200 followees' outboxes of 25 messages each,
// from the newest forward, and backward from the middle.
func BenchmarkFindOutbox(b *testing.B) {
	ctx := context.Background()
	st, err := embedded.Open(b.TempDir(), embedded.Options{})
	require.NoError(b, err)
	defer st.Close()
	authors := make([]store.ID, 200)
	var ids []store.ID
	for i := range authors {
		authors[i] = benchUser(b, st, fmt.Sprintf("a%d", i))
	}
	for j := range 25 {
		for _, a := range authors {
			now := time.Now().UTC().Truncate(time.Millisecond)
			m := &store.Message{ID: store.NewID(now), AuthorID: a, Text: fmt.Sprintf("message %d", j), Kind: store.KindPost, CreatedAt: now}
			require.NoError(b, st.CreateMessage(ctx, m, nil))
			ids = append(ids, m.ID)
		}
	}
	mid := ids[len(ids)/2]
	for _, tc := range []struct {
		name string
		r    store.Range
	}{
		{"forward", store.Forward(store.NilID, 51)},
		{"backward", store.Backward(mid, 51)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				es, err := st.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: tc.r})
				if err != nil || len(es) != 51 {
					b.Fatalf("page: %d entries, %v", len(es), err)
				}
			}
		})
	}
}

// BenchmarkRawAppend is the engine's own limit for fan-out's writes
// (embedded.RawAppendRate): synced batches of 1,000 inbox entries. Compare
// its entries/s with BenchmarkFanout's deliveries/s.
func BenchmarkRawAppend(b *testing.B) {
	const n = 200_000
	for b.Loop() {
		rate, err := embedded.RawAppendRate(filepath.Join(b.TempDir(), "raw"), n, 1000)
		require.NoError(b, err)
		b.ReportMetric(rate, "entries/s")
	}
}
