package mongostore_test

import (
	"context"
	"fmt"
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
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/mongostore"
)

// countingClient counts every collection call: each is one round trip to
// MongoDB.
type countingClient struct {
	lungo.IClient
	n *atomic.Int64
}

func (c countingClient) Database(name string, opts ...*options.DatabaseOptions) lungo.IDatabase {
	return countingDB{c.IClient.Database(name, opts...), c.n}
}

type countingDB struct {
	lungo.IDatabase
	n *atomic.Int64
}

func (d countingDB) Collection(name string, opts ...*options.CollectionOptions) lungo.ICollection {
	return countingColl{d.IDatabase.Collection(name, opts...), d.n}
}

type countingColl struct {
	lungo.ICollection
	n *atomic.Int64
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
	return c.ICollection.Find(ctx, f, o...)
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

// TestRoundTrips measures MongoDB round trips for a post to N followers
// (delivered in chunks) and for reading an inbox page with its messages,
// and checks they do not grow with the page or chunk size. Sizes are small
// because lungo scans its collections.
func TestRoundTrips(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	var n atomic.Int64
	st := mongostore.New(countingClient{client, &n}, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	const chunk, fans = 40, 100
	// No lease renewals or job polls during the measurement: only the
	// requests' and the delivery's own round trips are counted.
	svc := store.NewService(st, store.NewHub(), store.Options{PasswordCost: bcrypt.MinCost, ChunkSize: chunk, LeaseTTL: time.Hour, JobPoll: time.Hour})
	require.NoError(t, svc.Start(ctx))
	defer svc.Close(ctx)

	author, err := svc.SignUp(ctx, store.SignUpInput{Handle: "author", Password: "password1"})
	require.NoError(t, err)
	var followers []store.ID
	for i := range fans {
		now := time.Now().UTC().Truncate(time.Millisecond)
		u := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("f%d", i), CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		_, err := st.Follow(ctx, u.ID, author.ID, now)
		require.NoError(t, err)
		followers = append(followers, u.ID)
	}
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)

	for i := range 55 {
		n.Store(0)
		_, err := svc.PostMessage(ctx, author.ID, store.PostInput{Text: fmt.Sprintf("post %d", i)})
		require.NoError(t, err)
		post := n.Load()
		require.Eventually(t, svc.Idle, 30*time.Second, time.Millisecond)
		if i == 0 {
			// 100 followers in chunks of 40: 3 chunks, each a fixed number of round trips.
			t.Logf("postMessage: %d round trips; delivery to %d followers in chunks of %d: %d round trips", post, fans, chunk, n.Load()-post)
			assert.Equal(t, int64(5), post)
			assert.Equal(t, int64(3*7+1), n.Load()-post, "7 per chunk (list followers, check job, count, read back, push, record, advance) and 1 per job (record it as running)")
		}
	}

	for _, size := range []int{5, 50} {
		n.Store(0)
		page, err := svc.Inbox(ctx, followers[0], 0, size)
		require.NoError(t, err)
		require.Len(t, page.Items, size)
		t.Logf("inbox page of %d with messages: %d round trips (+1 for the authors)", size, n.Load())
		assert.Equal(t, int64(3), n.Load(), "counts, buckets, messages")
	}
}

// TestBytes measures the stored BSON of each kind of document, as the
// store wrote it, against the same document with the long field names of
// FieldNames.
func TestBytes(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	st := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	svc := store.NewService(st, store.NewHub(), store.Options{PasswordCost: bcrypt.DefaultCost})
	require.NoError(t, svc.Start(ctx))
	defer svc.Close(ctx)
	alice, err := svc.SignUp(ctx, store.SignUpInput{Handle: "alice_1", Password: "password1", DisplayName: "Alice Liddell"})
	require.NoError(t, err)
	bob, err := svc.SignUp(ctx, store.SignUpInput{Handle: "bob_2", Password: "password2"})
	require.NoError(t, err)
	_, err = svc.Follow(ctx, bob.ID, alice.ID)
	require.NoError(t, err)
	_, err = svc.PostMessage(ctx, alice.ID, store.PostInput{Text: strings.Repeat("x", 80)})
	require.NoError(t, err)
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)
	_, err = svc.MarkInboxRead(ctx, bob.ID)
	require.NoError(t, err)

	raw := func(coll string, filter bson.D) bson.Raw {
		var r bson.Raw
		require.NoError(t, st.Database().Collection(coll).FindOne(ctx, filter).Decode(&r))
		return r
	}
	bucket := raw("buckets", bson.D{})
	entry := bucket.Lookup("e").Array().Index(0).Value().Document()
	rows := []struct {
		what string
		doc  bson.Raw
		// extra bytes the document costs where it is stored: an inbox entry
		// is an element of its bucket's array (type, index key "0".."49").
		extra int
	}{
		{"user (with inbox counters)", raw("users", bson.D{{Key: "_id", Value: primitive.ObjectID(bob.ID)}}), 0},
		{"handle claim", raw("handles", bson.D{{Key: "_id", Value: "bob_2"}}), 0},
		{"follow edge, followees", raw("followees", bson.D{}), 0},
		{"follow edge, followers", raw("followers", bson.D{}), 0},
		{"message (80 characters)", raw("messages", bson.D{}), 0},
		{"inbox entry", entry, 1 + 3},
		{"delivery record, per follower", nil, 0},
	}
	rec := raw("deliveries", bson.D{})
	t.Logf("%-32s %6s %6s %6s", "stored document", "short", "long", "saved")
	for _, r := range rows {
		if r.doc == nil {
			ref := rec.Lookup("r").Array().Index(0).Value().Document()
			r.doc, r.extra = ref, 1+3
		}
		long := mongostore.LongNames(r.doc)
		short, lng := len(r.doc)+r.extra, len(long)+r.extra
		t.Logf("%-32s %6d %6d %5.0f%%", r.what, short, lng, 100*float64(lng-short)/float64(lng))
		assert.Less(t, short, lng, r.what)
	}
}
