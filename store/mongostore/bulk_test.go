package mongostore_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// bulkFixture is a small hand-built network loaded in bulk: authors a and
// b, celebrity c (one pulled message), readers x and y. x follows a and b,
// y follows a, b and c. a posts 110 messages, b 9 and a reply to a's
// first, c one pulled message; x's and y's inboxes hold a's and b's 120,
// more than two buckets. x and y like a's first message, y b's reply and
// c's message.
type bulkFixture struct {
	st      *mongostore.Store
	trips   *atomic.Int64 // collection calls: round trips
	docs    *atomic.Int64 // inbox documents read
	clk     *measureClock
	layout  storage.Layout
	a, b, c *store.User
	x, y    *store.User
	msgs    []*store.Message // oldest first
	reply   *store.Message
	pulled  *store.Message
	likes   []store.Like      // in the order made
	inbox   []store.InboxItem // x's and y's, newest first
	batches []*storage.Bulk
}

func newBulkFixture(t *testing.T, layout storage.Layout) *bulkFixture {
	t.Helper()
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(engine.Close)
	f := &bulkFixture{trips: &atomic.Int64{}, docs: &atomic.Int64{}, layout: layout,
		clk: &measureClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	f.st = mongostore.New(countingClient{client, f.trips, f.docs}, "herald", mongostore.Options{})
	require.NoError(t, f.st.EnsureIndexes(ctx))

	user := func(h string) *store.User {
		now := f.clk.now()
		return &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, PasswordHash: []byte("x"), CreatedAt: now, LastSeenAt: now}
	}
	f.a, f.b, f.c, f.x, f.y = user("author_a"), user("author_b"), user("celebrity"), user("reader_x"), user("reader_y")
	f.a.FollowerCount, f.a.MessageCount = 2, 110
	f.b.FollowerCount, f.b.MessageCount = 2, 10
	f.c.FollowerCount, f.c.MessageCount, f.c.PulledCount = 1, 1, 1
	f.x.FollowingCount, f.y.FollowingCount = 2, 3
	f.x.Attributes = []store.Attribute{{Name: "city", Value: "Paris"}, {Name: "lang", Value: "fr"}}

	followed := f.clk.now()
	edges := []storage.Edge{
		{Follower: f.x.ID, Followee: f.a.ID, At: followed}, {Follower: f.x.ID, Followee: f.b.ID, At: followed},
		{Follower: f.y.ID, Followee: f.a.ID, At: followed}, {Follower: f.y.ID, Followee: f.b.ID, At: followed},
		{Follower: f.y.ID, Followee: f.c.ID, At: followed},
	}
	msg := func(author *store.User, text string) *store.Message {
		now := f.clk.now()
		return &store.Message{ID: store.NewID(now), AuthorID: author.ID, Text: text, Kind: store.KindPost, CreatedAt: now}
	}
	for i := range 120 {
		m := msg(f.a, fmt.Sprintf("a%d", i))
		if i%12 == 11 {
			m = msg(f.b, fmt.Sprintf("b%d", i))
		}
		f.msgs = append(f.msgs, m)
	}
	f.reply = f.msgs[11] // b's first, a reply to a's first
	f.reply.Kind, f.reply.ReplyToID, f.reply.ReplyToAuthorID = store.KindReply, f.msgs[0].ID, f.a.ID
	f.pulled = msg(f.c, "pulled")
	f.pulled.Pulled = true
	for i := len(f.msgs) - 1; i >= 0; i-- {
		m := f.msgs[i]
		f.inbox = append(f.inbox, store.InboxItem{InboxEntry: store.InboxEntry{MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}, DeliveredAt: m.CreatedAt.Add(time.Second)})
	}
	like := func(u *store.User, m *store.Message) store.Like {
		id := store.NewID(f.clk.now())
		m.LikeCount++
		return store.Like{ID: id, UserID: u.ID, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: id.Time()}
	}
	f.likes = []store.Like{like(f.x, f.msgs[0]), like(f.y, f.msgs[0]), like(f.y, f.reply), like(f.y, f.pulled)}
	progress := func(n int) *storage.BulkProgress {
		return &storage.BulkProgress{Name: "test", Value: fmt.Appendf(nil, "batch %d", n)}
	}
	f.batches = []*storage.Bulk{
		{Users: []*store.User{f.a, f.b, f.c, f.x, f.y}, Progress: progress(1)},
		{Edges: edges, Progress: progress(2)},
		{Messages: append(slices.Clone(f.msgs[:60]), f.pulled), Progress: progress(3)},
		{Messages: f.msgs[60:], Progress: progress(4)},
		{Likes: f.likes, Progress: progress(5)},
		{Layout: layout, Inboxes: []storage.BulkInbox{{Owner: f.x.ID, Items: f.inbox}, {Owner: f.y.ID, Items: f.inbox}}, Progress: progress(6)},
	}
	return f
}

