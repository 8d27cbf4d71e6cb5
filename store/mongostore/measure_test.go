package mongostore_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// countingClient counts every collection call: each is one round trip to
// MongoDB.
type countingClient struct {
	lungo.IClient
	n    *atomic.Int64
	docs *atomic.Int64 // documents read from the inbox collections
}

func (c countingClient) Database(name string, opts ...*options.DatabaseOptions) lungo.IDatabase {
	return countingDB{c.IClient.Database(name, opts...), c.n, c.docs}
}

type countingDB struct {
	lungo.IDatabase
	n    *atomic.Int64
	docs *atomic.Int64
}

func (d countingDB) Collection(name string, opts ...*options.CollectionOptions) lungo.ICollection {
	var docs *atomic.Int64
	if name == "buckets" || name == "entries" {
		docs = d.docs
	}
	return countingColl{d.IDatabase.Collection(name, opts...), d.n, docs}
}

type countingColl struct {
	lungo.ICollection
	n    *atomic.Int64
	docs *atomic.Int64
}

func (c countingColl) BulkWrite(ctx context.Context, m []mongo.WriteModel, o ...*options.BulkWriteOptions) (*mongo.BulkWriteResult, error) {
	c.n.Add(1)
	return c.ICollection.BulkWrite(ctx, m, o...)
}
func (c countingColl) CountDocuments(ctx context.Context, f interface{}, o ...*options.CountOptions) (int64, error) {
	c.n.Add(1)
	return c.ICollection.CountDocuments(ctx, f, o...)
}
func (c countingColl) DeleteMany(ctx context.Context, f interface{}, o ...*options.DeleteOptions) (*mongo.DeleteResult, error) {
	c.n.Add(1)
	return c.ICollection.DeleteMany(ctx, f, o...)
}
func (c countingColl) DeleteOne(ctx context.Context, f interface{}, o ...*options.DeleteOptions) (*mongo.DeleteResult, error) {
	c.n.Add(1)
	return c.ICollection.DeleteOne(ctx, f, o...)
}
func (c countingColl) Find(ctx context.Context, f interface{}, o ...*options.FindOptions) (lungo.ICursor, error) {
	c.n.Add(1)
	cur, err := c.ICollection.Find(ctx, f, o...)
	if err != nil || c.docs == nil {
		return cur, err
	}
	return countingCursor{cur, c.docs}, nil
}

// countingCursor counts the documents read through All: the inbox
// documents a read touches.
type countingCursor struct {
	lungo.ICursor
	docs *atomic.Int64
}

func (c countingCursor) All(ctx context.Context, results interface{}) error {
	err := c.ICursor.All(ctx, results)
	c.docs.Add(int64(reflect.ValueOf(results).Elem().Len()))
	return err
}
func (c countingColl) FindOne(ctx context.Context, f interface{}, o ...*options.FindOneOptions) lungo.ISingleResult {
	c.n.Add(1)
	return c.ICollection.FindOne(ctx, f, o...)
}
func (c countingColl) FindOneAndDelete(ctx context.Context, f interface{}, o ...*options.FindOneAndDeleteOptions) lungo.ISingleResult {
	c.n.Add(1)
	return c.ICollection.FindOneAndDelete(ctx, f, o...)
}
func (c countingColl) FindOneAndUpdate(ctx context.Context, f, u interface{}, o ...*options.FindOneAndUpdateOptions) lungo.ISingleResult {
	c.n.Add(1)
	return c.ICollection.FindOneAndUpdate(ctx, f, u, o...)
}
func (c countingColl) InsertOne(ctx context.Context, d interface{}, o ...*options.InsertOneOptions) (*mongo.InsertOneResult, error) {
	c.n.Add(1)
	return c.ICollection.InsertOne(ctx, d, o...)
}
func (c countingColl) UpdateOne(ctx context.Context, f, u interface{}, o ...*options.UpdateOptions) (*mongo.UpdateResult, error) {
	c.n.Add(1)
	return c.ICollection.UpdateOne(ctx, f, u, o...)
}

// measureClock hands out increasing times, so that IDs order as the test
// makes them.
type measureClock struct{ t time.Time }

func (c *measureClock) now() time.Time {
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

// post stores a message by author with its JobDeliver in layout lay.
func post(t *testing.T, b *mongostore.Store, clk *measureClock, author store.ID, lay storage.Layout, text string) *storage.Job {
	now := clk.now()
	m := &store.Message{ID: store.NewID(now), AuthorID: author, Text: text, Kind: store.KindPost, CreatedAt: now}
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: lay, MessageID: m.ID, AuthorID: author, CreatedAt: now}
	require.NoError(t, b.CreateMessage(context.Background(), m, j))
	return j
}

// deliver runs a JobDeliver as the fan-out does: followers in chunks.
func deliver(t *testing.T, b *mongostore.Store, j *storage.Job, chunk int, at time.Time) (chunks int) {
	ctx := context.Background()
	for {
		after := store.NilID
		if len(j.Cursor) == len(after) {
			copy(after[:], j.Cursor)
		}
		fs, err := b.ListFollowers(ctx, j.AuthorID, store.Forward(after, chunk))
		require.NoError(t, err)
		d := storage.Delivery{Job: j, Owners: fs, At: at, CacheCap: 50, Done: len(fs) < chunk}
		if len(fs) > 0 {
			d.Cursor = fs[len(fs)-1][:]
		}
		_, err = b.DeliverInbox(ctx, d)
		require.NoError(t, err)
		chunks++
		if d.Done {
			return chunks
		}
		j.Cursor = d.Cursor
	}
}

