package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// TestLanes_ConcurrentAuthors runs the fan-out on four lanes on the
// embedded engine while authors post, edit and delete, readers follow and
// unfollow, and an inactive user returns, all at once, with chunks of two
// followers so that jobs of different authors interleave chunk by chunk.
// At the end every inbox holds exactly the live messages of its owner's
// followees and counts them; a follower who never unfollows saw each
// author's additions, edits and deletions in the order they were made.
func TestLanes_ConcurrentAuthors(t *testing.T) {
	for _, strategy := range []service.Strategy{service.StrategyWrite, service.StrategyBucket} {
		t.Run(string(strategy), func(t *testing.T) { testLanesConcurrent(t, strategy) })
	}
}

func testLanesConcurrent(t *testing.T, strategy service.Strategy) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	// The sleepers are made first, so that they are first among every
	// author's followers: a delivery's first chunk passes them while they
	// are inactive, and the rest of the job may still be stored when their
	// rebuild runs.
	now := time.Now().UTC().Truncate(time.Millisecond)
	sleepers := make([]store.ID, 3)
	for i := range sleepers {
		u := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("sleeper%d", i), CreatedAt: now.Add(-72 * time.Hour), LastSeenAt: now.Add(-72 * time.Hour)}
		u.DisplayName = u.Handle
		require.NoError(t, st.CreateUser(ctx, u))
		sleepers[i] = u.ID
	}

	svc := service.NewService(st, pubsub.NewHub(), service.Options{
		Strategy: strategy, Lanes: 4, ChunkSize: 2, InactiveAfter: 24 * time.Hour, InboxCap: 1000, FollowBackfill: 1000,
		PasswordCost: bcrypt.MinCost, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	require.Len(t, svc.Stats().Lanes, 4)

	mk := func(h string) store.ID {
		u, err := svc.SignUp(ctx, service.SignUpInput{Handle: h, Password: "password1", DisplayName: h})
		require.NoError(t, err)
		return u.ID
	}
	const nAuthors, nReaders, posts = 8, 10, 12
	watcher := mk("watcher") // follows every author throughout
	authors := make([]store.ID, nAuthors)
	for i := range authors {
		authors[i] = mk(fmt.Sprintf("author%d", i))
	}
	readers := make([]store.ID, nReaders)
	for i := range readers {
		readers[i] = mk(fmt.Sprintf("reader%d", i))
	}
	for _, a := range authors {
		_, err := svc.Follow(ctx, watcher, a)
		require.NoError(t, err)
		for _, sl := range sleepers {
			_, err = st.Follow(ctx, sl, a, now)
			require.NoError(t, err)
		}
	}
	waitIdle(t, svc)

	subCtx, unsubscribe := context.WithCancel(ctx)
	defer unsubscribe()
	events, err := svc.Subscribe(subCtx, watcher)
	require.NoError(t, err)
	var seen []store.Event
	evDone := make(chan struct{})
	go func() {
		defer close(evDone)
		for e := range events {
			seen = append(seen, e)
		}
	}()

	// What each author did, in order.
	type authorLog struct {
		posted, edited, deleted []store.ID
	}
	logs := make([]authorLog, nAuthors)
	var wg sync.WaitGroup
	var postsMade atomic.Int32
	wake := make(chan struct{}, nAuthors*posts)
	for i, a := range authors {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			l := &logs[i]
			for p := range posts {
				m, err := svc.PostMessage(ctx, a, service.PostInput{Text: fmt.Sprintf("post %d of %d", p, i)})
				if !assert.NoError(t, err) {
					return
				}
				l.posted = append(l.posted, m.ID)
				postsMade.Add(1)
				wake <- struct{}{}
				switch rng.IntN(4) {
				case 0:
					d := l.posted[rng.IntN(len(l.posted))]
					if !slices.Contains(l.deleted, d) {
						if assert.NoError(t, svc.DeleteMessage(ctx, a, d)) {
							l.deleted = append(l.deleted, d)
						}
					}
				case 1:
					e := l.posted[rng.IntN(len(l.posted))]
					if !slices.Contains(l.deleted, e) {
						_, err := svc.EditMessage(ctx, a, e, fmt.Sprintf("edited %d", len(l.edited)))
						if assert.NoError(t, err) {
							l.edited = append(l.edited, e)
						}
					}
				}
			}
		})
	}
	for i, r := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			for range 3 * posts {
				a := authors[rng.IntN(nAuthors)]
				var err error
				if rng.IntN(3) == 0 {
					_, err = svc.Unfollow(ctx, r, a)
				} else {
					_, err = svc.Follow(ctx, r, a)
				}
				assert.NoError(t, err)
			}
		})
	}
	wg.Go(func() {
		// The sleepers return (a rebuild each) a quarter, half and three
		// quarters through the posts.
		for i, sl := range sleepers {
			for int(postsMade.Load()) < (i+1)*nAuthors*posts/4 {
				<-wake
			}
			svc.Seen(ctx, sl)
		}
	})
	wg.Wait()
	waitIdle(t, svc)
	require.Equal(t, uint64(len(sleepers)), svc.Stats().RebuildsStarted)

	// Every inbox holds the live messages of its owner's followees.
	deleted := map[store.ID]bool{}
	byAuthor := map[store.ID][]store.ID{}
	for i, l := range logs {
		for _, d := range l.deleted {
			deleted[d] = true
		}
		for _, m := range l.posted {
			if !deleted[m] {
				byAuthor[authors[i]] = append(byAuthor[authors[i]], m)
			}
		}
	}
	for _, owner := range slices.Concat([]store.ID{watcher}, sleepers, readers) {
		follows, err := svc.FindFollowing(ctx, owner, authors)
		require.NoError(t, err)
		var want []store.ID
		for i, a := range authors {
			if follows[i] {
				want = append(want, byAuthor[a]...)
			}
		}
		// As stored: the service's page would skip a deleted message's
		// entry left behind.
		var got []store.ID
		items, _, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: strategy.Layout(), Range: store.Backward(store.NilID, 1000)})
		require.NoError(t, err)
		for _, it := range items {
			got = append(got, it.MessageID)
		}
		assert.ElementsMatch(t, want, got, "inbox of %s", owner)
		counts, err := svc.InboxCounts(ctx, owner)
		require.NoError(t, err)
		assert.Equal(t, len(want), counts.Total, "total of %s", owner)
		assert.Equal(t, len(want), counts.Unread, "unread of %s", owner)
	}

	// The watcher saw each author's additions, edits and deletions in order.
	unsubscribe()
	<-evDone
	evs := seen
	for i, a := range authors {
		var added, edited, removed []store.ID
		for _, e := range evs {
			if e.AuthorID != a {
				continue
			}
			switch e.Type {
			case store.EventAdded:
				added = append(added, e.MessageID)
			case store.EventEdited:
				edited = append(edited, e.MessageID)
			case store.EventDeleted:
				assert.Contains(t, added, e.MessageID, "deleted before it was added")
				removed = append(removed, e.MessageID)
			}
		}
		assert.NotEmpty(t, added, "author %d", i)
		assert.True(t, slices.IsSortedFunc(added, func(x, y store.ID) int { return x.Compare(y) }), "author %d: additions out of posting order", i)
		assert.True(t, isSubsequence(added, logs[i].posted), "author %d: additions %v of %v", i, added, logs[i].posted)
		assert.True(t, isSubsequence(removed, logs[i].deleted), "author %d: deletions %v out of order %v", i, removed, logs[i].deleted)
		assert.True(t, isSubsequence(edited, logs[i].edited), "author %d: edits %v out of order %v", i, edited, logs[i].edited)
	}
}

