package service

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// TestLanes_ExclusiveScheduling walks the rules of mayStartLocked on two
// lanes: a rebuild waits for the job a run before left half done, which
// may start while it waits, holds fresh jobs off while it waits, and runs
// alone.
func TestLanes_ExclusiveScheduling(t *testing.T) {
	f := &fanout{s: &Service{now: time.Now}, known: map[jobKey]bool{}, since: map[jobKey]time.Time{}, lanes: []*lane{{}, {}}}
	f.cond = sync.NewCond(&f.mu)
	at := time.Now()
	// Jobs of authors on lane 0 and lane 1, and a rebuild on each.
	var onLane [2]store.ID
	for found := 0; found < 2; {
		id := store.NewID(at)
		if l := laneOf(&storage.Job{Kind: storage.JobDeliver, AuthorID: id}, 2); onLane[l].IsZero() {
			onLane[l] = id
			found++
		}
	}
	deliver := func(lane int, begun bool) *storage.Job {
		j := &storage.Job{ID: store.NewID(at), Kind: storage.JobDeliver, AuthorID: onLane[lane]}
		if begun {
			j.Cursor = []byte{1}
		}
		return j
	}
	rebuild := &storage.Job{ID: onLane[0], Kind: storage.JobRebuild, OwnerID: onLane[0]}
	require.Equal(t, 0, laneOf(rebuild, 2), "an owner's rebuild hashes like the owner's own jobs")

	f.mu.Lock()
	defer f.mu.Unlock()
	half, fresh := deliver(1, true), deliver(1, false)
	f.resetOrderedLocked([]*storage.Job{fresh, rebuild, half})
	l0, l1 := f.lanes[0], f.lanes[1]
	require.Equal(t, []*storage.Job{rebuild}, l0.queue)
	require.Equal(t, []*storage.Job{half, fresh}, l1.queue, "the half-done job first on its lane")

	assert.False(t, f.mayStartLocked(l0), "the rebuild waits for the half-done job")
	assert.True(t, f.mayStartLocked(l1), "the half-done job starts while the rebuild waits")
	start := func(l *lane) *storage.Job { // as runStored does
		j := l.queue[0]
		l.queue = l.queue[1:]
		if len(j.Cursor) > 0 {
			f.begun--
		}
		l.running = true
		f.storedRunning++
		if l.wantsExcl {
			f.exclRunning = true
		}
		return j
	}
	end := func(l *lane) {
		l.running = false
		f.storedRunning--
		if l.wantsExcl {
			l.wantsExcl, f.exclRunning = false, false
			f.exclusive--
		}
	}
	start(l1)
	assert.False(t, f.mayStartLocked(l0), "the rebuild waits while another lane runs a job")
	end(l1)
	assert.False(t, f.mayStartLocked(l1), "a fresh job waits behind the waiting rebuild")
	assert.True(t, f.mayStartLocked(l0), "the rebuild starts once the other lanes are between jobs")
	start(l0)
	f.queueLocked(deliver(0, false))
	assert.False(t, f.mayStartLocked(l1), "nothing starts while the rebuild runs")
	end(l0)
	assert.True(t, f.mayStartLocked(l1))
	assert.True(t, f.mayStartLocked(l0))
	assert.Zero(t, f.exclusive)
}

// TestLanes_GroupTakesBegunJobs checks that a group taking a job left half
// done behind its head (two such jobs can share a lane after a restart
// with another lane count) counts it as no longer queued, so that an
// exclusive job does not wait for it forever, and as running until the
// group ends.
func TestLanes_GroupTakesBegunJobs(t *testing.T) {
	f := &fanout{s: &Service{now: time.Now}, known: map[jobKey]bool{}, since: map[jobKey]time.Time{}, lanes: []*lane{{}}}
	f.cond = sync.NewCond(&f.mu)
	at := time.Now()
	a := &storage.Job{ID: store.NewID(at), Kind: storage.JobDeliver, AuthorID: store.NewID(at), Cursor: []byte{1}}
	b := &storage.Job{ID: store.NewID(at), Kind: storage.JobDeliver, AuthorID: store.NewID(at), Cursor: []byte{2}}
	l := f.lanes[0]
	f.mu.Lock()
	f.resetOrderedLocked([]*storage.Job{a, b})
	require.Equal(t, 2, f.begun)
	l.queue, f.begun = l.queue[1:], f.begun-1 // a starts, as runStored takes it
	f.mu.Unlock()

	taken := f.takeQueued(l, []*storage.Job{b})
	require.Equal(t, []*storage.Job{b}, taken)
	f.mu.Lock()
	assert.Zero(t, f.begun, "no half-done job queued any more")
	assert.Equal(t, 1, f.storedRunning)
	assert.Empty(t, l.queue)
	f.mu.Unlock()
	f.releaseTaken(taken)
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Zero(t, f.storedRunning)
	assert.False(t, f.known[keyOf(b)])
}