// TestRoundTrips measures MongoDB round trips for a post to N followers
// (delivered in chunks), per layout, and for reading an inbox page and its
// messages, with the inbox documents the read touches; and checks they do
// not grow with the page or chunk size. Sizes are small because lungo
// scans its collections.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	var n, docs atomic.Int64
	st := mongostore.New(countingClient{client, &n, &docs}, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	// A process's fan-out stores the number of lanes when it starts; until
	// one is stored a message job reads it again (ensureLanes), one more
	// round trip, so the steady state is measured with one stored.
	_, err = st.FanoutLanes(ctx, 1)
	require.NoError(t, err)
	const chunk, fans = 12, 30
	clk := &measureClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}

	author := &store.User{ID: store.NewID(clk.now()), Handle: "author", CreatedAt: clk.t, LastSeenAt: clk.t}
	require.NoError(t, st.CreateUser(ctx, author))
	var followers []store.ID
	for i := range fans {
		now := clk.now()
		u := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("f%d", i), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		_, err := st.Follow(ctx, u.ID, author.ID, now)
		require.NoError(t, err)
		followers = append(followers, u.ID)
	}
	// A second author, followed by one reader only, fills that reader's
	// inbox past a bucket cheaply.
	other := &store.User{ID: store.NewID(clk.now()), Handle: "other", CreatedAt: clk.t, LastSeenAt: clk.t}
	require.NoError(t, st.CreateUser(ctx, other))
	_, err = st.Follow(ctx, followers[0], other.ID, clk.now())
	require.NoError(t, err)
	for _, f := range followers {
		require.NoError(t, st.PutInboxCache(ctx, &storage.InboxCache{Owner: f, Complete: true, Expires: clk.t.Add(time.Hour)}, 50))
	}

	for _, lay := range []struct {
		name      string
		layout    storage.Layout
		perChunk  int64
		perJob    int64
		postTrips int64
	}{
		// list followers, check job, read owners, store the chunk's plan,
		// count, write entries, record, advance
		{"entries", storage.LayoutEntries, 8, 1, 5},
		{"buckets", storage.LayoutBuckets, 8, 1, 5},
		// list followers, check job, write caches, record, advance (no activity filter)
		{"cache", storage.LayoutCache, 5, 1, 5},
		// list followers, check job, record, advance
		{"none", storage.LayoutNone, 4, 1, 5},
	} {
		t.Run(lay.name, func(t *testing.T) {
			n.Store(0)
			j := post(t, st, clk, author.ID, lay.layout, "post")
			posted := n.Load()
			chunks := deliver(t, st, j, chunk, clk.now())
			t.Logf("%s: post: %d round trips; delivery to %d followers in %d chunks of %d: %d round trips",
				lay.name, posted, fans, chunks, chunk, n.Load()-posted)
			assert.Equal(t, lay.postTrips, posted, "check users, insert, count (marked), mark counted, forget marker")
			assert.Equal(t, int64(chunks)*lay.perChunk+lay.perJob, n.Load()-posted, "a fixed number per chunk, and 1 per job (record it as running)")
			for i := range 55 {
				deliver(t, st, post(t, st, clk, other.ID, lay.layout, fmt.Sprintf("post %d", i)), chunk, clk.now())
			}
			if !lay.layout.Stores() {
				return
			}
			var before store.ID
			for _, size := range []int{5, 50, 100} {
				n.Store(0)
				docs.Store(0)
				items, c, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: followers[0], Layout: lay.layout, Range: store.Forward(store.NilID, size)})
				require.NoError(t, err)
				read, touched := n.Load(), docs.Load()
				_, err = st.FindMessagesByKeys(ctx, keysOf(items))
				require.NoError(t, err)
				require.Len(t, items, min(size, 56))
				require.Equal(t, 56, c.Total)
				t.Logf("%s: inbox page of %d with messages: %d round trips (entries, counts, messages); %d inbox documents read",
					lay.name, size, n.Load(), touched)
				assert.Equal(t, int64(3), n.Load(), "entries, counts, then messages")
				assert.Equal(t, int64(2), read)
				if lay.layout == storage.LayoutBuckets {
					assert.LessOrEqual(t, touched, int64(map[int]int{5: 2, 50: 2, 100: 3}[size]), "Social Inboxes: 2 documents for 50 items, 3 for 100")
				}
				if size == 50 {
					before = items[len(items)-1].MessageID
				}
			}
			// A deep page starts at its place.
			n.Store(0)
			docs.Store(0)
			items, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: followers[0], Layout: lay.layout, Range: store.Forward(before, 5)})
			require.NoError(t, err)
			require.Len(t, items, 5)
			t.Logf("%s: a page of 5 below the 50th entry: %d round trips; %d inbox documents read", lay.name, n.Load(), docs.Load())
			assert.Equal(t, int64(2), n.Load())

			// A JobHideReposts's chunks: the entries of 20 read (the
			// service's ReadInbox, and its messages, aside), 3 removed.
			hide := &storage.Job{ID: store.NewID(clk.now()), Kind: storage.JobHideReposts, Layout: lay.layout, OwnerID: followers[0], AuthorID: other.ID}
			require.NoError(t, st.StoreJob(ctx, hide))
			from := store.NilID
			for i, tc := range []struct {
				done  bool
				trips int64
				why   string
			}{
				{false, 7, "find the job, the owner's head, record it as running, find the entries there, count (marked), remove, advance the job"},
				{true, 6, "the same, but the job is recorded as running already, and the last chunk ends it"},
			} {
				chunkItems, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: followers[0], Layout: lay.layout, Range: store.Forward(from, 20)})
				require.NoError(t, err)
				require.Len(t, chunkItems, 20)
				n.Store(0)
				r := storage.OwnerRemoval{Job: hide, MessageIDs: []store.ID{chunkItems[0].MessageID, chunkItems[5].MessageID, chunkItems[19].MessageID}, Done: tc.done}
				if !tc.done {
					r.Cursor = chunkItems[19].MessageID[:]
				}
				changes, err := st.RemoveOwnerEntries(ctx, r)
				require.NoError(t, err)
				require.Len(t, changes, 3)
				require.Equal(t, 56-3*(i+1), changes[2].Counts.Total)
				t.Logf("%s: a hide job's chunk removing 3 entries: %d round trips", lay.name, n.Load())
				assert.Equal(t, tc.trips, n.Load(), tc.why)
				hide.Cursor, from = r.Cursor, chunkItems[19].MessageID
			}
		})
	}
	t.Run("users by handles", func(t *testing.T) {
		n.Store(0)
		users, err := st.FindUsersByHandles(ctx, []string{"f0", "nobody", "author", "f1", "f2"})
		require.NoError(t, err)
		require.Len(t, users, 5)
		assert.Nil(t, users[1])
		assert.Equal(t, author.ID, users[2].ID)
		t.Logf("find 5 users by handle (a message's mentions): %d round trips", n.Load())
		assert.Equal(t, int64(2), n.Load(), "the handles' claims, then their users, however many")
	})
	t.Run("update profile", func(t *testing.T) {
		n.Store(0)
		bio := "Writes things."
		u, err := st.UpdateUser(ctx, author.ID, storage.UserUpdate{Bio: &bio})
		require.NoError(t, err)
		assert.Equal(t, bio, u.Bio)
		t.Logf("update a profile: %d round trips", n.Load())
		assert.Equal(t, int64(1), n.Load(), "one find-and-modify returns the user as changed")
		n.Store(0)
		name := "The Author"
		_, err = st.UpdateUser(ctx, author.ID, storage.UserUpdate{DisplayName: &name})
		require.NoError(t, err)
		t.Logf("rename: %d round trips", n.Load())
		assert.Equal(t, int64(2), n.Load(), "read the handle, then one find-and-modify sets the name and its search terms")
	})
	t.Run("search users", func(t *testing.T) {
		n.Store(0)
		docs.Store(0)
		users, err := st.SearchUsers(ctx, "f", 200)
		require.NoError(t, err)
		assert.Len(t, users, fans, "f0..f29")
		t.Logf("search users by a prefix (%d found): %d round trips", len(users), n.Load())
		assert.Equal(t, int64(1), n.Load(), "one range of the search index, users and all")
	})
	t.Run("followers of a reply's answered user", func(t *testing.T) {
		// A chunk of a reply's delivery checks which of its owners follow
		// the user answered: one covered query, whatever the chunk's size.
		n.Store(0)
		docs.Store(0)
		follows, err := st.FindFollowers(ctx, author.ID, append(slices.Clone(followers), other.ID))
		require.NoError(t, err)
		require.Len(t, follows, len(followers)+1)
		assert.True(t, follows[0])
		assert.False(t, follows[len(followers)], "other does not follow the author")
		t.Logf("which of %d users follow one: %d round trips", len(follows), n.Load())
		assert.Equal(t, int64(1), n.Load())
	})
	t.Run("like", func(t *testing.T) {
		j := post(t, st, clk, author.ID, storage.LayoutNone, "liked")
		key := store.MessageKey{ID: j.MessageID, AuthorID: author.ID}
		fan := followers[1]
		for _, step := range []struct {
			what  string
			do    func() (bool, error)
			want  bool
			trips int64
			why   string
		}{
			{"like", func() (bool, error) { return st.Like(ctx, fan, key, clk.now()) }, true, 7,
				"check the message, lock, upsert the like, count (marked), mark it done, forget the marker, unlock"},
			{"like again", func() (bool, error) { return st.Like(ctx, fan, key, clk.now()) }, false, 4,
				"check the message, lock, upsert finds it done, unlock"},
			{"unlike", func() (bool, error) { return st.Unlike(ctx, fan, key) }, true, 7,
				"check the message, lock, mark the like unliking, uncount (marked), delete it, forget the markers, unlock"},
			{"unlike again", func() (bool, error) { return st.Unlike(ctx, fan, key) }, false, 5,
				"check the message, lock, no like done to mark, none at all, unlock"},
		} {
			n.Store(0)
			ok, err := step.do()
			require.NoError(t, err)
			assert.Equal(t, step.want, ok, step.what)
			t.Logf("%s: %d round trips", step.what, n.Load())
			assert.Equal(t, step.trips, n.Load(), step.why)
		}
		n.Store(0)
		_, err := st.FindLiked(ctx, fan, keysOf(nil))
		require.NoError(t, err)
		assert.Zero(t, n.Load(), "no keys, no query")
	})
	t.Run("block", func(t *testing.T) {
		blocker, target := followers[3], followers[4]
		for _, step := range []struct {
			what  string
			do    func() (bool, error)
			want  bool
			trips int64
			why   string
		}{
			{"block", func() (bool, error) { return st.Block(ctx, blocker, target, store.RelationBlock, clk.now()) }, true, 2,
				"check the target, insert the edge"},
			{"block again", func() (bool, error) { return st.Block(ctx, blocker, target, store.RelationBlock, clk.now()) }, false, 2,
				"check the target, an insert the unique index refuses"},
			{"mute", func() (bool, error) { return st.Block(ctx, blocker, target, store.RelationMute, clk.now()) }, true, 2,
				"check the target, insert the edge"},
			{"unmute", func() (bool, error) { return st.Unblock(ctx, blocker, target, store.RelationMute) }, true, 1,
				"delete the edge"},
			{"unmute again", func() (bool, error) { return st.Unblock(ctx, blocker, target, store.RelationMute) }, false, 1,
				"a delete that finds none"},
		} {
			n.Store(0)
			ok, err := step.do()
			require.NoError(t, err)
			assert.Equal(t, step.want, ok, step.what)
			t.Logf("%s: %d round trips", step.what, n.Load())
			assert.Equal(t, step.trips, n.Load(), step.why)
		}
		for _, read := range []struct {
			what string
			do   func() error
		}{
			{"list blocked", func() error {
				_, err := st.ListBlocked(ctx, blocker, store.RelationBlock, store.Forward(store.NilID, 20))
				return err
			}},
			{"whether a page's authors are blocked", func() error { _, err := st.FindBlocked(ctx, blocker, store.RelationBlock, followers); return err }},
			{"which of a chunk's owners block an author", func() error { _, err := st.FindBlockers(ctx, target, followers[:chunk]); return err }},
			{"all a reader filters", func() error { _, err := st.ListFiltered(ctx, blocker, 1000); return err }},
		} {
			n.Store(0)
			require.NoError(t, read.do())
			t.Logf("%s: %d round trips", read.what, n.Load())
			assert.Equal(t, int64(1), n.Load(), read.what)
		}
		n.Store(0)
		_, err := st.FindBlocked(ctx, blocker, store.RelationBlock, nil)
		require.NoError(t, err)
		_, err = st.FindBlockers(ctx, target, nil)
		require.NoError(t, err)
		assert.Zero(t, n.Load(), "no targets or owners, no query")
	})
	t.Run("follow request", func(t *testing.T) {
		fan, locked := followers[5], followers[6]
		for _, step := range []struct {
			what  string
			do    func() (bool, error)
			want  bool
			trips int64
			why   string
		}{
			{"request", func() (bool, error) { return st.RequestFollow(ctx, fan, locked, clk.now()) }, true, 2,
				"check the target, insert the request"},
			{"request again", func() (bool, error) { return st.RequestFollow(ctx, fan, locked, clk.now()) }, false, 2,
				"check the target, an insert the unique index refuses"},
			{"remove (approve, reject, withdraw)", func() (bool, error) { return st.RemoveFollowRequest(ctx, fan, locked) }, true, 1,
				"delete the request"},
			{"remove again", func() (bool, error) { return st.RemoveFollowRequest(ctx, fan, locked) }, false, 1,
				"a delete that finds none"},
		} {
			n.Store(0)
			ok, err := step.do()
			require.NoError(t, err)
			assert.Equal(t, step.want, ok, step.what)
			t.Logf("%s: %d round trips", step.what, n.Load())
			assert.Equal(t, step.trips, n.Load(), step.why)
		}
		for _, read := range []struct {
			what string
			do   func() error
		}{
			{"list follow requests", func() error {
				_, err := st.ListFollowRequests(ctx, locked, store.Forward(store.NilID, 20))
				return err
			}},
			{"whether a page's users were asked", func() error { _, err := st.FindFollowRequests(ctx, fan, followers); return err }},
			{"count follow requests", func() error { _, err := st.CountFollowRequests(ctx, locked); return err }},
		} {
			n.Store(0)
			require.NoError(t, read.do())
			t.Logf("%s: %d round trips", read.what, n.Load())
			assert.Equal(t, int64(1), n.Load(), read.what)
		}
		n.Store(0)
		_, err := st.FindFollowRequests(ctx, fan, nil)
		require.NoError(t, err)
		assert.Zero(t, n.Load(), "no targets, no query")
	})
	t.Run("reply", func(t *testing.T) {
		parent := post(t, st, clk, author.ID, storage.LayoutNone, "asked")
		now := clk.now()
		m := &store.Message{ID: store.NewID(now), AuthorID: followers[2], Text: "answered", Kind: store.KindReply, CreatedAt: now,
			ReplyToID: parent.MessageID, ReplyToAuthorID: author.ID, RootID: parent.MessageID, RootAuthorID: author.ID}
		n.Store(0)
		require.NoError(t, st.CreateMessage(ctx, m, nil))
		t.Logf("reply: %d round trips", n.Load())
		assert.Equal(t, int64(7), n.Load(), "check users, insert, count the author (marked), count the parent (marked), mark counted, forget both markers")
		n.Store(0)
		require.NoError(t, st.DeleteMessage(ctx, m.ID, nil))
		t.Logf("delete reply (no job): %d round trips", n.Load())
		assert.Equal(t, int64(6), n.Load(), "find its author, delete it, uncount the author and the parent (marked), forget both markers")
		got, err := st.FindMessageByID(ctx, parent.MessageID)
		require.NoError(t, err)
		assert.Zero(t, got.ReplyCount)
	})
	t.Run("repost", func(t *testing.T) {
		orig := post(t, st, clk, author.ID, storage.LayoutNone, "reposted")
		fan := followers[3]
		repost := func() (*store.Message, *storage.Job, error) {
			now := clk.now()
			m := &store.Message{ID: store.NewID(now), AuthorID: fan, Kind: store.KindRepost, CreatedAt: now, RepostOfID: orig.MessageID, RepostOfAuthorID: author.ID}
			j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: fan, CreatedAt: now}
			return m, j, st.CreateMessage(ctx, m, j)
		}
		n.Store(0)
		m, _, err := repost()
		require.NoError(t, err)
		t.Logf("repost: %d round trips", n.Load())
		assert.Equal(t, int64(9), n.Load(), "check users, check the original, insert the guard, insert the repost with its job, count the reposter and the original (marked), mark counted, forget both markers")
		n.Store(0)
		_, _, err = repost()
		require.Equal(t, store.ECONFLICT, store.ErrorCode(err))
		t.Logf("repost again (CONFLICT): %d round trips", n.Load())
		assert.Equal(t, int64(5), n.Load(), "check users, check the original, the guard's duplicate key, read the guard, find its repost live")
		keys := []store.MessageKey{{ID: orig.MessageID, AuthorID: author.ID}, {ID: m.ID, AuthorID: fan}}
		n.Store(0)
		found, err := st.FindReposts(ctx, fan, keys)
		require.NoError(t, err)
		assert.Equal(t, []store.ID{m.ID, store.NilID}, found)
		t.Logf("FindReposts (%d messages): %d round trips", len(keys), n.Load())
		assert.Equal(t, int64(1), n.Load())
		n.Store(0)
		listed, err := st.ListReposts(ctx, orig.MessageID, store.Forward(store.NilID, 100))
		require.NoError(t, err)
		require.Len(t, listed, 1)
		assert.Equal(t, m.ID, listed[0].ID)
		t.Logf("ListReposts (a page of 100): %d round trips", n.Load())
		assert.Equal(t, int64(1), n.Load(), "one query on the partial index (ro, _id)")
		n.Store(0)
		require.NoError(t, st.DeleteMessage(ctx, m.ID, &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: fan, CreatedAt: m.CreatedAt}))
		t.Logf("unrepost (with its retraction): %d round trips", n.Load())
		assert.Equal(t, int64(8), n.Load(), "find its author, mark it deleted with its retraction, release the guard, uncount the reposter and the original (marked), mark uncounted, forget both markers")
		m, _, err = repost()
		require.NoError(t, err, "a repost again once unreposted")
		n.Store(0)
		require.NoError(t, st.DeleteMessage(ctx, m.ID, nil))
		t.Logf("unrepost (no job): %d round trips", n.Load())
		assert.Equal(t, int64(7), n.Load(), "find its author, delete it, uncount the reposter and the original (marked), forget both markers, release the guard")
		got, err := st.FindMessageByID(ctx, orig.MessageID)
		require.NoError(t, err)
		assert.Zero(t, got.RepostCount)
	})
	t.Run("notification", func(t *testing.T) {
		j := post(t, st, clk, author.ID, storage.LayoutNone, "liked by many")
		key := store.MessageKey{ID: j.MessageID, AuthorID: author.ID}
		gk := store.NotificationGroupKey(store.NotifyLiked, key.ID, clk.t)
		notice := func(actor store.ID) storage.Notice {
			return storage.Notice{Owner: author.ID, Kind: store.NotifyLiked, Key: gk, Actor: actor, Message: key, ID: store.NewID(clk.now())}
		}
		var group store.NotificationGroup
		for _, step := range []struct {
			what  string
			n     storage.Notice
			want  bool
			trips int64
			why   string
		}{
			{"new group", notice(followers[0]), true, 5, "claim the head, upsert the group, insert the actor, count it in the group, count the feed and release"},
			{"new actor, group moves", notice(followers[1]), true, 5, "the same steps: the move is the group's t"},
			{"actor again", notice(followers[0]), false, 4, "claim, find the group, the actor's insert is a duplicate, release"},
		} {
			n.Store(0)
			res, err := st.Notify(ctx, step.n)
			require.NoError(t, err)
			assert.Equal(t, step.want, res.Changed, step.what)
			group = res.Group
			t.Logf("notify, %s: %d round trips", step.what, n.Load())
			assert.Equal(t, step.trips, n.Load(), step.why)
		}
		for _, size := range []int{5, 50} {
			n.Store(0)
			_, _, err := st.ReadNotifications(ctx, author.ID, store.Forward(store.NilID, size))
			require.NoError(t, err)
			t.Logf("notifications page of %d: %d round trips", size, n.Load())
			assert.Equal(t, int64(2), n.Load(), "the head, then one range of (o, t)")
		}
		n.Store(0)
		_, err := st.MarkNotificationsRead(ctx, author.ID, group.LatestID)
		require.NoError(t, err)
		t.Logf("mark notifications read: %d round trips", n.Load())
		assert.Equal(t, int64(3), n.Load(), "claim, count the groups above the mark, set the mark and release")

		// A block or a mute of an actor: followers[0] is in the group of
		// two above (not the newest); alone in a group of its own; and
		// the newest of a third group.
		j2 := post(t, st, clk, author.ID, storage.LayoutNone, "liked by one")
		k2 := store.MessageKey{ID: j2.MessageID, AuthorID: author.ID}
		j3 := post(t, st, clk, author.ID, storage.LayoutNone, "liked by two")
		k3 := store.MessageKey{ID: j3.MessageID, AuthorID: author.ID}
		for _, nt := range []storage.Notice{
			{Owner: author.ID, Kind: store.NotifyLiked, Key: store.NotificationGroupKey(store.NotifyLiked, k2.ID, clk.t), Actor: followers[0], Message: k2, ID: store.NewID(clk.now())},
			{Owner: author.ID, Kind: store.NotifyLiked, Key: store.NotificationGroupKey(store.NotifyLiked, k3.ID, clk.t), Actor: followers[2], Message: k3, ID: store.NewID(clk.now())},
			{Owner: author.ID, Kind: store.NotifyLiked, Key: store.NotificationGroupKey(store.NotifyLiked, k3.ID, clk.t), Actor: followers[0], Message: k3, ID: store.NewID(clk.now())},
		} {
			_, err := st.Notify(ctx, nt)
			require.NoError(t, err)
		}
		for _, step := range []struct {
			what  string
			actor store.ID
			trips int64
			why   string
		}{
			{"an actor in 3 groups, shown in 2", followers[0], 17, "claim, find the actor's groups, plan the first; per group: read it (and its newest actors when the actor is shown), write the group, delete the actor, and count the head with the next plan (the last releases the claim)"},
			{"an actor in none", followers[5], 3, "claim, find none, release"},
		} {
			n.Store(0)
			res, err := st.RemoveNotificationActor(ctx, author.ID, step.actor)
			require.NoError(t, err)
			t.Logf("remove notification actor, %s: %d round trips (%d groups removed, %d updated)", step.what, n.Load(), len(res.Removed), len(res.Updated))
			assert.Equal(t, step.trips, n.Load(), step.why)
		}
	})
	t.Run("change password", func(t *testing.T) {
		n.Store(0)
		_, err := st.RevokeTokens(ctx, author.ID, store.TokenRevocation{All: true, Keep: "this", Now: clk.t, PasswordHash: make([]byte, 60)})
		require.NoError(t, err)
		t.Logf("change password (every other token ended): %d round trips", n.Load())
		assert.Equal(t, int64(2), n.Load(), "read the user, then write it if unchanged: the hash and the tokens together")
	})
	t.Run("delete account", func(t *testing.T) {
		now := clk.now()
		u := &store.User{ID: store.NewID(now), Handle: "leaving", CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		n.Store(0)
		require.NoError(t, st.DeleteUser(ctx, u.ID, clk.now()))
		t.Logf("delete account (the tombstone): %d round trips", n.Load())
		assert.Equal(t, int64(1), n.Load(), "one update of the user document")
		n.Store(0)
		deleted, err := st.ListDeletedUsers(ctx, store.NilID, 100)
		require.NoError(t, err)
		require.Len(t, deleted, 1)
		t.Logf("list deleted accounts (a page): %d round trips", n.Load())
		assert.Equal(t, int64(1), n.Load())
		n.Store(0)
		require.NoError(t, st.PurgeUser(ctx, u.ID))
		t.Logf("purge a deleted account: %d round trips", n.Load())
		assert.Equal(t, int64(3), n.Load(), "read the handle, free it, remove the user")
	})
	t.Run("revoke", func(t *testing.T) {
		exp := clk.t.Add(time.Hour).Truncate(time.Second)
		for _, r := range []store.TokenRevocation{{TokenID: "a", Expires: exp, Now: clk.t}, {All: true, Now: clk.t}} {
			n.Store(0)
			_, err := st.RevokeTokens(ctx, author.ID, r)
			require.NoError(t, err)
			t.Logf("revoke tokens (all: %v): %d round trips", r.All, n.Load())
			assert.Equal(t, int64(2), n.Load(), "read the user, then write it if unchanged")
		}
	})
}

