package service

import (
	"context"
	"time"

	"herald/store/storage"
)

// Owner lanes (docs/design.md#owner-lanes): on a shared backend that
// stores N > 1 lanes, lane i writes the inboxes of the owners hashed to i
// (storage.OwnerLane). It runs the jobs of its owners (follows, unfollows,
// rebuilds, hide jobs) and its share of every message job (deliveries and
// retractions: Job.Lane), in the stored order, one at a time. Each inbox
// then sees what one lane sees today: every job touching it in order, from
// one writer, so the per-inbox markers and a backfill's trust in a stored
// delivery hold, and no job needs to run alone. Each lane has a lease; a
// process holds up to ⌈N/K⌉ of them, K being the live processes.

// chooseScheme reads the number of lanes stored in a shared backend with
// owner lanes (storing want if none is) and uses owner lanes if it is
// above 1. A process started with another number uses the stored one: two
// numbers at once would give one inbox two writers.
func (f *fanout) chooseScheme(ctx context.Context, want int) error {
	if f.owners == nil {
		return nil
	}
	want = max(want, 1)
	n, err := f.owners.FanoutLanes(ctx, want)
	if err != nil {
		return err
	}
	if n != want {
		f.s.log.Warn("fan-out lanes: the database stores another number; using it", "flag", want, "stored", n)
	}
	if n > 1 {
		// Under mu: the server answers requests before its fan-out starts,
		// and they queue jobs and read the backlog meanwhile.
		f.mu.Lock()
		f.scheme = ownerLanes
		f.setLanes(n)
		f.mu.Unlock()
	}
	return nil
}

// holds reports whether this process may run the stored jobs of lane i.
func (f *fanout) holds(i int) bool {
	if f.scheme == authorLanes {
		return f.isLeader()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lanes[i]
	return l.held && !l.draining && time.Now().Before(l.leaseUntil)
}

// enqueueSharesLocked queues j on the lanes this process holds: with
// shares, each lane's share of a message job just stored (a request's),
// else j on its lane (an owner's job, or a share polled from the backend).
// Callers hold mu.
func (f *fanout) enqueueSharesLocked(j *storage.Job, shares bool) {
	queue := func(j *storage.Job) {
		k := keyOf(j)
		if l := f.lanes[f.laneOf(j)]; !l.held || l.draining || f.known[k] {
			return
		}
		f.queueLocked(j)
		delete(f.polledAt, k)
	}
	if shares && (j.Kind == storage.JobDeliver || j.Kind == storage.JobRetract) {
		for i := range f.lanes {
			share := *j
			share.Lane = i
			queue(&share)
		}
	} else {
		queue(j)
	}
	f.cond.Broadcast()
}

// leadLanes keeps this process's share of the lanes' leases and, for the
// lanes it holds, queues the jobs other processes stored. It runs until
// close has let the workers finish, then gives the leases up.
func (f *fanout) leadLanes() {
	defer close(f.leadDone)
	tried := time.Now() // start took its lanes
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-f.leadStop:
			f.releaseLanes()
			return
		}
		if time.Since(tried) >= f.leaseTTL/4 {
			tried = time.Now()
			f.renewLanes()
		}
		for i := range f.lanes {
			f.mu.Lock()
			poll := f.lanes[i].held && !f.lanes[i].draining && !f.closing
			f.mu.Unlock()
			if poll {
				f.enqueueLanePending(i)
			}
		}
	}
}

// releaseLanes gives up every lane held, and ends this process's
// heartbeat: until it lapsed the others would count this process live and
// keep to a smaller share of the lanes.
func (f *fanout) releaseLanes() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	defer func() {
		if _, err := f.owners.Heartbeat(ctx, f.holder, 0); err != nil {
			f.s.log.Warn("ending the fan-out heartbeat", "err", err)
		}
	}()
	for i, l := range f.lanes {
		f.mu.Lock()
		held := l.held
		l.held, l.draining = false, false
		if i == 0 {
			f.leader = false
		}
		f.mu.Unlock()
		if held {
			if err := f.owners.ReleaseLaneLease(ctx, i, f.holder); err != nil {
				f.s.log.Warn("releasing a fan-out lane's lease", "lane", i, "err", err)
			}
		}
	}
}

// enqueueLanePending queues lane i's stored jobs in the order the backend
// gives.
func (f *fanout) enqueueLanePending(i int) {
	jobs, err := f.owners.PendingLaneJobs(f.ctx, i)
	if err != nil && f.ctx.Err() == nil {
		f.s.log.Warn("polling fan-out jobs", "lane", i, "err", err)
	}
	now := time.Now()
	for _, j := range jobs {
		if f.edgeChangeMayBePending(j, now) {
			continue
		}
		f.mu.Lock()
		if !f.closing {
			f.enqueueSharesLocked(j, false)
		}
		f.mu.Unlock()
	}
}

