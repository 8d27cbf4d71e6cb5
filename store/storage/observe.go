package storage

import (
	"context"
	"time"

	"herald/store"
)

// An Observer is told of every call an observed backend makes: metrics
// time and count them, tests count round trips. It must be safe for
// concurrent use and quick: it runs inside every call.
type Observer interface {
	// Observe reports that a call to method (the name of a method of
	// Backend, Leaser or GroupDeliverer) began at start and returned err.
	Observe(method string, start time.Time, err error)
}

// Observe returns b with every call reported to o. The optional interfaces
// b implements stay visible through LeaserOf, with their calls observed too.
// Close is not a round trip and is not observed.
func Observe(b Backend, o Observer) Backend { return &observed{b: b, o: o} }

// observed implements each method itself (no embedding), so that a method
// added to the contract fails to compile here rather than going unobserved.
type observed struct {
	b Backend
	o Observer
}

// Unwrap returns the observed backend.
func (w *observed) Unwrap() Backend { return w.b }

// Close implements Backend.
func (w *observed) Close() error { return w.b.Close() }

func (w *observed) CreateUser(ctx context.Context, u *store.User) error {
	start := time.Now()
	err := w.b.CreateUser(ctx, u)
	w.o.Observe("CreateUser", start, err)
	return err
}

func (w *observed) FindUserByID(ctx context.Context, id store.ID) (*store.User, error) {
	start := time.Now()
	r0, err := w.b.FindUserByID(ctx, id)
	w.o.Observe("FindUserByID", start, err)
	return r0, err
}

func (w *observed) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	start := time.Now()
	r0, err := w.b.FindUsersByIDs(ctx, ids)
	w.o.Observe("FindUsersByIDs", start, err)
	return r0, err
}

func (w *observed) FindUserByHandle(ctx context.Context, handle string) (*store.User, error) {
	start := time.Now()
	r0, err := w.b.FindUserByHandle(ctx, handle)
	w.o.Observe("FindUserByHandle", start, err)
	return r0, err
}

func (w *observed) FindUsersByHandles(ctx context.Context, handles []string) ([]*store.User, error) {
	start := time.Now()
	r0, err := w.b.FindUsersByHandles(ctx, handles)
	w.o.Observe("FindUsersByHandles", start, err)
	return r0, err
}

func (w *observed) SearchUsers(ctx context.Context, prefix string, limit int) ([]*store.User, error) {
	start := time.Now()
	r0, err := w.b.SearchUsers(ctx, prefix, limit)
	w.o.Observe("SearchUsers", start, err)
	return r0, err
}

func (w *observed) UpdateUser(ctx context.Context, id store.ID, upd UserUpdate) (*store.User, error) {
	start := time.Now()
	r0, err := w.b.UpdateUser(ctx, id, upd)
	w.o.Observe("UpdateUser", start, err)
	return r0, err
}

func (w *observed) RevokeTokens(ctx context.Context, id store.ID, r store.TokenRevocation) (*store.User, error) {
	start := time.Now()
	r0, err := w.b.RevokeTokens(ctx, id, r)
	w.o.Observe("RevokeTokens", start, err)
	return r0, err
}

func (w *observed) SetAttributes(ctx context.Context, id store.ID, changes []store.AttributeChange) (*store.User, error) {
	start := time.Now()
	r0, err := w.b.SetAttributes(ctx, id, changes)
	w.o.Observe("SetAttributes", start, err)
	return r0, err
}

func (w *observed) FindUsersByAttribute(ctx context.Context, name, value string, r store.Range) ([]*store.User, error) {
	start := time.Now()
	r0, err := w.b.FindUsersByAttribute(ctx, name, value, r)
	w.o.Observe("FindUsersByAttribute", start, err)
	return r0, err
}

func (w *observed) CountUsersByAttribute(ctx context.Context, name, value string) (int, error) {
	start := time.Now()
	r0, err := w.b.CountUsersByAttribute(ctx, name, value)
	w.o.Observe("CountUsersByAttribute", start, err)
	return r0, err
}

