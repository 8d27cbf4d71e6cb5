package storetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testLikes(t *testing.T, open OpenFunc) {
	t.Run("LikeAndUnlike", func(t *testing.T) { testLikeAndUnlike(t, open) })
	t.Run("Lists", func(t *testing.T) { testLikeLists(t, open) })
	t.Run("ErrNotFound", func(t *testing.T) { testLikeNotFound(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testLikesConcurrent(t, open) })
}

// likeCount reads a message's LikeCount through every read that returns
// messages, and checks they agree.
func likeCount(t *testing.T, b storage.Backend, m *store.Message) int {
	t.Helper()
	byID, err := b.FindMessageByID(ctx, m.ID)
	require.NoError(t, err)
	byKey, err := b.FindMessagesByKeys(ctx, []store.MessageKey{m.Key()})
	require.NoError(t, err)
	require.NotNil(t, byKey[0])
	assert.Equal(t, byID.LikeCount, byKey[0].LikeCount, "FindMessagesByKeys agrees with FindMessageByID")
	return byID.LikeCount
}

func testLikeAndUnlike(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	unliked := storeMessage(t, b, c, author.ID)

	liked, err := b.Like(ctx, fan.ID, m.Key(), c.Now())
	require.NoError(t, err)
	assert.True(t, liked)
	assert.Equal(t, 1, likeCount(t, b, m))
	liked, err = b.Like(ctx, fan.ID, m.Key(), c.Now())
	require.NoError(t, err)
	assert.False(t, liked, "a second like changes nothing")
	assert.Equal(t, 1, likeCount(t, b, m))

	got, err := b.FindLiked(ctx, fan.ID, []store.MessageKey{m.Key(), unliked.Key(), {ID: m.ID}})
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, true}, got, "aligned with the keys, the author not needed")
	got, err = b.FindLiked(ctx, other.ID, []store.MessageKey{m.Key()})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, got)
	none, err := b.FindLiked(ctx, fan.ID, nil)
	require.NoError(t, err)
	assert.Empty(t, none)

	removed, err := b.Unlike(ctx, fan.ID, m.Key())
	require.NoError(t, err)
	assert.True(t, removed)
	assert.Equal(t, 0, likeCount(t, b, m))
	removed, err = b.Unlike(ctx, fan.ID, m.Key())
	require.NoError(t, err)
	assert.False(t, removed, "a second unlike changes nothing")
	assert.Equal(t, 0, likeCount(t, b, m))
	got, err = b.FindLiked(ctx, fan.ID, []store.MessageKey{m.Key()})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, got)

	// Liked again after an unlike: a new like, counted again.
	liked, err = b.Like(ctx, fan.ID, m.Key(), c.Now())
	require.NoError(t, err)
	assert.True(t, liked)
	assert.Equal(t, 1, likeCount(t, b, m))
	// An edit keeps the count.
	text := "edited"
	edited, err := b.UpdateMessage(ctx, m.ID, storage.MessageUpdate{Text: &text})
	require.NoError(t, err)
	assert.Equal(t, 1, edited.LikeCount)
	assert.Equal(t, 1, likeCount(t, b, m))
}

func likeIDs(likes []store.Like, id func(store.Like) store.ID) []store.ID {
	out := make([]store.ID, len(likes))
	for i, l := range likes {
		out[i] = id(l)
	}
	return out
}

