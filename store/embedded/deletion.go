package embedded

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// pDeleted keys list the deleted users not yet purged: D <user id>, no
// value. The user document holds the deletion time.
const pDeleted = 'D'

// DeleteUser implements storage.Backend: one batch under the user's stripe
// lock, so it is whole or not at all.
func (s *Store) DeleteUser(_ context.Context, id store.ID, at time.Time) error {
	unlock := s.lock(id[:])
	defer unlock()
	d, err := s.findUserDoc(id)
	if err != nil {
		return err
	}
	if d.Deleted != nil {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, a := range d.Attrs {
		_ = b.Delete(append(attrIndexPrefix(a.Token, a.Value), id[:]...), nil)
	}
	setSearchKeys(b, id, store.SearchTerms(d.Handle, d.Name), nil)
	at = at.UTC()
	d.Deleted, d.Attrs, d.TokenVer, d.Revoked, d.Kept = &at, nil, d.TokenVer+1, nil, ""
	if err := setUserDoc(b, d); err != nil {
		return err
	}
	_ = b.Set(key(pDeleted, id), nil, nil)
	return s.commit(b)
}

// ListDeletedUsers implements storage.Backend: a read of the D range.
func (s *Store) ListDeletedUsers(_ context.Context, after store.ID, limit int) ([]*store.User, error) {
	p := []byte{pDeleted}
	lower := p
	if !after.IsZero() {
		lower = prefixEnd(key(pDeleted, after))
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	var ids []store.ID
	for ok := it.First(); ok && len(ids) < limit; ok = it.Next() {
		ids = append(ids, idAfter(p, it.Key()))
	}
	if err := it.Close(); err != nil {
		return nil, err
	}
	users, err := findDocs(s, []byte{pUser}, ids, func(v []byte) (*store.User, error) { return s.decodeUser(bytes.Clone(v)) })
	if err != nil {
		return nil, err
	}
	out := users[:0]
	for _, u := range users {
		if u != nil {
			out = append(out, u)
		}
	}
	return out, nil
}

// PurgeUser implements storage.Backend: one batch under the locks of the
// handle and the user. The inbox head stays (a few bytes): the head
// journal may still name the user.
func (s *Store) PurgeUser(_ context.Context, id store.ID) error {
	// The handle never changes: read first, it names the second lock.
	d, err := s.findUserDoc(id)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	hk := key(pHandle, d.Handle)
	unlock := s.lock(id[:], hk)
	defer unlock()
	if d, err = s.findUserDoc(id); store.ErrorCode(err) == store.ENOTFOUND {
		return nil
	} else if err != nil {
		return err
	}
	if d.Deleted == nil {
		return store.Errorf(store.ECONFLICT, "the account is not deleted")
	}
	b := s.db.NewBatch()
	defer b.Close()
	if v, ok, err := s.get(hk); err != nil {
		return err
	} else if ok && bytes.Equal(v, id[:]) {
		_ = b.Delete(hk, nil)
	}
	_ = b.Delete(key(pUser, id), nil)
	_ = b.Delete(key(pDeleted, id), nil)
	return s.commit(b)
}
