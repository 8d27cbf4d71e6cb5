package service

import (
	"context"
	"slices"

	"herald/store"
	"herald/store/storage"
)

// Blocks and mutes (docs/design.md#blocks-and-mutes-at-home). A reader's
// home timeline hides the users the reader blocks or mutes and the users
// who block the reader: their messages, and others' reposts of their
// messages. Fan-out on write does not deliver them (homeReaders), fan-out
// on read leaves them out of the outbox query (timelineRead.hidden), and
// the hidden user's own entries a stored inbox held before the relation
// leave it by a JobUnfollow (removeAuthor), which removes an author's
// entries when the owner no longer follows them or hides them. Others'
// reposts of their messages delivered before leave it by a
// JobHideReposts (hideReposts), stored before the relation and run after
// it, which walks the owner's inbox in chunks and removes them with the
// counts; until it has run a page leaves them out (hideOriginals).

// hiddenLimit bounds each of the two reads of a reader's hidden set: the
// users the reader blocks or mutes, and the users who block the reader.
// Beyond it (a user blocking or muting more than hiddenLimit users, or
// blocked by more) fan-out on read hides only the first hiddenLimit of
// each in ID order; fan-out on write, which asks about each delivery's
// owners, is exact.
const hiddenLimit = 1000

// Block makes viewer block target and returns target: the relation, then
// each unfollows the other (each with its unfollow job, which takes the
// other's entries out of the stored inbox) and a follow request either way
// is removed, under the cache both caches are dropped, and each leaves the
// other's notifications. Blocking twice changes nothing more; a block that a
// crash cut short is completed by blocking again. Blocking yourself is
// BAD_USER_INPUT, an unknown user NOT_FOUND.
func (s *Service) Block(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if err := store.CheckRelation(viewer, target, store.RelationBlock); err != nil {
		return nil, err
	}
	// Each hides the other: the reposts of each's messages leave the
	// other's stored inbox by a job stored before the relation.
	hide, err := s.storeHideJobs(ctx, viewer, target, store.RelationBlock, [2]store.ID{viewer, target}, [2]store.ID{target, viewer})
	if err != nil {
		return nil, err
	}
	changed, err := s.backend.Block(ctx, viewer, target, store.RelationBlock, s.clock())
	s.runHideJobs(ctx, hide, changed, err)
	if err != nil {
		return nil, err
	}
	// Unfollowing after the relation is stored: a follow checked against
	// the relation from now on is refused. Only the follows there are:
	// an unfollow of none would store and end a job for nothing.
	follows, err := s.backend.FindFollowing(ctx, viewer, []store.ID{target})
	if err != nil {
		return nil, err
	}
	followed, err := s.backend.FindFollowers(ctx, viewer, []store.ID{target})
	if err != nil {
		return nil, err
	}
	for i, pair := range [][2]store.ID{{viewer, target}, {target, viewer}} {
		if edge := [2]bool{follows[0], followed[0]}[i]; edge {
			if err := s.changeFollow(ctx, pair[0], pair[1], storage.JobUnfollow); err != nil {
				return nil, err
			}
		}
		// A pending request either way goes too: approving it would
		// make the follow the block forbids.
		if _, err := s.backend.RemoveFollowRequest(ctx, pair[0], pair[1]); err != nil {
			return nil, err
		}
	}
	if s.layout == storage.LayoutCache {
		// Each hides the other now, whether they followed or not.
		if err := s.dropCaches(ctx, viewer, target); err != nil {
			return nil, err
		}
	}
	// Each leaves the other's notifications: the blocker's messages are
	// hidden from the blocked user, their likes and mentions with them.
	for _, pair := range [][2]store.ID{{viewer, target}, {target, viewer}} {
		if err := s.HideNotificationsFrom(ctx, pair[0], pair[1]); err != nil {
			return nil, err
		}
	}
	return s.backend.FindUserByID(ctx, target)
}

