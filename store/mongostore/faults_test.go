package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// Fault injection for the backend's multi-step writes: a wrapper of the
// driver interfaces fails or holds chosen calls, standing in for a process
// killed, or slowed, at that step.

type faults struct {
	gate atomic.Bool // block the next users.UpdateOne until release is closed
	// entriesGate blocks the next buckets.BulkWrite (a chunk's entries,
	// written after its count step) the same way; once released, it is
	// failed if writes fail by then (a process killed while it waited).
	entriesGate atomic.Bool
	gated       chan struct{} // closed when a call is blocked
	release     chan struct{}
	bucketsBulk atomic.Int32 // fail this many buckets.BulkWrite calls
	msgsBulk    atomic.Int32 // fail this many messages.BulkWrite calls
	usersUpdate atomic.Int32 // fail this many users.UpdateOne calls
	msgsUpdate  atomic.Int32 // fail this many messages.UpdateOne and FindOneAndUpdate calls,
	msgsSkip    atomic.Int32 // after letting this many through
	likesWrite  atomic.Int32 // fail this many likes.UpdateOne and DeleteOne calls
	// repostsWrite fails this many reposts.InsertOne and DeleteOne calls
	// (a repost's guard); msgsInsert this many messages.InsertOne calls.
	repostsWrite atomic.Int32
	msgsInsert   atomic.Int32
	// notifWrite fails the notifWrite-th write to the notification
	// collections from now (1: the next one); 0 fails none.
	notifWrite atomic.Int32
	// notifHolds holds the write named "<collection>#<n>" (the n-th write
	// to that notification collection since openFaulty) before it is
	// made: its reached is closed, then it waits for release. Set before
	// the writes start.
	notifHolds map[string]*hold
	notifMu    sync.Mutex
	notifSeen  map[string]int
	// convWrite fails the convWrite-th write to the conversation
	// collections from now (1: the next one); 0 fails none.
	convWrite atomic.Int32
	// anyWrite fails the anyWrite-th write to any collection from now (1:
	// the next one); 0 fails none (groupfaults_test.go).
	anyWrite atomic.Int32
	// onWrite, if set, is called with the collection's name before each
	// write that anyWrite counts.
	onWrite atomic.Pointer[func(string)]
	// unkeyed counts the writes of messages whose filter does not name the
	// author, the shard key's prefix.
	unkeyed atomic.Int32
	// writes, while set, fails every insert, update and bulk write with
	// its error: a server whose disk is full (diskfull_test.go).
	writes atomic.Pointer[error]
}

// failWrites makes every write fail with err; nil lets them through again.
func (f *faults) failWrites(err error) {
	if err == nil {
		f.writes.Store(nil)
		return
	}
	f.writes.Store(&err)
}

// writeErr is the error every write fails with now, or nil.
func (f *faults) writeErr() error {
	if e := f.writes.Load(); e != nil {
		return *e
	}
	return nil
}

type fClient struct {
	lungo.IClient
	f *faults
}

func (c fClient) Database(name string, opts ...*options.DatabaseOptions) lungo.IDatabase {
	return fDB{c.IClient.Database(name, opts...), c.f}
}

type fDB struct {
	lungo.IDatabase
	f *faults
}

func (d fDB) Collection(name string, opts ...*options.CollectionOptions) lungo.ICollection {
	return fColl{d.IDatabase.Collection(name, opts...), d.f, name}
}

type fColl struct {
	lungo.ICollection
	f    *faults
	name string
}

// hold is a call held by the faults: reached is closed when it is, and it
// goes on when release is closed.
type hold struct{ reached, release chan struct{} }

func newHold() *hold { return &hold{reached: make(chan struct{}), release: make(chan struct{})} }

var errInjected = errors.New("injected: process killed here")

// notifFails reports whether this write to a notification collection is
// the one notifWrite names.
func (c fColl) notifFails() bool {
	switch c.name {
	case "notifications", "notifactors", "notifheads":
		c.f.notifMu.Lock()
		if c.f.notifSeen == nil {
			c.f.notifSeen = map[string]int{}
		}
		c.f.notifSeen[c.name]++
		n := c.f.notifSeen[c.name]
		c.f.notifMu.Unlock()
		if h := c.f.notifHolds[fmt.Sprintf("%s#%d", c.name, n)]; h != nil {
			close(h.reached)
			<-h.release
		}
		return c.f.notifWrite.Add(-1) == 0
	}
	return false
}