func (w *observed) Follow(ctx context.Context, follower, followee store.ID, at time.Time) (bool, error) {
	start := time.Now()
	r0, err := w.b.Follow(ctx, follower, followee, at)
	w.o.Observe("Follow", start, err)
	return r0, err
}

func (w *observed) Unfollow(ctx context.Context, follower, followee store.ID) (bool, error) {
	start := time.Now()
	r0, err := w.b.Unfollow(ctx, follower, followee)
	w.o.Observe("Unfollow", start, err)
	return r0, err
}

func (w *observed) FindFollowing(ctx context.Context, follower store.ID, targets []store.ID) ([]bool, error) {
	start := time.Now()
	r0, err := w.b.FindFollowing(ctx, follower, targets)
	w.o.Observe("FindFollowing", start, err)
	return r0, err
}

func (w *observed) FindFollowers(ctx context.Context, followee store.ID, candidates []store.ID) ([]bool, error) {
	start := time.Now()
	r0, err := w.b.FindFollowers(ctx, followee, candidates)
	w.o.Observe("FindFollowers", start, err)
	return r0, err
}

func (w *observed) DeleteUser(ctx context.Context, id store.ID, at time.Time) error {
	start := time.Now()
	err := w.b.DeleteUser(ctx, id, at)
	w.o.Observe("DeleteUser", start, err)
	return err
}

func (w *observed) ListDeletedUsers(ctx context.Context, after store.ID, limit int) ([]*store.User, error) {
	start := time.Now()
	r0, err := w.b.ListDeletedUsers(ctx, after, limit)
	w.o.Observe("ListDeletedUsers", start, err)
	return r0, err
}

func (w *observed) PurgeUser(ctx context.Context, id store.ID) error {
	start := time.Now()
	err := w.b.PurgeUser(ctx, id)
	w.o.Observe("PurgeUser", start, err)
	return err
}

func (w *observed) ListFollowers(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	start := time.Now()
	r0, err := w.b.ListFollowers(ctx, user, r)
	w.o.Observe("ListFollowers", start, err)
	return r0, err
}

func (w *observed) ListFollowing(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	start := time.Now()
	r0, err := w.b.ListFollowing(ctx, user, r)
	w.o.Observe("ListFollowing", start, err)
	return r0, err
}

func (w *observed) CreateMessage(ctx context.Context, m *store.Message, job *Job) error {
	start := time.Now()
	err := w.b.CreateMessage(ctx, m, job)
	w.o.Observe("CreateMessage", start, err)
	return err
}

func (w *observed) FindMessageByID(ctx context.Context, id store.ID) (*store.Message, error) {
	start := time.Now()
	r0, err := w.b.FindMessageByID(ctx, id)
	w.o.Observe("FindMessageByID", start, err)
	return r0, err
}

func (w *observed) FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	start := time.Now()
	r0, err := w.b.FindMessagesByKeys(ctx, keys)
	w.o.Observe("FindMessagesByKeys", start, err)
	return r0, err
}

func (w *observed) FindMessages(ctx context.Context, f MessageFilter) ([]*store.Message, error) {
	start := time.Now()
	r0, err := w.b.FindMessages(ctx, f)
	w.o.Observe("FindMessages", start, err)
	return r0, err
}

func (w *observed) UpdateMessage(ctx context.Context, id store.ID, upd MessageUpdate) (*store.Message, error) {
	start := time.Now()
	r0, err := w.b.UpdateMessage(ctx, id, upd)
	w.o.Observe("UpdateMessage", start, err)
	return r0, err
}

func (w *observed) ListReposts(ctx context.Context, original store.ID, r store.Range) ([]*store.Message, error) {
	start := time.Now()
	r0, err := w.b.ListReposts(ctx, original, r)
	w.o.Observe("ListReposts", start, err)
	return r0, err
}