// isSubsequence reports whether sub is want with some items left out.
func isSubsequence(sub, want []store.ID) bool {
	for _, x := range sub {
		i := slices.Index(want, x)
		if i < 0 {
			return false
		}
		want = want[i+1:]
	}
	return true
}

// waitIdle waits until svc's fan-out has nothing queued or running.
func waitIdle(t *testing.T, svc *service.Service) {
	t.Helper()
	require.Eventually(t, svc.Idle, 30*time.Second, 2*time.Millisecond)
}

// gatedBackend holds a delivery of one message before its second chunk
// until the gate opens.
type gatedBackend struct {
	storage.Backend
	message store.ID
	reached chan struct{} // closed when the second chunk waits
	gate    chan struct{}
	once    sync.Once
}

func (g *gatedBackend) DeliverInbox(ctx context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	if d.Job.MessageID == g.message && len(d.Job.Cursor) > 0 {
		g.once.Do(func() { close(g.reached) })
		<-g.gate
	}
	return g.Backend.DeliverInbox(ctx, d)
}

// TestLanes_RebuildWaitsForDeliveries checks that a returning user's
// rebuild waits while a delivery on another lane is half done: its first
// chunk passed the user while inactive, and the rebuild leaves the
// message to the delivery, still stored. Run beside it, the rebuild would
// leave the message out of the inbox for good.
func TestLanes_RebuildWaitsForDeliveries(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const lanes = 4
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(h string, seen time.Time) store.ID {
		u := &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, CreatedAt: seen, LastSeenAt: seen}
		require.NoError(t, st.CreateUser(ctx, u))
		return u.ID
	}
	// First among the author's followers: in the delivery's first chunk.
	sleeper := mk("sleeper", now.Add(-72*time.Hour))
	rebuildLane := service.LaneOf(&storage.Job{Kind: storage.JobRebuild, OwnerID: sleeper}, lanes)
	var author store.ID
	for i := 0; ; i++ {
		author = mk(fmt.Sprintf("author%d", i), now)
		if service.LaneOf(&storage.Job{Kind: storage.JobDeliver, AuthorID: author}, lanes) != rebuildLane {
			break
		}
	}
	for _, f := range []store.ID{sleeper, mk("f1", now), mk("f2", now), mk("f3", now)} {
		_, err := st.Follow(ctx, f, author, now)
		require.NoError(t, err)
	}

	// The message and its delivery job are stored as PostMessage would;
	// Start queues the job, as after a restart.
	at := time.Now().UTC().Truncate(time.Millisecond)
	m := &store.Message{ID: store.NewID(at), AuthorID: author, Text: "hello", Kind: store.KindPost, CreatedAt: at}
	require.NoError(t, st.CreateMessage(ctx, m, &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: at}))
	g := &gatedBackend{Backend: st, message: m.ID, reached: make(chan struct{}), gate: make(chan struct{})}
	svc := service.NewService(g, pubsub.NewHub(), service.Options{Lanes: lanes, ChunkSize: 2, InactiveAfter: 24 * time.Hour, PasswordCost: bcrypt.MinCost})
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	<-g.reached // the first chunk passed the inactive sleeper

	svc.Seen(ctx, sleeper)
	require.Equal(t, uint64(1), svc.Stats().RebuildsStarted)
	time.Sleep(100 * time.Millisecond)
	assert.Zero(t, svc.Stats().JobsDone[storage.JobRebuild], "the rebuild ran beside a half-done delivery")
	close(g.gate)
	waitIdle(t, svc)
	assert.Equal(t, uint64(1), svc.Stats().JobsDone[storage.JobRebuild])
	items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: sleeper, Layout: storage.LayoutBuckets, Range: store.Backward(store.NilID, 10)})
	require.NoError(t, err)
	require.Len(t, items, 1, "the delivery's message reached the returning user")
	assert.Equal(t, m.ID, items[0].MessageID)
	assert.Equal(t, 1, counts.Total)
}