// Unblock takes viewer's block of target back and returns target. The
// follows the block removed stay removed; what fan-out on write did not
// deliver while the block stood does not come back.
func (s *Service) Unblock(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if err := store.CheckRelation(viewer, target, store.RelationBlock); err != nil {
		return nil, err
	}
	u, err := s.backend.FindUserByID(ctx, target)
	if err != nil {
		return nil, err
	}
	if _, err := s.backend.Unblock(ctx, viewer, target, store.RelationBlock); err != nil {
		return nil, err
	}
	if s.layout == storage.LayoutCache {
		if err := s.dropCaches(ctx, viewer, target); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// Mute makes viewer mute target and returns target. The follow stays; the
// target's entries leave viewer's stored inbox by a JobUnfollow, and
// others' reposts of target's messages by a JobHideReposts, both stored
// before the relation (a crash between the two leaves jobs that find no
// mute and do nothing), under the cache the cache is dropped, and target
// leaves viewer's notifications.
func (s *Service) Mute(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if err := store.CheckRelation(viewer, target, store.RelationMute); err != nil {
		return nil, err
	}
	hide, err := s.storeHideJobs(ctx, viewer, target, store.RelationMute, [2]store.ID{viewer, target})
	if err != nil {
		return nil, err
	}
	relate := func() (bool, error) {
		changed, err := s.backend.Block(ctx, viewer, target, store.RelationMute, s.clock())
		s.runHideJobs(ctx, hide, changed, err)
		return changed, err
	}
	if err := s.changeRelation(ctx, viewer, target, storage.JobUnfollow, relate); err != nil {
		return nil, err
	}
	// Run on a mute already there too: muting again finishes a removal a
	// crash cut short.
	if err := s.HideNotificationsFrom(ctx, viewer, target); err != nil {
		return nil, err
	}
	return s.backend.FindUserByID(ctx, target)
}

// Unmute takes viewer's mute of target back and returns target. If viewer
// still follows target, target's recent messages come back as a follow
// brings them (a JobFollow, or the cache dropped); reposts of target's
// messages by others do not come back.
func (s *Service) Unmute(ctx context.Context, viewer, target store.ID) (*store.User, error) {
	if err := store.CheckRelation(viewer, target, store.RelationMute); err != nil {
		return nil, err
	}
	u, err := s.backend.FindUserByID(ctx, target)
	if err != nil {
		return nil, err
	}
	relate := func() (bool, error) {
		return s.backend.Unblock(ctx, viewer, target, store.RelationMute)
	}
	kind := storage.JobFollow
	if s.opts.FollowBackfill < 0 {
		kind = 0
	}
	if err := s.changeRelation(ctx, viewer, target, kind, relate); err != nil {
		return nil, err
	}
	return u, nil
}

// changeRelation changes viewer's relation to target (a follow, a mute)
// with relate and brings viewer's timeline in line: under a stored layout
// by a job of kind (none if 0) stored before the change and run after it
// (or ended at once if relate changed nothing), under the cache by
// dropping it. The job reads the follow and the relation when it runs, so
// a crash between the job and the change leaves a job that finds nothing
// to do.
func (s *Service) changeRelation(ctx context.Context, viewer, target store.ID, kind storage.JobKind, relate func() (bool, error)) error {
	if !s.layout.Stores() || kind == 0 {
		if _, err := relate(); err != nil {
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
	changed, err := relate()
	if err != nil || !changed {
		if ferr := s.backend.FinishJob(ctx, job); ferr != nil {
			s.log.WarnContext(ctx, "finishing an idle relation job", "err", ferr)
		}
		return err
	}
	s.fanout.enqueue(job)
	return nil
}

// hideJobs are the JobHideReposts of a block or a mute: one per pair
// (owner, hidden), each removing from the owner's stored inbox the
// others' reposts of hidden's messages delivered before the relation.
type hideJobs struct {
	pairs [][2]store.ID
	jobs  []*storage.Job
	// late: the relation was there when checked, so no job was stored;
	// if storing it changes something after all (an undo raced in
	// between), the jobs are stored then.
	late bool
}

// storeHideJobs stores, under a layout that stores inboxes, the hide jobs
// of viewer's relation of kind to target, unless the relation is there
// already (one FindBlocked: a relation stored had its jobs stored before
// it, and they run until done, after a restart too). Stored before the
// relation, so that a crash after it still leaves the jobs; a job checks
// when it runs that its owner hides the user, and does nothing otherwise.
func (s *Service) storeHideJobs(ctx context.Context, viewer, target store.ID, kind store.RelationKind, pairs ...[2]store.ID) (*hideJobs, error) {
	h := &hideJobs{pairs: pairs}
	if !s.layout.Stores() {
		return h, nil // the cache is dropped; fan-out on read stores nothing
	}
	there, err := s.backend.FindBlocked(ctx, viewer, kind, []store.ID{target})
	if err != nil {
		return nil, err
	}
	if there[0] {
		h.late = true
		return h, nil
	}
	return h, s.storeHideJobsNow(ctx, h)
}

func (s *Service) storeHideJobsNow(ctx context.Context, h *hideJobs) error {
	for _, p := range h.pairs {
		now := s.clock()
		j := &storage.Job{ID: store.NewID(now), Kind: storage.JobHideReposts, Layout: s.layout, AuthorID: p[1], OwnerID: p[0], CreatedAt: now}
		if err := s.backend.StoreJob(ctx, j); err != nil {
			return err
		}
		h.jobs = append(h.jobs, j)
	}
	return nil
}

// runHideJobs runs h's jobs once the relation is stored (changed), or
// ends them if storing it failed or changed nothing (two requests raced:
// the other's jobs run).
func (s *Service) runHideJobs(ctx context.Context, h *hideJobs, changed bool, err error) {
	if h.late && err == nil && changed {
		// After the relation: a crash right here leaves these reposts
		// counted (never shown) until they age out.
		if serr := s.storeHideJobsNow(ctx, h); serr != nil {
			s.log.WarnContext(ctx, "storing hide jobs", "err", serr)
		}
	}
	for _, j := range h.jobs {
		if err != nil || !changed {
			if ferr := s.backend.FinishJob(ctx, j); ferr != nil {
				s.log.WarnContext(ctx, "finishing an idle hide job", "err", ferr)
			}
			continue
		}
		s.fanout.enqueue(j)
	}
}

func (s *Service) dropCaches(ctx context.Context, users ...store.ID) error {
	for _, u := range users {
		if err := s.backend.DropInboxCache(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// refuseBlockedFollow refuses (FORBIDDEN) a follow between two users when
// either blocks the other: two FindBlockers calls.
func (s *Service) refuseBlockedFollow(ctx context.Context, viewer, target store.ID) error {
	return s.refuseBlocked(ctx, viewer, target, false, false)
}

// refuseBlocked refuses (FORBIDDEN) viewer acting toward target when
// either blocks the other: a FindBlockers call for each side that may be
// blocked, none for a side known never blocked (store.User.NeverBlocked).
func (s *Service) refuseBlocked(ctx context.Context, viewer, target store.ID, viewerNeverBlocked, targetNeverBlocked bool) error {
	if !targetNeverBlocked {
		kinds, err := s.backend.FindBlockers(ctx, target, []store.ID{viewer})
		if err != nil {
			return err
		}
		if kinds[0]&store.RelationBlock != 0 {
			return store.Errorf(store.EFORBIDDEN, "you block this user")
		}
	}
	if !viewerNeverBlocked {
		kinds, err := s.backend.FindBlockers(ctx, viewer, []store.ID{target})
		if err != nil {
			return err
		}
		if kinds[0]&store.RelationBlock != 0 {
			return store.Errorf(store.EFORBIDDEN, "this user blocks you")
		}
	}
	return nil
}

// RelationPage is a page of a user's blocks or mutes, newest first.
type RelationPage struct {
	Relations []store.Relation
	HasMore   bool
}

// Blocked returns a page of the users viewer blocks, newest first, within
// r (its From a relation's ID).
func (s *Service) Blocked(ctx context.Context, viewer store.ID, r store.Range) (RelationPage, error) {
	return s.relations(ctx, viewer, store.RelationBlock, r)
}

// Muted returns a page of the users viewer mutes, newest first, within r.
func (s *Service) Muted(ctx context.Context, viewer store.ID, r store.Range) (RelationPage, error) {
	return s.relations(ctx, viewer, store.RelationMute, r)
}

func (s *Service) relations(ctx context.Context, viewer store.ID, kind store.RelationKind, r store.Range) (RelationPage, error) {
	rs, more, err := readPage(r, func(r store.Range) ([]store.Relation, error) { return s.backend.ListBlocked(ctx, viewer, kind, r) })
	return RelationPage{Relations: rs, HasMore: more}, err
}

// CountRelations counts the users viewer blocks (or mutes): no count is
// kept, so it reads the list, relationCountPage at a time.
func (s *Service) CountRelations(ctx context.Context, viewer store.ID, kind store.RelationKind) (int, error) {
	n, from := 0, store.NilID
	for {
		rs, err := s.backend.ListBlocked(ctx, viewer, kind, store.Forward(from, relationCountPage))
		if err != nil {
			return 0, err
		}
		n += len(rs)
		if len(rs) < relationCountPage {
			return n, nil
		}
		from = rs[len(rs)-1].ID
	}
}

const relationCountPage = 1000

// FindBlocked reports, for each target, whether viewer blocks it.
func (s *Service) FindBlocked(ctx context.Context, viewer store.ID, targets []store.ID) ([]bool, error) {
	return s.backend.FindBlocked(ctx, viewer, store.RelationBlock, targets)
}

// FindMuted reports, for each target, whether viewer mutes it.
func (s *Service) FindMuted(ctx context.Context, viewer store.ID, targets []store.ID) ([]bool, error) {
	return s.backend.FindBlocked(ctx, viewer, store.RelationMute, targets)
}

// hiddenFrom returns the users reader's home timeline hides: those reader
// blocks or mutes, and those who block reader, in ID order, each once (at
// most hiddenLimit of each). The two reads are made at once.
func (s *Service) hiddenFrom(ctx context.Context, reader store.ID) ([]store.ID, error) {
	blockers := beside(func() ([]store.ID, error) { return s.backend.ListBlockers(ctx, reader, hiddenLimit) })
	filtered, err := s.backend.ListFiltered(ctx, reader, hiddenLimit)
	by, byErr := blockers()
	if err == nil {
		err = byErr
	}
	if err != nil {
		return nil, err
	}
	if len(by) == 0 {
		return filtered, nil
	}
	all := append(slices.Clip(filtered), by...)
	slices.SortFunc(all, store.ID.Compare)
	return slices.Compact(all), nil
}

// without returns ids without those in hidden (both in any order), ids
// itself when nothing is removed.
func without(ids, hidden []store.ID) []store.ID {
	if len(hidden) == 0 {
		return ids
	}
	set := make(map[store.ID]bool, len(hidden))
	for _, id := range hidden {
		set[id] = true
	}
	if !slices.ContainsFunc(ids, func(id store.ID) bool { return set[id] }) {
		return ids
	}
	return slices.DeleteFunc(slices.Clone(ids), func(id store.ID) bool { return set[id] })
}

// shownTo returns the owners among owners whose home timeline shows a
// message by author reposting one of repostOf's (NilID for a message that
// is no repost): those who neither block nor mute author (nor, for a
// repost, repostOf), and, for a repost, whom repostOf does not block. One
// FindBlockers call for a message, three for a repost; a chunk run again
// after a crash reads the same stored relations and chooses the same.
func (f *fanout) shownTo(ctx context.Context, author, repostOf store.ID, owners []store.ID) ([]store.ID, error) {
	if len(owners) == 0 {
		return owners, nil
	}
	b := f.s.backend
	drop := make([]bool, len(owners))
	kinds, err := b.FindBlockers(ctx, author, owners)
	if err != nil {
		return nil, err
	}
	for i, k := range kinds {
		drop[i] = k != 0
	}
	if !repostOf.IsZero() && repostOf != author {
		if kinds, err = b.FindBlockers(ctx, repostOf, owners); err != nil {
			return nil, err
		}
		blocked, err := b.FindBlocked(ctx, repostOf, store.RelationBlock, owners)
		if err != nil {
			return nil, err
		}
		for i := range owners {
			drop[i] = drop[i] || kinds[i] != 0 || blocked[i]
		}
	}
	if !slices.Contains(drop, true) {
		return owners, nil
	}
	out := make([]store.ID, 0, len(owners))
	for i, o := range owners {
		if !drop[i] {
			out = append(out, o)
		}
	}
	return out, nil
}
