package mongostore_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// TestGroupFaults_KilledAtEachWrite stores a group of four small
// deliveries (one of them the first chunk of a two-chunk job) and kills
// the process at its k-th write, for every k until the group completes
// unharmed. Another process then takes the lane: it lists the pending
// jobs (which finishes the group cut short) and runs them to their end,
// grouped again, one at a time, or after one message is deleted. Every
// inbox then holds exactly the messages it should, counted once, and
// every record names exactly the owners reached.
func TestGroupFaults_KilledAtEachWrite(t *testing.T) {
	for _, lanes := range []int{1, 2} {
		for _, resume := range []string{"grouped", "alone", "deleted"} {
			groupKilledEach(t, lanes, resume)
		}
	}
}

func groupKilledEach(t *testing.T, lanes int, resume string) {
	for k := 1; ; k++ {
		hit := false
		t.Run(fmt.Sprintf("lanes%d/%s/write%d", lanes, resume, k), func(t *testing.T) { hit = groupKilledAt(t, lanes, k, resume) })
		if !hit || t.Failed() {
			require.Greater(t, k, 6, "a group writes at least its plan, count, entries, records, jobs and the plan's end")
			break
		}
	}
}

// groupKilledAt runs the test on lanes owner lanes: each lane stores its
// shares' group (o1's lane's is killed at its k-th write), and the other
// process resumes every lane.
func groupKilledAt(t *testing.T, lanes, k int, resume string) bool {
	ctx, f, st, other := reviewFixture(t)
	if lanes > 1 {
		n, err := st.FanoutLanes(ctx, lanes)
		require.NoError(t, err)
		require.Equal(t, lanes, n)
		n, err = other.FanoutLanes(ctx, lanes)
		require.NoError(t, err)
		require.Equal(t, lanes, n)
	}

	var authors [4]store.ID
	for i := range authors {
		authors[i] = mkUser(t, st, fmt.Sprintf("a%d", i))
	}
	o1, o2, o3 := mkUser(t, st, "o1"), mkUser(t, st, "o2"), mkUser(t, st, "o3")
	ms, jobs := postJobs(t, ctx, st, authors[:])
	owners := [][]store.ID{{o1, o2}, {o1, o2, o3}, {o1}, {o1, o3}}
	mine := func(lane int, os []store.ID) []store.ID {
		var out []store.ID
		for _, o := range os {
			if storage.OwnerLane(o, lanes) == lane {
				out = append(out, o)
			}
		}
		return out
	}
	first := func(i int, j *storage.Job) storage.Delivery {
		d := storage.Delivery{Job: j, Owners: mine(j.Lane, owners[i]), At: tickClock(), Done: true}
		if i == 2 { // a job of two chunks: the group holds its first
			d.Cursor, d.Done = o1[:], false
		}
		return d
	}
	hit := false
	killed := storage.OwnerLane(o1, lanes) // the lane of the owner every job reaches
	for lane := range lanes {
		var ds []storage.Delivery
		for i, j := range jobs {
			share := *j
			share.Lane = lane
			ds = append(ds, first(i, &share))
		}
		if lane == killed {
			f.anyWrite.Store(int32(k))
		}
		_, err := st.DeliverInboxes(ctx, ds)
		f.anyWrite.Store(0)
		if lane == killed {
			hit = err != nil
		} else {
			require.NoError(t, err)
		}
	}

	// Another process takes the lane over.
	deleted := -1
	if resume == "deleted" {
		deleted = 1
		m := ms[deleted]
		retract := &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: storage.LayoutEntries, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
		require.NoError(t, other.DeleteMessage(ctx, m.ID, retract))
	}
	index := map[store.ID]int{}
	for i, m := range ms {
		index[m.ID] = i
	}
	for round := 0; ; round++ {
		require.Less(t, round, 5, "the jobs end")
		var pending []*storage.Job
		for lane := range lanes {
			var js []*storage.Job
			var err error
			if lanes == 1 {
				js, err = other.PendingJobs(ctx)
			} else {
				js, err = other.PendingLaneJobs(ctx, lane)
			}
			require.NoError(t, err)
			pending = append(pending, js...)
		}
		if len(pending) == 0 {
			break
		}
		var next []storage.Delivery
		for _, j := range pending {
			switch j.Kind {
			case storage.JobDeliver:
				d := first(index[j.MessageID], j)
				if len(j.Cursor) > 0 {
					d = storage.Delivery{Job: j, At: tickClock(), Done: true}
				}
				next = append(next, d)
			case storage.JobRetract:
				all, _, err := other.FindDeliveries(ctx, j.MessageID, nil, 100)
				require.NoError(t, err)
				var refs []storage.InboxRef
				for _, r := range all {
					if storage.OwnerLane(r.Owner, lanes) == j.Lane {
						refs = append(refs, r)
					}
				}
				_, err = other.RemoveInboxEntries(ctx, storage.Removal{Job: j, Refs: refs, Done: true})
				require.NoError(t, err)
			default:
				t.Fatalf("unexpected job %v", j.Kind)
			}
		}
		if resume == "alone" {
			for _, d := range next {
				_, err := other.DeliverInbox(ctx, d)
				require.NoError(t, err)
			}
		} else {
			for lane := range lanes {
				var ds []storage.Delivery
				for _, d := range next {
					if d.Job.Lane == lane {
						ds = append(ds, d)
					}
				}
				r, err := other.DeliverInboxes(ctx, ds)
				require.NoError(t, err)
				require.Len(t, r, len(ds))
			}
		}
	}

	want := map[store.ID][]store.ID{}
	for i, os := range owners {
		if i == deleted {
			continue
		}
		for _, o := range os {
			want[o] = append(want[o], ms[i].ID)
		}
		refs, _, err := other.FindDeliveries(ctx, ms[i].ID, nil, 100)
		require.NoError(t, err)
		var got []store.ID
		for _, r := range refs {
			got = append(got, r.Owner)
		}
		assert.ElementsMatch(t, os, got, "the records of message %d", i)
	}
	for _, o := range []store.ID{o1, o2, o3} {
		items, counts, err := other.ReadInbox(ctx, storage.InboxFilter{Owner: o, Layout: storage.LayoutEntries, Range: store.Backward(store.NilID, 100)})
		require.NoError(t, err)
		var got []store.ID
		for _, it := range items {
			got = append(got, it.MessageID)
		}
		assert.ElementsMatch(t, want[o], got, "the inbox of %s", o)
		assert.Equal(t, len(want[o]), counts.Total, "counted once")
		assert.Equal(t, len(want[o]), counts.Unread)
	}
	return hit
}

