package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// storedLayouts are the layouts whose entries and counts a backend keeps.
var storedLayouts = []storage.Layout{storage.LayoutEntries, storage.LayoutBuckets}

func layoutName(l storage.Layout) string {
	switch l {
	case storage.LayoutNone:
		return "None"
	case storage.LayoutEntries:
		return "Entries"
	case storage.LayoutBuckets:
		return "Buckets"
	case storage.LayoutCache:
		return "Cache"
	}
	return fmt.Sprintf("Layout%d", l)
}

// forStoredLayouts runs test once per stored layout, each on a fresh backend.
func forStoredLayouts(t *testing.T, open OpenFunc, name string, test func(t *testing.T, b storage.Backend, c *clock, l storage.Layout)) {
	for _, l := range storedLayouts {
		t.Run(name+"/"+layoutName(l), func(t *testing.T) {
			b, c := openBackend(t, open), newClock()
			test(t, b, c, l)
		})
	}
}

func newDeliverJob(m *store.Message, l storage.Layout) *storage.Job {
	return &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: l, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
}

func newRetractJob(m *store.Message, l storage.Layout) *storage.Job {
	return &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: l, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
}

// newOwnerJob returns a JobFollow or JobUnfollow of owner and author, with
// an ID of its own.
func newOwnerJob(c *clock, kind storage.JobKind, l storage.Layout, owner, author store.ID) *storage.Job {
	return &storage.Job{ID: store.NewID(c.Now()), Kind: kind, Layout: l, OwnerID: owner, AuthorID: author}
}

func newRebuildJob(l storage.Layout, owner store.ID) *storage.Job {
	return &storage.Job{ID: owner, Kind: storage.JobRebuild, Layout: l, OwnerID: owner}
}

// post stores a message by author with its JobDeliver and delivers it to
// owners in one chunk, ending the job.
func post(t *testing.T, b storage.Backend, c *clock, l storage.Layout, author store.ID, owners ...store.ID) *store.Message {
	t.Helper()
	m := newMessage(c, author, "hello")
	job := newDeliverJob(m, l)
	require.NoError(t, b.CreateMessage(ctx, m, job))
	_, err := b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: owners, At: c.Now(), Done: true})
	require.NoError(t, err)
	return m
}

// storeMessage stores a message by author that no job delivers: what a
// follow or a rebuild brings in.
func storeMessage(t *testing.T, b storage.Backend, c *clock, author store.ID) *store.Message {
	t.Helper()
	m := newMessage(c, author, "stored")
	require.NoError(t, b.CreateMessage(ctx, m, nil))
	return m
}

func entryOf(m *store.Message) store.InboxEntry {
	return store.InboxEntry{MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
}

func entriesOf(msgs ...*store.Message) []store.InboxEntry {
	out := make([]store.InboxEntry, len(msgs))
	for i, m := range msgs {
		out[i] = entryOf(m)
	}
	return out
}

// ids maps xs to the ids id gives, in order.
func ids[T any](xs []T, id func(T) store.ID) []store.ID {
	out := make([]store.ID, len(xs))
	for i, x := range xs {
		out[i] = id(x)
	}
	return out
}

func idsOf(msgs ...*store.Message) []store.ID {
	return ids(msgs, func(m *store.Message) store.ID { return m.ID })
}

func itemIDs(items []store.InboxItem) []store.ID {
	return ids(items, func(it store.InboxItem) store.ID { return it.MessageID })
}

func changeIDs(changes []storage.InboxChange) []store.ID {
	return ids(changes, func(c storage.InboxChange) store.ID { return c.MessageID })
}

func changeOwners(changes []storage.InboxChange) []store.ID {
	return ids(changes, func(c storage.InboxChange) store.ID { return c.Owner })
}

// inboxOf returns owner's whole inbox (up to 1000 entries) and its counts.
func inboxOf(t *testing.T, b storage.Backend, owner store.ID, l storage.Layout) ([]store.ID, store.InboxCounts) {
	t.Helper()
	items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: l, Range: store.Forward(store.NilID, 1000)})
	require.NoError(t, err)
	return itemIDs(items), counts
}

func countsOf(t *testing.T, b storage.Backend, owner store.ID, l storage.Layout) store.InboxCounts {
	t.Helper()
	_, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: l})
	require.NoError(t, err)
	return counts
}

// pageAll pages through an inbox with Before and the given page size.
func pageAll(t *testing.T, b storage.Backend, owner store.ID, l storage.Layout, size int) []store.ID {
	t.Helper()
	var all []store.ID
	before := store.NilID
	for {
		items, _, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: l, Range: store.Forward(before, size)})
		require.NoError(t, err)
		require.LessOrEqual(t, len(items), size)
		all = append(all, itemIDs(items)...)
		if len(items) < size {
			return all
		}
		before = items[len(items)-1].MessageID
	}
}

