package embedded_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/storage"
	"herald/store/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storage.Backend {
		s, err := embedded.Open(t.TempDir(), embedded.Options{})
		require.NoError(t, err)
		return s
	})
}

// TestReopen checks that inbox heads, which the store keeps in memory,
// come back whole from disk: counts, read mark, rebuilding flag and the
// last-seen time that fan-out skips inactive owners by.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	user := func(handle string, at time.Time) store.ID {
		u := &store.User{ID: store.NewID(at), Handle: handle, CreatedAt: at, LastSeenAt: at}
		require.NoError(t, st.CreateUser(ctx, u))
		return u.ID
	}
	author, reader, idle := user("author", t0), user("reader", t0), user("idle", t0)
	post := func(at time.Time) *store.Message {
		m := &store.Message{ID: store.NewID(at), AuthorID: author, Text: "hi", Kind: store.KindPost, CreatedAt: at}
		job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: at}
		require.NoError(t, st.CreateMessage(ctx, m, job))
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: []store.ID{reader, idle}, ActiveSince: t0.Add(time.Minute), At: at, Done: true})
		require.NoError(t, err)
		return m
	}
	_, err = st.MarkSeen(ctx, reader, t0.Add(2*time.Minute), time.Time{}, nil)
	require.NoError(t, err)
	m1 := post(t0.Add(3 * time.Minute))
	post(t0.Add(4 * time.Minute))
	_, err = st.MarkInboxRead(ctx, reader, storage.LayoutBuckets, m1.ID)
	require.NoError(t, err)
	rebuilding, err := st.MarkSeen(ctx, idle, t0.Add(5*time.Minute), t0.Add(5*time.Minute), &storage.Job{ID: idle, Kind: storage.JobRebuild, Layout: storage.LayoutBuckets, OwnerID: idle})
	require.NoError(t, err)
	require.True(t, rebuilding)
	require.NoError(t, st.Close())

	st, err = embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	defer st.Close()
	_, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: reader, Layout: storage.LayoutBuckets})
	require.NoError(t, err)
	assert.Equal(t, store.InboxCounts{Total: 2, Unread: 1, ReadMark: m1.ID}, counts)
	_, counts, err = st.ReadInbox(ctx, storage.InboxFilter{Owner: idle, Layout: storage.LayoutBuckets})
	require.NoError(t, err)
	assert.Equal(t, store.InboxCounts{Rebuilding: true}, counts, "skipped while idle, rebuilding since its return")
	// Idle's last-seen time came back too: it is active now.
	post(t0.Add(6 * time.Minute))
	_, counts, err = st.ReadInbox(ctx, storage.InboxFilter{Owner: idle, Layout: storage.LayoutBuckets})
	require.NoError(t, err)
	assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1, Rebuilding: true}, counts)
}

// A store from before search gets its users' search keys when it is opened.
func TestReopen_IndexesSearch(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, name := range []string{"Élodie Durand", "Eli", "Bob"} {
		at := now.Add(time.Duration(i) * time.Millisecond)
		require.NoError(t, st.CreateUser(ctx, &store.User{ID: store.NewID(at), Handle: fmt.Sprintf("user_%d", i), DisplayName: name, CreatedAt: at, LastSeenAt: at}))
	}
	require.NoError(t, st.ForgetSearch())
	found, err := st.SearchUsers(ctx, "el", 10)
	require.NoError(t, err)
	require.Empty(t, found, "a store from before search has no keys")
	require.NoError(t, st.Close())

	for range 2 { // and a second open changes nothing
		st, err = embedded.Open(dir, embedded.Options{})
		require.NoError(t, err)
		found, err = st.SearchUsers(ctx, "el", 10)
		require.NoError(t, err)
		var names []string
		for _, u := range found {
			names = append(names, u.DisplayName)
		}
		assert.ElementsMatch(t, []string{"Élodie Durand", "Eli"}, names)
		require.NoError(t, st.Close())
	}
}

// A store from before the notifications' actor index gets it at its first
// open: a block then removes the actor's notices written before.
func TestReopen_IndexesNotifActors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var users []store.ID
	for i := range 3 {
		at := now.Add(time.Duration(i) * time.Millisecond)
		u := &store.User{ID: store.NewID(at), Handle: fmt.Sprintf("user_%d", i), CreatedAt: at, LastSeenAt: at}
		require.NoError(t, st.CreateUser(ctx, u))
		users = append(users, u.ID)
	}
	owner, x, y := users[0], users[1], users[2]
	for i, actor := range []store.ID{x, y} {
		at := now.Add(time.Second + time.Duration(i)*time.Millisecond)
		_, err := st.Notify(ctx, storage.Notice{Owner: owner, Kind: store.NotifyFollowed, Key: store.NotificationGroupKey(store.NotifyFollowed, store.NilID, at), Actor: actor, ID: store.NewID(at)})
		require.NoError(t, err)
	}
	require.NoError(t, st.ForgetNotifActors())
	res, err := st.RemoveNotificationActor(ctx, owner, x)
	require.NoError(t, err)
	require.Empty(t, res.Updated, "a store from before the index finds nothing")
	require.NoError(t, st.Close())

	st, err = embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	defer st.Close()
	res, err = st.RemoveNotificationActor(ctx, owner, x)
	require.NoError(t, err)
	assert.Len(t, res.Updated, 1, "reopened, the follows group loses x")
	gs, c, err := st.ReadNotifications(ctx, owner, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, gs, 1)
	assert.Equal(t, 1, gs[0].Count)
	assert.Equal(t, []store.ID{y}, gs[0].LatestActors)
	assert.Equal(t, 1, c.Total)
}
