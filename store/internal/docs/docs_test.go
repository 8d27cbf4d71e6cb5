package docs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/storage"
)

// longUser is the same document with descriptive field names, to measure
// what the short names save.
type longUser struct {
	ID           primitive.ObjectID `bson:"_id"`
	Handle       string             `bson:"handle"`
	Name         string             `bson:"displayName"`
	Bio          string             `bson:"bio,omitempty"`
	Website      string             `bson:"websiteUrl,omitempty"`
	Avatar       string             `bson:"avatarUrl,omitempty"`
	Pass         []byte             `bson:"passwordHash"`
	Created      time.Time          `bson:"createdAt"`
	Seen         time.Time          `bson:"lastSeenAt"`
	Followers    int64              `bson:"followerCount"`
	Following    int64              `bson:"followingCount"`
	Messages     int64              `bson:"messageCount"`
	Pulled       int64              `bson:"pulledCount,omitempty"`
	Attrs        []Attr             `bson:"attributes,omitempty"`
	TokenVer     int64              `bson:"tokenVersion,omitempty"`
	Revoked      []Revoked          `bson:"revokedTokens,omitempty"`
	Kept         string             `bson:"keptToken,omitempty"`
	Deleted      *time.Time         `bson:"deletedAt,omitempty"`
	Private      bool               `bson:"private,omitempty"`
	NeverBlocked bool               `bson:"neverBlocked,omitempty"`
	MsgFrom      int32              `bson:"messagesFrom,omitempty"`
}

func TestShortFieldNames_BytesSaved(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := &store.User{ID: store.NewID(now), Handle: "alice_1", DisplayName: "Alice", PasswordHash: make([]byte, 60), CreatedAt: now, LastSeenAt: now, FollowerCount: 10,
		Bio: "Curious.\nFalls down rabbit holes.", WebsiteURL: "https://alice.example", AvatarURL: "https://alice.example/a.png"}
	short, err := bson.Marshal(FromUser(u))
	require.NoError(t, err)
	d := FromUser(u)
	long, err := bson.Marshal(longUser(*d))
	require.NoError(t, err)
	saved := len(long) - len(short)
	t.Logf("user document: %d bytes with short names, %d with long names: %d bytes (%.0f%%) saved", len(short), len(long), saved, 100*float64(saved)/float64(len(long)))
	assert.Greater(t, saved, 50)

	var back User
	require.NoError(t, bson.Unmarshal(short, &back))
	assert.Equal(t, u, back.Store())
}

func TestMessage_RoundTrip(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, m := range []*store.Message{
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "hi", Kind: store.KindPost, CreatedAt: now},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "re", Kind: store.KindReply, ReplyToID: store.NewID(now), ReplyToAuthorID: store.NewID(now), CreatedAt: now, EditedAt: &now},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "star", Kind: store.KindPost, CreatedAt: now, Pulled: true},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Kind: store.KindRepost, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now), CreatedAt: now},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Kind: store.KindRepost, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now), CreatedAt: now, HomeHidden: true},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "hi", Kind: store.KindPost, CreatedAt: now, RepostCount: 3, ReplyCount: 2, LikeCount: 1},
	} {
		b, err := bson.Marshal(FromMessage(m))
		require.NoError(t, err)
		var d Message
		require.NoError(t, bson.Unmarshal(b, &d))
		assert.Equal(t, m, d.Store())
	}
}

func TestJob_RoundTrip(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, j := range []*storage.Job{
		{ID: store.NewID(now), Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: store.NewID(now), AuthorID: store.NewID(now), CreatedAt: now, Cursor: []byte{1, 2}},
		{ID: store.NewID(now), Kind: storage.JobFollow, Layout: storage.LayoutEntries, AuthorID: store.NewID(now), OwnerID: store.NewID(now), CreatedAt: now},
	} {
		b, err := bson.Marshal(FromJob(j))
		require.NoError(t, err)
		var d Job
		require.NoError(t, bson.Unmarshal(b, &d))
		assert.Equal(t, j, d.Store())
	}
}