func (f *bulkFixture) load(t *testing.T) {
	t.Helper()
	for _, b := range f.batches {
		require.NoError(t, f.st.LoadBulk(context.Background(), b))
	}
}

// dump returns every document of every collection, as extended JSON, in
// _id order.
func dump(t *testing.T, st *mongostore.Store) map[string][]string {
	t.Helper()
	ctx := context.Background()
	names, err := st.Database().ListCollectionNames(ctx, bson.D{})
	require.NoError(t, err)
	out := map[string][]string{}
	for _, name := range names {
		cur, err := st.Database().Collection(name).Find(ctx, bson.D{})
		require.NoError(t, err)
		var docs []bson.Raw
		require.NoError(t, cur.All(ctx, &docs))
		for _, d := range docs {
			out[name] = append(out[name], d.String())
		}
		slices.Sort(out[name])
	}
	return out
}

func ids(items []store.InboxItem) []store.ID {
	out := make([]store.ID, len(items))
	for i, it := range items {
		out[i] = it.MessageID
	}
	return out
}

// readAll pages through owner's stored inbox with pages of size, forward
// (newest first) or backward (oldest first: a backend reads nearest to
// the cursor first), and returns the IDs newest first.
func readAll(t *testing.T, st *mongostore.Store, owner store.ID, lay storage.Layout, size int, backward bool) []store.ID {
	t.Helper()
	var all []store.ID
	from := store.NilID
	for {
		r := store.Forward(from, size)
		if backward {
			r = store.Backward(from, size)
		}
		items, _, err := st.ReadInbox(context.Background(), storage.InboxFilter{Owner: owner, Layout: lay, Range: r})
		require.NoError(t, err)
		require.LessOrEqual(t, len(items), size)
		got := ids(items)
		if backward {
			slices.Reverse(got)
			all = append(got, all...)
		} else {
			all = append(all, got...)
		}
		if len(items) < size {
			return all
		}
		from = items[len(items)-1].MessageID
	}
}

