package service

import (
	"context"

	"herald/store"
	"herald/store/storage"
)

// PostInput is a new message.
type PostInput struct {
	Text      string
	ReplyToID store.ID // NilID for a post
}

// PostMessage stores a message by author and its fan-out job, then queues the
// job; it returns before any follower has the message. It returns
// BAD_USER_INPUT for invalid text and NOT_FOUND for an unknown reply target
// or one hidden from author (SeesMessagesOf). A message to fan out is
// refused with a *FanoutBehindError (RATE_LIMITED) while the fan-out lag is
// past Options.FanoutMaxLag; a pulled one costs no fan-out and is taken.
// Under StrategyRead, and under StrategyHybrid for an author above the
// celebrity threshold, nothing is fanned out: the post is one write, readers
// merge it in, and followers' subscriptions are told.
func (s *Service) PostMessage(ctx context.Context, author store.ID, in PostInput) (*store.Message, error) {
	if err := store.ValidateMessageText(in.Text); err != nil {
		return nil, err
	}
	mentions, err := s.mentions(ctx, in.Text)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	m := &store.Message{ID: store.NewID(now), AuthorID: author, Text: in.Text, Kind: store.KindPost, CreatedAt: now, Mentions: mentions}
	if !in.ReplyToID.IsZero() {
		target, err := s.backend.FindMessageByID(ctx, in.ReplyToID)
		if err == nil {
			target, err = s.originalOf(ctx, target)
		}
		if err == nil {
			// A message hidden from the author is as absent: a blocked
			// user's reply to the blocker is refused so.
			_, err = s.shownAuthor(ctx, author, target.AuthorID)
		}
		if store.ErrorCode(err) == store.ENOTFOUND {
			return nil, store.Errorf(store.ENOTFOUND, "the message replied to does not exist")
		} else if err != nil {
			return nil, err
		}
		m.Kind, m.ReplyToID, m.ReplyToAuthorID = store.KindReply, target.ID, target.AuthorID
		// A thread is rooted at the post its chain of replies started from.
		m.RootID, m.RootAuthorID = target.ID, target.AuthorID
		if !target.RootID.IsZero() {
			m.RootID, m.RootAuthorID = target.RootID, target.RootAuthorID
		}
	}
	if s.strategy == StrategyHybrid {
		u, err := s.backend.FindUserByID(ctx, author)
		if err != nil {
			return nil, err
		}
		// A reply to another user reaches only the followers who follow
		// that user too: fanned out, it reaches those alone, where pulled
		// every reader would have to find out.
		m.Pulled = u.FollowerCount > s.opts.CelebrityThreshold && !m.RepliesToOther()
	}
	var job *storage.Job
	if s.layout != storage.LayoutNone && !m.Pulled {
		job = &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: s.layout, MessageID: m.ID, AuthorID: author, CreatedAt: now, ReplyToAuthorID: m.ReplyToAuthorID}
		if err := s.admitFanout(ctx); err != nil {
			return nil, err
		}
	}
	if err := s.backend.CreateMessage(ctx, m, job); err != nil {
		return nil, err
	}
	if m.Pulled {
		s.pulls.add(author)
	}
	if job != nil {
		s.fanout.enqueue(job)
	}
	s.fanout.enqueueNotice(s.noticeOf(store.EventAdded, m, job != nil))
	s.notifyPosted(ctx, m, false, nil)
	return m, nil
}

