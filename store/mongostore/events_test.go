package mongostore

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/pubsub"
)

// lockedBuffer is a log sink safe for the watcher's writes and the test's
// reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// dropStream fails the open change stream under the watcher, as a network
// error would, so tests can check that it resumes. It reports whether a
// stream was open.
func (e *Events) dropStream() bool {
	e.mu.Lock()
	drop := e.drop
	e.mu.Unlock()
	if drop == nil {
		return false
	}
	drop()
	return true
}

// newEngine opens an in-memory lungo engine, closed in t.Cleanup.
func newEngine(t *testing.T, opts lungo.Options) (lungo.IClient, *lungo.Engine) {
	t.Helper()
	opts.Store = lungo.NewMemoryStore()
	client, engine, err := lungo.Open(context.Background(), opts)
	require.NoError(t, err)
	t.Cleanup(engine.Close)
	return client, engine
}

// startEvents runs Events over database name of client, closed in
// t.Cleanup.
func startEvents(t *testing.T, client lungo.IClient, name string, opts EventsOptions) *Events {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	e := NewEvents(client.Database(name), opts)
	require.NoError(t, e.Run(context.Background()))
	t.Cleanup(e.Close)
	return e
}

func subscribe(t *testing.T, e *Events, user store.ID) <-chan store.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := e.Subscribe(ctx, user)
	require.NoError(t, err)
	return ch
}

// mustRecv returns the next event of ch without its position, which it
// checks is set, so that tests compare what was published.
func mustRecv(t *testing.T, ch <-chan store.Event) store.Event {
	t.Helper()
	ev := mustRecvAt(t, ch)
	assert.False(t, ev.Position.IsZero(), "a delivered event carries its position")
	ev.Position = store.EventPosition{}
	return ev
}

// mustRecvAt returns the next event of ch, position included.
func mustRecvAt(t *testing.T, ch <-chan store.Event) store.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "channel closed")
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5s")
		return store.Event{}
	}
}

func assertNoRecv(t *testing.T, ch <-chan store.Event, d time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		assert.False(t, ok, "unexpected event %+v", ev)
	case <-time.After(d):
	}
}

