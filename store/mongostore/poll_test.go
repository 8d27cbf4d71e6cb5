package mongostore

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/pubsub"
)

// noStreamsDB is a database whose events collection has no change
// streams, as on a standalone mongod: Watch fails with CommandNotSupported
// (while lost is nil or true).
type noStreamsDB struct {
	lungo.IDatabase
	lost *atomic.Bool
}

func (d noStreamsDB) Collection(name string, opts ...*options.CollectionOptions) lungo.ICollection {
	return noStreamsColl{d.IDatabase.Collection(name, opts...), d.lost}
}

type noStreamsColl struct {
	lungo.ICollection
	lost *atomic.Bool
}

func (c noStreamsColl) Watch(ctx context.Context, pipeline interface{}, opts ...*options.ChangeStreamOptions) (lungo.IChangeStream, error) {
	if c.lost != nil && !c.lost.Load() {
		return c.ICollection.Watch(ctx, pipeline, opts...)
	}
	return nil, mongo.CommandError{Code: 115, Name: "CommandNotSupported", Message: "$changeStream stage is only supported on replica sets"}
}

// startPolling runs Events in polling mode over database "herald" of
// client, closed in t.Cleanup.
func startPolling(t *testing.T, client lungo.IClient, opts EventsOptions) *Events {
	t.Helper()
	opts.Mode = EventsPoll
	if opts.PollInterval == 0 {
		opts.PollInterval = 5 * time.Millisecond
	}
	e := startEvents(t, client, "herald", opts)
	require.Equal(t, EventsPoll, e.Mode())
	return e
}

func TestEventsPoll_Auto(t *testing.T) {
	client, _ := newEngine(t, lungo.Options{})
	logs := &lockedBuffer{}
	e := NewEvents(noStreamsDB{client.Database("herald"), nil}, EventsOptions{Logger: slog.New(slog.NewTextHandler(logs, nil)), PollInterval: 5 * time.Millisecond})
	assert.Equal(t, EventsAuto, e.Mode(), "not chosen before Run")
	require.NoError(t, e.Run(context.Background()), "no change streams is no reason to fail")
	t.Cleanup(e.Close)
	assert.Equal(t, EventsPoll, e.Mode())
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "said once:\n%s", logs)
	assert.Contains(t, logs.String(), "has no change streams")

	u := store.NewID(time.Now())
	ch := subscribe(t, e, u)
	want := store.Event{Type: store.EventRead, UserID: u, Counts: store.InboxCounts{Total: 3}}
	e.Publish(context.Background(), want)
	assert.Equal(t, want, mustRecv(t, ch))

	// Where change streams work, auto uses them; forced, they must work.
	cs := startEvents(t, client, "herald", EventsOptions{})
	assert.Equal(t, EventsChangeStream, cs.Mode())
	forced := NewEvents(noStreamsDB{client.Database("herald"), nil}, EventsOptions{Logger: slog.New(slog.DiscardHandler), Mode: EventsChangeStream})
	assert.ErrorContains(t, forced.Run(context.Background()), "CommandNotSupported")
	forced.Close()
}

// TestEventsPoll_StreamLost: a change stream that cannot reopen because
// the server has no change streams any more (restarted standalone) goes on
// by polling.
func TestEventsPoll_StreamLost(t *testing.T) {
	client, _ := newEngine(t, lungo.Options{})
	var lost atomic.Bool
	logs := &lockedBuffer{}
	e := NewEvents(noStreamsDB{client.Database("herald"), &lost}, EventsOptions{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		PollInterval: 5 * time.Millisecond, MaxBackoff: 10 * time.Millisecond})
	e.embedded = true // lungo's engine under the wrapper
	require.NoError(t, e.Run(context.Background()))
	t.Cleanup(e.Close)
	require.Equal(t, EventsChangeStream, e.Mode())
	u := store.NewID(time.Now())
	ch := subscribe(t, e, u)
	read := func(n int) store.Event {
		return store.Event{Type: store.EventRead, UserID: u, Counts: store.InboxCounts{Total: n}}
	}
	e.Publish(context.Background(), read(1))
	assert.Equal(t, read(1), mustRecv(t, ch))

	lost.Store(true)
	require.True(t, e.dropStream())
	require.Eventually(t, func() bool { return e.Mode() == EventsPoll }, 5*time.Second, 5*time.Millisecond)
	assert.Contains(t, logs.String(), "no change streams any more")
	e.Publish(context.Background(), read(2))
	assert.Equal(t, read(2), mustRecv(t, ch), "delivered by polling")
	assertNoRecv(t, ch, 50*time.Millisecond)
}

