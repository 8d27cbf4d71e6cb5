package mongostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/256dpi/lungo"
	"github.com/256dpi/lungo/bsonkit"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/pubsub"
)

// Inbox events cross between Herald processes through MongoDB itself: a
// publisher inserts one document into the events collection, and every
// process, the publisher included, reads it back from a change stream (or
// by polling, where the server has none: see poll.go) and hands it to its
// local hub. No broker is needed, and a process delivers
// its own events exactly as it delivers the others', so none is delivered
// twice.
//
// An events document holds a batch (a fan-out chunk's events), in short
// field names:
//
//	{_id: ObjectID, q: sequence, x: expires, e: [{t, u, m, a, r, n, q, b, z, d, s}]}
//
//	t  type: 1 ADDED, 2 EDITED, 3 DELETED, 4 READ, 5 SESSIONS_REVOKED, 6 REMOVED
//	u  inbox owner (user ID)
//	m  message ID; absent for READ
//	a  message author (so the message is loaded by its shard key); absent for READ
//	r  read mark (InboxCounts.ReadMark, a message ID)
//	n  total entries (InboxCounts.Total)
//	q  unread entries (InboxCounts.Unread)
//	b  rebuilding (InboxCounts.Rebuilding)
//	z  no counts (Event.NoCounts)
//	d  when the item was delivered (Event.DeliveredAt), for ADDED
//	s  the user whose tokens were revoked (Event.Subject), for SESSIONS_REVOKED
//	g  the notification group (Event.Group), for NOTIFIED and a group
//	   removed or updated
//
// Zero counts and false flags are left out: EDITED carries none (see
// store.Event).
// An event's position (store.EventPosition, which subscription cursors
// carry) is its document's _id and its index in e: every process reads the
// same documents in the same order, so a position names the same event in
// all of them.
// Documents expire through the TTL index on x; they only need to live long
// enough for every process to read them, and a process that was away longer
// than that resumes from "now" (inboxes, not events, are the truth).
type eventsDoc struct {
	ID primitive.ObjectID `bson:"_id"`
	// Seq numbers the document in the order pollers read it (see
	// poll.go); absent where its publisher reads by change stream.
	Seq     int64      `bson:"q,omitempty"`
	Expires time.Time  `bson:"x"`
	Events  []eventDoc `bson:"e"`
}

type eventDoc struct {
	Type     int32              `bson:"t"`
	User     primitive.ObjectID `bson:"u"`
	Message  primitive.ObjectID `bson:"m,omitempty"`
	Author   primitive.ObjectID `bson:"a,omitempty"`
	Mark     primitive.ObjectID `bson:"r,omitempty"`
	Total    int64              `bson:"n,omitempty"`
	Unread   int64              `bson:"q,omitempty"`
	Rebuild  bool               `bson:"b,omitempty"`
	NoCounts bool               `bson:"z,omitempty"`
	// Delivered is a time.Time, which omitempty leaves out when zero.
	Delivered time.Time          `bson:"d,omitempty"`
	Subject   primitive.ObjectID `bson:"s,omitempty"`
	Group     primitive.ObjectID `bson:"g,omitempty"`
	Conv      []byte             `bson:"c,omitempty"`
	Seq       int64              `bson:"sq,omitempty"`
}

// eventTypes maps event types to their stored codes. Codes, not names:
// a fan-out chunk's document repeats the type a thousand times.
var eventTypes = map[store.EventType]int32{
	store.EventAdded:   1,
	store.EventEdited:  2,
	store.EventDeleted: 3,
	store.EventRead:    4,

	store.EventSessionsRevoked: 5,

	store.EventRemoved: 6,

	store.EventNotified:          7,
	store.EventNotificationsRead: 8,

	store.EventNotificationRemoved: 9,
	store.EventNotificationUpdated: 10,

	store.EventConversationMessage:        11,
	store.EventConversationMessageEdited:  12,
	store.EventConversationMessageDeleted: 13,
	store.EventConversationRead:           14,
	store.EventConversationMemberAdded:    15,
	store.EventConversationMemberRemoved:  16,
}

var eventTypeNames = func() map[int32]store.EventType {
	m := make(map[int32]store.EventType, len(eventTypes))
	for t, c := range eventTypes {
		m[c] = t
	}
	return m
}()

// maxEventsPerDoc bounds one events document: about 100 bytes an event, so
// well under MongoDB's 16 MiB document limit. A fan-out chunk (1000 by
// default) always fits in one.
const maxEventsPerDoc = 10000

