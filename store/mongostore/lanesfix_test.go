package mongostore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// openTwo opens one database with two stores, as two processes; the
// second has not read the number of lanes (no EnsureIndexes).
func openTwo(t *testing.T) (lungo.IClient, *mongostore.Store, *mongostore.Store) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(func() { engine.Close() })
	a := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, a.EnsureIndexes(ctx))
	return client, a, mongostore.New(client, "herald", mongostore.Options{})
}

func hasJob(t *testing.T, st *mongostore.Store, lane int, j *storage.Job) bool {
	js, err := st.PendingLaneJobs(context.Background(), lane)
	require.NoError(t, err)
	for _, p := range js {
		if p.ID == j.ID && p.Kind == j.Kind {
			return true
		}
	}
	return false
}

// TestOwnerLanes_PostBeforeLanesRead stores a post through a store that
// has not read the number of lanes yet (a server answers requests before
// its setup ends): the job must still be every lane's.
func TestOwnerLanes_PostBeforeLanesRead(t *testing.T) {
	ctx := context.Background()
	_, a, b := openTwo(t)
	_, err := a.FanoutLanes(ctx, 2)
	require.NoError(t, err)
	author := mkUser(t, a, "author")
	_, j := mkPost(t, b, author)
	assert.True(t, hasJob(t, a, 1, j), "lane 1's share stored")
	// A deletion through another store that has not read N either.
	c := mongostore.New(a.Database().Client(), "herald", mongostore.Options{})
	share := *j
	share.Lane = 1
	_, err = a.DeliverInbox(ctx, storage.Delivery{Job: &share, At: tickClock(), Done: true})
	require.NoError(t, err)
	require.False(t, hasJob(t, a, 1, j), "lane 1 done delivering")
	m, _ := mkPost(t, a, author)
	require.NoError(t, c.DeleteMessage(ctx, m.ID, retractJob(m)))
	assert.True(t, hasJob(t, a, 1, retractJob(m)), "every lane retracts")
}

// TestOwnerLanes_LaneZeroAdoptsOneLaneJobs stores message jobs for one lane,
// then two lanes: lane 0's poll gives each job to every lane, a job not
// begun from its start, a job begun from its cursor.
func TestOwnerLanes_LaneZeroAdoptsOneLaneJobs(t *testing.T) {
	ctx := context.Background()
	client, a, _ := openTwo(t)
	author := mkUser(t, a, "author")
	_, fresh := mkPost(t, a, author)
	_, begun := mkPost(t, a, author)
	msgs := client.Database("herald").Collection("messages")
	_, err := msgs.UpdateOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(begun.ID)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "j.cur", Value: []byte("x")}}}})
	require.NoError(t, err)
	_, err = client.Database("herald").Collection("leases").UpdateOne(ctx, bson.D{{Key: "_id", Value: "fanout/config"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: int32(2)}}}}, options.Update().SetUpsert(true))
	require.NoError(t, err)
	b := mongostore.New(client, "herald", mongostore.Options{})
	n, err := b.FanoutLanes(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	js, err := b.PendingLaneJobs(ctx, 0)
	require.NoError(t, err)
	require.Len(t, js, 2)
	assert.True(t, hasJob(t, b, 1, fresh), "the job not begun is every lane's")
	assert.True(t, hasJob(t, b, 1, begun), "the begun job is every lane's")
	for lane := range 2 {
		js, err := b.PendingLaneJobs(ctx, lane)
		require.NoError(t, err)
		for _, j := range js {
			want := ""
			if j.ID == begun.ID {
				want = "x"
			}
			assert.Equal(t, want, string(j.Cursor), "lane %d's share of %s goes on from the job's cursor", lane, j.ID)
		}
	}
}

// TestOwnerLanes_SetLanesRefusedWhileRunning checks that setup refuses a
// new number while a process runs, even with no job pending, and that a
// process finding the number changed under it stops its lanes.
func TestOwnerLanes_SetLanesRefusedWhileRunning(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	svc := db.process(t, db.st)
	defer func() { _ = svc.Close(ctx) }()
	require.Eventually(t, func() bool { return len(heldLanes(svc)) == sharedLanes }, 5*time.Second, 5*time.Millisecond)
	setup := mongostore.New(db.client, "herald", mongostore.Options{})
	require.Error(t, setup.SetFanoutLanes(ctx, 2), "a process runs")

	_, err := db.client.Database("herald").Collection("leases").UpdateOne(ctx, bson.D{{Key: "_id", Value: "fanout/config"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: int32(2)}}}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(heldLanes(svc)) == 0 }, 5*time.Second, 5*time.Millisecond,
		"the lanes stop once the stored number changed")
}

