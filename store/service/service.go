package service

import (
	"context"
	"log/slog"
	"runtime"
	"slices"
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
	// EdgeJobGrace is how long the lease holder leaves a follow or unfollow
	// job it finds by polling before running it (default 15s). A request
	// stores such a job before it changes the edge, and the job reads the
	// edge to learn what to do; run in between, it would take the edge's
	// old state for a change made since and do nothing. The request queues
	// the job itself once the edge has changed, so the grace delays only
	// jobs stored through another process, or left by one that died; it
	// must exceed the time a request may take to change an edge.
	EdgeJobGrace time.Duration
}

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
	s := &Service{backend: backend, events: events, opts: opts, strategy: opts.Strategy, layout: opts.Strategy.Layout(), now: opts.Now, log: opts.Logger, sessions: newSessions(), stopWatch: func() {}}
	s.fanout = newFanout(s, opts)
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
	jobs, err := s.backend.PendingJobs(ctx)
	if err != nil {
		return err
	}
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	if err := s.watchSessions(watchCtx); err != nil {
		stop()
		return err
	}
	s.stopWatch = stop
	s.fanout.start(jobs)
	if len(jobs) > 0 {
		s.log.Info("resuming fan-out", "jobs", len(jobs))
	}
	return nil
}

// Close stops taking fan-out work and waits until the queued work is done
// or ctx ends. Work not done stays stored and resumes at the next Start.
func (s *Service) Close(ctx context.Context) error {
	s.stopWatch()
	return s.fanout.close(ctx)
}

// Idle reports whether no fan-out work is queued or running.
func (s *Service) Idle() bool { return s.fanout.idle() }

// Stats are the counters of a Service's fan-out and of its Events, for
// monitoring. Counters count from NewService; a restart starts them over.
type Stats struct {
	// JobsQueued is the number of stored jobs waiting to run, JobsRunning
	// the number running (0 or 1: they run one at a time). A process that
	// does not hold the fan-out lease queues none.
	JobsQueued, JobsRunning int
	// JobsDone counts the stored jobs run to their end, indexed by
	// JobKind. A job cancelled by a deletion, or stopped by a shutdown or a
	// lost lease, is not counted.
	JobsDone [storage.JobRebuild + 1]uint64
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

// Stats returns the current counters. It is cheap and safe to call
// concurrently with everything else: monitoring scrapes call it.
func (s *Service) Stats() Stats {
	f := s.fanout
	f.mu.Lock()
	st := Stats{JobsQueued: len(f.ordered), JobsRunning: f.storedRunning}
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

// SignUpInput is what a new user supplies.
type SignUpInput struct {
	Handle      string
	Password    string
	DisplayName string
}

// SignUp creates a user. It returns BAD_USER_INPUT for an invalid handle,
// password or display name and CONFLICT for a taken handle.
func (s *Service) SignUp(ctx context.Context, in SignUpInput) (*store.User, error) {
	handle, err := store.NormalizeHandle(in.Handle)
	if err != nil {
		return nil, err
	}
	if err := store.ValidatePassword(in.Password); err != nil {
		return nil, err
	}
	name, err := store.NormalizeDisplayName(in.DisplayName, handle)
	if err != nil {
		return nil, err
	}
	var hash []byte
	if werr := s.passwords.do(ctx, func() { hash, err = store.HashPassword(in.Password, s.opts.PasswordCost) }); werr != nil {
		return nil, werr
	}
	if err != nil {
		return nil, err
	}
	now := s.clock()
	u := &store.User{ID: store.NewID(now), Handle: handle, DisplayName: name, PasswordHash: hash, CreatedAt: now, LastSeenAt: now}
	if err := s.backend.CreateUser(ctx, u); err != nil {
		return nil, err
	}
	return u, nil
}

// LogIn checks a handle and password. Any mismatch, including an unknown
// handle, is UNAUTHENTICATED with the same message.
func (s *Service) LogIn(ctx context.Context, handle, password string) (*store.User, error) {
	bad := store.Errorf(store.EUNAUTHENTICATED, "wrong handle or password")
	h, err := store.NormalizeHandle(handle)
	if err != nil {
		return nil, bad
	}
	u, err := s.backend.FindUserByHandle(ctx, h)
	if err != nil && store.ErrorCode(err) != store.ENOTFOUND {
		return nil, err
	}
	hash := dummyHash
	if err == nil {
		hash = u.PasswordHash
	}
	// An unknown handle is checked against a dummy hash: the same time
	// as a real check, so handles cannot be probed by timing.
	var mismatch error
	if werr := s.passwords.do(ctx, func() { mismatch = bcrypt.CompareHashAndPassword(hash, []byte(password)) }); werr != nil {
		return nil, werr
	}
	if err != nil || mismatch != nil {
		return nil, bad
	}
	return u, nil
}

var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("herald-timing-equalizer"), bcrypt.DefaultCost)

// FindUserByID returns a user or NOT_FOUND.
func (s *Service) FindUserByID(ctx context.Context, id store.ID) (*store.User, error) {
	return s.backend.FindUserByID(ctx, id)
}

// FindUsersByIDs returns users aligned with ids, nil where missing.
func (s *Service) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	return s.backend.FindUsersByIDs(ctx, ids)
}

