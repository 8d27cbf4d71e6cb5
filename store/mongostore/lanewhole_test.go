package mongostore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// crossCut cuts short, after its count step, the first chunk of job's
// lane 0 share that reaches x, and runs meanwhile before reporting it.
type crossCut struct {
	storage.Backend
	f         *faults
	job, x    store.ID
	meanwhile func()
	once      sync.Once
	cut       atomic.Bool
}

func (c *crossCut) DeliverInbox(ctx context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	if d.Job.ID == c.job && d.Job.Lane == 0 && slices.Contains(d.Owners, c.x) {
		var err error
		c.once.Do(func() {
			c.cut.Store(true)
			c.f.bucketsBulk.Store(1)
			_, err = c.Backend.DeliverInbox(ctx, d)
			c.meanwhile()
			if err == nil {
				err = errors.New("the chunk was not cut")
			}
		})
		if err != nil {
			return nil, err
		}
	}
	return c.Backend.DeliverInbox(ctx, d)
}

func (c *crossCut) Unwrap() storage.Backend { return c.Backend }

// DeliverInboxes passes a group's chunks through the cut one at a time.
func (c *crossCut) DeliverInboxes(ctx context.Context, ds []storage.Delivery) ([]storage.Delivered, error) {
	return oneByOne(ctx, c, ds)
}

// setLanes stores n lanes as setup would with no process running.
func setLanes(t *testing.T, st *mongostore.Store, n int) {
	_, err := st.Database().Collection("leases").UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "fanout/config"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: int32(n)}}}}, options.Update().SetUpsert(true))
	require.NoError(t, err)
}

// TestOwnerLanes_BegunOneLaneJobCutShort stores a post for one lane and
// runs its first chunk (to f, the first follower) before two lanes are
// stored. Lane 0 adopts it; if lane 0 then wrote x's inbox (x is lane 1's)
// with a chunk cut short after its count step, and lane 1 delivered
// another post to x before that chunk ran again, the repeat would count
// x twice: x's inbox must end with each post once, counted once.
func TestOwnerLanes_BegunOneLaneJobCutShort(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	author, other := sharedUser(t, st, "author"), sharedUser(t, st, "other")
	first := sharedUser(t, st, "first") // active users: a delivery skips the others
	var x store.ID
	for i := 0; x.IsZero(); i++ {
		if u := sharedUser(t, st, fmt.Sprintf("user%d", i)); storage.OwnerLane(u, 2) == 1 && bytes.Compare(u[:], first[:]) > 0 {
			x = u
		}
	}
	for _, e := range [][2]store.ID{{first, author}, {x, author}, {x, other}} {
		_, err := st.Follow(ctx, e[0], e[1], tickClock())
		require.NoError(t, err)
	}
	_, a := mkPost(t, st, author) // one lane: no number stored yet
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: a, Owners: []store.ID{first}, At: tickClock(), Cursor: first[:]})
	require.NoError(t, err)
	setLanes(t, st, 2)

	cut := &crossCut{Backend: st, f: f, job: a.ID, x: x, meanwhile: func() {
		_, b := mkPost(t, st, other)
		share := *b
		share.Lane = 1
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: &share, Owners: []store.ID{x}, At: tickClock(), Done: true})
		assert.NoError(t, err)
	}}
	svc := service.NewService(cut, pubsub.NewHub(), service.Options{Lanes: 2, LeaseTTL: time.Minute, JobPoll: 20 * time.Millisecond})
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	waitDrained(t, st, svc)
	assert.False(t, cut.cut.Load(), "lane 0 writes no inbox of lane 1")
	for _, o := range []store.ID{first, x} {
		want := 1
		if o == x && cut.cut.Load() {
			want = 2
		}
		c, n := inboxCounts(t, st, o)
		assert.Equal(t, want, n, "entries")
		assert.Equal(t, n, c.Total, "each entry counted once")
		assert.Equal(t, n, c.Unread, "each entry counted once")
	}
}

