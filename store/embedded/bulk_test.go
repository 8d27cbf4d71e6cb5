package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/seed"
	"herald/store/service"
	"herald/store/storage"
)

// bulkT0 is when the hand-built dataset happens; every ID it makes is one
// millisecond after the previous, so IDs and times agree.
var bulkT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// network is a small hand-built social network in load batches: users
// first, then edges, messages, likes and LayoutBuckets inboxes with a
// progress record.
type network struct {
	alice, bob, carol, dave *store.User
	// m1, m2 by alice; m3 by bob, a reply to m1; m4 by alice, pulled.
	m1, m2, m3, m4 *store.Message
	// bob and carol like m1, dave m2, carol m3, in this order.
	likes       []store.Like
	users, rest *storage.Bulk
}

func newNetwork() *network {
	var ms int64
	at := func() time.Time { ms++; return bulkT0.Add(time.Duration(ms) * time.Millisecond) }
	user := func(handle string, followers, following, messages, pulled int) *store.User {
		t := at()
		return &store.User{ID: store.NewID(t), Handle: handle, DisplayName: handle, PasswordHash: []byte("hash"), CreatedAt: t, LastSeenAt: t,
			FollowerCount: followers, FollowingCount: following, MessageCount: messages, PulledCount: pulled}
	}
	n := &network{
		alice: user("alice", 3, 1, 3, 1),
		bob:   user("bob", 2, 1, 1, 0),
		carol: user("carol", 0, 2, 0, 0),
		dave:  user("dave", 0, 1, 0, 0),
	}
	n.alice.Attributes = []store.Attribute{{Name: "city", Value: "paris"}}
	msg := func(author *store.User, text string) *store.Message {
		t := at()
		return &store.Message{ID: store.NewID(t), AuthorID: author.ID, Text: text, Kind: store.KindPost, CreatedAt: t}
	}
	n.m1, n.m2, n.m3, n.m4 = msg(n.alice, "one"), msg(n.alice, "two"), msg(n.bob, "three"), msg(n.alice, "four")
	n.m3.Kind, n.m3.ReplyToID, n.m3.ReplyToAuthorID = store.KindReply, n.m1.ID, n.alice.ID
	n.m4.Pulled = true
	like := func(u *store.User, m *store.Message) store.Like {
		id := store.NewID(at())
		m.LikeCount++
		return store.Like{ID: id, UserID: u.ID, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: id.Time()}
	}
	n.likes = []store.Like{like(n.bob, n.m1), like(n.carol, n.m1), like(n.dave, n.m2), like(n.carol, n.m3)}
	edge := func(follower, followee *store.User) storage.Edge {
		return storage.Edge{Follower: follower.ID, Followee: followee.ID, At: at()}
	}
	inbox := func(owner *store.User, ms ...*store.Message) storage.BulkInbox {
		in := storage.BulkInbox{Owner: owner.ID}
		for _, m := range ms { // newest first, as given
			in.Items = append(in.Items, store.InboxItem{InboxEntry: store.InboxEntry{MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}, DeliveredAt: m.CreatedAt.Add(time.Second)})
		}
		return in
	}
	n.users = &storage.Bulk{Users: []*store.User{n.alice, n.bob, n.carol, n.dave}, Progress: &storage.BulkProgress{Name: "seed", Value: []byte("users")}}
	n.rest = &storage.Bulk{
		Edges:    []storage.Edge{edge(n.bob, n.alice), edge(n.carol, n.alice), edge(n.dave, n.alice), edge(n.alice, n.bob), edge(n.carol, n.bob)},
		Messages: []*store.Message{n.m1, n.m2, n.m3, n.m4},
		Likes:    n.likes,
		Layout:   storage.LayoutBuckets,
		Inboxes: []storage.BulkInbox{
			inbox(n.alice, n.m3),
			inbox(n.bob, n.m2, n.m1),
			inbox(n.carol, n.m3, n.m2, n.m1),
			inbox(n.dave, n.m2, n.m1),
		},
		Progress: &storage.BulkProgress{Name: "seed", Value: []byte("rest")},
	}
	return n
}

func openBulk(t testing.TB) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func mustLoad(t testing.TB, st *embedded.Store, bks ...*storage.Bulk) {
	t.Helper()
	for _, bk := range bks {
		require.NoError(t, st.LoadBulk(context.Background(), bk))
	}
}

