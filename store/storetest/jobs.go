package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testJobs(t *testing.T, open OpenFunc) {
	forStoredLayouts(t, open, "ChunksApplyOnce", testChunksApplyOnce)
	forStoredLayouts(t, open, "DeletionCancelsDelivery", testDeletionCancelsDelivery)
	forStoredLayouts(t, open, "ActiveSince", testActiveSince)
	forStoredLayouts(t, open, "DeliverGroup", testDeliverGroup)
	forStoredLayouts(t, open, "InsertAndRetract", testInsertAndRetract)
	forStoredLayouts(t, open, "DeliveryPages", testDeliveryPages)
	forStoredLayouts(t, open, "RemoveAuthorEntries", testRemoveAuthorEntries)
	forStoredLayouts(t, open, "RemoveOwnerEntries", testRemoveOwnerEntries)
	forStoredLayouts(t, open, "RepostJob", testRepostJob)
	for _, l := range allLayouts {
		t.Run("Rebuild/"+layoutName(l), func(t *testing.T) { testRebuild(t, open, l) })
	}
	t.Run("PendingOrder", func(t *testing.T) { testPendingOrder(t, open) })
}

// testChunksApplyOnce delivers a message to four owners in two chunks: a
// chunk applies once, at the job's stored cursor, and the last ends the
// job.
func testChunksApplyOnce(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author := mustCreateUser(t, b, c)
	var owners []store.ID
	for range 4 {
		owners = append(owners, mustCreateUser(t, b, c).ID)
	}
	m := newMessage(c, author.ID, "hi")
	job := newDeliverJob(m, l)
	var first, second storage.Delivery
	var resumed *storage.Job // the job as stored after the first chunk
	runSteps(t,
		step{"a stored message has its delivery pending", func(t *testing.T) {
			require.NoError(t, b.CreateMessage(ctx, m, job))
			pending, err := b.PendingJobs(ctx)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			assert.Equal(t, job, pending[0])
		}},
		step{"the first chunk counts its owners", func(t *testing.T) {
			first = storage.Delivery{Job: job, Owners: owners[:2], At: c.Now(), Cursor: owners[1][:]}
			changes, err := b.DeliverInbox(ctx, first)
			require.NoError(t, err)
			assert.ElementsMatch(t, owners[:2], changeOwners(changes))
			for _, ch := range changes {
				assert.Equal(t, m.ID, ch.MessageID)
				assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, ch.Counts)
				assert.False(t, ch.NoCounts)
			}
		}},
		step{"the same chunk again changes nothing", func(t *testing.T) {
			// As a retry after a crash runs it.
			changes, err := b.DeliverInbox(ctx, first)
			require.NoError(t, err)
			assert.Empty(t, changes)
			assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, countsOf(t, b, owners[0], l))
			pending, err := b.PendingJobs(ctx)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			assert.Equal(t, owners[1][:], pending[0].Cursor, "progress is stored with the chunk")
			resumed = pending[0]
		}},
		step{"a chunk for another cursor than the stored one changes nothing", func(t *testing.T) {
			changes, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: owners[2:], At: c.Now(), Done: true})
			require.NoError(t, err)
			assert.Empty(t, changes)
			assert.Equal(t, 0, countsOf(t, b, owners[2], l).Total)
		}},
		step{"the last chunk ends the job", func(t *testing.T) {
			second = storage.Delivery{Job: resumed, Owners: owners[2:], At: c.Now(), Done: true}
			changes, err := b.DeliverInbox(ctx, second)
			require.NoError(t, err)
			assert.Len(t, changes, 2)
			pending, err := b.PendingJobs(ctx)
			require.NoError(t, err)
			assert.Empty(t, pending)
			for _, o := range owners {
				ids, counts := inboxOf(t, b, o, l)
				assert.Equal(t, idsOf(m), ids, "each owner got the message once")
				assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, counts)
			}
		}},
		step{"a chunk of a done job is not found", func(t *testing.T) {
			_, err := b.DeliverInbox(ctx, second)
			assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the job is done")
		}},
	)
}

