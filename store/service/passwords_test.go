package service_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
)

// TestService_PasswordsWaitTheirTurn checks that password checks run a few
// at a time, and that one whose request ends while it waits (the client
// left, or its time ran out) returns at once without hashing: bcrypt work
// must not outlive the client that asked for it.
func TestService_PasswordsWaitTheirTurn(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	be, err := embedded.Open(t.TempDir(), embedded.Options{Logger: log})
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Close() })
	hub := pubsub.NewHub()
	t.Cleanup(hub.Close)
	svc := service.NewService(be, hub, service.Options{Logger: log, PasswordCost: 12, PasswordWorkers: 1})
	ctx := context.Background()
	_, err = svc.SignUp(ctx, service.SignUpInput{Handle: "alice", Password: "correct horse"})
	require.NoError(t, err)
	require.EqualValues(t, 1, svc.Stats().PasswordChecks)

	// A logIn at cost 12 (a few hundred ms) holds the only slot.
	var held sync.WaitGroup
	held.Go(func() { _, _ = svc.LogIn(ctx, "alice", "wrong password") })
	require.Eventually(t, func() bool { return svc.Stats().PasswordChecks == 2 }, 5*time.Second, time.Millisecond)

	gone, leave := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make([]error, 5)
	for i := range errs {
		wg.Go(func() { _, errs[i] = svc.LogIn(gone, "alice", "another guess") })
	}
	require.Eventually(t, func() bool { return svc.Stats().PasswordsWaiting == 5 }, 5*time.Second, time.Millisecond)
	start := time.Now()
	leave()
	wg.Wait()
	assert.Less(t, time.Since(start), 100*time.Millisecond, "waiting checks give up as their request ends")
	for _, err := range errs {
		assert.ErrorIs(t, err, context.Canceled)
	}
	held.Wait()
	assert.EqualValues(t, 2, svc.Stats().PasswordChecks, "none of them hashed")
	assert.Zero(t, svc.Stats().PasswordsWaiting)
}
