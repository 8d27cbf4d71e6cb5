// Package service is Herald's use cases: accounts and sessions, follows,
// messages and timelines, written once above the storage contract
// (store/storage) under each timeline strategy, with the durable fan-out
// that carries posts, deletions, follows and returns to inboxes, and the
// live events it publishes (store/pubsub). Resolvers call a Service; they
// never reach storage themselves.
package service

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"herald/store"
	"herald/store/pubsub"
	"herald/store/storage"

	"golang.org/x/crypto/bcrypt"
)

// Options configure a Service. Zero values pick the defaults.
type Options struct {
	// Strategy is the timeline strategy (default StrategyBucket).
	Strategy Strategy
	// CelebrityThreshold is the follower count above which an author's
	// posts are not fanned out under StrategyHybrid (default 10,000).
	CelebrityThreshold int
	// InactiveAfter is how long without a request makes a user inactive:
	// fan-out skips them, and their inbox is rebuilt when they return
	// (default 30 days; negative: never).
	InactiveAfter time.Duration
	// InboxCap is the capacity of a cached inbox (StrategyCache) and the
	// number of entries a rebuild brings back (default 50).
	InboxCap int
	// CacheTTL is how long a cached inbox lives unread (default 24h).
	CacheTTL time.Duration
	// FollowBackfill is how many of a followee's recent messages a follow
	// brings into the follower's inbox (default 50; negative: none).
	FollowBackfill int
	// Now is the clock; time.Now by default. Tests inject their own.
	Now func() time.Time
	// Logger receives fan-out errors; slog.Default() by default.
	Logger *slog.Logger
	// ChunkSize is the number of followers delivered to in one atomic
	// step (default 1000).
	ChunkSize int
	// PasswordCost is the bcrypt cost (default bcrypt.DefaultCost).
	PasswordCost int
	// PasswordWorkers is how many password hashes or checks run at once
	// (default GOMAXPROCS); the others wait their turn, or give up when
	// their request ends.
	PasswordWorkers int
	// LeaseTTL is how long the fan-out lease lasts unrenewed on a backend
	// shared by several processes (default 10s); it is renewed four times
	// as often. JobPoll is how often the lease holder looks for jobs stored
	// by other processes (default 200ms).
	LeaseTTL time.Duration
	JobPoll  time.Duration
	// Lanes is how many ordered lanes run stored fan-out jobs at once
	// (default 1). A job's lane is a hash of its author (its owner for
	// rebuilds and hide jobs), so one author's jobs keep their order. On a
	// backend shared by several processes with owner lanes
	// (storage.OwnerLanes) it is the number stored if none is, and the
	// stored number is used: lanes partition inboxes by owner and spread
	// over the processes (fanout_owner.go); another shared backend runs
	// one lane.
	Lanes int
	// EdgeJobGrace is how long the lease holder leaves a follow, unfollow
	// or hide job it finds by polling before running it (default 15s). A
	// request stores such a job before it changes the edge (or the block
	// or mute), and the job reads the edge to learn what to do; run in
	// between, it would take the edge's old state for a change made since
	// and do nothing. The request queues
	// the job itself once the edge has changed, so the grace delays only
	// jobs stored through another process, or left by one that died; it
	// must exceed the time a request may take to change an edge.
	EdgeJobGrace time.Duration
	// DeletionGrace is how long a deleted account's handle stays taken
	// before the account is purged and the handle freed (default 30
	// days): no one can take a handle its followers knew at once.
	DeletionGrace time.Duration
	// DeletionPoll is how often the fan-out lease holder looks for deleted
	// accounts to erase or purge (default 50 JobPolls: 10s); a deletion
	// made by the same process starts at once.
	DeletionPoll time.Duration
	// FanoutMaxLag is the fan-out lag (FanoutBacklog) past which
	// PostMessage and Repost refuse a message that would be fanned out,
	// with a *FanoutBehindError (RATE_LIMITED), until the backlog drains
	// below it. 0 disables the check.
	FanoutMaxLag time.Duration
	// LagReadEvery is how often, at most, a process that does not hold the
	// fan-out lease reads the stored jobs to learn the fan-out lag
	// (FanoutBacklog); between reads it reports the last figures. Default
	// DefaultLagReadEvery.
	LagReadEvery time.Duration
	// MaxGroupMembers bounds a group conversation's members (default
	// DefaultMaxGroupMembers): they are kept with the conversation, and
	// each message updates every member's list and read state.
	MaxGroupMembers int
}

// DefaultDeletionGrace is Options.DeletionGrace's default.
const DefaultDeletionGrace = 30 * 24 * time.Hour

