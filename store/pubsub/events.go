// Package pubsub carries live events from the fan-out to subscriptions:
// the Events contract, and Hub, its in-process implementation, which the
// MongoDB backend extends across processes.
package pubsub

import (
	"container/list"
	"context"
	"sync"
	"sync/atomic"
	"time"

	"herald/store"
)

// Events carries inbox events from the store to live subscribers.
type Events interface {
	// Publish delivers each event to the current subscribers of its UserID.
	// It never blocks on a subscriber. Publishers pass a fan-out chunk's
	// events together, so an implementation that crosses processes can
	// carry them in one message.
	Publish(ctx context.Context, evs ...store.Event)
	// Subscribe returns a channel of the events of one user's inbox. The
	// channel is closed when ctx ends or when the subscriber falls too far
	// behind and is dropped; the Events implementation closes it, never the
	// subscriber.
	Subscribe(ctx context.Context, userID store.ID) (<-chan store.Event, error)
	// SubscribeFunc is Subscribe handing the events to a function instead
	// of a channel, so that a waiting subscriber costs no goroutine: the
	// implementation runs one only while the subscriber has events to
	// take. It calls deliver with each event, in order and one at a time;
	// deliver may block (it should give up when ctx ends) and returns false
	// to end the subscription. The subscription ends, as Subscribe's
	// channel closes, when ctx ends, when the subscriber falls too far
	// behind (the events already waiting are delivered first), or when
	// deliver returns false; then end is called, once, after the last
	// deliver has returned. end must not block.
	SubscribeFunc(ctx context.Context, userID store.ID, deliver func(store.Event) bool, end func()) error
	// SubscribeWith is SubscribeFunc with options. With opts.After set,
	// deliver first gets, in order, every event of the user published
	// after the event at After, then the live ones: none missed and none
	// twice, however events keep arriving meanwhile. When the
	// implementation cannot prove it still has every event since After
	// (too old, evicted, from another epoch, not the user's), it returns
	// RESUME_EXPIRED and subscribes nothing. opts.Filter, when set, keeps
	// the events the subscription takes, replayed and live.
	SubscribeWith(ctx context.Context, userID store.ID, opts SubscribeOptions, deliver func(store.Event) bool, end func()) error
}

// HubBuffer is how many undelivered events a subscriber may have before the
// hub drops it.
const HubBuffer = 64

// Hub is the in-process Events implementation: each subscriber has a queue
// of undelivered events, and a subscriber whose queue is full is dropped, so
// a publisher never waits for a slow client.
//
// An idle subscriber costs a few hundred bytes and no goroutine: the queue
// is allocated when an event arrives and freed when it is delivered, a
// goroutine (the pump) runs only while the queue is not empty, and the end
// of the subscriber's ctx is watched with context.AfterFunc. With ten
// thousand websocket subscribers on one server, a 64-event channel and a
// watching goroutine each came to some 11 KiB a subscriber.
//
// The hub also retains recent events of the users who have or recently had
// a subscription, for SubscribeWith's After (see log.go for the bounds).
type Hub struct {
	opts  HubOptions
	epoch store.ID // Batch of the positions Publish gives, unique to this hub

	mu     sync.Mutex
	subs   map[store.ID]map[*hubSub]struct{}
	seq    uint64 // Index of the last position Publish gave
	logs   map[store.ID]*userLog
	idle   *list.List // of user ids, the idle logs, oldest ended first
	closed bool
	done   chan struct{} // closed by Close, to stop Subscribe's sends
	// idleEvents is the number of events in idle logs.
	idleEvents int
	// open and dropped are written under mu and read without it, so
	// that monitoring never waits on a publish.
	open    atomic.Int64
	dropped atomic.Uint64
	// pumps is the number of subscribers' pumps running, which Close
	// waits for (closeWait).
	pumps atomic.Int64
}

// HubStats are a hub's counters, for monitoring.
type HubStats struct {
	// Subscriptions is the number of open subscriptions.
	Subscriptions int
	// Dropped counts the subscribers dropped because their buffer was
	// full, since the hub was made.
	Dropped uint64
}