func TestStore_LoadBulk(t *testing.T) {
	ctx := context.Background()
	for _, lay := range []storage.Layout{storage.LayoutBuckets, storage.LayoutEntries} {
		name := map[storage.Layout]string{storage.LayoutBuckets: "Buckets", storage.LayoutEntries: "Entries"}[lay]
		t.Run(name, func(t *testing.T) {
			f := newBulkFixture(t, lay)
			v, err := f.st.BulkProgress(ctx, "test")
			require.NoError(t, err)
			require.Nil(t, v, "no progress before a load")
			f.load(t)
			st := f.st

			t.Run("OKUsers", func(t *testing.T) {
				got, err := st.FindUserByHandle(ctx, "reader_x")
				require.NoError(t, err)
				assert.Equal(t, f.x, got, "every field, attributes included")
				for _, u := range []*store.User{f.a, f.b, f.c, f.y} {
					got, err := st.FindUserByID(ctx, u.ID)
					require.NoError(t, err)
					assert.Equal(t, u, got)
				}
				us, err := st.FindUsersByAttribute(ctx, "city", "Paris", store.Forward(store.NilID, 10))
				require.NoError(t, err)
				require.Len(t, us, 1)
				assert.Equal(t, f.x.ID, us[0].ID)
				pull, err := st.ListPullAuthors(ctx)
				require.NoError(t, err)
				assert.Equal(t, []store.ID{f.c.ID}, pull)
			})

			t.Run("OKFollows", func(t *testing.T) {
				fs, err := st.ListFollowers(ctx, f.a.ID, store.Forward(store.NilID, 10))
				require.NoError(t, err)
				assert.Equal(t, []store.ID{f.x.ID, f.y.ID}, fs)
				fg, err := st.ListFollowing(ctx, f.y.ID, store.Forward(store.NilID, 10))
				require.NoError(t, err)
				assert.Equal(t, []store.ID{f.a.ID, f.b.ID, f.c.ID}, fg)
				is, err := st.FindFollowing(ctx, f.x.ID, []store.ID{f.a.ID, f.b.ID, f.c.ID})
				require.NoError(t, err)
				assert.Equal(t, []bool{true, true, false}, is)
			})

			t.Run("OKMessages", func(t *testing.T) {
				ms, err := st.FindMessages(ctx, storage.MessageFilter{AuthorID: f.b.ID, Range: store.Forward(store.NilID, 50)})
				require.NoError(t, err)
				require.Len(t, ms, 10)
				assert.Equal(t, f.msgs[119], ms[0], "newest first")
				assert.Equal(t, f.reply, ms[9], "the reply, with what it replies to")
				out, err := st.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{f.a.ID, f.b.ID}, Range: store.Forward(store.NilID, 200)})
				require.NoError(t, err)
				require.Len(t, out, 120)
				for i, e := range out {
					assert.Equal(t, f.inbox[i].InboxEntry, e.InboxEntry)
					assert.False(t, e.Pending, "delivered: no job")
				}
				n, err := st.CountOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{f.c.ID}, Pulled: storage.PulledOnly})
				require.NoError(t, err)
				assert.Equal(t, 1, n)
				got, err := st.FindMessageByID(ctx, f.pulled.ID)
				require.NoError(t, err)
				assert.Equal(t, f.pulled, got)
			})

			t.Run("OKInbox", func(t *testing.T) {
				want := ids(f.inbox)
				for _, size := range []int{49, 50, 51} {
					assert.Equal(t, want, readAll(t, st, f.x.ID, lay, size, false), "forward, pages of %d", size)
					assert.Equal(t, want, readAll(t, st, f.y.ID, lay, size, true), "backward, pages of %d", size)
				}
				items, c, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: f.x.ID, Layout: lay, Range: store.Forward(store.NilID, 3)})
				require.NoError(t, err)
				assert.Equal(t, f.inbox[:3], items, "entries as given, delivery times included")
				assert.Equal(t, store.InboxCounts{Total: 120, Unread: 120}, c)
			})

			t.Run("OKDeliveries", func(t *testing.T) {
				refs, next, err := st.FindDeliveries(ctx, f.msgs[5].ID, nil, 10)
				require.NoError(t, err)
				assert.Nil(t, next)
				require.Len(t, refs, 2)
				assert.ElementsMatch(t, []store.ID{f.x.ID, f.y.ID}, []store.ID{refs[0].Owner, refs[1].Owner})
				if lay == storage.LayoutBuckets {
					// The oldest bucket holds the oldest 50.
					assert.Equal(t, f.msgs[0].ID, refs[0].Bucket)
				} else {
					assert.True(t, refs[0].Bucket.IsZero())
				}
				refs, _, err = st.FindDeliveries(ctx, f.pulled.ID, nil, 10)
				require.NoError(t, err)
				assert.Empty(t, refs, "a pulled message is in no inbox")
			})

			if lay == storage.LayoutBuckets {
				t.Run("OKBucketShape", func(t *testing.T) {
					bs := bucketsOf(t, st, f.x.ID)
					require.Len(t, bs, 3)
					checkInvariant(t, bs)
					for i, n := range []int{50, 50, 20} {
						assert.Len(t, bs[i].Entries, n)
						assert.Equal(t, primitive.ObjectID(f.msgs[50*i].ID), bs[i].Key, "keyed by its first message")
					}
					var head struct {
						Key     primitive.ObjectID `bson:"bk"`
						Count   int64              `bson:"bn"`
						Newest  primitive.ObjectID `bson:"bm"`
						Total   int64              `bson:"bt"`
						Unread  int64              `bson:"bu"`
						ReadMrk any                `bson:"ir"`
					}
					require.NoError(t, st.Database().Collection("users").FindOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(f.x.ID)}}).Decode(&head))
					assert.Equal(t, primitive.ObjectID(f.msgs[100].ID), head.Key)
					assert.Equal(t, int64(20), head.Count)
					assert.Equal(t, primitive.ObjectID(f.msgs[119].ID), head.Newest)
					assert.Equal(t, int64(120), head.Total)
					assert.Equal(t, int64(120), head.Unread)
					assert.Nil(t, head.ReadMrk)
				})

				t.Run("OKPageOf50ReadsTwoBuckets", func(t *testing.T) {
					f.trips.Store(0)
					f.docs.Store(0)
					items, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: f.x.ID, Layout: lay, Range: store.Forward(store.NilID, 50)})
					require.NoError(t, err)
					require.Len(t, items, 50)
					t.Logf("a page of 50 of a loaded inbox: %d round trips, %d bucket documents", f.trips.Load(), f.docs.Load())
					assert.LessOrEqual(t, f.docs.Load(), int64(2))
				})
			}

			t.Run("OKLikes", func(t *testing.T) {
				likers, err := st.ListLikers(ctx, f.msgs[0].ID, store.Forward(store.NilID, 10))
				require.NoError(t, err)
				assert.Equal(t, []store.Like{f.likes[1], f.likes[0]}, likers, "newest first")
				likes, err := st.ListLikes(ctx, f.y.ID, store.Forward(store.NilID, 10))
				require.NoError(t, err)
				assert.Equal(t, []store.Like{f.likes[3], f.likes[2], f.likes[1]}, likes)
				liked, err := st.FindLiked(ctx, f.x.ID, []store.MessageKey{f.msgs[0].Key(), f.reply.Key(), f.pulled.Key()})
				require.NoError(t, err)
				assert.Equal(t, []bool{true, false, false}, liked)
				got, err := st.FindMessageByID(ctx, f.msgs[0].ID)
				require.NoError(t, err)
				assert.Equal(t, 2, got.LikeCount)
			})

			t.Run("OKProgress", func(t *testing.T) {
				v, err := st.BulkProgress(ctx, "test")
				require.NoError(t, err)
				assert.Equal(t, "batch 6", string(v))
				v, err = st.BulkProgress(ctx, "other")
				require.NoError(t, err)
				assert.Nil(t, v)
			})

			t.Run("OKTwiceIsOnce", func(t *testing.T) {
				before := dump(t, st)
				require.NotEmpty(t, before["deliveries"])
				f.load(t)
				assert.Equal(t, before, dump(t, st), "every batch again")
				// Users again after their inboxes: the counts stay.
				users := *f.batches[0]
				users.Progress = nil
				require.NoError(t, st.LoadBulk(ctx, &users))
				assert.Equal(t, before, dump(t, st), "the users batch after the inboxes")
			})
		})
	}
}

