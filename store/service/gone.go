package service

import (
	"context"
	"sync"

	"herald/store"
)

// goneUsers are the deleted accounts this process knows of whose messages
// the deletion sweeper may not have erased yet. A deleted user is
// NOT_FOUND at once, but its messages leave the inboxes they reached one
// retraction at a time; until then a home timeline leaves them out
// (Service.fill), with no storage call, rather than show a message whose
// author cannot be read. This process learns of a deletion when it makes
// one, when another instance's deletion ends the user's sessions (the
// sessions topic, then a read of the user), and, on the lease holder, from
// every sweep.
type goneUsers struct {
	mu  sync.RWMutex
	ids map[store.ID]struct{}
}

func (g *goneUsers) add(id store.ID) {
	g.mu.Lock()
	if g.ids == nil {
		g.ids = make(map[store.ID]struct{})
	}
	g.ids[id] = struct{}{}
	g.mu.Unlock()
}

func (g *goneUsers) remove(id store.ID) {
	g.mu.Lock()
	delete(g.ids, id)
	g.mu.Unlock()
}

// hides reports whether m (or the message it reposts, original) was
// written by a deleted user.
func (g *goneUsers) hides(m, original *store.Message) bool {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if len(g.ids) == 0 {
		return false
	}
	_, gone := g.ids[m.AuthorID]
	if !gone && original != nil {
		_, gone = g.ids[original.AuthorID]
	}
	return gone
}

// noteIfGone reads user, whose sessions another instance ended, and
// remembers it if the account was deleted. It runs off the events'
// goroutine, bounded by notifyTimeout.
func (s *Service) noteIfGone(user store.ID) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
		defer cancel()
		if _, err := s.backend.FindUserByID(ctx, user); store.ErrorCode(err) == store.ENOTFOUND {
			s.gone.add(user)
		}
	}()
}
