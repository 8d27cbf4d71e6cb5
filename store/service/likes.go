package service

import (
	"context"

	"herald/store"
)

// Like makes viewer like message id and returns the message with its like
// count after the like. Liking twice changes nothing; a missing or deleted
// message, or one hidden from viewer (SeesMessagesOf), is NOT_FOUND.
func (s *Service) Like(ctx context.Context, viewer, id store.ID) (*store.Message, error) {
	return s.changeLike(ctx, viewer, id, true)
}

// Unlike removes viewer's like of message id, as Like adds it.
func (s *Service) Unlike(ctx context.Context, viewer, id store.ID) (*store.Message, error) {
	return s.changeLike(ctx, viewer, id, false)
}

func (s *Service) changeLike(ctx context.Context, viewer, id store.ID, like bool) (*store.Message, error) {
	// The message is read first for its author, which the like names so a
	// backend placing messages by author finds it in one place.
	// A like of a repost likes the message it reposts.
	m, err := s.findOriginal(ctx, id)
	if err != nil {
		return nil, err
	}
	if like {
		// A message hidden from viewer is as absent; an unlike of one
		// liked before it was hidden still goes.
		if _, err := s.shownAuthor(ctx, viewer, m.AuthorID); err != nil {
			return nil, err
		}
	}
	var changed bool
	if like {
		changed, err = s.backend.Like(ctx, viewer, m.Key(), s.clock())
	} else {
		changed, err = s.backend.Unlike(ctx, viewer, m.Key())
	}
	if err != nil {
		return nil, err
	}
	// The count as read plus this change: another user's like in between
	// shows at the next read, and the caller saves a round trip.
	switch {
	case changed && like:
		m.LikeCount++
		s.notify(ctx, store.NotifyLiked, m.AuthorID, viewer, m)
	case changed && m.LikeCount > 0:
		m.LikeCount--
	}
	return m, nil
}

// FindLiked reports, for each key, whether viewer likes its message.
func (s *Service) FindLiked(ctx context.Context, viewer store.ID, keys []store.MessageKey) ([]bool, error) {
	return s.backend.FindLiked(ctx, viewer, keys)
}

// LikePage is a page of likes, newest first. HasMore says whether more lie
// beyond the page in the direction it was read.
type LikePage struct {
	Likes []store.Like
	// Messages are the messages liked, aligned with Likes, for a page of a
	// user's likes (Likes); nil for a page of a message's likers.
	Messages []*store.Message
	HasMore  bool
}

// Likers returns a page of the likes of message, newest first.
func (s *Service) Likers(ctx context.Context, message store.ID, r store.Range) (LikePage, error) {
	likes, more, err := readPage(r, func(r store.Range) ([]store.Like, error) { return s.backend.ListLikers(ctx, message, r) })
	return LikePage{Likes: likes, HasMore: more}, err
}

// Likes returns a page of the likes user made, newest first, with the
// messages liked. The likes of a message since deleted stay stored; the
// page leaves them out, and those of messages hidden from viewer (NilID:
// nobody signed in; see SeesMessagesOf), and reads on, so that it stays
// full.
func (s *Service) Likes(ctx context.Context, viewer, user store.ID, r store.Range) (LikePage, error) {
	liked, more, err := readPage(r, func(r store.Range) ([]likedMessage, error) { return s.liveLikes(ctx, viewer, user, r) })
	page := LikePage{Likes: make([]store.Like, len(liked)), Messages: make([]*store.Message, len(liked)), HasMore: more}
	for i, l := range liked {
		page.Likes[i], page.Messages[i] = l.like, l.message
	}
	return page, err
}

// likedMessage is a like with the message it likes.
type likedMessage struct {
	like    store.Like
	message *store.Message
}

// liveLikes reads user's likes within r with their messages, one
// FindMessagesByKeys a read (and the rule's reads), past the likes of
// deleted messages and of messages hidden from viewer.
func (s *Service) liveLikes(ctx context.Context, viewer, user store.ID, r store.Range) ([]likedMessage, error) {
	read := func(r store.Range) ([]store.Like, error) { return s.backend.ListLikes(ctx, user, r) }
	return readOn(r, read, func(likes []store.Like) ([]likedMessage, error) {
		keys := make([]store.MessageKey, len(likes))
		for i, l := range likes {
			keys[i] = l.Key()
		}
		msgs, err := s.backend.FindMessagesByKeys(ctx, keys)
		if err != nil {
			return nil, err
		}
		shown, _, err := s.visibleMessages(ctx, viewer, msgs)
		if err != nil {
			return nil, err
		}
		var kept []likedMessage
		for i, m := range msgs {
			if shown[i] {
				kept = append(kept, likedMessage{like: likes[i], message: m})
			}
		}
		return kept, nil
	}, func(l store.Like) store.ID { return l.ID })
}