// TestStore_LoadBulkConflict: a handle held by a user outside the batch
// fails the batch, which writes nothing; handles held inside the batch
// may change hands.
func TestStore_LoadBulkConflict(t *testing.T) {
	ctx := context.Background()
	f := newBulkFixture(t, storage.LayoutBuckets)
	st := f.st
	f.load(t)
	clk := f.clk
	other := &store.User{ID: store.NewID(clk.now()), Handle: "taken", CreatedAt: clk.t, LastSeenAt: clk.t}
	require.NoError(t, st.CreateUser(ctx, other))

	t.Run("ErrConflict", func(t *testing.T) {
		before := dump(t, st)
		fresh := &store.User{ID: store.NewID(clk.now()), Handle: "fresh", Attributes: []store.Attribute{{Name: "new_name", Value: "v"}}}
		thief := &store.User{ID: store.NewID(clk.now()), Handle: "taken"}
		err := st.LoadBulk(ctx, &storage.Bulk{Users: []*store.User{fresh, thief}, Progress: &storage.BulkProgress{Name: "test", Value: []byte("6")}})
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(err))
		renamed := *f.a
		renamed.Handle = "reader_x" // x's, and x keeps it
		err = st.LoadBulk(ctx, &storage.Bulk{Users: []*store.User{&renamed}})
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(err))
		twice := &store.User{ID: store.NewID(clk.now()), Handle: "fresh"}
		err = st.LoadBulk(ctx, &storage.Bulk{Users: []*store.User{fresh, twice}})
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "one handle twice in a batch")
		assert.Equal(t, before, dump(t, st), "nothing of the batches written")
	})

	t.Run("OKSwapHandles", func(t *testing.T) {
		a, b := *f.a, *f.b
		a.Handle, b.Handle = f.b.Handle, f.a.Handle
		require.NoError(t, st.LoadBulk(ctx, &storage.Bulk{Users: []*store.User{&a, &b}}))
		got, err := st.FindUserByHandle(ctx, "author_a")
		require.NoError(t, err)
		assert.Equal(t, b.ID, got.ID)
		got, err = st.FindUserByHandle(ctx, "author_b")
		require.NoError(t, err)
		assert.Equal(t, a.ID, got.ID)
		n, err := st.Database().Collection("handles").CountDocuments(ctx, bson.D{})
		require.NoError(t, err)
		assert.Equal(t, int64(6), n, "one claim per user")
	})

	t.Run("ErrInvalid", func(t *testing.T) {
		before := dump(t, st)
		items := f.inbox[:3]
		for name, b := range map[string]*storage.Bulk{
			"inbox in LayoutNone":  {Layout: storage.LayoutNone, Inboxes: []storage.BulkInbox{{Owner: f.x.ID, Items: items}}},
			"oldest first":         {Layout: storage.LayoutBuckets, Inboxes: []storage.BulkInbox{{Owner: f.x.ID, Items: []store.InboxItem{items[1], items[0]}}}},
			"a message twice":      {Layout: storage.LayoutBuckets, Inboxes: []storage.BulkInbox{{Owner: f.x.ID, Items: []store.InboxItem{items[0], items[0]}}}},
			"an owner twice":       {Layout: storage.LayoutEntries, Inboxes: []storage.BulkInbox{{Owner: f.x.ID, Items: items}, {Owner: f.x.ID}}},
			"an edge twice":        {Edges: []storage.Edge{{Follower: f.x.ID, Followee: f.c.ID}, {Follower: f.x.ID, Followee: f.c.ID}}},
			"a user without an ID": {Users: []*store.User{{Handle: "nobody"}}},
		} {
			err := st.LoadBulk(ctx, b)
			assert.Equal(t, store.EINVALID, store.ErrorCode(err), name)
		}
		assert.Equal(t, before, dump(t, st))
		err := st.LoadBulk(ctx, &storage.Bulk{Layout: storage.LayoutCache, Inboxes: []storage.BulkInbox{{Owner: f.x.ID}}})
		assert.NoError(t, err, "an empty inbox in a layout that stores none is ignored")
	})

	t.Run("ErrOwnerNotLoaded", func(t *testing.T) {
		err := st.LoadBulk(ctx, &storage.Bulk{Layout: storage.LayoutEntries, Inboxes: []storage.BulkInbox{{Owner: store.NewID(clk.now()), Items: f.inbox[:1]}}})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	})
}

