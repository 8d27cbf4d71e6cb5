package mongostore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// Owner lanes across processes: two Services share one database, each
// with a Store of its own, as two processes would.

const sharedLanes = 4

type sharedDB struct {
	client lungo.IClient
	st     *mongostore.Store // the first process's store, for reads
}

func openShared(t *testing.T) *sharedDB {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	t.Cleanup(func() { engine.Close() })
	st := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	return &sharedDB{client: client, st: st}
}

// process starts a Service on st with four lanes and a short lease.
func (db *sharedDB) process(t *testing.T, st *mongostore.Store) *service.Service {
	return db.processWith(t, st, "", 3)
}

// processWith starts a Service on st with four lanes, a short lease, the
// strategy (the default if "") and the chunk size.
func (db *sharedDB) processWith(t *testing.T, st *mongostore.Store, strategy service.Strategy, chunk int) *service.Service {
	svc := service.NewService(st, pubsub.NewHub(), service.Options{
		Lanes: sharedLanes, LeaseTTL: 400 * time.Millisecond, JobPoll: 20 * time.Millisecond, ChunkSize: chunk,
		EdgeJobGrace: 50 * time.Millisecond, Strategy: strategy,
	})
	require.NoError(t, svc.Start(context.Background()))
	return svc
}

func heldLanes(svc *service.Service) []int {
	var out []int
	for i, l := range svc.Stats().Lanes {
		if l.Held {
			out = append(out, i)
		}
	}
	return out
}

// waitSplit waits until the held lanes are as want says, by process.
func waitSplit(t *testing.T, want func(a, b []int) bool, a, b *service.Service) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !want(heldLanes(a), heldLanes(b)) {
		require.True(t, time.Now().Before(deadline), "lanes held: %v and %v", heldLanes(a), heldLanes(b))
		time.Sleep(10 * time.Millisecond)
	}
}

func splitTwoTwo(a, b []int) bool {
	return len(a) == 2 && len(b) == 2 && !slices.ContainsFunc(a, func(i int) bool { return slices.Contains(b, i) })
}

// waitDrained waits until no job is stored and every process is idle.
func waitDrained(t *testing.T, st *mongostore.Store, svcs ...*service.Service) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := st.JobBacklog(context.Background(), 100)
		require.NoError(t, err)
		idle := b.Jobs == 0
		for _, s := range svcs {
			idle = idle && s.Idle()
		}
		if idle {
			return
		}
		require.True(t, time.Now().Before(deadline), "still %d jobs", b.Jobs)
		time.Sleep(20 * time.Millisecond)
	}
}

func sharedUser(t *testing.T, st *mongostore.Store, h string) store.ID {
	now := time.Now().UTC().Truncate(time.Millisecond)
	u := &store.User{ID: store.NewID(now), Handle: h, CreatedAt: now, LastSeenAt: now}
	require.NoError(t, st.CreateUser(context.Background(), u))
	return u.ID
}

// world is the users of a test: authors, and followers spread over every
// lane, each following some authors.
type world struct {
	authors, followers []store.ID
	follows            map[store.ID][]store.ID // follower → authors
}

func buildWorld(t *testing.T, st *mongostore.Store, svcs []*service.Service, nAuthors, nFollowers int) *world {
	ctx := context.Background()
	w := &world{follows: map[store.ID][]store.ID{}}
	for i := range nAuthors {
		w.authors = append(w.authors, sharedUser(t, st, fmt.Sprintf("author%d", i)))
	}
	lanes := map[int]bool{}
	for i, made := 0, 0; i < nFollowers; made++ {
		// Every lane gets a follower: a user whose lane still lacks one
		// takes one of the last places, others are left out of them (ids
		// made at once may hash to few lanes).
		f := sharedUser(t, st, fmt.Sprintf("follower%d", made))
		if l := storage.OwnerLane(f, sharedLanes); !lanes[l] {
			lanes[l] = true
		} else if nFollowers-i <= sharedLanes-len(lanes) {
			continue
		}
		w.followers = append(w.followers, f)
		for k, a := range w.authors {
			if (i+k)%3 != 0 {
				_, err := svcs[i%len(svcs)].Follow(ctx, f, a)
				require.NoError(t, err)
				w.follows[f] = append(w.follows[f], a)
			}
		}
		i++
	}
	require.Len(t, lanes, sharedLanes, "followers on every lane")
	return w
}