func keysOf(items []store.InboxItem) []store.MessageKey {
	keys := make([]store.MessageKey, len(items))
	for i, it := range items {
		keys[i] = it.Key()
	}
	return keys
}

// TestBytes measures the stored BSON of each kind of document, as the
// store wrote it, against the same document with the long field names of
// FieldNames; and the bytes an inbox entry costs in each layout.
func TestBytes(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	st := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	clk := &measureClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	alice := &store.User{ID: store.NewID(clk.now()), Handle: "alice_1", DisplayName: "Alice Liddell", PasswordHash: make([]byte, 60), CreatedAt: clk.t, LastSeenAt: clk.t}
	bob := &store.User{ID: store.NewID(clk.now()), Handle: "bob_2", PasswordHash: make([]byte, 60), CreatedAt: clk.t, LastSeenAt: clk.t}
	for _, u := range []*store.User{alice, bob} {
		require.NoError(t, st.CreateUser(ctx, u))
	}
	_, err = st.Follow(ctx, bob.ID, alice.ID, clk.now())
	require.NoError(t, err)
	require.NoError(t, st.PutInboxCache(ctx, &storage.InboxCache{Owner: bob.ID, Expires: clk.t.Add(time.Hour)}, 50))
	var last store.ID
	for _, lay := range []storage.Layout{storage.LayoutEntries, storage.LayoutBuckets, storage.LayoutCache} {
		now := clk.now()
		m := &store.Message{ID: store.NewID(now), AuthorID: alice.ID, Text: strings.Repeat("x", 80), Kind: store.KindPost, CreatedAt: now}
		j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: lay, MessageID: m.ID, AuthorID: alice.ID, CreatedAt: now}
		require.NoError(t, st.CreateMessage(ctx, m, j))
		deliver(t, st, j, 100, clk.now())
		last = m.ID
	}
	mentioning := &store.Message{ID: store.NewID(clk.now()), AuthorID: alice.ID, Text: strings.Repeat("x", 80), Kind: store.KindPost, CreatedAt: clk.t,
		Mentions: []store.ID{alice.ID, bob.ID}}
	require.NoError(t, st.CreateMessage(ctx, mentioning, nil))
	_, err = st.MarkInboxRead(ctx, bob.ID, storage.LayoutBuckets, last)
	require.NoError(t, err)
	// Bob likes the last message: the like, and the count it adds to the
	// message (lc, and the emptied markers po its operations leave).
	_, err = st.Like(ctx, bob.ID, store.MessageKey{ID: last, AuthorID: alice.ID}, clk.now())
	require.NoError(t, err)
	// Bob replies to a post of Alice's: the reply (with its thread's root),
	// and the count it adds to the post (rc).
	asked := &store.Message{ID: store.NewID(clk.now()), AuthorID: alice.ID, Text: strings.Repeat("x", 80), Kind: store.KindPost, CreatedAt: clk.t}
	require.NoError(t, st.CreateMessage(ctx, asked, nil))
	reply := &store.Message{ID: store.NewID(clk.now()), AuthorID: bob.ID, Text: strings.Repeat("x", 80), Kind: store.KindReply, CreatedAt: clk.t,
		ReplyToID: asked.ID, ReplyToAuthorID: alice.ID, RootID: asked.ID, RootAuthorID: alice.ID}
	require.NoError(t, st.CreateMessage(ctx, reply, nil))
	// Bob reposts a post of Alice's: the repost (a message with no text),
	// its guard, and the count it adds to the post (rp).
	reposted := &store.Message{ID: store.NewID(clk.now()), AuthorID: alice.ID, Text: strings.Repeat("x", 80), Kind: store.KindPost, CreatedAt: clk.t}
	require.NoError(t, st.CreateMessage(ctx, reposted, nil))
	repost := &store.Message{ID: store.NewID(clk.now()), AuthorID: bob.ID, Kind: store.KindRepost, CreatedAt: clk.t, RepostOfID: reposted.ID, RepostOfAuthorID: alice.ID}
	require.NoError(t, st.CreateMessage(ctx, repost, nil))
	// Bob mutes Alice: one relation.
	_, err = st.Block(ctx, bob.ID, alice.ID, store.RelationMute, clk.now())
	require.NoError(t, err)
	// Alice's account is private, and Bob asks to follow it again.
	private := true
	_, err = st.UpdateUser(ctx, alice.ID, storage.UserUpdate{Private: &private})
	require.NoError(t, err)
	_, err = st.RequestFollow(ctx, bob.ID, alice.ID, clk.now())
	require.NoError(t, err)
	// A user who logged out once: the revoked token stays until it expires.
	_, err = st.RevokeTokens(ctx, alice.ID, store.TokenRevocation{TokenID: strings.Repeat("t", 22), Expires: clk.t.Add(24 * time.Hour), Now: clk.t})
	require.NoError(t, err)

	// Three users like a message of Alice's: one group, three actors, and
	// Alice's feed head.
	for range 3 {
		at := clk.now()
		_, err := st.Notify(ctx, storage.Notice{Owner: alice.ID, Kind: store.NotifyLiked, Key: store.NotificationGroupKey(store.NotifyLiked, last, clk.t),
			Actor: store.NewID(at), Message: store.MessageKey{ID: last, AuthorID: alice.ID}, ID: store.NewID(at)})
		require.NoError(t, err)
	}

	// Carol filled in her profile.
	carol := &store.User{ID: store.NewID(clk.now()), Handle: "carol_3", DisplayName: "Carol", PasswordHash: make([]byte, 60), CreatedAt: clk.t, LastSeenAt: clk.t}
	require.NoError(t, st.CreateUser(ctx, carol))
	dave := &store.User{ID: store.NewID(clk.now()), Handle: "dave_4", DisplayName: "Dave", PasswordHash: make([]byte, 60), CreatedAt: clk.t, LastSeenAt: clk.t}
	require.NoError(t, st.CreateUser(ctx, dave))
	require.NoError(t, st.DeleteUser(ctx, dave.ID, clk.now()))
	bio, web, avatar := strings.Repeat("b", 80), "https://carol.example.com/", "https://carol.example.com/avatar.png"
	_, err = st.UpdateUser(ctx, carol.ID, storage.UserUpdate{Bio: &bio, WebsiteURL: &web, AvatarURL: &avatar})
	require.NoError(t, err)

	raw := func(coll string, filter bson.D) bson.Raw {
		var r bson.Raw
		require.NoError(t, st.Database().Collection(coll).FindOne(ctx, filter).Decode(&r))
		return r
	}
	// Array elements cost their type byte and their index as a key: "0".."49".
	const elem = 1 + 3
	bucket := raw("buckets", bson.D{})
	cache := raw("caches", bson.D{})
	rows := []struct {
		what  string
		doc   bson.Raw
		extra int
	}{
		{"user (with inbox counters)", raw("users", bson.D{{Key: "_id", Value: primitive.ObjectID(bob.ID)}}), 0},
		{"user, private, one token revoked", raw("users", bson.D{{Key: "_id", Value: primitive.ObjectID(alice.ID)}}), 0},
		{"user, profile (80-character bio, 2 URLs)", raw("users", bson.D{{Key: "_id", Value: primitive.ObjectID(carol.ID)}}), 0},
		{"user, deleted (tombstone in grace)", raw("users", bson.D{{Key: "_id", Value: primitive.ObjectID(dave.ID)}}), 0},
		{"handle claim", raw("handles", bson.D{{Key: "_id", Value: "bob_2"}}), 0},
		{"follow edge, followees", raw("followees", bson.D{}), 0},
		{"follow edge, followers", raw("followers", bson.D{}), 0},
		{"message (80 characters)", raw("messages", bson.D{{Key: "me", Value: bson.D{{Key: "$exists", Value: false}}}, {Key: "lc", Value: bson.D{{Key: "$exists", Value: false}}}}), 0},
		{"message (80 characters), liked", raw("messages", bson.D{{Key: "_id", Value: primitive.ObjectID(last)}}), 0},
		{"message (80 characters), 2 mentions", raw("messages", bson.D{{Key: "_id", Value: primitive.ObjectID(mentioning.ID)}}), 0},
		{"reply (80 characters)", raw("messages", bson.D{{Key: "_id", Value: primitive.ObjectID(reply.ID)}}), 0},
		{"message (80 characters), 1 reply", raw("messages", bson.D{{Key: "_id", Value: primitive.ObjectID(asked.ID)}}), 0},
		{"repost", raw("messages", bson.D{{Key: "_id", Value: primitive.ObjectID(repost.ID)}}), 0},
		{"repost guard", raw("reposts", bson.D{}), 0},
		{"message (80 characters), 1 repost", raw("messages", bson.D{{Key: "_id", Value: primitive.ObjectID(reposted.ID)}}), 0},
		{"inbox entry, entries layout", raw("entries", bson.D{}), 0},
		{"inbox entry, in a bucket", bucket.Lookup("e").Array().Index(0).Value().Document(), elem},
		{"inbox entry, in a cache", cache.Lookup("e").Array().Index(0).Value().Document(), elem},
		{"like", raw("likes", bson.D{}), 0},
		{"block or mute", raw("blocks", bson.D{}), 0},
		{"follow request", raw("followreqs", bson.D{}), 0},
		{"notification group, 3 actors", raw("notifications", bson.D{}), 0},
		{"notification actor", raw("notifactors", bson.D{}), 0},
		{"notifications head", raw("notifheads", bson.D{}), 0},
		{"delivery record, per follower", raw("deliveries", bson.D{}).Lookup("r").Array().Index(0).Value().Document(), elem},
	}
	t.Logf("%-42s %6s %6s %6s", "stored document", "short", "long", "saved")
	for _, r := range rows {
		long := longNames(r.doc)
		short, lng := len(r.doc)+r.extra, len(long)+r.extra
		t.Logf("%-42s %6d %6d %5.0f%%", r.what, short, lng, 100*float64(lng-short)/float64(lng))
		assert.Less(t, short, lng, r.what)
	}
	// A bucket's own fields, shared by its 50 entries.
	hdr := len(bucket) - len(bucket.Lookup("e").Array())
	t.Logf("bucket header (o, k, _id), shared by up to %d entries: %d bytes", storage.BucketSize, hdr)
}

// longNames returns doc with every field renamed to its long name in
// mongostore.FieldNames, to measure what the short names save.
func longNames(doc bson.Raw) bson.Raw {
	out, err := bson.Marshal(longNamesD(doc))
	if err != nil {
		panic(err)
	}
	return out
}

func longNamesD(doc bson.Raw) bson.D {
	elems, _ := doc.Elements()
	out := make(bson.D, 0, len(elems))
	for _, e := range elems {
		k := e.Key()
		if long, ok := mongostore.FieldNames[k]; ok {
			k = long
		}
		var v any = e.Value()
		switch e.Value().Type {
		case bson.TypeEmbeddedDocument:
			v = longNamesD(e.Value().Document())
		case bson.TypeArray:
			vals, _ := e.Value().Array().Values()
			arr := make(bson.A, len(vals))
			for i, x := range vals {
				if x.Type == bson.TypeEmbeddedDocument {
					arr[i] = longNamesD(x.Document())
				} else {
					arr[i] = x
				}
			}
			v = arr
		}
		out = append(out, bson.E{Key: k, Value: v})
	}
	return out
}