// repostGate holds the first delivery chunk of a repost of hidden's
// messages, its owners already chosen, until the gate opens.
type repostGate struct {
	storage.Backend
	hidden  store.ID
	reached chan struct{}
	gate    chan struct{}
	once    sync.Once
}

func (g *repostGate) DeliverInbox(ctx context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	if d.Job.RepostOfAuthorID == g.hidden {
		first := false
		g.once.Do(func() { first = true; close(g.reached) })
		if first {
			<-g.gate
		}
	}
	return g.Backend.DeliverInbox(ctx, d)
}

// TestLanes_HideWaitsForDeliveries checks that the job removing a blocked
// user's reposts from the blocker's inbox waits while a repost's chunk,
// its owners chosen before the block, is in flight on another lane: run
// beside it, the job could walk the inbox before the chunk writes the
// repost, and the repost would stay.
func TestLanes_HideWaitsForDeliveries(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	const lanes = 4
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(h string) store.ID {
		u := &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		return u.ID
	}
	hidden, reposter := mk("hidden"), mk("reposter")
	var owner store.ID
	for i := 0; ; i++ {
		owner = mk(fmt.Sprintf("owner%d", i))
		if service.LaneOf(&storage.Job{Kind: storage.JobHideReposts, OwnerID: owner}, lanes) != service.LaneOf(&storage.Job{Kind: storage.JobDeliver, AuthorID: reposter}, lanes) {
			break
		}
	}
	_, err = st.Follow(ctx, owner, reposter, now)
	require.NoError(t, err)

	g := &repostGate{Backend: st, hidden: hidden, reached: make(chan struct{}), gate: make(chan struct{})}
	svc := service.NewService(g, pubsub.NewHub(), service.Options{Strategy: service.StrategyWrite, Lanes: lanes, PasswordCost: bcrypt.MinCost})
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Close(context.Background()) })

	m, err := svc.PostMessage(ctx, hidden, service.PostInput{Text: "original"})
	require.NoError(t, err)
	_, err = svc.Repost(ctx, reposter, m.ID)
	require.NoError(t, err)
	<-g.reached // the repost's chunk chose the owner, not yet blocking
	_, err = svc.Block(ctx, owner, hidden)
	require.NoError(t, err)
	time.Sleep(100 * time.Millisecond)
	assert.Zero(t, svc.Stats().JobsDone[storage.JobHideReposts], "a hide job ran beside a repost's chunk in flight")
	close(g.gate)
	waitIdle(t, svc)
	assert.Equal(t, uint64(2), svc.Stats().JobsDone[storage.JobHideReposts], "the blocker's and the blocked user's")
	items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: storage.LayoutEntries, Range: store.Backward(store.NilID, 10)})
	require.NoError(t, err)
	assert.Empty(t, items, "the repost of the blocked user's message left the blocker's inbox")
	assert.Zero(t, counts.Total)
}

