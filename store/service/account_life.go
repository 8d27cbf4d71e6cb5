package service

import (
	"context"

	"golang.org/x/crypto/bcrypt"

	"herald/store"
)

// checkPassword returns UNAUTHENTICATED unless password is user's.
func (s *Service) checkPassword(ctx context.Context, user store.ID, password string) (*store.User, error) {
	u, err := s.backend.FindUserByID(ctx, user)
	return s.matchPassword(ctx, u, err, password, store.Errorf(store.EUNAUTHENTICATED, "wrong password"))
}

// matchPassword returns u, the user a lookup found (or err, its failure),
// if password is theirs, and bad if it is not or there is no such user. A
// missing user is checked against a dummy hash: the same time as a real
// check, so that accounts cannot be probed by timing.
func (s *Service) matchPassword(ctx context.Context, u *store.User, err error, password string, bad error) (*store.User, error) {
	if err != nil && store.ErrorCode(err) != store.ENOTFOUND {
		return nil, err
	}
	hash := dummyHash
	if err == nil {
		hash = u.PasswordHash
	}
	var mismatch error
	if werr := s.passwords.do(ctx, func() { mismatch = bcrypt.CompareHashAndPassword(hash, []byte(password)) }); werr != nil {
		return nil, werr
	}
	if err != nil || mismatch != nil {
		return nil, bad
	}
	return u, nil
}

// ChangePassword replaces the password of sess's user, after checking the
// old one (UNAUTHENTICATED if wrong), by newPassword (BAD_USER_INPUT if
// the rules refuse it). In the same atomic write every other token of the
// user ends, on every process sharing the store: sess's token stays valid.
func (s *Service) ChangePassword(ctx context.Context, sess store.Session, oldPassword, newPassword string) error {
	if _, err := s.checkPassword(ctx, sess.UserID, oldPassword); err != nil {
		return err
	}
	if err := store.ValidatePassword(newPassword); err != nil {
		return err
	}
	var hash []byte
	var err error
	if werr := s.passwords.do(ctx, func() { hash, err = store.HashPassword(newPassword, s.opts.PasswordCost) }); werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	return s.revoke(ctx, sess.UserID, store.TokenRevocation{All: true, Keep: sess.TokenID, Now: s.clock(), PasswordHash: hash})
}

// DeleteAccount deletes user's account after checking its password
// (UNAUTHENTICATED if wrong). One atomic write marks the user deleted and
// ends every token: from then on the user is NOT_FOUND everywhere and its
// handle stays taken for Options.DeletionGrace. The rest (messages
// retracted from every inbox, likes, reposts, follows, blocks) is removed
// by the deletion sweeper (see deleter), which resumes after a crash.
func (s *Service) DeleteAccount(ctx context.Context, user store.ID, password string) error {
	if _, err := s.checkPassword(ctx, user, password); err != nil {
		return err
	}
	if err := s.backend.DeleteUser(ctx, user, s.clock()); err != nil {
		return err
	}
	s.gone.add(user)
	s.sessions.cache.Add(user, &sessionState{read: s.now()})
	s.events.Publish(ctx, store.Event{Type: store.EventSessionsRevoked, UserID: store.SessionsTopic, Subject: user})
	s.sessionsChanged(user)
	s.deleter.wake()
	return nil
}