// TestOwnerLanes_StaleLastRetractionKeepsRecords has a stale runner of
// lane 1 end lane 1's share of a retraction that lane 1's new holder has
// already ended, while lane 0's share is pending: it must not delete the
// delivery records lane 0 still reads, or lane 0's owner keeps the post.
func TestOwnerLanes_StaleLastRetractionKeepsRecords(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	_, err := st.FanoutLanes(ctx, 2)
	require.NoError(t, err)
	author := mkUser(t, st, "author")
	var owners [2]store.ID
	for i := 0; owners[0].IsZero() || owners[1].IsZero(); i++ {
		u := mkUser(t, st, fmt.Sprintf("user%d", i))
		if l := storage.OwnerLane(u, 2); owners[l].IsZero() {
			owners[l] = u
		}
	}
	m, j := mkPost(t, st, author)
	for lane, o := range owners {
		share := *j
		share.Lane = lane
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: &share, Owners: []store.ID{o}, At: tickClock(), Done: true})
		require.NoError(t, err)
	}
	require.NoError(t, st.DeleteMessage(ctx, m.ID, retractJob(m)))
	refs, _, err := st.FindDeliveries(ctx, m.ID, nil, 100)
	require.NoError(t, err)
	require.Len(t, refs, 2)
	of := func(o store.ID) []storage.InboxRef {
		var out []storage.InboxRef
		for _, r := range refs {
			if r.Owner == o {
				out = append(out, r)
			}
		}
		return out
	}
	lane1 := retractJob(m)
	lane1.Lane = 1
	_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: lane1, Refs: of(owners[1]), Done: true})
	require.NoError(t, err)
	require.NoError(t, st.FinishShare(ctx, lane1), "the stale runner ends the share again")
	refs, _, err = st.FindDeliveries(ctx, m.ID, nil, 100)
	require.NoError(t, err)
	require.Len(t, refs, 2, "lane 0's share still reads the records")

	_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: retractJob(m), Refs: of(owners[0]), Done: true})
	require.NoError(t, err)
	for _, o := range owners {
		c, n := inboxCounts(t, st, o)
		assert.Zero(t, n, "no entry left")
		assert.Zero(t, c.Total)
	}
	b, err := st.JobBacklog(ctx, 10)
	require.NoError(t, err)
	assert.Zero(t, b.Jobs)
}

// TestOwnerLanes_RetakenLaneRecordsRunningJob has a process run a chunk of
// job J on lane 1, lose the lane to another that runs job K, and retake it
// to run J on: the lane's record of its running job must name J again, so
// that after a crash its next holder resumes J, not K, first.
func TestOwnerLanes_RetakenLaneRecordsRunningJob(t *testing.T) {
	ctx := context.Background()
	_, a, b := openTwo(t)
	for _, st := range []*mongostore.Store{a, b} {
		_, err := st.FanoutLanes(ctx, 2)
		require.NoError(t, err)
	}
	author := mkUser(t, a, "author")
	_, k := mkPost(t, a, author)
	_, j := mkPost(t, a, author)
	chunk := func(st *mongostore.Store, job *storage.Job, from, to string) {
		share := *job
		share.Lane = 1
		if from != "" {
			share.Cursor = []byte(from)
		}
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: &share, At: tickClock(), Cursor: []byte(to)})
		require.NoError(t, err)
	}
	take := func(st *mongostore.Store, holder string) {
		ok, err := st.TryLaneLease(ctx, 1, holder, 30*time.Millisecond)
		require.NoError(t, err)
		require.True(t, ok)
	}
	take(a, "a")
	chunk(a, j, "", "j1")
	time.Sleep(40 * time.Millisecond)
	take(b, "b")
	chunk(b, k, "", "k1")
	time.Sleep(40 * time.Millisecond)
	take(a, "a")
	chunk(a, j, "j1", "j2")
	js, err := a.PendingLaneJobs(ctx, 1)
	require.NoError(t, err)
	require.NotEmpty(t, js)
	assert.Equal(t, j.ID, js[0].ID, "the job the lane's holder last began first")
}

// TestOwnerLanes_CloseEndsHeartbeat checks that a process stopped
// gracefully is no longer counted live, so the others take its lanes
// without waiting for its heartbeat to lapse.
func TestOwnerLanes_CloseEndsHeartbeat(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	start := func() *service.Service {
		st := mongostore.New(db.client, "herald", mongostore.Options{})
		require.NoError(t, st.EnsureIndexes(ctx))
		svc := service.NewService(st, pubsub.NewHub(), service.Options{Lanes: sharedLanes, LeaseTTL: time.Minute, JobPoll: 20 * time.Millisecond})
		require.NoError(t, svc.Start(ctx))
		return svc
	}
	a, b := start(), start()
	defer func() { _ = b.Close(ctx) }()
	live, err := db.st.Heartbeat(ctx, "probe", time.Minute)
	require.NoError(t, err)
	require.Equal(t, 3, live)
	require.NoError(t, a.Close(ctx))
	live, err = db.st.Heartbeat(ctx, "probe", time.Minute)
	require.NoError(t, err)
	assert.Equal(t, 2, live, "the stopped process is not counted")
}

