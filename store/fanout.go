package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// jobNotifyEdit tells an edited message's inbox owners about the edit. It
// is never stored: a missed EDITED event loses nothing, since inboxes point
// at the message and show the new text anyway.
const jobNotifyEdit JobKind = 100

type jobKey struct {
	msg  ID
	kind JobKind
}

// fanout runs jobs. Stored jobs (deliveries and retractions) run one at a
// time, in the order they were queued, so every follower receives messages
// in the order they were posted (an inbox is ordered by its sequence
// numbers, and those must follow posting order for the timeline to read
// newest first) and each inbox has a single writer. Edit notices need no
// order and run on a pool. Queues are unbounded because every stored job
// must run; jobs are small.
//
// On a backend shared by several processes (a Leaser), only the holder of
// the fan-out lease runs stored jobs; it finds jobs stored by other
// processes by polling PendingJobs.
type fanout struct {
	s        *Service
	workers  int
	chunk    int
	leaser   Leaser
	holder   string
	leaseTTL time.Duration
	poll     time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	ordered []*Job // stored jobs, first in first out
	other   []*Job // edit notices
	known   map[jobKey]bool
	running int
	closing bool
	leader  bool // holds the fan-out lease (always, without a Leaser)

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
}

func newFanout(s *Service, opts Options) *fanout {
	f := &fanout{s: s, workers: opts.Workers, chunk: opts.ChunkSize, leaseTTL: opts.LeaseTTL, poll: opts.JobPoll, known: make(map[jobKey]bool)}
	f.cond = sync.NewCond(&f.mu)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	if l, ok := s.backend.(Leaser); ok {
		var b [8]byte
		_, _ = rand.Read(b[:])
		f.leaser, f.holder = l, hex.EncodeToString(b[:])
	} else {
		f.leader = true
	}
	return f
}

func (f *fanout) start(pending []*Job) {
	if f.leaser != nil {
		// Take the lease now if it is free, so a restarted process resumes
		// its jobs at once rather than at the first poll.
		f.tryLease()
	}
	for _, j := range pending {
		f.enqueue(j)
	}
	f.wg.Add(1 + f.workers)
	go f.work(&f.ordered)
	for range f.workers {
		go f.work(&f.other)
	}
	if f.leaser != nil {
		f.leadStop, f.leadDone = make(chan struct{}), make(chan struct{})
		go f.lead()
	}
}

// isLeader reports whether this process may run stored jobs.
func (f *fanout) isLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader && (f.leaser == nil || time.Now().Before(f.leaseUntil))
}

// lead keeps the fan-out lease and, while holding it, queues the jobs
// other processes stored. It runs until close has let the workers finish,
// then gives the lease up.
func (f *fanout) lead() {
	defer close(f.leadDone)
	tried := time.Now() // start took it
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	for {
		if time.Since(tried) >= f.leaseTTL/4 {
			tried = time.Now()
			f.tryLease()
		}
		f.mu.Lock()
		poll := f.leader && !f.closing
		f.mu.Unlock()
		if poll {
			f.enqueuePending()
		}
		select {
		case <-tick.C:
		case <-f.leadStop:
			f.mu.Lock()
			held := f.leader
			f.leader = false
			f.mu.Unlock()
			if held {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if err := f.leaser.ReleaseFanoutLease(ctx, f.holder); err != nil {
					f.s.log.Warn("releasing the fan-out lease", "err", err)
				}
				cancel()
			}
			return
		}
	}
}

// enqueuePending queues the stored jobs in the order the backend gives:
// oldest first, after any job a lease holder was running when it stopped.
func (f *fanout) enqueuePending() {
	jobs, err := f.s.backend.PendingJobs(f.ctx)
	if err != nil && f.ctx.Err() == nil {
		f.s.log.Warn("polling fan-out jobs", "err", err)
	}
	for _, j := range jobs {
		f.enqueue(j)
	}
}

// tryLease takes or renews the fan-out lease and records whether it is
// held. Gaining it empties the queue of stored jobs and fills it anew from
// the backend, so that a job the previous holder left half done runs
// first: its idempotency depends on no other job touching its inboxes
// before it is finished.
func (f *fanout) tryLease() {
	asked := time.Now()
	held, err := f.leaser.TryFanoutLease(f.ctx, f.holder, f.leaseTTL)
	if err != nil && f.ctx.Err() == nil {
		f.s.log.Warn("fan-out lease", "err", err)
	}
	held = held && err == nil
	f.mu.Lock()
	gained := held && !f.leader
	if held != f.leader {
		f.s.log.Info("fan-out lease changed", "held", held, "holder", f.holder)
	}
	f.leader = held
	if held {
		// Counted from before the request, with a margin for clocks.
		f.leaseUntil = asked.Add(f.leaseTTL - f.leaseTTL/5)
	}
	if !held || gained {
		for _, j := range f.ordered {
			delete(f.known, jobKey{j.MessageID, j.Kind})
		}
		f.ordered = nil
	}
	f.mu.Unlock()
}