func encodeEvent(ev store.Event) (eventDoc, bool) {
	t, ok := eventTypes[ev.Type]
	if !ok {
		return eventDoc{}, false
	}
	d := eventDoc{
		Type: t, User: primitive.ObjectID(ev.UserID),
		Message: primitive.ObjectID(ev.MessageID), Author: primitive.ObjectID(ev.AuthorID),
		Mark: primitive.ObjectID(ev.Counts.ReadMark), Total: int64(ev.Counts.Total), Unread: int64(ev.Counts.Unread),
		Rebuild: ev.Counts.Rebuilding, NoCounts: ev.NoCounts, Delivered: ev.DeliveredAt, Subject: primitive.ObjectID(ev.Subject),
		Group: primitive.ObjectID(ev.Group),
	}
	if c := ev.Conversation; c != nil {
		d.Conv, d.Seq = []byte(c.ID), int64(c.Seq)
	}
	return d, true
}

func (d eventDoc) event() (store.Event, bool) {
	t, ok := eventTypeNames[d.Type]
	if !ok {
		return store.Event{}, false
	}
	ev := store.Event{
		Type: t, UserID: store.ID(d.User), MessageID: store.ID(d.Message), AuthorID: store.ID(d.Author),
		Counts: store.InboxCounts{
			Total: int(d.Total), Unread: int(d.Unread), ReadMark: store.ID(d.Mark), Rebuilding: d.Rebuild,
		},
		NoCounts: d.NoCounts, DeliveredAt: d.Delivered, Subject: store.ID(d.Subject), Group: store.ID(d.Group),
	}
	if len(d.Conv) > 0 {
		ev.Conversation = &store.ConversationRef{ID: store.ConversationID(d.Conv), Seq: uint64(d.Seq)}
	}
	return ev, true
}

// EventsOptions configure Events. Zero values pick the defaults.
type EventsOptions struct {
	// Logger receives publish and change stream failures; slog.Default()
	// by default.
	Logger *slog.Logger
	// PublishTimeout bounds one Publish (default 2s). A publisher is a
	// fan-out worker or a request: it must not wait long for an event
	// that is only a notification.
	PublishTimeout time.Duration
	// TTL is how long an events document is kept (default 10 minutes): the
	// longest a change stream can be away and still resume without loss.
	TTL time.Duration
	// MaxBackoff caps the wait between attempts to reopen a failed change
	// stream (default 5s). The first reopen is immediate.
	MaxBackoff time.Duration
	// Now is the clock; time.Now by default.
	Now func() time.Time
	// Hub configures the local hub's retention of events for resuming
	// subscriptions; its clock is Now.
	Hub pubsub.HubOptions
	// Mode is how events of other processes are read: EventsAuto (the
	// default) a change stream where the server has them and polling
	// where it has none, EventsChangeStream or EventsPoll always that;
	// EventsLocal not at all (one process alone on its database).
	Mode EventsMode
	// PollInterval is how often a poller reads the events collection when
	// the last read found nothing new (default 250ms).
	PollInterval time.Duration
	// GapGrace is how long a poller waits for a document whose number was
	// taken but which is not there yet, though later ones are (a
	// publisher still writing), before it stores a placeholder in its
	// place and goes on (default PublishTimeout plus a second: by then the
	// publisher has given up).
	GapGrace time.Duration
}

// EventsMode says how Events reads the events of every process.
type EventsMode string

// The modes of EventsOptions.Mode, and what Events.Mode reports.
const (
	EventsAuto         EventsMode = ""
	EventsChangeStream EventsMode = "change stream"
	EventsPoll         EventsMode = "polling"
	// EventsLocal hands events to this process's subscribers only, and
	// stores none: for a single process, which needs no stream. Processes
	// sharing a database must not use it, or their events do not cross.
	EventsLocal EventsMode = "local"
)

