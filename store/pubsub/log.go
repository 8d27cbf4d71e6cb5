package pubsub

import (
	"container/list"
	"time"

	"herald/store"
)

// The hub keeps recent events of the users who have, or recently had, a
// subscription, so that a client that reconnects resumes after the last
// event it received (SubscribeOptions.After) with nothing missed and
// nothing twice. Each such user has a log of their events in the order the
// hub delivered them. A cursor resumes when its event is still in the
// viewer's log: every event since is then there too, since a log loses
// events only from its old end.
//
// The bounds, per user:
//
//   - a log starts with the user's first subscription (events from before
//     are not kept) and ends RetainFor after their last subscription ended;
//   - it holds at most RetainEvents events, dropping the oldest;
//   - an event leaves once the event after it is older than RetainFor: a
//     client that received an event and then nothing more (there was
//     nothing more) still resumes from it, however old it is, for as long
//     as the log lasts.
//
// And in all: the logs of users without a subscription hold at most
// MaxIdleEvents events; past that, the log whose last subscription ended
// first goes. The logs of users with a subscription are bounded by
// RetainEvents each, so one user's traffic never evicts another's events.

// Defaults of HubOptions.
const (
	// DefaultRetainEvents is how many events a user's log holds.
	DefaultRetainEvents = 1024
	// DefaultRetainFor is how long a log outlives its user's last
	// subscription, and how long an event stays once a newer one came.
	DefaultRetainFor = 5 * time.Minute
	// DefaultMaxIdleEvents bounds the events in the logs of users without
	// a subscription.
	DefaultMaxIdleEvents = 1 << 18
)

// HubOptions configure a Hub's retention of events for resuming. Zero
// values pick the defaults.
type HubOptions struct {
	// RetainEvents is how many events each user's log holds.
	RetainEvents int
	// RetainFor is how long a log outlives its user's last subscription,
	// and how long an event stays in it once a newer one came.
	RetainFor time.Duration
	// MaxIdleEvents bounds the events of the logs of users without a
	// subscription, all together.
	MaxIdleEvents int
	// Now is the clock; time.Now by default.
	Now func() time.Time
}

