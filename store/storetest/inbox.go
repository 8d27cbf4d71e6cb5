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

func testInbox(t *testing.T, open OpenFunc) {
	forStoredLayouts(t, open, "Paging", testInboxPaging)
	forStoredLayouts(t, open, "OutOfOrder", testInboxOutOfOrder)
	forStoredLayouts(t, open, "Counts", testInboxCounts)
	forStoredLayouts(t, open, "PageAndCountsAgree", testPageAndCountsAgree)
	t.Run("EmptyInbox", func(t *testing.T) { testEmptyInbox(t, open) })
	t.Run("UnstoredLayouts", func(t *testing.T) {
		for _, l := range []storage.Layout{storage.LayoutNone, storage.LayoutCache} {
			t.Run(layoutName(l), func(t *testing.T) { testUnstoredLayout(t, open, l) })
		}
	})
	t.Run("Cache", func(t *testing.T) { testInboxCache(t, open) })
	t.Run("CacheDelivery", func(t *testing.T) { testCacheDelivery(t, open) })
}

// testInboxPaging grows an inbox past one and two pages of 50, reading its
// first page and paging through it at each size.
func testInboxPaging(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	var msgs []store.ID
	var steps []step
	for _, n := range []int{49, 50, 51, 100, 101} {
		steps = append(steps, step{fmt.Sprintf("%d entries", n), func(t *testing.T) {
			for len(msgs) < n {
				msgs = append(msgs, post(t, b, c, l, author.ID, owner.ID).ID)
			}
			items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner.ID, Layout: l, Range: store.Forward(store.NilID, 50)})
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Total: n, Unread: n}, counts, "%d entries", n)
			require.Len(t, items, min(n, 50))
			assert.Equal(t, msgs[n-1], items[0].MessageID, "newest first")
			assert.Equal(t, author.ID, items[0].AuthorID)
			for _, size := range []int{50, 7} {
				assert.Equal(t, reversed(msgs), pageAll(t, b, owner.ID, l, size), "%d entries in pages of %d", n, size)
			}
		}})
	}
	runSteps(t, steps...)
}

// testInboxOutOfOrder inserts entries older than one delivered, in any
// order: an inbox reads by message, not by arrival.
func testInboxOutOfOrder(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m1, m2, m3 := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
	m4 := post(t, b, c, l, author.ID, owner.ID)
	m5 := storeMessage(t, b, c, author.ID)
	var at time.Time
	runSteps(t,
		step{"a backfill brings older messages in any order", func(t *testing.T) {
			follow := newOwnerJob(c, storage.JobFollow, l, owner.ID, author.ID)
			require.NoError(t, b.StoreJob(ctx, follow))
			at = c.Now()
			changes, err := b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(m1, m5, m3), At: at})
			require.NoError(t, err)
			assert.ElementsMatch(t, idsOf(m1, m5, m3), changeIDs(changes))
			for _, ch := range changes {
				assert.Equal(t, owner.ID, ch.Owner)
			}
			follow = newOwnerJob(c, storage.JobFollow, l, owner.ID, author.ID)
			require.NoError(t, b.StoreJob(ctx, follow))
			_, err = b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(m2), At: c.Now()})
			require.NoError(t, err)
		}},
		step{"pages are ordered by message", func(t *testing.T) {
			want := idsOf(m5, m4, m3, m2, m1)
			items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner.ID, Layout: l, Range: store.Forward(store.NilID, 10)})
			require.NoError(t, err)
			assert.Equal(t, want, itemIDs(items), "ordered by message, not by arrival")
			assert.Equal(t, store.InboxCounts{Total: 5, Unread: 5}, counts)
			assert.Equal(t, store.InboxItem{InboxEntry: entryOf(m3), DeliveredAt: at}, items[2])
			for _, size := range []int{1, 2, 3} {
				assert.Equal(t, want, pageAll(t, b, owner.ID, l, size), "pages of %d", size)
			}
			below, _, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner.ID, Layout: l, Range: store.Forward(m4.ID, 2)})
			require.NoError(t, err)
			assert.Equal(t, idsOf(m3, m2), itemIDs(below))
		}},
	)
}