// Events is the pubsub.Events of Herald processes sharing one MongoDB:
// Publish writes to the events collection and a change stream on it (or a
// poller of it, where there are no change streams) feeds a local
// pubsub.Hub, which holds this process's subscribers. Call Run to start
// the change stream and Close to stop it. Publish and Subscribe are
// safe for concurrent use.
type Events struct {
	coll     lungo.ICollection
	seq      lungo.ICollection // the counter numbering events documents
	mode     atomic.Value      // EventsMode once Run chose it
	embedded bool              // lungo's engine: no change stream pipelines
	hub      *pubsub.Hub
	log      *slog.Logger
	opts     EventsOptions

	mu      sync.Mutex
	drop    context.CancelFunc // fails the open stream, for the tests' dropStream
	started bool
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}

	// testHookReopen, when set, runs before each reopen of a failed
	// stream; tests use it to hold the watcher away while events pass.
	testHookReopen func()
	// testHookPoll, when set, runs before each read of a poller.
	testHookPoll func()
	// unnumberedEvery is how often a poller looks for documents published
	// without a number (checkUnnumbered); tests shorten it.
	unnumberedEvery time.Duration
}

var _ pubsub.Events = (*Events)(nil)

// NewEvents returns Events over db's events collection. Nothing is read
// until Run.
func NewEvents(db lungo.IDatabase, opts EventsOptions) *Events {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PublishTimeout <= 0 {
		opts.PublishTimeout = 2 * time.Second
	}
	if opts.TTL <= 0 {
		opts.TTL = 10 * time.Minute
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Hub.Now == nil {
		opts.Hub.Now = opts.Now
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = 250 * time.Millisecond
	}
	if opts.GapGrace <= 0 {
		opts.GapGrace = opts.PublishTimeout + time.Second
	}
	_, embedded := db.(*lungo.Database)
	return &Events{
		coll:     db.Collection(collEvents),
		seq:      db.Collection(collEventSeq),
		embedded: embedded,
		hub:      pubsub.NewHubWith(opts.Hub),
		log:      opts.Logger,
		opts:     opts,

		unnumberedEvery: 30 * time.Second,
	}
}

// Publish implements pubsub.Events: it inserts evs as one document (more
// only past maxEventsPerDoc events). The events reach subscribers, here
// and in every other process, through the change stream (or polling), so
// they are not delivered before Run; with EventsLocal it hands them to
// this process's hub instead, storing nothing. Publish returns after at most PublishTimeout; a
// failure is logged and the events are dropped, because they only announce
// changes already stored in the inboxes. ctx's cancellation is ignored
// (its values are kept): a fan-out cut short by shutdown has still stored
// the entries its events announce.
func (e *Events) Publish(ctx context.Context, evs ...store.Event) {
	if len(evs) == 0 {
		return
	}
	expires := e.opts.Now().Add(e.opts.TTL)
	var docs []any
	for len(evs) > 0 {
		n := min(len(evs), maxEventsPerDoc)
		d := eventsDoc{ID: primitive.NewObjectID(), Expires: expires, Events: make([]eventDoc, 0, n)}
		for _, ev := range evs[:n] {
			if ed, ok := encodeEvent(ev); ok {
				d.Events = append(d.Events, ed)
			} else {
				e.log.Error("unknown inbox event type; not published", "type", ev.Type)
			}
		}
		if len(d.Events) > 0 {
			docs = append(docs, d)
		}
		evs = evs[n:]
	}
	if len(docs) == 0 {
		return
	}
	if e.opts.Mode == EventsLocal {
		for _, d := range docs {
			e.deliver(ctx, d.(eventsDoc))
		}
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opts.PublishTimeout)
	defer cancel()
	var err error
	if e.numbers() {
		// Number the documents, for the pollers (poll.go).
		var last int64
		if last, err = e.takeSeq(ctx, int64(len(docs))); err == nil {
			for i := range docs {
				d := docs[i].(eventsDoc)
				d.Seq = last - int64(len(docs)-1-i)
				docs[i] = d
			}
		}
	}
	if err == nil {
		if len(docs) == 1 {
			_, err = e.coll.InsertOne(ctx, docs[0])
		} else {
			_, err = e.coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(true))
		}
	}
	if err != nil {
		if isDuplicate(err) {
			err = fmt.Errorf("written too late: a poller gave up waiting and took its number: %w", err)
		}
		e.log.Warn("publishing inbox events failed; subscribers see the changes on their next read", "docs", len(docs), "err", err)
	}
}

// numbers reports whether Publish numbers its documents. Only pollers read
// the numbers, and every process on one server reads the same way under
// EventsAuto, so a change stream's process takes none: the counter is one
// document every numbering publisher writes, a round trip per publish and
// a hot spot on a sharded cluster. Before Run has chosen, it numbers unless
// forced to change streams, as this process (and so the others) may poll.
// A forced mix of modes would leave pollers without the change stream
// processes' events: pollers report it (checkUnnumbered).
func (e *Events) numbers() bool {
	switch e.Mode() {
	case EventsPoll:
		return true
	case EventsChangeStream, EventsLocal:
		return false
	}
	return e.opts.Mode != EventsChangeStream
}

