package service

import (
	"context"
	"fmt"
	"sync"
	"time"

	"herald/store"
	"herald/store/storage"
)

// deletionPage is how many items a step of the deletion sweeper reads at
// once: messages, likes, edges, deleted users.
const deletionPage = 100

// deletionRecheck is how long the sweeper trusts that a deleted account it
// erased stays erased: a request that read the user before its deletion
// (a follow, a like) can still write after the sweep. Each deleted
// account is erased again this often, and once more before its purge.
const deletionRecheck = time.Hour

// deleter is the deletion sweeper: it erases what deleted accounts left
// (see eraseAccount) and purges each once Options.DeletionGrace has passed
// since its deletion. Its state is the store's: the deleted users that
// ListDeletedUsers returns, so a process killed at any point resumes at its
// next start, and every step is idempotent. Only the holder of the fan-out
// lease sweeps, as only it runs stored jobs; it looks for deleted accounts
// every Options.DeletionPoll, and at once when this process deleted one.
type deleter struct {
	s     *Service
	wakes chan struct{}

	mu      sync.Mutex
	pending bool // a sweep was asked for and has not begun
	running bool
	// erased is when this process last erased each deleted account.
	erased map[store.ID]time.Time

	stop context.CancelFunc
	done chan struct{}
}

func newDeleter(s *Service) *deleter {
	return &deleter{s: s, wakes: make(chan struct{}, 1), erased: make(map[store.ID]time.Time), stop: func() {}}
}

// start runs the sweeper, which sweeps at once: a restart resumes the
// deletions a crash interrupted.
func (d *deleter) start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stop, d.done = cancel, make(chan struct{})
	d.wake()
	go d.run(ctx)
}

// close stops the sweeper between two steps and waits for it.
func (d *deleter) close() {
	d.stop()
	if d.done != nil {
		<-d.done
	}
}

// wake asks for a sweep now.
func (d *deleter) wake() {
	d.mu.Lock()
	d.pending = true
	d.mu.Unlock()
	select {
	case d.wakes <- struct{}{}:
	default:
	}
}

func (d *deleter) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.pending && !d.running
}

func (d *deleter) run(ctx context.Context) {
	defer close(d.done)
	tick := time.NewTicker(d.s.opts.DeletionPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wakes:
		case <-tick.C:
		}
		d.mu.Lock()
		d.pending, d.running = false, true
		d.mu.Unlock()
		err := d.sweep(ctx)
		d.mu.Lock()
		d.running = false
		d.mu.Unlock()
		if err != nil && ctx.Err() == nil {
			// Tried again at the next poll; nothing is lost meanwhile.
			d.s.log.Error("account deletion sweep failed; retrying", "err", err, "retry_in", d.s.opts.DeletionPoll)
		}
	}
}

// sweep erases each deleted account not erased lately, and purges those
// past their grace period.
func (d *deleter) sweep(ctx context.Context) error {
	s := d.s
	if !s.fanout.isLeader() {
		return nil // the lease holder sweeps
	}
	// The same sweeper finishes conversation sends left pending.
	if err := s.recoverConversationSends(ctx); err != nil {
		return fmt.Errorf("recovering conversation sends: %w", err)
	}
	after := store.NilID
	for {
		if !s.fanout.isLeader() {
			return nil // the lease holder sweeps
		}
		users, err := s.backend.ListDeletedUsers(ctx, after, deletionPage)
		if err != nil {
			return err
		}
		for _, u := range users {
			if err := ctx.Err(); err != nil {
				return err
			}
			s.gone.add(u.ID)
			now := s.clock()
			due := !u.DeletedAt.Add(s.opts.DeletionGrace).After(now)
			d.mu.Lock()
			last, ok := d.erased[u.ID]
			d.mu.Unlock()
			if !ok || due || now.Sub(last) >= deletionRecheck {
				start := time.Now()
				if err := s.eraseAccount(ctx, u.ID); err != nil {
					return fmt.Errorf("erasing the deleted account %s: %w", u.ID, err)
				}
				s.log.InfoContext(ctx, "deleted account erased", "user", u.ID.String(), "took", time.Since(start))
				d.mu.Lock()
				d.erased[u.ID] = now
				d.mu.Unlock()
			}
			if due {
				if err := s.backend.PurgeUser(ctx, u.ID); err != nil {
					return fmt.Errorf("purging the deleted account %s: %w", u.ID, err)
				}
				d.mu.Lock()
				delete(d.erased, u.ID)
				d.mu.Unlock()
				s.gone.remove(u.ID)
				s.log.InfoContext(ctx, "deleted account purged: its handle is free", "user", u.ID.String())
			}
		}
		if len(users) < deletionPage {
			return nil
		}
		after = users[len(users)-1].ID
	}
}

