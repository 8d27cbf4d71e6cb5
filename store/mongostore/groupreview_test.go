package mongostore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// Review tests of the MongoDB group commit (group.go).

// reviewFixture opens one database with a faulty store and a clean one.
func reviewFixture(t *testing.T) (context.Context, *faults, *mongostore.Store, *mongostore.Store) {
	ctx, client := openEngine(t)
	f := &faults{}
	st := indexedStore(t, ctx, fClient{client, f})
	other := indexedStore(t, ctx, client)
	return ctx, f, st, other
}

// postJobs creates one post of each author, with its delivery job.
func postJobs(t *testing.T, ctx context.Context, st *mongostore.Store, authors []store.ID) ([]*store.Message, []*storage.Job) {
	var ms []*store.Message
	var js []*storage.Job
	for _, a := range authors {
		now := tickClock()
		m := &store.Message{ID: store.NewID(now), AuthorID: a, Text: "hi", Kind: store.KindPost, CreatedAt: now}
		j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutEntries, MessageID: m.ID, AuthorID: a, CreatedAt: now}
		require.NoError(t, st.CreateMessage(ctx, m, j))
		ms = append(ms, m)
		js = append(js, j)
	}
	return ms, js
}

func inboxOf(t *testing.T, ctx context.Context, st *mongostore.Store, o store.ID) (int, store.InboxCounts) {
	items, c, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: o, Layout: storage.LayoutEntries, Range: store.Backward(store.NilID, 100)})
	require.NoError(t, err)
	return len(items), c
}

// TestGroupReview_StaleRunnerStoresPlanAfterNewHolderFinished: process A
// (the lane's holder whose lease lapses) reads the group's jobs and
// owners, then stalls just before storing its plan. Process B, the new
// holder, delivers the same jobs as a group of its own, start to end (its
// plan stored, counted, written, jobs advanced, plan dropped). A then
// stores its plan (g is missing again, and nothing checks the jobs are
// still at their cursors nor that A holds the lease), its count misses on
// iv, it checks that the stored plan is its own (it is), reads the owners
// again and counts every owner a second time under its own group mark.
//
// Fails on the branch: each owner's total and unread are 4 for 2 entries.
func TestGroupReview_StaleRunnerStoresPlanAfterNewHolderFinished(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2, _, js := groupPosts(t, ctx, st, 2)
	var once sync.Once
	hook := func(coll string) {
		if coll == "leases" { // A is about to store its plan
			once.Do(func() {
				r, err := other.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
				assert.NoError(t, err)
				assert.Len(t, r, 2)
			})
		}
	}
	f.onWrite.Store(&hook)
	_, err := st.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
	f.onWrite.Store(nil)
	t.Logf("stale runner's DeliverInboxes: err=%v", err)
	assertInboxes(t, ctx, other, 2, o1, o2)
}

// TestGroupReview_StaleRunnerPlanFinishedByNewHolder: as above, but A
// only stores its plan and dies (or stalls) before counting. B, which
// finished the same jobs in its own group, runs its next group on the
// lane: its storeGroup collides with A's plan, its retry finishes A's plan
// from the stored plan, and counts every owner again (A's mark is not on
// them).
//
// Fails on the branch: totals are 4 for 2 entries.
func TestGroupReview_StaleRunnerPlanFinishedByNewHolder(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2 := mkUser(t, st, "o1"), mkUser(t, st, "o2")
	a0, a1, a2, a3 := mkUser(t, st, "a0"), mkUser(t, st, "a1"), mkUser(t, st, "a2"), mkUser(t, st, "a3")
	_, js := postJobs(t, ctx, st, []store.ID{a0, a1})
	leases := 0
	hook := func(coll string) {
		if coll == "leases" {
			leases++
			if leases == 1 { // A is about to store its plan: B runs the jobs first
				r, err := other.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
				assert.NoError(t, err)
				assert.Len(t, r, 2)
				f.anyWrite.Store(2) // A dies right after storing its plan
			}
		}
	}
	f.onWrite.Store(&hook)
	_, err := st.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
	f.onWrite.Store(nil)
	f.anyWrite.Store(0)
	require.Error(t, err, "A killed after its plan")

	// B goes on with the lane's next posts.
	_, js2 := postJobs(t, ctx, st, []store.ID{a2, a3})
	var r []storage.Delivered
	for range 3 {
		if r, err = other.DeliverInboxes(ctx, groupDeliveries(js2, o1, o2)); err == nil {
			break
		}
		t.Logf("B's group: %v", err)
	}
	require.NoError(t, err)
	assertInboxes(t, ctx, other, 4, o1, o2)
	_ = fmt.Sprint(r)
}