// Subscribe implements pubsub.Events through the local hub: the channel is
// buffered, a subscriber that falls behind is dropped (its channel
// closed), and the channel is closed when ctx ends or Close is called.
// After Close it returns INTERNAL.
func (e *Events) Subscribe(ctx context.Context, userID store.ID) (<-chan store.Event, error) {
	return e.hub.Subscribe(ctx, userID)
}

// SubscribeFunc implements pubsub.Events through the local hub, so an
// idle subscriber costs no goroutine here either.
func (e *Events) SubscribeFunc(ctx context.Context, userID store.ID, deliver func(store.Event) bool, end func()) error {
	return e.hub.SubscribeFunc(ctx, userID, deliver, end)
}

// SubscribeWith implements pubsub.Events through the local hub. Every
// process's hub receives the same events in the same order, each
// positioned by its events document's id and its index there, so a
// position names the same event everywhere: a subscription resumes in any
// process that retained the user's events since it, which a process does
// while the user has a subscription there and for a while after (see
// pubsub.HubOptions).
func (e *Events) SubscribeWith(ctx context.Context, userID store.ID, opts pubsub.SubscribeOptions, deliver func(store.Event) bool, end func()) error {
	return e.hub.SubscribeWith(ctx, userID, opts, deliver, end)
}

// Mode returns how this process reads events: EventsChangeStream or
// EventsPoll once Run succeeded, EventsAuto before.
func (e *Events) Mode() EventsMode {
	m, _ := e.mode.Load().(EventsMode)
	return m
}

// Len returns the number of open subscriptions in this process.
func (e *Events) Len() int { return e.hub.Len() }

// Stats returns the counters of this process's hub.
func (e *Events) Stats() pubsub.HubStats { return e.hub.Stats() }

// Run opens the change stream, starting from now (older events are not
// replayed), and starts the goroutine that feeds the hub from it until
// Close. Where the server has no change streams (EventsAuto), or with
// EventsPoll, it starts a poller instead (poll.go), from now too; with
// EventsLocal it starts nothing. Mode then says which. ctx bounds only the
// opening. It returns the opening's error, after
// which Run may be called again; a second Run after success, or a Run after
// Close, is an error.
func (e *Events) Run(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return errors.New("mongostore events: closed")
	case e.started:
		return errors.New("mongostore events: already running")
	}
	if e.opts.Mode == EventsLocal {
		e.log.Warn("inbox events reach this instance's subscribers only, as configured (-mongodb-events local): run no other instance on this database, or they would not see each other's")
		e.warnShared(ctx)
		e.started = true
		e.mode.Store(EventsLocal)
		return nil
	}
	if e.opts.Mode != EventsPoll {
		p := e.now()
		cs, err := e.open(ctx, position{})
		switch {
		case err == nil:
			p.token = copyRaw(cs.ResumeToken())
			wctx, cancel := context.WithCancel(context.Background())
			e.started, e.cancel, e.done = true, cancel, make(chan struct{})
			e.mode.Store(EventsChangeStream)
			e.log.Info("inbox events cross instances through a change stream")
			go e.watch(wctx, cs, p)
			return nil
		case e.opts.Mode == EventsAuto && noChangeStreams(err):
			e.log.Warn("MongoDB has no change streams (a standalone mongod, or a service without them): inbox events cross instances by polling the events collection",
				"poll_interval", e.opts.PollInterval.String(), "err", err)
		default:
			return fmt.Errorf("mongostore events: open change stream: %w", err)
		}
	} else {
		e.log.Info("inbox events cross instances by polling the events collection, as configured", "poll_interval", e.opts.PollInterval.String())
	}
	last, err := e.startPoll(ctx)
	if err != nil {
		return fmt.Errorf("mongostore events: start polling: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	e.started, e.cancel, e.done = true, cancel, make(chan struct{})
	e.mode.Store(EventsPoll)
	go func() {
		defer close(e.done)
		e.poll(wctx, last)
	}()
	return nil
}

// warnShared logs, at ERROR, an events document not yet expired: another
// process publishing on this database, which a process in EventsLocal mode
// never reads. It reads the newest document by _id (one indexed read), so
// it catches instances in the other modes that published within the TTL,
// not other local ones, which store nothing; a failed read is not
// reported.
func (e *Events) warnShared(ctx context.Context) {
	var d struct {
		ID      primitive.ObjectID `bson:"_id"`
		Expires time.Time          `bson:"x"`
	}
	err := e.coll.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: -1}}).SetProjection(bson.D{{Key: "x", Value: 1}})).Decode(&d)
	if err == nil && d.Expires.After(e.opts.Now()) {
		e.log.Error("another instance publishes inbox events on this database, which this one, in local mode, never reads: its subscribers miss the other's events; run every instance with -mongodb-events auto",
			"doc", d.ID.Hex(), "written", d.ID.Timestamp())
	}
}

