package service

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"herald/store"
	"herald/store/storage"
)

// Strategy is how home timelines are built (docs/design.md#strategies).
// Every strategy shows the same timeline for the same history; they differ
// in what a post and a read cost.
type Strategy string

// Timeline strategies.
const (
	// StrategyRead is fan-out on read: a post is one write; a read merges
	// the followees' outboxes.
	StrategyRead Strategy = "read"
	// StrategyWrite is fan-out on write: one stored entry per follower.
	StrategyWrite Strategy = "write"
	// StrategyBucket is fan-out on write into buckets of BucketSize (the default).
	StrategyBucket Strategy = "bucket"
	// StrategyCache keeps a capped cache of the newest entries for users
	// who read; a miss, or an older page, is fan-out on read.
	StrategyCache Strategy = "cache"
	// StrategyHybrid is StrategyBucket, except that posts by authors with
	// more followers than the celebrity threshold are not fanned out:
	// readers merge them in from the outbox.
	StrategyHybrid Strategy = "hybrid"
)

// Strategies lists every strategy, the default first.
var Strategies = []Strategy{StrategyBucket, StrategyRead, StrategyWrite, StrategyCache, StrategyHybrid}

// ParseStrategy returns the strategy named s.
func ParseStrategy(s string) (Strategy, error) {
	for _, st := range Strategies {
		if string(st) == s {
			return st, nil
		}
	}
	return "", fmt.Errorf("unknown fan-out strategy %q (want read, write, bucket, cache or hybrid)", s)
}

// Layout returns how the strategy stores inboxes.
func (st Strategy) Layout() storage.Layout {
	switch st {
	case StrategyWrite:
		return storage.LayoutEntries
	case StrategyBucket, StrategyHybrid:
		return storage.LayoutBuckets
	case StrategyCache:
		return storage.LayoutCache
	default:
		return storage.LayoutNone
	}
}

// pullFilter is which messages a strategy brings into inboxes by backfill
// and rebuild: under hybrid, pulled messages come from the outbox at read
// time instead, and stored copies would show twice.
func (st Strategy) pullFilter() storage.PullFilter {
	if st == StrategyHybrid {
		return storage.PushedOnly
	}
	return storage.AnyMessage
}

// following returns every user owner follows.
func (s *Service) following(ctx context.Context, owner store.ID) ([]store.ID, error) {
	var all []store.ID
	after := store.NilID
	for {
		ids, err := s.backend.ListFollowing(ctx, owner, store.Forward(after, followPageSize))
		if err != nil {
			return nil, err
		}
		all = append(all, ids...)
		if len(ids) < followPageSize {
			return all, nil
		}
		after = ids[len(ids)-1]
	}
}

const followPageSize = 1000

// pullAuthors returns the users owner follows whose pulled messages its
// timeline merges in (strategy hybrid).
func (s *Service) pullAuthors(ctx context.Context, owner store.ID) ([]store.ID, error) {
	all, err := s.pulls.get(ctx, s)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	follows, err := s.backend.FindFollowing(ctx, owner, all)
	if err != nil {
		return nil, err
	}
	var out []store.ID
	for i, ok := range follows {
		if ok {
			out = append(out, all[i])
		}
	}
	return out, nil
}

// pullSet caches the authors with pulled messages, which every hybrid read
// needs. It is refreshed from the backend at most every pullRefresh, and at
// once when this process posts a pulled message; another process's first
// pulled message shows here within pullRefresh.
type pullSet struct {
	mu      sync.Mutex
	ids     []store.ID
	fetched time.Time
}

const pullRefresh = time.Second

func (p *pullSet) get(ctx context.Context, s *Service) ([]store.ID, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if now := time.Now(); p.fetched.IsZero() || now.Sub(p.fetched) >= pullRefresh {
		ids, err := s.backend.ListPullAuthors(ctx)
		if err != nil {
			return nil, err
		}
		p.ids, p.fetched = ids, now
	}
	return p.ids, nil
}

