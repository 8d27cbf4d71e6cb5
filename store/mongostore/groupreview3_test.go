package mongostore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"

	"herald/store"
	"herald/store/storage"
)

// Third review of the group commit.

// TestGroupReview3_RetryAfterTransientErrorLosesEvents: a group's write
// fails once after its plan is stored (a transient error: a stepdown, a
// timeout), and the Service retries the same deliveries in the same
// process (fanout.deliverGroup → f.retry), as it does for any error but
// NOT_FOUND. The retry's finishGroup finishes the stored plan through
// finishStored, which throws the changes away, and then reads every job
// as gone (Done: j unset) and reports each NOT_FOUND. deliverGroup takes
// NOT_FOUND as "cancelled by a deletion": no EventAdded is published for
// any message of the group (up to 64 jobs), though every inbox got its
// entry. The one-job path's retry reports its changes again (control).
//
// Fails on the branch: every job's Err is NOT_FOUND, no changes.
func TestGroupReview3_RetryAfterTransientErrorLosesEvents(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2, _, js := groupPosts(t, ctx, st, 2)
	ds := groupDeliveries(js, o1, o2)
	failFirstWrite(f, "entries") // after the plan, the claims and the count
	_, err := st.DeliverInboxes(ctx, ds)
	f.onWrite.Store(nil)
	f.anyWrite.Store(0)
	require.Error(t, err, "the entries' write failed")

	// The Service's retry: the same deliveries, the same process.
	r, err := st.DeliverInboxes(ctx, ds)
	require.NoError(t, err)
	require.Len(t, r, 2)
	for i, d := range r {
		assert.NoError(t, d.Err, "job %d reported cancelled: its events are never published", i)
		assert.Len(t, d.Changes, 2, "job %d's changes", i)
	}
	assertTotals(t, ctx, other, 2, o1, o2)
}

// TestGroupReview3_RetryAfterTransientErrorOneJobControl: the same fault
// on the one-job path: its retry repeats the chunk from its stored plan
// and reports the owners it counted (passes).
func TestGroupReview3_RetryAfterTransientErrorOneJobControl(t *testing.T) {
	ctx, f, st, _ := reviewFixture(t)
	o1, o2, _, js := groupPosts(t, ctx, st, 1)
	d := groupDeliveries(js, o1, o2)[0]
	failFirstWrite(f, "entries")
	_, err := st.DeliverInbox(ctx, d)
	f.onWrite.Store(nil)
	f.anyWrite.Store(0)
	require.Error(t, err)
	changes, err := st.DeliverInbox(ctx, d)
	require.NoError(t, err)
	assert.Len(t, changes, 2)
}

// TestGroupReview3_RetractionSettlesStaleGroupAfterReadingRefs: process
// B holds the lane and has listed its jobs (finishGroup found no plan, so
// noGroupOn is set). Process A, a stale holder (its lease lapsed), stores
// its plan for jobs A and B, which B has not run yet, claims them,
// records the claims and dies before its count. Message A is deleted: its
// job becomes a retraction that keeps A's claim. B runs the retraction as
// fanout.retract does: FindDeliveries first (no record yet: nothing was
// written), then RemoveInboxEntries, whose startChunk finds the claim and
// finishes A's group (settleClaim → finishStored): o1 and o2 are counted
// for A and B, A's entries and records written. The retraction then goes
// on with the refs it read before (none) and no chunk plan (a group job
// stores none, so retractStored has no planned owners to look up by
// mark), and ends, deleting the records. A stays in both inboxes,
// counted, though deleted. On the one-job path a stale chunk's plan (j.p)
// stays on the retraction, which finds the counted owners by their mark.
//
// Fails on the branch: each owner holds 2 entries, total 2 (want 1).
func TestGroupReview3_RetractionSettlesStaleGroupAfterReadingRefs(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2, ms, js := groupPosts(t, ctx, st, 2)
	ds := groupDeliveries(js, o1, o2)
	// B has taken the lane and listed its jobs.
	_, err := other.PendingJobs(ctx)
	require.NoError(t, err)

	// A (stale) stores its plan, claims, records the claims, dies at its count.
	f.anyWrite.Store(4)
	_, err = st.DeliverInboxes(ctx, ds)
	f.anyWrite.Store(0)
	require.Error(t, err, "A killed at its count")

	// A is deleted; B runs its retraction as fanout.retract does.
	rj := &storage.Job{ID: ms[0].ID, Kind: storage.JobRetract, Layout: storage.LayoutEntries, MessageID: ms[0].ID, AuthorID: ms[0].AuthorID, CreatedAt: ms[0].CreatedAt}
	require.NoError(t, other.DeleteMessage(ctx, ms[0].ID, rj))
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 5)
		refs, next, err := other.FindDeliveries(ctx, rj.MessageID, rj.Cursor, 100)
		require.NoError(t, err)
		_, err = other.RemoveInboxEntries(ctx, storage.Removal{Job: rj, Refs: refs, Cursor: next, Done: next == nil})
		if err != nil { // f.retry: the step again, from its reads
			t.Logf("retraction chunk: %v; retried", err)
			continue
		}
		if next == nil {
			break
		}
		rj.Cursor = next
	}
	// B's lane goes on: B's own chunk finds its job done by A's group.
	_, err = other.DeliverInbox(ctx, groupDeliveries(js[1:2], o1, o2)[0])
	t.Logf("B's chunk: %v", err)

	for _, o := range []store.ID{o1, o2} {
		assert.False(t, hasEntry(t, ctx, other, o, ms[0].ID), "the deleted message left in the inbox")
	}
	assertInboxes(t, ctx, other, 1, o1, o2)
	pending, err := other.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// TestGroupReview3_PollMarksLaneFreeWhileStoring: one process. The lane's
