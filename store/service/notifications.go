package service

import (
	"context"
	"slices"
	"time"

	"herald/store"
	"herald/store/storage"
)

// notifyTimeout bounds the notices a request writes after its activity.
// They run without the request's cancellation: the activity is stored,
// and a client that hung up must not cost its target the notification.
const notifyTimeout = 5 * time.Second

// notify writes the notice of one activity by actor to owner (no notice to
// yourself, nor between users one of whom filters the other: see
// notifiable) and tells owner's subscriptions if it changed the feed. The
// activity (the like, the follow, the message) is stored before: the
// notice is derived from it. A failure is logged, not returned, so it
// never fails the activity; a crash between the two loses the notice,
// never the activity.
func (s *Service) notify(ctx context.Context, kind store.NotificationKind, owner, actor store.ID, m *store.Message) {
	if owner == actor || owner.IsZero() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
	defer cancel()
	if s.notifiable(ctx, actor, []store.ID{owner})[0] {
		s.writeNotice(ctx, kind, owner, actor, m)
	}
}

// writeNotice writes one notice and publishes what it changed. The
// notice's ID is made once, so the backend's retries of it are harmless; a
// repeated activity (like, unlike, like again) finds its actor in the
// group and changes nothing.
func (s *Service) writeNotice(ctx context.Context, kind store.NotificationKind, owner, actor store.ID, m *store.Message) {
	now := s.clock()
	n := storage.Notice{Owner: owner, Kind: kind, Actor: actor, ID: store.NewID(now)}
	if m != nil {
		n.Message = m.Key()
	}
	n.Key = store.NotificationGroupKey(kind, n.Message.ID, now)
	res, err := s.backend.Notify(ctx, n)
	if err != nil {
		s.log.WarnContext(ctx, "notifying", "kind", kind, "owner", owner.String(), "err", err)
		return
	}
	if res.Changed {
		s.events.Publish(ctx, store.Event{Type: store.EventNotified, UserID: owner, Group: res.Group.ID, Counts: inboxCounts(res.Counts)})
	}
}

// notifiable reports, aligned with owners, whether actor's activity may
// notify each owner: not if the owner blocks or mutes actor (their items
// leave the owner's notifications), nor if actor blocks the owner (a
// blocker's mention or reply must not reach the user they blocked). It
// costs two reads for all the owners at once (each owner's relations to
// actor, actor's blocks among the owners). A failed read notifies nobody:
// a lost notice is the lesser harm.
func (s *Service) notifiable(ctx context.Context, actor store.ID, owners []store.ID) []bool {
	ok := make([]bool, len(owners))
	kinds, err := s.backend.FindBlockers(ctx, actor, owners)
	if err != nil {
		s.log.WarnContext(ctx, "notifying: reading relations", "actor", actor.String(), "err", err)
		return ok
	}
	blocked, err := s.backend.FindBlocked(ctx, actor, store.RelationBlock, owners)
	if err != nil {
		s.log.WarnContext(ctx, "notifying: reading relations", "actor", actor.String(), "err", err)
		return ok
	}
	for i := range owners {
		ok[i] = kinds[i] == 0 && !blocked[i]
	}
	return ok
}

// HideNotificationsFrom takes actor out of owner's notifications feed, as
// owner's block or mute of actor requires: groups actor alone made are
// removed, the others lose actor from their count and latest actors and
// keep their place. It tells owner's subscriptions of each group removed
// or changed. Block and Mute call it once the relation is stored (later
// notices of actor are refused by notify): it is idempotent, so blocking
// or muting again finishes a removal a crash cut short (the groups the
// crashed run changed get no event; a client sees them on its next read).
// An unmute or unblock brings nothing back; actor's later activity
// notifies again. A notice of actor checked just before the relation was
// stored may still land after this ran, within notifyTimeout of its check.
func (s *Service) HideNotificationsFrom(ctx context.Context, owner, actor store.ID) error {
	if owner == actor {
		return nil
	}
	res, err := s.backend.RemoveNotificationActor(ctx, owner, actor)
	if err != nil {
		return err
	}
	evs := make([]store.Event, 0, len(res.Removed)+len(res.Updated))
	c := inboxCounts(res.Counts)
	for _, g := range res.Removed {
		evs = append(evs, store.Event{Type: store.EventNotificationRemoved, UserID: owner, Group: g, Counts: c})
	}
	for _, g := range res.Updated {
		evs = append(evs, store.Event{Type: store.EventNotificationUpdated, UserID: owner, Group: g, Counts: c})
	}
	// In batches: on MongoDB a Publish is one events document.
	for len(evs) > 0 {
		n := min(len(evs), hideEventsBatch)
		s.events.Publish(ctx, evs[:n]...)
		evs = evs[n:]
	}
	return nil
}

// hideEventsBatch bounds the events of one Publish of HideNotificationsFrom.
const hideEventsBatch = 1000

// inboxCounts carries a feed's counts in an Event's Counts.
func inboxCounts(c store.NotificationCounts) store.InboxCounts {
	return store.InboxCounts{Total: c.Total, Unread: c.Unread, ReadMark: c.ReadMark}
}

// NotifyReposted tells m's author that actor reposted m: the entry point of
// the repost mutation. Reposts of one message group as likes do.
func (s *Service) NotifyReposted(ctx context.Context, actor store.ID, m *store.Message) {
	s.notify(ctx, store.NotifyReposted, m.AuthorID, actor, m)
}

