package service

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// fakeLanes is one live process's view of owner lanes: every lease free,
// and the lanes' pending jobs as set.
type fakeLanes struct {
	storage.OwnerLanes // the one-lane lease: not used
	n                  int
	pending            []*storage.Job
}

func (b *fakeLanes) FanoutLanes(context.Context, int) (int, error) { return b.n, nil }
func (b *fakeLanes) TryLaneLease(context.Context, int, string, time.Duration) (bool, error) {
	return true, nil
}
func (b *fakeLanes) ReleaseLaneLease(context.Context, int, string) error { return nil }
func (b *fakeLanes) Heartbeat(context.Context, string, time.Duration) (int, error) {
	return 1, nil
}
func (b *fakeLanes) PendingLaneJobs(context.Context, int) ([]*storage.Job, error) {
	return b.pending, nil
}

// TestLanes_RetakeWaitsForRunningJob gives up a lane while its job's share
// still runs, then renews: the lane must not be retaken with the jobs
// after that share queued first; once the share stops, it is retaken with
// the share at the head.
func TestLanes_RetakeWaitsForRunningJob(t *testing.T) {
	at := time.Now()
	half := &storage.Job{ID: store.NewID(at), Kind: storage.JobDeliver, AuthorID: store.NewID(at), Cursor: []byte{1}}
	owner := store.NewID(at)
	follow := &storage.Job{ID: store.NewID(at), Kind: storage.JobFollow, OwnerID: owner, AuthorID: store.NewID(at)}
	b := &fakeLanes{n: 1, pending: []*storage.Job{half, follow}}
	f := &fanout{s: &Service{now: time.Now, log: slog.Default()}, owners: b, scheme: ownerLanes, holder: "h",
		leaseTTL: time.Hour, known: map[jobKey]bool{}, since: map[jobKey]time.Time{}, polledAt: map[jobKey]time.Time{}}
	f.cond = sync.NewCond(&f.mu)
	f.ctx = context.Background()
	f.setLanes(1)
	l := f.lanes[0]
	// The lane runs half's share, then is given up (lease lost).
	l.held, l.running, l.current = true, true, half
	f.known[keyOf(half)] = true
	f.dropLane(0, false)

	f.renewLanes()
	f.mu.Lock()
	if l.held {
		require.NotEmpty(t, l.queue)
		assert.Equal(t, keyOf(half), keyOf(l.queue[0]), "the unfinished share runs before the follow")
	}
	// The share stops (the lane was lost); runStored forgets it.
	l.running, l.current = false, nil
	delete(f.known, keyOf(half))
	f.mu.Unlock()

	f.renewLanes()
	f.mu.Lock()
	defer f.mu.Unlock()
	require.True(t, l.held)
	require.Len(t, l.queue, 2)
	assert.Equal(t, keyOf(half), keyOf(l.queue[0]), "the unfinished share first")
}

// TestLanes_SchemeChosenWhileRequestsQueue chooses owner lanes while a
// request queues a job and reads the backlog, as a server answering
// requests before its fan-out has started does: under go test -race,
// choosing must not race them.
func TestLanes_SchemeChosenWhileRequestsQueue(t *testing.T) {
	at := time.Now()
	b := &fakeLanes{n: 2}
	f := &fanout{s: &Service{now: time.Now, log: slog.Default()}, owners: b, leaser: b, holder: "h",
		leaseTTL: time.Hour, known: map[jobKey]bool{}, since: map[jobKey]time.Time{}, polledAt: map[jobKey]time.Time{}}
	f.s.fanout = f
	f.cond = sync.NewCond(&f.mu)
	f.ctx = context.Background()
	f.setLanes(1)
	j := &storage.Job{ID: store.NewID(at), Kind: storage.JobDeliver, AuthorID: store.NewID(at), MessageID: store.NewID(at)}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		assert.NoError(t, f.chooseScheme(context.Background(), 2))
	}()
	go func() {
		defer wg.Done()
		f.enqueue(j)
		f.mu.Lock()
		_ = f.queuedLocked()
		f.mu.Unlock()
	}()
	wg.Wait()
	assert.Len(t, f.lanes, 2)
	assert.Equal(t, ownerLanes, f.scheme)
}