// FindUserByHandle returns a user by handle (any case) or NOT_FOUND.
func (s *Service) FindUserByHandle(ctx context.Context, handle string) (*store.User, error) {
	h, err := store.NormalizeHandle(handle)
	if err != nil {
		return nil, store.Errorf(store.ENOTFOUND, "user not found")
	}
	return s.backend.FindUserByHandle(ctx, h)
}

// Follow makes viewer follow target and returns target with its new counts.
// Following twice counts once; following yourself is BAD_USER_INPUT. The
// followee's recent messages then come into viewer's timeline: stored by a
// durable job (stored before the edge, so a crash between the two leaves a
// job that finds no edge and does nothing), or, for the cache, by dropping
// the cache, which the next read rebuilds.
func (s *Service) Follow(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if viewer == target {
		return nil, store.Errorf(store.EINVALID, "you cannot follow yourself")
	}
	if err := s.changeFollow(ctx, viewer, target, storage.JobFollow); err != nil {
		return nil, err
	}
	return s.backend.FindUserByID(ctx, target)
}

// Unfollow makes viewer stop following target and returns target. The
// unfollowed author's messages leave viewer's timeline, by a durable job
// or by dropping the cache, as for Follow.
func (s *Service) Unfollow(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if viewer == target {
		return nil, store.Errorf(store.EINVALID, "you cannot unfollow yourself")
	}
	if err := s.changeFollow(ctx, viewer, target, storage.JobUnfollow); err != nil {
		return nil, err
	}
	return s.backend.FindUserByID(ctx, target)
}

func (s *Service) changeFollow(ctx context.Context, viewer, target store.ID, kind storage.JobKind) error {
	edge := func() (bool, error) {
		if kind == storage.JobFollow {
			return s.backend.Follow(ctx, viewer, target, s.clock())
		}
		return s.backend.Unfollow(ctx, viewer, target)
	}
	if !s.layout.Stores() || (kind == storage.JobFollow && s.opts.FollowBackfill < 0) {
		if _, err := edge(); err != nil {
			return err
		}
		if s.layout == storage.LayoutCache {
			return s.backend.DropInboxCache(ctx, viewer)
		}
		return nil
	}
	now := s.clock()
	job := &storage.Job{ID: store.NewID(now), Kind: kind, Layout: s.layout, AuthorID: target, OwnerID: viewer, CreatedAt: now}
	if err := s.backend.StoreJob(ctx, job); err != nil {
		return err
	}
	changed, err := edge()
	if err != nil || !changed {
		// Nothing changed: the job has nothing to do. Were this to fail,
		// the job would find so itself.
		if ferr := s.backend.FinishJob(ctx, job); ferr != nil {
			s.log.WarnContext(ctx, "finishing an idle follow job", "err", ferr)
		}
		return err
	}
	s.fanout.enqueue(job)
	return nil
}

// FindFollowing reports, for each target, whether viewer follows it.
func (s *Service) FindFollowing(ctx context.Context, viewer store.ID, targets []store.ID) ([]bool, error) {
	return s.backend.FindFollowing(ctx, viewer, targets)
}