// DefaultChunkSize is Options.ChunkSize's default.
const DefaultChunkSize = 1000

// Service is Herald's domain API: validation, authorization, the timeline
// strategy and the fan-out workers, over a Backend and an Events.
type Service struct {
	backend   storage.Backend
	events    pubsub.Events
	opts      Options
	strategy  Strategy
	layout    storage.Layout
	now       func() time.Time
	log       *slog.Logger
	fanout    *fanout
	deleter   *deleter
	gone      goneUsers
	seen      sync.Map // ID → time.Time: the last-seen time last written
	pulls     pullSet
	sessions  *sessions
	passwords *passwords
	// stopWatch ends watchSessions, at Close.
	stopWatch context.CancelFunc
}

// NewService returns a Service over backend and events. Call Start to run
// the fan-out workers and Close to stop them.
func NewService(backend storage.Backend, events pubsub.Events, opts Options) *Service {
	if opts.Strategy == "" {
		opts.Strategy = StrategyBucket
	}
	if opts.CelebrityThreshold <= 0 {
		opts.CelebrityThreshold = 10_000
	}
	if opts.InactiveAfter == 0 {
		opts.InactiveAfter = 30 * 24 * time.Hour
	}
	if opts.InboxCap <= 0 {
		opts.InboxCap = 50
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = 24 * time.Hour
	}
	if opts.FollowBackfill == 0 {
		opts.FollowBackfill = 50
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.LagReadEvery <= 0 {
		opts.LagReadEvery = DefaultLagReadEvery
	}
	if opts.MaxGroupMembers <= 0 {
		opts.MaxGroupMembers = DefaultMaxGroupMembers
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.PasswordCost == 0 {
		opts.PasswordCost = bcrypt.DefaultCost
	}
	if opts.PasswordWorkers <= 0 {
		opts.PasswordWorkers = runtime.GOMAXPROCS(0)
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 10 * time.Second
	}
	if opts.JobPoll <= 0 {
		opts.JobPoll = 200 * time.Millisecond
	}
	if opts.EdgeJobGrace <= 0 {
		opts.EdgeJobGrace = 15 * time.Second
	}
	if opts.DeletionGrace <= 0 {
		opts.DeletionGrace = DefaultDeletionGrace
	}
	if opts.DeletionPoll <= 0 {
		opts.DeletionPoll = 50 * opts.JobPoll
	}
	s := &Service{backend: backend, events: events, opts: opts, strategy: opts.Strategy, layout: opts.Strategy.Layout(), now: opts.Now, log: opts.Logger, sessions: newSessions(), stopWatch: func() {}}
	s.fanout = newFanout(s, opts)
	s.deleter = newDeleter(s)
	s.passwords = newPasswords(opts.PasswordWorkers)
	return s
}

// Strategy returns the timeline strategy in use.
func (s *Service) Strategy() Strategy { return s.strategy }

// clock returns the current time in UTC, to the millisecond: stored times
// have millisecond precision, so what a mutation returns equals what later
// reads return.
func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Millisecond) }

// Start runs the fan-out workers and queues every job left pending by an
// earlier run. It returns an error if the pending jobs cannot be read.
func (s *Service) Start(ctx context.Context) error {
	if err := s.fanout.chooseScheme(ctx, s.opts.Lanes); err != nil {
		return err
	}
	var jobs []*storage.Job
	var err error
	if s.fanout.scheme == authorLanes { // owner lanes read theirs as they take them
		if jobs, err = s.backend.PendingJobs(ctx); err != nil {
			return err
		}
	}
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	if err := s.watchSessions(watchCtx); err != nil {
		stop()
		return err
	}
	s.stopWatch = stop
	s.fanout.start(jobs)
	s.deleter.start()
	if len(jobs) > 0 {
		s.log.Info("resuming fan-out", "jobs", len(jobs))
	}
	return nil
}

// Close stops taking fan-out work and waits until the queued work is done
// or ctx ends. Work not done stays stored and resumes at the next Start.
func (s *Service) Close(ctx context.Context) error {
	s.stopWatch()
	// The sweeper first: it queues fan-out work.
	s.deleter.close()
	return s.fanout.close(ctx)
}

// Idle reports whether no fan-out work and no account deletion sweep is
// queued or running.
func (s *Service) Idle() bool {
	// The sweeper first: the jobs a sweep stores are enqueued before it
	// counts as idle, so the fan-out, asked after, has them.
	return s.deleter.idle() && s.fanout.idle()
}