func mustDump(t testing.TB, st *embedded.Store) map[string]string {
	t.Helper()
	d, err := st.Dump()
	require.NoError(t, err)
	return d
}

// ids returns the IDs of ms in order.
func ids(ms ...*store.Message) []store.ID {
	out := make([]store.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func itemIDs(items []store.InboxItem) []store.ID {
	out := make([]store.ID, len(items))
	for i, it := range items {
		out[i] = it.MessageID
	}
	return out
}

func counts(t *testing.T, st storage.Backend, owner store.ID) store.InboxCounts {
	t.Helper()
	_, c, err := st.ReadInbox(context.Background(), storage.InboxFilter{Owner: owner, Layout: storage.LayoutBuckets})
	require.NoError(t, err)
	return c
}

func TestStore_LoadBulk(t *testing.T) {
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		st := openBulk(t)
		n := newNetwork()
		mustLoad(t, st, n.users, n.rest)

		// Users, by ID and by handle, with their counters and attributes.
		u, err := st.FindUserByID(ctx, n.alice.ID)
		require.NoError(t, err)
		assert.Equal(t, n.alice, u)
		u, err = st.FindUserByHandle(ctx, "bob")
		require.NoError(t, err)
		assert.Equal(t, n.bob, u)
		c, err := st.CountUsersByAttribute(ctx, "city", "paris")
		require.NoError(t, err)
		assert.Equal(t, 1, c)

		// Both edge collections.
		followers, err := st.ListFollowers(ctx, n.alice.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.ElementsMatch(t, []store.ID{n.bob.ID, n.carol.ID, n.dave.ID}, followers)
		following, err := st.ListFollowing(ctx, n.carol.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.ElementsMatch(t, []store.ID{n.alice.ID, n.bob.ID}, following)
		follows, err := st.FindFollowing(ctx, n.carol.ID, []store.ID{n.alice.ID, n.bob.ID, n.dave.ID})
		require.NoError(t, err)
		assert.Equal(t, []bool{true, true, false}, follows)

		// Messages, the outbox index and the pullers.
		msgs, err := st.FindMessages(ctx, storage.MessageFilter{AuthorID: n.alice.ID, Range: store.Forward(store.NilID, 10)})
		require.NoError(t, err)
		assert.Equal(t, []*store.Message{n.m4, n.m2, n.m1}, msgs)
		reply, err := st.FindMessageByID(ctx, n.m3.ID)
		require.NoError(t, err)
		assert.Equal(t, n.m3, reply)
		out, err := st.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{n.alice.ID, n.bob.ID}, Range: store.Forward(store.NilID, 10), Pulled: storage.PushedOnly})
		require.NoError(t, err)
		var outIDs []store.ID
		for _, e := range out {
			assert.False(t, e.Pending, "a loaded message is delivered")
			outIDs = append(outIDs, e.MessageID)
		}
		assert.Equal(t, ids(n.m3, n.m2, n.m1), outIDs)
		pulled, err := st.CountOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{n.alice.ID, n.bob.ID}, Pulled: storage.PulledOnly})
		require.NoError(t, err)
		assert.Equal(t, 1, pulled)
		all, err := st.CountOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{n.alice.ID}, After: n.m1.ID})
		require.NoError(t, err)
		assert.Equal(t, 2, all)
		pullers, err := st.ListPullAuthors(ctx)
		require.NoError(t, err)
		assert.Equal(t, []store.ID{n.alice.ID}, pullers)

		// Inboxes: pages both ways and counts.
		items, c2, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: n.carol.ID, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 2)})
		require.NoError(t, err)
		assert.Equal(t, ids(n.m3, n.m2), itemIDs(items))
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, c2)
		assert.Equal(t, n.bob.ID, items[0].AuthorID)
		assert.Equal(t, n.m3.CreatedAt, items[0].CreatedAt)
		assert.Equal(t, n.m3.CreatedAt.Add(time.Second), items[0].DeliveredAt)
		items, _, err = st.ReadInbox(ctx, storage.InboxFilter{Owner: n.carol.ID, Layout: storage.LayoutBuckets, Range: store.Forward(n.m2.ID, 2)})
		require.NoError(t, err)
		assert.Equal(t, ids(n.m1), itemIDs(items))
		items, _, err = st.ReadInbox(ctx, storage.InboxFilter{Owner: n.carol.ID, Layout: storage.LayoutEntries, Range: store.Backward(n.m1.ID, 5)})
		require.NoError(t, err)
		assert.Equal(t, ids(n.m2, n.m3), itemIDs(items), "a backward page, in reading order, and LayoutEntries reads the same entries")
		assert.Equal(t, store.InboxCounts{Total: 1, Unread: 1}, counts(t, st, n.alice.ID))

		// A loaded reply is listed under its parent, as CreateMessage lists it.
		replies, err := st.ListReplies(ctx, n.m1.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		require.Len(t, replies, 1)
		assert.Equal(t, n.m3.ID, replies[0].ID)

		// Likes, listed from both sides, newest first, and found by pair.
		likers, err := st.ListLikers(ctx, n.m1.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Equal(t, []store.Like{n.likes[1], n.likes[0]}, likers)
		likes, err := st.ListLikes(ctx, n.carol.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Equal(t, []store.Like{n.likes[3], n.likes[1]}, likes)
		liked, err := st.FindLiked(ctx, n.carol.ID, []store.MessageKey{n.m1.Key(), n.m2.Key(), n.m3.Key()})
		require.NoError(t, err)
		assert.Equal(t, []bool{true, false, true}, liked)
		m1, err := st.FindMessageByID(ctx, n.m1.ID)
		require.NoError(t, err)
		assert.Equal(t, 2, m1.LikeCount)

		// Delivery records, paged.
		refs, cur, err := st.FindDeliveries(ctx, n.m1.ID, nil, 2)
		require.NoError(t, err)
		require.NotNil(t, cur)
		more, cur, err := st.FindDeliveries(ctx, n.m1.ID, cur, 2)
		require.NoError(t, err)
		assert.Nil(t, cur)
		assert.ElementsMatch(t, []storage.InboxRef{{Owner: n.bob.ID}, {Owner: n.carol.ID}, {Owner: n.dave.ID}}, append(refs, more...))

		p, err := st.BulkProgress(ctx, "seed")
		require.NoError(t, err)
		assert.Equal(t, []byte("rest"), p)
	})

	t.Run("Twice", func(t *testing.T) {
		st := openBulk(t)
		n := newNetwork()
		mustLoad(t, st, n.users, n.rest)
		once := mustDump(t, st)
		mustLoad(t, st, n.users, n.rest)
		assert.Equal(t, once, mustDump(t, st), "loading every batch again")
		mustLoad(t, st, n.rest)
		assert.Equal(t, once, mustDump(t, st), "loading the last batch again")
		// Users again after their inboxes (without the batch's progress,
		// which would go back): a reloaded user keeps its counts.
		users := *n.users
		users.Progress = nil
		mustLoad(t, st, &users)
		assert.Equal(t, once, mustDump(t, st), "loading the users again last")
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, counts(t, st, n.carol.ID))
	})

	t.Run("LikeAsLikeStores", func(t *testing.T) {
		// Unlike finds a loaded like's three keys and the count: it leaves
		// what loading without that like leaves.
		st := openBulk(t)
		n := newNetwork()
		mustLoad(t, st, n.users, n.rest)
		changed, err := st.Unlike(ctx, n.bob.ID, n.m1.Key())
		require.NoError(t, err)
		require.True(t, changed)

		m1 := *n.m1
		m1.LikeCount--
		without := *n.rest
		without.Messages = []*store.Message{&m1, n.m2, n.m3, n.m4}
		without.Likes = n.likes[1:]
		ref := openBulk(t)
		mustLoad(t, ref, n.users, &without)
		assert.Equal(t, mustDump(t, ref), mustDump(t, st))
	})

	t.Run("RepostAsCreateMessageStores", func(t *testing.T) {
		// A loaded repost is what CreateMessage stores without a job (it is
		// delivered): its record and outbox index, the guard that makes a
		// second repost CONFLICT and FindReposts' answer, the original's
		// count and the reposter's. It is marked hidden from its
		// reposter's home, so the comparison covers the mark.
		n := newNetwork()
		t1 := bulkT0.Add(time.Minute)
		r := &store.Message{ID: store.NewID(t1), AuthorID: n.dave.ID, Kind: store.KindRepost, CreatedAt: t1, RepostOfID: n.m1.ID, RepostOfAuthorID: n.alice.ID, HomeHidden: true}
		ref := openBulk(t)
		mustLoad(t, ref, n.users, n.rest)
		require.NoError(t, ref.CreateMessage(ctx, r, nil))

		st := openBulk(t)
		dave, m1 := *n.dave, *n.m1
		dave.MessageCount++
		m1.RepostCount++
		users, rest := *n.users, *n.rest
		users.Users = []*store.User{n.alice, n.bob, n.carol, &dave}
		rest.Messages = []*store.Message{&m1, n.m2, n.m3, n.m4}
		mustLoad(t, st, &users, &rest, &storage.Bulk{Messages: []*store.Message{r}})
		assert.Equal(t, mustDump(t, ref), mustDump(t, st))

		found, err := st.FindReposts(ctx, n.dave.ID, []store.MessageKey{n.m1.Key(), n.m2.Key()})
		require.NoError(t, err)
		assert.Equal(t, []store.ID{r.ID, store.NilID}, found)
		again := *r
		again.ID = store.NewID(t1.Add(time.Second))
		err = st.CreateMessage(ctx, &again, nil)
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "%v", err)
	})

	t.Run("Replace", func(t *testing.T) {
		st := openBulk(t)
		n := newNetwork()
		mustLoad(t, st, n.users, n.rest)
		// A reloaded user is replaced: a new handle, other attributes, no
		// pulled messages.
		alice := *n.alice
		alice.Handle, alice.PulledCount = "alice2", 0
		alice.Attributes = []store.Attribute{{Name: "city", Value: "rome"}, {Name: "lang", Value: "it"}}
		// An inbox is replaced, not merged.
		inbox := n.rest.Inboxes[2]
		inbox.Items = inbox.Items[1:]
		mustLoad(t, st, &storage.Bulk{Users: []*store.User{&alice}, Layout: storage.LayoutBuckets, Inboxes: []storage.BulkInbox{inbox}})

		_, err := st.FindUserByHandle(ctx, "alice")
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		u, err := st.FindUserByHandle(ctx, "alice2")
		require.NoError(t, err)
		assert.Equal(t, &alice, u)
		for _, a := range []struct {
			name, value string
			want        int
		}{{"city", "paris", 0}, {"city", "rome", 1}, {"lang", "it", 1}} {
			c, err := st.CountUsersByAttribute(ctx, a.name, a.value)
			require.NoError(t, err)
			assert.Equal(t, a.want, c, "%s=%s", a.name, a.value)
		}
		pullers, err := st.ListPullAuthors(ctx)
		require.NoError(t, err)
		assert.Empty(t, pullers)
		items, c, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: n.carol.ID, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 10)})
		require.NoError(t, err)
		assert.Equal(t, ids(n.m2, n.m1), itemIDs(items))
		assert.Equal(t, store.InboxCounts{Total: 2, Unread: 2}, c)
	})

	t.Run("ErrConflict", func(t *testing.T) {
		st := openBulk(t)
		n := newNetwork()
		mustLoad(t, st, n.users)
		before := mustDump(t, st)
		t1 := bulkT0.Add(time.Hour)
		erin := &store.User{ID: store.NewID(t1), Handle: "erin", CreatedAt: t1, LastSeenAt: t1}
		thief := &store.User{ID: store.NewID(t1), Handle: "bob", CreatedAt: t1, LastSeenAt: t1, Attributes: []store.Attribute{{Name: "new", Value: "x"}}}
		err := st.LoadBulk(ctx, &storage.Bulk{Users: []*store.User{erin, thief}, Progress: &storage.BulkProgress{Name: "seed", Value: []byte("conflict")}})
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(err))
		assert.Equal(t, before, mustDump(t, st), "nothing of the batch, not even a name token")
		_, err = st.FindUserByID(ctx, erin.ID)
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
		p, err := st.BulkProgress(ctx, "seed")
		require.NoError(t, err)
		assert.Equal(t, []byte("users"), p)

		// Two new users claiming one handle in one batch.
		twin := &store.User{ID: store.NewID(t1), Handle: "erin", CreatedAt: t1, LastSeenAt: t1}
		err = st.LoadBulk(ctx, &storage.Bulk{Users: []*store.User{erin, twin}})
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(err))
		assert.Equal(t, before, mustDump(t, st))
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		st := openBulk(t)
		n := newNetwork()
		mustLoad(t, st, n.users)
		before := mustDump(t, st)
		items := n.rest.Inboxes[2].Items
		stranger := store.NewID(bulkT0.Add(time.Hour))
		likeAgain := n.likes[0]
		likeAgain.ID = stranger
		repost := func(id, original store.ID) *store.Message {
			return &store.Message{ID: id, AuthorID: n.dave.ID, Kind: store.KindRepost, CreatedAt: id.Time(), RepostOfID: original, RepostOfAuthorID: n.alice.ID}
		}
		for name, tc := range map[string]struct {
			bk   *storage.Bulk
			code string
		}{
			"ItemsInLayoutNone":     {&storage.Bulk{Layout: storage.LayoutNone, Inboxes: []storage.BulkInbox{{Owner: n.carol.ID, Items: items}}}, store.EINVALID},
			"ItemsInLayoutCache":    {&storage.Bulk{Layout: storage.LayoutCache, Inboxes: []storage.BulkInbox{{Owner: n.carol.ID, Items: items}}}, store.EINVALID},
			"OldestFirst":           {&storage.Bulk{Layout: storage.LayoutBuckets, Inboxes: []storage.BulkInbox{{Owner: n.carol.ID, Items: []store.InboxItem{items[2], items[0]}}}}, store.EINVALID},
			"RepeatedItem":          {&storage.Bulk{Layout: storage.LayoutBuckets, Inboxes: []storage.BulkInbox{{Owner: n.carol.ID, Items: []store.InboxItem{items[0], items[0]}}}}, store.EINVALID},
			"OwnerTwice":            {&storage.Bulk{Layout: storage.LayoutBuckets, Inboxes: []storage.BulkInbox{{Owner: n.carol.ID}, {Owner: n.carol.ID}}}, store.EINVALID},
			"UnknownOwner":          {&storage.Bulk{Layout: storage.LayoutEntries, Inboxes: []storage.BulkInbox{{Owner: stranger, Items: items}}}, store.ENOTFOUND},
			"UserTwice":             {&storage.Bulk{Users: []*store.User{n.bob, n.bob}}, store.EINVALID},
			"LikeTwice":             {&storage.Bulk{Likes: []store.Like{n.likes[0], n.likes[0]}}, store.EINVALID},
			"PairTwice":             {&storage.Bulk{Likes: []store.Like{n.likes[0], likeAgain}}, store.EINVALID},
			"LikeWithoutUser":       {&storage.Bulk{Likes: []store.Like{{ID: n.likes[0].ID, MessageID: n.m1.ID, AuthorID: n.alice.ID}}}, store.EINVALID},
			"RepostWithoutOriginal": {&storage.Bulk{Messages: []*store.Message{repost(stranger, store.NilID)}}, store.EINVALID},
			"RepostPairTwice":       {&storage.Bulk{Messages: []*store.Message{repost(stranger, n.m1.ID), repost(store.NewID(bulkT0.Add(2*time.Hour)), n.m1.ID)}}, store.EINVALID},
		} {
			t.Run(name, func(t *testing.T) {
				err := st.LoadBulk(ctx, tc.bk)
				assert.Equal(t, tc.code, store.ErrorCode(err), "%v", err)
				assert.Equal(t, before, mustDump(t, st))
			})
		}
		// Empty inboxes of a layout that stores none are nothing to do.
		require.NoError(t, st.LoadBulk(ctx, &storage.Bulk{Layout: storage.LayoutNone, Inboxes: []storage.BulkInbox{{Owner: n.carol.ID}}}))
		assert.Equal(t, before, mustDump(t, st))
	})

	t.Run("ProgressAndReopen", func(t *testing.T) {
		dir := t.TempDir()
		st, err := embedded.Open(dir, embedded.Options{})
		require.NoError(t, err)
		n := newNetwork()
		p, err := st.BulkProgress(ctx, "seed")
		require.NoError(t, err)
		assert.Nil(t, p, "no record yet")
		mustLoad(t, st, n.users)
		p, err = st.BulkProgress(ctx, "seed")
		require.NoError(t, err)
		assert.Equal(t, []byte("users"), p)
		mustLoad(t, st, n.rest, &storage.Bulk{Progress: &storage.BulkProgress{Name: "empty"}})
		require.NoError(t, st.Close())

		st, err = embedded.Open(dir, embedded.Options{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		p, err = st.BulkProgress(ctx, "seed")
		require.NoError(t, err)
		assert.Equal(t, []byte("rest"), p)
		p, err = st.BulkProgress(ctx, "empty")
		require.NoError(t, err)
		assert.Equal(t, []byte{}, p, "an empty value is a record")
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, counts(t, st, n.carol.ID))
		assert.Equal(t, store.InboxCounts{Total: 2, Unread: 2}, counts(t, st, n.dave.ID))
		// The heads came back from disk: a delivery counts on from them,
		// and dave's last-seen time keeps him active.
		t1 := bulkT0.Add(time.Minute)
		m := &store.Message{ID: store.NewID(t1), AuthorID: n.alice.ID, Text: "five", Kind: store.KindPost, CreatedAt: t1}
		job := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: n.alice.ID, CreatedAt: t1}
		require.NoError(t, st.CreateMessage(ctx, m, job))
		_, err = st.DeliverInbox(ctx, storage.Delivery{Job: job, Owners: []store.ID{n.dave.ID}, ActiveSince: bulkT0, At: t1, Done: true})
		require.NoError(t, err)
		assert.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, counts(t, st, n.dave.ID))
	})
}

