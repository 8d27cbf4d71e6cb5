package storetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testFollowRequests(t *testing.T, open OpenFunc) {
	t.Run("RequestAndRemove", func(t *testing.T) { testRequestAndRemove(t, open) })
	t.Run("List", func(t *testing.T) { testFollowRequestList(t, open) })
	t.Run("Refused", func(t *testing.T) { testFollowRequestRefused(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testFollowRequestsConcurrent(t, open) })
	t.Run("PrivateFlag", func(t *testing.T) { testPrivateFlag(t, open) })
}

func findRequests(t *testing.T, b storage.Backend, user store.ID, targets ...store.ID) []bool {
	t.Helper()
	got, err := b.FindFollowRequests(ctx, user, targets)
	require.NoError(t, err)
	return got
}

func requesters(rs []store.FollowRequest) []store.ID {
	return ids(rs, func(r store.FollowRequest) store.ID { return r.UserID })
}

func testRequestAndRemove(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	fan, locked, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)

	ok, err := b.RequestFollow(ctx, fan.ID, locked.ID, c.Now())
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = b.RequestFollow(ctx, fan.ID, locked.ID, c.Now())
	require.NoError(t, err)
	assert.False(t, ok, "a second request changes nothing")

	assert.Equal(t, []bool{true, false, false}, findRequests(t, b, fan.ID, locked.ID, other.ID, fan.ID), "aligned with the targets")
	assert.Equal(t, []bool{false}, findRequests(t, b, locked.ID, fan.ID), "a request is one way")
	assert.Empty(t, findRequests(t, b, fan.ID))
	list, err := b.ListFollowRequests(ctx, locked.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, list, 1, "the repeat stored no second request")
	first := list[0]
	assert.Equal(t, store.FollowRequest{ID: first.ID, UserID: fan.ID, TargetID: locked.ID, CreatedAt: first.ID.Time().UTC()}, first, "the request's time is its ID's")
	none, err := b.ListFollowRequests(ctx, fan.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, none, "the list is the target's only")
	// A request stores no follow.
	follows, err := b.FindFollowing(ctx, fan.ID, []store.ID{locked.ID})
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, follows)

	ok, err = b.RemoveFollowRequest(ctx, fan.ID, locked.ID)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = b.RemoveFollowRequest(ctx, fan.ID, locked.ID)
	require.NoError(t, err)
	assert.False(t, ok, "removing it again changes nothing")
	assert.Equal(t, []bool{false}, findRequests(t, b, fan.ID, locked.ID))
	list, err = b.ListFollowRequests(ctx, locked.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, list)

	// Asked again: a new request, at its new time.
	ok, err = b.RequestFollow(ctx, fan.ID, locked.ID, c.Now())
	require.NoError(t, err)
	assert.True(t, ok)
	list, err = b.ListFollowRequests(ctx, locked.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Positive(t, list[0].ID.Compare(first.ID), "a new request, newer than the first")
}

