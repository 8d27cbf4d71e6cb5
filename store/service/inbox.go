package service

import (
	"context"

	"herald/store"
	"herald/store/pubsub"
)

// InboxPage is a page of a home timeline, newest first. HasMore says
// whether more items lie beyond the page in the direction it was read.
type InboxPage struct {
	Items   []store.InboxItem // each with Message set
	Counts  store.InboxCounts
	HasMore bool
	// Users are users the read loaded (the authors of a page holding
	// reposts, for the visibility rule), for the caller to show without
	// loading them again.
	Users []*store.User
}

// InboxOptions says what an Inbox read computes beside the page.
type InboxOptions struct {
	// Counts asks for the page's Counts. Without it they are left zero:
	// under read and cache (and for hybrid's pulled messages) they are
	// counted in every followee's outbox, which costs as much as the page.
	Counts bool
}

// Inbox returns a page of owner's home timeline within r, by the strategy,
// each item with its message loaded (and a repost's original), and the
// inbox's counts. Entries whose message was deleted but not yet retracted
// are skipped, and so are reposts whose original is gone (which the read
// deletes) and the messages of deleted accounts the sweeper has not
// erased yet (goneUsers).
func (s *Service) Inbox(ctx context.Context, owner store.ID, r store.Range) (InboxPage, error) {
	return s.InboxWith(ctx, owner, r, InboxOptions{Counts: true})
}

// InboxWith is Inbox with the counts only when o asks for them.
func (s *Service) InboxWith(ctx context.Context, owner store.ID, r store.Range, o InboxOptions) (InboxPage, error) {
	tr := s.newRead(owner)
	var page InboxPage
	// Counts the page's reads do not give are computed beside them.
	var counted func() (store.InboxCounts, error)
	if o.Counts && (s.strategy == StrategyRead || s.strategy == StrategyCache) {
		counted = beside(func() (store.InboxCounts, error) { return tr.counts(ctx) })
	}
	err := s.fill(ctx, tr, &page, r, o.Counts)
	if counted != nil {
		var cerr error
		if page.Counts, cerr = counted(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return InboxPage{}, err
	}
	return page, nil
}

// fill reads the items of page, loading their messages and reading on
// past deleted ones and reposts of deleted ones. With counts, the counts
// the first read gives go into page.Counts.
func (s *Service) fill(ctx context.Context, tr *timelineRead, page *InboxPage, r store.Range, counts bool) error {
	limit := r.Limit
	for first := true; ; first = false {
		want := limit + 1 - len(page.Items)
		items, c, ok, err := tr.page(ctx, store.Range{From: r.From, Limit: want, Reverse: r.Reverse})
		if err != nil {
			return err
		}
		if first && ok && counts {
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
		originals, err := s.liveOriginals(ctx, msgs)
		if err != nil {
			return err
		}
		users, err := s.hideOriginals(ctx, tr.owner, msgs, originals)
		if err != nil {
			return err
		}
		page.Users = append(page.Users, users...)
		last := items[len(items)-1].MessageID
		// The first read's items (fresh, the read's own) hold the page:
		// kept items move down in place instead of growing a new slice.
		if page.Items == nil {
			page.Items = items[:0]
		}
		for i := range items {
			if msgs[i] != nil && !s.gone.hides(msgs[i], originals[i]) {
				items[i].Message, items[i].Original = msgs[i], originals[i]
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

// SubscribeWith is SubscribeFunc with options: resuming after an event,
// and filtering, as Events.SubscribeWith describes.
func (s *Service) SubscribeWith(ctx context.Context, owner store.ID, opts pubsub.SubscribeOptions, deliver func(store.Event) bool, end func()) error {
	return s.events.SubscribeWith(ctx, owner, opts, deliver, end)
}
