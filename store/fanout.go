package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"
)

// jobNotify tells the subscriptions of a message's readers of an event that
// no stored job reports: an edit, or a post, a reply or a deletion that is
// not fanned out (strategy read, hybrid's pulled messages, the cache). It
// is never stored: a missed event loses nothing, since inboxes point at
// messages or read them from outboxes, and show the change anyway. Its
// readers are the message's delivery records where the layout stores
// inboxes (Job.Layout.Stores()), its author's followers otherwise.
const jobNotify JobKind = 100

type jobKey struct {
	id   ID
	kind JobKind
}

// fanout runs jobs on two lanes, each one job at a time in the order
// queued. Stored jobs (deliveries, retractions, follow backfills, unfollows,
// rebuilds) share one lane, so each inbox has a single writer, live events
// follow posting order, and a backfill or rebuild can tell which messages
// a delivery job will still bring (the stored ones) from those it must
// bring itself. Notices (jobNotify) run on the other lane, in order too, so
// subscribers see posts in the order they were made. Queues are unbounded
// because every stored job must run; jobs are small.
//
// On a backend shared by several processes (a Leaser), only the holder of
// the fan-out lease runs stored jobs; it finds jobs stored by other
// processes by polling PendingJobs.
type fanout struct {
	s        *Service
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
	// polledAt is when polling first found each follow or unfollow job not
	// yet queued (see Options.EdgeJobGrace).
	polledAt  map[jobKey]time.Time
	edgeGrace time.Duration
	running   int
	// storedRunning counts the stored jobs running: 0 or 1, their lane
	// running one at a time.
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
	done      [JobRebuild + 1]atomic.Uint64 // stored jobs finished, by kind
	delivered atomic.Uint64                 // inbox entries added by JobDeliver
	rebuilds  atomic.Uint64                 // JobRebuild stored by Seen
}

func newFanout(s *Service, opts Options) *fanout {
	f := &fanout{s: s, chunk: opts.ChunkSize, leaseTTL: opts.LeaseTTL, poll: opts.JobPoll, known: make(map[jobKey]bool),
		polledAt: make(map[jobKey]time.Time), edgeGrace: opts.EdgeJobGrace}
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
	go f.work(&f.ordered)
	go f.work(&f.other)
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
	now := time.Now()
	for _, j := range jobs {
		if f.edgeChangeMayBePending(j, now) {
			continue
		}
		f.enqueue(j)
	}
}

