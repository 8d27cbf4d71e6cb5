package service

import (
	"bytes"
	"context"
	"slices"
	"time"

	"herald/store"
	"herald/store/storage"
)

// followerPage is a page of followers read ahead, while the chunk before
// it is stored: the two overlap on two cores.
type followerPage struct {
	after []byte // the job's cursor the page follows
	ids   []store.ID
	err   error
	done  chan struct{}
}

// readAhead starts reading the followers after cursor.
func (f *fanout) readAhead(ctx context.Context, j *storage.Job, cursor []byte) *followerPage {
	p := &followerPage{after: cursor, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.ids, p.err = f.followersAfter(ctx, j, cursor)
	}()
	return p
}

// runChunk runs one chunk of j and reports whether j is done. next holds
// the page of followers read ahead for the job's next chunk, if any.
func (f *fanout) runChunk(ctx context.Context, j *storage.Job, next **followerPage) (bool, error) {
	switch j.Kind {
	case storage.JobDeliver:
		return f.deliver(ctx, j, next)
	case storage.JobRetract:
		return f.retract(ctx, j)
	case storage.JobFollow, storage.JobRebuild:
		return f.insert(ctx, j)
	case storage.JobUnfollow:
		return f.removeAuthor(ctx, j)
	case storage.JobHideReposts:
		return f.hideReposts(ctx, j)
	default:
		f.s.log.Error("unknown fan-out job kind; dropped", "kind", j.Kind)
		return true, nil
	}
}

// deliver delivers the next chunk of a JobDeliver to its author's followers.
func (f *fanout) deliver(ctx context.Context, j *storage.Job, next **followerPage) (bool, error) {
	s, b := f.s, f.s.backend
	var fs []store.ID
	var err error
	if p := *next; p != nil && bytes.Equal(p.after, j.Cursor) {
		<-p.done
		fs, err = p.ids, p.err
	} else {
		fs, err = f.nextFollowers(ctx, j)
	}
	*next = nil
	if err != nil {
		return false, err
	}
	owners, err := f.homeReaders(ctx, j.AuthorID, j.ReplyToAuthorID, j.RepostOfAuthorID, fs)
	if err != nil {
		return false, err
	}
	d := storage.Delivery{Job: j, Owners: owners, At: s.clock(), CacheCap: s.cacheCap(), Done: len(fs) < f.chunk}
	if j.Layout != storage.LayoutCache {
		// A cache is appended to while it lives, whoever owns it:
		// nothing rebuilds a cache an idle owner missed an entry of.
		d.ActiveSince = s.activeSince()
	}
	if len(fs) > 0 {
		last := fs[len(fs)-1]
		d.Cursor = last[:]
	}
	if !d.Done {
		*next = f.readAhead(ctx, j, d.Cursor)
	}
	changes, err := b.DeliverInbox(ctx, d)
	if err != nil {
		return false, err
	}
	f.delivered.Add(uint64(len(changes)))
	at := d.At
	if j.Layout == storage.LayoutCache {
		at = j.CreatedAt // as the cache and fan-out on read show it
	}
	f.publish(ctx, store.EventAdded, j, changes, at)
	j.Cursor = d.Cursor
	return d.Done, nil
}

// homeReaders returns the users among owners whose home timeline shows a
// message by author replying to a message of replyTo or reposting one of
// repostOf (NilID for a post), by the home timeline's rule
// (storage.HomeRule): for a reply to another user, only that user, the
// author, and those who follow that user; for a repost, all but the
// original's author and those who follow them. One FindFollowers checks
// them all; a post or a reply to oneself needs none. Owners who hide the
// author, or the original's author, are left out first (shownTo). The
// rule reads only the follow graph and the blocks and mutes, so a chunk
// run again after a crash chooses the same.
func (f *fanout) homeReaders(ctx context.Context, author, replyTo, repostOf store.ID, owners []store.ID) ([]store.ID, error) {
	x := homeRuleUser(author, replyTo, repostOf)
	if len(owners) == 0 {
		return owners, nil
	}
	if x == author && !repostOf.IsZero() {
		return nil, nil // a repost of one's own: its readers all follow its author
	}
	owners, err := f.shownTo(ctx, author, repostOf, owners)
	if err != nil || x.IsZero() || len(owners) == 0 {
		return owners, err
	}
	follows, err := f.s.backend.FindFollowers(ctx, x, owners)
	if err != nil {
		return nil, err
	}
	out := make([]store.ID, 0, len(owners))
	for i, o := range owners {
		shows := follows[i] || o == x || o == author
		if !repostOf.IsZero() {
			shows = !follows[i] && o != x
		}
		if shows {
			out = append(out, o)
		}
	}
	return out, nil
}