// TestGroupReview_StaleRunnerOneJobControl is the one-job path under the
// interleaving of TestGroupReview_StaleRunnerStoresPlanAfterNewHolderFinished:
// A's chunk plan is stored on condition of the job's cursor, so it stops
// (passes on the branch: the group path is the regression).
func TestGroupReview_StaleRunnerOneJobControl(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2, _, js := groupPosts(t, ctx, st, 1)
	var once sync.Once
	hook := func(coll string) {
		if coll == "messages" || coll == "leases" {
			once.Do(func() {
				_, err := other.DeliverInbox(ctx, groupDeliveries(js, o1, o2)[0])
				assert.NoError(t, err)
			})
		}
	}
	f.onWrite.Store(&hook)
	_, err := st.DeliverInbox(ctx, groupDeliveries(js, o1, o2)[0])
	f.onWrite.Store(nil)
	t.Logf("stale runner's DeliverInbox: err=%v", err)
	assertTotals(t, ctx, other, 1, o1, o2)
}

// TestGroupReview_PlanOrphanedByLaneCountChange: lane 1's group is cut
// after its jobs advanced and before its plan is dropped (step 8 to 9).
// No job is pending, so SetFanoutLanes (herald mongo setup, every process
// stopped) changes the lanes to 1: no one finishes, or even looks at,
// fanout/1's plan. Lane 0 delivers a later post to the owner. When the
// lanes go back to 2, lane 1's first PendingLaneJobs finishes the old
// plan: the owner's mark is the later delivery's, so the old group's two
// entries are counted a second time.
//
// Fails on the branch: total 5 (and unread 5) for 3 entries.
func TestGroupReview_PlanOrphanedByLaneCountChange(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	for _, s := range []*mongostore.Store{st, other} {
		n, err := s.FanoutLanes(ctx, 2)
		require.NoError(t, err)
		require.Equal(t, 2, n)
	}
	var ox store.ID
	for i := 0; ; i++ {
		u := mkUser(t, st, fmt.Sprintf("o%d", i))
		if storage.OwnerLane(u, 2) == 1 {
			ox = u
			break
		}
	}
	a0, a1 := mkUser(t, st, "a0"), mkUser(t, st, "a1")
	_, js := postJobs(t, ctx, st, []store.ID{a0, a1})
	share := func(lane int, owners ...store.ID) []storage.Delivery {
		ds := groupDeliveries(js, owners...)
		for _, d := range ds {
			d.Job.Lane = lane
		}
		return ds
	}
	_, err := other.DeliverInboxes(ctx, share(0))
	require.NoError(t, err)
	leases := 0
	hook := func(coll string) {
		if coll == "leases" {
			if leases++; leases == 3 { // the plan's drop (after its store and its claims' record)
				f.anyWrite.Store(1)
			}
		}
	}
	f.onWrite.Store(&hook)
	_, err = st.DeliverInboxes(ctx, share(1, ox))
	f.onWrite.Store(nil)
	f.anyWrite.Store(0)
	require.Error(t, err, "killed before the plan's drop")
	n, c := inboxOf(t, ctx, other, ox)
	require.Equal(t, 2, n)
	require.Equal(t, 2, c.Total)

	// Every process stopped, no job pending: the lanes go to 1.
	require.NoError(t, other.SetFanoutLanes(ctx, 1))
	_, js2 := postJobs(t, ctx, other, []store.ID{a0})
	_, err = other.DeliverInbox(ctx, groupDeliveries(js2, ox)[0])
	require.NoError(t, err)
	n, c = inboxOf(t, ctx, other, ox)
	require.Equal(t, 3, n)
	require.Equal(t, 3, c.Total)

	// And back to 2: lane 1's new holder lists its jobs.
	require.NoError(t, other.SetFanoutLanes(ctx, 2))
	_, err = other.PendingLaneJobs(ctx, 1)
	require.NoError(t, err)
	assertInboxes(t, ctx, other, 3, ox)
}