// hubSub is one subscription. Its pump goroutine is the only caller of
// deliver and end. Lock order: Hub.mu, then hubSub.mu.
type hubSub struct {
	hub     *Hub
	userID  store.ID
	deliver func(store.Event) bool
	end     func()
	filter  func(store.Event) bool // nil: every event

	mu      sync.Mutex
	stop    func() bool   // stops the AfterFunc watching ctx
	queue   []store.Event // waiting for the pump; nil when empty
	replay  int           // replayed events at the front of queue
	pending int           // live events queued or being delivered
	pumping bool          // a pump runs; once removed, stays true (end is the pump's)
	removed bool          // out of the hub: nothing more is queued
	flush   bool          // removed for falling behind: deliver the queue first
}

var _ Events = (*Hub)(nil)

// NewHub returns an empty hub that retains events with the default bounds.
func NewHub() *Hub { return NewHubWith(HubOptions{}) }

// NewHubWith returns an empty hub that retains events as opts say.
func NewHubWith(opts HubOptions) *Hub {
	opts = opts.withDefaults()
	return &Hub{
		opts: opts, epoch: store.NewID(opts.Now()),
		subs: make(map[store.ID]map[*hubSub]struct{}), logs: make(map[store.ID]*userLog), idle: list.New(),
		done: make(chan struct{}),
	}
}

// Publish implements Events. It gives each event without a position the
// next one of this hub, retains it in its user's log if there is one, and
// queues it for the user's subscribers, all under the hub's lock, so that
// SubscribeWith sees each event either in the log or live, never both.
// It starts a pump for each subscriber that had nothing queued.
func (h *Hub) Publish(_ context.Context, evs ...store.Event) {
	now := h.opts.Now().UnixNano()
	h.mu.Lock()
	defer h.mu.Unlock()
	defer h.evictIdleLocked(now)
	for _, ev := range evs {
		if ev.Position.IsZero() {
			h.seq++
			ev.Position = store.EventPosition{Batch: h.epoch, Index: h.seq}
		}
		if ev.UserID != store.SessionsTopic {
			h.appendLocked(ev, now)
		}
		for s := range h.subs[ev.UserID] {
			if s.filter != nil && !s.filter(ev) {
				continue
			}
			s.mu.Lock()
			if s.pending >= HubBuffer {
				s.mu.Unlock()
				h.removeLocked(s, true)
				h.dropped.Add(1)
				continue
			}
			s.queue = append(s.queue, ev)
			s.pending++
			start := !s.pumping
			s.pumping = true
			s.mu.Unlock()
			if start {
				s.startPump()
			}
		}
	}
}

// Subscribe implements Events over SubscribeFunc: the channel is
// unbuffered, the events waiting for the receiver being queued in the hub.
// After Close it returns INTERNAL.
func (h *Hub) Subscribe(ctx context.Context, userID store.ID) (<-chan store.Event, error) {
	ch := make(chan store.Event)
	deliver := func(ev store.Event) bool {
		select {
		case ch <- ev:
			return true
		case <-ctx.Done():
			return false
		case <-h.done:
			return false
		}
	}
	if err := h.SubscribeFunc(ctx, userID, deliver, func() { close(ch) }); err != nil {
		return nil, err
	}
	return ch, nil
}

// SubscribeFunc implements Events. After Close it returns INTERNAL.
func (h *Hub) SubscribeFunc(ctx context.Context, userID store.ID, deliver func(store.Event) bool, end func()) error {
	return h.SubscribeWith(ctx, userID, SubscribeOptions{}, deliver, end)
}

// SubscribeWith implements Events. It reads the replay from the user's
// log and registers the subscriber under the hub's lock, which Publish
// holds too, so no event falls between the two. The replay is queued
// before any live event and does not count against HubBuffer. After Close
// it returns INTERNAL.
func (h *Hub) SubscribeWith(ctx context.Context, userID store.ID, opts SubscribeOptions, deliver func(store.Event) bool, end func()) error {
	s := &hubSub{hub: h, userID: userID, deliver: deliver, end: end, filter: opts.Filter}
	now := h.opts.Now().UnixNano()
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return store.Errorf(store.EINTERNAL, "event hub is closed")
	}
	h.evictIdleLocked(now)
	if !opts.After.IsZero() {
		l := h.logs[userID]
		if l == nil || userID == store.SessionsTopic {
			h.mu.Unlock()
			return errResumeExpired()
		}
		replay, ok := l.since(opts.After, opts.Filter)
		if !ok {
			h.mu.Unlock()
			return errResumeExpired()
		}
		s.queue, s.replay, s.pumping = replay, len(replay), len(replay) > 0
	}
	replaying := s.pumping // read before s is shared
	m := h.subs[userID]
	if m == nil {
		m = make(map[*hubSub]struct{})
		h.subs[userID] = m
	}
	m[s] = struct{}{}
	if userID != store.SessionsTopic {
		h.open.Add(1)
		h.openLogLocked(userID)
	}
	h.mu.Unlock()
	if replaying {
		s.startPump()
	}

	// Registered after the subscriber, so that a ctx already ended removes
	// it; a subscriber dropped in between stops the watch here.
	stop := context.AfterFunc(ctx, func() { h.remove(s) })
	s.mu.Lock()
	removed := s.removed
	if !removed {
		s.stop = stop
	}
	s.mu.Unlock()
	if removed {
		stop()
	}
	return nil
}

