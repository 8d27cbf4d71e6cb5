package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"

	"herald/store"
	"herald/store/storage"
)

type jobKey struct {
	id   store.ID
	kind storage.JobKind
	lane int // with owner lanes, a message job's share
}

func keyOf(j *storage.Job) jobKey { return jobKey{j.ID, j.Kind, j.Lane} }

// fanout runs stored jobs (deliveries, retractions, follow backfills,
// unfollows, rebuilds, hide jobs) on one or more ordered lanes, each one
// job at a time in the order queued, and notices (see notices.go) on one
// lane of their own, in order too, so subscribers see posts in the order
// they were made. Queues are unbounded because every stored job must run;
// jobs are small.
//
// A job's lane is chosen by its lane key (laneOf): an author's deliveries,
// retractions, and the follows and unfollows of that author, share a lane,
// so they run in the order stored, live events of one author follow
// posting order, and a follow's backfill can tell which of the author's
// messages a delivery job will still bring (the stored ones) from those it
// must bring itself. Jobs of different authors may run at once on
// different lanes; each chunk is one atomic write (on the embedded engine
// under its inbox lock), so inboxes and counts stay exact. A rebuild and
// a hide job read or walk one owner's inbox across many authors: with
// several lanes they run exclusive (see mayStartLocked).
//
// On a backend shared by several processes (a Leaser), only the holder of
// the fan-out lease runs stored jobs, on one lane; it finds jobs stored by
// other processes by polling PendingJobs. A shared backend with owner
// lanes (storage.OwnerLanes, N > 1 stored) runs the lanes partitioned by
// inbox owner instead, each under a lease of its own, spread over the
// processes (fanout_owner.go): laneScheme says which.
type fanout struct {
	s      *Service
	chunk  int
	scheme laneScheme
	// owners is the backend's owner lanes, if it has them.
	owners   storage.OwnerLanes
	leaser   storage.Leaser
	holder   string
	leaseTTL time.Duration
	poll     time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	lanes   []*lane
	notices []*notice
	known   map[jobKey]bool
	// since is when this process first queued each known job: the age of
	// a job whose stored time is not known (see jobStoredAt).
	since map[jobKey]time.Time
	// lag caches the backlog read from storage by a process that does not
	// hold the lease (see FanoutBacklog).
	lag lagCache
	// polledAt is when polling first found each follow or unfollow job not
	// yet queued (see Options.EdgeJobGrace).
	polledAt  map[jobKey]time.Time
	edgeGrace time.Duration
	running   int
	// storedRunning counts the stored jobs running: at most one a lane, or
	// a group of small deliveries (runGroup).
	storedRunning int
	// exclusive counts the lanes whose next job is exclusive, waiting for
	// the others or running; exclRunning is set while one runs. begun
	// counts the queued jobs a run before this process left half done.
	exclusive   int
	exclRunning bool
	begun       int
	closing     bool
	leader      bool // holds the fan-out lease (always, without a Leaser)
	// lanesChanged is set, on a backend with owner lanes, once the stored
	// number of lanes is found changed: no lane is taken again
	// (renewLanes, oneLaneCurrent).
	lanesChanged bool

	// leaseUntil is when the lease, as last renewed, could pass to another
	// process: past it this one stops running stored jobs, even before it
	// learns that the lease moved.
	leaseUntil time.Time

	ctx    context.Context // cancelled when Close gives up waiting
	cancel context.CancelFunc
	wg     sync.WaitGroup // the workers
	// leadStop ends the lease keeper, which outlives the workers so that
	// the lease stays held while they drain the queue; leadDone is closed
	// when it has returned.
	leadStop chan struct{}
	leadDone chan struct{}
	stopLead sync.Once // Close may be called twice

	// Counters for Service.Stats, since the start.
	done      [storage.JobHideReposts + 1]atomic.Uint64 // stored jobs finished, by kind
	delivered atomic.Uint64                             // inbox entries added by JobDeliver
	rebuilds  atomic.Uint64                             // JobRebuild stored by Seen
}

