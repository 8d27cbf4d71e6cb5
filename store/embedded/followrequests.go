package embedded

import (
	"context"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// A follow request is two keys, written and removed in one batch:
//
//	q <target> <request>  user: the requests to follow target, oldest first
//	Q <user> <target>     request ID: FindFollowRequests, idempotent
//	                      RequestFollow, and the ID the removal needs to
//	                      remove the q key
//
// Every change to a request happens under the target's stripe, so a
// request and its answer never interleave.
const (
	pFollowRequests = 'q'
	pFollowRequest  = 'Q'
)

// RequestFollow implements storage.Backend.
func (s *Store) RequestFollow(_ context.Context, user, target store.ID, at time.Time) (bool, error) {
	if user == target {
		return false, store.Errorf(store.EINVALID, "a user cannot ask to follow themselves")
	}
	unlock := s.lock(target[:])
	defer unlock()
	if _, ok, err := s.get(key(pUser, target)); err != nil {
		return false, err
	} else if !ok {
		return false, store.Errorf(store.ENOTFOUND, "user not found")
	}
	rk := key(pFollowRequest, user, target)
	if _, exists, err := s.get(rk); err != nil || exists {
		return false, err
	}
	id := store.NewID(at)
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Set(key(pFollowRequests, target, id), user[:], nil)
	_ = b.Set(rk, id[:], nil)
	return true, s.commit(b)
}

// RemoveFollowRequest implements storage.Backend.
func (s *Store) RemoveFollowRequest(_ context.Context, user, target store.ID) (bool, error) {
	unlock := s.lock(target[:])
	defer unlock()
	rk := key(pFollowRequest, user, target)
	v, exists, err := s.get(rk)
	if err != nil || !exists {
		return false, err
	}
	if len(v) != idLen {
		return false, fmt.Errorf("embedded: bad follow request of %s to %s", user, target)
	}
	b := s.db.NewBatch()
	defer b.Close()
	_ = b.Delete(key(pFollowRequests, target, store.ID(v)), nil)
	_ = b.Delete(rk, nil)
	return true, s.commit(b)
}

// ListFollowRequests implements storage.Backend: one range of q keys.
func (s *Store) ListFollowRequests(_ context.Context, target store.ID, r store.Range) ([]store.FollowRequest, error) {
	p := key(pFollowRequests, target)
	sp := spanOf(p, r, false)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make([]store.FollowRequest, 0, min(r.Limit, 1024))
	for ok := sp.first(it); ok && len(out) < r.Limit; ok = sp.next(it) {
		v := it.Value()
		if len(v) != idLen {
			return nil, fmt.Errorf("embedded: bad follow request record %x", it.Key())
		}
		id := idAfter(p, it.Key())
		out = append(out, store.FollowRequest{ID: id, UserID: store.ID(v), TargetID: target, CreatedAt: id.Time().UTC()})
	}
	return out, it.Error()
}

// FindFollowRequests implements storage.Backend: the Q keys of the
// targets, read with one iterator.
func (s *Store) FindFollowRequests(_ context.Context, user store.ID, targets []store.ID) ([]bool, error) {
	var yes struct{}
	found, err := findDocs(s, key(pFollowRequest, user), targets, func([]byte) (*struct{}, error) { return &yes, nil })
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(targets))
	for i, f := range found {
		out[i] = f != nil
	}
	return out, nil
}

// CountFollowRequests implements storage.Backend: a scan of target's q
// keys.
func (s *Store) CountFollowRequests(ctx context.Context, target store.ID) (int, error) {
	p := key(pFollowRequests, target)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: prefixEnd(p)})
	if err != nil {
		return 0, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%scanCheckEvery == 0 && ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return n, it.Error()
}
