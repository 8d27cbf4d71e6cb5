package mongostore

import (
	"context"
	"time"

	"herald/store/storage"
)

// SetNotifClaimTTL makes a notifications claim expire after d (instead of
// lockTTL), so a test sees a crashed notice taken over without waiting,
// and returns the undo.
func SetNotifClaimTTL(d time.Duration) func() {
	old := notifClaimTTL
	notifClaimTTL = d
	return func() { notifClaimTTL = old }
}

// SetRepostClaimTTL makes a repost's guard whose repost is not stored
// expire after d (instead of lockTTL), and returns the undo.
func SetRepostClaimTTL(d time.Duration) func() {
	old := repostClaimTTL
	repostClaimTTL = d
	return func() { repostClaimTTL = old }
}

// SetRemoveActorBatch makes RemoveNotificationActor read n actor documents
// at a time, and returns the function that restores the default.
func SetRemoveActorBatch(n int) func() {
	old := removeActorBatch
	removeActorBatch = n
	return func() { removeActorBatch = old }
}

// SendPoints implements storetest.SendInterleaver: a send has three
// points where another write may come between its own (sendPoint).
func (s *Store) SendPoints() int { return 3 }

// InterleaveSend implements storetest.SendInterleaver: the next send
// runs fn at its point-th point, on its own goroutine.
func (s *Store) InterleaveSend(point int, fn func()) {
	h := func(p int) {
		if p == point {
			s.testHookSend.Store(nil)
			fn()
		}
	}
	s.testHookSend.Store(&h)
}

// FinishShare ends j's lane's share of its message job (finishShare), as
// a runner of the lane does after its last chunk.
func (s *Store) FinishShare(ctx context.Context, j *storage.Job) error {
	return s.finishShare(ctx, j)
}
