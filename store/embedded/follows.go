package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// Follow implements store.Backend.
func (s *Store) Follow(_ context.Context, follower, followee store.ID, at time.Time) (bool, error) {
	return s.setFollow(follower, followee, at, true)
}

// Unfollow implements store.Backend.
func (s *Store) Unfollow(_ context.Context, follower, followee store.ID) (bool, error) {
	return s.setFollow(follower, followee, time.Time{}, false)
}

// setFollow adds or removes both edges and adjusts both counters in one batch.
func (s *Store) setFollow(follower, followee store.ID, at time.Time, on bool) (bool, error) {
	unlock := s.lock(follower[:], followee[:])
	defer unlock()
	a, err := s.findUserDoc(follower)
	if err != nil {
		return false, err
	}
	b, err := s.findUserDoc(followee)
	if err != nil {
		return false, err
	}
	ek := key(pFollowee, follower, followee)
	_, exists, err := s.get(ek)
	if err != nil {
		return false, err
	}
	if exists == on {
		return false, nil
	}
	batch := s.db.NewBatch()
	defer batch.Close()
	rk := key(pFollower, followee, follower)
	delta := int64(1)
	if on {
		v := binary.BigEndian.AppendUint64(nil, uint64(at.UnixMilli()))
		_ = batch.Set(ek, v, nil)
		_ = batch.Set(rk, v, nil)
	} else {
		delta = -1
		_ = batch.Delete(ek, nil)
		_ = batch.Delete(rk, nil)
	}
	a.Following += delta
	b.Followers += delta
	if err := setUserDoc(batch, a); err != nil {
		return false, err
	}
	if err := setUserDoc(batch, b); err != nil {
		return false, err
	}
	return true, s.commit(batch)
}

// FindFollowing implements store.Backend.
func (s *Store) FindFollowing(_ context.Context, follower store.ID, targets []store.ID) ([]bool, error) {
	out := make([]bool, len(targets))
	for i, t := range targets {
		_, ok, err := s.get(key(pFollowee, follower, t))
		if err != nil {
			return nil, err
		}
		out[i] = ok
	}
	return out, nil
}

// ListFollowers implements store.Backend.
func (s *Store) ListFollowers(_ context.Context, user, after store.ID, limit int) ([]store.ID, error) {
	return s.listEdges(pFollower, user, after, limit)
}

// ListFollowing implements store.Backend.
func (s *Store) ListFollowing(_ context.Context, user, after store.ID, limit int) ([]store.ID, error) {
	return s.listEdges(pFollowee, user, after, limit)
}

func (s *Store) listEdges(prefix byte, user, after store.ID, limit int) ([]store.ID, error) {
	p := key(prefix, user)
	lower := p
	if !after.IsZero() {
		lower = append(key(prefix, user, after), 0)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(p)})
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make([]store.ID, 0, min(limit, 1024))
	for ok := it.First(); ok && len(out) < limit; ok = it.Next() {
		var id store.ID
		copy(id[:], it.Key()[len(p):])
		out = append(out, id)
	}
	return out, it.Error()
}
