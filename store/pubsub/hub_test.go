package pubsub_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"herald/store"
	"herald/store/pubsub"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHub(t *testing.T) {
	t.Run("DeliversToTheUsersSubscribers", func(t *testing.T) {
		hub := pubsub.NewHub()
		defer hub.Close()
		alice, bob := store.NewID(time.Now()), store.NewID(time.Now())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a1, err := hub.Subscribe(ctx, alice)
		require.NoError(t, err)
		a2, err := hub.Subscribe(ctx, alice)
		require.NoError(t, err)
		b1, err := hub.Subscribe(ctx, bob)
		require.NoError(t, err)
		hub.Publish(ctx, store.Event{Type: store.EventRead, UserID: alice})
		assert.Equal(t, store.EventRead, (<-a1).Type)
		assert.Equal(t, store.EventRead, (<-a2).Type)
		assert.Empty(t, b1)
	})
	t.Run("SlowSubscriberIsDropped", func(t *testing.T) {
		hub := pubsub.NewHub()
		defer hub.Close()
		u := store.NewID(time.Now())
		ctx := context.Background()
		slow, err := hub.Subscribe(ctx, u)
		require.NoError(t, err)
		done := make(chan struct{})
		go func() {
			for range pubsub.HubBuffer + 10 {
				hub.Publish(ctx, store.Event{Type: store.EventAdded, UserID: u})
			}
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("publisher blocked on a slow subscriber")
		}
		n := 0
		for range slow {
			n++
		}
		assert.Equal(t, pubsub.HubBuffer, n, "the buffered events arrive, then the channel closes")
		assert.Equal(t, 0, hub.Subscribers(u))
	})
	t.Run("EndsWithContext", func(t *testing.T) {
		hub := pubsub.NewHub()
		defer hub.Close()
		u := store.NewID(time.Now())
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := hub.Subscribe(ctx, u)
		require.NoError(t, err)
		assert.Equal(t, 1, hub.Len())
		cancel()
		_, open := <-ch
		assert.False(t, open)
		assert.Equal(t, 0, hub.Len())
	})
	t.Run("Close", func(t *testing.T) {
		hub := pubsub.NewHub()
		ch, err := hub.Subscribe(context.Background(), store.NewID(time.Now()))
		require.NoError(t, err)
		hub.Close()
		_, open := <-ch
		assert.False(t, open)
		_, err = hub.Subscribe(context.Background(), store.NewID(time.Now()))
		assert.Error(t, err)
	})
}

// TestHub_Stats checks the hub's counters: open subscriptions, and a
// subscriber dropped for a full buffer counted once.
func TestHub_Stats(t *testing.T) {
	h := pubsub.NewHub()
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	user := store.NewID(time.Now())
	_, err := h.Subscribe(ctx, user)
	require.NoError(t, err)
	_, err = h.Subscribe(context.Background(), store.NewID(time.Now()))
	require.NoError(t, err)
	assert.Equal(t, pubsub.HubStats{Subscriptions: 2}, h.Stats())

	for range pubsub.HubBuffer + 1 {
		h.Publish(context.Background(), store.Event{Type: store.EventRead, UserID: user})
	}
	assert.Equal(t, pubsub.HubStats{Subscriptions: 1, Dropped: 1}, h.Stats())
	cancel() // already dropped: ending it counts nothing more
	h.Publish(context.Background(), store.Event{Type: store.EventRead, UserID: user})
	assert.Equal(t, pubsub.HubStats{Subscriptions: 1, Dropped: 1}, h.Stats())
}

// Close returns once a delivery under way has returned: the event's
// fields are resolved from the store, which the server closes next.
func TestHub_CloseWaitsForDeliveries(t *testing.T) {
	hub := pubsub.NewHub()
	u := store.NewID(time.Now())
	ctx := context.Background()
	started := make(chan struct{})
	var returned atomic.Bool
	require.NoError(t, hub.SubscribeFunc(ctx, u, func(store.Event) bool {
		close(started)
		time.Sleep(100 * time.Millisecond) // reading the store
		returned.Store(true)
		return true
	}, func() {}))
	hub.Publish(ctx, store.Event{Type: store.EventRead, UserID: u})
	<-started
	hub.Close()
	assert.True(t, returned.Load(), "Close returned while a delivery was under way")
}