// convFails reports whether this write to a conversation collection is
// the one convWrite names.
func (c fColl) convFails() bool {
	if h := c.f.onWrite.Load(); h != nil {
		(*h)(c.name)
	}
	if c.f.anyWrite.Load() > 0 && c.f.anyWrite.Add(-1) == 0 {
		return true
	}
	switch c.name {
	case "convs", "dms", "userconvs", "dmreads":
		return c.f.convWrite.Add(-1) == 0
	}
	return false
}

func (c fColl) InsertOne(ctx context.Context, doc interface{}, o ...*options.InsertOneOptions) (*mongo.InsertOneResult, error) {
	if err := c.f.writeErr(); err != nil {
		return nil, err
	}
	if c.convFails() {
		return nil, errInjected
	}
	if c.notifFails() {
		return nil, errInjected
	}
	if (c.name == "reposts" && c.f.repostsWrite.Add(-1) >= 0) || (c.name == "messages" && c.f.msgsInsert.Add(-1) >= 0) {
		return nil, errInjected
	}
	return c.ICollection.InsertOne(ctx, doc, o...)
}

func (c fColl) BulkWrite(ctx context.Context, m []mongo.WriteModel, o ...*options.BulkWriteOptions) (*mongo.BulkWriteResult, error) {
	if err := c.f.writeErr(); err != nil {
		return nil, err
	}
	if c.convFails() {
		return nil, errInjected
	}
	if (c.name == "buckets" && c.f.bucketsBulk.Add(-1) >= 0) || (c.name == "messages" && c.f.msgsBulk.Add(-1) >= 0) {
		return nil, errInjected
	}
	if c.name == "buckets" && c.f.entriesGate.CompareAndSwap(true, false) {
		close(c.f.gated)
		<-c.f.release
		if err := c.f.writeErr(); err != nil {
			return nil, err
		}
	}
	return c.ICollection.BulkWrite(ctx, m, o...)
}

// keyed notes a write of messages whose filter does not name the author.
func (c fColl) keyed(filter interface{}) {
	if c.name != "messages" {
		return
	}
	if d, ok := filter.(bson.D); !ok || !slices.ContainsFunc(d, func(e bson.E) bool { return e.Key == "a" }) {
		c.f.unkeyed.Add(1)
	}
}

func (c fColl) DeleteOne(ctx context.Context, f interface{}, o ...*options.DeleteOptions) (*mongo.DeleteResult, error) {
	c.keyed(f)
	if c.notifFails() {
		return nil, errInjected
	}
	if c.name == "likes" && c.f.likesWrite.Add(-1) >= 0 {
		return nil, errInjected
	}
	if c.name == "reposts" && c.f.repostsWrite.Add(-1) >= 0 {
		return nil, errInjected
	}
	return c.ICollection.DeleteOne(ctx, f, o...)
}

func (c fColl) FindOneAndUpdate(ctx context.Context, f, u interface{}, o ...*options.FindOneAndUpdateOptions) lungo.ISingleResult {
	c.keyed(f)
	if err := c.f.writeErr(); err != nil {
		return mongo.NewSingleResultFromDocument(bson.D{}, err, nil)
	}
	if c.notifFails() || c.convFails() {
		return mongo.NewSingleResultFromDocument(bson.D{}, errInjected, nil)
	}
	if c.name == "messages" && c.f.msgsSkip.Add(-1) < 0 && c.f.msgsUpdate.Add(-1) >= 0 {
		return mongo.NewSingleResultFromDocument(bson.D{}, errInjected, nil)
	}
	return c.ICollection.FindOneAndUpdate(ctx, f, u, o...)
}

func (c fColl) FindOneAndDelete(ctx context.Context, f interface{}, o ...*options.FindOneAndDeleteOptions) lungo.ISingleResult {
	c.keyed(f)
	return c.ICollection.FindOneAndDelete(ctx, f, o...)
}

func (c fColl) UpdateOne(ctx context.Context, f, u interface{}, o ...*options.UpdateOptions) (*mongo.UpdateResult, error) {
	c.keyed(f)
	if err := c.f.writeErr(); err != nil {
		return nil, err
	}
	if c.notifFails() || c.convFails() {
		return nil, errInjected
	}
	if c.name == "users" && c.f.gate.CompareAndSwap(true, false) {
		close(c.f.gated)
		<-c.f.release
	}
	if c.name == "users" && c.f.usersUpdate.Add(-1) >= 0 {
		return nil, errInjected
	}
	if c.name == "likes" && c.f.likesWrite.Add(-1) >= 0 {
		return nil, errInjected
	}
	if c.name == "messages" && c.f.msgsSkip.Add(-1) < 0 && c.f.msgsUpdate.Add(-1) >= 0 {
		return nil, errInjected
	}
	return c.ICollection.UpdateOne(ctx, f, u, o...)
}

