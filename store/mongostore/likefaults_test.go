package mongostore_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/mongostore"
)

// likeState reads what a like of m left: the message's count, whether the
// user's like reads as liked, the likers listed, the like document's state
// (-1: none) and the message's pending-operation markers.
type likeState struct {
	count   int
	liked   bool
	likers  int
	state   int
	markers int
}

func readLike(t *testing.T, st *mongostore.Store, user store.ID, m *store.Message) likeState {
	t.Helper()
	ctx := context.Background()
	got, err := st.FindMessageByID(ctx, m.ID)
	require.NoError(t, err)
	liked, err := st.FindLiked(ctx, user, []store.MessageKey{m.Key()})
	require.NoError(t, err)
	likers, err := st.ListLikers(ctx, m.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	s := likeState{count: got.LikeCount, liked: liked[0], likers: len(likers), state: -1}
	var like bson.M
	if err := st.Database().Collection("likes").FindOne(ctx, bson.D{{Key: "u", Value: primitive.ObjectID(user)}}).Decode(&like); err == nil {
		s.state = 0
		if v, ok := like["st"].(int32); ok {
			s.state = int(v)
		}
	}
	var raw bson.M
	require.NoError(t, st.Database().Collection("messages").FindOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(m.ID)}}).Decode(&raw))
	if po, ok := raw["po"].(bson.A); ok {
		s.markers = len(po)
	}
	return s
}

// A like whose process dies at each of its writes after the like document,
// then the same like again: it finishes, counted exactly once. Then the
// same for an unlike.
func TestFaults_LikeRetried(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		fail func(f *faults)
		// half is what the failed operation leaves (a like reads as liked
		// from its document's write to its deletion; the count lags),
		// retried what the retry leaves, and finished whether the retry
		// reports the change as its own.
		likeHalf, liked, unlikeHalf, unliked likeState
		finished                             bool
	}{
		{"CountFails", func(f *faults) { f.msgsUpdate.Store(1) },
			likeState{count: 0, liked: true, likers: 1, state: 1},
			likeState{count: 1, liked: true, likers: 1, state: 0},
			likeState{count: 1, liked: true, likers: 1, state: 2},
			likeState{state: -1}, true},
		// The count is done and marked; the retry must not count again.
		{"MarkFails", func(f *faults) { f.likesWrite.Store(1) },
			likeState{count: 1, liked: true, likers: 1, state: 1, markers: 1},
			likeState{count: 1, liked: true, likers: 1, state: 0},
			likeState{count: 0, liked: true, likers: 1, state: 2, markers: 1},
			likeState{state: -1}, true},
		// All done but forgetting the marker: the retry finds nothing to
		// do, and the stale markers stay, unused.
		{"ForgetFails", func(f *faults) { f.msgsSkip.Store(1); f.msgsUpdate.Store(1) },
			likeState{count: 1, liked: true, likers: 1, state: 0, markers: 1},
			likeState{count: 1, liked: true, likers: 1, state: 0, markers: 1},
			likeState{state: -1, markers: 2},
			likeState{state: -1, markers: 2}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, f := openFaulty(t)
			a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
			m, _ := mkPost(t, st, a)

			c.fail(f)
			_, err := st.Like(ctx, x, m.Key(), tickClock())
			require.ErrorIs(t, err, errInjected)
			assert.Equal(t, c.likeHalf, readLike(t, st, x, m), "like cut short")
			ok, err := st.Like(ctx, x, m.Key(), tickClock())
			require.NoError(t, err)
			assert.Equal(t, c.finished, ok)
			assert.Equal(t, c.liked, readLike(t, st, x, m), "like retried")

			c.fail(f)
			_, err = st.Unlike(ctx, x, m.Key())
			require.ErrorIs(t, err, errInjected)
			assert.Equal(t, c.unlikeHalf, readLike(t, st, x, m), "unlike cut short")
			ok, err = st.Unlike(ctx, x, m.Key())
			require.NoError(t, err)
			assert.Equal(t, c.finished, ok)
			assert.Equal(t, c.unliked, readLike(t, st, x, m), "unlike retried")
		})
	}
}

// A like cut short, then an unlike of the pair: the like is finished, so
// its count is there to take back.
func TestFaults_LikeThenUnlike(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	m, _ := mkPost(t, st, a)
	f.msgsUpdate.Store(1)
	_, err := st.Like(ctx, x, m.Key(), tickClock())
	require.ErrorIs(t, err, errInjected)
	ok, err := st.Unlike(ctx, x, m.Key())
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, likeState{state: -1}, readLike(t, st, x, m))
	// Liked again, counted once.
	ok, err = st.Like(ctx, x, m.Key(), tickClock())
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, likeState{count: 1, liked: true, likers: 1, state: 0}, readLike(t, st, x, m))
}