// TestLanes_RestartWithOtherLaneCount stops a one-lane Service in the
// middle of a delivery (its first chunk passed an inactive follower) and
// starts a four-lane one on the same store while that follower returns:
// the half-done job runs first, the rebuild after it, and every inbox
// ends exact.
func TestLanes_RestartWithOtherLaneCount(t *testing.T) {
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(h string, seen time.Time) store.ID {
		u := &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, CreatedAt: seen, LastSeenAt: seen}
		require.NoError(t, st.CreateUser(ctx, u))
		return u.ID
	}
	sleeper := mk("sleeper", now.Add(-72*time.Hour)) // first: in the first chunk
	authors := []store.ID{mk("a", now), mk("b", now)}
	owners := []store.ID{sleeper}
	for i := range 5 {
		owners = append(owners, mk(fmt.Sprintf("f%d", i), now))
	}
	for _, a := range authors {
		for _, o := range owners {
			_, err := st.Follow(ctx, o, a, now)
			require.NoError(t, err)
		}
	}
	opts := service.Options{ChunkSize: 2, InactiveAfter: 24 * time.Hour, PasswordCost: bcrypt.MinCost}

	// The first Service stops, its fan-out cut short, with a's delivery
	// past its first chunk and b's not begun.
	first := opts
	first.Lanes = 1
	g := &cutBackend{Backend: st, author: authors[0], reached: make(chan struct{})}
	svc := service.NewService(g, pubsub.NewHub(), first)
	require.NoError(t, svc.Start(ctx))
	var posts []store.ID
	m, err := svc.PostMessage(ctx, authors[0], service.PostInput{Text: "a's"})
	require.NoError(t, err)
	posts = append(posts, m.ID)
	<-g.reached
	m, err = svc.PostMessage(ctx, authors[1], service.PostInput{Text: "b's"})
	require.NoError(t, err)
	posts = append(posts, m.ID)
	stopped, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, svc.Close(stopped), context.Canceled)
	jobs, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	require.Len(t, jobs, 2)
	require.NotEmpty(t, jobs[0].Cursor, "a's delivery is half done")

	second := opts
	second.Lanes = 4
	svc = service.NewService(st, pubsub.NewHub(), second)
	require.NoError(t, svc.Start(ctx))
	t.Cleanup(func() { _ = svc.Close(context.Background()) })
	svc.Seen(ctx, sleeper)
	waitIdle(t, svc)
	assert.Equal(t, uint64(1), svc.Stats().JobsDone[storage.JobRebuild])
	for _, o := range owners {
		items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: o, Layout: storage.LayoutBuckets, Range: store.Backward(store.NilID, 10)})
		require.NoError(t, err)
		var got []store.ID
		for _, it := range items {
			got = append(got, it.MessageID)
		}
		assert.ElementsMatch(t, posts, got, "inbox of %s", o)
		assert.Equal(t, len(posts), counts.Total, "total of %s", o)
	}
}

// cutBackend fails every delivery of author's messages after the first
// chunk, until its caller gives up: a process stopped mid-job.
type cutBackend struct {
	storage.Backend
	author  store.ID
	reached chan struct{}
	once    sync.Once
}

func (g *cutBackend) DeliverInbox(ctx context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	if d.Job.AuthorID == g.author && len(d.Job.Cursor) > 0 {
		g.once.Do(func() { close(g.reached) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return g.Backend.DeliverInbox(ctx, d)
}
