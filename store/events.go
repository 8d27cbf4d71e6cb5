package store

import (
	"context"
	"sync"
	"sync/atomic"
)

// EventType says what happened in an inbox. The values are the GraphQL enum values.
type EventType string

// Inbox event types.
const (
	EventAdded   EventType = "ADDED"
	EventEdited  EventType = "EDITED"
	EventDeleted EventType = "DELETED"
	EventRead    EventType = "READ"
)

// Event is a change in one user's inbox, published after the change is
// stored. Counts are the inbox's counts after the change, except for
// EventEdited, which leaves them zero: an edit changes no count, and its
// publisher does not read them.
type Event struct {
	Type      EventType
	UserID    ID // the inbox owner
	MessageID ID // NilID for EventRead
	AuthorID  ID // the message's author, to find it by key; NilID for EventRead
	Counts    InboxCounts
	// NoCounts is true when the publisher did not know the counts (a
	// strategy that computes them at read time): subscribers read them.
	NoCounts bool
}

// Events carries inbox events from the store to live subscribers.
type Events interface {
	// Publish delivers each event to the current subscribers of its UserID.
	// It never blocks on a subscriber. Publishers pass a fan-out chunk's
	// events together, so an implementation that crosses processes can
	// carry them in one message.
	Publish(ctx context.Context, evs ...Event)
	// Subscribe returns a channel of the events of one user's inbox. The
	// channel is closed when ctx ends or when the subscriber falls too far
	// behind and is dropped; the Events implementation closes it, never the
	// subscriber.
	Subscribe(ctx context.Context, userID ID) (<-chan Event, error)
}

// HubBuffer is how many undelivered events a subscriber may have before the
// hub drops it.
const HubBuffer = 64

// Hub is the in-process Events implementation: each subscriber has a buffered
// channel, and a subscriber whose buffer is full is dropped (its channel
// closed), so a publisher never waits for a slow client.
type Hub struct {
	mu     sync.Mutex
	subs   map[ID]map[*hubSub]struct{}
	closed bool
	// open and dropped are written under mu and read without it, so
	// that monitoring never waits on a publish.
	open    atomic.Int64
	dropped atomic.Uint64
}

// HubStats are a hub's counters, for monitoring.
type HubStats struct {
	// Subscriptions is the number of open subscriptions.
	Subscriptions int
	// Dropped counts the subscribers dropped because their buffer was
	// full, since the hub was made.
	Dropped uint64
}

type hubSub struct {
	ch   chan Event
	done chan struct{} // closed with ch, so the watcher of ctx can return
}

var _ Events = (*Hub)(nil)

// NewHub returns an empty hub.
func NewHub() *Hub {
	return &Hub{subs: make(map[ID]map[*hubSub]struct{})}
}

// Publish implements Events.
func (h *Hub) Publish(_ context.Context, evs ...Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range evs {
		for s := range h.subs[ev.UserID] {
			select {
			case s.ch <- ev:
			default:
				h.removeLocked(ev.UserID, s)
				h.dropped.Add(1)
			}
		}
	}
}

// Subscribe implements Events. After Close it returns INTERNAL.
func (h *Hub) Subscribe(ctx context.Context, userID ID) (<-chan Event, error) {
	s := &hubSub{ch: make(chan Event, HubBuffer), done: make(chan struct{})}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, Errorf(EINTERNAL, "event hub is closed")
	}
	m := h.subs[userID]
	if m == nil {
		m = make(map[*hubSub]struct{})
		h.subs[userID] = m
	}
	m[s] = struct{}{}
	h.open.Add(1)
	h.mu.Unlock()

	go func() {
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.removeLocked(userID, s)
			h.mu.Unlock()
		case <-s.done: // dropped, or the hub closed
		}
	}()
	return s.ch, nil
}

// removeLocked unregisters s and closes its channel, once.
func (h *Hub) removeLocked(userID ID, s *hubSub) {
	m := h.subs[userID]
	if _, ok := m[s]; !ok {
		return
	}
	delete(m, s)
	if len(m) == 0 {
		delete(h.subs, userID)
	}
	h.open.Add(-1)
	close(s.ch)
	close(s.done)
}

// Subscribers returns the number of open subscriptions of one user.
func (h *Hub) Subscribers(userID ID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[userID])
}

// Len returns the number of open subscriptions of all users.
func (h *Hub) Len() int { return int(h.open.Load()) }

// Stats returns the hub's counters. It takes no lock.
func (h *Hub) Stats() HubStats {
	return HubStats{Subscriptions: h.Len(), Dropped: h.dropped.Load()}
}

// Close ends every subscription and refuses new ones.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for id, m := range h.subs {
		for s := range m {
			h.removeLocked(id, s)
		}
	}
}