// lane is one ordered queue of stored jobs and its worker's state.
type lane struct {
	queue   []*storage.Job // first in first out
	running bool
	// current is the job running, the first of a group (runGroup).
	current *storage.Job
	// wantsExcl is set while the job first in queue, exclusive, waits for
	// the other lanes or runs.
	wantsExcl bool

	// With owner lanes: the lane's index, whether this process holds its
	// lease and until when it may count on it, and whether it gives the
	// lane up (fair share) once the job running ends.
	index      int
	held       bool
	leaseUntil time.Time
	draining   bool
}

// laneScheme is how stored jobs are shared among lanes.
type laneScheme int

const (
	// authorLanes partition jobs by author (laneOf), in one process: the
	// embedded engine's, whose chunks take its inbox lock, and any backend
	// run on one lane.
	authorLanes laneScheme = iota
	// ownerLanes partition inboxes by owner (storage.OwnerLane): each lane
	// runs its share of every message job and the jobs of its owners, so
	// every inbox has one writer, as a shared backend's per-inbox markers
	// need; the lanes' leases spread them over processes.
	ownerLanes
)

// laneOf returns the index of j's lane.
func (f *fanout) laneOf(j *storage.Job) int {
	if f.scheme == authorLanes {
		return laneOf(j, len(f.lanes))
	}
	if j.Kind == storage.JobDeliver || j.Kind == storage.JobRetract {
		return j.Lane
	}
	return storage.OwnerLane(j.OwnerID, len(f.lanes))
}

// mine reports whether owner's inbox is written by j's lane: always, but
// for a share of a message job with owner lanes.
func (f *fanout) mine(j *storage.Job, owner store.ID) bool {
	return f.scheme == authorLanes || storage.OwnerLane(owner, len(f.lanes)) == j.Lane
}

// laneOf returns the lane of j among n: a stable hash (FNV-1a) of its lane
// key, the author for the jobs of one author's messages and the follows
// and unfollows of that author, the owner for rebuilds and hide jobs.
func laneOf(j *storage.Job, n int) int {
	if n <= 1 {
		return 0
	}
	k := j.AuthorID
	if j.Kind == storage.JobRebuild || j.Kind == storage.JobHideReposts {
		k = j.OwnerID
	}
	h := uint32(2166136261)
	for _, b := range k {
		h = (h ^ uint32(b)) * 16777619
	}
	return int(h % uint32(n))
}

// exclusiveKind reports whether jobs of kind k run alone when there are
// several lanes: a rebuild leaves out the messages whose delivery job is
// stored, trusting that job to bring them; run beside it, a delivery
// chunk that passed the owner while they were inactive would leave that
// message out of both. A hide job walks the inbox once; a repost chunk
// committed beside it, behind its cursor, would stay.
func exclusiveKind(k storage.JobKind) bool {
	return k == storage.JobRebuild || k == storage.JobHideReposts
}

func newFanout(s *Service, opts Options) *fanout {
	f := &fanout{s: s, chunk: opts.ChunkSize, leaseTTL: opts.LeaseTTL, poll: opts.JobPoll, known: make(map[jobKey]bool),
		since:    make(map[jobKey]time.Time),
		polledAt: make(map[jobKey]time.Time), edgeGrace: opts.EdgeJobGrace}
	f.cond = sync.NewCond(&f.mu)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	n := max(opts.Lanes, 1)
	if l, ok := storage.LeaserOf(s.backend); ok {
		var b [8]byte
		_, _ = rand.Read(b[:])
		f.leaser, f.holder = l, hex.EncodeToString(b[:])
		f.owners, _ = storage.OwnerLanesOf(s.backend)
		if n > 1 && f.owners == nil {
			// The markers that make a chunk idempotent there hold one job
			// per inbox (docs/design.md#owner-lanes).
			s.log.Warn("fan-out lanes: a backend shared by several processes runs one lane", "lanes", n)
		}
		// One lane until Start reads the stored number (chooseScheme):
		// author lanes across processes would give an inbox two writers.
		n = 1
	} else {
		f.leader = true
	}
	f.setLanes(n)
	return f
}