// eraseAccount removes what a deleted user left, through the use cases'
// own paths so that every count stays exact, in an order where each step
// finds what the earlier ones left: its messages and reposts (each
// deletion durably retracts it from every inbox and deletes its reposts
// by others), its likes (each message's like count), the users it follows
// and its followers (both counts of each edge; a follower's inbox loses
// nothing more, the messages being gone), its blocks and mutes, and its
// cached inbox. Each step reads what is left and removes it, so running it
// again, after a crash at any point, does what was not done and nothing
// twice. What stays: the likes of messages deleted before (as for any
// user), the user's stored inbox and notifications (no one reads them
// once the user is gone), and others' blocks and notifications naming it.
func (s *Service) eraseAccount(ctx context.Context, user store.ID) error {
	// Messages: each deletion takes it out of the outbox, so the first page
	// is read until none is left.
	var prev store.ID
	for {
		ms, err := s.backend.FindMessages(ctx, storage.MessageFilter{AuthorID: user, Range: store.Forward(store.NilID, deletionPage)})
		if err != nil {
			return err
		}
		if len(ms) == 0 {
			break
		}
		if ms[0].ID == prev {
			return fmt.Errorf("message %s is still there after its deletion", prev)
		}
		prev = ms[0].ID
		for _, m := range ms {
			// Others' reposts first: deleteMessage deletes them after the
			// message, once, and a crash in between would leave them to
			// timeline reads; here a crash leaves the message, found again.
			if m.Kind != store.KindRepost && m.RepostCount > 0 {
				if err := eachRepost(ctx, s, m.ID); err != nil {
					return err
				}
			}
			if err := s.deleteMessage(ctx, m); err != nil && store.ErrorCode(err) != store.ENOTFOUND {
				return err
			}
		}
	}
	// Likes: the likes of deleted messages stay stored (Unlike finds no
	// message), so the list is paged past them.
	r := store.Forward(store.NilID, deletionPage)
	for {
		likes, err := s.backend.ListLikes(ctx, user, r)
		if err != nil {
			return err
		}
		for _, l := range likes {
			if _, err := s.backend.Unlike(ctx, user, l.Key()); err != nil && store.ErrorCode(err) != store.ENOTFOUND {
				return err
			}
		}
		if len(likes) < r.Limit {
			break
		}
		r.From = likes[len(likes)-1].ID
	}
	// Follows both ways. The user's own inbox needs no unfollow job.
	if err := eachPage(ctx, func(r store.Range) ([]store.ID, error) { return s.backend.ListFollowing(ctx, user, r) }, func(id store.ID) error {
		_, err := s.backend.Unfollow(ctx, user, id)
		return err
	}); err != nil {
		return err
	}
	if err := eachPage(ctx, func(r store.Range) ([]store.ID, error) { return s.backend.ListFollowers(ctx, user, r) }, func(id store.ID) error {
		return s.changeFollow(ctx, id, user, storage.JobUnfollow)
	}); err != nil {
		return err
	}
	// Requests to follow the user: each removal shortens the list, so the
	// first page is read until none is left. (The user's own requests to
	// others are not listed by user; they name a user who is gone, and
	// answering one is NOT_FOUND.)
	for {
		reqs, err := s.backend.ListFollowRequests(ctx, user, store.Forward(store.NilID, deletionPage))
		if err != nil {
			return err
		}
		if len(reqs) == 0 {
			break
		}
		for _, q := range reqs {
			if _, err := s.backend.RemoveFollowRequest(ctx, q.UserID, user); err != nil {
				return err
			}
		}
	}
	for _, kind := range []store.RelationKind{store.RelationBlock, store.RelationMute} {
		r := store.Forward(store.NilID, deletionPage)
		for {
			rels, err := s.backend.ListBlocked(ctx, user, kind, r)
			if err != nil {
				return err
			}
			for _, rel := range rels {
				if _, err := s.backend.Unblock(ctx, user, rel.TargetID, kind); err != nil {
					return err
				}
			}
			if len(rels) < r.Limit {
				break
			}
			r.From = rels[len(rels)-1].ID
		}
	}
	return s.backend.DropInboxCache(ctx, user)
}

// eachPage calls do for every ID that list returns, a page at a time in
// ID order; a NOT_FOUND from do (the other user is gone) is skipped.
func eachPage(ctx context.Context, list func(store.Range) ([]store.ID, error), do func(store.ID) error) error {
	r := store.Forward(store.NilID, deletionPage)
	for {
		ids, err := list(r)
		if err != nil {
			return err
		}
		for _, id := range ids {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := do(id); err != nil && store.ErrorCode(err) != store.ENOTFOUND {
				return err
			}
		}
		if len(ids) < r.Limit {
			return nil
		}
		r.From = ids[len(ids)-1]
	}
}

// eachRepost deletes every live repost of message original.
func eachRepost(ctx context.Context, s *Service, original store.ID) error {
	from := store.NilID
	for {
		rs, err := s.backend.ListReposts(ctx, original, store.Forward(from, deletionPage))
		if err != nil {
			return err
		}
		for _, r := range rs {
			if err := s.deleteRepost(ctx, r); err != nil {
				return err
			}
		}
		if len(rs) < deletionPage {
			return nil
		}
		from = rs[len(rs)-1].ID
	}
}
