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
	edge := func() (bool, error) {
		if kind == storage.JobFollow {
			changed, err := s.backend.Follow(ctx, viewer, target, s.clock())
			if changed {
				s.notify(ctx, store.NotifyFollowed, target, viewer, nil)
			}
			return changed, err
		}
		return s.backend.Unfollow(ctx, viewer, target)
	}
	if !s.layout.Stores() || (kind == storage.JobFollow && s.opts.FollowBackfill < 0) {
		if _, err := edge(); err != nil {
			return err
		}
		if s.layout == storage.LayoutCache {
			return s.backend.DropInboxCache(ctx, viewer)
		}
		return nil
	}
	now := s.clock()
	job := &storage.Job{ID: store.NewID(now), Kind: kind, Layout: s.layout, AuthorID: target, OwnerID: viewer, CreatedAt: now}
	if err := s.backend.StoreJob(ctx, job); err != nil {
		return err
	}
	changed, err := edge()
	if err != nil || !changed {
		// Nothing changed: the job has nothing to do. Were this to fail,
		// the job would find so itself.
		if ferr := s.backend.FinishJob(ctx, job); ferr != nil {
			s.log.WarnContext(ctx, "finishing an idle follow job", "err", ferr)
		}
		return err
	}
	s.fanout.enqueue(job)
	return nil
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