// testDeletionCancelsDelivery deletes a message before its delivery runs.
func testDeletionCancelsDelivery(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := newMessage(c, author.ID, "oops")
	job := newDeliverJob(m, l)
	require.NoError(t, b.CreateMessage(ctx, m, job))
	require.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
	_, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: []store.ID{owner.ID}, At: c.Now(), Done: true})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	assert.Equal(t, 0, countsOf(t, b, owner.ID, l).Total)
	pending, err := b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// testActiveSince delivers to owners some of whom were last seen before
// the delivery's ActiveSince.
func testActiveSince(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author, idle, back, fresh := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	since := fresh.LastSeenAt // fresh was last seen exactly then
	_, err := b.MarkSeen(ctx, back.ID, c.Now(), time.Time{}, nil)
	require.NoError(t, err)
	m := newMessage(c, author.ID, "hi")
	job := newDeliverJob(m, l)
	require.NoError(t, b.CreateMessage(ctx, m, job))
	changes, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: []store.ID{idle.ID, back.ID, fresh.ID}, ActiveSince: since, At: c.Now(), Done: true})
	require.NoError(t, err)
	assert.ElementsMatch(t, []store.ID{back.ID, fresh.ID}, changeOwners(changes), "owners last seen before ActiveSince are skipped")
	assert.Equal(t, 0, countsOf(t, b, idle.ID, l).Total)
	assert.Equal(t, 1, countsOf(t, b, back.ID, l).Total)
	refs, next, err := b.FindDeliveries(ctx, m.ID, nil, 10)
	require.NoError(t, err)
	assert.Nil(t, next)
	assert.ElementsMatch(t, []store.ID{back.ID, fresh.ID}, refOwners(refs), "a skipped owner has no delivery")
}

// testInsertAndRetract inserts entries into an inbox, one of them also
// delivered there before, and retracts them.
func testInsertAndRetract(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author, owner, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	// One chunk delivered m1 to other and owner, owner last: an
	// insertion of m1 into owner's inbox must not lose other's record.
	m1 := post(t, b, c, l, author.ID, other.ID, owner.ID)
	m2, m3 := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
	var follow *storage.Job
	runSteps(t,
		step{"an unfollow removes the delivered entry", func(t *testing.T) {
			unfollow := newOwnerJob(c, storage.JobUnfollow, l, owner.ID, author.ID)
			require.NoError(t, b.StoreJob(ctx, unfollow))
			changes, err := b.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
			require.NoError(t, err)
			assert.Equal(t, idsOf(m1), changeIDs(changes))
		}},
		step{"an insertion adds each entry once and ends its job", func(t *testing.T) {
			follow = newOwnerJob(c, storage.JobFollow, l, owner.ID, author.ID)
			require.NoError(t, b.StoreJob(ctx, follow))
			changes, err := b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(m3, m1, m2, m2), At: c.Now()})
			require.NoError(t, err)
			assert.ElementsMatch(t, idsOf(m3, m1, m2), changeIDs(changes), "each entry once")
			ids, counts := inboxOf(t, b, owner.ID, l)
			assert.Equal(t, idsOf(m3, m2, m1), ids)
			assert.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, counts)
			pending, err := b.PendingJobs(ctx)
			require.NoError(t, err)
			assert.Empty(t, pending, "the insertion ends its job")
		}},
		step{"an insertion of an ended job is not found", func(t *testing.T) {
			changes, err := b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(m3), At: c.Now()})
			assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the job is gone")
			assert.Empty(t, changes)
			assert.Equal(t, 3, countsOf(t, b, owner.ID, l).Total)
		}},
		step{"a retraction finds delivered and inserted entries", func(t *testing.T) {
			changes := retract(t, b, m1, l)
			assert.ElementsMatch(t, []store.ID{other.ID, owner.ID}, changeOwners(changes), "delivered and inserted entries are both found")
			changes = retract(t, b, m2, l)
			assert.Equal(t, []store.ID{owner.ID}, changeOwners(changes), "an inserted entry is retracted")
			ids, counts := inboxOf(t, b, owner.ID, l)
			assert.Equal(t, idsOf(m3), ids)
			assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, counts)
			ids, counts = inboxOf(t, b, other.ID, l)
			assert.Empty(t, ids)
			assert.Equal(t, store.InboxCounts{}, counts)
			refs, _, err := b.FindDeliveries(ctx, m1.ID, nil, 10)
			require.NoError(t, err)
			assert.Empty(t, refs, "delivery records are dropped with the retraction")
		}},
	)
}

