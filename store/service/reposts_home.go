package service

import (
	"context"
	"slices"

	"herald/store"
)

// repostsPage is how many reposts of a deleted message are read at a time.
const repostsPage = 100

// deleteReposts deletes the live reposts of m, a message just deleted, each
// through the deletion every message takes (a retraction job where
// inboxes are stored, notices), so that they leave every timeline: a
// repost stands for its original, and shows nothing once it is gone. A
// message that counts no reposts is not looked up (one query asking every
// shard on a sharded MongoDB). A failure, or a crash, leaves reposts of a
// deleted message behind; a timeline read that meets one skips it and
// deletes it then (liveOriginals), so the failure is logged, not returned:
// the message itself is deleted.
func (s *Service) deleteReposts(ctx context.Context, m *store.Message) {
	if m.Kind == store.KindRepost || m.RepostCount == 0 {
		return
	}
	from := store.NilID
	for {
		rs, err := s.backend.ListReposts(ctx, m.ID, store.Forward(from, repostsPage))
		if err != nil {
			s.log.Error("reposts of a deleted message left to timeline reads", "message", m.ID.String(), "err", err)
			return
		}
		for _, r := range rs {
			if err := s.deleteRepost(ctx, r); err != nil {
				s.log.Error("reposts of a deleted message left to timeline reads", "message", m.ID.String(), "err", err)
				return
			}
		}
		if len(rs) < repostsPage {
			return
		}
		from = rs[len(rs)-1].ID
	}
}

// deleteRepost deletes repost r as its author's deletion does; one deleted
// meanwhile is no error.
func (s *Service) deleteRepost(ctx context.Context, r *store.Message) error {
	if err := s.deleteMessage(ctx, r); store.ErrorCode(err) != store.ENOTFOUND {
		return err
	}
	return nil
}

// liveOriginals returns, aligned with msgs (a timeline page's messages),
// the message each repost among them reposts, nil for the others. It sets
// to nil, in msgs, each repost whose original is missing or deleted, so the
// page skips it as it skips a deleted message, and deletes that repost: the
// repair of a deletion whose reposts were not all deleted (a crash between
// the two, or a repost stored while its original was being deleted). It
// reads the originals in one call, and nothing for a page without reposts.
func (s *Service) liveOriginals(ctx context.Context, msgs []*store.Message) ([]*store.Message, error) {
	var at []int
	var keys []store.MessageKey
	for i, m := range msgs {
		if m != nil && m.Kind == store.KindRepost {
			at = append(at, i)
			keys = append(keys, store.MessageKey{ID: m.RepostOfID, AuthorID: m.RepostOfAuthorID})
		}
	}
	originals := make([]*store.Message, len(msgs))
	if len(keys) == 0 {
		return originals, nil
	}
	found, err := s.backend.FindMessagesByKeys(ctx, keys)
	if err != nil {
		return nil, err
	}
	for k, i := range at {
		if originals[i] = found[k]; found[k] != nil {
			continue
		}
		if err := s.deleteRepost(ctx, msgs[i]); err != nil {
			s.log.Error("a repost of a deleted message not deleted; the next read tries again", "message", msgs[i].ID.String(), "err", err)
		}
		msgs[i] = nil
	}
	return originals, nil
}

// withLiveOriginals reads messages within r with read, as readPage does,
// leaving out (and deleting, see liveOriginals) the reposts whose original
// is gone, and reading on past them so the page stays full.
func (s *Service) withLiveOriginals(ctx context.Context, r store.Range, read func(store.Range) ([]*store.Message, error)) ([]*store.Message, error) {
	return readOn(r, read, func(ms []*store.Message) ([]*store.Message, error) {
		if _, err := s.liveOriginals(ctx, ms); err != nil {
			return nil, err
		}
		return slices.DeleteFunc(ms, func(m *store.Message) bool { return m == nil }), nil
	}, func(m *store.Message) store.ID { return m.ID })
}
