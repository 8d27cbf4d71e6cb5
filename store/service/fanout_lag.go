package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"herald/store"
	"herald/store/storage"
)

// DefaultLagReadEvery is Options.LagReadEvery's default.
const DefaultLagReadEvery = 5 * time.Second

// FanoutBacklog is the fan-out work stored and not yet finished.
type FanoutBacklog struct {
	// Jobs is the number of stored jobs not finished, the running one
	// included. Read from storage it is counted up to MaxBacklogCount:
	// AtLeast then says there may be more.
	Jobs    int
	AtLeast bool
	// Lag is the age of the oldest of them (0 when there are none): how far
	// behind delivery is.
	Lag time.Duration
	// FromStorage tells whether the figures were read from storage, at most
	// Options.LagReadEvery ago (a process that does not hold the fan-out lease),
	// rather than from this process's queue.
	FromStorage bool
}

// lagCache is the backlog a process that does not hold the lease last read
// from storage.
type lagCache struct {
	mu      sync.Mutex
	reading bool      // a read is under way, by one caller; the others report the last
	read    time.Time // when the last read ended, by the wall clock; zero: never
	err     error     // the last read's failure, nil if it succeeded
	backlog storage.JobBacklog
}

// MaxBacklogCount bounds the jobs a process without the lease counts in
// storage each time it reads the backlog: past it, the count reads
// "at least" (FanoutBacklog.AtLeast), as the lag, not the count, is what
// refuses posts.
const MaxBacklogCount = 10000

// jobStoredAt returns when j was stored, as far as this process knows: its
// CreatedAt, set when it was stored, except for a JobRetract, whose
// CreatedAt is its message's; for that one (and a job without a time), seen,
// when this process first came across it.
func jobStoredAt(j *storage.Job, seen time.Time) time.Time {
	if j.Kind == storage.JobRetract || j.CreatedAt.IsZero() || j.CreatedAt.After(seen) {
		return seen
	}
	return j.CreatedAt
}

// FanoutBacklog returns the fan-out work stored and not finished. The
// fan-out lease holder (every process, on a backend without a lease) reads
// its queue in memory; another process reads a bounded summary of the stored
// jobs (storage.Jobs.JobBacklog: counts and indexed reads, never the jobs
// themselves, as every such process asks it), at most once
// every Options.LagReadEvery, and reports what it last read in between. A job
// stored by another process counts from the lease holder's next poll.
func (s *Service) FanoutBacklog(ctx context.Context) (FanoutBacklog, error) {
	f := s.fanout
	now := s.clock()
	f.mu.Lock()
	if f.leader && f.scheme == authorLanes { // one holder has every job
		b := FanoutBacklog{Jobs: f.queuedLocked() + f.storedRunning}
		var oldest time.Time
		older := func(j *storage.Job) {
			seen, ok := f.since[keyOf(j)]
			if !ok {
				seen = now
			}
			if t := jobStoredAt(j, seen); oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
		}
		for _, l := range f.lanes {
			for _, j := range l.queue {
				older(j)
			}
			if l.current != nil {
				older(l.current)
			}
		}
		f.mu.Unlock()
		b.Lag = lagSince(now, oldest)
		return b, nil
	}
	f.mu.Unlock()
	return f.storedBacklog(ctx, now)
}

// storedBacklog is FanoutBacklog read from storage, at most once every
// Options.LagReadEvery (a failed read too), by one caller at a time: the
// others, meanwhile, get the figures last read, or the error of the last
// read if it failed or none has ended yet.
func (f *fanout) storedBacklog(ctx context.Context, now time.Time) (FanoutBacklog, error) {
	c := &f.lag
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.reading && (c.read.IsZero() || time.Since(c.read) >= f.s.opts.LagReadEvery) {
		c.reading = true
		c.mu.Unlock()
		b, err := f.s.backend.JobBacklog(ctx, MaxBacklogCount)
		c.mu.Lock()
		c.reading, c.read, c.err = false, time.Now(), err
		if err == nil {
			c.backlog = b
		}
	}
	switch {
	case c.err != nil:
		return FanoutBacklog{}, c.err
	case c.read.IsZero():
		return FanoutBacklog{}, errNotReadYet
	}
	b := c.backlog
	return FanoutBacklog{Jobs: b.Jobs, AtLeast: b.Jobs >= MaxBacklogCount, Lag: lagSince(now, b.Oldest), FromStorage: true}, nil
}

var errNotReadYet = errors.New("service: the fan-out backlog is being read")

func lagSince(now, oldest time.Time) time.Duration {
	if oldest.IsZero() || !now.After(oldest) {
		return 0
	}
	return now.Sub(oldest)
}

// FanoutMaxLag returns Options.FanoutMaxLag: the lag past which posts and
// reposts to fan out are refused, 0 if none.
func (s *Service) FanoutMaxLag() time.Duration { return s.opts.FanoutMaxLag }

// FanoutBehindError is the error of a PostMessage or Repost refused because
// the fan-out lag is past Options.FanoutMaxLag: nothing was stored, and the
// client should retry after RetryAfter. Its code is RATE_LIMITED.
type FanoutBehindError struct {
	Lag, MaxLag, RetryAfter time.Duration
}

func (e *FanoutBehindError) Error() string {
	return fmt.Sprintf("delivery is %s behind, more than %s: the server takes no new posts or reposts until it catches up; nothing was posted, retry in %d s",
		e.Lag.Round(time.Second), e.MaxLag, e.RetrySeconds())
}

// RetrySeconds is RetryAfter in whole seconds, at least 1.
func (e *FanoutBehindError) RetrySeconds() int {
	return max(int(math.Ceil(e.RetryAfter.Seconds())), 1)
}

// Unwrap returns the error as a RATE_LIMITED *store.Error.
func (e *FanoutBehindError) Unwrap() error { return store.Errorf(store.ERATELIMITED, "%s", e.Error()) }

// admitFanout returns a *FanoutBehindError if the fan-out lag is past
// Options.FanoutMaxLag, for a write about to store a fan-out job. A failure
// to learn the lag admits the write: the check sheds load, it does not
// guard correctness.
func (s *Service) admitFanout(ctx context.Context) error {
	limit := s.opts.FanoutMaxLag
	if limit <= 0 {
		return nil
	}
	b, err := s.FanoutBacklog(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("fan-out lag unknown; admitting the post", "err", err)
		}
		return nil
	}
	if b.Lag <= limit {
		return nil
	}
	// The backlog must drain until its oldest job is within the limit:
	// at least the excess, bounded so clients come back to see.
	retry := min(max(b.Lag-limit, time.Second), limit)
	return &FanoutBehindError{Lag: b.Lag, MaxLag: limit, RetryAfter: retry}
}