// testDeliveryPages delivers a message to five owners in two chunks and
// pages through its deliveries with limits that end pages inside a chunk's
// record, at its end, and past every record.
func testDeliveryPages(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author := mustCreateUser(t, b, c)
	var owners []store.ID
	for range 5 {
		owners = append(owners, mustCreateUser(t, b, c).ID)
	}
	m := newMessage(c, author.ID, "hi")
	job := newDeliverJob(m, l)
	require.NoError(t, b.CreateMessage(ctx, m, job))
	for i, chunk := range [][]store.ID{owners[:3], owners[3:]} {
		_, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: chunk, At: c.Now(), Cursor: chunk[len(chunk)-1][:], Done: i == 1})
		require.NoError(t, err)
		job.Cursor = chunk[len(chunk)-1][:]
	}
	for _, limit := range []int{1, 2, 3, 5, 6} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			var all []store.ID
			var cursor []byte
			for range 10 {
				refs, next, err := b.FindDeliveries(ctx, m.ID, cursor, limit)
				require.NoError(t, err)
				require.LessOrEqual(t, len(refs), limit)
				all = append(all, refOwners(refs)...)
				if next == nil {
					break
				}
				cursor = next
			}
			assert.ElementsMatch(t, owners, all, "limit %d", limit)
		})
	}
}

// testRemoveAuthorEntries unfollows one of two authors in an inbox, read
// in part.
func testRemoveAuthorEntries(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	a, o, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	a1 := post(t, b, c, l, a.ID, owner.ID)
	o1 := post(t, b, c, l, o.ID, owner.ID)
	a2 := post(t, b, c, l, a.ID, owner.ID)
	storeMessage(t, b, c, a.ID) // never in owner's inbox
	o2 := post(t, b, c, l, o.ID, owner.ID)
	_, err := b.MarkInboxRead(ctx, owner.ID, l, o1.ID)
	require.NoError(t, err)
	unfollow := newOwnerJob(c, storage.JobUnfollow, l, owner.ID, a.ID)
	require.NoError(t, b.StoreJob(ctx, unfollow))
	changes, err := b.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
	require.NoError(t, err)
	assert.ElementsMatch(t, idsOf(a1, a2), changeIDs(changes))
	for _, ch := range changes {
		assert.Equal(t, owner.ID, ch.Owner)
	}
	ids, counts := inboxOf(t, b, owner.ID, l)
	assert.Equal(t, idsOf(o2, o1), ids)
	assert.Equal(t, store.InboxCounts{Total: 2, Unread: 1, ReadMark: o1.ID}, counts)
	pending, err := b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "the removal ends its job")
	_, err = b.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
}