// TestGroupFaults_MarkReadBeforeCount marks an owner's inbox read after
// a group read its inbox fields and before it counts: the owner's count
// step misses (its version moved), is read again and counted once, with
// unread counting only the entries above the new mark.
func TestGroupFaults_MarkReadBeforeCount(t *testing.T) {
	ctx, f, st, other := reviewFixture(t)
	o1, o2 := mkUser(t, st, "o1"), mkUser(t, st, "o2")
	var ds []storage.Delivery
	var ms []*store.Message
	for i := range 3 {
		a := mkUser(t, st, fmt.Sprintf("a%d", i))
		now := tickClock()
		m := &store.Message{ID: store.NewID(now), AuthorID: a, Text: "hi", Kind: store.KindPost, CreatedAt: now}
		j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutEntries, MessageID: m.ID, AuthorID: a, CreatedAt: now}
		require.NoError(t, st.CreateMessage(ctx, m, j))
		ms = append(ms, m)
		ds = append(ds, storage.Delivery{Job: j, Owners: []store.ID{o1, o2}, At: tickClock(), Done: true})
	}
	var once sync.Once
	hook := func(coll string) {
		if coll == "leases" { // the group's plan: its owners were read
			once.Do(func() {
				_, err := other.MarkInboxRead(ctx, o1, storage.LayoutEntries, ms[0].ID)
				assert.NoError(t, err)
			})
		}
	}
	f.onWrite.Store(&hook)
	r, err := st.DeliverInboxes(ctx, ds)
	f.onWrite.Store(nil)
	require.NoError(t, err)
	require.Len(t, r, 3)
	for _, want := range []struct {
		owner         store.ID
		total, unread int
	}{{o1, 3, 2}, {o2, 3, 3}} {
		items, c, err := other.ReadInbox(ctx, storage.InboxFilter{Owner: want.owner, Layout: storage.LayoutEntries, Range: store.Backward(store.NilID, 100)})
		require.NoError(t, err)
		assert.Len(t, items, 3)
		assert.Equal(t, want.total, c.Total)
		assert.Equal(t, want.unread, c.Unread)
	}
	assert.Equal(t, 3, r[2].Changes[0].Counts.Total, "the last chunk's counts hold the group")
	pending, err := other.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
}