func TestEvents_Publish(t *testing.T) {
	t.Run("OKOtherInstance", func(t *testing.T) {
		c1, engine := newEngine(t, lungo.Options{})
		c2 := lungo.NewClient(engine)
		a := startEvents(t, c1, "herald", EventsOptions{})
		b := startEvents(t, c2, "herald", EventsOptions{})
		alice, msg := store.NewID(time.Now()), store.NewID(time.Now())
		onB, onA := subscribe(t, b, alice), subscribe(t, a, alice)

		want := store.Event{Type: store.EventAdded, UserID: alice, MessageID: msg, AuthorID: store.NewID(time.Now()),
			Counts: store.InboxCounts{ReadMark: store.NewID(time.Now()), Total: 6, Unread: 4, Rebuilding: true}}
		a.Publish(context.Background(), want)
		assert.Equal(t, want, mustRecv(t, onB), "published on A, received on B")
		assert.Equal(t, want, mustRecv(t, onA), "the publisher's own subscribers get it through the stream")
		assertNoRecv(t, onA, 200*time.Millisecond) // once, not twice
		assertNoRecv(t, onB, 0)
	})

	t.Run("OKBatch", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
		e := startEvents(t, client, "herald", EventsOptions{Now: func() time.Time { return now }})
		u1, u2, u3, idle := store.NewID(now), store.NewID(now), store.NewID(now), store.NewID(now)
		m1, m2, author := store.NewID(now), store.NewID(now), store.NewID(now)
		s1, s2, sIdle := subscribe(t, e, u1), subscribe(t, e, u2), subscribe(t, e, idle)

		batch := []store.Event{
			{Type: store.EventAdded, UserID: u1, MessageID: m1, AuthorID: author, Counts: store.InboxCounts{Total: 1, Unread: 1}},
			{Type: store.EventAdded, UserID: u2, MessageID: m1, AuthorID: author, Counts: store.InboxCounts{ReadMark: m1, Total: 5, Unread: 0}},
			{Type: store.EventAdded, UserID: u3, MessageID: m1, AuthorID: author, Counts: store.InboxCounts{Total: 1, Unread: 1}},
			{Type: store.EventEdited, UserID: u1, MessageID: m2, AuthorID: author},
			{Type: store.EventDeleted, UserID: u1, MessageID: m2, AuthorID: author, Counts: store.InboxCounts{Total: 0}},
			{Type: store.EventRead, UserID: u2, Counts: store.InboxCounts{ReadMark: m1, Total: 5}},
		}
		e.Publish(context.Background(), batch...)

		assert.Equal(t, batch[0], mustRecv(t, s1))
		assert.Equal(t, batch[3], mustRecv(t, s1))
		assert.Equal(t, batch[4], mustRecv(t, s1))
		assert.Equal(t, batch[1], mustRecv(t, s2))
		assert.Equal(t, batch[5], mustRecv(t, s2))
		assertNoRecv(t, s1, 100*time.Millisecond)
		assertNoRecv(t, s2, 0)
		assertNoRecv(t, sIdle, 0)

		// One document for the batch, in short field names, expiring in
		// ten minutes.
		coll := client.Database("herald").Collection(collEvents)
		n, err := coll.CountDocuments(context.Background(), bson.D{})
		require.NoError(t, err)
		assert.Equal(t, int64(1), n)
		var doc bson.M
		require.NoError(t, coll.FindOne(context.Background(), bson.D{}).Decode(&doc))
		assert.ElementsMatch(t, []string{"_id", "x", "e"}, keys(doc), "no number with a change stream")
		n, err = client.Database("herald").Collection(collEventSeq).CountDocuments(context.Background(), bson.D{})
		require.NoError(t, err)
		assert.Zero(t, n, "no counter written")
		assert.WithinDuration(t, now.Add(10*time.Minute), doc["x"].(primitive.DateTime).Time(), time.Millisecond)
		es := doc["e"].(bson.A)
		require.Len(t, es, len(batch))
		assert.ElementsMatch(t, []string{"t", "u", "m", "a", "n", "q"}, keys(es[0].(bson.M)), "zero counts are left out")
		assert.ElementsMatch(t, []string{"t", "u", "m", "a"}, keys(es[3].(bson.M)), "an edit carries no counts")
		assert.ElementsMatch(t, []string{"t", "u", "r", "n"}, keys(es[5].(bson.M)), "a read has no message")
	})

	t.Run("OKEmpty", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		e := startEvents(t, client, "herald", EventsOptions{})
		e.Publish(context.Background())
		n, err := client.Database("herald").Collection(collEvents).CountDocuments(context.Background(), bson.D{})
		require.NoError(t, err)
		assert.Zero(t, n)
	})

	t.Run("OKSplitsHugeBatch", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		e := startEvents(t, client, "herald", EventsOptions{})
		u := store.NewID(time.Now())
		ch := subscribe(t, e, u)
		evs := make([]store.Event, maxEventsPerDoc+1)
		for i := range evs {
			evs[i] = store.Event{Type: store.EventAdded, UserID: store.NewID(time.Now()), MessageID: u, Counts: store.InboxCounts{Total: i + 1}}
		}
		evs[len(evs)-1].UserID = u
		e.Publish(context.Background(), evs...)
		assert.Equal(t, evs[len(evs)-1], mustRecv(t, ch))
		n, err := client.Database("herald").Collection(collEvents).CountDocuments(context.Background(), bson.D{})
		require.NoError(t, err)
		assert.Equal(t, int64(2), n)
	})

	t.Run("ErrBackendDown", func(t *testing.T) {
		// A failed publish is logged and dropped; it neither blocks nor panics.
		client, engine := newEngine(t, lungo.Options{})
		logs := &lockedBuffer{}
		e := NewEvents(client.Database("herald"), EventsOptions{Logger: slog.New(slog.NewTextHandler(logs, nil)), PublishTimeout: time.Second})
		engine.Close()
		start := time.Now()
		e.Publish(context.Background(), store.Event{Type: store.EventRead, UserID: store.NewID(time.Now())})
		assert.Less(t, time.Since(start), 2*time.Second)
		assert.Contains(t, logs.String(), "publishing inbox events failed")
		assert.Error(t, e.Run(context.Background()), "the stream cannot open either")
		e.Close()
	})
}

func keys(m bson.M) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestEvents_Resume drops B's change stream again and again while A
// publishes: B's subscriber still gets every event, once, in order.
func TestEvents_Resume(t *testing.T) {
	c1, engine := newEngine(t, lungo.Options{})
	c2 := lungo.NewClient(engine)
	a := startEvents(t, c1, "herald", EventsOptions{})
	b := startEvents(t, c2, "herald", EventsOptions{MaxBackoff: 20 * time.Millisecond})
	user := store.NewID(time.Now())
	ch := subscribe(t, b, user)

	const n = 300
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= n; i++ {
			a.Publish(context.Background(), store.Event{Type: store.EventAdded, UserID: user, MessageID: user, Counts: store.InboxCounts{Total: i}})
			// Slow enough that the backlog of an outage stays within the
			// hub's buffer: a subscriber further behind is dropped.
			time.Sleep(time.Millisecond)
		}
	}()

	drops := 0
	dropperDone := make(chan struct{})
	go func() {
		defer close(dropperDone)
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
				if b.dropStream() {
					drops++
				}
			}
		}
	}()

	for i := 1; i <= n; i++ {
		ev := mustRecv(t, ch)
		require.Equal(t, i, ev.Counts.Total, "events arrive once each, in order")
	}
	<-dropperDone
	assert.Greater(t, drops, 3, "the stream was dropped while events were inserted")
	assertNoRecv(t, ch, 200*time.Millisecond)
}