// testRemoveOwnerEntries runs a JobHideReposts's two chunks by hand on an
// inbox read in part: each removes only the listed entries that are
// there, with exact counts, and advances or ends the job; a chunk applied
// before changes nothing, and another owner's inbox is untouched.
func testRemoveOwnerEntries(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	a, owner, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	var ms []*store.Message
	for range 4 {
		ms = append(ms, post(t, b, c, l, a.ID, owner.ID, other.ID))
	}
	m1, m2, m3, m4 := ms[0], ms[1], ms[2], ms[3]
	_, err := b.MarkInboxRead(ctx, owner.ID, l, m2.ID)
	require.NoError(t, err)
	job := newOwnerJob(c, storage.JobHideReposts, l, owner.ID, a.ID)
	require.NoError(t, b.StoreJob(ctx, job))
	first := storage.OwnerRemoval{Job: job, MessageIDs: idsOf(m4, m1), Cursor: m3.ID[:]}
	runSteps(t,
		step{"a chunk removes the listed entries and advances the job", func(t *testing.T) {
			changes, err := b.RemoveOwnerEntries(ctx, first)
			require.NoError(t, err)
			assert.ElementsMatch(t, idsOf(m4, m1), changeIDs(changes))
			for _, ch := range changes {
				assert.Equal(t, owner.ID, ch.Owner)
			}
			ids, counts := inboxOf(t, b, owner.ID, l)
			assert.Equal(t, idsOf(m3, m2), ids)
			assert.Equal(t, store.InboxCounts{Total: 2, Unread: 1, ReadMark: m2.ID}, counts, "m1 was read, m4 not")
			pending, err := b.PendingJobs(ctx)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			assert.Equal(t, []byte(m3.ID[:]), pending[0].Cursor, "the job is at the chunk's cursor")
		}},
		step{"the chunk applied before changes nothing", func(t *testing.T) {
			changes, err := b.RemoveOwnerEntries(ctx, first)
			require.NoError(t, err)
			assert.Empty(t, changes)
			assert.Equal(t, store.InboxCounts{Total: 2, Unread: 1, ReadMark: m2.ID}, countsOf(t, b, owner.ID, l))
		}},
		step{"the last chunk counts only the entries there and ends the job", func(t *testing.T) {
			job.Cursor = first.Cursor
			changes, err := b.RemoveOwnerEntries(ctx, storage.OwnerRemoval{Job: job, MessageIDs: idsOf(m2, m1), Done: true})
			require.NoError(t, err)
			assert.Equal(t, idsOf(m2), changeIDs(changes), "m1 is gone already")
			ids, counts := inboxOf(t, b, owner.ID, l)
			assert.Equal(t, idsOf(m3), ids)
			assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1, ReadMark: m2.ID}, counts)
			pending, err := b.PendingJobs(ctx)
			require.NoError(t, err)
			assert.Empty(t, pending, "the last chunk ends the job")
			_, err = b.RemoveOwnerEntries(ctx, storage.OwnerRemoval{Job: job, MessageIDs: idsOf(m3), Done: true})
			assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the job is gone")
		}},
		step{"other owners are untouched", func(t *testing.T) {
			ids, counts := inboxOf(t, b, other.ID, l)
			assert.Equal(t, idsOf(m4, m3, m2, m1), ids)
			assert.Equal(t, store.InboxCounts{Total: 4, Unread: 4}, counts)
		}},
	)
}

func refOwners(refs []storage.InboxRef) []store.ID {
	return ids(refs, func(r storage.InboxRef) store.ID { return r.Owner })
}

// testRebuild: a user returning after being inactive gets a JobRebuild and
// a rebuilding flag, which ending the job clears.
func testRebuild(t *testing.T, open OpenFunc, l storage.Layout) {
	b, c := openBackend(t, open), newClock()
	a, u := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	rebuild := newRebuildJob(l, u.ID)

	returning, err := b.MarkSeen(ctx, u.ID, c.Now(), u.LastSeenAt, rebuild)
	require.NoError(t, err)
	assert.False(t, returning, "last seen at, not before, inactiveBefore")
	seen := c.Now()
	returning, err = b.MarkSeen(ctx, u.ID, seen, c.Now(), nil)
	require.NoError(t, err)
	assert.False(t, returning, "no rebuild given")
	assert.Equal(t, seen, mustUser(t, b, u.ID).LastSeenAt)
	pending, err := b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
	assert.False(t, countsOf(t, b, u.ID, l).Rebuilding)

	back := c.Now()
	returning, err = b.MarkSeen(ctx, u.ID, back, c.Now(), rebuild)
	require.NoError(t, err)
	assert.True(t, returning)
	assert.Equal(t, back, mustUser(t, b, u.ID).LastSeenAt)
	pending, err = b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []*storage.Job{rebuild}, pending)
	assert.True(t, countsOf(t, b, u.ID, l).Rebuilding)
	returning, err = b.MarkSeen(ctx, u.ID, c.Now(), back, rebuild)
	require.NoError(t, err)
	assert.False(t, returning, "seen again since")

	if l.Stores() {
		m := storeMessage(t, b, c, a.ID)
		changes, err := b.InsertInbox(ctx, storage.Insertion{Job: rebuild, Entries: entriesOf(m), At: c.Now()})
		require.NoError(t, err)
		require.Len(t, changes, 1)
		assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, changes[0].Counts)
		ids, counts := inboxOf(t, b, u.ID, l)
		assert.Equal(t, idsOf(m), ids)
		assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, counts, "no longer rebuilding")
	} else {
		require.NoError(t, b.FinishJob(ctx, rebuild))
		assert.Equal(t, store.InboxCounts{}, countsOf(t, b, u.ID, l), "no longer rebuilding")
	}
	pending, err = b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
	require.NoError(t, b.FinishJob(ctx, rebuild), "finishing a finished job")

	_, err = b.MarkSeen(ctx, store.NewID(c.Now()), c.Now(), c.Now(), newRebuildJob(l, store.NewID(c.Now())))
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
}