// retract deletes m and runs its whole JobRetract in chunks of two refs.
func retract(t *testing.T, b storage.Backend, m *store.Message, l storage.Layout) []storage.InboxChange {
	t.Helper()
	job := newRetractJob(m, l)
	require.NoError(t, b.DeleteMessage(ctx, m.ID, job))
	var changes []storage.InboxChange
	for {
		refs, next, err := b.FindDeliveries(ctx, m.ID, job.Cursor, 2)
		require.NoError(t, err)
		require.LessOrEqual(t, len(refs), 2)
		got, err := b.RemoveInboxEntries(ctx, storage.Removal{Job: job, Refs: refs, Cursor: next, Done: next == nil})
		require.NoError(t, err)
		changes = append(changes, got...)
		if next == nil {
			return changes
		}
		job.Cursor = next
	}
}

func reversed(ids []store.ID) []store.ID {
	out := slices.Clone(ids)
	slices.Reverse(out)
	return out
}

func testInbox(t *testing.T, open OpenFunc) {
	forStoredLayouts(t, open, "Paging", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
		author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		var msgs []store.ID
		for _, n := range []int{49, 50, 51, 100, 101} {
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
		}
	})
	forStoredLayouts(t, open, "OutOfOrder", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
		author, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		m1, m2, m3 := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
		m4 := post(t, b, c, l, author.ID, owner.ID)
		m5 := storeMessage(t, b, c, author.ID)
		// A backfill brings older messages after a newer one, in any order.
		follow := newOwnerJob(c, storage.JobFollow, l, owner.ID, author.ID)
		require.NoError(t, b.StoreJob(ctx, follow))
		at := c.Now()
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
	})
	forStoredLayouts(t, open, "Counts", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
		a, o, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		a1 := post(t, b, c, l, a.ID, owner.ID)
		b1 := storeMessage(t, b, c, o.ID)
		a2 := post(t, b, c, l, a.ID, owner.ID)
		assert.Equal(t, store.InboxCounts{Total: 2, Unread: 2}, countsOf(t, b, owner.ID, l))

		counts, err := b.MarkInboxRead(ctx, owner.ID, l, a2.ID)
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Total: 2, Unread: 0, ReadMark: a2.ID}, counts)
		counts, err = b.MarkInboxRead(ctx, owner.ID, l, a1.ID)
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Total: 2, Unread: 0, ReadMark: a2.ID}, counts, "an older mark does not move the mark back")

		// An entry older than the mark arrives read.
		follow := newOwnerJob(c, storage.JobFollow, l, owner.ID, o.ID)
		require.NoError(t, b.StoreJob(ctx, follow))
		changes, err := b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(b1), At: c.Now()})
		require.NoError(t, err)
		require.Len(t, changes, 1)
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 0, ReadMark: a2.ID}, changes[0].Counts)
		assert.False(t, changes[0].NoCounts)

		a3 := post(t, b, c, l, a.ID, owner.ID)
		assert.Equal(t, store.InboxCounts{Total: 4, Unread: 1, ReadMark: a2.ID}, countsOf(t, b, owner.ID, l))
		b2 := storeMessage(t, b, c, o.ID)
		follow = newOwnerJob(c, storage.JobFollow, l, owner.ID, o.ID)
		require.NoError(t, b.StoreJob(ctx, follow))
		changes, err = b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(b2, b1), At: c.Now()})
		require.NoError(t, err)
		assert.Equal(t, idsOf(b2), changeIDs(changes), "an entry already there is not inserted again")
		assert.Equal(t, store.InboxCounts{Total: 5, Unread: 2, ReadMark: a2.ID}, changes[0].Counts)
		ids, counts := inboxOf(t, b, owner.ID, l)
		assert.Equal(t, idsOf(b2, a3, a2, b1, a1), ids)
		assert.Equal(t, store.InboxCounts{Total: 5, Unread: 2, ReadMark: a2.ID}, counts)

		changes = retract(t, b, a3, l)
		require.Len(t, changes, 1)
		assert.Equal(t, store.InboxCounts{Total: 4, Unread: 1, ReadMark: a2.ID}, changes[0].Counts, "retracting an unread entry")
		changes = retract(t, b, a1, l)
		require.Len(t, changes, 1)
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 1, ReadMark: a2.ID}, changes[0].Counts, "retracting a read entry")

		unfollow := newOwnerJob(c, storage.JobUnfollow, l, owner.ID, o.ID)
		require.NoError(t, b.StoreJob(ctx, unfollow))
		changes, err = b.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
		require.NoError(t, err)
		assert.ElementsMatch(t, idsOf(b2, b1), changeIDs(changes))
		ids, counts = inboxOf(t, b, owner.ID, l)
		assert.Equal(t, idsOf(a2), ids)
		assert.Equal(t, store.InboxCounts{Total: 1, Unread: 0, ReadMark: a2.ID}, counts)

		// Moving the mark back below entries is refused; forward recounts.
		a4, a5 := post(t, b, c, l, a.ID, owner.ID), post(t, b, c, l, a.ID, owner.ID)
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 2, ReadMark: a2.ID}, countsOf(t, b, owner.ID, l))
		counts, err = b.MarkInboxRead(ctx, owner.ID, l, a4.ID)
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 1, ReadMark: a4.ID}, counts)
		counts, err = b.MarkInboxRead(ctx, owner.ID, l, a5.ID)
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 0, ReadMark: a5.ID}, counts)
		assert.Equal(t, counts, countsOf(t, b, owner.ID, l))
	})
	// A page and its counts are read together: while deliveries land, a
	// reader never sees more items than the total beside them.
	forStoredLayouts(t, open, "PageAndCountsAgree", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
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
	})
	t.Run("EmptyInbox", func(t *testing.T) {
		b, c := openBackend(t, open), newClock()
		u := mustCreateUser(t, b, c)
		for _, l := range []storage.Layout{storage.LayoutNone, storage.LayoutEntries, storage.LayoutBuckets, storage.LayoutCache} {
			items, counts, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: u.ID, Layout: l, Range: store.Forward(store.NilID, 50)})
			require.NoError(t, err)
			assert.Empty(t, items, layoutName(l))
			assert.Equal(t, store.InboxCounts{}, counts, layoutName(l))
		}
	})
	t.Run("UnstoredLayouts", func(t *testing.T) {
		// LayoutNone and LayoutCache keep only the read mark (and the
		// rebuilding flag): ReadInbox has no entries and no totals.
		for _, l := range []storage.Layout{storage.LayoutNone, storage.LayoutCache} {
			t.Run(layoutName(l), func(t *testing.T) {
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
			})
		}
	})
	t.Run("Cache", func(t *testing.T) { testInboxCache(t, open) })
	t.Run("CacheDelivery", func(t *testing.T) { testCacheDelivery(t, open) })
}