// add records that author has a pulled message now.
func (p *pullSet) add(author store.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !slices.Contains(p.ids, author) {
		p.ids = append(slices.Clip(p.ids), author) // readers may hold the old slice
	}
}

// timelineRead is one read of owner's timeline: a page, its counts, or
// both. It looks the timeline's sources up once (the followees for read and
// cache, the followed celebrities for hybrid), however many reads the page
// and the counts make, concurrently or not.
//
// It looks up the users hidden from owner (blocked, muted, blocking owner)
// with the sources, at once, when it reads outboxes: their outboxes are
// not read, and the home rule leaves out reposts of their messages, so a
// page stays full and the counts exact (docs/design.md#blocks-and-mutes).
type timelineRead struct {
	s     *Service
	owner store.ID
	once  sync.Once
	// followees are the sources before the hidden users are taken out:
	// the users shown, for the home rule.
	followees []store.ID
	sources   []store.ID
	hidden    []store.ID
	err       error
}

func (s *Service) newRead(owner store.ID) *timelineRead { return &timelineRead{s: s, owner: owner} }

// authors returns the users whose outboxes the timeline reads.
func (r *timelineRead) authors(ctx context.Context) ([]store.ID, error) {
	r.once.Do(func() {
		switch r.s.strategy {
		case StrategyHybrid:
			if r.followees, r.err = r.s.pullAuthors(ctx, r.owner); r.err == nil && len(r.followees) > 0 {
				r.hidden, r.err = r.s.hiddenFrom(ctx, r.owner)
			}
		case StrategyRead, StrategyCache:
			hidden := beside(func() ([]store.ID, error) { return r.s.hiddenFrom(ctx, r.owner) })
			r.followees, r.err = r.s.following(ctx, r.owner)
			var err error
			if r.hidden, err = hidden(); r.err == nil {
				r.err = err
			}
		}
		r.sources = without(r.followees, r.hidden)
	})
	return r.sources, r.err
}

// rule returns the home rule of the timeline's reads; call it after
// authors.
func (r *timelineRead) rule() *storage.HomeRule {
	return storage.NewHomeRule(r.owner, r.followees).Hide(r.hidden)
}

// page reads the items within r (of the timeline, newest first) nearest
// first, without their messages, and the inbox's counts when the same read
// gives them (ok; the stored layouts).
//
// The owner's own messages are in every timeline, read from their outbox
// as a followee's are under fan-out on read: they are there as soon as they
// are stored, with nothing to deliver (read-your-writes). Under the other
// strategies that read is one more call, made beside the inbox's. The
// owner's reposts that are not at their home were marked so when made
// (docs/design.md#reposts-at-home), so that read needs no follow graph.
func (tr *timelineRead) page(ctx context.Context, r store.Range) (_ []store.InboxItem, _ store.InboxCounts, ok bool, _ error) {
	if tr.s.strategy == StrategyRead {
		items, err := tr.readPage(ctx, r, true)
		return items, store.InboxCounts{}, false, err
	}
	ownPage := beside(func() ([]store.InboxItem, error) {
		es, err := tr.s.backend.FindOutbox(ctx, storage.OutboxFilter{Authors: []store.ID{tr.owner}, Range: r, Home: storage.NewHomeRule(tr.owner, nil)})
		return outboxItems(es), err
	})
	items, c, ok, err := tr.othersPage(ctx, r)
	own, ownErr := ownPage()
	if err == nil {
		err = ownErr
	}
	if err != nil {
		return nil, store.InboxCounts{}, false, err
	}
	if len(own) > 0 {
		items = mergeItems(r.Limit, r.Ascending(true), items, own)
	}
	return items, c, ok, nil
}