// notifyPosted notifies what a new message m tells others: its reply to
// their message (REPLIED) and its mentions of them (MENTIONED), each user
// once: the author replied to is not also told of a mention. An edit
// tells only the users it newly mentions: before holds the mentions the
// message had, whose users were told already. The relations of all of
// them to the author are read at once (notifiable).
func (s *Service) notifyPosted(ctx context.Context, m *store.Message, edit bool, before []store.ID) {
	var owners []store.ID
	var kinds []store.NotificationKind
	if !edit && !m.ReplyToAuthorID.IsZero() && m.ReplyToAuthorID != m.AuthorID {
		owners, kinds = append(owners, m.ReplyToAuthorID), append(kinds, store.NotifyReplied)
	}
	for _, u := range m.Mentions {
		if u != m.ReplyToAuthorID && u != m.AuthorID && !u.IsZero() && !slices.Contains(before, u) && !slices.Contains(owners, u) {
			owners, kinds = append(owners, u), append(kinds, store.NotifyMentioned)
		}
	}
	if len(owners) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
	defer cancel()
	owners, kinds = s.readersOf(ctx, m.AuthorID, owners, kinds)
	for i, ok := range s.notifiable(ctx, m.AuthorID, owners) {
		if ok {
			s.writeNotice(ctx, kinds[i], owners[i], m.AuthorID, m)
		}
	}
}

// NotificationPage is a page of a notifications feed, newest activity
// first, with the feed's counts. HasMore says whether more groups lie
// beyond the page in the direction it was read.
type NotificationPage struct {
	Groups  []store.NotificationGroup
	Counts  store.NotificationCounts
	HasMore bool
}

// Notifications returns a page of owner's notifications feed within r (its
// From a group's LatestID).
func (s *Service) Notifications(ctx context.Context, owner store.ID, r store.Range) (NotificationPage, error) {
	gs, c, err := s.backend.ReadNotifications(ctx, owner, plusOne(r))
	if err != nil {
		return NotificationPage{}, err
	}
	gs, more := trimPage(gs, r)
	return NotificationPage{Groups: gs, Counts: c, HasMore: more}, nil
}

// NotificationCounts returns owner's feed counts.
func (s *Service) NotificationCounts(ctx context.Context, owner store.ID) (store.NotificationCounts, error) {
	_, c, err := s.backend.ReadNotifications(ctx, owner, store.Forward(store.NilID, 0))
	return c, err
}

// NotificationGroup returns owner's group id: NOT_FOUND if owner has none
// of that ID (another user's group included).
func (s *Service) NotificationGroup(ctx context.Context, owner, id store.ID) (*store.NotificationGroup, error) {
	return s.backend.FindNotificationGroup(ctx, owner, id)
}

// ActorPage is a page of a group's actors, newest first.
type ActorPage struct {
	Actors  []store.NotificationActor
	HasMore bool
}

// NotificationActors returns a page of the actors of owner's group.
func (s *Service) NotificationActors(ctx context.Context, owner, group store.ID, r store.Range) (ActorPage, error) {
	as, more, err := readPage(r, func(r store.Range) ([]store.NotificationActor, error) {
		return s.backend.ListNotificationActors(ctx, owner, group, r)
	})
	return ActorPage{Actors: as, HasMore: more}, err
}

// MarkNotificationsRead moves owner's read mark to group upTo's newest
// activity (NOT_FOUND if owner has no such group), or to the newest
// group's when upTo is NilID, and tells owner's subscriptions. Groups that
// change while it runs stay unread.
func (s *Service) MarkNotificationsRead(ctx context.Context, owner, upTo store.ID) (store.NotificationCounts, error) {
	var mark store.ID
	if upTo.IsZero() {
		gs, c, err := s.backend.ReadNotifications(ctx, owner, store.Forward(store.NilID, 1))
		if err != nil {
			return c, err
		}
		if len(gs) == 0 {
			return c, nil // nothing to mark
		}
		mark = gs[0].LatestID
	} else {
		g, err := s.backend.FindNotificationGroup(ctx, owner, upTo)
		if err != nil {
			return store.NotificationCounts{}, err
		}
		mark = g.LatestID
	}
	c, err := s.backend.MarkNotificationsRead(ctx, owner, mark)
	if err != nil {
		return c, err
	}
	s.events.Publish(ctx, store.Event{Type: store.EventNotificationsRead, UserID: owner, Counts: inboxCounts(c)})
	return c, nil
}

// readersOf returns the owners (with their kinds) who may read a message
// of author's: all of them for a public account, its followers for a
// private one, whose reply or mention must not tell others of a message
// they cannot open. One read of the author, and one FindFollowers for a
// private account. A failed read notifies nobody, as notifiable does.
func (s *Service) readersOf(ctx context.Context, author store.ID, owners []store.ID, kinds []store.NotificationKind) ([]store.ID, []store.NotificationKind) {
	u, err := s.backend.FindUserByID(ctx, author)
	if err != nil {
		s.log.WarnContext(ctx, "notifying: reading the author", "author", author.String(), "err", err)
		return nil, nil
	}
	if !u.Private {
		return owners, kinds
	}
	follows, err := s.backend.FindFollowers(ctx, author, owners)
	if err != nil {
		s.log.WarnContext(ctx, "notifying: reading the author's followers", "author", author.String(), "err", err)
		return nil, nil
	}
	var o []store.ID
	var k []store.NotificationKind
	for i, f := range follows {
		if f {
			o, k = append(o, owners[i]), append(k, kinds[i])
		}
	}
	return o, k
}
