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
}

// fanout runs work on two lanes, each one item at a time in the order
// queued. Stored jobs (deliveries, retractions, follow backfills, unfollows,
// rebuilds) share one lane, so each inbox has a single writer, live events
// follow posting order, and a backfill or rebuild can tell which messages
// a delivery job will still bring (the stored ones) from those it must
// bring itself. Notices (see notices.go) run on the other lane, in order
// too, so subscribers see posts in the order they were made. Queues are
// unbounded because every stored job must run; jobs are small.
//
// On a backend shared by several processes (a Leaser), only the holder of
// the fan-out lease runs stored jobs; it finds jobs stored by other
// processes by polling PendingJobs.
type fanout struct {
	s        *Service
	chunk    int
	leaser   storage.Leaser
	holder   string
	leaseTTL time.Duration
	poll     time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	ordered []*storage.Job // stored jobs, first in first out
	notices []*notice
	known   map[jobKey]bool
	// since is when this process first queued each known job: the age of
	// a job whose stored time is not known (see jobStoredAt).
	since map[jobKey]time.Time
	// current is the stored job running, if any.
	current *storage.Job
	// lag caches the backlog read from storage by a process that does not
	// hold the lease (see FanoutBacklog).
	lag lagCache
	// polledAt is when polling first found each follow or unfollow job not
	// yet queued (see Options.EdgeJobGrace).
	polledAt  map[jobKey]time.Time
	edgeGrace time.Duration
	running   int
	// storedRunning counts the stored jobs running: 0 or 1, their lane
	// running one at a time, or a group of small deliveries (runGroup).
	storedRunning int
	closing       bool
	leader        bool // holds the fan-out lease (always, without a Leaser)

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

func newFanout(s *Service, opts Options) *fanout {
	f := &fanout{s: s, chunk: opts.ChunkSize, leaseTTL: opts.LeaseTTL, poll: opts.JobPoll, known: make(map[jobKey]bool),
		since:    make(map[jobKey]time.Time),
		polledAt: make(map[jobKey]time.Time), edgeGrace: opts.EdgeJobGrace}
	f.cond = sync.NewCond(&f.mu)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if l, ok := storage.LeaserOf(s.backend); ok {
		var b [8]byte
		_, _ = rand.Read(b[:])
		f.leaser, f.holder = l, hex.EncodeToString(b[:])
	} else {
		f.leader = true
	}
	return f
}

func (f *fanout) start(pending []*storage.Job) {
	if f.leaser != nil {
		// Take the lease now if it is free, so a restarted process resumes
		// its jobs at once (in the backend's order) rather than at the
		// first poll.
		f.tryLease()
	} else {
		// Stored jobs queued before the start are among pending too; the
		// backend's order (a half-done job first) is the one to follow.
		f.mu.Lock()
		f.resetOrderedLocked(pending)
		f.mu.Unlock()
	}
	f.wg.Add(2)
	go runLane(f, &f.ordered, f.runJob, f.jobBegun, f.jobEnded)
	go runLane(f, &f.notices, f.runNotice, nil, nil)
	if f.leaser != nil {
		f.leadStop, f.leadDone = make(chan struct{}), make(chan struct{})
		go f.lead()
	}
}

// enqueue queues j unless it is already queued or running. Stored jobs are
// queued only by the lease holder; the others leave them to it.
func (f *fanout) enqueue(j *storage.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return // stored jobs resume at the next start
	}
	k := jobKey{j.ID, j.Kind}
	if f.known[k] {
		return
	}
	if f.leader {
		f.ordered = append(f.ordered, j)
	} else {
		return
	}
	f.known[k] = true
	f.since[k] = f.s.clock()
	delete(f.polledAt, k)
	// Broadcast: the waiters serve different queues.
	f.cond.Broadcast()
}

func (f *fanout) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ordered) == 0 && len(f.notices) == 0 && f.running == 0
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
// the lane is empty. begin and end, if not nil, are called with mu held
// as an item starts and ends.
func runLane[T any](f *fanout, lane *[]T, run func(T), begin, end func(T)) {
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
		if begin != nil {
			begin(x)
		}
		f.mu.Unlock()

		run(x)

		f.mu.Lock()
		f.running--
		if end != nil {
			end(x)
		}
		f.mu.Unlock()
	}
}

func (f *fanout) jobBegun(j *storage.Job) {
	f.storedRunning++
	f.current = j
}

func (f *fanout) jobEnded(j *storage.Job) {
	f.storedRunning--
	f.current = nil
	delete(f.known, jobKey{j.ID, j.Kind})
	delete(f.since, jobKey{j.ID, j.Kind})
}

// runJob runs a stored job to its end, with the small deliveries queued
// after it if it is one (runGroup).
func (f *fanout) runJob(j *storage.Job) {
	ran, next := f.runGroup(j)
	if ran {
		return
	}
	f.retry(func() error { return f.step(j, &next) }, true, "kind", j.Kind, "message", j.MessageID.String())
}

// retry runs step until it succeeds, retrying failures with backoff until
// the fan-out is stopped or, for a stored job, the lease is lost; a stopped
// job stays stored and resumes at restart or with the new lease holder.
func (f *fanout) retry(step func() error, stored bool, logArgs ...any) {
	backoff := 10 * time.Millisecond
	for {
		err := step()
		if err == nil || store.ErrorCode(err) == store.ENOTFOUND {
			return // done, or the job was cancelled by a deletion
		}
		if f.ctx.Err() != nil {
			return
		}
		if stored && !f.isLeader() {
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
		if !f.isLeader() {
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