var faultClock = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func tickClock() time.Time { faultClock = faultClock.Add(time.Second); return faultClock }

func openFaulty(t *testing.T) (*mongostore.Store, *faults) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(func() { engine.Close() })
	f := &faults{}
	st := mongostore.New(fClient{client, f}, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	return st, f
}

func mkUser(t *testing.T, st *mongostore.Store, h string) store.ID {
	now := tickClock()
	u := &store.User{ID: store.NewID(now), Handle: h, CreatedAt: now, LastSeenAt: now}
	require.NoError(t, st.CreateUser(context.Background(), u))
	return u.ID
}

func mkPost(t *testing.T, st *mongostore.Store, author store.ID) (*store.Message, *storage.Job) {
	now := tickClock()
	m := &store.Message{ID: store.NewID(now), AuthorID: author, Text: "hi", Kind: store.KindPost, CreatedAt: now}
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: now}
	require.NoError(t, st.CreateMessage(context.Background(), m, j))
	return m, j
}

// retractJob is the JobRetract of m in the buckets layout.
func retractJob(m *store.Message) *storage.Job {
	return &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
}

func inboxCounts(t *testing.T, st *mongostore.Store, owner store.ID) (store.InboxCounts, int) {
	items, c, err := st.ReadInbox(context.Background(), storage.InboxFilter{Owner: owner, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 100)})
	require.NoError(t, err)
	return c, len(items)
}

// MarkInboxRead on a user whose inbox never received anything.
func TestFaults_MarkReadFreshUser(t *testing.T) {
	st, _ := openFaulty(t)
	x := mkUser(t, st, "xxx")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	c, err := st.MarkInboxRead(ctx, x, storage.LayoutBuckets, store.NewID(time.Now()))
	t.Logf("MarkInboxRead on fresh user: counts=%+v err=%v after %v", c, err, time.Since(start))
	require.NoError(t, err)
}

// Two retractions by one author; the newer one is interrupted after its
// counter step. After the restart the interrupted job must run first, or
// the older one overwrites the marker that keeps the newer one's counter
// step from repeating.
func TestFaults_RetractReorderDoubleDecrement(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	_, err := st.Follow(ctx, x, a, tickClock())
	require.NoError(t, err)
	mOld, jOld := mkPost(t, st, a)
	mNew, jNew := mkPost(t, st, a)
	for _, j := range []*storage.Job{jOld, jNew} {
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j, Owners: []store.ID{x}, At: tickClock(), Done: true})
		require.NoError(t, err)
	}
	c, n := inboxCounts(t, st, x)
	t.Logf("after delivery: %+v entries=%d", c, n)

	// The user deletes the newer message, then the older one.
	rNew := retractJob(mNew)
	rOld := retractJob(mOld)
	require.NoError(t, st.DeleteMessage(ctx, mNew.ID, rNew))
	require.NoError(t, st.DeleteMessage(ctx, mOld.ID, rOld))

	// The fan-out runs rNew first (queued first); the process dies after the counts step.
	refs, next, err := st.FindDeliveries(ctx, mNew.ID, nil, 1000)
	require.NoError(t, err)
	f.bucketsBulk.Store(1)
	_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: rNew, Refs: refs, Cursor: next, Done: next == nil})
	require.ErrorIs(t, err, errInjected)

	// Restart: pending jobs in the order PendingJobs gives.
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	for _, j := range pending {
		t.Logf("pending after restart: kind=%d msg=%s (old=%v)", j.Kind, j.MessageID, j.MessageID == mOld.ID)
		refs, next, err := st.FindDeliveries(ctx, j.MessageID, j.Cursor, 1000)
		require.NoError(t, err)
		_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: j, Refs: refs, Cursor: next, Done: next == nil})
		require.NoError(t, err)
	}
	c, n = inboxCounts(t, st, x)
	t.Logf("after both retractions: %+v entries=%d", c, n)
	require.Equal(t, n, c.Total, "total must equal entries present")
}