func (w *observed) FindReposts(ctx context.Context, user store.ID, originals []store.MessageKey) ([]store.ID, error) {
	start := time.Now()
	r0, err := w.b.FindReposts(ctx, user, originals)
	w.o.Observe("FindReposts", start, err)
	return r0, err
}

func (w *observed) ListReplies(ctx context.Context, parent store.ID, r store.Range) ([]*store.Message, error) {
	start := time.Now()
	r0, err := w.b.ListReplies(ctx, parent, r)
	w.o.Observe("ListReplies", start, err)
	return r0, err
}

func (w *observed) DeleteMessage(ctx context.Context, id store.ID, retract *Job) error {
	start := time.Now()
	err := w.b.DeleteMessage(ctx, id, retract)
	w.o.Observe("DeleteMessage", start, err)
	return err
}

func (w *observed) Like(ctx context.Context, user store.ID, key store.MessageKey, at time.Time) (bool, error) {
	start := time.Now()
	r0, err := w.b.Like(ctx, user, key, at)
	w.o.Observe("Like", start, err)
	return r0, err
}

func (w *observed) Unlike(ctx context.Context, user store.ID, key store.MessageKey) (bool, error) {
	start := time.Now()
	r0, err := w.b.Unlike(ctx, user, key)
	w.o.Observe("Unlike", start, err)
	return r0, err
}

func (w *observed) FindLiked(ctx context.Context, user store.ID, keys []store.MessageKey) ([]bool, error) {
	start := time.Now()
	r0, err := w.b.FindLiked(ctx, user, keys)
	w.o.Observe("FindLiked", start, err)
	return r0, err
}

func (w *observed) ListLikers(ctx context.Context, message store.ID, r store.Range) ([]store.Like, error) {
	start := time.Now()
	r0, err := w.b.ListLikers(ctx, message, r)
	w.o.Observe("ListLikers", start, err)
	return r0, err
}

func (w *observed) ListLikes(ctx context.Context, user store.ID, r store.Range) ([]store.Like, error) {
	start := time.Now()
	r0, err := w.b.ListLikes(ctx, user, r)
	w.o.Observe("ListLikes", start, err)
	return r0, err
}

func (w *observed) Block(ctx context.Context, user, target store.ID, kind store.RelationKind, at time.Time) (bool, error) {
	start := time.Now()
	r0, err := w.b.Block(ctx, user, target, kind, at)
	w.o.Observe("Block", start, err)
	return r0, err
}

func (w *observed) Unblock(ctx context.Context, user, target store.ID, kind store.RelationKind) (bool, error) {
	start := time.Now()
	r0, err := w.b.Unblock(ctx, user, target, kind)
	w.o.Observe("Unblock", start, err)
	return r0, err
}

func (w *observed) ListBlocked(ctx context.Context, user store.ID, kind store.RelationKind, r store.Range) ([]store.Relation, error) {
	start := time.Now()
	r0, err := w.b.ListBlocked(ctx, user, kind, r)
	w.o.Observe("ListBlocked", start, err)
	return r0, err
}

func (w *observed) FindBlocked(ctx context.Context, user store.ID, kind store.RelationKind, targets []store.ID) ([]bool, error) {
	start := time.Now()
	r0, err := w.b.FindBlocked(ctx, user, kind, targets)
	w.o.Observe("FindBlocked", start, err)
	return r0, err
}

func (w *observed) FindBlockers(ctx context.Context, author store.ID, owners []store.ID) ([]store.RelationKind, error) {
	start := time.Now()
	r0, err := w.b.FindBlockers(ctx, author, owners)
	w.o.Observe("FindBlockers", start, err)
	return r0, err
}

func (w *observed) ListFiltered(ctx context.Context, user store.ID, limit int) ([]store.ID, error) {
	start := time.Now()
	r0, err := w.b.ListFiltered(ctx, user, limit)
	w.o.Observe("ListFiltered", start, err)
	return r0, err
}