// checkInboxes checks that every follower's stored inbox holds exactly the
// live messages of the authors it follows, counted exactly, each author's
// newest first.
func checkInboxes(t *testing.T, st *mongostore.Store, w *world, posts map[store.ID][]store.ID, deleted map[store.ID]bool) {
	t.Helper()
	checkInboxesIn(t, st, storage.LayoutBuckets, w, posts, deleted)
}

func checkInboxesIn(t *testing.T, st *mongostore.Store, lay storage.Layout, w *world, posts map[store.ID][]store.ID, deleted map[store.ID]bool) {
	t.Helper()
	ctx := context.Background()
	for _, f := range w.followers {
		items, c, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: f, Layout: lay, Range: store.Forward(store.NilID, 1000)})
		require.NoError(t, err)
		var want []store.ID
		for _, a := range w.follows[f] {
			for _, m := range posts[a] {
				if !deleted[m] {
					want = append(want, m)
				}
			}
		}
		got := map[store.ID]int{}
		byAuthor := map[store.ID][]store.ID{}
		for _, it := range items {
			got[it.MessageID]++
			byAuthor[it.AuthorID] = append(byAuthor[it.AuthorID], it.MessageID)
		}
		for _, m := range want {
			assert.Equal(t, 1, got[m], "follower %s: message %s once", f, m)
		}
		assert.Len(t, items, len(want), "follower %s (lane %d): nothing more", f, storage.OwnerLane(f, sharedLanes))
		assert.Equal(t, len(want), c.Total, "follower %s: total", f)
		assert.Equal(t, len(want), c.Unread, "follower %s: unread", f)
		for a, ms := range byAuthor {
			var order []store.ID
			for _, m := range slices.Backward(posts[a]) {
				if slices.Contains(ms, m) {
					order = append(order, m)
				}
			}
			assert.Equal(t, order, ms, "follower %s: author %s's messages newest first", f, a)
		}
	}
}

// TestOwnerLanes_TwoProcesses runs two processes on four lanes: once both
// run they hold two each, and posts by several authors to followers on
// every lane, with a follow, an unfollow and a deletion among them, reach
// every inbox exactly once, counted exactly, in each author's order.
func TestOwnerLanes_TwoProcesses(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	a := db.process(t, db.st)
	defer func() { _ = a.Close(ctx) }()
	b := db.process(t, mongostore.New(db.client, "herald", mongostore.Options{}))
	defer func() { _ = b.Close(ctx) }()
	waitSplit(t, splitTwoTwo, a, b)

	w := buildWorld(t, db.st, []*service.Service{a, b}, 4, 24)
	posts, deleted := postRounds(t, a, b, w, map[int][2]int{4: {1, 1}}) // a deletion, its delivery perhaps still running
	waitDrained(t, db.st, a, b)
	waitSplit(t, splitTwoTwo, a, b) // a lane may have moved meanwhile under load; shares bring it back
	checkInboxes(t, db.st, w, posts, deleted)
	checkMessageCounts(t, db.st, posts, deleted)
}

// TestOwnerLanes_TwoProcessesGrouped is TwoProcesses with stored entries
// (strategy write) and chunks that hold many small jobs, so each lane
// stores its shares in groups (group.go), with a follow, an unfollow and
// deletions among them, one of them perhaps while its delivery is in a
// group: every inbox ends exact.
func TestOwnerLanes_TwoProcessesGrouped(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	a := db.processWith(t, db.st, service.StrategyWrite, 100)
	defer func() { _ = a.Close(ctx) }()
	b := db.processWith(t, mongostore.New(db.client, "herald", mongostore.Options{}), service.StrategyWrite, 100)
	defer func() { _ = b.Close(ctx) }()
	waitSplit(t, splitTwoTwo, a, b)

	w := buildWorld(t, db.st, []*service.Service{a, b}, 8, 24)
	waitDrained(t, db.st, a, b)
	posts, deleted := postRounds(t, a, b, w, map[int][2]int{4: {1, 4}, 5: {2, 5}})
	waitDrained(t, db.st, a, b)
	checkInboxesIn(t, db.st, storage.LayoutEntries, w, posts, deleted)
	checkMessageCounts(t, db.st, posts, deleted)
}

