package embedded

import (
	"context"
	"fmt"
	"time"

	"herald/store"
)

// A like is three keys, written and removed together with the message's
// LikeCount in one batch: l and L list it from either side, newest first
// by like ID, and k answers "does user like this message" in one read and
// finds the like ID that Unlike needs to remove the other two. Values hold
// what a store.Like needs besides the key, so a list reads no other record.
//
// Every change to a message record (Like, Unlike, UpdateMessage,
// DeleteMessage) happens under the message's stripe, and each rewrites
// the whole record: the stripe is what keeps an edit from writing back a
// LikeCount a like has since changed, and a like from reviving a message
// being deleted. Likes of one author's different messages do not wait for
// each other.
//
// A deleted message's likes stay (Like and Unlike on it are NOT_FOUND);
// they are listed until something removes them.

// Like implements storage.Backend. Messages are keyed by ID alone here: the
// author part of key is not needed to find one.
func (s *Store) Like(_ context.Context, user store.ID, key store.MessageKey, at time.Time) (bool, error) {
	return s.setLike(user, key.ID, at, true)
}

// Unlike implements storage.Backend.
func (s *Store) Unlike(_ context.Context, user store.ID, key store.MessageKey) (bool, error) {
	return s.setLike(user, key.ID, time.Time{}, false)
}

// setLike adds or removes user's like of message (its three keys) and
// adjusts the message's LikeCount, in one batch.
func (s *Store) setLike(user, message store.ID, at time.Time, on bool) (bool, error) {
	unlock := s.lock(message[:])
	defer unlock()
	m, err := s.findMessage(message)
	if err != nil {
		return false, err
	}
	pk := key(pLiked, user, message)
	v, exists, err := s.get(pk)
	if err != nil {
		return false, err
	}
	if exists == on {
		return false, nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	if on {
		id := store.NewID(at)
		_ = b.Set(key(pLikes, user, id), key2Value(m.ID, m.AuthorID), nil)
		_ = b.Set(key(pLikers, m.ID, id), key2Value(user, m.AuthorID), nil)
		_ = b.Set(pk, id[:], nil)
		m.LikeCount++
	} else {
		if len(v) != idLen {
			return false, fmt.Errorf("embedded: bad like record of %s on %s", user, message)
		}
		id := store.ID(v)
		_ = b.Delete(key(pLikes, user, id), nil)
		_ = b.Delete(key(pLikers, m.ID, id), nil)
		_ = b.Delete(pk, nil)
		m.LikeCount = max(m.LikeCount-1, 0)
	}
	if err := setMessage(b, m); err != nil {
		return false, err
	}
	return true, s.commit(b)
}

const idLen = len(store.ID{})

// key2Value encodes two IDs, the value of a like's list keys.
func key2Value(a, b store.ID) []byte {
	return append(append(make([]byte, 0, 2*idLen), a[:]...), b[:]...)
}

// FindLiked implements storage.Backend. It reads the k keys of the
// messages with one iterator, as findDocs reads documents; a key's author
// is not needed.
func (s *Store) FindLiked(_ context.Context, user store.ID, keys []store.MessageKey) ([]bool, error) {
	ids := make([]store.ID, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	var yes struct{}
	found, err := findDocs(s, key(pLiked, user), ids, func([]byte) (*struct{}, error) { return &yes, nil })
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(keys))
	for i, f := range found {
		out[i] = f != nil
	}
	return out, nil
}

// ListLikers implements storage.Backend.
func (s *Store) ListLikers(_ context.Context, message store.ID, r store.Range) ([]store.Like, error) {
	return s.listLikes(pLikers, message, r, func(id store.ID, v []byte) store.Like {
		return store.Like{ID: id, MessageID: message, UserID: store.ID(v[:idLen]), AuthorID: store.ID(v[idLen:])}
	})
}

// ListLikes implements storage.Backend.
func (s *Store) ListLikes(_ context.Context, user store.ID, r store.Range) ([]store.Like, error) {
	return s.listLikes(pLikes, user, r, func(id store.ID, v []byte) store.Like {
		return store.Like{ID: id, UserID: user, MessageID: store.ID(v[:idLen]), AuthorID: store.ID(v[idLen:])}
	})
}

// listLikes reads the likes under prefix+owner within r, newest first;
// like decodes one from its ID and its value (two IDs).
func (s *Store) listLikes(prefix byte, owner store.ID, r store.Range, like func(id store.ID, v []byte) store.Like) ([]store.Like, error) {
	p := key(prefix, owner)
	sp := spanOf(p, r, true)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make([]store.Like, 0, min(r.Limit, 1024))
	for ok := sp.first(it); ok && len(out) < r.Limit; ok = sp.next(it) {
		v := it.Value()
		if len(v) != 2*idLen {
			return nil, fmt.Errorf("embedded: bad like record %x", it.Key())
		}
		l := like(idAfter(p, it.Key()), v)
		l.CreatedAt = l.ID.Time()
		out = append(out, l)
	}
	return out, it.Error()
}