func (o HubOptions) withDefaults() HubOptions {
	if o.RetainEvents <= 0 {
		o.RetainEvents = DefaultRetainEvents
	}
	if o.RetainFor <= 0 {
		o.RetainFor = DefaultRetainFor
	}
	if o.MaxIdleEvents <= 0 {
		o.MaxIdleEvents = DefaultMaxIdleEvents
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// SubscribeOptions say where a subscription starts and which events it
// takes.
type SubscribeOptions struct {
	// After, when set, is the position of the last event the subscriber
	// has: the events of its user published after it are delivered first,
	// then the live ones. Zero: from now.
	After store.EventPosition
	// Filter, when set, keeps the events, replayed and live, that the
	// subscription takes. The hub calls it holding its lock: it must be
	// quick and must not call the hub.
	Filter func(store.Event) bool
}

// errResumeExpired is what a subscription gets whose After the hub cannot
// resume from.
func errResumeExpired() error {
	return store.Errorf(store.ERESUMEEXPIRED,
		"the events since this cursor are no longer kept: read the inbox again, then subscribe without a cursor")
}

// logEntry is one retained event and when the hub delivered it.
type logEntry struct {
	ev store.Event
	at int64 // Unix nanoseconds
}

// userLog is one user's retained events, oldest first, in a ring that
// grows up to the cap and shrinks when mostly empty.
type userLog struct {
	buf  []logEntry
	head int // index in buf of the oldest entry
	n    int

	live  int           // open subscriptions of the user
	ended int64         // when the last one ended (Unix ns), while live == 0
	idle  *list.Element // in Hub.idle while live == 0
}

func (l *userLog) at(i int) *logEntry { return &l.buf[(l.head+i)%len(l.buf)] }

// push appends e, dropping the oldest entry when the log holds max, and
// returns the change in the log's length.
func (l *userLog) push(e logEntry, max int) int {
	d := 1
	if l.n == len(l.buf) {
		if len(l.buf) < max {
			l.resize(min(max, 2*len(l.buf)+8))
		} else {
			l.popFront()
			d = 0
		}
	}
	*l.at(l.n) = e
	l.n++
	return d
}

func (l *userLog) popFront() {
	l.buf[l.head] = logEntry{}
	l.head = (l.head + 1) % len(l.buf)
	l.n--
}

func (l *userLog) resize(size int) {
	buf := make([]logEntry, size)
	for i := range l.n {
		buf[i] = *l.at(i)
	}
	l.buf, l.head = buf, 0
}

// trim drops the entries whose successor is older than cutoff, and returns
// how many it dropped. The newest entry always stays.
func (l *userLog) trim(cutoff int64) int {
	k := 0
	for l.n >= 2 && l.at(1).at < cutoff {
		l.popFront()
		k++
	}
	if l.n < len(l.buf)/4 && len(l.buf) > 8 {
		l.resize(len(l.buf) / 2)
	}
	return k
}

// since returns the events after the one at p that keep accepts, and
// whether p is in the log.
func (l *userLog) since(p store.EventPosition, keep func(store.Event) bool) ([]store.Event, bool) {
	for i := l.n - 1; i >= 0; i-- {
		if l.at(i).ev.Position != p {
			continue
		}
		var out []store.Event
		for j := i + 1; j < l.n; j++ {
			if ev := l.at(j).ev; keep == nil || keep(ev) {
				out = append(out, ev)
			}
		}
		return out, true
	}
	return nil, false
}

// openLogLocked makes userID's log if it has none, and counts one more
// subscription in it. Called with h.mu held.
func (h *Hub) openLogLocked(userID store.ID) {
	l := h.logs[userID]
	if l == nil {
		l = &userLog{}
		h.logs[userID] = l
	}
	if l.idle != nil {
		h.idle.Remove(l.idle)
		l.idle = nil
		h.idleEvents -= l.n
	}
	l.live++
}

// closeLogLocked counts one subscription less in userID's log; the last
// leaves the log idle, to expire RetainFor later. Called with h.mu held.
func (h *Hub) closeLogLocked(userID store.ID) {
	l := h.logs[userID]
	if l == nil {
		return
	}
	l.live--
	if l.live > 0 {
		return
	}
	l.ended = h.opts.Now().UnixNano()
	l.idle = h.idle.PushBack(userID)
	h.idleEvents += l.n
	h.evictIdleLocked(l.ended)
}

// appendLocked retains ev in its user's log, if the user has one. Called
// with h.mu held.
func (h *Hub) appendLocked(ev store.Event, now int64) {
	l := h.logs[ev.UserID]
	if l == nil {
		return
	}
	d := l.push(logEntry{ev: ev, at: now}, h.opts.RetainEvents) - l.trim(now-int64(h.opts.RetainFor))
	if l.idle != nil {
		h.idleEvents += d
	}
}

// evictIdleLocked drops the idle logs that expired and, while the idle
// logs hold more than MaxIdleEvents, the one idle longest. Called with h.mu
// held.
func (h *Hub) evictIdleLocked(now int64) {
	for e := h.idle.Front(); e != nil; e = h.idle.Front() {
		id := e.Value.(store.ID)
		l := h.logs[id]
		if now-l.ended < int64(h.opts.RetainFor) && h.idleEvents <= h.opts.MaxIdleEvents {
			return
		}
		h.idle.Remove(e)
		h.idleEvents -= l.n
		delete(h.logs, id)
	}
}

// ForgetLogs empties every user's log, keeping the logs themselves (and
// so the users' subscriptions' bounds): the caller has lost events it
// could not publish (a change stream that lost its history), so no
// position from before can be resumed with nothing missed. Events
// published after it are retained as before.
func (h *Hub) ForgetLogs() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.logs {
		if l.idle != nil {
			h.idleEvents -= l.n
		}
		l.buf, l.head, l.n = nil, 0, 0
	}
}

// LogStats are the sizes of a hub's logs, for monitoring and tests.
type LogStats struct {
	// Users is the number of users with a log; Idle of those, the ones
	// without a subscription.
	Users, Idle int
	// Events is the number of events retained in all logs; IdleEvents in
	// the idle ones.
	Events, IdleEvents int
}

// LogStats returns the sizes of the hub's logs. It takes the hub's lock
// and visits every log.
func (h *Hub) LogStats() LogStats {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := LogStats{Users: len(h.logs), Idle: h.idle.Len(), IdleEvents: h.idleEvents}
	for _, l := range h.logs {
		s.Events += l.n
	}
	return s
}
