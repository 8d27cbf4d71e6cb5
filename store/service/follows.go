package service

import (
	"context"

	"herald/store"
	"herald/store/storage"
)

// Follow makes viewer follow target and returns target with its new counts.
// Following twice counts once; following yourself is BAD_USER_INPUT, and a
// follow between users one of whom blocks the other FORBIDDEN. A private
// target is asked instead (requestFollow). The
// followee's recent messages then come into viewer's timeline: stored by a
// durable job (stored before the edge, so a crash between the two leaves a
// job that finds no edge and does nothing), or, for the cache, by dropping
// the cache, which the next read rebuilds.
func (s *Service) Follow(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if viewer == target {
		return nil, store.Errorf(store.EINVALID, "you cannot follow yourself")
	}
	if err := s.refuseBlockedFollow(ctx, viewer, target); err != nil {
		return nil, err
	}
	if u, requested, err := s.requestFollow(ctx, viewer, target); err != nil || requested {
		return u, err
	}
	if err := s.changeFollow(ctx, viewer, target, storage.JobFollow); err != nil {
		return nil, err
	}
	return s.backend.FindUserByID(ctx, target)
}

// Unfollow makes viewer stop following target, or takes back viewer's
// pending request to follow it, and returns target. The
// unfollowed author's messages leave viewer's timeline, by a durable job
// or by dropping the cache, as for Follow.
func (s *Service) Unfollow(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if viewer == target {
		return nil, store.Errorf(store.EINVALID, "you cannot unfollow yourself")
	}
	if err := s.withdrawFollowRequest(ctx, viewer, target); err != nil {
		return nil, err
	}
	if err := s.changeFollow(ctx, viewer, target, storage.JobUnfollow); err != nil {
		return nil, err
	}
	return s.backend.FindUserByID(ctx, target)
}

func (s *Service) changeFollow(ctx context.Context, viewer, target store.ID, kind storage.JobKind) error {
	follow := kind == storage.JobFollow
	edge := func() (bool, error) {
		if follow {
			changed, err := s.backend.Follow(ctx, viewer, target, s.clock())
			if changed {
				s.notify(ctx, store.NotifyFollowed, target, viewer, nil)
			}
			return changed, err
		}
		return s.backend.Unfollow(ctx, viewer, target)
	}
	if follow && s.opts.FollowBackfill < 0 {
		kind = 0 // nothing to bring
	}
	return s.changeRelation(ctx, viewer, target, kind, edge)
}

// FindFollowing reports, for each target, whether viewer follows it.
func (s *Service) FindFollowing(ctx context.Context, viewer store.ID, targets []store.ID) ([]bool, error) {
	return s.backend.FindFollowing(ctx, viewer, targets)
}

// FollowPage is a page of one side of the follow graph: user IDs in ID
// order. HasMore says whether more IDs lie beyond the page in the direction
// it was read (see Range).
type FollowPage struct {
	IDs     []store.ID
	HasMore bool
}

// Followers returns a page of user's followers in ID order, within r.
func (s *Service) Followers(ctx context.Context, user store.ID, r store.Range) (FollowPage, error) {
	ids, more, err := readPage(r, func(r store.Range) ([]store.ID, error) { return s.backend.ListFollowers(ctx, user, r) })
	return FollowPage{IDs: ids, HasMore: more}, err
}

// Following returns a page of the users user follows in ID order, within r.
func (s *Service) Following(ctx context.Context, user store.ID, r store.Range) (FollowPage, error) {
	ids, more, err := readPage(r, func(r store.Range) ([]store.ID, error) { return s.backend.ListFollowing(ctx, user, r) })
	return FollowPage{IDs: ids, HasMore: more}, err
}