// historyLoss is two Events on one engine with a tiny oplog: a publishes,
// b watches, its stream held back when it reopens until lose lets it go.
type historyLoss struct {
	a, b    *Events
	events  lungo.ICollection // the events collection, as a writes it
	user    store.ID
	ch      <-chan store.Event // b's subscription of user
	logs    *lockedBuffer      // b's log
	release chan struct{}
}

func newHistoryLoss(t *testing.T) *historyLoss {
	t.Helper()
	c1, engine := newEngine(t, lungo.Options{MinOplogSize: 1, MaxOplogSize: 2, MinOplogAge: time.Nanosecond})
	c2 := lungo.NewClient(engine)
	// A publish that timed out on a loaded machine would leave the oplog
	// unaged and the history not lost: a has all the time it needs.
	a := startEvents(t, c1, "herald", EventsOptions{PublishTimeout: time.Minute})
	h := &historyLoss{a: a, events: c1.Database("herald").Collection(collEvents), logs: &lockedBuffer{}, release: make(chan struct{}), user: store.NewID(time.Now())}
	h.b = NewEvents(c2.Database("herald"), EventsOptions{Logger: slog.New(slog.NewTextHandler(h.logs, nil))})
	h.b.testHookReopen = func() { <-h.release }
	require.NoError(t, h.b.Run(context.Background()))
	t.Cleanup(h.b.Close)
	h.ch = subscribe(t, h.b, h.user)
	return h
}

// ev is the seq-th event of user, told apart by its total.
func (h *historyLoss) ev(seq int) store.Event {
	return store.Event{Type: store.EventAdded, UserID: h.user, MessageID: h.user, Counts: store.InboxCounts{Total: seq}}
}

// lose drops b's stream, has a publish events 2 to 6 and let the oplog age
// them out, publishes then (one document each), lets b reopen, and waits for b to log that
// events were lost.
func (h *historyLoss) lose(t *testing.T, then ...store.Event) {
	t.Helper()
	require.True(t, h.b.dropStream())
	for i := range 5 {
		h.a.Publish(context.Background(), h.ev(2+i))
	}
	// Publish returns before its write lands: on a loaded machine the
	// writes came after b reopened, which then lost nothing (a CI run
	// failed so). Wait for all six documents, then for the oplog to age.
	require.Eventually(t, func() bool {
		n, err := h.events.CountDocuments(context.Background(), bson.D{})
		return err == nil && n >= 6
	}, 30*time.Second, 10*time.Millisecond, "events 1 to 6 stored")
	time.Sleep(1100 * time.Millisecond) // lungo ages its oplog in whole seconds
	for _, ev := range then {
		h.a.Publish(context.Background(), ev)
	}
	close(h.release)
	// Generous: on a loaded 2-core machine the reopen, after its backoff,
	// has taken over 5 s (a CI run failed so).
	require.Eventually(t, func() bool { return bytes.Contains([]byte(h.logs.String()), []byte("events lost; starting from now")) },
		30*time.Second, 10*time.Millisecond, "logs:\n%s", h.logs.String())
}

