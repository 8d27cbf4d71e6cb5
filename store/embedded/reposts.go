package embedded

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// A repost is a message (Kind store.KindRepost) in the reposter's outbox,
// stored, delivered and deleted as any message. Besides, one key,
// R <reposter> <original>, holds the repost's ID: written in the batch
// that stores the repost and removed in the batch that deletes it, with
// the original's record rewritten with its RepostCount changed by one if
// the original is live, as a reply changes its parent's ReplyCount
// (threads.go). The key is the one-repost-per-user guard (CreateMessage
// refuses a repost while it exists) and FindReposts' answer, read without
// the repost's record. A second key, P <original> <repost>, written and
// removed in the same batches, lists a message's live reposts
// (ListReposts), so that deleting a message finds them.
//
// The key and the original's record change under the original's stripe
// (lockKeys), so two reposts of one message by one user are serial: the
// second finds the key and is CONFLICT.

// isRepost reports whether m is a repost whose original gets its count
// and its guard key.
func isRepost(m *store.Message) bool {
	return m.Kind == store.KindRepost && !m.RepostOfID.IsZero() && m.RepostOfID != m.ID
}

// checkRepost returns the error that refuses repost m, or nil: NOT_FOUND
// if its original is missing or deleted, BAD_USER_INPUT if the original
// is itself a repost, CONFLICT if m's author has a live repost of it.
// Callers hold the original's stripe.
func (s *Store) checkRepost(m *store.Message) error {
	orig, err := s.findMessage(m.RepostOfID)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return store.Errorf(store.ENOTFOUND, "reposted message not found")
	} else if err != nil {
		return err
	}
	if orig.Kind == store.KindRepost {
		return store.Errorf(store.EINVALID, "a repost cannot be reposted; repost its original")
	}
	if _, ok, err := s.get(key(pReposted, m.AuthorID, m.RepostOfID)); err != nil {
		return err
	} else if ok {
		return store.Errorf(store.ECONFLICT, "message already reposted")
	}
	return nil
}

// writeRepost adds to b, for a repost m being created (add) or deleted,
// its guard key or the key's removal, and its original's record with
// RepostCount one more or one less (never below zero) if the original is
// live. It does nothing for another kind. Callers hold the original's
// stripe.
func (s *Store) writeRepost(b *pebble.Batch, m *store.Message, add bool) error {
	if !isRepost(m) {
		return nil
	}
	k, listed := key(pReposted, m.AuthorID, m.RepostOfID), key(pReposts, m.RepostOfID, m.ID)
	if add {
		_ = b.Set(k, m.ID[:], nil)
		_ = b.Set(listed, nil, nil)
	} else {
		_ = b.Delete(k, nil)
		_ = b.Delete(listed, nil)
	}
	orig, err := s.findMessage(m.RepostOfID)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil // deleted: nothing to count
	} else if err != nil {
		return err
	}
	if add {
		orig.RepostCount++
	} else {
		orig.RepostCount = max(orig.RepostCount-1, 0)
	}
	return setMessage(b, orig)
}

// FindReposts implements storage.Backend from the guard keys, read with
// one iterator (findDocs); the author part of a key is not needed.
func (s *Store) FindReposts(_ context.Context, user store.ID, originals []store.MessageKey) ([]store.ID, error) {
	ids := make([]store.ID, len(originals))
	for i, k := range originals {
		ids[i] = k.ID
	}
	found, err := findDocs(s, key(pReposted, user), ids, func(v []byte) (*store.ID, error) {
		if len(v) != idLen {
			return nil, fmt.Errorf("embedded: bad repost record of %s: %d bytes", user, len(v))
		}
		id := store.ID(v)
		return &id, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.ID, len(originals))
	for i, f := range found {
		if f != nil {
			out[i] = *f
		}
	}
	return out, nil
}

// ListReposts implements storage.Backend from the P keys (listIndexed),
// newest first.
func (s *Store) ListReposts(_ context.Context, original store.ID, r store.Range) ([]*store.Message, error) {
	return s.listIndexed(key(pReposts, original), r, true)
}