// enqueue queues j unless it is already queued or running. Stored jobs are
// queued only by the lease holder; the others leave them to it.
func (f *fanout) enqueue(j *Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := jobKey{j.MessageID, j.Kind}
	if f.closing || f.known[k] {
		return // stored jobs resume at the next start
	}
	if j.Kind == jobNotifyEdit {
		f.other = append(f.other, j)
	} else if f.leader {
		f.ordered = append(f.ordered, j)
	} else {
		return
	}
	f.known[k] = true
	// Broadcast: the waiters serve different queues.
	f.cond.Broadcast()
}

func (f *fanout) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ordered) == 0 && len(f.other) == 0 && f.running == 0
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
		close(f.leadStop)
		<-f.leadDone
	}
	f.cancel()
	return err
}

// work runs the jobs of one queue until the fan-out closes and the queue is empty.
func (f *fanout) work(queue *[]*Job) {
	defer f.wg.Done()
	for {
		f.mu.Lock()
		for len(*queue) == 0 && !f.closing {
			f.cond.Wait()
		}
		if len(*queue) == 0 || f.ctx.Err() != nil {
			f.mu.Unlock()
			return
		}
		j := (*queue)[0]
		(*queue)[0] = nil
		*queue = (*queue)[1:]
		f.running++
		f.mu.Unlock()

		f.run(j)

		f.mu.Lock()
		f.running--
		delete(f.known, jobKey{j.MessageID, j.Kind})
		f.mu.Unlock()
	}
}

// run runs a job to its end, retrying failed steps with backoff until the
// fan-out is stopped; a stopped job stays stored and resumes at restart.
func (f *fanout) run(j *Job) {
	backoff := 10 * time.Millisecond
	for {
		err := f.step(j)
		if err == nil || ErrorCode(err) == ENOTFOUND {
			return // done, or the job was cancelled by a deletion
		}
		if f.ctx.Err() != nil {
			return
		}
		if j.Kind != jobNotifyEdit && !f.isLeader() {
			return // the new lease holder resumes it
		}
		f.s.log.Error("fan-out step failed; retrying", "kind", j.Kind, "message", j.MessageID.String(), "err", err, "retry_in", backoff)
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
// chunk is retried from where the stored job stands.
func (f *fanout) step(j *Job) error {
	ctx, b := f.ctx, f.s.backend
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if j.Kind != jobNotifyEdit && !f.isLeader() {
			return nil // the lease moved: its new holder resumes the job
		}
		switch j.Kind {
		case JobDeliver:
			after := NilID
			if len(j.Cursor) == len(after) {
				copy(after[:], j.Cursor)
			}
			fs, err := b.ListFollowers(ctx, j.AuthorID, after, f.chunk)
			if err != nil {
				return err
			}
			d := Delivery{Job: j, At: f.s.clock(), Done: len(fs) < f.chunk, Owners: fs}
			if len(fs) > 0 {
				last := fs[len(fs)-1]
				d.Cursor = last[:]
			}
			changes, err := b.DeliverInbox(ctx, d)
			if err != nil {
				return err
			}
			f.publish(ctx, EventAdded, j, changes)
			if d.Done {
				return nil
			}
			j.Cursor = d.Cursor
		case JobRetract:
			refs, next, err := b.FindDeliveries(ctx, j.MessageID, j.Cursor, f.chunk)
			if err != nil {
				return err
			}
			r := Removal{Job: j, Refs: refs, Cursor: next, Done: next == nil}
			changes, err := b.RemoveInboxEntries(ctx, r)
			if err != nil {
				return err
			}
			f.publish(ctx, EventDeleted, j, changes)
			if r.Done {
				return nil
			}
			j.Cursor = next
		case jobNotifyEdit:
			refs, next, err := b.FindDeliveries(ctx, j.MessageID, j.Cursor, f.chunk)
			if err != nil {
				return err
			}
			evs := make([]Event, len(refs))
			for i, r := range refs {
				evs[i] = Event{Type: EventEdited, UserID: r.Owner, MessageID: j.MessageID, AuthorID: j.AuthorID}
			}
			f.s.events.Publish(ctx, evs...)
			if next == nil {
				return nil
			}
			j.Cursor = next
		default:
			f.s.log.Error("unknown fan-out job kind; dropped", "kind", j.Kind)
			return nil
		}
	}
}

func (f *fanout) publish(ctx context.Context, t EventType, j *Job, changes []InboxChange) {
	if len(changes) == 0 {
		return
	}
	evs := make([]Event, len(changes))
	for i, c := range changes {
		evs[i] = Event{Type: t, UserID: c.Owner, MessageID: j.MessageID, AuthorID: j.AuthorID, Counts: c.Counts}
	}
	f.s.events.Publish(ctx, evs...)
}