// testInboxCounts follows one inbox's total, unread count and read mark
// through deliveries, marks, insertions, retractions and an unfollow.
func testInboxCounts(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	a, o, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	var a1, a2, a3, b1, b2 *store.Message
	runSteps(t,
		step{"deliveries count as unread", func(t *testing.T) {
			a1 = post(t, b, c, l, a.ID, owner.ID)
			b1 = storeMessage(t, b, c, o.ID)
			a2 = post(t, b, c, l, a.ID, owner.ID)
			assert.Equal(t, store.InboxCounts{Total: 2, Unread: 2}, countsOf(t, b, owner.ID, l))
		}},
		step{"a mark reads what is below it and never moves back", func(t *testing.T) {
			counts, err := b.MarkInboxRead(ctx, owner.ID, l, a2.ID)
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Total: 2, Unread: 0, ReadMark: a2.ID}, counts)
			counts, err = b.MarkInboxRead(ctx, owner.ID, l, a1.ID)
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Total: 2, Unread: 0, ReadMark: a2.ID}, counts, "an older mark does not move the mark back")
		}},
		step{"an entry older than the mark arrives read", func(t *testing.T) {
			follow := newOwnerJob(c, storage.JobFollow, l, owner.ID, o.ID)
			require.NoError(t, b.StoreJob(ctx, follow))
			changes, err := b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(b1), At: c.Now()})
			require.NoError(t, err)
			require.Len(t, changes, 1)
			assert.Equal(t, store.InboxCounts{Total: 3, Unread: 0, ReadMark: a2.ID}, changes[0].Counts)
			assert.False(t, changes[0].NoCounts)
		}},
		step{"entries above the mark arrive unread and once each", func(t *testing.T) {
			a3 = post(t, b, c, l, a.ID, owner.ID)
			assert.Equal(t, store.InboxCounts{Total: 4, Unread: 1, ReadMark: a2.ID}, countsOf(t, b, owner.ID, l))
			b2 = storeMessage(t, b, c, o.ID)
			follow := newOwnerJob(c, storage.JobFollow, l, owner.ID, o.ID)
			require.NoError(t, b.StoreJob(ctx, follow))
			changes, err := b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(b2, b1), At: c.Now()})
			require.NoError(t, err)
			assert.Equal(t, idsOf(b2), changeIDs(changes), "an entry already there is not inserted again")
			assert.Equal(t, store.InboxCounts{Total: 5, Unread: 2, ReadMark: a2.ID}, changes[0].Counts)
			ids, counts := inboxOf(t, b, owner.ID, l)
			assert.Equal(t, idsOf(b2, a3, a2, b1, a1), ids)
			assert.Equal(t, store.InboxCounts{Total: 5, Unread: 2, ReadMark: a2.ID}, counts)
		}},
		step{"a retraction counts out an unread or a read entry", func(t *testing.T) {
			changes := retract(t, b, a3, l)
			require.Len(t, changes, 1)
			assert.Equal(t, store.InboxCounts{Total: 4, Unread: 1, ReadMark: a2.ID}, changes[0].Counts, "retracting an unread entry")
			changes = retract(t, b, a1, l)
			require.Len(t, changes, 1)
			assert.Equal(t, store.InboxCounts{Total: 3, Unread: 1, ReadMark: a2.ID}, changes[0].Counts, "retracting a read entry")
		}},
		step{"an unfollow counts out every entry of the author", func(t *testing.T) {
			unfollow := newOwnerJob(c, storage.JobUnfollow, l, owner.ID, o.ID)
			require.NoError(t, b.StoreJob(ctx, unfollow))
			changes, err := b.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
			require.NoError(t, err)
			assert.ElementsMatch(t, idsOf(b2, b1), changeIDs(changes))
			ids, counts := inboxOf(t, b, owner.ID, l)
			assert.Equal(t, idsOf(a2), ids)
			assert.Equal(t, store.InboxCounts{Total: 1, Unread: 0, ReadMark: a2.ID}, counts)
		}},
		// Moving the mark back below entries is refused; forward recounts.
		step{"a newer mark recounts the unread", func(t *testing.T) {
			a4, a5 := post(t, b, c, l, a.ID, owner.ID), post(t, b, c, l, a.ID, owner.ID)
			assert.Equal(t, store.InboxCounts{Total: 3, Unread: 2, ReadMark: a2.ID}, countsOf(t, b, owner.ID, l))
			counts, err := b.MarkInboxRead(ctx, owner.ID, l, a4.ID)
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Total: 3, Unread: 1, ReadMark: a4.ID}, counts)
			counts, err = b.MarkInboxRead(ctx, owner.ID, l, a5.ID)
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Total: 3, Unread: 0, ReadMark: a5.ID}, counts)
			assert.Equal(t, counts, countsOf(t, b, owner.ID, l))
		}},
	)
}

