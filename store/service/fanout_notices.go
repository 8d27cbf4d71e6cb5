package service

import (
	"context"
	"time"

	"herald/store"
)

// notice tells the subscriptions of a message's readers of an event that no
// stored job reports: an edit, or a post, a reply or a deletion that is not
// fanned out (strategy read, hybrid's pulled messages, the cache), and, for
// every change, its author, whose own timeline reads the message from their
// outbox. It is never stored: a missed event loses nothing, since inboxes
// point at messages or read them from outboxes, and show the change anyway.
type notice struct {
	event   store.EventType
	message store.ID
	author  store.ID
	replyTo store.ID // the user a reply answers: its followers' readers are those who follow that user too
	// repostOf is the author of the message a repost stands for: its
	// readers are those who neither follow that user nor are them.
	repostOf store.ID
	// authorHidden is set for a repost not at its author's own home
	// (store.Message.HomeHidden): the author is not told.
	authorHidden bool
	readers      noticeReaders
	// toldAuthor is set once the author's event is out, so that a retry
	// does not tell them twice.
	toldAuthor bool
	// at is when an added message reached its readers' inboxes: when it
	// was made, since they read it from its author's outbox.
	at     time.Time
	cursor []byte // the readers told so far
}

// noticeReaders says who, besides the author, a notice tells.
type noticeReaders uint8

const (
	// readersFollowers: the author's followers, who read the message from
	// the author's outbox.
	readersFollowers noticeReaders = iota
	// readersDeliveries: the owners of the message's delivery records (the
	// layout stores inboxes).
	readersDeliveries
	// readersAuthor: the author alone; a stored job tells the others.
	readersAuthor
)

// noticeOf returns the notice of event t on m: for the author alone when
// fanned is true (a stored job tells the readers), else for the author and
// the message's readers.
func (s *Service) noticeOf(t store.EventType, m *store.Message, fanned bool) *notice {
	n := &notice{event: t, message: m.ID, author: m.AuthorID, replyTo: m.ReplyToAuthorID, repostOf: m.RepostOfAuthorID, authorHidden: m.HomeHidden}
	switch {
	case fanned:
		n.readers = readersAuthor
	case s.layout.Stores() && !m.Pulled && t == store.EventEdited:
		n.readers = readersDeliveries
	default:
		n.readers = readersFollowers
	}
	if t == store.EventAdded {
		n.at = m.CreatedAt
	}
	return n
}

// enqueueNotice queues n on the notices' lane. Notices are never
// deduplicated: a second edit's notice must go out even while the first
// one's is on its way.
func (f *fanout) enqueueNotice(n *notice) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return
	}
	f.notices = append(f.notices, n)
	f.cond.Broadcast()
}

func (f *fanout) runNotice(n *notice) {
	f.retry(func() error { return f.notify(n) }, -1, "notice", n.event, "message", n.message.String())
}

// notify tells n's readers, a chunk at a time, from where it stopped.
func (f *fanout) notify(n *notice) error {
	for {
		if err := f.ctx.Err(); err != nil {
			return err
		}
		readers, next, err := f.noticeReaders(f.ctx, n)
		if err != nil {
			return err
		}
		if !n.toldAuthor && !n.authorHidden {
			readers = append([]store.ID{n.author}, readers...)
		}
		evs := make([]store.Event, len(readers))
		for i, o := range readers {
			evs[i] = store.Event{Type: n.event, UserID: o, MessageID: n.message, AuthorID: n.author, NoCounts: true, DeliveredAt: n.at}
		}
		f.s.events.Publish(f.ctx, evs...)
		n.toldAuthor, n.cursor = true, next
		if next == nil {
			return nil
		}
	}
}

// noticeReaders returns the next chunk of n's readers and the cursor after
// them (nil at the end).
func (f *fanout) noticeReaders(ctx context.Context, n *notice) ([]store.ID, []byte, error) {
	switch n.readers {
	case readersAuthor:
		return nil, nil, nil
	case readersDeliveries:
		refs, next, err := f.s.backend.FindDeliveries(ctx, n.message, n.cursor, f.chunk)
		if err != nil {
			return nil, nil, err
		}
		owners := make([]store.ID, len(refs))
		for i, r := range refs {
			owners[i] = r.Owner
		}
		return owners, next, nil
	}
	fs, err := f.followersPage(ctx, n.author, n.cursor)
	if err != nil {
		return nil, nil, err
	}
	var next []byte
	if len(fs) == f.chunk {
		next = fs[len(fs)-1][:]
	}
	readers, err := f.homeReaders(ctx, n.author, n.replyTo, n.repostOf, fs)
	return readers, next, err
}