// TestEvents_Resume_HistoryLost: when the events after the last one
// delivered are gone from the oplog, the watcher says so and goes on from
// now instead of retrying for ever.
func TestEvents_Resume_HistoryLost(t *testing.T) {
	h := newHistoryLoss(t)
	h.a.Publish(context.Background(), h.ev(1))
	assert.Equal(t, h.ev(1), mustRecv(t, h.ch))
	h.lose(t, h.ev(7), h.ev(8))
	// The stream runs again, from now.
	require.Eventually(t, func() bool {
		h.a.Publish(context.Background(), h.ev(100))
		select {
		case got := <-h.ch:
			for got.Counts.Total != 100 { // events still in the oplog may come first
				got = mustRecv(t, h.ch)
			}
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	}, 5*time.Second, 10*time.Millisecond)
}

func TestEvents_Subscribe(t *testing.T) {
	t.Run("OKCtxEnds", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		e := startEvents(t, client, "herald", EventsOptions{})
		user := store.NewID(time.Now())
		ctx, cancel := context.WithCancel(context.Background())
		ch, err := e.Subscribe(ctx, user)
		require.NoError(t, err)
		require.Equal(t, 1, e.hub.Subscribers(user))
		cancel()
		select {
		case _, ok := <-ch:
			assert.False(t, ok)
		case <-time.After(5 * time.Second):
			t.Fatal("channel not closed within 5s of ctx ending")
		}
		assert.Eventually(t, func() bool { return e.hub.Len() == 0 }, time.Second, 5*time.Millisecond, "the hub dropped the subscriber")
	})

	t.Run("OKClose", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		e := NewEvents(client.Database("herald"), EventsOptions{Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, e.Run(context.Background()))
		assert.Error(t, e.Run(context.Background()), "already running")
		ch := subscribe(t, e, store.NewID(time.Now()))
		e.Close()
		_, ok := <-ch
		assert.False(t, ok, "Close closes every subscription")
		e.Close() // idempotent
		_, err := e.Subscribe(context.Background(), store.NewID(time.Now()))
		assert.Equal(t, store.EINTERNAL, store.ErrorCode(err))
		assert.Error(t, e.Run(context.Background()))
	})

	t.Run("OKSlowSubscriberDropped", func(t *testing.T) {
		client, _ := newEngine(t, lungo.Options{})
		e := startEvents(t, client, "herald", EventsOptions{})
		slow, fast := store.NewID(time.Now()), store.NewID(time.Now())
		chSlow, chFast := subscribe(t, e, slow), subscribe(t, e, fast)
		evs := make([]store.Event, 0, 2*pubsub.HubBuffer+2)
		for i := range pubsub.HubBuffer + 1 {
			evs = append(evs, store.Event{Type: store.EventAdded, UserID: slow, MessageID: slow, Counts: store.InboxCounts{Total: i + 1}})
		}
		evs = append(evs, store.Event{Type: store.EventAdded, UserID: fast, MessageID: fast})
		e.Publish(context.Background(), evs...)
		assert.Equal(t, fast, mustRecv(t, chFast).UserID, "a slow subscriber holds no one up")
		n := 0
		for range chSlow {
			n++
		}
		assert.Equal(t, pubsub.HubBuffer, n, "the slow subscriber is dropped once its buffer is full")
	})
}

func TestEventDoc_RoundTrip(t *testing.T) {
	id := store.NewID(time.Now())
	other := store.NewID(time.Now())
	for _, ev := range []store.Event{
		{Type: store.EventAdded, UserID: id, MessageID: id, AuthorID: id, Counts: store.InboxCounts{ReadMark: id, Total: 3, Unread: 4, Rebuilding: true}},
		{Type: store.EventAdded, UserID: id, MessageID: id, AuthorID: id, NoCounts: true, DeliveredAt: time.Now().UTC().Truncate(time.Millisecond)},
		{Type: store.EventEdited, UserID: id, MessageID: id, AuthorID: id},
		{Type: store.EventDeleted, UserID: id, MessageID: id, AuthorID: id},
		{Type: store.EventRemoved, UserID: id, MessageID: id, AuthorID: id, Counts: store.InboxCounts{Total: 1}},
		{Type: store.EventRead, UserID: id, Counts: store.InboxCounts{ReadMark: id, Total: 9}},
		{Type: store.EventSessionsRevoked, UserID: store.SessionsTopic, Subject: id},
		{Type: store.EventNotified, UserID: id, Group: id, Counts: store.InboxCounts{Total: 2, Unread: 1}},
		{Type: store.EventNotificationsRead, UserID: id, Counts: store.InboxCounts{Total: 2}},
		{Type: store.EventConversationMessage, UserID: id, Conversation: &store.ConversationRef{ID: store.DirectConversationID(id, other), Seq: 7}, MessageID: id, AuthorID: other},
		{Type: store.EventConversationMessageEdited, UserID: id, Conversation: &store.ConversationRef{ID: store.GroupConversationID(other), Seq: 8}, MessageID: id, AuthorID: id},
		{Type: store.EventConversationMessageDeleted, UserID: id, Conversation: &store.ConversationRef{ID: store.GroupConversationID(other), Seq: 9}, MessageID: id, AuthorID: id},
		{Type: store.EventConversationRead, UserID: id, Conversation: &store.ConversationRef{ID: store.GroupConversationID(other), Seq: 3}, Subject: other},
		{Type: store.EventConversationMemberAdded, UserID: id, Conversation: &store.ConversationRef{ID: store.GroupConversationID(other)}, Subject: id},
		{Type: store.EventConversationMemberRemoved, UserID: id, Conversation: &store.ConversationRef{ID: store.GroupConversationID(other)}, Subject: other},
	} {
		t.Run(string(ev.Type), func(t *testing.T) {
			d, ok := encodeEvent(ev)
			require.True(t, ok)
			raw, err := bson.Marshal(d)
			require.NoError(t, err)
			_, lookupErr := bson.Raw(raw).LookupErr("d")
			assert.Equal(t, ev.DeliveredAt.IsZero(), lookupErr != nil, "a delivery time is stored only where there is one")
			var back eventDoc
			require.NoError(t, bson.Unmarshal(raw, &back))
			got, ok := back.event()
			require.True(t, ok)
			assert.Equal(t, ev, got)
		})
	}
	t.Run("ErrUnknownType", func(t *testing.T) {
		_, ok := encodeEvent(store.Event{Type: "PINNED"})
		assert.False(t, ok)
		_, ok = eventDoc{Type: 99}.event()
		assert.False(t, ok)
	})
}