// FollowPage is a page of one side of the follow graph: user IDs in ID
// order. HasMore says whether more IDs lie beyond the page in the direction
// it was read (see Range).
type FollowPage struct {
	IDs     []store.ID
	HasMore bool
}

// Followers returns a page of user's followers in ID order, within r.
func (s *Service) Followers(ctx context.Context, user store.ID, r store.Range) (FollowPage, error) {
	ids, err := s.backend.ListFollowers(ctx, user, plusOne(r))
	ids, more := trimPage(ids, r)
	return FollowPage{IDs: ids, HasMore: more}, err
}

// Following returns a page of the users user follows in ID order, within r.
func (s *Service) Following(ctx context.Context, user store.ID, r store.Range) (FollowPage, error) {
	ids, err := s.backend.ListFollowing(ctx, user, plusOne(r))
	ids, more := trimPage(ids, r)
	return FollowPage{IDs: ids, HasMore: more}, err
}

// plusOne returns r reading one more item, which tells whether more follow.
func plusOne(r store.Range) store.Range {
	r.Limit++
	return r
}

// trimPage cuts items, read by plusOne(r) nearest first, to r.Limit, and
// puts them in their list's order. It reports whether items were cut.
func trimPage[T any](items []T, r store.Range) ([]T, bool) {
	more := len(items) > r.Limit
	if more {
		items = items[:r.Limit]
	}
	if r.Reverse {
		slices.Reverse(items)
	}
	return items, more
}

// SetAttributes applies changes to the viewer's custom attributes and
// returns the user. Names are 1–64 characters of any text (including `$`
// and `.`: they are stored under tokens), values at most 1 KiB; a user has
// at most MaxAttributes. Invalid input is BAD_USER_INPUT.
func (s *Service) SetAttributes(ctx context.Context, viewer store.ID, changes []store.AttributeChange) (*store.User, error) {
	if err := store.ValidateAttributeChanges(changes); err != nil {
		return nil, err
	}
	return s.backend.SetAttributes(ctx, viewer, changes)
}

// FindUsersByAttribute returns a page of users whose attribute name equals
// value, in ID order, within r, and whether more lie beyond it.
func (s *Service) FindUsersByAttribute(ctx context.Context, name, value string, r store.Range) ([]*store.User, bool, error) {
	if err := store.ValidateAttribute(name, &value); err != nil {
		return nil, false, err
	}
	us, err := s.backend.FindUsersByAttribute(ctx, name, value, plusOne(r))
	if err != nil {
		return nil, false, err
	}
	us, more := trimPage(us, r)
	return us, more, nil
}

// CountUsersByAttribute counts the users whose attribute name equals value.
func (s *Service) CountUsersByAttribute(ctx context.Context, name, value string) (int, error) {
	if err := store.ValidateAttribute(name, &value); err != nil {
		return 0, err
	}
	return s.backend.CountUsersByAttribute(ctx, name, value)
}

// PostInput is a new message.
type PostInput struct {
	Text      string
	ReplyToID store.ID // NilID for a post
}

// PostMessage stores a message by author and its fan-out job, then queues the
// job; it returns before any follower has the message. It returns
// BAD_USER_INPUT for invalid text and NOT_FOUND for an unknown reply target.
// Under StrategyRead, and under StrategyHybrid for an author above the
// celebrity threshold, nothing is fanned out: the post is one write, readers
// merge it in, and followers' subscriptions are told.
func (s *Service) PostMessage(ctx context.Context, author store.ID, in PostInput) (*store.Message, error) {
	if err := store.ValidateMessageText(in.Text); err != nil {
		return nil, err
	}
	now := s.clock()
	m := &store.Message{ID: store.NewID(now), AuthorID: author, Text: in.Text, Kind: store.KindPost, CreatedAt: now}
	if !in.ReplyToID.IsZero() {
		target, err := s.backend.FindMessageByID(ctx, in.ReplyToID)
		if store.ErrorCode(err) == store.ENOTFOUND {
			return nil, store.Errorf(store.ENOTFOUND, "the message replied to does not exist")
		} else if err != nil {
			return nil, err
		}
		m.Kind, m.ReplyToID, m.ReplyToAuthorID = store.KindReply, target.ID, target.AuthorID
	}
	if s.strategy == StrategyHybrid {
		u, err := s.backend.FindUserByID(ctx, author)
		if err != nil {
			return nil, err
		}
		m.Pulled = u.FollowerCount > s.opts.CelebrityThreshold
	}
	var job *storage.Job
	if s.layout != storage.LayoutNone && !m.Pulled {
		job = &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: s.layout, MessageID: m.ID, AuthorID: author, CreatedAt: now}
	}
	if err := s.backend.CreateMessage(ctx, m, job); err != nil {
		return nil, err
	}
	if m.Pulled {
		s.pulls.add(author)
	}
	if job != nil {
		s.fanout.enqueue(job)
	} else {
		s.fanout.enqueueNotice(s.noticeOf(store.EventAdded, m))
	}
	return m, nil
}