// retract removes a JobRetract's message from the next chunk of the inboxes
// it reached.
func (f *fanout) retract(ctx context.Context, j *storage.Job) (bool, error) {
	b := f.s.backend
	refs, next, err := b.FindDeliveries(ctx, j.MessageID, j.Cursor, f.chunk)
	if err != nil {
		return false, err
	}
	if f.scheme == ownerLanes {
		// Every lane reads every record, and removes its own owners' refs.
		mine := refs[:0:0]
		for _, r := range refs {
			if f.mine(j, r.Owner) {
				mine = append(mine, r)
			}
		}
		refs = mine
	}
	r := storage.Removal{Job: j, Refs: refs, Cursor: next, Done: next == nil}
	changes, err := b.RemoveInboxEntries(ctx, r)
	if err != nil {
		return false, err
	}
	if j.Layout.Stores() { // a cache's owners hear of it by a notice
		f.publish(ctx, store.EventDeleted, j, changes, time.Time{})
	}
	j.Cursor = next
	return r.Done, nil
}

// insert brings a JobFollow's or a JobRebuild's backfill into its owner's
// inbox, in one step.
func (f *fanout) insert(ctx context.Context, j *storage.Job) (bool, error) {
	s, b := f.s, f.s.backend
	entries, err := f.backfill(ctx, j)
	if err != nil {
		return false, err
	}
	if entries == nil {
		return true, b.FinishJob(ctx, j)
	}
	ins := storage.Insertion{Job: j, Entries: entries, At: s.clock()}
	changes, err := b.InsertInbox(ctx, ins)
	if err != nil {
		return false, err
	}
	authors := make(map[store.ID]store.ID, len(entries))
	for _, e := range entries {
		authors[e.MessageID] = e.AuthorID
	}
	f.publishWith(ctx, store.EventAdded, j, changes, ins.At, func(m store.ID) store.ID { return authors[m] })
	return true, nil
}

// removeAuthor removes a JobUnfollow's author's entries from its owner's
// inbox, in one step: the job of an unfollow, a block's unfollows, and a
// mute, which keeps the follow but hides the author.
func (f *fanout) removeAuthor(ctx context.Context, j *storage.Job) (bool, error) {
	b := f.s.backend
	keep, err := f.edgeExists(ctx, j)
	if err != nil {
		return false, err
	}
	if keep {
		// Followed again since, or never unfollowed (a mute's job): the
		// entries stay unless the owner hides the author now.
		if keep, err = f.showsAuthor(ctx, j.OwnerID, j.AuthorID); err != nil {
			return false, err
		}
	}
	if keep {
		return true, b.FinishJob(ctx, j)
	}
	changes, err := b.RemoveAuthorEntries(ctx, storage.AuthorRemoval{Job: j})
	if err != nil {
		return false, err
	}
	// The entries left this inbox; their messages still exist.
	f.publish(ctx, store.EventRemoved, j, changes, time.Time{})
	return true, nil
}

// hideChunk is the number of inbox entries a JobHideReposts looks at in
// one chunk (fewer if the fan-out's chunk is smaller).
const hideChunk = 200

// hideReposts removes, from a JobHideReposts's owner's stored inbox, the
// next chunk's reposts by others of the hidden user's (AuthorID)
// messages: it reads the chunk of entries after the job's cursor, loads
// their messages, and removes the reposts of the hidden user's messages
// with the job's advance, in one step. If the owner no longer hides the
// user (unblocked or unmuted since) the job ends.
func (f *fanout) hideReposts(ctx context.Context, j *storage.Job) (bool, error) {
	b := f.s.backend
	hides, err := f.hides(ctx, j.OwnerID, j.AuthorID)
	if err != nil {
		return false, err
	}
	if !hides {
		return true, b.FinishJob(ctx, j)
	}
	from := store.NilID
	if len(j.Cursor) == len(from) {
		copy(from[:], j.Cursor)
	}
	n := min(hideChunk, f.chunk)
	items, _, err := b.ReadInbox(ctx, storage.InboxFilter{Owner: j.OwnerID, Layout: j.Layout, Range: store.Forward(from, n)})
	if err != nil {
		return false, err
	}
	keys := make([]store.MessageKey, len(items))
	for i, it := range items {
		keys[i] = it.Key()
	}
	var ms []*store.Message
	if len(keys) > 0 {
		if ms, err = b.FindMessagesByKeys(ctx, keys); err != nil {
			return false, err
		}
	}
	r := storage.OwnerRemoval{Job: j, Done: len(items) < n}
	authors := map[store.ID]store.ID{}
	for _, m := range ms {
		if m != nil && m.Kind == store.KindRepost && m.RepostOfAuthorID == j.AuthorID && m.AuthorID != j.OwnerID {
			r.MessageIDs = append(r.MessageIDs, m.ID)
			authors[m.ID] = m.AuthorID
		}
	}
	if len(items) > 0 {
		last := items[len(items)-1].MessageID
		r.Cursor = last[:]
	}
	changes, err := b.RemoveOwnerEntries(ctx, r)
	if err != nil {
		return false, err
	}
	// The reposts left this inbox; they still exist.
	f.publishWith(ctx, store.EventRemoved, j, changes, time.Time{}, func(m store.ID) store.ID { return authors[m] })
	j.Cursor = r.Cursor
	return r.Done, nil
}