// othersPage is page without the owner's own messages, under every strategy
// but read.
func (tr *timelineRead) othersPage(ctx context.Context, r store.Range) (_ []store.InboxItem, _ store.InboxCounts, ok bool, _ error) {
	s := tr.s
	switch s.strategy {
	case StrategyHybrid:
		items, c, err := s.backend.ReadInbox(ctx, storage.InboxFilter{Owner: tr.owner, Layout: s.layout, Range: r})
		if err != nil {
			return nil, store.InboxCounts{}, false, err
		}
		pulls, err := tr.authors(ctx)
		if err != nil || len(pulls) == 0 {
			return items, c, err == nil, err
		}
		more, err := s.backend.FindOutbox(ctx, storage.OutboxFilter{Authors: pulls, Range: r, Pulled: storage.PulledOnly})
		if err != nil {
			return nil, store.InboxCounts{}, false, err
		}
		return mergeItems(r.Limit, r.Ascending(true), items, outboxItems(more)), c, true, nil
	case StrategyCache:
		items, err := tr.cachedPage(ctx, r)
		return items, store.InboxCounts{}, false, err
	default: // write, bucket
		items, c, err := s.backend.ReadInbox(ctx, storage.InboxFilter{Owner: tr.owner, Layout: s.layout, Range: r})
		return items, c, true, err
	}
}

// readPage is fan-out on read: the followees' outboxes merged, and the
// owner's own if withOwn, under the home timeline's rule.
func (tr *timelineRead) readPage(ctx context.Context, r store.Range, withOwn bool) ([]store.InboxItem, error) {
	sources, err := tr.authors(ctx)
	if err != nil {
		return nil, err
	}
	authors := sources
	if withOwn {
		authors = append(slices.Clip(sources), tr.owner)
	}
	if len(authors) == 0 {
		return nil, nil
	}
	es, err := tr.s.backend.FindOutbox(ctx, storage.OutboxFilter{Authors: authors, Range: r, Home: tr.rule()})
	return outboxItems(es), err
}

// cachedPage serves a page from owner's cache when the cache holds it, and
// otherwise by fan-out on read; a missing cache is built first (Inbox caches).
// Cached entries of authors no longer followed, or hidden from owner, are
// left out: a cache built or appended to around an unfollow, a block or
// a mute may still hold them.
//
// The cache holds the newest entries, so it holds a page read forward while
// the page fills, and a page read backward (toward the newest) when it
// starts within the cache: at a cursor no older than the oldest cached
// entry, or anywhere if the cache is complete.
func (tr *timelineRead) cachedPage(ctx context.Context, r store.Range) ([]store.InboxItem, error) {
	s := tr.s
	now := s.clock()
	c, err := s.backend.ReadInboxCache(ctx, tr.owner, now)
	if err != nil {
		return nil, err
	}
	// An empty cache that is not complete was left by a build that did
	// not finish: build it again.
	if c == nil || (len(c.Items) == 0 && !c.Complete) {
		if c, err = tr.buildCache(ctx, now); err != nil {
			return nil, err
		}
	} else if left := c.Expires.Sub(now); left < s.opts.CacheTTL/2 && left > cacheExtendMargin(s.opts.CacheTTL) {
		// Extend the life of a cache in use, at most twice per TTL; not
		// in its last moments, when a delivery may already have found it
		// expired and passed it by: it then expires and is built again.
		if err := s.backend.PutInboxCache(ctx, &storage.InboxCache{Owner: tr.owner, Expires: now.Add(s.opts.CacheTTL)}, s.cacheCap()); err != nil {
			return nil, err
		}
	}
	followees, err := tr.authors(ctx)
	if err != nil {
		return nil, err
	}
	followed := make(map[store.ID]bool, len(followees))
	for _, id := range followees {
		followed[id] = true
	}
	if r.Reverse {
		held := c.Complete || (len(c.Items) > 0 && !r.From.IsZero() && r.From.Compare(c.Items[len(c.Items)-1].MessageID) >= 0)
		if !held {
			return tr.readPage(ctx, r, false)
		}
		items := make([]store.InboxItem, 0, min(r.Limit, len(c.Items)))
		for i := len(c.Items) - 1; i >= 0 && len(items) < r.Limit; i-- {
			if it := c.Items[i]; r.Admits(it.MessageID, true) && followed[it.AuthorID] {
				items = append(items, it)
			}
		}
		return items, nil
	}
	items := make([]store.InboxItem, 0, min(r.Limit, len(c.Items)))
	for _, it := range c.Items {
		if r.Admits(it.MessageID, true) && followed[it.AuthorID] {
			items = append(items, it)
		}
	}
	if len(items) >= r.Limit {
		return items[:r.Limit], nil
	}
	if c.Complete {
		return items, nil
	}
	return tr.readPage(ctx, r, false)
}

