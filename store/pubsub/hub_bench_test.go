package pubsub_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"herald/store"
	"herald/store/pubsub"
)

// BenchmarkHubPublish measures event routing: a delivery chunk's events
// (one per follower, 1,000 a call) published to 10,000 live subscribers,
// one per user, each drained by its own goroutine as a websocket writer
// would. ns/op is per chunk; events/s is routed events.
//
//	go test -run '^$' -bench HubPublish -benchmem ./store/
func BenchmarkHubPublish(b *testing.B) {
	const users, chunk = 10_000, 1_000
	hub := pubsub.NewHub()
	defer hub.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := make([]store.ID, users)
	var wg sync.WaitGroup
	now := time.Now()
	for i := range ids {
		ids[i] = store.NewID(now)
		ch, err := hub.Subscribe(ctx, ids[i])
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for range ch {
			}
		})
	}
	msg := store.NewID(now)
	evs := make([]store.Event, chunk)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		for j := range evs {
			evs[j] = store.Event{Type: store.EventAdded, UserID: ids[(n+j)%users], MessageID: msg}
		}
		n += chunk
		hub.Publish(ctx, evs...)
	}
	b.StopTimer()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "events/s")
	if dropped := users - hub.Len(); dropped > 0 {
		b.Logf("%d subscribers dropped as slow", dropped)
	}
	cancel()
	hub.Close()
	wg.Wait()
}