func cacheItems(msgs ...*store.Message) []store.InboxItem {
	out := make([]store.InboxItem, len(msgs))
	for i, m := range msgs {
		out[i] = store.InboxItem{InboxEntry: entryOf(m), DeliveredAt: m.CreatedAt}
	}
	return out
}

func testInboxCache(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	a, owner := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	var m []*store.Message
	for range 5 {
		m = append(m, storeMessage(t, b, c, a.ID))
	}
	now := c.Now()
	read := func(at time.Time) *storage.InboxCache {
		t.Helper()
		got, err := b.ReadInboxCache(ctx, owner.ID, at)
		require.NoError(t, err)
		return got
	}
	assert.Nil(t, read(now), "no cache yet")

	// Created empty while it is being filled, then filled: complete.
	expires := now.Add(time.Hour)
	require.NoError(t, b.PutInboxCache(ctx, &storage.InboxCache{Owner: owner.ID, Expires: expires}, 3))
	got := read(now)
	require.NotNil(t, got)
	assert.Empty(t, got.Items)
	assert.False(t, got.Complete)
	require.NoError(t, b.PutInboxCache(ctx, &storage.InboxCache{Owner: owner.ID, Items: cacheItems(m[0], m[1]), Complete: true, Expires: expires}, 3))
	got = read(now)
	require.NotNil(t, got)
	assert.Equal(t, &storage.InboxCache{Owner: owner.ID, Items: cacheItems(m[1], m[0]), Complete: true, Expires: expires}, got, "items newest first")

	// Merge: an entry already there is kept once.
	require.NoError(t, b.PutInboxCache(ctx, &storage.InboxCache{Owner: owner.ID, Items: cacheItems(m[2], m[1]), Complete: true, Expires: expires}, 3))
	got = read(now)
	assert.Equal(t, idsOf(m[2], m[1], m[0]), itemIDs(got.Items))
	assert.True(t, got.Complete)

	// A put with no items only extends the cache's life.
	later := expires.Add(time.Hour)
	require.NoError(t, b.PutInboxCache(ctx, &storage.InboxCache{Owner: owner.ID, Expires: later}, 3))
	got = read(now)
	assert.Equal(t, idsOf(m[2], m[1], m[0]), itemIDs(got.Items))
	assert.True(t, got.Complete)
	assert.Equal(t, later, got.Expires)

	// Over capacity: the newest are kept and the cache is no longer complete.
	require.NoError(t, b.PutInboxCache(ctx, &storage.InboxCache{Owner: owner.ID, Items: cacheItems(m[4], m[3]), Complete: true, Expires: later}, 3))
	got = read(now)
	assert.Equal(t, idsOf(m[4], m[3], m[2]), itemIDs(got.Items))
	assert.False(t, got.Complete)
	assert.Equal(t, cacheItems(m[4], m[3], m[2]), got.Items)

	assert.NotNil(t, read(later), "live until its expiry")
	assert.Nil(t, read(later.Add(time.Millisecond)), "expired")

	require.NoError(t, b.DropInboxCache(ctx, owner.ID))
	assert.Nil(t, read(now))
	require.NoError(t, b.DropInboxCache(ctx, owner.ID), "dropping a missing cache")
}

