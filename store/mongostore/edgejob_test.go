package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// A follow or unfollow job is stored before its edge changes. On a backend
// shared by processes the lease holder also finds jobs by polling, and
// could so run one between the two writes, see the edge as it was, take
// it for a change made since and do nothing: a follow without its
// backfill, an unfollow whose entries stay (seen in CI under hybrid). The
// holder leaves such jobs to their request for Options.EdgeJobGrace.
func TestEdgeJobs_PolledBeforeTheEdgeChanges(t *testing.T) {
	ctx := context.Background()
	b := openLungo(t)
	const grace = 700 * time.Millisecond
	svc := service.NewService(b, pubsub.NewHub(), service.Options{Strategy: service.StrategyBucket, PasswordCost: bcrypt.MinCost,
		JobPoll: 10 * time.Millisecond, EdgeJobGrace: grace})
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Close(ctx) })
	author, err := svc.SignUp(ctx, service.SignUpInput{Handle: "author", Password: "password123"})
	require.NoError(t, err)
	reader, err := svc.SignUp(ctx, service.SignUpInput{Handle: "reader", Password: "password123"})
	require.NoError(t, err)
	for _, text := range []string{"one", "two", "three"} {
		_, err := svc.PostMessage(ctx, author.ID, service.PostInput{Text: text})
		require.NoError(t, err)
	}
	require.Eventually(t, svc.Idle, 10*time.Second, 5*time.Millisecond)
	inbox := func() int {
		page, err := svc.Inbox(ctx, reader.ID, store.Forward(store.NilID, 10))
		require.NoError(t, err)
		return len(page.Items)
	}
	stored := func(j *storage.Job) bool {
		jobs, err := b.PendingJobs(ctx)
		require.NoError(t, err)
		for _, p := range jobs {
			if p.ID == j.ID {
				return true
			}
		}
		return false
	}

	for _, kind := range []storage.JobKind{storage.JobFollow, storage.JobUnfollow} {
		// As another process's request does: the job first, then, a
		// moment later, the edge.
		job := &storage.Job{ID: store.NewID(time.Now()), Kind: kind, Layout: storage.LayoutBuckets, OwnerID: reader.ID, AuthorID: author.ID, CreatedAt: time.Now()}
		require.NoError(t, b.StoreJob(ctx, job))
		time.Sleep(grace / 4) // many polls
		assert.True(t, stored(job), "the job waits for its edge")
		if kind == storage.JobFollow {
			_, err = b.Follow(ctx, reader.ID, author.ID, time.Now())
		} else {
			_, err = b.Unfollow(ctx, reader.ID, author.ID)
		}
		require.NoError(t, err)
		require.Eventually(t, func() bool { return !stored(job) }, 10*time.Second, 10*time.Millisecond, "the job runs after the grace")
		require.Eventually(t, svc.Idle, 10*time.Second, 5*time.Millisecond)
		if kind == storage.JobFollow {
			assert.Equal(t, 3, inbox(), "the follow brought the author's messages")
		} else {
			assert.Equal(t, 0, inbox(), "the unfollow took them away")
		}
	}
}