// Close stops the change stream, waits for its goroutine to end, then
// closes the hub, which closes every subscriber's channel. It is
// idempotent. Publish still works after Close (it writes for the other
// processes); Subscribe does not.
func (e *Events) Close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.closed = true
	cancel, done := e.cancel, e.done
	e.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	e.hub.Close()
}

// position is where a change stream is to be reopened.
type position struct {
	// token is the resume token of the last event delivered, or the
	// stream's later position; nil before the first.
	token bson.Raw
	// startAfter says token is an invalidate event's, which only
	// StartAfter can get past.
	startAfter bool
	// since is when the stream was first opened, for a stream that has
	// reported no token yet. Only lungo's engine needs it: a real MongoDB
	// reports a token as soon as the stream is open.
	since *primitive.Timestamp
}

// open opens a change stream on the events collection: right after
// p.token, else at p.since, else from now.
func (e *Events) open(ctx context.Context, p position) (lungo.IChangeStream, error) {
	opts := options.ChangeStream()
	switch {
	case p.token != nil && p.startAfter:
		opts.SetStartAfter(p.token)
	case p.token != nil:
		opts.SetResumeAfter(p.token)
	case p.since != nil:
		opts.SetStartAtOperationTime(p.since)
	}
	// Only inserts matter: without the filter, every TTL deletion would
	// cross the network too. lungo's engine does not take pipelines (it
	// panics on one), so there the loop's own check filters alone.
	pipeline := mongo.Pipeline{}
	if !e.embedded {
		pipeline = mongo.Pipeline{{{Key: "$match", Value: bson.D{{Key: "operationType", Value: "insert"}}}}}
	}
	return e.coll.Watch(ctx, pipeline, opts)
}

// changeEvent is the part of a change stream event the watcher reads.
type changeEvent struct {
	OperationType string    `bson:"operationType"`
	FullDocument  eventsDoc `bson:"fullDocument"`
}

// now returns the position "from now" for a stream opened next.
func (e *Events) now() position {
	if !e.embedded {
		return position{}
	}
	// lungo stamps each change with bsonkit.Now(), which only increases, so
	// a stream started at this stamp misses nothing committed after it.
	ts := bsonkit.Now()
	return position{since: &ts}
}