func testCacheDelivery(t *testing.T, open OpenFunc) {
	l := storage.LayoutCache
	b, c := openBackend(t, open), newClock()
	a := mustCreateUser(t, b, c)
	idle := mustCreateUser(t, b, c) // last seen at sign-up, before activeSince
	activeSince := c.Now()
	live, stale, none := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	old1, old2 := storeMessage(t, b, c, a.ID), storeMessage(t, b, c, a.ID)
	at := c.Now()
	put := func(owner store.ID, expires time.Time) {
		t.Helper()
		require.NoError(t, b.PutInboxCache(ctx, &storage.InboxCache{Owner: owner, Items: cacheItems(old2, old1), Complete: true, Expires: expires}, 10))
	}
	put(live.ID, at.Add(time.Hour))
	put(stale.ID, at.Add(-time.Millisecond))
	put(idle.ID, at.Add(time.Hour))

	m := newMessage(c, a.ID, "new")
	job := newDeliverJob(m, l)
	require.NoError(t, b.CreateMessage(ctx, m, job))
	changes, err := b.DeliverInbox(ctx, storage.Delivery{
		Job: job, Owners: []store.ID{idle.ID, live.ID, stale.ID, none.ID},
		ActiveSince: activeSince, At: at, CacheCap: 2, Done: true,
	})
	require.NoError(t, err)
	assert.ElementsMatch(t, []store.ID{live.ID, stale.ID, none.ID}, changeOwners(changes), "every active owner hears of it")
	for _, ch := range changes {
		assert.True(t, ch.NoCounts)
		assert.Equal(t, m.ID, ch.MessageID)
	}

	got, err := b.ReadInboxCache(ctx, live.ID, at)
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.Equal(t, []store.InboxItem{{InboxEntry: entryOf(m), DeliveredAt: at}, cacheItems(old2)[0]}, got.Items, "appended, capped at CacheCap")
	assert.False(t, got.Complete, "an entry was dropped")
	got, err = b.ReadInboxCache(ctx, stale.ID, at.Add(-time.Hour))
	require.NoError(t, err)
	assert.Equal(t, idsOf(old2, old1), itemIDs(got.Items), "an expired cache is not appended to")
	got, err = b.ReadInboxCache(ctx, idle.ID, at)
	require.NoError(t, err)
	assert.Equal(t, idsOf(old2, old1), itemIDs(got.Items), "an inactive owner is skipped")
	got, err = b.ReadInboxCache(ctx, none.ID, at)
	require.NoError(t, err)
	assert.Nil(t, got, "no cache is created")

	retract(t, b, m, l)
	got, err = b.ReadInboxCache(ctx, live.ID, at)
	require.NoError(t, err)
	assert.Equal(t, idsOf(old2), itemIDs(got.Items), "a retraction removes the entry from caches")
}