// TestEvents_ResumeOtherProcess checks that an event has the same position
// in every process, so a subscription resumes in another process that
// retained the user's events, and not in one that did not.
func TestEvents_ResumeOtherProcess(t *testing.T) {
	c1, engine := newEngine(t, lungo.Options{})
	a := startEvents(t, c1, "herald", EventsOptions{})
	b := startEvents(t, lungo.NewClient(engine), "herald", EventsOptions{})
	c := startEvents(t, lungo.NewClient(engine), "herald", EventsOptions{})
	alice, bob := store.NewID(time.Now()), store.NewID(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	onA, err := a.Subscribe(ctx, alice)
	require.NoError(t, err)
	onB := subscribe(t, b, alice) // alice's other tab, on process b
	read := func(n int) store.Event {
		return store.Event{Type: store.EventRead, UserID: alice, Counts: store.InboxCounts{Total: n}}
	}

	c.Publish(context.Background(), read(1), store.Event{Type: store.EventRead, UserID: bob}, read(2))
	first, second := mustRecvAt(t, onA), mustRecvAt(t, onA)
	assert.Equal(t, first, mustRecvAt(t, onB), "the same event at the same position in both processes")
	assert.Equal(t, second, mustRecvAt(t, onB))
	assert.Equal(t, uint64(2), second.Position.Index, "the index in the document, bob's event counted")

	// alice's socket to a drops; she reconnects to b while events arrive.
	cancel()
	for range onA {
	}
	a.Publish(context.Background(), read(3))
	c.Publish(context.Background(), read(4))
	for n := 3; n <= 4; n++ {
		require.Equal(t, n, mustRecv(t, onB).Counts.Total)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	t.Cleanup(rcancel)
	got := make(chan store.Event, 8)
	require.NoError(t, b.SubscribeWith(rctx, alice, pubsub.SubscribeOptions{After: second.Position},
		func(ev store.Event) bool { got <- ev; return true }, func() {}))
	b.Publish(context.Background(), read(5))
	for n := 3; n <= 5; n++ {
		assert.Equal(t, n, mustRecv(t, got).Counts.Total, "the missed events, then the live one")
	}
	assertNoRecv(t, got, 100*time.Millisecond)

	// c never had a subscription of alice: it kept nothing of hers.
	err = c.SubscribeWith(rctx, alice, pubsub.SubscribeOptions{After: second.Position}, func(store.Event) bool { return true }, func() {})
	assert.Equal(t, store.ERESUMEEXPIRED, store.ErrorCode(err))
}

// TestEvents_ResumeAcrossHistoryLost: events the watcher never read (they
// left the oplog while its stream was away) are not in the hub's logs, so a
// cursor from before them cannot be resumed: the subscription must fail
// with RESUME_EXPIRED, not replay what came after the gap as if it were
// all.
func TestEvents_ResumeAcrossHistoryLost(t *testing.T) {
	h := newHistoryLoss(t)
	h.a.Publish(context.Background(), h.ev(1))
	last := mustRecvAt(t, h.ch)
	require.Equal(t, 1, last.Counts.Total)
	h.lose(t, h.ev(7))

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	err := h.b.SubscribeWith(ctx, h.user, pubsub.SubscribeOptions{After: last.Position},
		func(store.Event) bool { return true }, func() {})
	assert.Equal(t, store.ERESUMEEXPIRED, store.ErrorCode(err), "events 2 to 6 were lost: resuming after 1 must fail, not skip them")
}
