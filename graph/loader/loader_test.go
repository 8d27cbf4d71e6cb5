package loader_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/graph/loader"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// backend counts the batch reads the loaders make and can be told to fail
// them; everything else goes to the embedded store.
type backend struct {
	storage.Backend
	users, messages, following atomic.Int64
	fail                       error
	// keys are the message keys of the last FindMessagesByKeys call.
	keys atomic.Pointer[[]store.MessageKey]
}

func (b *backend) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	b.users.Add(1)
	if b.fail != nil {
		return nil, b.fail
	}
	return b.Backend.FindUsersByIDs(ctx, ids)
}

func (b *backend) FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	b.messages.Add(1)
	b.keys.Store(&keys)
	return b.Backend.FindMessagesByKeys(ctx, keys)
}

func (b *backend) FindFollowing(ctx context.Context, follower store.ID, targets []store.ID) ([]bool, error) {
	b.following.Add(1)
	return b.Backend.FindFollowing(ctx, follower, targets)
}

func newService(t *testing.T) (*service.Service, *backend) {
	t.Helper()
	st, err := embedded.Open(t.TempDir(), embedded.Options{CacheBytes: 8 << 20})
	require.NoError(t, err)
	b := &backend{Backend: st}
	svc := service.NewService(b, pubsub.NewHub(), service.Options{PasswordCost: bcrypt.MinCost})
	require.NoError(t, svc.Start(context.Background()))
	t.Cleanup(func() {
		require.NoError(t, svc.Close(context.Background()))
		require.NoError(t, st.Close())
	})
	return svc, b
}

func mustCreateUser(t *testing.T, svc *service.Service, handle string) *store.User {
	t.Helper()
	u, err := svc.SignUp(context.Background(), service.SignUpInput{Handle: handle, Password: "password123"})
	require.NoError(t, err)
	return u
}

func TestLoaders_UserByID(t *testing.T) {
	ctx := context.Background()
	svc, b := newService(t)
	a, c := mustCreateUser(t, svc, "alice"), mustCreateUser(t, svc, "carol")
	missing := store.NewID(time.Now())

	l := loader.New(svc, store.NilID, false)
	users, errs := l.Users(ctx, []store.ID{a.ID, missing, c.ID, a.ID})
	require.Len(t, users, 4)
	assert.NoError(t, errs[0])
	assert.Equal(t, "alice", users[0].Handle)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(errs[1]), "a missing key is NOT_FOUND at its index")
	assert.Nil(t, users[1])
	assert.Equal(t, "carol", users[2].Handle)
	assert.Equal(t, "alice", users[3].Handle)
	assert.EqualValues(t, 1, b.users.Load(), "one batch call")

	_, err := l.UserByID.Load(ctx, c.ID)()
	require.NoError(t, err)
	assert.EqualValues(t, 1, b.users.Load(), "cached for the life of the Loaders")

	_, err = loader.New(svc, store.NilID, false).UserByID.Load(ctx, c.ID)()
	require.NoError(t, err)
	assert.EqualValues(t, 2, b.users.Load(), "a new Loaders does not share the cache")
}

func TestLoaders_MessageByKey(t *testing.T) {
	ctx := context.Background()
	svc, b := newService(t)
	a := mustCreateUser(t, svc, "alice")
	m1, err := svc.PostMessage(ctx, a.ID, service.PostInput{Text: "one"})
	require.NoError(t, err)
	m2, err := svc.PostMessage(ctx, a.ID, service.PostInput{Text: "two"})
	require.NoError(t, err)
	require.NoError(t, svc.DeleteMessage(ctx, a.ID, m2.ID))

	t.Run("OK", func(t *testing.T) {
		b.messages.Store(0)
		msgs, errs := loader.New(svc, store.NilID, false).Messages(ctx, []store.MessageKey{m2.Key(), m1.Key()})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(errs[0]), "a deleted message is NOT_FOUND")
		require.NoError(t, errs[1])
		assert.Equal(t, "one", msgs[1].Text)
		assert.EqualValues(t, 1, b.messages.Load())
		assert.Equal(t, []store.MessageKey{m2.Key(), m1.Key()}, *b.keys.Load(), "the keys reach the backend with their authors")
	})

	t.Run("CachedByID", func(t *testing.T) {
		b.messages.Store(0)
		l := loader.New(svc, store.NilID, false)
		byID := store.MessageKey{ID: m1.ID, AuthorID: store.NilID}
		tk, tn := l.MessageByKey.Load(ctx, m1.Key()), l.MessageByKey.Load(ctx, byID)
		got, err := tk()
		require.NoError(t, err)
		_, err = tn()
		require.NoError(t, err)
		assert.Equal(t, "one", got.Text)
		assert.EqualValues(t, 1, b.messages.Load(), "with and without the author: one entry")
		assert.Len(t, *b.keys.Load(), 1)

		l.MessageByKey.Clear(ctx, byID)
		_, err = l.MessageByKey.Load(ctx, m1.Key())()
		require.NoError(t, err)
		assert.EqualValues(t, 2, b.messages.Load(), "clearing by ID alone clears the entry")
	})
}