// remove unregisters s, dropping what it has queued.
func (h *Hub) remove(s *hubSub) {
	h.mu.Lock()
	h.removeLocked(s, false)
	h.mu.Unlock()
}

// removeLocked unregisters s and has its pump end it, once: at once, or
// after delivering what is queued when flush is set (a subscriber that
// fell behind gets what it was sent).
func (h *Hub) removeLocked(s *hubSub, flush bool) {
	m := h.subs[s.userID]
	if _, ok := m[s]; !ok {
		// Already removed: a later reason to end overrides a flush.
		s.mu.Lock()
		s.flush = s.flush && flush
		s.mu.Unlock()
		return
	}
	delete(m, s)
	if len(m) == 0 {
		delete(h.subs, s.userID)
	}
	if s.userID != store.SessionsTopic {
		h.open.Add(-1)
		h.closeLogLocked(s.userID)
	}

	s.mu.Lock()
	s.removed, s.flush = true, flush
	stop := s.stop
	start := !s.pumping
	s.pumping = true
	s.mu.Unlock()
	if stop != nil {
		stop() // does not wait for a running h.remove(s)
	}
	if start {
		s.startPump()
	}
}

// pump delivers s's queued events, and returns when the queue is empty;
// once s is removed, it calls end and returns.
// startPump runs s.pump on a goroutine of its own, counted in the hub's
// pumps.
func (s *hubSub) startPump() {
	s.hub.pumps.Add(1)
	go func() {
		defer s.hub.pumps.Add(-1)
		s.pump()
	}()
}

func (s *hubSub) pump() {
	live := false // the last event delivered was live, not replayed
	for {
		s.mu.Lock()
		if live {
			s.pending--
		}
		if len(s.queue) == 0 || (s.removed && !s.flush) {
			s.queue, s.pending, s.replay = nil, 0, 0
			removed := s.removed
			if !removed {
				s.pumping = false
			}
			s.mu.Unlock()
			if removed {
				s.end()
			}
			return
		}
		ev := s.queue[0]
		s.queue = s.queue[1:]
		live = s.replay == 0
		if !live {
			s.replay--
		}
		s.mu.Unlock()
		if !s.deliver(ev) {
			s.hub.remove(s)
		}
	}
}

// Subscribers returns the number of open subscriptions of one user.
func (h *Hub) Subscribers(userID store.ID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[userID])
}

// Len returns the number of open subscriptions of all users: inbox
// subscribers, not a process's own listener on SessionsTopic.
func (h *Hub) Len() int { return int(h.open.Load()) }

// Stats returns the hub's counters. It takes no lock.
func (h *Hub) Stats() HubStats {
	return HubStats{Subscriptions: h.Len(), Dropped: h.dropped.Load()}
}

// Close ends every subscription and refuses new ones. It waits, up to
// closeWait, for the deliveries under way and the subscriptions' end
// functions to return, so that the store they read may be closed after.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	for _, m := range h.subs {
		for s := range m {
			h.removeLocked(s, false)
		}
	}
	h.mu.Unlock()
	// The deliveries under way read the store (an event's fields), which
	// closes next: they get closeWait to return.
	for deadline := time.Now().Add(closeWait); h.pumps.Load() > 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
}

// closeWait bounds Close's wait for deliveries under way: a deliver may
// block until its subscriber's context ends.
const closeWait = 5 * time.Second