// testClock moves one millisecond per reading, from an hour after the
// dataset.
type testClock struct{ ms atomic.Int64 }

func (c *testClock) Now() time.Time {
	if c.ms.Load() == 0 {
		c.ms.CompareAndSwap(0, bulkT0.Add(time.Hour).UnixMilli())
	}
	return time.UnixMilli(c.ms.Add(1)).UTC()
}

// TestStore_LoadBulkService runs a Service over a loaded store: its writes
// find loaded data as they find data they wrote.
func TestStore_LoadBulkService(t *testing.T) {
	ctx := context.Background()
	st := openBulk(t)
	n := newNetwork()
	mustLoad(t, st, n.users, n.rest)
	svc := service.NewService(st, pubsub.NewHub(), service.Options{Strategy: service.StrategyBucket, Now: (&testClock{}).Now, PasswordCost: bcrypt.MinCost, ChunkSize: 2, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { assert.NoError(t, svc.Close(ctx)) })
	idle := func() { require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond, "fan-out did not finish") }
	inbox := func(owner *store.User) ([]store.ID, store.InboxCounts) {
		page, err := svc.Inbox(ctx, owner.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		return itemIDs(page.Items), page.Counts
	}

	// Deleting a loaded message retracts it from the loaded inboxes.
	require.NoError(t, svc.DeleteMessage(ctx, n.alice.ID, n.m1.ID))
	idle()
	for _, owner := range []*store.User{n.bob, n.carol, n.dave} {
		c := counts(t, st, owner.ID)
		items, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: owner.ID, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 10)})
		require.NoError(t, err)
		assert.NotContains(t, itemIDs(items), n.m1.ID, owner.Handle)
		assert.Equal(t, len(items), c.Total, owner.Handle)
		assert.Equal(t, len(items), c.Unread, owner.Handle)
	}
	refs, _, err := st.FindDeliveries(ctx, n.m1.ID, nil, 10)
	require.NoError(t, err)
	assert.Empty(t, refs, "the retraction's records are gone")

	// A new post by a loaded author reaches the loaded followers.
	m, err := svc.PostMessage(ctx, n.alice.ID, service.PostInput{Text: "new"})
	require.NoError(t, err)
	idle()
	got, c := inbox(n.carol)
	assert.Equal(t, ids(m, n.m3, n.m2), got)
	assert.Equal(t, store.InboxCounts{Total: 3, Unread: 3}, c)
	got, _ = inbox(n.dave)
	assert.Equal(t, ids(m, n.m2), got)
	got, _ = inbox(n.alice)
	assert.Equal(t, ids(m, n.m4, n.m3, n.m2), got, "an author's own posts are at home, read from their outbox")

	// Marking read, then unfollowing, on loaded entries.
	c, err = svc.MarkInboxRead(ctx, n.carol.ID)
	require.NoError(t, err)
	assert.Equal(t, store.InboxCounts{Total: 3, ReadMark: m.ID}, c)
	_, err = svc.Unfollow(ctx, n.carol.ID, n.alice.ID)
	require.NoError(t, err)
	idle()
	got, c = inbox(n.carol)
	assert.Equal(t, ids(n.m3), got)
	assert.Equal(t, store.InboxCounts{Total: 1, ReadMark: m.ID}, c)
	u, err := svc.FindUserByID(ctx, n.alice.ID)
	require.NoError(t, err)
	assert.Equal(t, 2, u.FollowerCount, "the loaded counter counts on")
}