func (f *fanout) setLanes(n int) {
	f.lanes = make([]*lane, n)
	for i := range f.lanes {
		f.lanes[i] = &lane{index: i}
	}
}

func (f *fanout) start(pending []*storage.Job) {
	switch {
	case f.scheme == ownerLanes:
		f.renewLanes()
	case f.leaser != nil:
		// Take the lease now if it is free, so a restarted process resumes
		// its jobs at once (in the backend's order) rather than at the
		// first poll.
		f.tryLease()
	default:
		// Stored jobs queued before the start are among pending too; the
		// backend's order (a half-done job first) is the one to follow.
		f.mu.Lock()
		f.resetOrderedLocked(pending)
		f.mu.Unlock()
	}
	f.wg.Add(1 + len(f.lanes))
	for _, l := range f.lanes {
		go f.runStored(l)
	}
	go runLane(f, &f.notices, f.runNotice)
	if f.leaser != nil {
		f.leadStop, f.leadDone = make(chan struct{}), make(chan struct{})
		if f.scheme == ownerLanes {
			go f.leadLanes()
		} else {
			go f.lead()
		}
	}
}

// enqueue queues j on its lane unless it is already queued or running.
// Stored jobs are queued only by the lease holder; the others leave them
// to it.
func (f *fanout) enqueue(j *storage.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return // stored jobs resume at the next start
	}
	if f.scheme == ownerLanes {
		f.enqueueSharesLocked(j, len(j.Cursor) == 0)
		return
	}
	k := keyOf(j)
	if f.known[k] || !f.leader {
		return
	}
	f.queueLocked(j)
	delete(f.polledAt, k)
	// Broadcast: the waiters serve different queues.
	f.cond.Broadcast()
}

// queueLocked appends j to its lane's queue. Callers hold mu.
func (f *fanout) queueLocked(j *storage.Job) {
	l := f.lanes[f.laneOf(j)]
	l.queue = append(l.queue, j)
	k := keyOf(j)
	f.known[k] = true
	f.since[k] = f.s.clock()
	if len(j.Cursor) > 0 {
		f.begun++
	}
}

// queuedLocked returns the number of stored jobs queued. Callers hold mu.
func (f *fanout) queuedLocked() int {
	n := 0
	for _, l := range f.lanes {
		n += len(l.queue)
	}
	return n
}

func (f *fanout) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.queuedLocked() == 0 && len(f.notices) == 0 && f.running == 0
}

// close lets the workers finish the queue, then stops them; if ctx ends
// first, running jobs are interrupted between chunks. The lease, if any,
// is held until the workers are done, then released.
func (f *fanout) close(ctx context.Context) error {
	f.mu.Lock()
	f.closing = true
	f.cond.Broadcast()
	f.mu.Unlock()

	done := make(chan struct{})
	go func() { f.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		f.cancel()
		f.mu.Lock()
		f.cond.Broadcast() // wakes the lanes waiting for an exclusive job
		f.mu.Unlock()
		<-done
		err = ctx.Err()
	}
	if f.leadStop != nil {
		f.stopLead.Do(func() { close(f.leadStop) })
		<-f.leadDone
	}
	f.cancel()
	return err
}

// runLane runs the items of one lane in order until the fan-out closes and
// the lane is empty.
func runLane[T any](f *fanout, lane *[]T, run func(T)) {
	defer f.wg.Done()
	var zero T
	for {
		f.mu.Lock()
		for len(*lane) == 0 && !f.closing {
			f.cond.Wait()
		}
		if len(*lane) == 0 || f.ctx.Err() != nil {
			f.mu.Unlock()
			return
		}
		x := (*lane)[0]
		(*lane)[0] = zero
		*lane = (*lane)[1:]
		f.running++
		f.mu.Unlock()

		run(x)

		f.mu.Lock()
		f.running--
		f.mu.Unlock()
	}
}