// testPageAndCountsAgree: a page and its counts are read together: while
// deliveries land, a reader never sees more items than the total beside
// them.
func testPageAndCountsAgree(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
	author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	const posts = 30
	done := make(chan error, 1)
	go func() {
		// No require here: FailNow must run on the test's goroutine.
		for range posts {
			m := newMessage(c, author.ID, "hello")
			job := newDeliverJob(m, l)
			if err := b.CreateMessage(ctx, m, job); err != nil {
				done <- err
				return
			}
			if _, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: []store.ID{owner.ID}, At: c.Now(), Done: true}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	var reads, bad int
	var firstBad string
	for finished := false; !finished; reads++ {
		select {
		case err := <-done:
			require.NoError(t, err)
			finished = true
		default:
		}
		items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner.ID, Layout: l, Range: store.Forward(store.NilID, posts+1)})
		if err != nil || len(items) > counts.Total {
			if bad++; firstBad == "" {
				firstBad = fmt.Sprintf("read %d: %d items, total %d, err %v", reads, len(items), counts.Total, err)
			}
		}
	}
	assert.Zero(t, bad, "reads with more items than their inbox's total, of %d; first: %s", reads, firstBad)
	ids, counts := inboxOf(t, b, owner.ID, l)
	assert.Len(t, ids, posts)
	assert.Equal(t, posts, counts.Total)
}

// testEmptyInbox reads a new user's inbox in every layout.
func testEmptyInbox(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	u := mustCreateUser(t, b, c)
	for _, l := range allLayouts {
		t.Run(layoutName(l), func(t *testing.T) {
			items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: u.ID, Layout: l, Range: store.Forward(store.NilID, 50)})
			require.NoError(t, err)
			assert.Empty(t, items, layoutName(l))
			assert.Equal(t, store.InboxCounts{}, counts, layoutName(l))
		})
	}
}

// testUnstoredLayout: LayoutNone and LayoutCache keep only the read mark
// (and the rebuilding flag): ReadInbox has no entries and no totals.
func testUnstoredLayout(t *testing.T, open OpenFunc, l storage.Layout) {
	b, c := openBackend(t, open), newClock()
	a, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m1, m2 := storeMessage(t, b, c, a.ID), storeMessage(t, b, c, a.ID)
	counts, err := b.MarkInboxRead(ctx, owner.ID, l, m2.ID)
	require.NoError(t, err)
	assert.Equal(t, store.InboxCounts{ReadMark: m2.ID}, counts)
	counts, err = b.MarkInboxRead(ctx, owner.ID, l, m1.ID)
	require.NoError(t, err)
	assert.Equal(t, store.InboxCounts{ReadMark: m2.ID}, counts)
	items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner.ID, Layout: l, Range: store.Forward(store.NilID, 50)})
	require.NoError(t, err)
	assert.Empty(t, items)
	assert.Equal(t, store.InboxCounts{ReadMark: m2.ID}, counts)
}