// readHook, if set, is called with the collection's name before each Find
// made through a faulty client (fColl).
var readHook atomic.Pointer[func(*faults, string)]

func (c fColl) Find(ctx context.Context, filter interface{}, o ...*options.FindOptions) (lungo.ICursor, error) {
	if h := readHook.Load(); h != nil {
		(*h)(c.f, c.name)
	}
	return c.ICollection.Find(ctx, filter, o...)
}

// TestGroupReview_PollFinishesRunningGroupLate: the lane's poll
// (leadLanes → PendingLaneJobs, or enqueuePending → PendingJobs) runs
// beside the lane's worker in the same process. While the worker's group
// g1 is in flight, noGroupOn is cleared (storeGroup), so the poll reads
// g1's plan and starts finishing it too. If the worker finishes g1 and
// counts its next group g2 on the same owners before the poll reads the
// owners, the poll finds them without g1's mark, with a fresh iv, and
// counts g1's entries again. No stale lease holder is needed.
//
// Fails on the branch: each owner's total and unread are 6 for 4 entries.
func TestGroupReview_PollFinishesRunningGroupLate(t *testing.T) {
	ctx, worker, poll, other, fw, fp := twoStores(t)

	o1, o2, _, js := groupPosts(t, ctx, other, 4)

	// The poll starts at the worker's count of g1 (its plan is stored) and
	// is parked once it read g1's plan: it reads g1's owners next.
	release := parkPollAtCount(t, ctx, poll, fw, fp, nil)
	r, err := worker.DeliverInboxes(ctx, groupDeliveries(js[:2], o1, o2)) // g1
	require.NoError(t, err)
	require.Len(t, r, 2)
	r, err = worker.DeliverInboxes(ctx, groupDeliveries(js[2:], o1, o2)) // g2, same owners
	require.NoError(t, err)
	require.Len(t, r, 2)
	fw.onWrite.Store(nil)
	release()

	assertInboxes(t, ctx, other, 4, o1, o2)
}

// A group dies once its jobs are claimed (plan stored, claims made and
// recorded), and a process runs one of its jobs alone without having
// listed the lane's jobs first: the one-job chunk finds the claim,
// finishes the group from its plan (which ends the job), and changes
// nothing itself; every
// owner is counted once, and no claim is left.
func TestGroupReview_OneJobChunkFinishesClaimingGroup(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2, _, js := groupPosts(t, ctx, st, 2)
	f.anyWrite.Store(4) // the plan, the claims, their record; then the count fails
	_, err := st.DeliverInboxes(ctx, groupDeliveries(js, o1, o2))
	f.anyWrite.Store(0)
	require.Error(t, err, "killed at the count")
	for _, o := range []store.ID{o1, o2} {
		n, c := inboxOf(t, ctx, other, o)
		require.Zero(t, n)
		require.Zero(t, c.Total)
	}

	for _, d := range groupDeliveries(js, o1, o2) {
		// The group ended both jobs: the chunk finds its job gone.
		_, err := other.DeliverInbox(ctx, d)
		require.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "%v", err)
	}
	assertInboxes(t, ctx, other, 2, o1, o2)
	claimed, err := other.Database().Collection("messages").CountDocuments(ctx, bson.D{{Key: "j.gc", Value: bson.D{{Key: "$exists", Value: true}}}})
	require.NoError(t, err)
	assert.Zero(t, claimed, "claims left")
	pending, err := other.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "the jobs ended")
}
