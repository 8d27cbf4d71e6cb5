package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
)

// testRevokeTokens checks the one storage primitive of logging out: the
// revoked list and the token version, kept on the user.
func testRevokeTokens(t *testing.T, open OpenFunc) {
	b := openBackend(t, open)
	c := newClock()
	now := c.Now()
	revoke := func(t *testing.T, id store.ID, r store.TokenRevocation) *store.User {
		t.Helper()
		u, err := b.RevokeTokens(ctx, id, r)
		require.NoError(t, err)
		// What it returns is what is stored.
		assert.Equal(t, u.TokenVersion, mustUser(t, b, id).TokenVersion)
		assert.Equal(t, u.RevokedTokens, mustUser(t, b, id).RevokedTokens)
		return u
	}
	hour := now.Add(time.Hour).Truncate(time.Second)

	t.Run("OK", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		assert.Zero(t, u.TokenVersion)
		assert.Empty(t, mustUser(t, b, u.ID).RevokedTokens)

		got := revoke(t, u.ID, store.TokenRevocation{TokenID: "a", Expires: hour, Now: now})
		assert.Equal(t, []store.RevokedToken{{ID: "a", Expires: hour}}, got.RevokedTokens)
		assert.Zero(t, got.TokenVersion)
		// Twice is once.
		got = revoke(t, u.ID, store.TokenRevocation{TokenID: "a", Expires: hour, Now: now})
		assert.Len(t, got.RevokedTokens, 1)
		got = revoke(t, u.ID, store.TokenRevocation{TokenID: "b", Expires: hour.Add(time.Second), Now: now})
		assert.Equal(t, []string{"a", "b"}, tokenIDs(got.RevokedTokens))
		// The rest of the user is untouched.
		assert.Equal(t, u.Handle, got.Handle)
		assert.Equal(t, u.PasswordHash, got.PasswordHash)
	})
	t.Run("All", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		revoke(t, u.ID, store.TokenRevocation{TokenID: "a", Expires: hour, Now: now})
		got := revoke(t, u.ID, store.TokenRevocation{All: true, Now: now})
		assert.Equal(t, 1, got.TokenVersion)
		assert.Empty(t, got.RevokedTokens, "a new version ends every earlier token; the list has no more use")
		got = revoke(t, u.ID, store.TokenRevocation{All: true, Now: now})
		assert.Equal(t, 2, got.TokenVersion)
	})
	t.Run("AllButOneWithPassword", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		revoke(t, u.ID, store.TokenRevocation{TokenID: "a", Expires: hour, Now: now})
		got := revoke(t, u.ID, store.TokenRevocation{All: true, Keep: "b", Now: now, PasswordHash: []byte("new hash")})
		assert.Equal(t, 1, got.TokenVersion)
		assert.Equal(t, "b", got.KeptToken)
		assert.Empty(t, got.RevokedTokens)
		assert.Equal(t, []byte("new hash"), mustUser(t, b, u.ID).PasswordHash, "the password changes in the same step")
		assert.Equal(t, "b", mustUser(t, b, u.ID).KeptToken)
		// One token's logOut keeps the kept one; another revocation of
		// all ends it, as does overflowing the list.
		got = revoke(t, u.ID, store.TokenRevocation{TokenID: "c", Expires: hour, Now: now})
		assert.Equal(t, "b", got.KeptToken)
		assert.Equal(t, []byte("new hash"), got.PasswordHash, "a revocation without a hash leaves the password")
		got = revoke(t, u.ID, store.TokenRevocation{All: true, Now: now})
		assert.Empty(t, got.KeptToken)
		assert.Empty(t, mustUser(t, b, u.ID).KeptToken)
	})
	t.Run("ExpiredDropped", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		revoke(t, u.ID, store.TokenRevocation{TokenID: "old", Expires: now.Add(time.Minute).Truncate(time.Second), Now: now})
		later := now.Add(2 * time.Minute)
		got := revoke(t, u.ID, store.TokenRevocation{TokenID: "new", Expires: later.Add(time.Hour).Truncate(time.Second), Now: later})
		assert.Equal(t, []string{"new"}, tokenIDs(got.RevokedTokens), "an expired token is refused anyway: it need not be kept")
	})
	t.Run("Full", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		for i := range store.MaxRevokedTokens {
			revoke(t, u.ID, store.TokenRevocation{TokenID: fmt.Sprint(i), Expires: hour, Now: now})
		}
		got := revoke(t, u.ID, store.TokenRevocation{TokenID: "one-too-many", Expires: hour, Now: now})
		assert.Equal(t, 1, got.TokenVersion, "past the cap, every token ends")
		assert.Empty(t, got.RevokedTokens)
	})
	t.Run("Concurrent", func(t *testing.T) {
		u := mustCreateUser(t, b, c)
		const n = 8
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				_, err := b.RevokeTokens(ctx, u.ID, store.TokenRevocation{TokenID: fmt.Sprint(i), Expires: hour, Now: now})
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		assert.Len(t, mustUser(t, b, u.ID).RevokedTokens, n, "no revocation is lost to another")
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := b.RevokeTokens(ctx, store.NewID(now), store.TokenRevocation{All: true, Now: now})
		assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
	})
}

func tokenIDs(ts []store.RevokedToken) []string {
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.ID
	}
	return ids
}

// testSessions checks Service.Authenticate, LogOut and LogOutEverywhere
// over the backend.
func testSessions(t *testing.T, open OpenFunc) {
	b := openBackend(t, open)
	c := newClock()
	svc, _ := newService(t, b, c)
	u, err := svc.SignUp(ctx, service.SignUpInput{Handle: "sessions_user", Password: "password1"})
	require.NoError(t, err)
	session := func(version int, id string) store.Session {
		now := c.Now()
		return store.Session{UserID: u.ID, TokenID: id, Version: version, IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	}
	refused := func(t *testing.T, sess store.Session) {
		t.Helper()
		assert.Equal(t, store.EUNAUTHENTICATED, store.ErrorCode(svc.Authenticate(ctx, sess)))
	}

	a, other := session(0, "a"), session(0, "b")
	require.NoError(t, svc.Authenticate(ctx, a))
	require.NoError(t, svc.LogOut(ctx, a))
	refused(t, a)
	require.NoError(t, svc.Authenticate(ctx, other), "logOut ends its own token only")

	require.NoError(t, svc.LogOutEverywhere(ctx, u.ID))
	refused(t, other)
	require.NoError(t, svc.Authenticate(ctx, session(1, "c")), "a token issued after logOutEverywhere works")

	expired := session(1, "d")
	expired.ExpiresAt = c.Now().Add(-time.Second)
	refused(t, expired)

	ghost := session(0, "e")
	ghost.UserID = store.NewID(c.Now())
	refused(t, ghost)
}
