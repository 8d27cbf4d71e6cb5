package service

import (
	"context"

	"herald/store"
	"herald/store/storage"
)

// SetPrivate makes viewer's account private (or public again) and returns
// it. Making it public leaves the pending follow requests to be answered:
// each is a user's wish the account may still turn down.
func (s *Service) SetPrivate(ctx context.Context, viewer store.ID, private bool) (*store.User, error) {
	return s.backend.UpdateUser(ctx, viewer, storage.UserUpdate{Private: &private})
}

// requestFollow is Follow's step for a private target: a follow of it by
// viewer, who does not follow it yet, is a request it answers
// (FOLLOW_REQUESTED notifies it, grouped as follows are), with no edge and
// nothing brought into viewer's timeline. It returns the target and true
// when the follow stops here (a request stored, or one pending or a
// follow already there); false for a public target, which Follow follows.
func (s *Service) requestFollow(ctx context.Context, viewer, target store.ID) (*store.User, bool, error) {
	u, err := s.backend.FindUserByID(ctx, target)
	if err != nil || !u.Private {
		return nil, false, err
	}
	follows, err := s.backend.FindFollowing(ctx, viewer, []store.ID{target})
	if err != nil || follows[0] {
		return u, err == nil, err
	}
	changed, err := s.backend.RequestFollow(ctx, viewer, target, s.clock())
	if err != nil {
		return nil, false, err
	}
	if changed {
		s.notify(ctx, store.NotifyFollowRequested, target, viewer, nil)
	}
	return u, true, nil
}

// withdrawFollowRequest is Unfollow's step: an unfollow takes back a
// pending request too.
func (s *Service) withdrawFollowRequest(ctx context.Context, viewer, target store.ID) error {
	_, err := s.backend.RemoveFollowRequest(ctx, viewer, target)
	return err
}

// ApproveFollow approves requester's request to follow viewer's account
// and returns requester, now a follower: the follow is made as Follow makes
// one (its durable job brings viewer's recent messages into requester's
// timeline), then the request is removed. A crash between the two leaves
// the request with the follow made; approving it again finds the follow
// there and removes the request. NOT_FOUND when there is no such request.
func (s *Service) ApproveFollow(ctx context.Context, viewer, requester store.ID) (*store.User, error) {
	pending, err := s.backend.FindFollowRequests(ctx, requester, []store.ID{viewer})
	if err != nil {
		return nil, err
	}
	if !pending[0] {
		return nil, store.Errorf(store.ENOTFOUND, "no such follow request")
	}
	// A block stored after the request removes it; one racing it is
	// refused here, as a follow is.
	if err := s.refuseBlockedFollow(ctx, viewer, requester); err != nil {
		return nil, err
	}
	if err := s.changeFollow(ctx, requester, viewer, storage.JobFollow); err != nil {
		return nil, err
	}
	if _, err := s.backend.RemoveFollowRequest(ctx, requester, viewer); err != nil {
		return nil, err
	}
	return s.backend.FindUserByID(ctx, requester)
}

// RejectFollow removes requester's request to follow viewer's account and
// returns requester. NOT_FOUND when there is no such request.
func (s *Service) RejectFollow(ctx context.Context, viewer, requester store.ID) (*store.User, error) {
	removed, err := s.backend.RemoveFollowRequest(ctx, requester, viewer)
	if err != nil {
		return nil, err
	}
	if !removed {
		return nil, store.Errorf(store.ENOTFOUND, "no such follow request")
	}
	return s.backend.FindUserByID(ctx, requester)
}

// FindFollowRequested reports, for each target, whether viewer has asked
// to follow it and is waiting for its answer.
func (s *Service) FindFollowRequested(ctx context.Context, viewer store.ID, targets []store.ID) ([]bool, error) {
	return s.backend.FindFollowRequests(ctx, viewer, targets)
}

// FollowRequestPage is a page of the requests to follow an account, oldest
// first. HasMore says whether more lie beyond the page in the direction it
// was read.
type FollowRequestPage struct {
	Requests []store.FollowRequest
	HasMore  bool
}

// FollowRequests returns a page of the requests to follow viewer's
// account, oldest first, within r.
func (s *Service) FollowRequests(ctx context.Context, viewer store.ID, r store.Range) (FollowRequestPage, error) {
	reqs, more, err := readPage(r, func(r store.Range) ([]store.FollowRequest, error) {
		return s.backend.ListFollowRequests(ctx, viewer, r)
	})
	return FollowRequestPage{Requests: reqs, HasMore: more}, err
}

// CountFollowRequests counts the requests to follow viewer's account.
func (s *Service) CountFollowRequests(ctx context.Context, viewer store.ID) (int, error) {
	return s.backend.CountFollowRequests(ctx, viewer)
}

// mayRepost refuses viewer's repost of m: NOT_FOUND if m is hidden from
// viewer, FORBIDDEN if its author is another private account, even for a
// follower (as Mastodon's locked posts cannot be boosted): the repost would
// reach users the author has not approved.
func (s *Service) mayRepost(ctx context.Context, viewer store.ID, m *store.Message) error {
	if m.AuthorID == viewer {
		return nil
	}
	author, err := s.shownAuthor(ctx, viewer, m.AuthorID)
	if err != nil {
		return err
	}
	if author.Private {
		return store.Errorf(store.EFORBIDDEN, "a private account's messages cannot be reposted")
	}
	return nil
}