// Stats are the counters of a Service's fan-out and of its Events, for
// monitoring. Counters count from NewService; a restart starts them over.
type Stats struct {
	// JobsQueued is the number of stored jobs waiting to run, JobsRunning
	// the number running (at most one a lane, or a group of small
	// deliveries stored together), over all lanes. A process that does not
	// hold the fan-out lease queues none.
	JobsQueued, JobsRunning int
	// Lanes are the fan-out lanes' own figures, by lane.
	Lanes []LaneStats
	// JobsDone counts the stored jobs run to their end, indexed by
	// JobKind. A job cancelled by a deletion, or stopped by a shutdown or a
	// lost lease, is not counted.
	JobsDone [storage.JobHideReposts + 1]uint64
	// Delivered counts the inbox entries delivery jobs added; on
	// StrategyCache, the active followers a post was delivered to.
	Delivered uint64
	// RebuildsStarted counts the inbox rebuilds of returning users stored
	// by this process.
	RebuildsStarted uint64
	// PasswordChecks counts the password hashes and checks run;
	// PasswordsWaiting is how many wait for a slot now.
	PasswordChecks   uint64
	PasswordsWaiting int
	// Events are the counters of the Events, if it keeps any (Hub does).
	Events pubsub.HubStats
}

// LaneStats are one fan-out lane's figures.
type LaneStats struct {
	// Held is whether this process runs the lane's jobs: always without
	// a fan-out lease, else while it holds the lease.
	Held bool
	// Queued is the number of stored jobs waiting on the lane.
	Queued int
}

// Stats returns the current counters. It is cheap and safe to call
// concurrently with everything else: monitoring scrapes call it.
func (s *Service) Stats() Stats {
	f := s.fanout
	f.mu.Lock()
	st := Stats{JobsQueued: f.queuedLocked(), JobsRunning: f.storedRunning, Lanes: make([]LaneStats, len(f.lanes))}
	for i, l := range f.lanes {
		held := f.leader
		if f.scheme == ownerLanes {
			held = l.held
		}
		st.Lanes[i] = LaneStats{Held: held, Queued: len(l.queue)}
	}
	f.mu.Unlock()
	for k := range f.done {
		st.JobsDone[k] = f.done[k].Load()
	}
	st.Delivered = f.delivered.Load()
	st.PasswordChecks = s.passwords.checks.Load()
	st.PasswordsWaiting = int(s.passwords.waiting.Load())
	st.RebuildsStarted = f.rebuilds.Load()
	if e, ok := s.events.(interface{ Stats() pubsub.HubStats }); ok {
		st.Events = e.Stats()
	}
	return st
}

// SeenEvery is how often, at most, a user's last-seen time is written:
// often enough to tell active users from idle ones (which fan-out may skip),
// rarely enough to cost nothing per request.
const SeenEvery = time.Hour

// Seen records that user made an authenticated request now. It writes the
// user's last-seen time at most once per SeenEvery per process. A user
// returning after InactiveAfter gets their inbox rebuilt in the background
// (strategies that store inboxes): the rebuild job is stored with the
// last-seen time, so the inbox says rebuilding from this request on. A
// failure is logged, not returned, since the request itself succeeded.
func (s *Service) Seen(ctx context.Context, user store.ID) {
	now := s.clock()
	if last, ok := s.seen.Load(user); ok && now.Sub(last.(time.Time)) < SeenEvery {
		return
	}
	s.seen.Store(user, now)
	var rebuild *storage.Job
	var inactiveBefore time.Time
	if s.opts.InactiveAfter > 0 {
		inactiveBefore = now.Add(-s.opts.InactiveAfter)
		if s.layout.Stores() {
			rebuild = &storage.Job{ID: user, Kind: storage.JobRebuild, Layout: s.layout, OwnerID: user, CreatedAt: now}
		}
	}
	started, err := s.backend.MarkSeen(ctx, user, now, inactiveBefore, rebuild)
	if err != nil {
		if store.ErrorCode(err) != store.ENOTFOUND {
			s.seen.Delete(user)
			s.log.WarnContext(ctx, "recording last seen", "user", user.String(), "err", err)
		}
		return
	}
	if started {
		s.fanout.rebuilds.Add(1)
		s.log.InfoContext(ctx, "rebuilding the inbox of a returning user", "user", user.String())
		s.fanout.enqueue(rebuild)
	}
}

// activeSince is the last-seen time below which fan-out skips a follower.
func (s *Service) activeSince() time.Time {
	if s.opts.InactiveAfter <= 0 {
		return time.Time{}
	}
	return s.clock().Add(-s.opts.InactiveAfter)
}
