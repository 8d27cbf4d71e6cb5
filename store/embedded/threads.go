package embedded

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// A reply is listed under its parent by one key, t <parent> <reply>, whose
// value is the reply's author (so that a sharded reader could find it; here
// the reply is read by ID). The key is written with the reply and removed
// with it, in the batch that stores or deletes the message, and that batch
// also rewrites the parent's record with its ReplyCount changed by one if
// the parent is live. A reply to a deleted message is still listed under
// it, and counted nowhere.
//
// The parent's record is read and rewritten under the parent's stripe,
// which every writer of a message record holds (likes.go), so a reply
// cannot lose an edit, a like or another reply's count, nor revive a parent
// being deleted. CreateMessage and DeleteMessage take the parent's stripe
// in the same lock call as the author's (and the message's), which orders
// them by stripe index: no lock order between the keys to get wrong.

// isReply reports whether m is a reply whose parent gets its count and its
// index key: a reply to itself (which no caller makes) has neither, so that
// deleting it cannot write its own record back.
func isReply(m *store.Message) bool {
	return m.Kind == store.KindReply && !m.ReplyToID.IsZero() && m.ReplyToID != m.ID
}

// lockKeys returns the stripe keys that storing or deleting m needs: its
// author's (counters), its own if it is being deleted (against an edit or a
// like writing it back), its parent's if it is a reply, and its original's
// if it is a repost (reposts.go).
func lockKeys(m *store.Message, deleting bool) [][]byte {
	keys := make([][]byte, 0, 3)
	keys = append(keys, m.AuthorID[:])
	if deleting {
		keys = append(keys, m.ID[:])
	}
	if isReply(m) {
		keys = append(keys, m.ReplyToID[:])
	}
	if isRepost(m) {
		keys = append(keys, m.RepostOfID[:])
	}
	return keys
}

// writeReply adds to b, for a reply m being created (add) or deleted, its
// index key or the key's removal, and its parent's record with ReplyCount
// one more or one less (never below zero) if the parent is live. It does
// nothing for a post. Callers hold the parent's stripe.
func (s *Store) writeReply(b *pebble.Batch, m *store.Message, add bool) error {
	if !isReply(m) {
		return nil
	}
	k := key(pReplies, m.ReplyToID, m.ID)
	if add {
		_ = b.Set(k, m.AuthorID[:], nil)
	} else {
		_ = b.Delete(k, nil)
	}
	parent, err := s.findMessage(m.ReplyToID)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil // deleted: nothing to count
	} else if err != nil {
		return err
	}
	if add {
		parent.ReplyCount++
	} else {
		parent.ReplyCount = max(parent.ReplyCount-1, 0)
	}
	return setMessage(b, parent)
}

// ListReplies implements storage.Backend from the t keys (listIndexed),
// oldest first.
func (s *Store) ListReplies(_ context.Context, parent store.ID, r store.Range) ([]*store.Message, error) {
	return s.listIndexed(key(pReplies, parent), r, false)
}

// listIndexed lists the messages whose IDs end the keys under prefix p,
// within r (newestFirst as the Range reads them). It reads the keys of up
// to the page's remaining room at a time and then their messages with one
// iterator (findDocs); a message deleted between the two reads is skipped,
// and the next keys fill its place.
func (s *Store) listIndexed(p []byte, r store.Range, newestFirst bool) ([]*store.Message, error) {
	sp := spanOf(p, r, newestFirst)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make([]*store.Message, 0, min(r.Limit, 1024))
	ids := make([]store.ID, 0, min(r.Limit, 1024))
	for ok := sp.first(it); ok && len(out) < r.Limit; {
		ids = ids[:0]
		for ; ok && len(ids) < r.Limit-len(out); ok = sp.next(it) {
			ids = append(ids, idAfter(p, it.Key()))
		}
		ms, err := cachedDocs(s, s.decoded.messages, []byte{pMessage}, ids, func(int) *store.Message { return new(store.Message) }, decodeMessage)
		if err != nil {
			return nil, err
		}
		for _, m := range ms { // in reading order, as ids
			if m != nil {
				out = append(out, m)
			}
		}
	}
	return out, it.Error()
}
