package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// A block or mute is three keys, written and removed in one batch:
//
//	v <user> <kind> <relation>  target: user's relations of a kind, newest first
//	w <user> <kind> <target>    relation ID: FindBlocked, idempotent Block, and
//	                            the ID Unblock needs to remove the v key
//	B <target> <user>           kind mask: the kinds of relation user has to
//	                            target, so FindBlockers reads one key per owner
//
// Every change to a user's relations happens under the user's stripe: the
// mask under B is read, changed and written back by that user alone.
const (
	pRelations = 'v'
	pRelated   = 'w'
	pBlockers  = 'B'
)

// Block implements storage.Backend.
func (s *Store) Block(_ context.Context, user, target store.ID, kind store.RelationKind, at time.Time) (bool, error) {
	if err := store.CheckRelation(user, target, kind); err != nil {
		return false, err
	}
	return s.setRelation(user, target, kind, at, true)
}

// Unblock implements storage.Backend.
func (s *Store) Unblock(_ context.Context, user, target store.ID, kind store.RelationKind) (bool, error) {
	if !kind.Valid() {
		return false, store.Errorf(store.EINVALID, "unknown relation kind %d", kind)
	}
	return s.setRelation(user, target, kind, time.Time{}, false)
}

// setRelation adds or removes user's relation of kind to target (its three
// keys) in one batch.
func (s *Store) setRelation(user, target store.ID, kind store.RelationKind, at time.Time, on bool) (bool, error) {
	// A block also clears the target's NeverBlocked, in its document:
	// under the target's stripe too.
	unlock := s.lock(user[:], target[:])
	defer unlock()
	var targetDoc []byte
	if on {
		v, ok, err := s.get(key(pUser, target))
		if err != nil {
			return false, err
		} else if !ok {
			return false, store.Errorf(store.ENOTFOUND, "user not found")
		}
		targetDoc = v
	}
	k := []byte{byte(kind)}
	wk := key(pRelated, user, k, target)
	v, exists, err := s.get(wk)
	if err != nil {
		return false, err
	}
	if exists == on {
		return false, nil
	}
	bk := key(pBlockers, target, user)
	mv, _, err := s.get(bk)
	if err != nil {
		return false, err
	}
	var mask store.RelationKind
	if len(mv) == 1 {
		mask = store.RelationKind(mv[0])
	}
	b := s.db.NewBatch()
	defer b.Close()
	if on {
		id := store.NewID(at)
		_ = b.Set(key(pRelations, user, k, id), target[:], nil)
		_ = b.Set(wk, id[:], nil)
		mask |= kind
	} else {
		if len(v) != idLen {
			return false, fmt.Errorf("embedded: bad relation record of %s to %s", user, target)
		}
		_ = b.Delete(key(pRelations, user, k, store.ID(v)), nil)
		_ = b.Delete(wk, nil)
		mask &^= kind
	}
	if mask == 0 {
		_ = b.Delete(bk, nil)
	} else {
		_ = b.Set(bk, []byte{byte(mask)}, nil)
	}
	if on && kind == store.RelationBlock {
		d, err := decodeUserDoc(targetDoc)
		if err != nil {
			return false, err
		}
		if d.NeverBlocked {
			d.NeverBlocked = false
			if err := setUserDoc(b, d); err != nil {
				return false, err
			}
		}
	}
	return true, s.commit(b)
}

// ListBlocked implements storage.Backend.
func (s *Store) ListBlocked(_ context.Context, user store.ID, kind store.RelationKind, r store.Range) ([]store.Relation, error) {
	p := key(pRelations, user, []byte{byte(kind)})
	sp := spanOf(p, r, true)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make([]store.Relation, 0, min(r.Limit, 1024))
	for ok := sp.first(it); ok && len(out) < r.Limit; ok = sp.next(it) {
		v := it.Value()
		if len(v) != idLen {
			return nil, fmt.Errorf("embedded: bad relation record %x", it.Key())
		}
		id := idAfter(p, it.Key())
		out = append(out, store.Relation{ID: id, UserID: user, TargetID: store.ID(v), Kind: kind, CreatedAt: id.Time()})
	}
	return out, it.Error()
}

// FindBlocked implements storage.Backend: the w keys of the targets, read
// with one iterator.
func (s *Store) FindBlocked(_ context.Context, user store.ID, kind store.RelationKind, targets []store.ID) ([]bool, error) {
	var yes struct{}
	found, err := findDocs(s, key(pRelated, user, []byte{byte(kind)}), targets, func([]byte) (*struct{}, error) { return &yes, nil })
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(targets))
	for i, f := range found {
		out[i] = f != nil
	}
	return out, nil
}

// FindBlockers implements storage.Backend: the B keys of the owners, read
// with one iterator.
func (s *Store) FindBlockers(_ context.Context, author store.ID, owners []store.ID) ([]store.RelationKind, error) {
	found, err := findDocs(s, key(pBlockers, author), owners, func(v []byte) (*store.RelationKind, error) {
		if len(v) != 1 {
			return nil, fmt.Errorf("embedded: bad relation mask of %s", author)
		}
		k := store.RelationKind(v[0])
		return &k, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]store.RelationKind, len(owners))
	for i, f := range found {
		if f != nil {
			out[i] = *f
		}
	}
	return out, nil
}

// ListFiltered implements storage.Backend: the first limit targets of each
// kind (two ranges of w keys, each in target order), merged.
func (s *Store) ListFiltered(_ context.Context, user store.ID, limit int) ([]store.ID, error) {
	if limit <= 0 {
		return nil, nil
	}
	var runs [2][]store.ID
	for i, kind := range []store.RelationKind{store.RelationBlock, store.RelationMute} {
		p := key(pRelated, user, []byte{byte(kind)})
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
		if err != nil {
			return nil, fmt.Errorf("embedded iter: %w", err)
		}
		for ok := it.First(); ok && len(runs[i]) < limit; ok = it.Next() {
			runs[i] = append(runs[i], idAfter(p, it.Key()))
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return nil, err
		}
	}
	return mergeIDs(runs[0], runs[1], limit), nil
}

// ListBlockers implements storage.Backend: the range of B keys of target,
// in user order, keeping the users whose mask has a block.
func (s *Store) ListBlockers(_ context.Context, target store.ID, limit int) ([]store.ID, error) {
	if limit <= 0 {
		return nil, nil
	}
	p := key(pBlockers, target)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	var out []store.ID
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		v := it.Value()
		if len(v) != 1 {
			return nil, fmt.Errorf("embedded: bad relation mask of %s", target)
		}
		if store.RelationKind(v[0])&store.RelationBlock != 0 {
			out = append(out, idAfter(p, it.Key()))
		}
	}
	return out, it.Error()
}

// mergeIDs merges two ascending lists of IDs into one without repeats, at
// most limit long.
func mergeIDs(a, b []store.ID, limit int) []store.ID {
	out := make([]store.ID, 0, min(len(a)+len(b), limit))
	for len(out) < limit && (len(a) > 0 || len(b) > 0) {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0].Compare(b[0]) < 0:
			out, a = append(out, a[0]), a[1:]
		case len(a) == 0 || b[0].Compare(a[0]) < 0:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return out
}