// edgeChangeMayBePending reports whether j is a follow or unfollow job
// first polled less than Options.EdgeJobGrace ago: the request that stored
// it may not have changed the edge yet (see EdgeJobGrace), and queues it
// itself once it has.
func (f *fanout) edgeChangeMayBePending(j *Job, now time.Time) bool {
	if j.Kind != JobFollow && j.Kind != JobUnfollow {
		return false
	}
	k := jobKey{j.ID, j.Kind}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.known[k] {
		return false // queued already
	}
	first, ok := f.polledAt[k]
	if !ok {
		f.polledAt[k] = now
		return true
	}
	return now.Sub(first) < f.edgeGrace
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
	gaining := held && !f.leader
	f.mu.Unlock()
	var pending []*Job
	if gaining {
		// The queue is filled from the backend before this process accepts
		// any stored job, so that a job queued by a request cannot run
		// before the one the previous holder left half done.
		if pending, err = f.s.backend.PendingJobs(f.ctx); err != nil {
			if f.ctx.Err() == nil {
				f.s.log.Warn("fan-out lease: reading pending jobs; leading from the next renewal", "err", err)
			}
			held = false
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if held != f.leader {
		f.s.log.Info("fan-out lease changed", "held", held, "holder", f.holder)
	}
	gained := held && !f.leader
	f.leader = held
	if held {
		// Counted from before the request, with a margin for clocks.
		f.leaseUntil = asked.Add(f.leaseTTL - f.leaseTTL/5)
	}
	if !held || gained {
		f.resetOrderedLocked(pending)
	}
}

// resetOrderedLocked replaces the queue of stored jobs with jobs, in their
// order, leaving out any job that is running. Callers hold mu.
func (f *fanout) resetOrderedLocked(jobs []*Job) {
	for _, j := range f.ordered {
		delete(f.known, jobKey{j.ID, j.Kind})
	}
	f.ordered = nil
	clear(f.polledAt) // jobs polled before are in jobs now, or done
	for _, j := range jobs {
		if k := (jobKey{j.ID, j.Kind}); !f.known[k] {
			f.known[k] = true
			f.ordered = append(f.ordered, j)
		}
	}
	f.cond.Broadcast()
}

// enqueue queues j unless it is already queued or running. Stored jobs are
// queued only by the lease holder; the others leave them to it.
func (f *fanout) enqueue(j *Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return // stored jobs resume at the next start
	}
	if j.Kind == jobNotify {
		// Never deduplicated: a second edit's notice must go out even
		// while the first one's is on its way.
		f.other = append(f.other, j)
		f.cond.Broadcast()
		return
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
	delete(f.polledAt, k)
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
		f.stopLead.Do(func() { close(f.leadStop) })
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
		stored := queue == &f.ordered
		if stored {
			f.storedRunning++
		}
		f.mu.Unlock()

		f.run(j)

		f.mu.Lock()
		f.running--
		if stored {
			f.storedRunning--
		}
		delete(f.known, jobKey{j.ID, j.Kind})
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
		if j.Kind != jobNotify && !f.isLeader() {
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
	ctx := f.ctx
	var next *followerPage
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if j.Kind != jobNotify && !f.isLeader() {
			return nil // the lease moved: its new holder resumes the job
		}
		done, err := f.runChunk(ctx, j, &next)
		if err != nil || done {
			if err == nil && int(j.Kind) < len(f.done) {
				f.done[j.Kind].Add(1)
			}
			return err
		}
	}
}

// followerPage is a page of followers read ahead, while the chunk before
// it is stored: the two overlap on two cores.
type followerPage struct {
	after []byte // the job's cursor the page follows
	ids   []ID
	err   error
	done  chan struct{}
}

// readAhead starts reading the followers after cursor.
func (f *fanout) readAhead(ctx context.Context, j *Job, cursor []byte) *followerPage {
	p := &followerPage{after: cursor, done: make(chan struct{})}
	author := j.AuthorID
	go func() {
		defer close(p.done)
		p.ids, p.err = f.followersAfter(ctx, author, cursor)
	}()
	return p
}

// runChunk runs one chunk of j and reports whether j is done. next holds
// the page of followers read ahead for the job's next chunk, if any.
func (f *fanout) runChunk(ctx context.Context, j *Job, next **followerPage) (bool, error) {
	s, b := f.s, f.s.backend
	switch j.Kind {
	case JobDeliver:
		var fs []ID
		var err error
		if p := *next; p != nil && bytes.Equal(p.after, j.Cursor) {
			<-p.done
			fs, err = p.ids, p.err
		} else {
			fs, err = f.nextFollowers(ctx, j)
		}
		*next = nil
		if err != nil {
			return false, err
		}
		d := Delivery{Job: j, Owners: fs, At: s.clock(), CacheCap: s.cacheCap(), Done: len(fs) < f.chunk}
		if j.Layout != LayoutCache {
			// A cache is appended to while it lives, whoever owns it:
			// nothing rebuilds a cache an idle owner missed an entry of.
			d.ActiveSince = s.activeSince()
		}
		if len(fs) > 0 {
			last := fs[len(fs)-1]
			d.Cursor = last[:]
		}
		if !d.Done {
			*next = f.readAhead(ctx, j, d.Cursor)
		}
		changes, err := b.DeliverInbox(ctx, d)
		if err != nil {
			return false, err
		}
		f.delivered.Add(uint64(len(changes)))
		f.publish(ctx, EventAdded, j, changes)
		j.Cursor = d.Cursor
		return d.Done, nil
	case JobRetract:
		refs, next, err := b.FindDeliveries(ctx, j.MessageID, j.Cursor, f.chunk)
		if err != nil {
			return false, err
		}
		r := Removal{Job: j, Refs: refs, Cursor: next, Done: next == nil}
		changes, err := b.RemoveInboxEntries(ctx, r)
		if err != nil {
			return false, err
		}
		if j.Layout.Stores() { // a cache's owners hear of it by a notice
			f.publish(ctx, EventDeleted, j, changes)
		}
		j.Cursor = next
		return r.Done, nil
	case JobFollow, JobRebuild:
		entries, err := f.backfill(ctx, j)
		if err != nil {
			return false, err
		}
		if entries == nil {
			return true, b.FinishJob(ctx, j)
		}
		changes, err := b.InsertInbox(ctx, Insertion{Job: j, Entries: entries, At: s.clock()})
		if err != nil {
			return false, err
		}
		authors := make(map[ID]ID, len(entries))
		for _, e := range entries {
			authors[e.MessageID] = e.AuthorID
		}
		f.publishWith(ctx, EventAdded, j, changes, func(m ID) ID { return authors[m] })
		return true, nil
	case JobUnfollow:
		follows, err := f.edgeExists(ctx, j)
		if err != nil {
			return false, err
		}
		if follows {
			// Followed again since: the entries stay.
			return true, b.FinishJob(ctx, j)
		}
		changes, err := b.RemoveAuthorEntries(ctx, AuthorRemoval{Job: j})
		if err != nil {
			return false, err
		}
		f.publish(ctx, EventDeleted, j, changes)
		return true, nil
	case jobNotify:
		var owners []ID
		var next []byte
		if j.Layout.Stores() {
			refs, cur, err := b.FindDeliveries(ctx, j.MessageID, j.Cursor, f.chunk)
			if err != nil {
				return false, err
			}
			for _, r := range refs {
				owners = append(owners, r.Owner)
			}
			next = cur
		} else {
			fs, err := f.nextFollowers(ctx, j)
			if err != nil {
				return false, err
			}
			owners = fs
			if len(fs) == f.chunk {
				next = fs[len(fs)-1][:]
			}
		}
		evs := make([]Event, len(owners))
		for i, o := range owners {
			evs[i] = Event{Type: j.notice, UserID: o, MessageID: j.MessageID, AuthorID: j.AuthorID, NoCounts: true}
		}
		s.events.Publish(ctx, evs...)
		j.Cursor = next
		return next == nil, nil
	default:
		s.log.Error("unknown fan-out job kind; dropped", "kind", j.Kind)
		return true, nil
	}
}

// edgeExists reports whether the owner of a JobFollow or JobUnfollow
// follows its author now: the job does its work only if the edge is as it
// left it.
func (f *fanout) edgeExists(ctx context.Context, j *Job) (bool, error) {
	follows, err := f.s.backend.FindFollowing(ctx, j.OwnerID, []ID{j.AuthorID})
	if err != nil {
		return false, err
	}
	return follows[0], nil
}

// nextFollowers returns the chunk of the author's followers after the
// job's cursor, the last follower of the chunk before.
func (f *fanout) nextFollowers(ctx context.Context, j *Job) ([]ID, error) {
	return f.followersAfter(ctx, j.AuthorID, j.Cursor)
}

// followersAfter returns the chunk of author's followers after cursor (a
// follower's id; empty: from the first).
func (f *fanout) followersAfter(ctx context.Context, author ID, cursor []byte) ([]ID, error) {
	after := NilID
	if len(cursor) == len(after) {
		copy(after[:], cursor)
	}
	return f.s.backend.ListFollowers(ctx, author, Forward(after, f.chunk))
}

// backfill returns the entries a JobFollow or JobRebuild brings into its
// owner's inbox: the newest messages of the followee (JobFollow, if still
// followed) or of every followee (JobRebuild), except those whose
// JobDeliver is still stored: that job delivers them, and ordered after
// this one on the lane, or already past this owner, it cannot be
// duplicated by this one. It returns nil when there is nothing to bring.
func (f *fanout) backfill(ctx context.Context, j *Job) ([]InboxEntry, error) {
	s, b := f.s, f.s.backend
	var authors []ID
	limit := s.opts.InboxCap
	if j.Kind == JobFollow {
		follows, err := f.edgeExists(ctx, j)
		if err != nil {
			return nil, err
		}
		if !follows {
			return nil, nil // unfollowed since
		}
		authors, limit = []ID{j.AuthorID}, s.opts.FollowBackfill
	} else {
		var err error
		if authors, err = s.following(ctx, j.OwnerID); err != nil {
			return nil, err
		}
	}
	if len(authors) == 0 || limit <= 0 {
		return nil, nil
	}
	es, err := b.FindOutbox(ctx, OutboxFilter{Authors: authors, Range: Forward(NilID, limit), Pulled: s.strategy.pullFilter()})
	if err != nil {
		return nil, err
	}
	entries := make([]InboxEntry, 0, len(es))
	for _, e := range es {
		if !e.Pending {
			entries = append(entries, e.InboxEntry)
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	return entries, nil
}

// publish tells the owners of changes of the change, each on j's message
// (or, for jobs of several messages, the change's).
func (f *fanout) publish(ctx context.Context, t EventType, j *Job, changes []InboxChange) {
	f.publishWith(ctx, t, j, changes, func(ID) ID { return j.AuthorID })
}

// publishWith is publish with the author of each change's message given by author.
func (f *fanout) publishWith(ctx context.Context, t EventType, j *Job, changes []InboxChange, author func(message ID) ID) {
	if len(changes) == 0 {
		return
	}
	evs := make([]Event, len(changes))
	for i, c := range changes {
		m := c.MessageID
		if m.IsZero() {
			m = j.MessageID
		}
		evs[i] = Event{Type: t, UserID: c.Owner, MessageID: m, AuthorID: author(m), Counts: c.Counts, NoCounts: c.NoCounts}
	}
	f.s.events.Publish(ctx, evs...)
}