// FindMessageByID returns a message or NOT_FOUND.
func (s *Service) FindMessageByID(ctx context.Context, id store.ID) (*store.Message, error) {
	return s.backend.FindMessageByID(ctx, id)
}

// FindMessagesByKeys returns messages aligned with keys, nil where missing or deleted.
func (s *Service) FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	return s.backend.FindMessagesByKeys(ctx, keys)
}

// ownMessage returns the message if viewer wrote it: NOT_FOUND if it does
// not exist, FORBIDDEN if someone else wrote it.
func (s *Service) ownMessage(ctx context.Context, viewer, id store.ID) (*store.Message, error) {
	m, err := s.backend.FindMessageByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if m.AuthorID != viewer {
		return nil, store.Errorf(store.EFORBIDDEN, "only its author can change a message")
	}
	return m, nil
}

// EditMessage changes the text of viewer's message; every inbox holding it
// shows the new text at once, and its owners' subscriptions get EDITED.
func (s *Service) EditMessage(ctx context.Context, viewer, id store.ID, text string) (*store.Message, error) {
	if err := store.ValidateMessageText(text); err != nil {
		return nil, err
	}
	if _, err := s.ownMessage(ctx, viewer, id); err != nil {
		return nil, err
	}
	now := s.clock()
	m, err := s.backend.UpdateMessage(ctx, id, storage.MessageUpdate{Text: &text, EditedAt: &now})
	if err != nil {
		return nil, err
	}
	s.fanout.enqueueNotice(s.noticeOf(store.EventEdited, m))
	return m, nil
}

// DeleteMessage deletes viewer's message. It vanishes from every inbox view
// at once; where inboxes or caches store it, a durable job then removes the
// entries and fixes the counts.
func (s *Service) DeleteMessage(ctx context.Context, viewer, id store.ID) error {
	m, err := s.ownMessage(ctx, viewer, id)
	if err != nil {
		return err
	}
	// Stored inboxes, and caches, have the entry removed by a durable job.
	// The cache's retraction tells no one: the followers without a cache
	// see the message go too, so a notice tells them all.
	var job *storage.Job
	if (s.layout.Stores() || s.layout == storage.LayoutCache) && !m.Pulled {
		job = &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: s.layout, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
	}
	if err := s.backend.DeleteMessage(ctx, id, job); err != nil {
		return err
	}
	if job != nil {
		s.fanout.enqueue(job)
	}
	if job == nil || !job.Layout.Stores() {
		s.fanout.enqueueNotice(s.noticeOf(store.EventDeleted, m))
	}
	return nil
}

// MessagePage is a page of an author's messages, newest first. HasMore
// says whether more lie beyond the page in the direction it was read.
type MessagePage struct {
	Messages []*store.Message
	HasMore  bool
}

// Messages returns a page of author's messages, newest first, within r.
func (s *Service) Messages(ctx context.Context, author store.ID, r store.Range) (MessagePage, error) {
	ms, err := s.backend.FindMessages(ctx, storage.MessageFilter{AuthorID: author, Range: plusOne(r)})
	if err != nil {
		return MessagePage{}, err
	}
	ms, more := trimPage(ms, r)
	return MessagePage{Messages: ms, HasMore: more}, nil
}

// InboxPage is a page of a home timeline, newest first. HasMore says
// whether more items lie beyond the page in the direction it was read.
type InboxPage struct {
	Items   []store.InboxItem // each with Message set
	Counts  store.InboxCounts
	HasMore bool
}