func (w *observed) ListBlockers(ctx context.Context, target store.ID, limit int) ([]store.ID, error) {
	start := time.Now()
	r0, err := w.b.ListBlockers(ctx, target, limit)
	w.o.Observe("ListBlockers", start, err)
	return r0, err
}

func (w *observed) RequestFollow(ctx context.Context, user, target store.ID, at time.Time) (bool, error) {
	start := time.Now()
	r0, err := w.b.RequestFollow(ctx, user, target, at)
	w.o.Observe("RequestFollow", start, err)
	return r0, err
}

func (w *observed) RemoveFollowRequest(ctx context.Context, user, target store.ID) (bool, error) {
	start := time.Now()
	r0, err := w.b.RemoveFollowRequest(ctx, user, target)
	w.o.Observe("RemoveFollowRequest", start, err)
	return r0, err
}

func (w *observed) ListFollowRequests(ctx context.Context, target store.ID, r store.Range) ([]store.FollowRequest, error) {
	start := time.Now()
	r0, err := w.b.ListFollowRequests(ctx, target, r)
	w.o.Observe("ListFollowRequests", start, err)
	return r0, err
}

func (w *observed) FindFollowRequests(ctx context.Context, user store.ID, targets []store.ID) ([]bool, error) {
	start := time.Now()
	r0, err := w.b.FindFollowRequests(ctx, user, targets)
	w.o.Observe("FindFollowRequests", start, err)
	return r0, err
}

func (w *observed) CountFollowRequests(ctx context.Context, target store.ID) (int, error) {
	start := time.Now()
	r0, err := w.b.CountFollowRequests(ctx, target)
	w.o.Observe("CountFollowRequests", start, err)
	return r0, err
}

func (w *observed) Notify(ctx context.Context, n Notice) (NotifyResult, error) {
	start := time.Now()
	r0, err := w.b.Notify(ctx, n)
	w.o.Observe("Notify", start, err)
	return r0, err
}

func (w *observed) ReadNotifications(ctx context.Context, owner store.ID, r store.Range) ([]store.NotificationGroup, store.NotificationCounts, error) {
	start := time.Now()
	r0, r1, err := w.b.ReadNotifications(ctx, owner, r)
	w.o.Observe("ReadNotifications", start, err)
	return r0, r1, err
}

func (w *observed) FindNotificationGroup(ctx context.Context, owner, id store.ID) (*store.NotificationGroup, error) {
	start := time.Now()
	r0, err := w.b.FindNotificationGroup(ctx, owner, id)
	w.o.Observe("FindNotificationGroup", start, err)
	return r0, err
}

func (w *observed) ListNotificationActors(ctx context.Context, owner, group store.ID, r store.Range) ([]store.NotificationActor, error) {
	start := time.Now()
	r0, err := w.b.ListNotificationActors(ctx, owner, group, r)
	w.o.Observe("ListNotificationActors", start, err)
	return r0, err
}

func (w *observed) MarkNotificationsRead(ctx context.Context, owner, mark store.ID) (store.NotificationCounts, error) {
	start := time.Now()
	r0, err := w.b.MarkNotificationsRead(ctx, owner, mark)
	w.o.Observe("MarkNotificationsRead", start, err)
	return r0, err
}

func (w *observed) RemoveNotificationActor(ctx context.Context, owner, actor store.ID) (ActorRemoval, error) {
	start := time.Now()
	r0, err := w.b.RemoveNotificationActor(ctx, owner, actor)
	w.o.Observe("RemoveNotificationActor", start, err)
	return r0, err
}

func (w *observed) FindOutbox(ctx context.Context, f OutboxFilter) ([]OutboxEntry, error) {
	start := time.Now()
	r0, err := w.b.FindOutbox(ctx, f)
	w.o.Observe("FindOutbox", start, err)
	return r0, err
}