func TestUnmarshalMessage(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := time.Date(1960, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	for _, m := range []*store.Message{
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "hi", Kind: store.KindPost, CreatedAt: now},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "re", Kind: store.KindReply, ReplyToID: store.NewID(now), ReplyToAuthorID: store.NewID(now), CreatedAt: now, EditedAt: &now},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "star ✓", Kind: store.KindPost, CreatedAt: old, Pulled: true},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Kind: store.KindRepost, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now), CreatedAt: now},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Kind: store.KindRepost, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now), CreatedAt: now, HomeHidden: true},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "hi", Kind: store.KindPost, CreatedAt: now, RepostCount: 3},
	} {
		b, err := bson.Marshal(FromMessage(m))
		require.NoError(t, err)
		var fast, slow Message
		require.True(t, decodeMessage(b, &fast), "the fast decoder takes what Marshal writes")
		require.NoError(t, bson.Unmarshal(b, &slow))
		assert.Equal(t, slow, fast)
		assert.Equal(t, m, fast.Store())
	}
	// Another shape goes to bson.Unmarshal: a field of another type, an
	// unknown field.
	for _, doc := range []bson.D{
		{{Key: "_id", Value: primitive.NewObjectID()}, {Key: "k", Value: int64(1)}},
		{{Key: "_id", Value: primitive.NewObjectID()}, {Key: "x", Value: "y"}},
	} {
		b, err := bson.Marshal(doc)
		require.NoError(t, err)
		var fast, slow Message
		assert.False(t, decodeMessage(b, &fast))
		require.NoError(t, UnmarshalMessage(b, &fast))
		require.NoError(t, bson.Unmarshal(b, &slow))
		assert.Equal(t, slow, fast)
	}
}

func FuzzUnmarshalMessage(f *testing.F) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, m := range []*store.Message{
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "hi", CreatedAt: now},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Text: "re", Kind: store.KindReply, ReplyToID: store.NewID(now), ReplyToAuthorID: store.NewID(now), CreatedAt: now, EditedAt: &now, Pulled: true},
		{ID: store.NewID(now), AuthorID: store.NewID(now), Kind: store.KindRepost, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now), CreatedAt: now, RepostCount: 1, HomeHidden: true},
	} {
		b, err := bson.Marshal(FromMessage(m))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow Message
		errSlow, panicked := func() (err error, panicked bool) {
			// The driver panics on some malformed documents; the fast
			// decoder leaves those to it.
			defer func() { panicked = recover() != nil }()
			return bson.Unmarshal(b, &slow), false
		}()
		if panicked {
			t.Skip("bson.Unmarshal panics")
		}
		errFast := UnmarshalMessage(b, &fast)
		require.Equal(t, errSlow == nil, errFast == nil, "errors: %v, %v", errSlow, errFast)
		if errSlow == nil {
			assert.Equal(t, slow, fast)
		}
	})
}

func TestUnmarshalUser(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	old := time.Date(1960, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	for _, u := range []*store.User{
		{ID: store.NewID(now), Handle: "alice", DisplayName: "Alice ✓", PasswordHash: []byte("hash"), CreatedAt: now, LastSeenAt: now},
		{ID: store.NewID(now), Handle: "bob", PasswordHash: []byte{0}, CreatedAt: old, LastSeenAt: now, FollowerCount: 3, FollowingCount: 1 << 40, MessageCount: 7, PulledCount: 2},
	} {
		b, err := bson.Marshal(FromUser(u))
		require.NoError(t, err)
		var fast, slow User
		require.True(t, decodeUser(b, &fast), "the fast decoder takes what Marshal writes")
		require.NoError(t, bson.Unmarshal(b, &slow))
		assert.Equal(t, slow, fast)
	}
	// Another shape goes to bson.Unmarshal: attributes, no password, a
	// field of another type, an unknown field.
	for _, d := range []any{
		&User{ID: primitive.NewObjectID(), Pass: []byte("x"), Attrs: []Attr{{Token: 1, Value: "v"}}},
		&User{ID: primitive.NewObjectID()},
		bson.D{{Key: "_id", Value: primitive.NewObjectID()}, {Key: "fr", Value: int32(1)}},
		bson.D{{Key: "_id", Value: primitive.NewObjectID()}, {Key: "x", Value: "y"}},
	} {
		b, err := bson.Marshal(d)
		require.NoError(t, err)
		var fast, slow User
		assert.False(t, decodeUser(b, &fast))
		require.NoError(t, UnmarshalUser(b, &fast))
		require.NoError(t, bson.Unmarshal(b, &slow))
		assert.Equal(t, slow, fast)
	}
}

func FuzzUnmarshalUser(f *testing.F) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, u := range []*store.User{
		{ID: store.NewID(now), Handle: "alice", DisplayName: "Alice", PasswordHash: []byte("hash"), CreatedAt: now, LastSeenAt: now},
		{ID: store.NewID(now), Handle: "bob", CreatedAt: now, FollowerCount: 3, PulledCount: 1},
	} {
		b, err := bson.Marshal(FromUser(u))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var fast, slow User
		errSlow, panicked := func() (err error, panicked bool) {
			defer func() { panicked = recover() != nil }()
			return bson.Unmarshal(b, &slow), false
		}()
		if panicked {
			t.Skip("bson.Unmarshal panics")
		}
		errFast := UnmarshalUser(b, &fast)
		require.Equal(t, errSlow == nil, errFast == nil, "errors: %v, %v", errSlow, errFast)
		if errSlow == nil {
			assert.Equal(t, slow, fast)
		}
	})
}