// cacheExtendMargin is how close to its expiry a cache is no longer
// extended.
func cacheExtendMargin(ttl time.Duration) time.Duration { return min(time.Minute, ttl/10) }

// buildCache fills owner's cache by fan-out on read. The cache record is
// created empty first, so that deliveries made while the outboxes are read
// append to it: a message posted after the read is then in the cache by
// delivery, one posted before by the read. If the followees changed during
// the build (a follow or an unfollow, which drops the cache, may have come
// before the fill re-created it), the cache is dropped again: the next read
// builds it anew.
func (r *timelineRead) buildCache(ctx context.Context, now time.Time) (*storage.InboxCache, error) {
	s := r.s
	expires := now.Add(s.opts.CacheTTL)
	// An expired cache not yet removed must not come back to life with
	// its old entries.
	if err := s.backend.DropInboxCache(ctx, r.owner); err != nil {
		return nil, err
	}
	if err := s.backend.PutInboxCache(ctx, &storage.InboxCache{Owner: r.owner, Expires: expires}, s.cacheCap()); err != nil {
		return nil, err
	}
	items, err := r.readPage(ctx, store.Forward(store.NilID, s.cacheCap()), false)
	if err != nil {
		return nil, err
	}
	c := &storage.InboxCache{Owner: r.owner, Items: items, Complete: len(items) < s.cacheCap(), Expires: expires}
	if err := s.backend.PutInboxCache(ctx, c, s.cacheCap()); err != nil {
		return nil, err
	}
	if _, err := r.authors(ctx); err != nil {
		return nil, err
	}
	after, err := s.following(ctx, r.owner)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(r.followees, after) {
		return c, s.backend.DropInboxCache(ctx, r.owner)
	}
	// The stored cache holds what deliveries appended meanwhile too; what
	// it adds is newer than what was read, so merging gives the same list.
	fresh, err := s.backend.ReadInboxCache(ctx, r.owner, now)
	if err != nil || fresh == nil {
		return c, err
	}
	return fresh, nil
}

// cacheCap is the capacity of a cached inbox: InboxCap entries and one
// more, so that a page of InboxCap served from the cache can tell whether
// older items follow.
func (s *Service) cacheCap() int { return s.opts.InboxCap + 1 }

// counts returns the inbox counts under the strategy: kept by the backend
// for the stored layouts, counted in the followees' outboxes for read and
// cache, and both for hybrid's pulled messages.
func (r *timelineRead) counts(ctx context.Context) (store.InboxCounts, error) {
	_, c, err := r.s.backend.ReadInbox(ctx, storage.InboxFilter{Owner: r.owner, Layout: r.s.layout})
	if err != nil {
		return store.InboxCounts{}, err
	}
	return r.outboxCounts(ctx, c)
}

// outboxCounts adds to c, the backend's counts, what the timeline reads
// from outboxes: everything under read and cache, pulled messages under
// hybrid.
//
// Under read and cache both counts are counted in the followees' outboxes,
// under the home timeline's rule: which replies and reposts a reader sees
// depends on whom the reader follows, so no per-author count gives the
// total. Hybrid's pulled messages are never replies to others nor reposts
// (those are always pushed), so their authors' PulledCount is their total.
func (r *timelineRead) outboxCounts(ctx context.Context, c store.InboxCounts) (store.InboxCounts, error) {
	switch r.s.strategy {
	case StrategyWrite, StrategyBucket:
		return c, nil
	case StrategyRead, StrategyCache:
		return r.followeeCounts(ctx, c)
	}
	authors, err := r.authors(ctx)
	if err != nil || len(authors) == 0 {
		return c, err
	}
	users, err := r.s.backend.FindUsersByIDs(ctx, authors)
	if err != nil {
		return store.InboxCounts{}, err
	}
	for _, u := range users {
		if u != nil {
			c.Total += u.PulledCount
		}
	}
	unread, err := r.s.backend.CountOutbox(ctx, storage.OutboxFilter{Authors: authors, After: c.ReadMark, Pulled: storage.PulledOnly})
	if err != nil {
		return store.InboxCounts{}, err
	}
	c.Unread += unread
	return c, nil
}