// postRounds runs six rounds of posts, each by every author of w at once
// (a burst the lanes store in groups), through a and b in turn: round 2
// adds a follow (on b), round 3 an unfollow (on a), and a round in
// deletions deletes (on b) author k's i-th post, deletions[round] = {k,
// i}. It returns each author's posts and the deleted ones.
func postRounds(t *testing.T, a, b *service.Service, w *world, deletions map[int][2]int) (map[store.ID][]store.ID, map[store.ID]bool) {
	t.Helper()
	ctx := context.Background()
	svcs := []*service.Service{a, b}
	posts := map[store.ID][]store.ID{}
	deleted := map[store.ID]bool{}
	for round := range 6 {
		ms := make([]*store.Message, len(w.authors))
		var wg sync.WaitGroup
		for k, author := range w.authors {
			wg.Go(func() {
				m, err := svcs[(round+k)%2].PostMessage(ctx, author, service.PostInput{Text: fmt.Sprintf("post %d", round)})
				assert.NoError(t, err)
				ms[k] = m
			})
		}
		wg.Wait()
		for k, author := range w.authors {
			require.NotNil(t, ms[k])
			posts[author] = append(posts[author], ms[k].ID)
		}
		switch round {
		case 2: // a follow: its backfill and the deliveries still stored
			f := w.followers[0]
			for _, x := range w.authors {
				if !slices.Contains(w.follows[f], x) {
					_, err := b.Follow(ctx, f, x)
					require.NoError(t, err)
					w.follows[f] = append(w.follows[f], x)
					break
				}
			}
		case 3: // an unfollow
			f := w.followers[1]
			_, err := a.Unfollow(ctx, f, w.follows[f][0])
			require.NoError(t, err)
			w.follows[f] = w.follows[f][1:]
		}
		if d, ok := deletions[round]; ok {
			author := w.authors[d[0]]
			m := posts[author][d[1]]
			require.NoError(t, b.DeleteMessage(ctx, author, m))
			deleted[m] = true
		}
	}
	return posts, deleted
}

// checkMessageCounts checks that each author's count holds its live
// messages: counted once, however many lanes ran each job.
func checkMessageCounts(t *testing.T, st *mongostore.Store, posts map[store.ID][]store.ID, deleted map[store.ID]bool) {
	t.Helper()
	for a, ms := range posts {
		live := 0
		for _, m := range ms {
			if !deleted[m] {
				live++
			}
		}
		u, err := st.FindUserByID(context.Background(), a)
		require.NoError(t, err)
		assert.Equal(t, live, u.MessageCount, "author %s", a)
	}
}

// TestOwnerLanes_HolderKilledMidChunk stops a lane holder as kill -9
// would, in the middle of a delivery chunk: its chunk's count step never
// returns and nothing it does afterwards reaches the database, its leases
// included. The other process takes its lanes once their leases lapse,
// runs the half-done shares first, and every inbox ends exact.
func TestOwnerLanes_HolderKilledMidChunk(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	a := db.process(t, db.st)
	defer func() { _ = a.Close(ctx) }()
	fb := &faults{}
	b := db.process(t, mongostore.New(fClient{db.client, fb}, "herald", mongostore.Options{}))
	waitSplit(t, splitTwoTwo, a, b)

	w := buildWorld(t, db.st, []*service.Service{a}, 3, 24)
	waitDrained(t, db.st, a, b)
	posts := map[store.ID][]store.ID{}
	for round := range 2 {
		for _, author := range w.authors {
			m, err := a.PostMessage(ctx, author, service.PostInput{Text: fmt.Sprintf("post %d", round)})
			require.NoError(t, err)
			posts[author] = append(posts[author], m.ID)
		}
	}
	waitDrained(t, db.st, a, b)

	// b's next chunk of its share of this post stops after its count
	// step, before its entries.
	fb.gated, fb.release = make(chan struct{}), make(chan struct{})
	fb.entriesGate.Store(true)
	m, err := a.PostMessage(ctx, w.authors[0], service.PostInput{Text: "cut"})
	require.NoError(t, err)
	posts[w.authors[0]] = append(posts[w.authors[0]], m.ID)
	select {
	case <-fb.gated:
	case <-time.After(10 * time.Second):
		t.Fatal("b ran no chunk")
	}
	killed := heldLanes(b)
	require.Len(t, killed, 2)
	fb.failWrites(errors.New("process killed"))
	close(fb.release)
	// More posts while b's lanes wait for their leases to lapse.
	for _, author := range w.authors {
		m, err := a.PostMessage(ctx, author, service.PostInput{Text: "after"})
		require.NoError(t, err)
		posts[author] = append(posts[author], m.ID)
	}
	waitSplit(t, func(x, _ []int) bool { return len(x) == sharedLanes }, a, b)
	waitDrained(t, db.st, a)
	checkInboxes(t, db.st, w, posts, nil)
	checkMessageCounts(t, db.st, posts, nil)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_ = b.Close(cctx)
}

