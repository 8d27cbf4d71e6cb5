package pubsub_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/pubsub"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// subscribeWith subscribes through SubscribeWith and returns the events as
// a channel, closed when the subscription ends.
func subscribeWith(ctx context.Context, h *pubsub.Hub, user store.ID, opts pubsub.SubscribeOptions) (<-chan store.Event, error) {
	ch := make(chan store.Event)
	deliver := func(ev store.Event) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	if err := h.SubscribeWith(ctx, user, opts, deliver, func() { close(ch) }); err != nil {
		return nil, err
	}
	return ch, nil
}

// recv returns the next event of ch, failing the test after a timeout.
func recv(t *testing.T, ch <-chan store.Event) store.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "the subscription ended")
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return store.Event{}
	}
}

// numbered is event number n of user: its number travels in Counts.Total.
func numbered(user store.ID, n int) store.Event {
	return store.Event{Type: store.EventRead, UserID: user, Counts: store.InboxCounts{Total: n}}
}

// resume subscribes user after pos, failing the test on an error.
func resume(t *testing.T, ctx context.Context, h *pubsub.Hub, user store.ID, pos store.EventPosition) <-chan store.Event {
	t.Helper()
	ch, err := subscribeWith(ctx, h, user, pubsub.SubscribeOptions{After: pos})
	require.NoError(t, err)
	return ch
}

func TestHub_Resume(t *testing.T) {
	ctx := context.Background()
	t.Run("OK", func(t *testing.T) {
		h := pubsub.NewHub()
		defer h.Close()
		u, other := store.NewID(time.Now()), store.NewID(time.Now())
		sctx, cancel := context.WithCancel(ctx)
		ch, err := h.Subscribe(sctx, u)
		require.NoError(t, err)
		_, err = h.Subscribe(sctx, other)
		require.NoError(t, err)
		h.Publish(ctx, numbered(u, 1), numbered(other, 100), numbered(u, 2))
		assert.Equal(t, 1, recv(t, ch).Counts.Total)
		last := recv(t, ch)
		assert.Equal(t, 2, last.Counts.Total)
		assert.False(t, last.Position.IsZero(), "a delivered event carries its position")
		cancel()
		for range ch {
		}

		// Missed while away, with other users' traffic in between.
		h.Publish(ctx, numbered(u, 3), numbered(other, 101), numbered(u, 4))
		ch = resume(t, ctx, h, u, last.Position)
		h.Publish(ctx, numbered(u, 5))
		for n := 3; n <= 5; n++ {
			assert.Equal(t, n, recv(t, ch).Counts.Total, "the missed events, then the live ones")
		}
		select {
		case ev := <-ch:
			t.Fatalf("unexpected event %d", ev.Counts.Total)
		default:
		}
	})
	t.Run("Filter", func(t *testing.T) {
		h := pubsub.NewHub()
		defer h.Close()
		u := store.NewID(time.Now())
		ch, err := h.Subscribe(ctx, u)
		require.NoError(t, err)
		h.Publish(ctx, numbered(u, 1))
		first := recv(t, ch)
		edit := store.Event{Type: store.EventEdited, UserID: u}
		h.Publish(ctx, edit, numbered(u, 2), edit)
		reads := func(ev store.Event) bool { return ev.Type == store.EventRead }
		got, err := subscribeWith(ctx, h, u, pubsub.SubscribeOptions{After: first.Position, Filter: reads})
		require.NoError(t, err)
		h.Publish(ctx, edit, numbered(u, 3))
		assert.Equal(t, 2, recv(t, got).Counts.Total, "replayed: only the events the filter keeps")
		assert.Equal(t, 3, recv(t, got).Counts.Total, "live: only the events the filter keeps")
	})
	t.Run("ErrResumeExpired", func(t *testing.T) {
		clk := &fakeClock{now: time.Unix(1_000_000, 0)}
		h := pubsub.NewHubWith(pubsub.HubOptions{RetainEvents: 4, RetainFor: time.Minute, Now: clk.Now})
		defer h.Close()
		u, other := store.NewID(time.Now()), store.NewID(time.Now())
		expired := func(user store.ID, pos store.EventPosition) {
			t.Helper()
			_, err := subscribeWith(ctx, h, user, pubsub.SubscribeOptions{After: pos})
			assert.Equal(t, store.ERESUMEEXPIRED, store.ErrorCode(err))
		}
		sctx, cancel := context.WithCancel(ctx)
		ch, err := h.Subscribe(sctx, u)
		require.NoError(t, err)
		och, err := h.Subscribe(ctx, other)
		require.NoError(t, err)
		h.Publish(ctx, numbered(u, 1), numbered(other, 1))
		first := recv(t, ch)
		theirs := recv(t, och)

		expired(u, store.EventPosition{Batch: store.NewID(time.Now()), Index: 1})
		expired(u, theirs.Position)
		expired(other, first.Position) // a log for the user, but not their event

		// Evicted: more events than the log holds since the cursor.
		h.Publish(ctx, numbered(u, 2), numbered(u, 3), numbered(u, 4))
		for range 3 {
			recv(t, ch)
		}
		resume(t, sctx, h, u, first.Position) // 4 events: all there
		h.Publish(ctx, numbered(u, 5))
		var fifth store.Event
		for range 1 {
			fifth = recv(t, ch)
		}
		expired(u, first.Position)

		// Old: an event leaves once the one after it is older than
		// RetainFor; the newest stays however old.
		clk.Add(2 * time.Minute)
		h.Publish(ctx, numbered(u, 6))
		sixth := recv(t, ch)
		clk.Add(2 * time.Minute)
		resume(t, sctx, h, u, sixth.Position) // the newest, 2 minutes old
		h.Publish(ctx, numbered(u, 7))
		recv(t, ch)
		expired(u, fifth.Position) // its successor is 2 minutes old

		// A log outlives the last subscription by RetainFor.
		cancel()
		for range ch {
		}
		assert.Eventually(t, func() bool { return h.Subscribers(u) == 0 }, 5*time.Second, time.Millisecond)
		h.Publish(ctx, numbered(u, 8))
		clk.Add(59 * time.Second)
		probe, pcancel := context.WithCancel(ctx)
		got := resume(t, probe, h, u, sixth.Position)
		assert.Equal(t, 7, recv(t, got).Counts.Total)
		assert.Equal(t, 8, recv(t, got).Counts.Total)
		pcancel()
		for range got {
		}
		assert.Eventually(t, func() bool { return h.Subscribers(u) == 0 }, 5*time.Second, time.Millisecond)
		clk.Add(time.Minute + time.Second)
		expired(u, sixth.Position)
		assert.Equal(t, pubsub.LogStats{Users: 1, Events: 1}, h.LogStats(), "only other's log is left")

		// A hub's positions are its own: a new one (a restarted process)
		// resumes none of them.
		h2 := pubsub.NewHub()
		defer h2.Close()
		_, err = h2.Subscribe(ctx, other)
		require.NoError(t, err)
		_, err = subscribeWith(ctx, h2, other, pubsub.SubscribeOptions{After: theirs.Position})
		assert.Equal(t, store.ERESUMEEXPIRED, store.ErrorCode(err))
	})
	t.Run("IdleLogsBounded", func(t *testing.T) {
		h := pubsub.NewHubWith(pubsub.HubOptions{MaxIdleEvents: 5})
		defer h.Close()
		a, b, c := store.NewID(time.Now()), store.NewID(time.Now()), store.NewID(time.Now())
		for _, u := range []store.ID{a, b} {
			sctx, cancel := context.WithCancel(ctx)
			ch, err := h.Subscribe(sctx, u)
			require.NoError(t, err)
			cancel()
			for range ch {
			}
		}
		_, err := h.Subscribe(ctx, c) // live: never evicted for the idle ones
		require.NoError(t, err)
		require.Eventually(t, func() bool { return h.LogStats().Idle == 2 }, 5*time.Second, time.Millisecond)
		for n := range 3 {
			h.Publish(ctx, numbered(a, n), numbered(b, n), numbered(c, n))
		}
		// a's log ended first: it went when the idle events passed 5.
		assert.Equal(t, pubsub.LogStats{Users: 2, Idle: 1, Events: 6, IdleEvents: 3}, h.LogStats())
	})
}

