package service

import (
	"context"

	"herald/store"
	"herald/store/storage"
)

// Repost makes viewer repost message id and returns the message reposted
// with its repost count after the repost. A repost of a repost reposts its
// original. Reposting twice changes nothing; a missing or deleted message,
// or one hidden from viewer, is NOT_FOUND; another private account's
// message FORBIDDEN (mayRepost). While the fan-out lag is past
// Options.FanoutMaxLag a repost to store is refused with a
// *FanoutBehindError (RATE_LIMITED), as PostMessage is; reposting again is
// still answered.
func (s *Service) Repost(ctx context.Context, viewer, id store.ID) (*store.Message, error) {
	original, err := s.findOriginal(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := s.mayRepost(ctx, viewer, original); err != nil {
		return nil, err
	}
	now := s.clock()
	// A repost is never pulled, even under hybrid for a celebrity: it
	// reaches only the reposter's followers who do not follow the original's
	// author, so it is pushed, like a reply to another user, rather than
	// making every reader find out.
	m := &store.Message{ID: store.NewID(now), AuthorID: viewer, Kind: store.KindRepost, CreatedAt: now,
		RepostOfID: original.ID, RepostOfAuthorID: original.AuthorID, HomeHidden: original.AuthorID == viewer}
	if !m.HomeHidden {
		// Decided once, here, as a stored inbox keeps what was delivered:
		// the reposter's own timeline reads the mark, not the follow graph.
		follows, err := s.backend.FindFollowing(ctx, viewer, []store.ID{original.AuthorID})
		if err != nil {
			return nil, err
		}
		m.HomeHidden = follows[0]
	}
	var job *storage.Job
	if s.layout != storage.LayoutNone {
		job = &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: s.layout, MessageID: m.ID, AuthorID: viewer, CreatedAt: now, RepostOfAuthorID: original.AuthorID}
		if err := s.admitFanout(ctx); err != nil {
			// Refuse only a repost that would queue a fan-out: one
			// already there changes nothing and is answered as ever.
			// Looked up only when refusing, so an admitted repost pays
			// no extra read.
			reposts, ferr := s.backend.FindReposts(ctx, viewer, []store.MessageKey{original.Key()})
			if ferr != nil {
				return nil, ferr
			}
			if !reposts[0].IsZero() {
				return original, nil
			}
			return nil, err
		}
	}
	err = s.backend.CreateMessage(ctx, m, job)
	if store.ErrorCode(err) == store.ECONFLICT {
		// Already reposted (perhaps by a request racing this one): the
		// count as read already holds that repost.
		return original, nil
	} else if err != nil {
		return nil, err
	}
	if job != nil {
		s.fanout.enqueue(job)
	}
	s.fanout.enqueueNotice(s.noticeOf(store.EventAdded, m, job != nil))
	// The count as read plus this repost, as Like does.
	original.RepostCount++
	s.notify(ctx, store.NotifyReposted, original.AuthorID, viewer, original)
	return original, nil
}

// Unrepost deletes viewer's repost of message id (or of the message id
// reposts), as DeleteMessage deletes a message, and returns the message with
// its repost count after. Unreposting a message not reposted changes nothing.
//
// The inboxes that showed the repost show it as the original, so besides the
// deletion's own events (which name the repost, an id no edge shows) the
// reposter's readers are told that the original's item left their inbox:
// REMOVED with the original's id and the reposter as the event's author,
// which is how a subscription tells this removal from an unfollow's; the
// rule of reposts at home picks its readers, as it picked the repost's.
func (s *Service) Unrepost(ctx context.Context, viewer, id store.ID) (*store.Message, error) {
	original, err := s.findOriginal(ctx, id)
	if err != nil {
		return nil, err
	}
	reposts, err := s.backend.FindReposts(ctx, viewer, []store.MessageKey{original.Key()})
	if err != nil {
		return nil, err
	}
	if reposts[0].IsZero() {
		return original, nil
	}
	repost, err := s.backend.FindMessageByID(ctx, reposts[0])
	if err == nil {
		err = s.deleteMessage(ctx, repost)
	}
	if store.ErrorCode(err) == store.ENOTFOUND {
		return original, nil // a racing unrepost deleted it first
	} else if err != nil {
		return nil, err
	}
	if original.RepostCount > 0 {
		original.RepostCount--
	}
	// Told to those the repost was at home for: the followers by the rule
	// it reached them by, the reposter by its mark.
	s.fanout.enqueueNotice(&notice{event: store.EventRemoved, message: original.ID, author: viewer, repostOf: original.AuthorID, authorHidden: repost.HomeHidden, readers: readersFollowers})
	return original, nil
}

// FindReposted reports, for each key, whether viewer has reposted its
// message.
func (s *Service) FindReposted(ctx context.Context, viewer store.ID, keys []store.MessageKey) ([]bool, error) {
	reposts, err := s.backend.FindReposts(ctx, viewer, keys)
	if err != nil {
		return nil, err
	}
	found := make([]bool, len(reposts))
	for i, r := range reposts {
		found[i] = !r.IsZero()
	}
	return found, nil
}

// findOriginal returns message id, or the message it reposts if it is a
// repost: NOT_FOUND if either is missing or deleted.
func (s *Service) findOriginal(ctx context.Context, id store.ID) (*store.Message, error) {
	m, err := s.backend.FindMessageByID(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.originalOf(ctx, m)
}

// originalOf returns m, or the message m reposts if it is a repost: what a
// reply to a repost answers and a like of a repost likes, since a repost
// has no text of its own.
func (s *Service) originalOf(ctx context.Context, m *store.Message) (*store.Message, error) {
	if m.Kind != store.KindRepost {
		return m, nil
	}
	o, err := s.backend.FindMessagesByKeys(ctx, []store.MessageKey{{ID: m.RepostOfID, AuthorID: m.RepostOfAuthorID}})
	if err != nil {
		return nil, err
	}
	if o[0] == nil {
		return nil, store.Errorf(store.ENOTFOUND, "the reposted message was deleted")
	}
	return o[0], nil
}