// TestStore_LoadBulkLikes: a loaded like is a finished one, which Unlike
// takes back from its count and its lists; a pair liked anew since a load
// keeps its new like when the batch is loaded again.
func TestStore_LoadBulkLikes(t *testing.T) {
	ctx := context.Background()
	f := newBulkFixture(t, storage.LayoutBuckets)
	f.load(t)
	changed, err := f.st.Unlike(ctx, f.x.ID, f.msgs[0].Key())
	require.NoError(t, err)
	require.True(t, changed)
	got, err := f.st.FindMessageByID(ctx, f.msgs[0].ID)
	require.NoError(t, err)
	assert.Equal(t, 1, got.LikeCount)
	likers, err := f.st.ListLikers(ctx, f.msgs[0].ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.Like{f.likes[1]}, likers)

	changed, err = f.st.Like(ctx, f.x.ID, f.msgs[0].Key(), f.clk.now())
	require.NoError(t, err)
	require.True(t, changed)
	again, err := f.st.ListLikes(ctx, f.x.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.NotEqual(t, f.likes[0].ID, again[0].ID)
	require.NoError(t, f.st.LoadBulk(ctx, f.batches[4]))
	likes, err := f.st.ListLikes(ctx, f.x.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, again, likes, "the pair keeps its like")
}

// TestStore_LoadBulkReposts: a loaded repost is a finished one: loaded
// again it changes nothing, its guard makes a second repost CONFLICT,
// FindReposts finds it, and its deletion takes it out of its original's
// and its reposter's counts and frees the pair for a new repost.
func TestStore_LoadBulkReposts(t *testing.T) {
	ctx := context.Background()
	f := newBulkFixture(t, storage.LayoutBuckets)
	orig := f.msgs[5]
	at := f.clk.now()
	r := &store.Message{ID: store.NewID(at), AuthorID: f.y.ID, Kind: store.KindRepost, CreatedAt: at, RepostOfID: orig.ID, RepostOfAuthorID: f.a.ID}
	orig.RepostCount, f.y.MessageCount = 1, 1
	reposts := &storage.Bulk{Messages: []*store.Message{r}, Progress: &storage.BulkProgress{Name: "test", Value: []byte("reposts")}}
	f.batches = append(f.batches, reposts)
	f.load(t)
	once := dump(t, f.st)
	require.NoError(t, f.st.LoadBulk(ctx, reposts))
	assert.Equal(t, once, dump(t, f.st), "loading the reposts again")

	got, err := f.st.FindMessageByID(ctx, r.ID)
	require.NoError(t, err)
	assert.Equal(t, r, got)
	count := func(id store.ID) int {
		m, err := f.st.FindMessageByID(ctx, id)
		require.NoError(t, err)
		return m.RepostCount
	}
	assert.Equal(t, 1, count(orig.ID))
	found, err := f.st.FindReposts(ctx, f.y.ID, []store.MessageKey{orig.Key(), f.msgs[6].Key()})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{r.ID, store.NilID}, found)
	again := *r
	again.ID = store.NewID(f.clk.now())
	again.CreatedAt = again.ID.Time().UTC()
	err = f.st.CreateMessage(ctx, &again, nil)
	assert.Equal(t, store.ECONFLICT, store.ErrorCode(err), "%v", err)

	require.NoError(t, f.st.DeleteMessage(ctx, r.ID, nil))
	assert.Equal(t, 0, count(orig.ID))
	u, err := f.st.FindUserByID(ctx, f.y.ID)
	require.NoError(t, err)
	assert.Equal(t, 0, u.MessageCount, "the deletion counts the loaded repost out")
	require.NoError(t, f.st.CreateMessage(ctx, &again, nil), "the pair is free again")
	assert.Equal(t, 1, count(orig.ID))
}