// Two deliveries to a common follower; the newer is interrupted after its
// counter step. After the restart it must run before the older one.
func TestFaults_DeliverReorderPhantom(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, b, x := mkUser(t, st, "aaa"), mkUser(t, st, "bbb"), mkUser(t, st, "xxx")
	for _, au := range []store.ID{a, b} {
		_, err := st.Follow(ctx, x, au, tickClock())
		require.NoError(t, err)
	}
	_, j1 := mkPost(t, st, a) // older, e.g. posted on another instance, not yet polled
	_, j2 := mkPost(t, st, b) // newer, queued first by the leader

	f.bucketsBulk.Store(1)
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j2, Owners: []store.ID{x}, At: tickClock(), Done: true})
	require.ErrorIs(t, err, errInjected)

	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	for _, j := range pending {
		t.Logf("pending after restart: msg=%s (j1=%v)", j.MessageID, j.MessageID == j1.MessageID)
		fs, err := st.ListFollowers(ctx, j.AuthorID, store.Forward(store.NilID, 1000))
		require.NoError(t, err)
		_, err = st.DeliverInbox(ctx, storage.Delivery{Job: j, Owners: fs, At: tickClock(), Done: true})
		require.NoError(t, err)
	}
	c, n := inboxCounts(t, st, x)
	t.Logf("after both deliveries: %+v entries=%d", c, n)
	require.Equal(t, n, c.Total, "total must equal entries present")
	require.Equal(t, n, c.Unread)
}

// The message count when CreateMessage's count step fails and the message
// is deleted before its job's first chunk.
func TestFaults_DeleteBeforeCounted(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a := mkUser(t, st, "aaa")
	now := tickClock()
	m := &store.Message{ID: store.NewID(now), AuthorID: a, Text: "hi", Kind: store.KindPost, CreatedAt: now}
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, MessageID: m.ID, AuthorID: a, CreatedAt: now}
	f.usersUpdate.Store(1)
	err := st.CreateMessage(ctx, m, j)
	t.Logf("CreateMessage: %v", err)
	r := &storage.Job{ID: m.ID, Kind: storage.JobRetract, MessageID: m.ID, AuthorID: a, CreatedAt: now}
	require.NoError(t, st.DeleteMessage(ctx, m.ID, r))
	// The retraction runs to its end.
	_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: r, Done: true})
	require.NoError(t, err)
	u, err := st.FindUserByID(ctx, a)
	require.NoError(t, err)
	var d bson.M
	_ = d
	t.Logf("author messageCount=%d", u.MessageCount)
	require.Equal(t, 0, u.MessageCount)
}

// An unfollow that is slow between marking the edge and its counters, and a
// follow of the same pair meanwhile (a double tap).
func TestFaults_UnfollowFollowRace(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "aaa"), mkUser(t, st, "xxx")
	_, err := st.Follow(ctx, x, a, tickClock())
	require.NoError(t, err)

	f.gated, f.release = make(chan struct{}), make(chan struct{})
	f.gate.Store(true)
	done := make(chan error)
	go func() { _, err := st.Unfollow(ctx, x, a); done <- err }()
	<-f.gated // the unfollow has marked the edge and waits before its first counter
	followed := make(chan error)
	go func() { _, err := st.Follow(ctx, x, a, tickClock()); followed <- err }()
	time.Sleep(50 * time.Millisecond) // the follow waits for the pair's lock
	close(f.release)
	require.NoError(t, <-done)
	require.NoError(t, <-followed)

	fx, err := st.FindUserByID(ctx, x)
	require.NoError(t, err)
	fa, err := st.FindUserByID(ctx, a)
	require.NoError(t, err)
	following, err := st.FindFollowing(ctx, x, []store.ID{a})
	require.NoError(t, err)
	followers, err := st.ListFollowers(ctx, a, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	t.Logf("x.following=%d a.followers=%d followees edge=%v followers edge=%v", fx.FollowingCount, fa.FollowerCount, following[0], len(followers) == 1)
	edge := 0
	if following[0] {
		edge = 1
	}
	require.Equal(t, edge, fx.FollowingCount)
	require.Equal(t, edge, fa.FollowerCount)
	require.Equal(t, following[0], len(followers) == 1, "the two edge collections agree")
}

// Two follows of one pair at once (a double tap).
func TestFaults_FollowFollowRace(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "aaa"), mkUser(t, st, "xxx")
	f.gated, f.release = make(chan struct{}), make(chan struct{})
	f.gate.Store(true)
	done := make(chan error)
	go func() { _, err := st.Follow(ctx, x, a, tickClock()); done <- err }()
	<-f.gated
	second := make(chan error)
	go func() { _, err := st.Follow(ctx, x, a, tickClock()); second <- err }()
	time.Sleep(50 * time.Millisecond) // the second follow waits for the pair's lock
	close(f.release)
	require.NoError(t, <-done)
	require.NoError(t, <-second)
	fx, _ := st.FindUserByID(ctx, x)
	fa, _ := st.FindUserByID(ctx, a)
	t.Logf("x.following=%d a.followers=%d", fx.FollowingCount, fa.FollowerCount)
	require.Equal(t, 1, fx.FollowingCount)
	require.Equal(t, 1, fa.FollowerCount)
}