// TestOwnerLanes_CutPlanSharedOut cuts a one-lane chunk to an owner of
// each lane short after its count step, then stores two lanes: lane 0's
// adoption splits the chunk's plan, each lane runs the chunk again for
// its own owner, and a deletion then takes the post out of both inboxes;
// every count stays exact.
func TestOwnerLanes_CutPlanSharedOut(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	author := sharedUser(t, st, "author")
	var owners [2]store.ID
	for i := 0; owners[0].IsZero() || owners[1].IsZero(); i++ {
		u := sharedUser(t, st, fmt.Sprintf("user%d", i))
		if l := storage.OwnerLane(u, 2); owners[l].IsZero() {
			owners[l] = u
			_, err := st.Follow(ctx, u, author, tickClock())
			require.NoError(t, err)
		}
	}
	m, a := mkPost(t, st, author)
	f.bucketsBulk.Store(1)
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: a, Owners: owners[:], At: tickClock(), Done: true})
	require.Error(t, err, "cut after the count step")
	setLanes(t, st, 2)

	svc := service.NewService(st, pubsub.NewHub(), service.Options{Lanes: 2, LeaseTTL: time.Minute, JobPoll: 20 * time.Millisecond})
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	waitDrained(t, st, svc)
	for lane, o := range owners {
		c, n := inboxCounts(t, st, o)
		assert.Equal(t, 1, n, "lane %d's owner has the post", lane)
		assert.Equal(t, 1, c.Total, "lane %d's owner: counted once", lane)
	}
	require.NoError(t, svc.DeleteMessage(ctx, author, m.ID))
	waitDrained(t, st, svc)
	for lane, o := range owners {
		c, n := inboxCounts(t, st, o)
		assert.Zero(t, n, "lane %d's owner: retracted", lane)
		assert.Zero(t, c.Total, "lane %d's owner: uncounted", lane)
	}
}

// TestOwnerLanes_CutChunkThenOtherLane cuts a one-lane chunk short after
// its count step for x, an owner of lane 1; two lanes are then stored and
// lane 1 delivers another post to x before its share of the cut job runs
// the chunk again. x's marker then names the other post, so the repeat
// counts x again.
func TestOwnerLanes_CutChunkThenOtherLane(t *testing.T) {
	t.Skip("known: a one-lane chunk cut short before N > 1 was stored is counted again for an owner whose lane ran another job on its inbox first (the per-inbox marker holds one job); needs the race of a first number stored with a one-lane job begun")
	ctx := context.Background()
	st, f := openFaulty(t)
	author, other := mkUser(t, st, "author"), mkUser(t, st, "other")
	var x store.ID
	for i := 0; x.IsZero(); i++ {
		if u := mkUser(t, st, fmt.Sprintf("user%d", i)); storage.OwnerLane(u, 2) == 1 {
			x = u
		}
	}
	_, a := mkPost(t, st, author)
	f.bucketsBulk.Store(1)
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: a, Owners: []store.ID{x}, At: tickClock(), Done: true})
	require.Error(t, err)
	setLanes(t, st, 2)
	n, err := st.FanoutLanes(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	_, err = st.PendingLaneJobs(ctx, 0) // lane 0 adopts it
	require.NoError(t, err)

	_, b := mkPost(t, st, other)
	share := *b
	share.Lane = 1
	_, err = st.DeliverInbox(ctx, storage.Delivery{Job: &share, Owners: []store.ID{x}, At: tickClock(), Done: true})
	require.NoError(t, err)
	share = *a
	share.Lane = 1
	_, err = st.DeliverInbox(ctx, storage.Delivery{Job: &share, Owners: []store.ID{x}, At: tickClock(), Done: true})
	require.NoError(t, err)
	c, entries := inboxCounts(t, st, x)
	assert.Equal(t, 2, entries)
	assert.Equal(t, 2, c.Total, "each entry counted once")
}

// TestOwnerLanes_PostsWhileStarting posts while the Service starts, as a
// server answers requests before its fan-out has read the number of lanes:
// the fan-out's lanes and scheme, chosen then, must not race the posts'
// queueing (go test -race), and every post is delivered.
func TestOwnerLanes_PostsWhileStarting(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	_, err := db.st.FanoutLanes(ctx, 2)
	require.NoError(t, err)
	author, fan := sharedUser(t, db.st, "author"), sharedUser(t, db.st, "fan")
	_, err = db.st.Follow(ctx, fan, author, time.Now())
	require.NoError(t, err)
	st := mongostore.New(db.client, "herald", mongostore.Options{})
	svc := service.NewService(st, pubsub.NewHub(), service.Options{Lanes: 2, LeaseTTL: time.Minute, JobPoll: 20 * time.Millisecond})
	posted := make(chan error, 1)
	go func() {
		for i := range 10 {
			if _, err := svc.PostMessage(ctx, author, service.PostInput{Text: fmt.Sprintf("post %d", i)}); err != nil {
				posted <- err
				return
			}
		}
		posted <- nil
	}()
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	require.NoError(t, <-posted)
	waitDrained(t, st, svc)
	_, n := inboxCounts(t, st, fan)
	assert.Equal(t, 10, n)
}