func testJobs(t *testing.T, open OpenFunc) {
	forStoredLayouts(t, open, "ChunksApplyOnce", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
		author := mustCreateUser(t, b, c)
		var owners []store.ID
		for range 4 {
			owners = append(owners, mustCreateUser(t, b, c).ID)
		}
		m := newMessage(c, author.ID, "hi")
		job := newDeliverJob(m, l)
		require.NoError(t, b.CreateMessage(ctx, m, job))
		pending, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, job, pending[0])

		first := storage.Delivery{Job: job, Owners: owners[:2], At: c.Now(), Cursor: owners[1][:]}
		changes, err := b.DeliverInbox(ctx, first)
		require.NoError(t, err)
		assert.ElementsMatch(t, owners[:2], changeOwners(changes))
		for _, ch := range changes {
			assert.Equal(t, m.ID, ch.MessageID)
			assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, ch.Counts)
			assert.False(t, ch.NoCounts)
		}
		// The same chunk again (a retry after a crash) changes nothing.
		changes, err = b.DeliverInbox(ctx, first)
		require.NoError(t, err)
		assert.Empty(t, changes)
		assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, countsOf(t, b, owners[0], l))
		pending, err = b.PendingJobs(ctx)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, owners[1][:], pending[0].Cursor, "progress is stored with the chunk")
		// A chunk for another cursor than the stored one changes nothing.
		changes, err = b.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: owners[2:], At: c.Now(), Done: true})
		require.NoError(t, err)
		assert.Empty(t, changes)
		assert.Equal(t, 0, countsOf(t, b, owners[2], l).Total)

		second := storage.Delivery{Job: pending[0], Owners: owners[2:], At: c.Now(), Done: true}
		changes, err = b.DeliverInbox(ctx, second)
		require.NoError(t, err)
		assert.Len(t, changes, 2)
		pending, err = b.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending)
		for _, o := range owners {
			ids, counts := inboxOf(t, b, o, l)
			assert.Equal(t, idsOf(m), ids, "each owner got the message once")
			assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, counts)
		}
		_, err = b.DeliverInbox(ctx, second)
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the job is done")
	})
	forStoredLayouts(t, open, "DeletionCancelsDelivery", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
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
	})
	forStoredLayouts(t, open, "ActiveSince", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
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
	})
	forStoredLayouts(t, open, "InsertAndRetract", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
		author, owner, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		// One chunk delivered m1 to other and owner, owner last: an
		// insertion of m1 into owner's inbox must not lose other's record.
		m1 := post(t, b, c, l, author.ID, other.ID, owner.ID)
		m2, m3 := storeMessage(t, b, c, author.ID), storeMessage(t, b, c, author.ID)
		unfollow := newOwnerJob(c, storage.JobUnfollow, l, owner.ID, author.ID)
		require.NoError(t, b.StoreJob(ctx, unfollow))
		changes, err := b.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: unfollow})
		require.NoError(t, err)
		assert.Equal(t, idsOf(m1), changeIDs(changes))

		follow := newOwnerJob(c, storage.JobFollow, l, owner.ID, author.ID)
		require.NoError(t, b.StoreJob(ctx, follow))
		changes, err = b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(m3, m1, m2, m2), At: c.Now()})
		require.NoError(t, err)
		assert.ElementsMatch(t, idsOf(m3, m1, m2), changeIDs(changes), "each entry once")
		ids, counts := inboxOf(t, b, owner.ID, l)
		assert.Equal(t, idsOf(m3, m2, m1), ids)
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, counts)
		pending, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		assert.Empty(t, pending, "the insertion ends its job")

		changes, err = b.InsertInbox(ctx, storage.Insertion{Job: follow, Entries: entriesOf(m3), At: c.Now()})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "the job is gone")
		assert.Empty(t, changes)
		assert.Equal(t, 3, countsOf(t, b, owner.ID, l).Total)

		changes = retract(t, b, m1, l)
		assert.ElementsMatch(t, []store.ID{other.ID, owner.ID}, changeOwners(changes), "delivered and inserted entries are both found")
		changes = retract(t, b, m2, l)
		assert.Equal(t, []store.ID{owner.ID}, changeOwners(changes), "an inserted entry is retracted")
		ids, counts = inboxOf(t, b, owner.ID, l)
		assert.Equal(t, idsOf(m3), ids)
		assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, counts)
		ids, counts = inboxOf(t, b, other.ID, l)
		assert.Empty(t, ids)
		assert.Equal(t, store.InboxCounts{}, counts)
		refs, _, err := b.FindDeliveries(ctx, m1.ID, nil, 10)
		require.NoError(t, err)
		assert.Empty(t, refs, "delivery records are dropped with the retraction")
	})
	forStoredLayouts(t, open, "DeliveryPages", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
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
		}
	})
	forStoredLayouts(t, open, "RemoveAuthorEntries", func(t *testing.T, b storage.Backend, c *clock, l storage.Layout) {
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
	})
	for _, l := range []storage.Layout{storage.LayoutNone, storage.LayoutEntries, storage.LayoutBuckets, storage.LayoutCache} {
		t.Run("Rebuild/"+layoutName(l), func(t *testing.T) { testRebuild(t, open, l) })
	}
	t.Run("PendingOrder", func(t *testing.T) { testPendingOrder(t, open) })
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