// runStored runs the stored jobs of lane l in order until the fan-out
// closes and the lane is empty.
func (f *fanout) runStored(l *lane) {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		for (len(l.queue) == 0 && !f.closing) || (len(l.queue) > 0 && f.ctx.Err() == nil && !f.mayStartLocked(l)) {
			f.cond.Wait()
		}
		if len(l.queue) == 0 || f.ctx.Err() != nil {
			if l.wantsExcl {
				l.wantsExcl = false
				f.exclusive--
			}
			f.cond.Broadcast()
			f.mu.Unlock()
			return
		}
		j := l.queue[0]
		l.queue[0] = nil
		l.queue = l.queue[1:]
		if len(j.Cursor) > 0 {
			f.begun--
		}
		l.running, l.current = true, j
		f.running++
		f.storedRunning++
		if l.wantsExcl {
			f.exclRunning = true
		}
		f.mu.Unlock()

		f.runJob(l, j)

		f.mu.Lock()
		l.running, l.current = false, nil
		f.running--
		f.storedRunning--
		delete(f.known, keyOf(j))
		delete(f.since, keyOf(j))
		if l.wantsExcl {
			l.wantsExcl, f.exclRunning = false, false
			f.exclusive--
		}
		f.cond.Broadcast() // a lane may wait for this one to be between jobs
		f.mu.Unlock()
	}
}

// mayStartLocked reports whether lane l may start the job first in its
// queue. With one lane it always may. With several, an exclusive job
// (exclusiveKind) waits until no other lane runs a job and no job a run
// before this process left half done is queued (those go first: they
// may be past an owner a rebuild leaves to them), and meanwhile holds
// the other lanes off, except for those half-done jobs; nothing starts
// while it runs. Callers hold mu.
func (f *fanout) mayStartLocked(l *lane) bool {
	if len(f.lanes) == 1 || f.scheme == ownerLanes {
		return true // owner lanes: see fanout_owner.go
	}
	if f.exclRunning {
		return false
	}
	j := l.queue[0]
	if !exclusiveKind(j.Kind) {
		return f.exclusive == 0 || len(j.Cursor) > 0
	}
	if !l.wantsExcl {
		l.wantsExcl = true
		f.exclusive++
	}
	others := f.begun
	if len(j.Cursor) > 0 {
		others-- // itself
	}
	return f.storedRunning == 0 && others == 0
}

// runJob runs a stored job to its end, with the small deliveries queued
// after it if it is one (runGroup).
func (f *fanout) runJob(l *lane, j *storage.Job) {
	ran, next := f.runGroup(l, j)
	if ran {
		return
	}
	f.retry(func() error { return f.step(j, &next) }, l.index, "kind", j.Kind, "message", j.MessageID.String())
}

// retry runs step until it succeeds, retrying failures with backoff until
// the fan-out is stopped or, for a stored job (of lane, -1 for none), the
// lease is lost; a stopped job stays stored and resumes at restart or with
// the new lease holder.
func (f *fanout) retry(step func() error, lane int, logArgs ...any) {
	backoff := 10 * time.Millisecond
	for {
		err := step()
		if err == nil || store.ErrorCode(err) == store.ENOTFOUND {
			return // done, or the job was cancelled by a deletion
		}
		if f.ctx.Err() != nil {
			return
		}
		if lane >= 0 && !f.holds(lane) {
			return // the new lease holder resumes it
		}
		f.s.log.Error("fan-out step failed; retrying", append(logArgs, "err", err, "retry_in", backoff)...)
		select {
		case <-time.After(backoff):
		case <-f.ctx.Done():
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// step runs j from its current cursor to the end. It returns nil when the
// job is done. j.Cursor advances only after a chunk is stored, so a failed
// chunk is retried from where the stored job stands. next holds a page of
// followers read ahead, if any.
func (f *fanout) step(j *storage.Job, next **followerPage) error {
	ctx := f.ctx
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !f.holds(f.laneOf(j)) {
			return nil // the lease moved: its new holder resumes the job
		}
		done, err := f.runChunk(ctx, j, next)
		if err != nil || done {
			if err == nil && int(j.Kind) < len(f.done) {
				f.done[j.Kind].Add(1)
			}
			return err
		}
	}
}
