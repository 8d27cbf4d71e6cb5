package embedded

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// crash stops s as a killed process would: no last checkpoint.
func crash(t *testing.T, s *Store) {
	t.Helper()
	close(s.stopCheckpoints)
	<-s.checkpointsDone
	close(s.stopDisk)
	<-s.diskDone
	require.NoError(t, s.db.Close())
	require.NoError(t, s.healthChecks.Close())
	require.NoError(t, s.dirLock.Close())
}

// TestJournal_Replay delivers, marks read and retracts around checkpoints
// and crashes, and requires the counts after each reopen to be the counts
// before it: a journal record is counted once, whether the stored head was
// written before it, after it, or by a checkpoint.
func TestJournal_Replay(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	now := time.Now()
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }
	newUser := func(h string) store.ID {
		u := &store.User{ID: store.NewID(tick()), Handle: h, PasswordHash: []byte("x"), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, s.CreateUser(ctx, u))
		return u.ID
	}
	author := newUser("author")
	var owners []store.ID
	for i := range 5 {
		owners = append(owners, newUser(fmt.Sprintf("reader%d", i)))
	}
	deliver := func(text string) *store.Message {
		t.Helper()
		m := &store.Message{ID: store.NewID(tick()), AuthorID: author, Text: text, Kind: store.KindPost, CreatedAt: now}
		job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: now}
		require.NoError(t, s.CreateMessage(ctx, m, job))
		_, err := s.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: owners[:3], At: now, Cursor: owners[2][:]})
		require.NoError(t, err)
		job.Cursor = owners[2][:]
		changes, err := s.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: owners[3:], At: now, Done: true})
		require.Len(t, changes, 2)
		require.NoError(t, err)
		return m
	}
	counts := func() []store.InboxCounts {
		t.Helper()
		var cs []store.InboxCounts
		for _, o := range owners {
			items, c, err := s.ReadInbox(ctx, storage.InboxFilter{Owner: o, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 100)})
			require.NoError(t, err)
			require.Len(t, items, c.Total, "the counts agree with the entries")
			cs = append(cs, c)
		}
		return cs
	}
	reopen := func(clean bool) {
		t.Helper()
		want := counts()
		if clean {
			require.NoError(t, s.Close())
		} else {
			crash(t, s)
		}
		s, err = Open(dir, Options{})
		require.NoError(t, err)
		assert.Equal(t, want, counts(), "counts after reopening (clean %v)", clean)
	}

	m1 := deliver("one")
	deliver("two")
	reopen(false) // two records replayed
	assert.Equal(t, 2, counts()[0].Total)

	// A head written whole after records (mark-read) reflects them.
	_, err = s.MarkInboxRead(ctx, owners[0], storage.LayoutBuckets, m1.ID)
	require.NoError(t, err)
	deliver("three")
	reopen(false)
	assert.Equal(t, store.InboxCounts{Total: 3, Unread: 2, ReadMark: m1.ID}, counts()[0])

	// A checkpoint, then more records, then a crash.
	require.NoError(t, s.checkpoint())
	deliver("four")
	reopen(false)
	assert.Equal(t, 4, counts()[4].Total)

	// A retraction writes the heads it changes whole.
	require.NoError(t, s.DeleteMessage(ctx, m1.ID, &storage.Job{ID: m1.ID, Kind: storage.JobRetract, Layout: storage.LayoutBuckets, MessageID: m1.ID, AuthorID: author, CreatedAt: now}))
	refs, _, err := s.FindDeliveries(ctx, m1.ID, nil, 100)
	require.NoError(t, err)
	_, err = s.RemoveInboxEntries(ctx, storage.Removal{Job: &storage.Job{ID: m1.ID, Kind: storage.JobRetract, Layout: storage.LayoutBuckets, MessageID: m1.ID, AuthorID: author}, Refs: refs, Done: true})
	require.NoError(t, err)
	reopen(false)
	assert.Equal(t, 3, counts()[1].Total)

	deliver("five")
	reopen(true) // a clean close checkpoints: nothing is left to replay
	n := 0
	it, err := s.db.NewIter(nil)
	require.NoError(t, err)
	for ok := it.SeekGE([]byte{pJournal}); ok && it.Key()[0] == pJournal; ok = it.Next() {
		n++
	}
	require.NoError(t, it.Close())
	assert.Zero(t, n, "no journal record after a clean close")
	require.NoError(t, s.Close())
}

// TestJournal_ReplaysAGroup stores a group of deliveries reaching the
// same owners in one batch, then crashes before any checkpoint: each
// chunk's journal record counts its owners once at reopen.
func TestJournal_ReplaysAGroup(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	require.NoError(t, err)
	now := time.Now()
	tick := func() time.Time { now = now.Add(time.Millisecond); return now }
	newUser := func(h string) store.ID {
		u := &store.User{ID: store.NewID(tick()), Handle: h, PasswordHash: []byte("x"), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, s.CreateUser(ctx, u))
		return u.ID
	}
	owners := []store.ID{newUser("r0"), newUser("r1"), newUser("r2")}
	var ds []storage.Delivery
	for i := range 4 {
		author := newUser(fmt.Sprintf("author%d", i))
		m := &store.Message{ID: store.NewID(tick()), AuthorID: author, Text: "hi", Kind: store.KindPost, CreatedAt: now}
		job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: now}
		require.NoError(t, s.CreateMessage(ctx, m, job))
		ds = append(ds, storage.Delivery{Job: job, Owners: owners[i%2:], At: now, Done: true})
	}
	r, err := s.DeliverInboxes(ctx, ds)
	require.NoError(t, err)
	require.Len(t, r, len(ds))
	want := []int{2, 4, 4} // r0 is reached by every other chunk
	crash(t, s)
	s, err = Open(dir, Options{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	for i, o := range owners {
		items, c, err := s.ReadInbox(ctx, storage.InboxFilter{Owner: o, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 100)})
		require.NoError(t, err)
		assert.Len(t, items, want[i])
		assert.Equal(t, store.InboxCounts{Total: want[i], Unread: want[i]}, c, "owner %d after a crash", i)
	}
	pending, err := s.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending)
}