// TestEventsPoll_TwoInstances: two pollers and a change stream on one
// database, each publishing: every process gets every event once, and the
// pollers in the same order.
func TestEventsPoll_TwoInstances(t *testing.T) {
	c1, engine := newEngine(t, lungo.Options{})
	a := startPolling(t, c1, EventsOptions{})
	b := startPolling(t, lungo.NewClient(engine), EventsOptions{})
	user := store.NewID(time.Now())
	onA, onB := subscribe(t, a, user), subscribe(t, b, user)

	const n = 60
	var wg sync.WaitGroup
	for w, pub := range []*Events{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n / 2 {
				pub.Publish(context.Background(), store.Event{Type: store.EventRead, UserID: user, Counts: store.InboxCounts{Total: 1000*w + i}})
			}
		}()
	}
	wg.Wait()
	var gotA, gotB []store.Event
	for range n {
		gotA = append(gotA, mustRecvAt(t, onA))
		gotB = append(gotB, mustRecvAt(t, onB))
	}
	assert.Equal(t, gotA, gotB, "the same events at the same positions in the same order")
	seen := map[int]bool{}
	next := [2]int{}
	for _, ev := range gotA {
		w, i := ev.Counts.Total/1000, ev.Counts.Total%1000
		assert.False(t, seen[ev.Counts.Total], "once each")
		seen[ev.Counts.Total] = true
		assert.Equal(t, next[w], i, "one publisher's events in its order")
		next[w] = i + 1
	}
	assertNoRecv(t, onA, 100*time.Millisecond)
	assertNoRecv(t, onB, 0)
}

// TestEventsPoll_LateWriter: a publisher that took a smaller number writes
// after one with a larger: the pollers wait for it and deliver both in
// number order; one that never writes is skipped after GapGrace, and a
// write later still fails rather than be delivered by some processes only.
func TestEventsPoll_LateWriter(t *testing.T) {
	c1, engine := newEngine(t, lungo.Options{})
	a := startPolling(t, c1, EventsOptions{GapGrace: 300 * time.Millisecond})
	b := startPolling(t, lungo.NewClient(engine), EventsOptions{GapGrace: 300 * time.Millisecond})
	user := store.NewID(time.Now())
	onB := subscribe(t, b, user)
	read := func(n int) store.Event {
		return store.Event{Type: store.EventRead, UserID: user, Counts: store.InboxCounts{Total: n}}
	}
	ctx := context.Background()
	slow := func(seq int64, evs ...store.Event) error {
		d := eventsDoc{ID: primitive.NewObjectID(), Seq: seq, Expires: time.Now().Add(time.Minute)}
		for _, ev := range evs {
			ed, _ := encodeEvent(ev)
			d.Events = append(d.Events, ed)
		}
		_, err := a.coll.InsertOne(ctx, d)
		return err
	}

	// The slow publisher takes its number, then a takes the next and
	// writes first.
	seq, err := a.takeSeq(ctx, 1)
	require.NoError(t, err)
	a.Publish(ctx, read(2))
	assertNoRecv(t, onB, 100*time.Millisecond) // 2 waits for 1
	require.NoError(t, slow(seq, read(1)))
	assert.Equal(t, 1, mustRecv(t, onB).Counts.Total, "the late writer's smaller number first")
	assert.Equal(t, 2, mustRecv(t, onB).Counts.Total)

	// A number taken and never written.
	seq, err = a.takeSeq(ctx, 1)
	require.NoError(t, err)
	a.Publish(ctx, read(4))
	start := time.Now()
	assert.Equal(t, 4, mustRecv(t, onB).Counts.Total)
	assert.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond, "after the grace")
	assert.True(t, isDuplicate(slow(seq, read(3))), "too late: the number holds a placeholder")
	assertNoRecv(t, onB, 100*time.Millisecond)
	n, err := a.coll.CountDocuments(ctx, bson.D{{Key: "q", Value: seq}})
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "one placeholder, though both pollers waited")
}