// poll (PendingJobs → finishGroup) loads the lane's generation after the
// worker's storeGroup added to it and deleted noGroupOn, and reads the
// lease document before the worker's $set g is applied: it finds no plan,
// sees the generation unchanged, and stores noGroupOn = true while the
// worker's plan is stored. The worker's group then fails after its count
// (a transient error). From then on this process skips step 1 on the
// lane: PendingJobs (the lane's poll, or its re-take by the same holder
// within the lease, which keeps noGroupOn) lists the lane's jobs without
// finishing the plan, so a job listed first (a begun job's chunk, an
// owner job) writes an owner the plan counted, and the plan's repeat
// finds that owner without its mark and counts it again.
//
// Fails on the branch: the plan is still stored after PendingJobs, and o1's
// total is 4 for 3 entries.
func TestGroupReview3_PollMarksLaneFreeWhileStoring(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2 := mkUser(t, st, "o1"), mkUser(t, st, "o2")
	a0, a1, a2 := mkUser(t, st, "a0"), mkUser(t, st, "a1"), mkUser(t, st, "a2")
	_, js := postJobs(t, ctx, st, []store.ID{a0, a1})
	ds := groupDeliveries(js, o1, o2)
	_, err := st.PendingJobs(ctx) // the lane taken: no plan, noGroupOn set
	require.NoError(t, err)
	polled, failed := false, false
	hook := func(coll string) {
		switch {
		case coll == "leases" && !polled: // storeGroup: generation added, noGroupOn deleted, $set not applied yet
			polled = true
			_, err := st.PendingJobs(ctx) // the lane's poll, same process
			assert.NoError(t, err)
		case coll == "entries" && !failed: // after the count
			failed = true
			f.anyWrite.Store(1)
		}
	}
	f.onWrite.Store(&hook)
	_, err = st.DeliverInboxes(ctx, ds)
	f.onWrite.Store(nil)
	f.anyWrite.Store(0)
	require.Error(t, err, "the group failed after its count")

	// The lane's jobs listed again by this process: the plan must be finished first.
	_, err = st.PendingJobs(ctx)
	require.NoError(t, err)
	plans, err := other.Database().Collection("leases").CountDocuments(ctx, bson.D{{Key: "g", Value: bson.D{{Key: "$exists", Value: true}}}})
	require.NoError(t, err)
	assert.Zero(t, plans, "PendingJobs listed the lane's jobs with the plan still stored")

	// The lane's next write on o1 (a job listed before the group's), then the group again.
	_, jc := postJobs(t, ctx, st, []store.ID{a2})
	_, err = st.DeliverInbox(ctx, groupDeliveries(jc, o1)[0])
	require.NoError(t, err)
	for range 3 {
		if _, err = st.DeliverInboxes(ctx, ds); err == nil {
			break
		}
		t.Logf("retry: %v", err)
	}
	require.NoError(t, err)
	assertInboxes(t, ctx, other, 3, o1)
}

// TestGroupReview3_PollOvertakesWorkerLosesEvents: no fault, no stale
// holder. The lane's poll (PendingJobs → finishGroup, same process)
// reads the worker's plan (claims recorded) and runs it to the end while
// the worker's count is on its way: the worker's count misses on every
// owner (the mark is there), its re-read finds the claims gone, and it
// returns errGroupDone. The Service retries; the jobs are gone (Done), so
// every job is NOT_FOUND, which deliverGroup takes for a deletion: no
// EventAdded for the group. The poll's run threw its changes away.
//
// Fails on the branch: the first call errs, the retry reports NOT_FOUND.
func TestGroupReview3_PollOvertakesWorkerLosesEvents(t *testing.T) {
	ctx, f, worker, poll := reviewFixture(t)
	o1, o2, _, js := groupPosts(t, ctx, poll, 2)
	ds := groupDeliveries(js, o1, o2)
	ran := false
	hook := func(coll string) {
		if coll == "users" && !ran { // the worker's count: plan stored, claims recorded
			ran = true
			_, err := worker.PendingJobs(ctx) // the lane's poll: the same Store
			assert.NoError(t, err)
		}
	}
	f.onWrite.Store(&hook)
	r, err := worker.DeliverInboxes(ctx, ds)
	f.onWrite.Store(nil)
	if err != nil {
		t.Logf("worker: %v; the Service retries", err)
		r, err = worker.DeliverInboxes(ctx, ds)
	}
	require.NoError(t, err)
	require.Len(t, r, 2)
	for i, d := range r {
		assert.NoError(t, d.Err, "job %d reported cancelled: no events", i)
		assert.Len(t, d.Changes, 2, "job %d's changes", i)
	}
	assertTotals(t, ctx, poll, 2, o1, o2)
}