func (w *observed) CountOutbox(ctx context.Context, f OutboxFilter) (int, error) {
	start := time.Now()
	r0, err := w.b.CountOutbox(ctx, f)
	w.o.Observe("CountOutbox", start, err)
	return r0, err
}

func (w *observed) ListPullAuthors(ctx context.Context) ([]store.ID, error) {
	start := time.Now()
	r0, err := w.b.ListPullAuthors(ctx)
	w.o.Observe("ListPullAuthors", start, err)
	return r0, err
}

func (w *observed) DeliverInbox(ctx context.Context, d Delivery) ([]InboxChange, error) {
	start := time.Now()
	r0, err := w.b.DeliverInbox(ctx, d)
	w.o.Observe("DeliverInbox", start, err)
	return r0, err
}

// DeliverInboxes implements GroupDeliverer: one call where the observed
// backend groups, else its DeliverInbox calls, each observed.
func (w *observed) DeliverInboxes(ctx context.Context, ds []Delivery) ([]Delivered, error) {
	g, ok := groupDelivererOf(w.b)
	if !ok {
		return deliverEach(ctx, w, ds)
	}
	start := time.Now()
	r0, err := g.DeliverInboxes(ctx, ds)
	w.o.Observe("DeliverInboxes", start, err)
	return r0, err
}

func (w *observed) InsertInbox(ctx context.Context, ins Insertion) ([]InboxChange, error) {
	start := time.Now()
	r0, err := w.b.InsertInbox(ctx, ins)
	w.o.Observe("InsertInbox", start, err)
	return r0, err
}

func (w *observed) RemoveAuthorEntries(ctx context.Context, r AuthorRemoval) ([]InboxChange, error) {
	start := time.Now()
	r0, err := w.b.RemoveAuthorEntries(ctx, r)
	w.o.Observe("RemoveAuthorEntries", start, err)
	return r0, err
}

func (w *observed) RemoveOwnerEntries(ctx context.Context, r OwnerRemoval) ([]InboxChange, error) {
	start := time.Now()
	r0, err := w.b.RemoveOwnerEntries(ctx, r)
	w.o.Observe("RemoveOwnerEntries", start, err)
	return r0, err
}

func (w *observed) ReadInbox(ctx context.Context, f InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	start := time.Now()
	r0, r1, err := w.b.ReadInbox(ctx, f)
	w.o.Observe("ReadInbox", start, err)
	return r0, r1, err
}

func (w *observed) MarkInboxRead(ctx context.Context, owner store.ID, layout Layout, mark store.ID) (store.InboxCounts, error) {
	start := time.Now()
	r0, err := w.b.MarkInboxRead(ctx, owner, layout, mark)
	w.o.Observe("MarkInboxRead", start, err)
	return r0, err
}

func (w *observed) FindDeliveries(ctx context.Context, messageID store.ID, cursor []byte, limit int) ([]InboxRef, []byte, error) {
	start := time.Now()
	r0, r1, err := w.b.FindDeliveries(ctx, messageID, cursor, limit)
	w.o.Observe("FindDeliveries", start, err)
	return r0, r1, err
}

func (w *observed) RemoveInboxEntries(ctx context.Context, r Removal) ([]InboxChange, error) {
	start := time.Now()
	r0, err := w.b.RemoveInboxEntries(ctx, r)
	w.o.Observe("RemoveInboxEntries", start, err)
	return r0, err
}

func (w *observed) ReadInboxCache(ctx context.Context, owner store.ID, now time.Time) (*InboxCache, error) {
	start := time.Now()
	r0, err := w.b.ReadInboxCache(ctx, owner, now)
	w.o.Observe("ReadInboxCache", start, err)
	return r0, err
}

func (w *observed) PutInboxCache(ctx context.Context, c *InboxCache, capacity int) error {
	start := time.Now()
	err := w.b.PutInboxCache(ctx, c, capacity)
	w.o.Observe("PutInboxCache", start, err)
	return err
}