// hides reports whether owner's home timeline hides user: owner blocks or
// mutes user, or user blocks owner. Two FindBlockers calls.
func (f *fanout) hides(ctx context.Context, owner, user store.ID) (bool, error) {
	kinds, err := f.s.backend.FindBlockers(ctx, user, []store.ID{owner})
	if err != nil || kinds[0] != 0 {
		return err == nil, err
	}
	kinds, err = f.s.backend.FindBlockers(ctx, owner, []store.ID{user})
	if err != nil {
		return false, err
	}
	return kinds[0]&store.RelationBlock != 0, nil
}

// showsAuthor reports whether owner, who follows author, neither blocks
// nor mutes author: one FindBlockers call. (An author who blocks owner is
// not followed: a block removes the follows.)
func (f *fanout) showsAuthor(ctx context.Context, owner, author store.ID) (bool, error) {
	kinds, err := f.s.backend.FindBlockers(ctx, author, []store.ID{owner})
	if err != nil {
		return false, err
	}
	return kinds[0] == 0, nil
}

// edgeExists reports whether the owner of a JobFollow or JobUnfollow
// follows its author now: the job does its work only if the edge is as it
// left it.
func (f *fanout) edgeExists(ctx context.Context, j *storage.Job) (bool, error) {
	follows, err := f.s.backend.FindFollowing(ctx, j.OwnerID, []store.ID{j.AuthorID})
	if err != nil {
		return false, err
	}
	return follows[0], nil
}

// nextFollowers returns the chunk of the author's followers after the
// job's cursor, the last follower of the chunk before.
func (f *fanout) nextFollowers(ctx context.Context, j *storage.Job) ([]store.ID, error) {
	return f.followersAfter(ctx, j, j.Cursor)
}

// followersAfter returns the chunk of j's author's followers after cursor
// (a follower's id; empty: from the first). With owner lanes it keeps
// those of j's lane, reading on until it has a chunk's worth or the list
// ends: a chunk shorter than a chunk's worth is the last, and the last
// follower kept is the next cursor (those read past it are read again).
func (f *fanout) followersAfter(ctx context.Context, j *storage.Job, cursor []byte) ([]store.ID, error) {
	if f.scheme == authorLanes {
		return f.followersPage(ctx, j.AuthorID, cursor)
	}
	after := store.NilID
	if len(cursor) == len(after) {
		copy(after[:], cursor)
	}
	var out []store.ID
	for {
		page, err := f.s.backend.ListFollowers(ctx, j.AuthorID, store.Forward(after, f.chunk))
		if err != nil {
			return nil, err
		}
		for _, o := range page {
			if f.mine(j, o) {
				out = append(out, o)
				if len(out) == f.chunk {
					return out, nil
				}
			}
		}
		if len(page) < f.chunk {
			return out, nil
		}
		after = page[len(page)-1]
	}
}

// followersPage returns the chunk of author's followers after cursor (a
// follower's id; empty: from the first).
func (f *fanout) followersPage(ctx context.Context, author store.ID, cursor []byte) ([]store.ID, error) {
	after := store.NilID
	if len(cursor) == len(after) {
		copy(after[:], cursor)
	}
	return f.s.backend.ListFollowers(ctx, author, store.Forward(after, f.chunk))
}

