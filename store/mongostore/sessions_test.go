package mongostore

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
)

// TestSessions_OtherInstance checks that a logOut made through one Herald
// process ends the token on another sharing the database at once: the
// other process had the user's sessions cached as valid, and learns of the
// revocation through the events, not by waiting out SessionRecheck.
func TestSessions_OtherInstance(t *testing.T) {
	ctx := context.Background()
	c1, engine := newEngine(t, lungo.Options{})
	c2 := lungo.NewClient(engine)
	log := slog.New(slog.DiscardHandler)
	start := func(client lungo.IClient) *service.Service {
		st := New(client, "herald", Options{})
		require.NoError(t, st.EnsureIndexes(ctx))
		ev := startEvents(t, client, "herald", EventsOptions{})
		svc := service.NewService(st, ev, service.Options{Logger: log, PasswordCost: 4})
		require.NoError(t, svc.Start(ctx))
		t.Cleanup(func() { _ = svc.Close(ctx) })
		return svc
	}
	a, b := start(c1), start(c2)
	u, err := a.SignUp(ctx, service.SignUpInput{Handle: "alice", Password: "password1"})
	require.NoError(t, err)
	now := time.Now()
	sess := store.Session{UserID: u.ID, TokenID: "t1", IssuedAt: now, ExpiresAt: now.Add(time.Hour)}
	require.NoError(t, b.Authenticate(ctx, sess), "b now has alice's sessions cached")

	told := make(chan store.ID, 1)
	b.OnSessionsRevoked(func(user store.ID) { told <- user })
	require.NoError(t, a.LogOut(ctx, sess))
	select {
	case got := <-told:
		assert.Equal(t, u.ID, got)
	case <-time.After(5 * time.Second):
		t.Fatal("b was not told of the revocation within 5s")
	}
	assert.Equal(t, store.EUNAUTHENTICATED, store.ErrorCode(b.Authenticate(ctx, sess)))
}