// mentions resolves the users text @mentions (store.ParseMentions), in
// one batch read, none when it mentions no handle: more than MaxMentions
// handles is BAD_USER_INPUT, and a handle of no user mentions no one, as
// in Mastodon.
func (s *Service) mentions(ctx context.Context, text string) ([]store.ID, error) {
	handles := store.ParseMentions(text)
	if len(handles) > store.MaxMentions {
		return nil, store.Errorf(store.EINVALID, "a message may mention at most %d users; this one mentions %d", store.MaxMentions, len(handles))
	}
	if len(handles) == 0 {
		return nil, nil
	}
	users, err := s.backend.FindUsersByHandles(ctx, handles)
	if err != nil {
		return nil, err
	}
	var ids []store.ID
	for _, u := range users {
		if u != nil {
			ids = append(ids, u.ID)
		}
	}
	return ids, nil
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
	old, err := s.ownMessage(ctx, viewer, id)
	if err != nil {
		return nil, err
	}
	if old.Kind == store.KindRepost {
		return nil, store.Errorf(store.EINVALID, "a repost has no text to edit")
	}
	mentions, err := s.mentions(ctx, text)
	if err != nil {
		return nil, err
	}
	if mentions == nil {
		mentions = []store.ID{} // the edit mentions no one
	}
	now := s.clock()
	m, err := s.backend.UpdateMessage(ctx, id, storage.MessageUpdate{Text: &text, EditedAt: &now, Mentions: &mentions})
	if err != nil {
		return nil, err
	}
	s.fanout.enqueueNotice(s.noticeOf(store.EventEdited, m, false))
	s.notifyPosted(ctx, m, true, old.Mentions)
	return m, nil
}

// DeleteMessage deletes viewer's message, and its reposts. It vanishes from
// every inbox view at once; where inboxes or caches store it, a durable job
// then removes the entries and fixes the counts.
func (s *Service) DeleteMessage(ctx context.Context, viewer, id store.ID) error {
	m, err := s.ownMessage(ctx, viewer, id)
	if err != nil {
		return err
	}
	return s.deleteMessage(ctx, m)
}

// deleteMessage deletes m, retracting it from the inboxes it reached and
// telling their owners.
func (s *Service) deleteMessage(ctx context.Context, m *store.Message) error {
	// Stored inboxes, and caches, have the entry removed by a durable job.
	// The cache's retraction tells no one: the followers without a cache
	// see the message go too, so a notice tells them all.
	var job *storage.Job
	if (s.layout.Stores() || s.layout == storage.LayoutCache) && !m.Pulled {
		job = &storage.Job{ID: m.ID, Kind: storage.JobRetract, Layout: s.layout, MessageID: m.ID, AuthorID: m.AuthorID, CreatedAt: m.CreatedAt}
	}
	if err := s.backend.DeleteMessage(ctx, m.ID, job); err != nil {
		return err
	}
	if job != nil {
		s.fanout.enqueue(job)
	}
	// A stored job's retraction tells the inboxes it reached.
	s.fanout.enqueueNotice(s.noticeOf(store.EventDeleted, m, job != nil && job.Layout.Stores()))
	s.deleteReposts(ctx, m)
	return nil
}

// Replies returns a page of the live replies to message parent that viewer
// (NilID: nobody signed in) may see, oldest first: the replies of authors
// hidden from viewer (SeesMessagesOf) are left out, and the page reads on
// past them.
func (s *Service) Replies(ctx context.Context, viewer, parent store.ID, r store.Range) (MessagePage, error) {
	var authors []*store.User
	ms, more, err := readVisible(r, func(m *store.Message) store.ID { return m.ID },
		func(r store.Range) ([]*store.Message, error) { return s.backend.ListReplies(ctx, parent, r) },
		func(ms []*store.Message) ([]bool, error) {
			shown, us, err := s.visibleMessages(ctx, viewer, ms)
			authors = append(authors, us...)
			return shown, err
		})
	return MessagePage{Messages: ms, HasMore: more, Authors: authors}, err
}

// MessagePage is a page of an author's messages, newest first. HasMore
// says whether more lie beyond the page in the direction it was read.
type MessagePage struct {
	Messages []*store.Message
	HasMore  bool
	// Authors are authors of the page's messages that the read loaded (for
	// the visibility rule), for the caller to show without loading them
	// again; it may miss some, and hold others.
	Authors []*store.User
}

// Messages returns a page of author's messages, newest first, within r;
// a repost whose original is gone is left out (and deleted).
func (s *Service) Messages(ctx context.Context, author store.ID, r store.Range) (MessagePage, error) {
	ms, more, err := readPage(r, func(r store.Range) ([]*store.Message, error) {
		return s.withLiveOriginals(ctx, r, func(r store.Range) ([]*store.Message, error) {
			return s.backend.FindMessages(ctx, storage.MessageFilter{AuthorID: author, Range: r})
		})
	})
	return MessagePage{Messages: ms, HasMore: more}, err
}