// TestOwnerLanes_SetLanesRefusedWhilePending checks that the number of
// lanes changes only with no job stored: a job is shared out among the
// lanes of the number it was stored under.
func TestOwnerLanes_SetLanesRefusedWhilePending(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	n, err := st.FanoutLanes(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	author := mkUser(t, st, "author")
	_, j := mkPost(t, st, author)
	err = st.SetFanoutLanes(ctx, 4)
	require.Error(t, err, "a delivery is pending")
	n, err = st.FanoutLanes(ctx, 8)
	require.NoError(t, err)
	assert.Equal(t, 2, n)

	// Each lane's share ends it once: lane 1 first, then lane 0 ends the job.
	for _, lane := range []int{1, 0} {
		share := *j
		share.Lane = lane
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: &share, At: time.Now(), Done: true})
		require.NoError(t, err)
		pending, err := st.PendingLaneJobs(ctx, lane)
		require.NoError(t, err)
		assert.Empty(t, pending, "lane %d's share done", lane)
	}
	b, err := st.JobBacklog(ctx, 10)
	require.NoError(t, err)
	assert.Zero(t, b.Jobs, "the last lane's share ended the job")
	require.NoError(t, st.SetFanoutLanes(ctx, 4))
	n, err = st.FanoutLanes(ctx, 1)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
}

