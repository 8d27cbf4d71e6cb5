package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"herald/store"
)

// Follow implements storage.Backend.
func (s *Store) Follow(_ context.Context, follower, followee store.ID, at time.Time) (bool, error) {
	return s.setFollow(follower, followee, at, true)
}

// Unfollow implements storage.Backend.
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

// FindFollowing implements storage.Backend.
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

// FindFollowers implements storage.Backend.
func (s *Store) FindFollowers(_ context.Context, followee store.ID, candidates []store.ID) ([]bool, error) {
	out := make([]bool, len(candidates))
	for i, c := range candidates {
		_, ok, err := s.get(key(pFollower, followee, c))
		if err != nil {
			return nil, err
		}
		out[i] = ok
	}
	return out, nil
}

// ListFollowers implements storage.Backend.
func (s *Store) ListFollowers(_ context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	return s.listEdges(pFollower, user, r)
}

// ListFollowing implements storage.Backend.
func (s *Store) ListFollowing(_ context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	return s.listEdges(pFollowee, user, r)
}

func (s *Store) listEdges(prefix byte, user store.ID, r store.Range) ([]store.ID, error) {
	p := key(prefix, user)
	sp := spanOf(p, r, false)
	it, err := s.db.NewIter(sp.iterOptions())
	if err != nil {
		return nil, fmt.Errorf("embedded iter: %w", err)
	}
	defer it.Close()
	out := make([]store.ID, 0, min(r.Limit, 1024))
	for ok := sp.first(it); ok && len(out) < r.Limit; ok = sp.next(it) {
		out = append(out, idAfter(p, it.Key()))
	}
	return out, it.Error()
}