func testLikeLists(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	var msgs []*store.Message
	for range 4 {
		msgs = append(msgs, storeMessage(t, b, c, author.ID))
	}
	var fans []*store.User
	for range 4 {
		fans = append(fans, mustCreateUser(t, b, c))
	}
	// fan likes the messages out of order; the list is by like, newest first.
	for _, i := range []int{2, 0, 3, 1} {
		at := c.Now()
		ok, err := b.Like(ctx, fan.ID, msgs[i].Key(), at)
		require.NoError(t, err)
		require.True(t, ok)
	}
	mine, err := b.ListLikes(ctx, fan.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, mine, 4)
	assert.Equal(t, []store.ID{msgs[1].ID, msgs[3].ID, msgs[0].ID, msgs[2].ID}, likeIDs(mine, func(l store.Like) store.ID { return l.MessageID }))
	for _, l := range mine {
		assert.Equal(t, fan.ID, l.UserID)
		assert.Equal(t, author.ID, l.AuthorID, "a like names its message's author")
		assert.Equal(t, l.ID.Time(), l.CreatedAt, "a like's ID is made at its time")
	}
	page, err := b.ListLikes(ctx, fan.ID, store.Forward(mine[1].ID, 2))
	require.NoError(t, err)
	assert.Equal(t, likeIDs(mine[2:4], func(l store.Like) store.ID { return l.ID }), likeIDs(page, func(l store.Like) store.ID { return l.ID }))
	back, err := b.ListLikes(ctx, fan.ID, store.Backward(mine[3].ID, 2))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{mine[2].ID, mine[1].ID}, likeIDs(back, func(l store.Like) store.ID { return l.ID }), "backward: nearest first")

	for _, f := range fans {
		ok, err := b.Like(ctx, f.ID, msgs[0].Key(), c.Now())
		require.NoError(t, err)
		require.True(t, ok)
	}
	likers, err := b.ListLikers(ctx, msgs[0].ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{fans[3].ID, fans[2].ID, fans[1].ID, fans[0].ID, fan.ID}, likeIDs(likers, func(l store.Like) store.ID { return l.UserID }))
	page, err = b.ListLikers(ctx, msgs[0].ID, store.Forward(likers[0].ID, 2))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{fans[2].ID, fans[1].ID}, likeIDs(page, func(l store.Like) store.ID { return l.UserID }))
	assert.Equal(t, 5, likeCount(t, b, msgs[0]))

	// An unlike leaves both lists.
	ok, err := b.Unlike(ctx, fans[2].ID, msgs[0].Key())
	require.NoError(t, err)
	require.True(t, ok)
	likers, err = b.ListLikers(ctx, msgs[0].ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{fans[3].ID, fans[1].ID, fans[0].ID, fan.ID}, likeIDs(likers, func(l store.Like) store.ID { return l.UserID }))
	theirs, err := b.ListLikes(ctx, fans[2].ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, theirs)
}

func testLikeNotFound(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	_, err := b.Like(ctx, fan.ID, store.MessageKey{ID: store.NewID(c.Now()), AuthorID: author.ID}, c.Now())
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "an unknown message")
	m := storeMessage(t, b, c, author.ID)
	ok, err := b.Like(ctx, fan.ID, m.Key(), c.Now())
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
	_, err = b.Like(ctx, author.ID, m.Key(), c.Now())
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a deleted message")
	_, err = b.Unlike(ctx, fan.ID, m.Key())
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a deleted message")
}

// testLikesConcurrent has users like and unlike one message at once, each
// several times: the count ends exact.
func testLikesConcurrent(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author := mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	const users, rounds = 8, 5
	var fans []*store.User
	for range users {
		fans = append(fans, mustCreateUser(t, b, c))
	}
	var wg sync.WaitGroup
	for i, f := range fans {
		wg.Go(func() {
			for r := range rounds {
				// Each ends liked when i is even: it likes last on even users.
				_, err := b.Like(ctx, f.ID, m.Key(), c.Now())
				assert.NoError(t, err)
				_, err = b.Like(ctx, f.ID, m.Key(), c.Now()) // a repeat, racing with the others
				assert.NoError(t, err)
				if i%2 == 1 || r < rounds-1 {
					_, err = b.Unlike(ctx, f.ID, m.Key())
					assert.NoError(t, err)
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, users/2, likeCount(t, b, m))
	likers, err := b.ListLikers(ctx, m.ID, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	assert.Len(t, likers, users/2)
}