// BenchmarkLoadBulk measures the load rate of a batch of 50,000 follow
// edges and of a batch of 50,000 inbox entries (500 inboxes of 100), each
// a synced commit, in records per second.
func BenchmarkLoadBulk(b *testing.B) {
	const n = 50_000
	ctx := context.Background()
	t0 := time.Now().UTC().Truncate(time.Millisecond)
	newIDs := func(k int) []store.ID {
		out := make([]store.ID, k)
		for i := range out {
			out[i] = store.NewID(t0)
		}
		return out
	}

	b.Run(fmt.Sprintf("edges=%d", n), func(b *testing.B) {
		st := openBulk(b)
		for b.Loop() {
			b.StopTimer()
			// Every follower follows 50 of 1,000 fresh users.
			users := newIDs(1000)
			bk := &storage.Bulk{Edges: make([]storage.Edge, 0, n), Progress: &storage.BulkProgress{Name: "bench", Value: []byte("edges")}}
			for i := range n {
				bk.Edges = append(bk.Edges, storage.Edge{Follower: users[i%1000], Followee: users[(i%1000+1+i/1000)%1000], At: t0})
			}
			b.StartTimer()
			require.NoError(b, st.LoadBulk(ctx, bk))
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})

	b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
		st := openBulk(b)
		const owners, perInbox = 500, n / 500
		msgs := newIDs(5000)
		slices.Reverse(msgs) // newest first
		author := store.NewID(t0)
		for b.Loop() {
			b.StopTimer()
			users := &storage.Bulk{}
			for _, id := range newIDs(owners) {
				users.Users = append(users.Users, &store.User{ID: id, Handle: id.String(), CreatedAt: t0, LastSeenAt: t0})
			}
			require.NoError(b, st.LoadBulk(ctx, users))
			bk := &storage.Bulk{Layout: storage.LayoutBuckets, Inboxes: make([]storage.BulkInbox, owners), Progress: &storage.BulkProgress{Name: "bench", Value: []byte("entries")}}
			for i, u := range users.Users {
				in := storage.BulkInbox{Owner: u.ID, Items: make([]store.InboxItem, perInbox)}
				// Each inbox a different window of the messages, newest first.
				start := (i * 7) % (len(msgs) - perInbox)
				for j := range in.Items {
					in.Items[j] = store.InboxItem{InboxEntry: store.InboxEntry{MessageID: msgs[start+j], AuthorID: author, CreatedAt: t0}, DeliveredAt: t0}
				}
				bk.Inboxes[i] = in
			}
			b.StartTimer()
			require.NoError(b, st.LoadBulk(ctx, bk))
		}
		b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
	})
}