// followeeCounts sets c's counts to those of the followees' messages the
// timeline shows: all of them and those above the read mark, counted at
// once.
func (r *timelineRead) followeeCounts(ctx context.Context, c store.InboxCounts) (store.InboxCounts, error) {
	c.Total, c.Unread = 0, 0
	sources, err := r.authors(ctx)
	if err != nil || len(sources) == 0 {
		return c, err
	}
	rule := r.rule()
	counted := beside(func() (int, error) {
		return r.s.backend.CountOutbox(ctx, storage.OutboxFilter{Authors: sources, Home: rule})
	})
	unread, err := r.s.backend.CountOutbox(ctx, storage.OutboxFilter{Authors: sources, After: c.ReadMark, Home: rule})
	total, totalErr := counted()
	if err == nil {
		err = totalErr
	}
	if err != nil {
		return store.InboxCounts{}, err
	}
	c.Total, c.Unread = total, unread
	return c, nil
}

// beside starts f in a goroutine of its own and returns what waits for
// its result: for a read made beside another, where each is a round trip
// to storage. The caller waits for it on every path.
func beside[T any](f func() (T, error)) func() (T, error) {
	var v T
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		v, err = f()
	}()
	return func() (T, error) {
		<-done
		return v, err
	}
}

// outboxItems turns outbox entries into timeline items; an item read from
// an outbox reached the inbox when it was posted.
func outboxItems(es []storage.OutboxEntry) []store.InboxItem {
	items := make([]store.InboxItem, len(es))
	for i, e := range es {
		items[i] = store.InboxItem{InboxEntry: e.InboxEntry, DeliveredAt: e.CreatedAt}
	}
	return items
}

// mergeItems merges lists sorted by message ID, highest first or (asc)
// lowest first, into one in the same order, keeping the first n, each
// message once.
func mergeItems(n int, asc bool, lists ...[]store.InboxItem) []store.InboxItem {
	h := itemHeap{asc: asc, lists: make([][]store.InboxItem, 0, len(lists))}
	for _, l := range lists {
		if len(l) > 0 {
			h.lists = append(h.lists, l)
		}
	}
	heap.Init(&h)
	out := make([]store.InboxItem, 0, n)
	for len(h.lists) > 0 && len(out) < n {
		top := &h.lists[0]
		it := (*top)[0]
		if len(out) == 0 || out[len(out)-1].MessageID != it.MessageID {
			out = append(out, it)
		}
		if *top = (*top)[1:]; len(*top) == 0 {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
	}
	return out
}

// itemHeap is a heap of lists by their first item's message ID: the highest
// on top, or the lowest when asc.
type itemHeap struct {
	lists [][]store.InboxItem
	asc   bool
}

func (h itemHeap) Len() int { return len(h.lists) }
func (h itemHeap) Less(i, j int) bool {
	return (h.lists[i][0].MessageID.Compare(h.lists[j][0].MessageID) > 0) != h.asc
}
func (h itemHeap) Swap(i, j int) { h.lists[i], h.lists[j] = h.lists[j], h.lists[i] }
func (h *itemHeap) Push(x any)   { h.lists = append(h.lists, x.([]store.InboxItem)) }
func (h *itemHeap) Pop() any {
	x := h.lists[len(h.lists)-1]
	h.lists = h.lists[:len(h.lists)-1]
	return x
}