// TestHub_ResumeWhilePublishing resumes again and again while a publisher
// keeps publishing: every event arrives exactly once, in order, across the
// subscriptions. A subscriber that falls behind and is dropped resumes
// too.
func TestHub_ResumeWhilePublishing(t *testing.T) {
	const total = 3000
	h := pubsub.NewHubWith(pubsub.HubOptions{RetainEvents: total})
	defer h.Close()
	u := store.NewID(time.Now())
	ctx := context.Background()
	// The first subscription opens the log before anything is published.
	sctx, cancel := context.WithCancel(ctx)
	ch, err := h.Subscribe(sctx, u)
	require.NoError(t, err)

	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 1; n <= total; n++ {
			h.Publish(ctx, numbered(u, n))
		}
	})
	next, sessions := 1, 1
	var last store.EventPosition
	deadline := time.After(20 * time.Second)
	for next <= total {
		select {
		case ev, ok := <-ch:
			if ok {
				require.Equal(t, next, ev.Counts.Total, "session %d", sessions)
				next++
				last = ev.Position
				if next%97 != 0 {
					continue
				}
			}
			// Disconnect every 97 events, or when dropped, and resume.
			cancel()
			for range ch {
			}
			sessions++
			sctx, cancel = context.WithCancel(ctx)
			ch = resume(t, sctx, h, u, last)
		case <-deadline:
			t.Fatalf("stuck at event %d of %d", next, total)
		}
	}
	cancel()
	wg.Wait()
	for range ch {
	}
	assert.Greater(t, sessions, total/97)
}

// TestHub_LogMemory measures what a retained event costs: full logs for
// many users, the heap before and after.
//
//	go test -run TestHub_LogMemory -v ./store/pubsub/
func TestHub_LogMemory(t *testing.T) {
	const users = 100
	h := pubsub.NewHub()
	defer h.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := make([]store.ID, users)
	for i := range ids {
		ids[i] = store.NewID(time.Now())
		require.NoError(t, h.SubscribeFunc(ctx, ids[i], func(store.Event) bool { return true }, func() {}))
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msg := store.NewID(time.Now())
	for range pubsub.DefaultRetainEvents {
		evs := make([]store.Event, users)
		for i, id := range ids {
			evs[i] = store.Event{Type: store.EventAdded, UserID: id, MessageID: msg, AuthorID: msg, DeliveredAt: time.Now()}
		}
		h.Publish(ctx, evs...)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	st := h.LogStats()
	require.Equal(t, users*pubsub.DefaultRetainEvents, st.Events)
	perEvent := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(st.Events)
	t.Logf("%.0f bytes per retained event; a full log (%d events) %.0f KiB", perEvent, pubsub.DefaultRetainEvents,
		perEvent*pubsub.DefaultRetainEvents/1024)
	assert.Less(t, perEvent, 200.0, "the bound the design documents")
}