// TestEventsPoll_Resume: a poller held away for a while misses nothing,
// and a cursor resumes in another process; held away past half the TTL
// with the next documents gone, it starts from now and old cursors
// expire.
func TestEventsPoll_Resume(t *testing.T) {
	c1, engine := newEngine(t, lungo.Options{})
	a := startPolling(t, c1, EventsOptions{})
	var hold sync.Mutex
	logs := &lockedBuffer{}
	b := NewEvents(lungo.NewClient(engine).Database("herald"), EventsOptions{Mode: EventsPoll, PollInterval: 5 * time.Millisecond,
		TTL: 400 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	b.testHookPoll = func() { // waits while the test holds hold
		hold.Lock()
		defer hold.Unlock()
	}
	require.NoError(t, b.Run(context.Background()))
	t.Cleanup(b.Close)
	user := store.NewID(time.Now())
	onA, onB := subscribe(t, a, user), subscribe(t, b, user)
	read := func(n int) store.Event {
		return store.Event{Type: store.EventRead, UserID: user, Counts: store.InboxCounts{Total: n}}
	}
	ctx := context.Background()

	a.Publish(ctx, read(1))
	first := mustRecvAt(t, onB)
	require.Equal(t, first, mustRecvAt(t, onA))
	hold.Lock()
	for i := 2; i <= 5; i++ {
		a.Publish(ctx, read(i))
	}
	time.Sleep(50 * time.Millisecond)
	hold.Unlock()
	for i := 2; i <= 5; i++ {
		require.Equal(t, i, mustRecv(t, onB).Counts.Total, "nothing missed while away")
	}
	for i := 2; i <= 5; i++ {
		require.Equal(t, i, mustRecv(t, onA).Counts.Total)
	}
	got := make(chan store.Event, 8)
	rctx, rcancel := context.WithCancel(ctx)
	t.Cleanup(rcancel)
	require.NoError(t, b.SubscribeWith(rctx, user, pubsub.SubscribeOptions{After: first.Position},
		func(ev store.Event) bool { got <- ev; return true }, func() {}))
	for i := 2; i <= 5; i++ {
		assert.Equal(t, i, mustRecv(t, got).Counts.Total, "a cursor of a's resumes on b")
	}

	// Away past half the TTL; the documents after b's position expire.
	hold.Lock()
	for i := 6; i <= 8; i++ {
		a.Publish(ctx, read(i))
	}
	_, err := a.coll.DeleteMany(ctx, bson.D{{Key: "e.n", Value: bson.D{{Key: "$in", Value: bson.A{6, 7}}}}})
	require.NoError(t, err)
	time.Sleep(250 * time.Millisecond)
	hold.Unlock()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "starting from now") }, 5*time.Second, 5*time.Millisecond)
	err = b.SubscribeWith(rctx, user, pubsub.SubscribeOptions{After: first.Position}, func(store.Event) bool { return true }, func() {})
	assert.Equal(t, store.ERESUMEEXPIRED, store.ErrorCode(err), "events 6 and 7 are gone: resuming after 1 must fail")
	a.Publish(ctx, read(9))
	for {
		ev := mustRecv(t, onB)
		assert.NotContains(t, []int{6, 7}, ev.Counts.Total)
		if ev.Counts.Total == 9 {
			break
		}
	}
}

