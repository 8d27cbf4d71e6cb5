package service

import (
	"sync"

	"herald/store"
	"herald/store/storage"
)

// Group commit. Under sustained posting most delivery jobs are one small
// chunk each (an author of a few dozen followers), and a chunk's cost is
// mostly fixed: one synced commit. So when the jobs at the head of the
// lane are deliveries whose remaining followers fit in one chunk
// together, they are stored in one step (storage.DeliverInboxes), in
// queue order, and their events published in that order.

// maxGroup caps the jobs stored together.
const maxGroup = 64

// groupReaders is how many jobs of a group have their followers read at
// once: a wave of reads, so that the group stops reading soon after a job
// that does not fit.
const groupReaders = 4

// groupChunk is a job of a group and its chunk: its remaining followers
// and those of them whose home timeline shows its message.
type groupChunk struct {
	job       *storage.Job
	followers []store.ID
	owners    []store.ID
	chosen    bool // owners chosen
	err       error
}

// runGroup runs j, a job taken from the head of lane l, together with
// the delivery jobs queued right after it, if j is a delivery whose
// remaining followers fit in one chunk; it reports whether it did. If not,
// j runs alone, chunk by chunk, from the page of followers returned, if
// any. A job whose followers do not fit ends the group and stays queued,
// so a big job runs alone and no job passes another.
func (f *fanout) runGroup(l *lane, j *storage.Job) (bool, *followerPage) {
	if !groupable(j) || f.ctx.Err() != nil || !f.holds(l.index) {
		return false, nil
	}
	chunks := []groupChunk{{job: j}}
	f.readFollowers(chunks)
	if c := chunks[0]; c.err != nil || len(c.followers) >= f.chunk {
		p := &followerPage{after: j.Cursor, ids: c.followers, err: c.err, done: make(chan struct{})}
		close(p.done)
		return false, p
	}
	total := len(chunks[0].followers)
	queued := f.peekGroupable(l, maxGroup-1)
	for next := 0; next < len(queued) && len(chunks) == next+1; {
		wave := make([]groupChunk, 0, groupReaders)
		for ; len(wave) < groupReaders && next < len(queued); next++ {
			wave = append(wave, groupChunk{job: queued[next]})
		}
		f.readFollowers(wave)
		for _, c := range wave {
			if c.err != nil || len(c.followers) >= f.chunk || total+len(c.followers) > f.chunk {
				break // not its last chunk, or not with the others
			}
			chunks = append(chunks, c)
			total += len(c.followers)
		}
	}
	taken := f.takeQueued(l, queued[:len(chunks)-1])
	defer f.releaseTaken(taken)
	f.deliverGroup(l.index, chunks[:1+len(taken)])
	return true, nil
}

// groupable reports whether j's next step is a delivery chunk that may
// share a commit. A cache's chunks are read-modify-write of the cache, so
// they run alone.
func groupable(j *storage.Job) bool {
	return j.Kind == storage.JobDeliver && j.Layout != storage.LayoutCache
}

// readFollowers reads the followers after each job's cursor, concurrently.
func (f *fanout) readFollowers(cs []groupChunk) {
	parallelChunks(cs, func(c *groupChunk) {
		c.followers, c.err = f.nextFollowers(f.ctx, c.job)
	})
}

// chooseOwners chooses, of each job's followers, those its message goes
// to, concurrently, for the jobs not chosen for yet, and returns the first
// error.
func (f *fanout) chooseOwners(cs []groupChunk) error {
	parallelChunks(cs, func(c *groupChunk) {
		if !c.chosen {
			c.owners, c.err = f.homeReaders(f.ctx, c.job.AuthorID, c.job.ReplyToAuthorID, c.job.RepostOfAuthorID, c.followers)
			c.chosen = c.err == nil
		}
	})
	for _, c := range cs {
		if c.err != nil {
			return c.err
		}
	}
	return nil
}

// parallelChunks runs do on each of cs, groupReaders at a time.
func parallelChunks(cs []groupChunk, do func(*groupChunk)) {
	sem := make(chan struct{}, groupReaders)
	var wg sync.WaitGroup
	for i := range cs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			do(&cs[i])
		})
	}
	wg.Wait()
}

// deliverGroup chooses the owners of the chunks, each its job's last,
// stores them in one step, retrying the rest after a failure, and
// publishes each job's events in order.
func (f *fanout) deliverGroup(lane int, chunks []groupChunk) {
	s, ctx := f.s, f.ctx
	var rest []storage.Delivery
	f.retry(func() error {
		if !f.holds(lane) {
			return nil // the lease moved: its new holder resumes the jobs
		}
		if rest == nil {
			if err := f.chooseOwners(chunks); err != nil {
				return err
			}
			at, since := s.clock(), s.activeSince()
			for _, c := range chunks {
				d := storage.Delivery{Job: c.job, Owners: c.owners, At: at, CacheCap: s.cacheCap(), ActiveSince: since, Done: true}
				if n := len(c.followers); n > 0 {
					last := c.followers[n-1]
					d.Cursor = last[:]
				}
				rest = append(rest, d)
			}
		}
		r, err := storage.DeliverInboxes(ctx, s.backend, rest)
		for i, d := range r {
			if d.Err != nil {
				continue // cancelled by a deletion
			}
			f.delivered.Add(uint64(len(d.Changes)))
			f.publish(ctx, store.EventAdded, rest[i].Job, d.Changes, rest[i].At)
			f.done[storage.JobDeliver].Add(1)
		}
		rest = rest[len(r):]
		return err
	}, lane, "kind", storage.JobDeliver, "jobs", len(chunks))
}

// peekGroupable returns up to n groupable jobs queued at the head of lane
// l, in order, leaving them queued; none while an exclusive job waits or
// runs, which holds the lanes off (mayStartLocked).
func (f *fanout) peekGroupable(l *lane, n int) []*storage.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.exclusive > 0 {
		return nil
	}
	var out []*storage.Job
	for _, j := range l.queue {
		if len(out) == n || !groupable(j) {
			break
		}
		out = append(out, j)
	}
	return out
}

// takeQueued takes jobs off the head of lane l, as many as are still
// there in that order, and marks them running.
func (f *fanout) takeQueued(l *lane, jobs []*storage.Job) []*storage.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for n < len(jobs) && n < len(l.queue) && l.queue[n] == jobs[n] {
		l.queue[n] = nil
		if len(jobs[n].Cursor) > 0 {
			f.begun--
		}
		f.running++
		f.storedRunning++
		n++
	}
	l.queue = l.queue[n:]
	return jobs[:n]
}

// releaseTaken ends the jobs takeQueued took.
func (f *fanout) releaseTaken(jobs []*storage.Job) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range jobs {
		f.running--
		f.storedRunning--
		delete(f.known, keyOf(j))
		delete(f.since, keyOf(j))
	}
	f.cond.Broadcast() // an exclusive job may wait for them
}