// cutLoader fails the load when cut says so of a batch, before writing
// it, as a crash before its commit would.
type cutLoader struct {
	storage.BulkLoader
	cut func(*storage.Bulk) bool
}

func (c cutLoader) LoadBulk(ctx context.Context, b *storage.Bulk) error {
	if c.cut(b) {
		return errors.New("killed")
	}
	return c.BulkLoader.LoadBulk(ctx, b)
}

// TestStore_LoadBulkSeedResumes: a seed load killed among its reposts'
// batches resumes, in the reopened store, to what an uninterrupted load
// writes: every repost with its guard and counts, no batch twice.
func TestStore_LoadBulkSeedResumes(t *testing.T) {
	ctx := context.Background()
	n, err := seed.Generate(seed.Config{Seed: 3, Users: 200, AvgFollows: 6, Messages: 400, AvgReposts: 3})
	require.NoError(t, err)
	opts := seed.LoadOptions{PasswordHash: []byte("x"), LastSeen: bulkT0.Add(1000 * time.Hour), BatchRecords: 150}
	whole := openBulk(t)
	_, err = seed.Load(ctx, whole, n, opts)
	require.NoError(t, err)

	dir := t.TempDir()
	st, err := embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	reposts := 0
	_, err = seed.Load(ctx, cutLoader{st, func(b *storage.Bulk) bool {
		if len(b.Messages) > 0 && b.Messages[0].Kind == store.KindRepost {
			reposts++
		}
		return reposts == 2
	}}, n, opts)
	require.ErrorContains(t, err, "killed")
	require.NoError(t, st.Close())
	st, err = embedded.Open(dir, embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	loaded, err := seed.Load(ctx, st, n, opts)
	require.NoError(t, err)
	require.Positive(t, loaded)
	assert.Equal(t, mustDump(t, whole), mustDump(t, st))
}