func (w *observed) DropInboxCache(ctx context.Context, owner store.ID) error {
	start := time.Now()
	err := w.b.DropInboxCache(ctx, owner)
	w.o.Observe("DropInboxCache", start, err)
	return err
}

func (w *observed) StoreJob(ctx context.Context, j *Job) error {
	start := time.Now()
	err := w.b.StoreJob(ctx, j)
	w.o.Observe("StoreJob", start, err)
	return err
}

func (w *observed) FinishJob(ctx context.Context, j *Job) error {
	start := time.Now()
	err := w.b.FinishJob(ctx, j)
	w.o.Observe("FinishJob", start, err)
	return err
}

func (w *observed) MarkSeen(ctx context.Context, user store.ID, at, inactiveBefore time.Time, rebuild *Job) (bool, error) {
	start := time.Now()
	r0, err := w.b.MarkSeen(ctx, user, at, inactiveBefore, rebuild)
	w.o.Observe("MarkSeen", start, err)
	return r0, err
}

func (w *observed) PendingJobs(ctx context.Context) ([]*Job, error) {
	start := time.Now()
	r0, err := w.b.PendingJobs(ctx)
	w.o.Observe("PendingJobs", start, err)
	return r0, err
}

func (w *observed) JobBacklog(ctx context.Context, limit int) (JobBacklog, error) {
	start := time.Now()
	r0, err := w.b.JobBacklog(ctx, limit)
	w.o.Observe("JobBacklog", start, err)
	return r0, err
}

// LeaserOf returns b's Leaser, if it has one, looking through the wrappers
// that Unwrap and observing its calls where b is observed.
func LeaserOf(b Backend) (Leaser, bool) {
	switch w := b.(type) {
	case Leaser:
		return w, true
	case *observed:
		l, ok := LeaserOf(w.b)
		if !ok {
			return nil, false
		}
		return observedLeaser{l: l, o: w.o}, true
	case interface{ Unwrap() Backend }:
		return LeaserOf(w.Unwrap())
	}
	return nil, false
}

type observedLeaser struct {
	l Leaser
	o Observer
}

func (w observedLeaser) TryFanoutLease(ctx context.Context, holder string, ttl time.Duration) (bool, error) {
	start := time.Now()
	held, err := w.l.TryFanoutLease(ctx, holder, ttl)
	w.o.Observe("TryFanoutLease", start, err)
	return held, err
}

func (w observedLeaser) ReleaseFanoutLease(ctx context.Context, holder string) error {
	start := time.Now()
	err := w.l.ReleaseFanoutLease(ctx, holder)
	w.o.Observe("ReleaseFanoutLease", start, err)
	return err
}

func (w *observed) CreateConversation(ctx context.Context, c *store.Conversation) error {
	start := time.Now()
	err := w.b.CreateConversation(ctx, c)
	w.o.Observe("CreateConversation", start, err)
	return err
}

func (w *observed) FindConversations(ctx context.Context, ids []store.ConversationID) ([]*store.Conversation, error) {
	start := time.Now()
	r0, err := w.b.FindConversations(ctx, ids)
	w.o.Observe("FindConversations", start, err)
	return r0, err
}

func (w *observed) AppendConversationMessage(ctx context.Context, m *store.ConversationMessage) (*store.Conversation, error) {
	start := time.Now()
	r0, err := w.b.AppendConversationMessage(ctx, m)
	w.o.Observe("AppendConversationMessage", start, err)
	return r0, err
}

func (w *observed) RecoverConversationSends(ctx context.Context, olderThan time.Time) ([]*store.ConversationMessage, error) {
	start := time.Now()
	r0, err := w.b.RecoverConversationSends(ctx, olderThan)
	w.o.Observe("RecoverConversationSends", start, err)
	return r0, err
}

func (w *observed) ListConversationMessages(ctx context.Context, conv store.ConversationID, r store.SeqRange) ([]*store.ConversationMessage, error) {
	start := time.Now()
	r0, err := w.b.ListConversationMessages(ctx, conv, r)
	w.o.Observe("ListConversationMessages", start, err)
	return r0, err
}