// TestOwnerLanes_WholeJobReachesEveryLane stores a post for one lane whose
// run had begun (lane 0's record names it) before two lanes were stored:
// lane 0 shares it out among both lanes, which bring it to their
// followers.
func TestOwnerLanes_WholeJobReachesEveryLane(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	opts := service.Options{LeaseTTL: time.Minute, JobPoll: 20 * time.Millisecond, EdgeJobGrace: 10 * time.Millisecond}
	one := service.NewService(db.st, pubsub.NewHub(), opts)
	require.NoError(t, one.Start(ctx))
	author := sharedUser(t, db.st, "author")
	var fans [2]store.ID
	for i := 0; fans[0].IsZero() || fans[1].IsZero(); i++ {
		u := sharedUser(t, db.st, fmt.Sprintf("user%d", i))
		if l := storage.OwnerLane(u, 2); fans[l].IsZero() {
			fans[l] = u
			_, err := one.Follow(ctx, u, author)
			require.NoError(t, err)
		}
	}
	require.Eventually(t, one.Idle, 5*time.Second, time.Millisecond)
	require.NoError(t, one.Close(ctx))
	m, _ := mkPost(t, db.st, author) // db.st knows one lane
	leases := db.client.Database("herald").Collection("leases")
	_, err := leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: "fanout"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "cur", Value: primitive.ObjectID(m.ID)}, {Key: "ck", Value: int32(storage.JobDeliver)}}}})
	require.NoError(t, err)
	_, err = leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: "fanout/config"}}, bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: int32(2)}}}})
	require.NoError(t, err)

	st := mongostore.New(db.client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	opts.Lanes = 2
	two := service.NewService(st, pubsub.NewHub(), opts)
	require.NoError(t, two.Start(ctx))
	defer func() { _ = two.Close(ctx) }()
	waitDrained(t, st, two)
	for lane, f := range fans {
		items, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: f, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 10)})
		require.NoError(t, err)
		n := 0
		for _, it := range items {
			if it.MessageID == m.ID {
				n++
			}
		}
		assert.Equal(t, 1, n, "lane %d's follower has the post once", lane)
	}
}

// TestOwnerLanes_OneLaneStandbyCounted runs two processes on a database
// that stores one lane; the one holding the lease stops. The other, a
// standby, still runs: setup must refuse a new number of lanes. Once it
// leads, a number changed anyway (setup racing its start) must make it
// give lane 0's lease up rather than run every inbox's jobs beside the
// new lanes' holders.
func TestOwnerLanes_OneLaneStandbyCounted(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	_, err := db.st.FanoutLanes(ctx, 1)
	require.NoError(t, err)
	opts := service.Options{LeaseTTL: 4 * time.Second, JobPoll: 20 * time.Millisecond}
	a := service.NewService(db.st, pubsub.NewHub(), opts)
	require.NoError(t, a.Start(ctx))
	require.Eventually(t, func() bool { return a.Stats().Lanes[0].Held }, 5*time.Second, 5*time.Millisecond)
	standby := mongostore.New(db.client, "herald", mongostore.Options{})
	require.NoError(t, standby.EnsureIndexes(ctx))
	b := service.NewService(standby, pubsub.NewHub(), opts)
	require.NoError(t, b.Start(ctx))
	defer func() { _ = b.Close(ctx) }()
	require.False(t, b.Stats().Lanes[0].Held)
	require.NoError(t, a.Close(ctx))

	setup := mongostore.New(db.client, "herald", mongostore.Options{})
	require.Error(t, setup.SetFanoutLanes(ctx, 2), "the standby runs")

	require.Eventually(t, func() bool { return b.Stats().Lanes[0].Held }, 5*time.Second, 5*time.Millisecond, "the standby leads")
	_, err = db.client.Database("herald").Collection("leases").UpdateOne(ctx, bson.D{{Key: "_id", Value: "fanout/config"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: int32(2)}}}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !b.Stats().Lanes[0].Held }, 5*time.Second, 5*time.Millisecond,
		"a process on one lane leads no more under another number")
	// It gives the lease up just after it stops leading, long before the
	// lease (4 s, renewed every 1 s) would lapse.
	assert.Eventually(t, func() bool {
		ok, err := setup.TryLaneLease(ctx, 0, "lanes", time.Minute)
		return err == nil && ok
	}, 1500*time.Millisecond, 5*time.Millisecond, "lane 0's lease is given up")
}