func testFollowRequestList(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	locked := mustCreateUser(t, b, c)
	var fans []*store.User
	for range 4 {
		fans = append(fans, mustCreateUser(t, b, c))
	}
	// Asked out of ID order; the list is by request, oldest first.
	for _, i := range []int{2, 0, 3, 1} {
		ok, err := b.RequestFollow(ctx, fans[i].ID, locked.ID, c.Now())
		require.NoError(t, err)
		require.True(t, ok)
	}
	want := []store.ID{fans[2].ID, fans[0].ID, fans[3].ID, fans[1].ID}
	n, err := b.CountFollowRequests(ctx, locked.ID)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	n, err = b.CountFollowRequests(ctx, fans[0].ID)
	require.NoError(t, err)
	assert.Zero(t, n, "counted on the target's side only")
	all, err := b.ListFollowRequests(ctx, locked.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, want, requesters(all))
	page, err := b.ListFollowRequests(ctx, locked.ID, store.Forward(all[1].ID, 2))
	require.NoError(t, err)
	assert.Equal(t, want[2:4], requesters(page))
	back, err := b.ListFollowRequests(ctx, locked.ID, store.Backward(all[3].ID, 2))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{want[2], want[1]}, requesters(back), "backward: nearest first")
	last, err := b.ListFollowRequests(ctx, locked.ID, store.Backward(store.NilID, 1))
	require.NoError(t, err)
	assert.Equal(t, want[3:], requesters(last), "backward from the end: the newest")
	first, err := b.ListFollowRequests(ctx, locked.ID, store.Forward(store.NilID, 1))
	require.NoError(t, err)
	assert.Equal(t, want[:1], requesters(first), "the limit holds")

	// Removing one from the middle leaves the others in order.
	ok, err := b.RemoveFollowRequest(ctx, fans[3].ID, locked.ID)
	require.NoError(t, err)
	require.True(t, ok)
	all, err = b.ListFollowRequests(ctx, locked.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{want[0], want[1], want[3]}, requesters(all))
	n, err = b.CountFollowRequests(ctx, locked.ID)
	require.NoError(t, err)
	assert.Equal(t, 3, n)
}

func testFollowRequestRefused(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me := mustCreateUser(t, b, c)
	_, err := b.RequestFollow(ctx, me.ID, me.ID, c.Now())
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "asking to follow oneself")
	_, err = b.RequestFollow(ctx, me.ID, store.NewID(c.Now()), c.Now())
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "an unknown target")
	list, err := b.ListFollowRequests(ctx, me.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, list, "nothing was stored")
}

func testFollowRequestsConcurrent(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	locked := mustCreateUser(t, b, c)
	const users, racers = 4, 4
	var fans []store.ID
	for range users {
		fans = append(fans, mustCreateUser(t, b, c).ID)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := make(map[store.ID]int)
	for _, u := range fans {
		for range racers {
			wg.Go(func() {
				ok, err := b.RequestFollow(ctx, u, locked.ID, c.Now())
				assert.NoError(t, err)
				if ok {
					mu.Lock()
					won[u]++
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	list, err := b.ListFollowRequests(ctx, locked.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.ElementsMatch(t, fans, requesters(list), "one request stored per user")
	for _, u := range fans {
		assert.Equal(t, 1, won[u], "exactly one request of a pair reports a change")
		assert.Equal(t, []bool{true}, findRequests(t, b, u, locked.ID))
	}
}

// testPrivateFlag: the private flag is stored, read by every user read,
// and cleared.
func testPrivateFlag(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	u := mustCreateUser(t, b, c)
	assert.False(t, u.Private, "an account is public by default")
	yes, no := true, false
	got, err := b.UpdateUser(ctx, u.ID, storage.UserUpdate{Private: &yes})
	require.NoError(t, err)
	assert.True(t, got.Private)
	assert.Equal(t, u.Handle, got.Handle, "the rest of the profile stays")
	byID, err := b.FindUserByID(ctx, u.ID)
	require.NoError(t, err)
	assert.True(t, byID.Private)
	batch, err := b.FindUsersByIDs(ctx, []store.ID{u.ID})
	require.NoError(t, err)
	assert.True(t, batch[0].Private)
	byHandle, err := b.FindUserByHandle(ctx, u.Handle)
	require.NoError(t, err)
	assert.True(t, byHandle.Private)
	found, err := b.SearchUsers(ctx, u.Handle, 5)
	require.NoError(t, err)
	require.Len(t, found, 1)
	assert.True(t, found[0].Private, "search finds a private account, flag included")

	got, err = b.UpdateUser(ctx, u.ID, storage.UserUpdate{Private: &no})
	require.NoError(t, err)
	assert.False(t, got.Private)
	byID, err = b.FindUserByID(ctx, u.ID)
	require.NoError(t, err)
	assert.False(t, byID.Private)
}