func (w *observed) UpdateConversationMessage(ctx context.Context, conv store.ConversationID, seq uint64, upd ConversationMessageUpdate) (*store.ConversationMessage, error) {
	start := time.Now()
	r0, err := w.b.UpdateConversationMessage(ctx, conv, seq, upd)
	w.o.Observe("UpdateConversationMessage", start, err)
	return r0, err
}

func (w *observed) ChangeConversationMembers(ctx context.Context, conv store.ConversationID, ch MemberChange) (*store.Conversation, error) {
	start := time.Now()
	r0, err := w.b.ChangeConversationMembers(ctx, conv, ch)
	w.o.Observe("ChangeConversationMembers", start, err)
	return r0, err
}

func (w *observed) ListConversations(ctx context.Context, user store.ID, r store.Range) ([]store.ConversationEntry, error) {
	start := time.Now()
	r0, err := w.b.ListConversations(ctx, user, r)
	w.o.Observe("ListConversations", start, err)
	return r0, err
}

func (w *observed) MarkConversationRead(ctx context.Context, user store.ID, conv store.ConversationID, seq uint64) (store.UnreadConversations, error) {
	start := time.Now()
	r0, err := w.b.MarkConversationRead(ctx, user, conv, seq)
	w.o.Observe("MarkConversationRead", start, err)
	return r0, err
}

func (w *observed) ReadUnreadConversations(ctx context.Context, user store.ID) (store.UnreadConversations, error) {
	start := time.Now()
	r0, err := w.b.ReadUnreadConversations(ctx, user)
	w.o.Observe("ReadUnreadConversations", start, err)
	return r0, err
}

// OwnerLanesOf returns b's OwnerLanes, if it has them, looking through the
// wrappers that Unwrap and observing its calls where b is observed.
func OwnerLanesOf(b Backend) (OwnerLanes, bool) {
	switch w := b.(type) {
	case OwnerLanes:
		return w, true
	case *observed:
		l, ok := OwnerLanesOf(w.b)
		if !ok {
			return nil, false
		}
		return observedOwnerLanes{observedLeaser: observedLeaser{l: l, o: w.o}, l: l}, true
	case interface{ Unwrap() Backend }:
		return OwnerLanesOf(w.Unwrap())
	}
	return nil, false
}

type observedOwnerLanes struct {
	observedLeaser
	l OwnerLanes
}

func (w observedOwnerLanes) FanoutLanes(ctx context.Context, want int) (int, error) {
	start := time.Now()
	n, err := w.l.FanoutLanes(ctx, want)
	w.o.Observe("FanoutLanes", start, err)
	return n, err
}

func (w observedOwnerLanes) TryLaneLease(ctx context.Context, lane int, holder string, ttl time.Duration) (bool, error) {
	start := time.Now()
	held, err := w.l.TryLaneLease(ctx, lane, holder, ttl)
	w.o.Observe("TryLaneLease", start, err)
	return held, err
}

func (w observedOwnerLanes) ReleaseLaneLease(ctx context.Context, lane int, holder string) error {
	start := time.Now()
	err := w.l.ReleaseLaneLease(ctx, lane, holder)
	w.o.Observe("ReleaseLaneLease", start, err)
	return err
}

func (w observedOwnerLanes) Heartbeat(ctx context.Context, holder string, ttl time.Duration) (int, error) {
	start := time.Now()
	n, err := w.l.Heartbeat(ctx, holder, ttl)
	w.o.Observe("Heartbeat", start, err)
	return n, err
}

func (w observedOwnerLanes) PendingLaneJobs(ctx context.Context, lane int) ([]*Job, error) {
	start := time.Now()
	js, err := w.l.PendingLaneJobs(ctx, lane)
	w.o.Observe("PendingLaneJobs", start, err)
	return js, err
}
