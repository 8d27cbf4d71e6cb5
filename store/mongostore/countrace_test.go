package mongostore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// markers is how many pending-operation markers document id of coll holds.
func markers(t *testing.T, st *mongostore.Store, coll string, id store.ID) int {
	t.Helper()
	var raw bson.M
	require.NoError(t, st.Database().Collection(coll).FindOne(context.Background(), bson.D{{Key: "_id", Value: primitive.ObjectID(id)}}).Decode(&raw))
	po, _ := raw["po"].(bson.A)
	return len(po)
}

// A reply's job runs its first chunk (and counts the reply) while the
// poster waits before its own first increment, then the poster goes on:
// the author and the parent count the reply once, and no marker is left.
// (When the poster forgot the markers as soon as its flag was set, either
// side could count again after the other had finished.)
func TestFaults_CountJobBeforePoster(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	parent, _ := mkPost(t, st, a)

	f.gated, f.release = make(chan struct{}), make(chan struct{})
	f.gate.Store(true)
	now := tickClock()
	m := &store.Message{ID: store.NewID(now), AuthorID: x, Text: "re", Kind: store.KindReply, CreatedAt: now,
		ReplyToID: parent.ID, ReplyToAuthorID: a, RootID: parent.ID, RootAuthorID: a}
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: x, CreatedAt: now}
	posted := make(chan error)
	go func() { posted <- st.CreateMessage(ctx, m, j) }()
	<-f.gated // stored, not yet counted
	_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j, At: tickClock(), Done: true})
	require.NoError(t, err)
	close(f.release)
	require.NoError(t, <-posted)
	assert.Equal(t, threadState{replies: 1, posted: 1}, readThread(t, st, parent, x), "counted once, markers forgotten")
	assert.Zero(t, markers(t, st, "users", x), "the author's markers")

	// Its deletion, the retraction's first chunk running while the
	// deleter waits before its decrement: taken out once.
	f.gated, f.release = make(chan struct{}), make(chan struct{})
	f.gate.Store(true)
	r := retractJob(m)
	deleted := make(chan error)
	go func() { deleted <- st.DeleteMessage(ctx, m.ID, r) }()
	<-f.gated
	_, err = st.RemoveInboxEntries(ctx, storage.Removal{Job: r, Done: true})
	require.NoError(t, err)
	close(f.release)
	require.NoError(t, <-deleted)
	assert.Equal(t, threadState{}, readThread(t, st, parent, x), "uncounted once, markers forgotten")
	assert.Zero(t, markers(t, st, "users", x), "the author's markers")
}

// Replies posted while their jobs' first chunks run at once, then deleted
// while their retractions' first chunks run at once, in whatever orders
// the scheduler makes: each counted once, then taken out once, and no
// marker left behind by the hand-over of forgetting between the two.
// (The order that used to count twice is TestFaults_CountJobBeforePoster.)
func TestCount_PosterAndJobRace(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	a, x := mkUser(t, st, "author"), mkUser(t, st, "xxx")
	parent, _ := mkPost(t, st, a)
	const n = 40
	msgs := make([]*store.Message, n)
	for i := range msgs {
		now := tickClock()
		msgs[i] = &store.Message{ID: store.NewID(now), AuthorID: x, Text: "re", Kind: store.KindReply, CreatedAt: now,
			ReplyToID: parent.ID, ReplyToAuthorID: a, RootID: parent.ID, RootAuthorID: a}
	}
	// both runs f and g at once, g until it finds what f stored.
	both := func(f func() error, g func() error) error {
		errs := make(chan error, 2)
		go func() { errs <- f() }()
		go func() {
			for range 1000 {
				if err := g(); store.ErrorCode(err) != store.ENOTFOUND {
					errs <- err
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
			errs <- errors.New("never found")
		}()
		return errors.Join(<-errs, <-errs)
	}
	at := tickClock() // tickClock is not for goroutines
	var wg sync.WaitGroup
	for _, m := range msgs {
		j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: x, CreatedAt: m.CreatedAt}
		wg.Go(func() {
			assert.NoError(t, both(func() error { return st.CreateMessage(ctx, m, j) },
				func() error {
					_, err := st.DeliverInbox(ctx, storage.Delivery{Job: j, At: at, Done: true})
					return err
				}))
		})
	}
	wg.Wait()
	assert.Equal(t, threadState{replies: n, posted: n}, readThread(t, st, parent, x), "each counted once, markers forgotten")
	assert.Zero(t, markers(t, st, "users", x), "the author's markers")

	for _, m := range msgs {
		r := retractJob(m)
		wg.Go(func() {
			assert.NoError(t, both(func() error { return st.DeleteMessage(ctx, m.ID, r) },
				func() error { _, err := st.RemoveInboxEntries(ctx, storage.Removal{Job: r, Done: true}); return err }))
		})
	}
	wg.Wait()
	assert.Equal(t, threadState{}, readThread(t, st, parent, x), "each taken out once, markers forgotten")
	assert.Zero(t, markers(t, st, "users", x), "the author's markers")
}
