package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

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
	assert.Equal(t, []store.InboxItem{{InboxEntry: entryOf(m), DeliveredAt: m.CreatedAt}, cacheItems(old2)[0]}, got.Items, "appended, capped at CacheCap, delivered at its creation as fan-out on read shows it")
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