// renewLanes heartbeats this process, renews the leases of the lanes it
// holds up to its share ⌈N/K⌉ of the N lanes among K live processes, gives
// the others up once their running job ends (so a newcomer gets some), and
// takes free or lapsed lanes up to its share. Taking a lane fills its
// queue from the backend first, the job its last holder had begun first.
func (f *fanout) renewLanes() {
	n := len(f.lanes)
	if f.lanesChanged {
		return
	}
	// The stored N again: had it changed under this process (setup run
	// while it ran), its lanes would hash owners by the old N beside
	// processes using the new one, two writers for an inbox.
	if stored, err := f.owners.FanoutLanes(f.ctx, n); err != nil {
		if f.ctx.Err() == nil {
			f.s.log.Warn("fan-out lanes: reading the stored number", "err", err)
		}
	} else if stored != n {
		f.s.log.Error("fan-out lanes: the stored number changed while this process ran; its lanes stop until it restarts", "running", n, "stored", stored)
		f.lanesChanged = true
		for i := range f.lanes {
			f.mu.Lock()
			held := f.lanes[i].held
			f.mu.Unlock()
			if held {
				f.dropLane(i, true)
			}
		}
		return
	}
	live, err := f.owners.Heartbeat(f.ctx, f.holder, f.leaseTTL)
	if err != nil {
		if f.ctx.Err() == nil {
			f.s.log.Warn("fan-out heartbeat", "err", err)
		}
		live = 0 // renew what is held, take nothing
	}
	share := n
	if live > 0 {
		share = (n + live - 1) / live
	}
	// Start from a lane of this process's own, so that processes starting
	// together try different lanes first.
	first := 0
	for _, b := range []byte(f.holder) {
		first = (first*31 + int(b)) % n
	}
	held := 0
	for k := range n {
		i := (first + k) % n
		l := f.lanes[i]
		f.mu.Lock()
		had, running := l.held, l.running
		if had && held >= share {
			l.draining = true
		}
		draining := l.draining
		f.mu.Unlock()
		if !had {
			continue
		}
		if draining && !running {
			f.dropLane(i, true)
			continue
		}
		asked := time.Now()
		ok, err := f.owners.TryLaneLease(f.ctx, i, f.holder, f.leaseTTL)
		if err != nil && f.ctx.Err() == nil {
			f.s.log.Warn("fan-out lane lease", "lane", i, "err", err)
		}
		if !ok || err != nil {
			f.dropLane(i, false)
			continue
		}
		f.mu.Lock()
		l.leaseUntil = asked.Add(f.leaseTTL - f.leaseTTL/5)
		if i == 0 {
			f.leaseUntil = l.leaseUntil
		}
		f.mu.Unlock()
		if !draining {
			held++
		}
	}
	for k := range n {
		if held >= share || live == 0 || f.ctx.Err() != nil {
			break
		}
		i := (first + k) % n
		f.mu.Lock()
		had, closing, windingDown := f.lanes[i].held, f.closing, f.lanes[i].running
		f.mu.Unlock()
		// A lane given up whose last job still winds down is taken at a
		// later renewal: retaken now, its queue would leave that job out
		// (known while it runs) and run the jobs after it first, though
		// its share is not done.
		if had || closing || windingDown {
			continue
		}
		asked := time.Now()
		ok, err := f.owners.TryLaneLease(f.ctx, i, f.holder, f.leaseTTL)
		if err != nil || !ok {
			continue
		}
		// The queue is filled from the backend before the lane accepts
		// any job, so that the one its last holder left half done runs
		// first.
		pending, err := f.owners.PendingLaneJobs(f.ctx, i)
		if err != nil {
			if f.ctx.Err() == nil {
				f.s.log.Warn("fan-out lane: reading pending jobs; taking it from the next renewal", "lane", i, "err", err)
			}
			continue
		}
		f.mu.Lock()
		l := f.lanes[i]
		l.held, l.draining = true, false
		l.leaseUntil = asked.Add(f.leaseTTL - f.leaseTTL/5)
		if i == 0 {
			f.leader, f.leaseUntil = true, l.leaseUntil
		}
		f.resetLaneLocked(l, pending)
		f.s.log.Info("fan-out lane taken", "lane", i, "holder", f.holder)
		f.mu.Unlock()
		held++
	}
}

// dropLane stops running lane i, and with release gives its lease up.
func (f *fanout) dropLane(i int, release bool) {
	f.mu.Lock()
	l := f.lanes[i]
	l.held, l.draining = false, false
	if i == 0 {
		f.leader = false
	}
	f.resetLaneLocked(l, nil)
	f.s.log.Info("fan-out lane given up", "lane", i, "holder", f.holder)
	f.mu.Unlock()
	if release {
		if err := f.owners.ReleaseLaneLease(f.ctx, i, f.holder); err != nil && f.ctx.Err() == nil {
			f.s.log.Warn("releasing a fan-out lane's lease", "lane", i, "err", err)
		}
	}
}

// resetLaneLocked replaces lane l's queue with jobs, in their order,
// leaving out any job that is running. Callers hold mu.
func (f *fanout) resetLaneLocked(l *lane, jobs []*storage.Job) {
	for _, j := range l.queue {
		delete(f.known, keyOf(j))
		delete(f.since, keyOf(j))
		if len(j.Cursor) > 0 {
			f.begun--
		}
	}
	l.queue = nil
	for _, j := range jobs {
		if !f.known[keyOf(j)] {
			f.queueLocked(j)
		}
	}
	f.cond.Broadcast()
}
