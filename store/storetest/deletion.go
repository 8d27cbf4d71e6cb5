package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// testDeleteUser checks the storage primitives of account deletion: the
// tombstone that hides a user everywhere but keeps its handle taken, the
// list of tombstones the sweeper resumes from, and the purge that frees
// the handle.
func testDeleteUser(t *testing.T, open OpenFunc) {
	b := openBackend(t, open)
	c := newClock()
	notFound := func(t *testing.T, err error) {
		t.Helper()
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "%v", err)
	}

	t.Run("HiddenEverywhereHandleKept", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		other := mustCreateUser(t, b, c)
		v := "blue"
		_, err := b.SetAttributes(ctx, u.ID, []store.AttributeChange{{Name: "colour", Value: &v}})
		require.NoError(t, err)
		_, err = b.Follow(ctx, other.ID, u.ID, c.Now())
		require.NoError(t, err)
		at := c.Now()
		require.NoError(t, b.DeleteUser(ctx, u.ID, at))

		_, err = b.FindUserByID(ctx, u.ID)
		notFound(t, err)
		_, err = b.FindUserByHandle(ctx, u.Handle)
		notFound(t, err)
		users, err := b.FindUsersByIDs(ctx, []store.ID{u.ID, other.ID})
		require.NoError(t, err)
		assert.Nil(t, users[0], "a deleted user reads as missing")
		assert.NotNil(t, users[1])
		byHandle, err := b.FindUsersByHandles(ctx, []string{u.Handle})
		require.NoError(t, err)
		assert.Nil(t, byHandle[0])
		found, err := b.SearchUsers(ctx, u.Handle, 10)
		require.NoError(t, err)
		assert.Empty(t, found, "no search term is left")
		byAttr, err := b.FindUsersByAttribute(ctx, "colour", "blue", store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Empty(t, byAttr)
		n, err := b.CountUsersByAttribute(ctx, "colour", "blue")
		require.NoError(t, err)
		assert.Zero(t, n, "its attributes are gone with it")

		// The handle stays taken until the purge.
		dup := &store.User{ID: store.NewID(c.Now()), Handle: u.Handle, DisplayName: "Again", CreatedAt: c.Now()}
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(b.CreateUser(ctx, dup)))

		// Profile and attribute writes leave it alone.
		name := "Back"
		_, err = b.UpdateUser(ctx, u.ID, storage.UserUpdate{DisplayName: &name})
		notFound(t, err)
		_, err = b.SetAttributes(ctx, u.ID, []store.AttributeChange{{Name: "colour", Value: &v}})
		notFound(t, err)

		// The edges and their counts stay for the caller to remove, and
		// the writes that remove them apply.
		following, err := b.ListFollowing(ctx, other.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		assert.Equal(t, []store.ID{u.ID}, following)
		changed, err := b.Unfollow(ctx, other.ID, u.ID)
		require.NoError(t, err)
		assert.True(t, changed)
		assert.Zero(t, mustUser(t, b, other.ID).FollowingCount)

		// Twice is once: the first time stays.
		require.NoError(t, b.DeleteUser(ctx, u.ID, c.Now()))
		listed := deletedUsers(t, b)
		require.Contains(t, listed, u.ID)
		assert.True(t, at.Equal(listed[u.ID].DeletedAt), "deleted at %v, listed %v", at, listed[u.ID].DeletedAt)
		assert.Equal(t, u.Handle, listed[u.ID].Handle)
		assert.NotContains(t, listed, other.ID)

		require.NoError(t, b.PurgeUser(ctx, u.ID))
		assert.NotContains(t, deletedUsers(t, b), u.ID)
		require.NoError(t, b.CreateUser(ctx, dup), "the purge frees the handle")
		got, err := b.FindUserByHandle(ctx, u.Handle)
		require.NoError(t, err)
		assert.Equal(t, dup.ID, got.ID)
		// Purging again changes nothing, and leaves the new owner's handle.
		require.NoError(t, b.PurgeUser(ctx, u.ID))
		got, err = b.FindUserByHandle(ctx, u.Handle)
		require.NoError(t, err)
		assert.Equal(t, dup.ID, got.ID)
	})
	t.Run("EndsEveryToken", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		_, err := b.RevokeTokens(ctx, u.ID, store.TokenRevocation{TokenID: "a", Expires: c.Now().Add(time.Hour), Now: c.Now()})
		require.NoError(t, err)
		require.NoError(t, b.DeleteUser(ctx, u.ID, c.Now()))
		assert.Equal(t, 1, deletedUsers(t, b)[u.ID].TokenVersion, "a token issued before is refused by its version")
	})
	t.Run("Refusals", func(t *testing.T) {
		notFound(t, b.DeleteUser(ctx, store.NewID(c.Now()), c.Now()))
		live := mustCreateUser(t, b, c)
		assert.Equal(t, store.ECONFLICT, store.ErrorCode(b.PurgeUser(ctx, live.ID)), "a live user is never purged")
		mustUser(t, b, live.ID)
		assert.NoError(t, b.PurgeUser(ctx, store.NewID(c.Now())), "purging a missing user is done already")
	})
	t.Run("ListPaged", func(t *testing.T) {
		var want []store.ID
		for range 3 {
			u := mustCreateUser(t, b, c)
			require.NoError(t, b.DeleteUser(ctx, u.ID, c.Now()))
			want = append(want, u.ID)
		}
		var got []store.ID
		after := store.NilID
		for range 10 {
			page, err := b.ListDeletedUsers(ctx, after, 2)
			require.NoError(t, err)
			require.LessOrEqual(t, len(page), 2)
			if len(page) == 0 {
				break
			}
			for _, u := range page {
				got = append(got, u.ID)
			}
			after = page[len(page)-1].ID
		}
		assert.IsIncreasing(t, idStrings(got))
		assert.Subset(t, got, want)
	})
}

// deletedUsers lists every deleted user not yet purged, by ID.
func deletedUsers(t *testing.T, b storage.Backend) map[store.ID]*store.User {
	t.Helper()
	out := map[store.ID]*store.User{}
	users, err := b.ListDeletedUsers(ctx, store.NilID, 1000)
	require.NoError(t, err)
	for _, u := range users {
		out[u.ID] = u
	}
	return out
}

func idStrings(ids []store.ID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