// TestOwnerLanes_FirstNumberWithJobsPending checks that a database whose
// jobs were stored for one lane (before any number was stored) keeps one
// lane when a process asks for more: those jobs would be no lane's share.
func TestOwnerLanes_FirstNumberWithJobsPending(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	mkPost(t, st, mkUser(t, st, "author"))
	n, err := st.FanoutLanes(ctx, 4)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// laneGate holds the first DeliverInbox of lane's shares until release is
// closed.
type laneGate struct {
	storage.Backend
	lane             int
	reached, release chan struct{}
	once             sync.Once
}

func (g *laneGate) DeliverInbox(ctx context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	if d.Job.Lane == g.lane {
		g.once.Do(func() {
			close(g.reached)
			<-g.release
		})
	}
	return g.Backend.DeliverInbox(ctx, d)
}

func (g *laneGate) Unwrap() storage.Backend { return g.Backend }

// DeliverInboxes passes a group's chunks through the gate one at a time.
func (g *laneGate) DeliverInboxes(ctx context.Context, ds []storage.Delivery) ([]storage.Delivered, error) {
	return oneByOne(ctx, g, ds)
}

// oneByOne stores ds one DeliverInbox of b at a time, as storage's
// fallback does: a test's wrapper that cuts or holds chunks sees each
// chunk of a group.
func oneByOne(ctx context.Context, b storage.Backend, ds []storage.Delivery) ([]storage.Delivered, error) {
	out := make([]storage.Delivered, 0, len(ds))
	for _, d := range ds {
		changes, err := b.DeliverInbox(ctx, d)
		if err != nil && store.ErrorCode(err) != store.ENOTFOUND {
			return out, err
		}
		out = append(out, storage.Delivered{Changes: changes, Err: err})
	}
	return out, nil
}

// TestOwnerLanes_FollowBackfillTrustsOwnLaneOnly follows an author while
// the delivery of its post is done on the new follower's lane but still
// running on another: the backfill must bring the post, since the share
// still stored does not reach this follower.
func TestOwnerLanes_FollowBackfillTrustsOwnLaneOnly(t *testing.T) {
	ctx := context.Background()
	db := openShared(t)
	author := sharedUser(t, db.st, "author")
	var fan, late store.ID
	for i := 0; fan.IsZero() || late.IsZero(); i++ {
		u := sharedUser(t, db.st, fmt.Sprintf("user%d", i))
		switch l := storage.OwnerLane(u, 2); {
		case l == 0 && fan.IsZero():
			fan = u
		case l == 1 && late.IsZero():
			late = u
		}
	}
	gate := &laneGate{Backend: db.st, lane: 0, reached: make(chan struct{}), release: make(chan struct{})}
	svc := service.NewService(gate, pubsub.NewHub(), service.Options{
		Lanes: 2, LeaseTTL: time.Hour, JobPoll: 20 * time.Millisecond, EdgeJobGrace: 50 * time.Millisecond,
	})
	require.NoError(t, svc.Start(ctx))
	released := false
	defer func() {
		if !released {
			close(gate.release)
		}
		_ = svc.Close(ctx)
	}()
	_, err := svc.Follow(ctx, fan, author)
	require.NoError(t, err)
	require.Eventually(t, svc.Idle, 5*time.Second, time.Millisecond)

	m, err := svc.PostMessage(ctx, author, service.PostInput{Text: "hello"})
	require.NoError(t, err)
	<-gate.reached // lane 0's share waits
	require.Eventually(t, func() bool {
		js, err := db.st.PendingLaneJobs(ctx, 1)
		return err == nil && len(js) == 0
	}, 5*time.Second, time.Millisecond, "lane 1's share done")
	_, err = svc.Follow(ctx, late, author)
	require.NoError(t, err)
	has := func(owner store.ID) int {
		items, _, err := db.st.ReadInbox(ctx, storage.InboxFilter{Owner: owner, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 10)})
		require.NoError(t, err)
		n := 0
		for _, it := range items {
			if it.MessageID == m.ID {
				n++
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return has(late) == 1 }, 5*time.Second, 5*time.Millisecond, "the backfill brings the post")
	close(gate.release)
	released = true
	waitDrained(t, db.st, svc)
	assert.Equal(t, 1, has(late))
	assert.Equal(t, 1, has(fan))
}

// TestOwnerLanes_StoredOneLaneWins checks that a process started with four
// lanes on a database that stores one runs one lane: author lanes across
// processes would give an inbox two writers.
func TestOwnerLanes_StoredOneLaneWins(t *testing.T) {
	ctx := context.Background()
	st, _ := openFaulty(t)
	_, err := st.FanoutLanes(ctx, 1)
	require.NoError(t, err)
	svc := service.NewService(st, pubsub.NewHub(), service.Options{Lanes: 4, LeaseTTL: time.Hour, JobPoll: time.Hour})
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	assert.Len(t, svc.Stats().Lanes, 1)
}

// TestOwnerLanes_OnlyLaneZeroCounts stores a post whose count was cut
// short, then runs lane 1's share before lane 0's: only lane 0's counts
// the message, since count's steps assume one writer at a time.
func TestOwnerLanes_OnlyLaneZeroCounts(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	_, err := st.FanoutLanes(ctx, 2)
	require.NoError(t, err)
	author := mkUser(t, st, "author")
	now := tickClock()
	m := &store.Message{ID: store.NewID(now), AuthorID: author, Text: "hi", Kind: store.KindPost, CreatedAt: now}
	j := &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: storage.LayoutBuckets, MessageID: m.ID, AuthorID: author, CreatedAt: now}
	f.usersUpdate.Store(1)
	require.Error(t, st.CreateMessage(ctx, m, j), "stored, not counted")
	count := func() int {
		u, err := st.FindUserByID(ctx, author)
		require.NoError(t, err)
		return u.MessageCount
	}
	require.Zero(t, count())
	for _, lane := range []int{1, 0} {
		share := *j
		share.Lane = lane
		_, err := st.DeliverInbox(ctx, storage.Delivery{Job: &share, At: time.Now(), Done: true})
		require.NoError(t, err)
		if lane == 1 {
			assert.Zero(t, count(), "lane 1 does not count")
		}
	}
	assert.Equal(t, 1, count(), "lane 0 counts")
}
