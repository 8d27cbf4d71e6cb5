package service

import (
	"context"
	"sync"
	"time"

	"herald/store"
	"herald/store/pubsub"

	lru "github.com/hashicorp/golang-lru/v2"
)

// SessionRecheck is how long a process trusts what it read of a user's
// sessions (token version, revoked tokens, existence) before reading it
// again. Revocations made by this process apply at once, and those of
// other processes sharing the store as soon as their event arrives; this
// bounds how late one can be if the event stream was interrupted.
const SessionRecheck = time.Minute

// sessionCacheSize bounds the users whose session state a process keeps
// (about 150 bytes each without revoked tokens).
const sessionCacheSize = 100_000

// sessionState is what a process knows of one user's sessions.
type sessionState struct {
	exists  bool
	version int
	revoked []store.RevokedToken
	kept    string
	read    time.Time
}

// sessions caches users' session state for Authenticate, and tells
// listeners (the websocket transport) when a user's tokens were ended.
type sessions struct {
	cache *lru.Cache[store.ID, *sessionState]

	mu        sync.Mutex
	listeners []func(user store.ID)
}

func newSessions() *sessions {
	c, err := lru.New[store.ID, *sessionState](sessionCacheSize)
	if err != nil {
		panic(err)
	}
	return &sessions{cache: c}
}

func stateOf(u *store.User, at time.Time) *sessionState {
	return &sessionState{exists: true, version: u.TokenVersion, revoked: u.RevokedTokens, kept: u.KeptToken, read: at}
}

// Authenticate checks that sess may still be used: it has not expired, its
// user exists, and it was not ended by LogOut, LogOutEverywhere or
// another session's ChangePassword. Any
// failure is UNAUTHENTICATED. It reads the user at most once per
// SessionRecheck per process.
func (s *Service) Authenticate(ctx context.Context, sess store.Session) error {
	now := s.now()
	if !sess.ExpiresAt.After(now) {
		return store.Errorf(store.EUNAUTHENTICATED, "the token expired: log in again")
	}
	st, ok := s.sessions.cache.Get(sess.UserID)
	if !ok || now.Sub(st.read) >= SessionRecheck {
		u, err := s.backend.FindUserByID(ctx, sess.UserID)
		switch {
		case store.ErrorCode(err) == store.ENOTFOUND:
			st = &sessionState{read: now}
		case err != nil:
			return err
		default:
			st = stateOf(u, now)
		}
		s.sessions.cache.Add(sess.UserID, st)
	}
	switch {
	case !st.exists:
		return store.Errorf(store.EUNAUTHENTICATED, "the account of this token no longer exists")
	case sess.Version != st.version && (st.kept == "" || sess.TokenID != st.kept):
		return store.Errorf(store.EUNAUTHENTICATED, "this token was logged out: log in again")
	}
	for _, t := range st.revoked {
		if t.ID == sess.TokenID {
			return store.Errorf(store.EUNAUTHENTICATED, "this token was logged out: log in again")
		}
	}
	return nil
}

// LogOut ends sess's token: from now on Authenticate refuses it, on every
// process sharing the store.
func (s *Service) LogOut(ctx context.Context, sess store.Session) error {
	return s.revoke(ctx, sess.UserID, store.TokenRevocation{TokenID: sess.TokenID, Expires: sess.ExpiresAt, Now: s.clock()})
}

// LogOutEverywhere ends every token of user issued until now.
func (s *Service) LogOutEverywhere(ctx context.Context, user store.ID) error {
	return s.revoke(ctx, user, store.TokenRevocation{All: true, Now: s.clock()})
}

func (s *Service) revoke(ctx context.Context, user store.ID, r store.TokenRevocation) error {
	u, err := s.backend.RevokeTokens(ctx, user, r)
	if err != nil {
		return err
	}
	s.sessions.cache.Add(user, stateOf(u, s.now()))
	s.events.Publish(ctx, store.Event{Type: store.EventSessionsRevoked, UserID: store.SessionsTopic, Subject: user})
	s.sessionsChanged(user)
	return nil
}

// OnSessionsRevoked registers fn to be called with a user whose tokens were
// ended, by this process or (through Events) another. fn runs on the
// caller's or the event's goroutine and must not block; it may call
// Authenticate, which then reads the user's new state.
func (s *Service) OnSessionsRevoked(fn func(user store.ID)) {
	s.sessions.mu.Lock()
	s.sessions.listeners = append(s.sessions.listeners, fn)
	s.sessions.mu.Unlock()
}

func (s *Service) sessionsChanged(user store.ID) {
	s.sessions.mu.Lock()
	ls := s.sessions.listeners
	s.sessions.mu.Unlock()
	for _, fn := range ls {
		fn(user)
	}
}

// watchSessions listens for other processes' revocations until ctx ends.
// An in-process Hub carries only this process's own, which revoke has
// already applied, so there is nothing to listen to.
func (s *Service) watchSessions(ctx context.Context) error {
	if _, local := s.events.(*pubsub.Hub); local {
		return nil
	}
	deliver := func(ev store.Event) bool {
		if ev.Type == store.EventSessionsRevoked {
			s.sessions.cache.Remove(ev.Subject)
			s.sessionsChanged(ev.Subject)
			s.noteIfGone(ev.Subject)
		}
		return true
	}
	var end func()
	end = func() {
		if ctx.Err() != nil {
			return
		}
		// Dropped for falling behind: what was missed is unknown, so
		// forget every user's state and listen again.
		s.sessions.cache.Purge()
		if err := s.events.SubscribeFunc(ctx, store.SessionsTopic, deliver, end); err != nil {
			s.log.ErrorContext(ctx, "listening for revoked sessions again", "err", err)
		}
	}
	return s.events.SubscribeFunc(ctx, store.SessionsTopic, deliver, end)
}