// TestEvents_Local: a single process needs neither stream nor polling: its
// events reach its subscribers directly, and nothing is stored.
func TestEvents_Local(t *testing.T) {
	client, _ := newEngine(t, lungo.Options{})
	e := startEvents(t, client, "herald", EventsOptions{Mode: EventsLocal})
	assert.Equal(t, EventsLocal, e.Mode())
	u := store.NewID(time.Now())
	ch := subscribe(t, e, u)
	evs := []store.Event{
		{Type: store.EventRead, UserID: u, Counts: store.InboxCounts{Total: 1}},
		{Type: store.EventRead, UserID: u, Counts: store.InboxCounts{Total: 2}},
	}
	e.Publish(context.Background(), evs...)
	first := mustRecvAt(t, ch)
	assert.Equal(t, 1, first.Counts.Total)
	assert.Equal(t, evs[1], mustRecv(t, ch))
	n, err := client.Database("herald").Collection(collEvents).CountDocuments(context.Background(), bson.D{})
	require.NoError(t, err)
	assert.Zero(t, n, "nothing stored")

	e.Publish(context.Background(), store.Event{Type: store.EventRead, UserID: u, Counts: store.InboxCounts{Total: 3}})
	got := make(chan store.Event, 4)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, e.SubscribeWith(ctx, u, pubsub.SubscribeOptions{After: first.Position}, func(ev store.Event) bool { got <- ev; return true }, func() {}))
	assert.Equal(t, 2, mustRecv(t, got).Counts.Total, "cursors resume")
	assert.Equal(t, 3, mustRecv(t, got).Counts.Total)
}

// TestEventsPoll_ResumeAllExpired: a poller away past half the TTL that
// finds nothing after its position, though numbers were taken since (all
// their documents expired), starts from now rather than fill the numbers
// with placeholders once new ones come.
func TestEventsPoll_ResumeAllExpired(t *testing.T) {
	c1, engine := newEngine(t, lungo.Options{})
	a := startPolling(t, c1, EventsOptions{})
	var hold sync.Mutex
	logs := &lockedBuffer{}
	b := NewEvents(lungo.NewClient(engine).Database("herald"), EventsOptions{Mode: EventsPoll, PollInterval: 5 * time.Millisecond,
		TTL: 400 * time.Millisecond, GapGrace: 50 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	b.testHookPoll = func() {
		hold.Lock()
		defer hold.Unlock()
	}
	require.NoError(t, b.Run(context.Background()))
	t.Cleanup(b.Close)
	user := store.NewID(time.Now())
	onB := subscribe(t, b, user)
	read := func(n int) store.Event {
		return store.Event{Type: store.EventRead, UserID: user, Counts: store.InboxCounts{Total: n}}
	}
	ctx := context.Background()
	a.Publish(ctx, read(1))
	require.Equal(t, 1, mustRecv(t, onB).Counts.Total)

	hold.Lock()
	a.Publish(ctx, read(2), read(3))
	_, err := a.coll.DeleteMany(ctx, bson.D{{Key: "e.n", Value: bson.D{{Key: "$in", Value: bson.A{2, 3}}}}})
	require.NoError(t, err)
	time.Sleep(250 * time.Millisecond)
	hold.Unlock()
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "starting from now") }, 5*time.Second, 5*time.Millisecond)
	a.Publish(ctx, read(4))
	assert.Equal(t, 4, mustRecv(t, onB).Counts.Total)
	assert.NotContains(t, logs.String(), "never written", "no placeholders for the expired numbers")
}