func TestLoaders_ViewerFollows(t *testing.T) {
	ctx := context.Background()
	svc, b := newService(t)
	a, c, v := mustCreateUser(t, svc, "alice"), mustCreateUser(t, svc, "carol"), mustCreateUser(t, svc, "viewer")
	_, err := svc.Follow(ctx, v.ID, c.ID)
	require.NoError(t, err)
	// The follow's backfill job checks the edge too; count only the loader's calls.
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)
	b.following.Store(0)

	l := loader.New(svc, v.ID, true)
	ta, tc := l.ViewerFollows.Load(ctx, a.ID), l.ViewerFollows.Load(ctx, c.ID)
	fa, err := ta()
	require.NoError(t, err)
	fc, err := tc()
	require.NoError(t, err)
	assert.False(t, fa)
	assert.True(t, fc)
	assert.EqualValues(t, 1, b.following.Load())

	anon := loader.New(svc, store.NilID, false)
	f, err := anon.ViewerFollows.Load(ctx, c.ID)()
	require.NoError(t, err)
	assert.False(t, f, "nobody follows anyone anonymously")
	assert.EqualValues(t, 1, b.following.Load(), "without a viewer there is no call")
}

func TestLoaders_BatchError(t *testing.T) {
	ctx := context.Background()
	svc, b := newService(t)
	a := mustCreateUser(t, svc, "alice")
	b.fail = errors.New("disk on fire")

	_, errs := loader.New(svc, store.NilID, false).Users(ctx, []store.ID{a.ID, store.NewID(time.Now())})
	for _, err := range errs {
		assert.ErrorIs(t, err, b.fail, "a failed batch fails every key")
	}
}

func TestFor(t *testing.T) {
	ctx := context.Background()
	assert.Panics(t, func() { loader.For(ctx) })
	l := &loader.Loaders{}
	assert.Same(t, l, loader.For(loader.NewContext(ctx, l)))
}

func TestLoaders_Preload(t *testing.T) {
	ctx := context.Background()
	svc, b := newService(t)
	a, v := mustCreateUser(t, svc, "alice"), mustCreateUser(t, svc, "viewer")
	m, err := svc.PostMessage(ctx, a.ID, service.PostInput{Text: "one"})
	require.NoError(t, err)
	require.Eventually(t, svc.Idle, 10*time.Second, time.Millisecond)
	b.users.Store(0)
	b.messages.Store(0)
	b.following.Store(0)

	l := loader.New(svc, v.ID, true)
	gone := store.NewID(time.Now())
	l.Preload(ctx, loader.Preloads{Users: []store.ID{a.ID, gone, a.ID}, Messages: []store.MessageKey{m.Key()}, Follows: []store.ID{a.ID}})
	assert.EqualValues(t, 1, b.users.Load(), "one call, duplicates included")
	assert.EqualValues(t, 1, b.messages.Load())
	assert.EqualValues(t, 1, b.following.Load())

	u, err := l.UserByID.Load(ctx, a.ID)()
	require.NoError(t, err)
	assert.Equal(t, "alice", u.Handle)
	_, err = l.UserByID.Load(ctx, gone)()
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a missing user is cached as missing")
	got, err := l.MessageByKey.Load(ctx, store.MessageKey{ID: m.ID})()
	require.NoError(t, err)
	assert.Equal(t, "one", got.Text)
	f, err := l.ViewerFollows.Load(ctx, a.ID)()
	require.NoError(t, err)
	assert.False(t, f)
	l.Preload(ctx, loader.Preloads{Users: []store.ID{a.ID}})
	assert.EqualValues(t, 1, b.users.Load(), "loads after a preload, and a second preload, cost nothing")
	assert.EqualValues(t, 1, b.messages.Load())
	assert.EqualValues(t, 1, b.following.Load())
}

func TestLoaders_PrimeMessages(t *testing.T) {
	ctx := context.Background()
	svc, b := newService(t)
	u := mustCreateUser(t, svc, "alice")
	l := loader.New(svc, u.ID, true)
	now := time.Now().UTC()
	m1 := &store.Message{ID: store.NewID(now), AuthorID: u.ID, Text: "one"}
	m2 := &store.Message{ID: store.NewID(now.Add(time.Millisecond)), AuthorID: u.ID, Text: "two"}
	// A message already cached keeps its entry, as with Prime.
	l.MessageByKey.Prime(ctx, m1.Key(), m1)
	l.PrimeMessages(ctx, []*store.Message{{ID: m1.ID, AuthorID: u.ID, Text: "other"}, m2})
	for _, want := range []*store.Message{m1, m2} {
		got, err := l.MessageByKey.Load(ctx, store.MessageKey{ID: want.ID})()
		require.NoError(t, err)
		assert.Same(t, want, got)
	}
	assert.Zero(t, b.messages.Load(), "primed messages need no read")
}