// backfill returns the entries a JobFollow or JobRebuild brings into its
// owner's inbox: the newest messages of the followee (JobFollow, if still
// followed) or of every followee (JobRebuild), except those whose
// JobDeliver is still stored: that job delivers them, and ordered after
// this one on the lane (a follow's is on its followee's lane; a rebuild
// runs alone, after the jobs left half done), or already past this owner,
// it cannot be duplicated by this one. It returns nil when there is
// nothing to bring.
func (f *fanout) backfill(ctx context.Context, j *storage.Job) ([]store.InboxEntry, error) {
	s, b := f.s, f.s.backend
	var authors []store.ID
	limit := s.opts.InboxCap
	if j.Kind == storage.JobFollow {
		follows, err := f.edgeExists(ctx, j)
		if err != nil {
			return nil, err
		}
		if !follows {
			return nil, nil // unfollowed since
		}
		authors, limit = []store.ID{j.AuthorID}, s.opts.FollowBackfill
	} else {
		var err error
		if authors, err = s.following(ctx, j.OwnerID); err != nil {
			return nil, err
		}
	}
	if len(authors) == 0 || limit <= 0 {
		return nil, nil
	}
	hidden, err := s.hiddenFrom(ctx, j.OwnerID)
	if err != nil {
		return nil, err
	}
	// PendingFor: with owner lanes a delivery's share for another lane
	// does not bring the message here.
	filter := storage.OutboxFilter{Authors: without(authors, hidden), Range: store.Forward(store.NilID, limit), Pulled: s.strategy.pullFilter(), PendingFor: j.OwnerID}
	if len(filter.Authors) == 0 {
		return nil, nil // a followee the owner mutes: nothing comes
	}
	if j.Kind == storage.JobRebuild {
		filter.Home = storage.NewHomeRule(j.OwnerID, authors).Hide(hidden)
	}
	es, err := b.FindOutbox(ctx, filter)
	if err != nil {
		return nil, err
	}
	if j.Kind == storage.JobFollow {
		if es, err = f.shownAtHome(ctx, j.OwnerID, es, hidden); err != nil {
			return nil, err
		}
	}
	entries := make([]store.InboxEntry, 0, len(es))
	for _, e := range es {
		if !e.Pending {
			entries = append(entries, e.InboxEntry)
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	return entries, nil
}

// homeRuleUser returns the user whose followers the home timeline's rule
// asks about for a message by author replying to a message of replyTo or
// reposting one of repostOf: the user a reply to another answers, or the
// author of the message reposted; NilID for a post or a reply to oneself,
// which every follower sees.
func homeRuleUser(author, replyTo, repostOf store.ID) store.ID {
	switch {
	case !repostOf.IsZero():
		return repostOf
	case replyTo == author:
		return store.NilID
	}
	return replyTo
}

// shownAtHome returns es without what the home timeline's rule leaves out
// for owner: the replies to other users owner does not follow, and the
// reposts of owner's messages or of users owner follows, and reposts of
// the messages of users hidden from owner. These are the entries a
// follow's backfill brings; one FindFollowing checks them all.
func (f *fanout) shownAtHome(ctx context.Context, owner store.ID, es []storage.OutboxEntry, hidden []store.ID) ([]storage.OutboxEntry, error) {
	var targets []store.ID
	for _, e := range es {
		if x := homeRuleUser(e.AuthorID, e.ReplyToAuthorID, e.RepostOfAuthorID); !x.IsZero() && x != owner && !slices.Contains(targets, x) {
			targets = append(targets, x)
		}
	}
	if len(targets) == 0 && len(hidden) == 0 {
		return es, nil
	}
	var shown []store.ID
	if len(targets) > 0 {
		follows, err := f.s.backend.FindFollowing(ctx, owner, targets)
		if err != nil {
			return nil, err
		}
		for i, x := range targets {
			if follows[i] {
				shown = append(shown, x)
			}
		}
	}
	rule := storage.NewHomeRule(owner, shown).Hide(hidden)
	return slices.DeleteFunc(es, func(e storage.OutboxEntry) bool {
		return !rule.Keeps(e.AuthorID, e.ReplyToAuthorID, e.RepostOfAuthorID, e.HomeHidden)
	}), nil
}

// publish tells the owners of changes of the change, each on j's message
// (or, for jobs of several messages, the change's); at is when added items
// were delivered.
func (f *fanout) publish(ctx context.Context, t store.EventType, j *storage.Job, changes []storage.InboxChange, at time.Time) {
	f.publishWith(ctx, t, j, changes, at, func(store.ID) store.ID { return j.AuthorID })
}

// publishWith is publish with the author of each change's message given by author.
func (f *fanout) publishWith(ctx context.Context, t store.EventType, j *storage.Job, changes []storage.InboxChange, at time.Time, author func(message store.ID) store.ID) {
	if len(changes) == 0 {
		return
	}
	evs := make([]store.Event, len(changes))
	for i, c := range changes {
		m := c.MessageID
		if m.IsZero() {
			m = j.MessageID
		}
		evs[i] = store.Event{Type: t, UserID: c.Owner, MessageID: m, AuthorID: author(m), Counts: c.Counts, NoCounts: c.NoCounts, DeliveredAt: at}
	}
	f.s.events.Publish(ctx, evs...)
}