// TestEventsPoll_Numbering: only documents pollers may read are numbered.
// A change stream's publisher writes no counter; a poller's, and one whose
// mode is not chosen yet, do. A poller that finds documents without
// numbers after its start (a process forced to change streams beside it)
// says so once, at ERROR.
func TestEventsPoll_Numbering(t *testing.T) {
	c1, engine := newEngine(t, lungo.Options{})
	ctx := context.Background()
	db := c1.Database("herald")
	counter := func() int64 {
		t.Helper()
		n, err := lastSeqOf(db)
		require.NoError(t, err)
		return n
	}
	user := store.NewID(time.Now())
	read := func(n int) store.Event {
		return store.Event{Type: store.EventRead, UserID: user, Counts: store.InboxCounts{Total: n}}
	}

	cs := startEvents(t, c1, "herald", EventsOptions{Mode: EventsChangeStream})
	onCS := subscribe(t, cs, user)
	cs.Publish(ctx, read(1))
	assert.Equal(t, 1, mustRecv(t, onCS).Counts.Total)
	n, err := db.Collection(collEventSeq).CountDocuments(ctx, bson.D{})
	require.NoError(t, err)
	assert.Zero(t, n, "a change stream's publisher writes no counter")
	n, err = db.Collection(collEvents).CountDocuments(ctx, bson.D{{Key: "q", Value: bson.D{{Key: "$exists", Value: true}}}})
	require.NoError(t, err)
	assert.Zero(t, n, "nor numbers")

	unstarted := NewEvents(lungo.NewClient(engine).Database("herald"), EventsOptions{Logger: slog.New(slog.DiscardHandler)})
	unstarted.Publish(ctx, read(2))
	assert.EqualValues(t, 1, counter(), "not chosen yet: numbered, as it may poll")
	// Ids hold whole seconds: the poller starts in the next, after cs's
	// document.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))

	logs := &lockedBuffer{}
	p := NewEvents(lungo.NewClient(engine).Database("herald"), EventsOptions{Mode: EventsPoll, PollInterval: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	p.unnumberedEvery = 20 * time.Millisecond
	require.NoError(t, p.Run(ctx))
	t.Cleanup(p.Close)
	onP := subscribe(t, p, user)
	p.Publish(ctx, read(3))
	assert.Equal(t, 3, mustRecv(t, onP).Counts.Total)
	assert.EqualValues(t, 2, counter(), "a poller numbers")
	time.Sleep(100 * time.Millisecond)
	assert.NotContains(t, logs.String(), "without numbering", "numbered documents only so far")

	for i := range 3 {
		cs.Publish(ctx, read(10+i))
		time.Sleep(30 * time.Millisecond)
	}
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "without numbering") }, 5*time.Second, 5*time.Millisecond)
	assert.Contains(t, logs.String(), "-mongodb-events poll")
	assert.Equal(t, 1, strings.Count(logs.String(), "level=ERROR"), "once:\n%s", logs)
	assertNoRecv(t, onP, 0)
}

// lastSeqOf reads the counter of db's events documents.
func lastSeqOf(db lungo.IDatabase) (int64, error) {
	return NewEvents(db, EventsOptions{}).lastSeq(context.Background())
}

// TestEvents_LocalWarnsShared: local mode says at start that it must be
// alone, and says at ERROR when another instance published on its
// database lately.
func TestEvents_LocalWarnsShared(t *testing.T) {
	client, _ := newEngine(t, lungo.Options{})
	start := func() string {
		t.Helper()
		logs := &lockedBuffer{}
		startEvents(t, client, "herald", EventsOptions{Mode: EventsLocal, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		return logs.String()
	}
	logs := start()
	assert.Contains(t, logs, "level=WARN")
	assert.Contains(t, logs, "run no other instance on this database")
	assert.NotContains(t, logs, "level=ERROR", "nobody else published")

	other := startEvents(t, client, "herald", EventsOptions{Mode: EventsChangeStream})
	other.Publish(context.Background(), store.Event{Type: store.EventRead, UserID: store.NewID(time.Now())})
	logs = start()
	assert.Contains(t, logs, "level=ERROR")
	assert.Contains(t, logs, "another instance publishes inbox events on this database")
}