// Inbox returns a page of owner's home timeline within r, by the strategy,
// each item with its message loaded, and the inbox's counts. Entries whose
// message was deleted but not yet retracted are skipped.
func (s *Service) Inbox(ctx context.Context, owner store.ID, r store.Range) (InboxPage, error) {
	tr := s.newRead(owner)
	var page InboxPage
	// Counts the page's reads do not give are computed beside them.
	var countsc chan error
	if s.strategy == StrategyRead || s.strategy == StrategyCache {
		countsc = make(chan error, 1)
		go func() {
			c, err := tr.counts(ctx)
			page.Counts = c
			countsc <- err
		}()
	}
	err := s.fill(ctx, tr, &page, r)
	if countsc != nil {
		if cerr := <-countsc; err == nil {
			err = cerr
		}
	}
	if err != nil {
		return InboxPage{}, err
	}
	return page, nil
}

// fill reads the items of page, loading their messages and reading on
// past deleted ones. Counts the first read gives go into page.Counts.
func (s *Service) fill(ctx context.Context, tr *timelineRead, page *InboxPage, r store.Range) error {
	limit := r.Limit
	for first := true; ; first = false {
		want := limit + 1 - len(page.Items)
		items, c, ok, err := tr.page(ctx, store.Range{From: r.From, Limit: want, Reverse: r.Reverse})
		if err != nil {
			return err
		}
		if first && ok {
			if page.Counts, err = tr.outboxCounts(ctx, c); err != nil {
				return err
			}
		}
		if len(items) == 0 {
			break
		}
		keys := make([]store.MessageKey, len(items))
		for i := range items {
			keys[i] = items[i].Key()
		}
		msgs, err := s.backend.FindMessagesByKeys(ctx, keys)
		if err != nil {
			return err
		}
		last := items[len(items)-1].MessageID
		// The first read's items (fresh, the read's own) hold the page:
		// kept items move down in place instead of growing a new slice.
		if page.Items == nil {
			page.Items = items[:0]
		}
		for i := range items {
			if msgs[i] != nil {
				items[i].Message = msgs[i]
				page.Items = append(page.Items, items[i])
			}
		}
		if len(items) < want || len(page.Items) > limit {
			break
		}
		r.From = last
	}
	if len(page.Items) == 0 {
		page.Items = nil // as when nothing was appended
	}
	page.Items, page.HasMore = trimPage(page.Items, store.Range{Limit: limit, Reverse: r.Reverse})
	return nil
}

// MarkInboxRead marks owner's whole inbox read (everything up to its newest
// item) and tells their subscriptions.
func (s *Service) MarkInboxRead(ctx context.Context, owner store.ID) (store.InboxCounts, error) {
	r := s.newRead(owner)
	newest, _, _, err := r.page(ctx, store.Forward(store.NilID, 1))
	if err != nil {
		return store.InboxCounts{}, err
	}
	var c store.InboxCounts
	if len(newest) > 0 {
		if c, err = s.backend.MarkInboxRead(ctx, owner, s.layout, newest[0].MessageID); err != nil {
			return store.InboxCounts{}, err
		}
		if c, err = r.outboxCounts(ctx, c); err != nil {
			return store.InboxCounts{}, err
		}
	} else if c, err = r.counts(ctx); err != nil { // an empty inbox: nothing to mark
		return store.InboxCounts{}, err
	}
	s.events.Publish(ctx, store.Event{Type: store.EventRead, UserID: owner, Counts: c})
	return c, nil
}

// InboxCounts returns owner's inbox counts.
func (s *Service) InboxCounts(ctx context.Context, owner store.ID) (store.InboxCounts, error) {
	return s.newRead(owner).counts(ctx)
}

// Subscribe returns the live events of owner's inbox until ctx ends.
func (s *Service) Subscribe(ctx context.Context, owner store.ID) (<-chan store.Event, error) {
	return s.events.Subscribe(ctx, owner)
}

// SubscribeFunc hands the live events of owner's inbox to deliver until ctx
// ends, as Events.SubscribeFunc describes.
func (s *Service) SubscribeFunc(ctx context.Context, owner store.ID, deliver func(store.Event) bool, end func()) error {
	return s.events.SubscribeFunc(ctx, owner, deliver, end)
}