// TestStore_LoadBulkReplacesInbox: a loaded inbox replaces what its owner
// held: a shorter one leaves no entry or bucket of the longer behind.
func TestStore_LoadBulkReplacesInbox(t *testing.T) {
	ctx := context.Background()
	for _, lay := range []storage.Layout{storage.LayoutBuckets, storage.LayoutEntries} {
		f := newBulkFixture(t, lay)
		f.load(t)
		require.NoError(t, f.st.LoadBulk(ctx, &storage.Bulk{Layout: lay, Inboxes: []storage.BulkInbox{{Owner: f.x.ID, Items: f.inbox[70:]}, {Owner: f.y.ID}}}))
		assert.Equal(t, ids(f.inbox[70:]), readAll(t, f.st, f.x.ID, lay, 50, false))
		assert.Empty(t, readAll(t, f.st, f.y.ID, lay, 50, false))
		for o, n := range map[store.ID]int{f.x.ID: 50, f.y.ID: 0} {
			_, c, err := f.st.ReadInbox(ctx, storage.InboxFilter{Owner: o, Layout: lay, Range: store.Forward(store.NilID, 1)})
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Total: n, Unread: n}, c)
		}
		if lay == storage.LayoutBuckets {
			assert.Len(t, bucketsOf(t, f.st, f.x.ID), 1)
			assert.Empty(t, bucketsOf(t, f.st, f.y.ID))
		}
	}
}

// TestStore_LoadBulkRoundTrips reports the round trips of each kind of
// batch, which do not grow with its size.
func TestStore_LoadBulkRoundTrips(t *testing.T) {
	f := newBulkFixture(t, storage.LayoutBuckets)
	want := []struct {
		what  string
		trips int64
	}{
		{"users (read claims, users, claims, progress)", 4},
		{"edges (followees, followers, progress)", 3},
		{"messages (messages, progress)", 2},
		{"messages (messages, progress)", 2},
		{"likes (likes, progress)", 2},
		{"inboxes (buckets, delivery records, counts, progress)", 4},
		{"reposts (guards, messages, progress)", 3},
	}
	at := f.clk.now()
	f.batches = append(f.batches, &storage.Bulk{Messages: []*store.Message{{ID: store.NewID(at), AuthorID: f.y.ID, Kind: store.KindRepost, CreatedAt: at,
		RepostOfID: f.msgs[5].ID, RepostOfAuthorID: f.a.ID}}, Progress: &storage.BulkProgress{Name: "test", Value: []byte("reposts")}})
	for i, b := range f.batches {
		f.trips.Store(0)
		require.NoError(t, f.st.LoadBulk(context.Background(), b))
		if i == 0 {
			// The first batch registers the attribute names: a few trips
			// per new name, once; a token is cached for good after.
			t.Logf("first batch of users, registering 2 attribute names: %d round trips", f.trips.Load())
			f.trips.Store(0)
			require.NoError(t, f.st.LoadBulk(context.Background(), b))
		}
		t.Logf("batch of %s: %d round trips", want[i].what, f.trips.Load())
		assert.Equal(t, want[i].trips, f.trips.Load(), want[i].what)
	}
}