// watch feeds the hub from cs and, each time the stream fails, reopens it
// after the last event it delivered, so nothing is lost or repeated across
// a dropped stream. It ends when ctx is cancelled.
func (e *Events) watch(ctx context.Context, cs lungo.IChangeStream, p position) {
	defer close(e.done)
	var (
		failures   int  // since a stream last delivered an event
		reopened   bool // "reopened" was logged for these failures
		lastLog    time.Time
		suppressed int
		backoff    time.Duration
	)
	// report logs a failure: the first of a run at once, then at most one
	// line every logEvery, so a long outage or a flapping stream does not
	// flood the log.
	const logEvery = 30 * time.Second
	report := func(msg string, err error) {
		failures++
		if failures == 1 || time.Since(lastLog) >= logEvery {
			e.log.Warn(msg, "err", err, "failures", failures, "suppressed", suppressed)
			lastLog, suppressed = time.Now(), 0
		} else {
			suppressed++
		}
	}
	for {
		if cs != nil {
			// Each stream reads under a context of its own, which
			// dropStream cancels to fail it as a network error would.
			sctx, drop := context.WithCancel(ctx)
			e.mu.Lock()
			e.drop = drop
			e.mu.Unlock()
			delivered := e.drain(sctx, cs, &p)
			err := cs.Err()
			_ = cs.Close(context.Background())
			e.mu.Lock()
			e.drop = nil
			e.mu.Unlock()
			drop()
			cs = nil
			if ctx.Err() != nil {
				return
			}
			if delivered {
				// The stream worked: a failure now is news, not a loop.
				backoff, failures, reopened = 0, 0, false
			}
			if err == nil {
				err = errors.New("change stream ended")
			}
			report("inbox event stream failed; resuming", err)
		}

		if backoff > 0 {
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return
			}
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), e.opts.MaxBackoff)

		if e.testHookReopen != nil {
			e.testHookReopen()
		}
		next, err := e.open(ctx, p)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if e.opts.Mode == EventsAuto && noChangeStreams(err) {
				// The server lost its change streams (it was restarted
				// standalone): poll from now on. Where the stream stopped
				// cannot be told in sequence numbers, so start from now.
				e.log.Error("MongoDB has no change streams any more: inbox events cross instances by polling from now on; events since the stream failed are lost", "err", err)
				last, perr := e.startPoll(ctx)
				if perr == nil {
					e.hub.ForgetLogs()
					e.mode.Store(EventsPoll)
					e.poll(ctx, last)
					return
				}
				err = perr
			}
			if (p.token != nil || p.since != nil) && historyLost(err) {
				// The events after the position have left the oplog: they
				// cannot be had any more. Start from now; subscribers
				// catch up on their next read of the inbox.
				e.log.Error("inbox event stream cannot resume: events lost; starting from now", "err", err)
				// The hub's logs lack the lost events: no cursor from
				// before may resume as if it had them all.
				e.hub.ForgetLogs()
				p = e.now()
				backoff = 0
				continue
			}
			report("inbox event stream cannot reopen; retrying", err)
			continue
		}
		if failures > 0 && !reopened {
			e.log.Info("inbox event stream reopened", "failures", failures)
			reopened = true
		}
		if p.token == nil {
			p.token = copyRaw(next.ResumeToken())
		}
		cs = next
	}
}

// drain delivers cs's events to the hub until cs fails or ctx ends,
// keeping p at the last event delivered (or at the stream's newer position
// when it reports one without an event). It reports whether it delivered
// anything.
func (e *Events) drain(ctx context.Context, cs lungo.IChangeStream, p *position) bool {
	delivered := false
	for cs.Next(ctx) {
		var ce changeEvent
		if err := cs.Decode(&ce); err != nil {
			e.log.Error("undecodable inbox event document; skipped", "err", err)
		} else {
			switch ce.OperationType {
			case "insert":
				e.deliver(ctx, ce.FullDocument)
			}
		}
		if t := cs.ResumeToken(); t != nil {
			p.token = copyRaw(t)
			// After an invalidate (the collection was dropped or renamed)
			// the stream ends, and only StartAfter gets past its token.
			p.startAfter = ce.OperationType == "invalidate"
		}
		delivered = true
	}
	// A real MongoDB advances the token while no event comes (the
	// post-batch resume token), so a reopen does not rescan the oplog.
	if t := cs.ResumeToken(); t != nil && ctx.Err() == nil && !p.startAfter {
		p.token = copyRaw(t)
	}
	return delivered
}

// deliver hands one document's events to the hub, which never blocks.
func (e *Events) deliver(ctx context.Context, d eventsDoc) {
	evs := make([]store.Event, 0, len(d.Events))
	for i, ed := range d.Events {
		if ev, ok := ed.event(); ok {
			ev.Position = store.EventPosition{Batch: store.ID(d.ID), Index: uint64(i)}
			evs = append(evs, ev)
		} else {
			// A newer Herald may publish types this one does not know.
			e.log.Debug("unknown inbox event type; skipped", "type", ed.Type)
		}
	}
	e.hub.Publish(ctx, evs...)
}

// historyLost reports a resume token that points before what the server
// still has: MongoDB's ChangeStreamHistoryLost (286) or
// ChangeStreamFatalError (280), or lungo's equivalents.
func historyLost(err error) bool {
	var ce mongo.CommandError
	if errors.As(err, &ce) && (ce.Code == 286 || ce.Code == 280) {
		return true
	}
	var se mongo.ServerError
	if errors.As(err, &se) && (se.HasErrorCode(286) || se.HasErrorCode(280)) {
		return true
	}
	return errors.Is(err, lungo.ErrLostOplogPosition) || strings.Contains(err.Error(), "unable to resume change stream")
}

func copyRaw(r bson.Raw) bson.Raw {
	if r == nil {
		return nil
	}
	return append(bson.Raw(nil), r...)
}
