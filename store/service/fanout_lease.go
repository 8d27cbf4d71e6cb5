package service

import (
	"context"
	"time"

	"herald/store/storage"
)

// isLeader reports whether this process may run stored jobs.
func (f *fanout) isLeader() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader && (f.leaser == nil || time.Now().Before(f.leaseUntil))
}

// lead keeps the fan-out lease and, while holding it, queues the jobs
// other processes stored, from one poll interval after the start (which
// read the pending jobs if it took the lease). It runs until close has let
// the workers finish, then gives the lease up.
func (f *fanout) lead() {
	defer close(f.leadDone)
	tried := time.Now() // start took it, and read the pending jobs
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-f.leadStop:
			f.mu.Lock()
			held := f.leader
			f.leader = false
			f.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if held {
				if err := f.leaser.ReleaseFanoutLease(ctx, f.holder); err != nil {
					f.s.log.Warn("releasing the fan-out lease", "err", err)
				}
			}
			if f.owners != nil {
				if _, err := f.owners.Heartbeat(ctx, f.holder, 0); err != nil {
					f.s.log.Warn("ending the fan-out heartbeat", "err", err)
				}
			}
			cancel()
			return
		}
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

// edgeChangeMayBePending reports whether j is a follow, unfollow or (not
// begun) hide job first polled less than Options.EdgeJobGrace ago: the
// request that stored it may not have changed the edge or the relation
// yet (see EdgeJobGrace), and queues it itself once it has.
func (f *fanout) edgeChangeMayBePending(j *storage.Job, now time.Time) bool {
	switch {
	case j.Kind == storage.JobFollow, j.Kind == storage.JobUnfollow:
	case j.Kind == storage.JobHideReposts && len(j.Cursor) == 0:
	default:
		return false
	}
	k := keyOf(j)
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
	if !f.oneLaneCurrent() {
		f.mu.Lock()
		held := f.leader
		f.leader = false
		f.resetOrderedLocked(nil)
		f.mu.Unlock()
		if held {
			if err := f.leaser.ReleaseFanoutLease(f.ctx, f.holder); err != nil && f.ctx.Err() == nil {
				f.s.log.Warn("releasing the fan-out lease", "err", err)
			}
		}
		return
	}
	asked := time.Now()
	held, err := f.leaser.TryFanoutLease(f.ctx, f.holder, f.leaseTTL)
	if err != nil && f.ctx.Err() == nil {
		f.s.log.Warn("fan-out lease", "err", err)
	}
	held = held && err == nil
	f.mu.Lock()
	gaining := held && !f.leader
	f.mu.Unlock()
	var pending []*storage.Job
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

// resetOrderedLocked replaces the queues of stored jobs with jobs, each
// on its lane in their order, leaving out any job that is running. The
// jobs a run left half done go first on their lane, as the backend gives
// them first (PendingJobs); on one lane the backend's order is kept
// whole (MongoDB's puts the job a holder was running first, begun or
// not). Callers hold mu.
func (f *fanout) resetOrderedLocked(jobs []*storage.Job) {
	for _, l := range f.lanes {
		for _, j := range l.queue {
			delete(f.known, keyOf(j))
			delete(f.since, keyOf(j))
		}
		l.queue = nil
		if l.wantsExcl && !l.running {
			l.wantsExcl = false
			f.exclusive--
		}
	}
	f.begun = 0
	clear(f.polledAt) // jobs polled before are in jobs now, or done
	several := len(f.lanes) > 1
	for _, begun := range []bool{true, false} {
		for _, j := range jobs {
			if k := (keyOf(j)); !f.known[k] && (!several || (len(j.Cursor) > 0) == begun) {
				f.queueLocked(j)
			}
		}
		if !several {
			break
		}
	}
	f.cond.Broadcast()
}

// oneLaneCurrent, for a process running one lane on a backend with owner
// lanes, heartbeats it (so that setup, counting the live processes,
// refuses a new number of lanes while it runs, lease holder or not) and
// checks that the stored number is still one. Once it is found changed
// the process leads no more until it restarts: its one lane would write
// every inbox beside the new lanes' holders, and end jobs whose other
// lanes' shares are still to run.
func (f *fanout) oneLaneCurrent() bool {
	if f.owners == nil {
		return true
	}
	if f.lanesChanged {
		return false
	}
	if _, err := f.owners.Heartbeat(f.ctx, f.holder, f.leaseTTL); err != nil && f.ctx.Err() == nil {
		f.s.log.Warn("fan-out heartbeat", "err", err)
	}
	stored, err := f.owners.FanoutLanes(f.ctx, 1)
	if err != nil {
		if f.ctx.Err() == nil {
			f.s.log.Warn("fan-out lanes: reading the stored number", "err", err)
		}
		return true
	}
	if stored != 1 {
		f.s.log.Error("fan-out lanes: the stored number changed while this process ran one lane; it leads no more until it restarts", "stored", stored)
		f.lanesChanged = true
		return false
	}
	return true
}