// TestStore_LoadBulkService runs a Service over a loaded store: a deletion
// of a loaded message retracts its loaded entries, a new post reaches the
// loaded followers, an unfollow removes the author's loaded entries, and
// a mark-read recounts loaded entries.
func TestStore_LoadBulkService(t *testing.T) {
	ctx := context.Background()
	for _, strat := range []service.Strategy{service.StrategyBucket, service.StrategyWrite} {
		t.Run(string(strat), func(t *testing.T) {
			lay := strat.Layout()
			f := newBulkFixture(t, lay)
			f.load(t)
			st := f.st
			clk := &measureClock{t: f.clk.now().Add(time.Hour)}
			var mu sync.Mutex // the fan-out reads the clock too
			now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clk.now() }
			hub := pubsub.NewHub()
			svc := service.NewService(st, hub, service.Options{Strategy: strat, Now: now, PasswordCost: bcrypt.MinCost, ChunkSize: 7, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, svc.Start(ctx))
			t.Cleanup(func() {
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				assert.NoError(t, svc.Close(cctx))
				hub.Close()
			})
			idle := func() { require.Eventually(t, svc.Idle, 20*time.Second, 2*time.Millisecond, "fan-out did not finish") }
			check := func(owner store.ID, want []store.ID) {
				t.Helper()
				assert.Equal(t, want, readAll(t, st, owner, lay, 50, false))
				c, err := svc.InboxCounts(ctx, owner)
				require.NoError(t, err)
				assert.Equal(t, store.InboxCounts{Total: len(want), Unread: len(want)}, c)
			}
			want := ids(f.inbox)

			// A loaded message in the middle bucket is deleted.
			gone := f.msgs[70]
			require.NoError(t, svc.DeleteMessage(ctx, gone.AuthorID, gone.ID))
			idle()
			want = slices.DeleteFunc(want, func(id store.ID) bool { return id == gone.ID })
			check(f.x.ID, want)
			check(f.y.ID, want)
			a, err := st.FindUserByID(ctx, f.a.ID)
			require.NoError(t, err)
			assert.Equal(t, 109, a.MessageCount, "a loaded message is counted, so its deletion counts it out")

			// A new post by a loaded author reaches the loaded followers.
			m, err := svc.PostMessage(ctx, f.b.ID, service.PostInput{Text: "after the load"})
			require.NoError(t, err)
			idle()
			want = append([]store.ID{m.ID}, want...)
			check(f.x.ID, want)
			check(f.y.ID, want)
			if lay == storage.LayoutBuckets {
				bs := bucketsOf(t, st, f.x.ID)
				require.Len(t, bs, 3, "into the newest bucket, which had 20")
				assert.Len(t, bs[2].Entries, 21)
			}

			// x unfollows a: a's loaded entries leave x's inbox.
			_, err = svc.Unfollow(ctx, f.x.ID, f.a.ID)
			require.NoError(t, err)
			idle()
			var fromB []store.ID
			for _, it := range f.inbox {
				if it.AuthorID == f.b.ID {
					fromB = append(fromB, it.MessageID)
				}
			}
			check(f.x.ID, append([]store.ID{m.ID}, fromB...))
			check(f.y.ID, want)
			a, err = st.FindUserByID(ctx, f.a.ID)
			require.NoError(t, err)
			x, err := st.FindUserByID(ctx, f.x.ID)
			require.NoError(t, err)
			assert.Equal(t, []int{1, 1}, []int{a.FollowerCount, x.FollowingCount}, "a loaded edge unfollowed")

			// y marks read up to a loaded message: the loaded entries above
			// it are counted.
			c, err := st.MarkInboxRead(ctx, f.y.ID, lay, want[10])
			require.NoError(t, err)
			assert.Equal(t, store.InboxCounts{Total: len(want), Unread: 10, ReadMark: want[10]}, c)
		})
	}
}