func testPendingOrder(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	l := storage.LayoutBuckets
	a, u, v := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	follow := newOwnerJob(c, storage.JobFollow, l, u.ID, a.ID)
	m := newMessage(c, a.ID, "hi")
	deliver := newDeliverJob(m, l)
	require.NoError(t, b.CreateMessage(ctx, m, deliver))
	unfollow := newOwnerJob(c, storage.JobUnfollow, l, v.ID, a.ID)
	// Stored out of ID order, listed in ID order.
	require.NoError(t, b.StoreJob(ctx, unfollow))
	require.NoError(t, b.StoreJob(ctx, follow))
	rebuild := newRebuildJob(l, u.ID)
	returning, err := b.MarkSeen(ctx, u.ID, c.Now(), c.Now(), rebuild)
	require.NoError(t, err)
	require.True(t, returning)

	pending, err := b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []*storage.Job{rebuild, follow, deliver, unfollow}, pending)

	require.NoError(t, b.FinishJob(ctx, follow))
	require.NoError(t, b.FinishJob(ctx, deliver), "a JobDeliver with no one to deliver to")
	pending, err = b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []*storage.Job{rebuild, unfollow}, pending)
	assert.True(t, countsOf(t, b, u.ID, l).Rebuilding)
	require.NoError(t, b.FinishJob(ctx, rebuild))
	assert.False(t, countsOf(t, b, u.ID, l).Rebuilding)

	// A retraction replaces the message's pending delivery.
	m2 := newMessage(c, a.ID, "gone")
	require.NoError(t, b.CreateMessage(ctx, m2, newDeliverJob(m2, l)))
	retraction := newRetractJob(m2, l)
	require.NoError(t, b.DeleteMessage(ctx, m2.ID, retraction))
	pending, err = b.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Equal(t, []*storage.Job{unfollow, retraction}, pending)

	// A job one of whose chunks is stored comes first, whatever its ID: a
	// rebuild or backfill run before it would take its message for one it
	// will still deliver, while its cursor is already past some owners.
	w := mustCreateUser(t, b, c)
	mustFollow(t, b, c, v.ID, a.ID)
	mustFollow(t, b, c, w.ID, a.ID)
	m3 := newMessage(c, a.ID, "half")
	half := newDeliverJob(m3, l)
	require.NoError(t, b.CreateMessage(ctx, m3, half))
	first := v.ID // v's id is below w's: the chunk delivers to v and ends past it
	_, err = b.DeliverInbox(ctx, storage.Delivery{Job: half, Owners: []store.ID{first}, At: c.Now(), Cursor: first[:]})
	require.NoError(t, err)
	rebuildW := newRebuildJob(l, w.ID)
	returning, err = b.MarkSeen(ctx, w.ID, c.Now(), c.Now(), rebuildW)
	require.NoError(t, err)
	require.True(t, returning)
	pending, err = b.PendingJobs(ctx)
	require.NoError(t, err)
	require.Len(t, pending, 4)
	assert.Equal(t, half.ID, pending[0].ID, "the half-done delivery first")
	assert.Equal(t, first[:], pending[0].Cursor)
	assert.Equal(t, []store.ID{unfollow.ID, retraction.ID, rebuildW.ID}, []store.ID{pending[1].ID, pending[2].ID, pending[3].ID}, "the others by ID")
}
