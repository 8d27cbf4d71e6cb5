package mongostore_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	o1, o2 := mkUser(t, st, "o1"), mkUser(t, st, "o2")
	a0, a1 := mkUser(t, st, "a0"), mkUser(t, st, "a1")
	_, js := postJobs(t, ctx, st, []store.ID{a0, a1})
	var ds []storage.Delivery
	for _, j := range js {
		jj := *j
		ds = append(ds, storage.Delivery{Job: &jj, Owners: []store.ID{o1, o2}, At: tickClock(), Done: true})
	}
	failed := false
	hook := func(coll string) {
		if coll == "entries" && !failed { // after the plan, the claims and the count
			failed = true
			f.anyWrite.Store(1)
		}
	}
	f.onWrite.Store(&hook)
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
	for _, o := range []store.ID{o1, o2} {
		n, c := inboxOf(t, ctx, other, o)
		assert.Equal(t, 2, n)
		assert.Equal(t, 2, c.Total)
	}
}

// TestGroupReview3_RetryAfterTransientErrorOneJobControl: the same fault
// on the one-job path: its retry repeats the chunk from its stored plan
// and reports the owners it counted (passes).
func TestGroupReview3_RetryAfterTransientErrorOneJobControl(t *testing.T) {
	ctx, f, st, _ := reviewFixture(t)
	o1, o2 := mkUser(t, st, "o1"), mkUser(t, st, "o2")
	a0 := mkUser(t, st, "a0")
	_, js := postJobs(t, ctx, st, []store.ID{a0})
	jj := *js[0]
	d := storage.Delivery{Job: &jj, Owners: []store.ID{o1, o2}, At: tickClock(), Done: true}
	failed := false
	hook := func(coll string) {
		if coll == "entries" && !failed {
			failed = true
			f.anyWrite.Store(1)
		}
	}
	f.onWrite.Store(&hook)
	_, err := st.DeliverInbox(ctx, d)
	f.onWrite.Store(nil)
	f.anyWrite.Store(0)
	require.Error(t, err)
	changes, err := st.DeliverInbox(ctx, d)
	require.NoError(t, err)
	assert.Len(t, changes, 2)
}
