// Package storage is the contract between Herald's use cases and its
// storage engines: what a backend stores and reads, split by entity, with
// the working types of fan-out (jobs, deliveries, layouts). store/embedded
// and store/mongostore implement it; store/storetest is its conformance
// suite; Observe wraps any backend for metrics and tests.
package storage

import (
	"context"
	"time"

	"herald/store"
)

// Backend is the storage contract: every backend implements all of it.
// Each method is one round trip to storage and is safe for concurrent use.
// Physical layout (keys, documents, buckets, indexes) is private to each
// implementation; every backend passes the conformance suite in
// store/storetest. The contract is split by entity so that a wrapper or a
// fake can implement only the part it wraps, embedding the rest.
//
// Reads of missing objects return NOT_FOUND, except the batch reads
// (FindUsersByIDs, FindMessagesByKeys), which return a slice aligned with the
// keys and nil where an object is missing or deleted.
type Backend interface {
	Users
	Follows
	Messages
	Likes
	Blocks
	FollowRequests
	Notifications
	Outboxes
	Inboxes
	Caches
	Jobs
	Conversations

	// Close releases the backend. No method may be called after it.
	Close() error
}

// Users stores user accounts: profiles, sessions and custom attributes.
type Users interface {
	// CreateUser stores a new user. The handle must be lowercase; a taken
	// handle is CONFLICT.
	CreateUser(ctx context.Context, u *store.User) error
	FindUserByID(ctx context.Context, id store.ID) (*store.User, error)
	FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error)
	FindUserByHandle(ctx context.Context, handle string) (*store.User, error)
	// FindUsersByHandles is FindUserByHandle for several lowercase
	// handles at once, aligned with them: nil where no user has one.
	FindUsersByHandles(ctx context.Context, handles []string) ([]*store.User, error)
	UpdateUser(ctx context.Context, id store.ID, upd UserUpdate) (*store.User, error)
	// SearchUsers returns at most limit distinct users with a search term
	// (store.SearchTerms of their handle and display name) that starts with
	// prefix: a read of one index range, bounded by limit however many
	// users match. Which of more than limit matches it returns is the
	// backend's index order; callers rank what it returns.
	SearchUsers(ctx context.Context, prefix string, limit int) ([]*store.User, error)
	// RevokeTokens changes a user's token version, revoked tokens and kept
	// token as r.Apply does, and its password hash if r.PasswordHash is
	// set, atomically (concurrent revocations all apply), and returns the
	// user.
	RevokeTokens(ctx context.Context, id store.ID, r store.TokenRevocation) (*store.User, error)
	// SetAttributes applies changes to a user's custom attributes, names
	// stored under name-store tokens, and returns the user. More than
	// MaxAttributes attributes is BAD_USER_INPUT, and nothing changes.
	SetAttributes(ctx context.Context, id store.ID, changes []store.AttributeChange) (*store.User, error)
	// FindUsersByAttribute returns the users whose attribute name has
	// exactly value, in ID order, within r.
	FindUsersByAttribute(ctx context.Context, name, value string, r store.Range) ([]*store.User, error)
	// CountUsersByAttribute counts the users whose attribute name has
	// exactly value. It may cost a scan of the matching index entries.
	CountUsersByAttribute(ctx context.Context, name, value string) (int, error)
	// DeleteUser marks user id deleted at at, in one atomic step: every
	// token of the user ends (its token version goes up), its search terms
	// and attributes are removed, and from then on every read of users
	// above (by ID, handle, search or attribute) leaves it out as missing,
	// while its handle stays taken (CreateUser: CONFLICT) until PurgeUser.
	// Its edges, likes, messages and counters stay, and the writes that
	// change them still apply: the caller removes them. Deleting a deleted
	// user changes nothing (its deletion time stays); an unknown user is
	// NOT_FOUND.
	DeleteUser(ctx context.Context, id store.ID, at time.Time) error
	// ListDeletedUsers returns up to limit users marked deleted and not yet
	// purged, in ID order, after the user after (NilID: from the first),
	// with their DeletedAt.
	ListDeletedUsers(ctx context.Context, after store.ID, limit int) ([]*store.User, error)
	// PurgeUser removes a deleted user's record and frees its handle for a
	// new sign-up; a user not marked deleted is CONFLICT, a missing one no
	// error. It may take more than one write: a crash in between leaves
	// the user listed by ListDeletedUsers, and purging again completes it.
	PurgeUser(ctx context.Context, id store.ID) error
}

// Follows stores the follow graph: both edges of a follow and both counters, together.
type Follows interface {
	// Follow makes follower follow followee, both edges and both counters in
	// one atomic step. It reports false if the edge already existed (nothing
	// changes). Unfollow is the reverse. Both return NOT_FOUND for an unknown user.
	Follow(ctx context.Context, follower, followee store.ID, at time.Time) (bool, error)
	Unfollow(ctx context.Context, follower, followee store.ID) (bool, error)
	// FindFollowing reports, for each target, whether follower follows it.
	FindFollowing(ctx context.Context, follower store.ID, targets []store.ID) ([]bool, error)
	// FindFollowers reports, for each candidate, whether it follows
	// followee.
	FindFollowers(ctx context.Context, followee store.ID, candidates []store.ID) ([]bool, error)
	// ListFollowers returns followers of user in ID order, within r. Only
	// IDs: a backend answers from the edge index alone.
	ListFollowers(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error)
	// ListFollowing returns users that user follows in ID order, within r.
	ListFollowing(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error)
}

// Messages stores messages in their authors' outboxes, with the fan-out job each change starts.
type Messages interface {
	// CreateMessage stores m in its author's outbox, increments the author's
	// message count (and PulledCount if m.Pulled), increments the
	// ReplyCount of the message it replies to (if it is a reply and that
	// message is live), and stores job (if not nil), in the same atomic
	// step.
	//
	// A repost (m.Kind store.KindRepost, with RepostOfID and
	// RepostOfAuthorID, no text, no mentions) is stored the same way and
	// increments the RepostCount of the message it reposts in that step.
	// A user reposts a message at most once: a second live repost of the
	// same message by the same author is CONFLICT, changing nothing, also
	// when the two race (exactly one is stored and counted); deleting the
	// repost allows a new one. A repost of a message that does not exist
	// or was deleted is NOT_FOUND; of a repost, BAD_USER_INPUT (the
	// caller reposts the original instead).
	CreateMessage(ctx context.Context, m *store.Message, job *Job) error
	// FindMessageByID returns NOT_FOUND for a deleted message.
	FindMessageByID(ctx context.Context, id store.ID) (*store.Message, error)
	FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error)
	// FindMessages returns an author's messages, newest first, within
	// f.Range: their outbox, reposts included (Kind store.KindRepost),
	// since a repost is an entry of the reposter's timeline.
	FindMessages(ctx context.Context, f MessageFilter) ([]*store.Message, error)
	// FindReposts returns, aligned with originals, the ID of user's live
	// repost of each message (NilID where user has none), in one read:
	// viewerHasReposted, and the repost that an unrepost deletes. The
	// author part of a key is not needed.
	FindReposts(ctx context.Context, user store.ID, originals []store.MessageKey) ([]store.ID, error)
	// ListReposts returns the live reposts of message original, newest
	// first, within r (its From a repost's ID): what deleting the original
	// deletes.
	ListReposts(ctx context.Context, original store.ID, r store.Range) ([]*store.Message, error)
	UpdateMessage(ctx context.Context, id store.ID, upd MessageUpdate) (*store.Message, error)
	// ListReplies returns the live replies to message parent, oldest first,
	// within r (its From a reply's ID).
	ListReplies(ctx context.Context, parent store.ID, r store.Range) ([]*store.Message, error)
	// DeleteMessage removes the message from its author's outbox, decrements
	// the author's message count (and PulledCount) and the ReplyCount of the
	// message it replies to (if live), or a repost's from the RepostCount
	// of the message it reposts (if live; the author may repost it again),
	// cancels the message's
	// pending job and stores retract (if not nil) in its place, in one
	// atomic step. A delivery racing with it either lands before (and is
	// retracted) or fails. Deleting a message leaves its reposts, as it
	// leaves its replies: the caller deletes them (each a repost's own
	// deletion), and a count of a deleted message is never read.
	DeleteMessage(ctx context.Context, id store.ID, retract *Job) error
}

// Likes stores who likes which message, listed both ways, and each
// message's LikeCount, kept with the message.
type Likes interface {
	// Like records that user likes the message of key (its author given,
	// so that a backend that places messages by author finds it in one
	// place) and adds one to its LikeCount, in one atomic step. The like's
	// ID is made from at. It reports false, changing nothing, if user
	// already likes it; NOT_FOUND if the message does not exist or was
	// deleted.
	Like(ctx context.Context, user store.ID, key store.MessageKey, at time.Time) (bool, error)
	// Unlike removes user's like of the message and takes one from its
	// LikeCount, in one atomic step. It reports false, changing nothing,
	// if user does not like it; NOT_FOUND if the message does not exist or
	// was deleted.
	Unlike(ctx context.Context, user store.ID, key store.MessageKey) (bool, error)
	// FindLiked reports, for each key, whether user likes its message.
	FindLiked(ctx context.Context, user store.ID, keys []store.MessageKey) ([]bool, error)
	// ListLikers returns the likes of a message, newest first, within r
	// (its From a like's ID).
	ListLikers(ctx context.Context, message store.ID, r store.Range) ([]store.Like, error)
	// ListLikes returns the likes user made, newest first, within r (its
	// From a like's ID).
	ListLikes(ctx context.Context, user store.ID, r store.Range) ([]store.Like, error)
}

// Blocks stores who blocks or mutes whom (store.RelationKind), one edge
// per (user, target, kind), listed from the user's side and answered from
// either side in one call: a page's authors against a reader's relations,
// and a fan-out chunk's owners against an author. It stores edges only:
// blocking removes no follow here (the caller unfollows both ways, with
// the jobs an unfollow starts), and no count is kept.
type Blocks interface {
	// Block records that user blocks or mutes (kind) target; the
	// relation's ID is made from at. It reports false, changing nothing,
	// if user already has that relation to target, also when two race
	// (exactly one is stored). Blocking oneself, or a kind that is not
	// exactly one kind, is BAD_USER_INPUT; an unknown target NOT_FOUND.
	Block(ctx context.Context, user, target store.ID, kind store.RelationKind, at time.Time) (bool, error)
	// Unblock removes user's relation of kind to target. It reports
	// false, changing nothing, if there is none.
	Unblock(ctx context.Context, user, target store.ID, kind store.RelationKind) (bool, error)
	// ListBlocked returns user's relations of kind, newest first, within
	// r (its From a relation's ID).
	ListBlocked(ctx context.Context, user store.ID, kind store.RelationKind, r store.Range) ([]store.Relation, error)
	// FindBlocked reports, for each target, whether user has a relation
	// of kind to it.
	FindBlocked(ctx context.Context, user store.ID, kind store.RelationKind, targets []store.ID) ([]bool, error)
	// FindBlockers returns, aligned with owners, the kinds of relation
	// each owner has to author (0: none), in one read.
	FindBlockers(ctx context.Context, author store.ID, owners []store.ID) ([]store.RelationKind, error)
	// ListFiltered returns the users that user blocks or mutes, each once,
	// in ID order, at most limit of them: a bounded read of one range. A
	// result of limit users may be cut short.
	ListFiltered(ctx context.Context, user store.ID, limit int) ([]store.ID, error)
	// ListBlockers returns the users who block target (RelationBlock
	// only, not mutes), in ID order, at most limit of them: a bounded read
	// of one range, for a reader's home timeline, which must not show a
	// blocker's messages, not even reposted. A result of limit users may
	// be cut short.
	ListBlockers(ctx context.Context, target store.ID, limit int) ([]store.ID, error)
}

// FollowRequests stores the requests to follow private accounts
// (store.User.Private), one per (user, target), listed from the target's
// side and answered from the user's. It stores requests only: approving
// one is a Follow and a RemoveFollowRequest, made by the caller in that
// order, so a retry after a crash between the two completes it.
type FollowRequests interface {
	// RequestFollow records user's request to follow target; the
	// request's ID is made from at. It reports false, changing nothing, if
	// user has one pending already, also when two race (exactly one is
	// stored). Asking to follow oneself is BAD_USER_INPUT; an unknown
	// target NOT_FOUND.
	RequestFollow(ctx context.Context, user, target store.ID, at time.Time) (bool, error)
	// RemoveFollowRequest removes user's request to follow target
	// (approved, rejected or taken back). It reports false, changing
	// nothing, if there is none.
	RemoveFollowRequest(ctx context.Context, user, target store.ID) (bool, error)
	// ListFollowRequests returns the requests to follow target, oldest
	// first, within r (its From a request's ID).
	ListFollowRequests(ctx context.Context, target store.ID, r store.Range) ([]store.FollowRequest, error)
	// FindFollowRequests reports, for each target, whether user has a
	// request pending to follow it, in one read.
	FindFollowRequests(ctx context.Context, user store.ID, targets []store.ID) ([]bool, error)
	// CountFollowRequests counts the requests to follow target. It costs
	// a scan of the counted index entries: no count is kept, since the
	// pending requests of an account are few.
	CountFollowRequests(ctx context.Context, target store.ID) (int, error)
}

// Notifications stores each user's notifications feed: groups of
// activities (see store.NotificationGroupKey) newest activity first, each
// group's actors, and the feed's counts and read mark, O(1) to read.
type Notifications interface {
	// Notify adds n.Actor to the group n.Key of n.Owner's feed, creating
	// the group if needed, in one atomic step (or, without transactions,
	// steps that a retry or the owner's next Notify completes exactly
	// once). A new actor counts once, moves the group to the top (its
	// LatestID becomes n.ID) and makes it unread; an actor already in the
	// group changes nothing (Changed false). It returns the group and the
	// feed's counts after the change.
	Notify(ctx context.Context, n Notice) (NotifyResult, error)
	// ReadNotifications returns owner's groups within r (its From a
	// group's LatestID), newest activity first, with the feed's counts; a
	// Limit of 0 reads the counts only.
	ReadNotifications(ctx context.Context, owner store.ID, r store.Range) ([]store.NotificationGroup, store.NotificationCounts, error)
	// FindNotificationGroup returns owner's group of that ID, NOT_FOUND
	// if owner has none.
	FindNotificationGroup(ctx context.Context, owner, id store.ID) (*store.NotificationGroup, error)
	// ListNotificationActors returns the actors of owner's group, newest
	// first, within r (its From an actor's ID).
	ListNotificationActors(ctx context.Context, owner, group store.ID, r store.Range) ([]store.NotificationActor, error)
	// MarkNotificationsRead moves owner's read mark to mark if that is
	// newer and recounts unread (the groups above the mark), and returns
	// the counts.
	MarkNotificationsRead(ctx context.Context, owner, mark store.ID) (store.NotificationCounts, error)
	// RemoveNotificationActor removes actor from every group of owner's
	// feed (a block or a mute): the group's count drops by one and its
	// latest actors no longer name them; a group left with no actor is
	// removed, and the feed's counts follow. A group that stays keeps its
	// place (LatestID), even if its newest actor left: its cursor and the
	// unread count do not move. Each group changes in one step (or steps
	// that a re-run, or the owner's next operation, completes exactly
	// once); a re-run after a failure finishes the rest and changes
	// nothing more. It costs a read of the actor's groups in owner's feed,
	// not of the feed. A later Notify by actor counts them again.
	RemoveNotificationActor(ctx context.Context, owner, actor store.ID) (ActorRemoval, error)
}

// Outboxes reads several authors' outboxes at once: fan-out on read.
type Outboxes interface {
	// FindOutbox merges the outboxes of f.Authors: their messages within
	// f.Range that pass f.Pulled and f.Home, newest first, as inbox
	// entries, each saying whether its JobDeliver is still pending. It is
	// fan-out on read, in one call.
	FindOutbox(ctx context.Context, f OutboxFilter) ([]OutboxEntry, error)
	// CountOutbox counts the messages of f.Authors above f.After (NilID:
	// all of them) that pass f.Pulled and f.Home. It costs a scan of
	// the counted index entries.
	CountOutbox(ctx context.Context, f OutboxFilter) (int, error)
	// ListPullAuthors returns every user whose PulledCount is above zero.
	ListPullAuthors(ctx context.Context) ([]store.ID, error)
}

// Inboxes stores inboxes in the layout each job or filter names, and the records of where each message went.
type Inboxes interface {
	// DeliverInbox delivers d.Job's entry to each of d.Owners last seen at
	// or after d.ActiveSince, in layout d.Job.Layout, records where each
	// entry went (for FindDeliveries), and advances the stored job to
	// d.Cursor (or removes it when d.Done), all in one atomic step.
	//
	// LayoutEntries and LayoutBuckets add the entry and count it (total,
	// and unread if the message is newer than the read mark). LayoutCache
	// adds it only to owners whose cache is live at d.At, keeping the newest
	// d.CacheCap, and counts nothing; a cache's entries are delivered at
	// their message's creation, as fan-out on read shows them. It reports
	// every active owner (with NoCounts), since the item reaches their inbox
	// through fan-out on read.
	//
	// The chunk applies only if the stored job is still at d.Job.Cursor: a
	// chunk applied before changes nothing and returns no changes. It
	// returns NOT_FOUND if the job no longer exists (its message was deleted).
	DeliverInbox(ctx context.Context, d Delivery) ([]InboxChange, error)
	// InsertInbox adds to one owner's stored inbox (LayoutEntries or
	// LayoutBuckets) each of ins.Entries it does not hold yet, counts them,
	// records the deliveries, and ends ins.Job (JobFollow or JobRebuild;
	// ending a JobRebuild clears the owner's rebuilding flag), all in one
	// atomic step. It applies only if ins.Job is still stored, else it
	// changes nothing and returns no changes (NOT_FOUND if it is gone). It
	// returns one change per entry added.
	InsertInbox(ctx context.Context, ins Insertion) ([]InboxChange, error)
	// RemoveAuthorEntries removes every entry of r.Job.AuthorID from the
	// stored inbox of r.Job.OwnerID (an unfollow), fixing its counts, and
	// ends the job, under the rule of InsertInbox. It returns one change per
	// entry removed.
	RemoveAuthorEntries(ctx context.Context, r AuthorRemoval) ([]InboxChange, error)
	// RemoveOwnerEntries removes the entries of r.MessageIDs from the
	// stored inbox of r.Job.OwnerID (one chunk of a JobHideReposts),
	// fixing its counts (an entry no longer there changes nothing and
	// counts nothing), and advances the stored job to r.Cursor or removes
	// it when r.Done, under the rule of DeliverInbox: the chunk applies
	// only if the stored job is still at r.Job.Cursor. It returns one
	// change per entry removed.
	RemoveOwnerEntries(ctx context.Context, r OwnerRemoval) ([]InboxChange, error)
	// ReadInbox returns the entries of a stored inbox within f.Range, newest
	// first, with its counts. For LayoutNone and LayoutCache it returns no
	// entries, and counts with only ReadMark and Rebuilding set.
	ReadInbox(ctx context.Context, f InboxFilter) ([]store.InboxItem, store.InboxCounts, error)
	// MarkInboxRead moves the read mark to mark if that is newer, and
	// recounts unread (the entries above the mark) for the stored layouts.
	MarkInboxRead(ctx context.Context, owner store.ID, layout Layout, mark store.ID) (store.InboxCounts, error)
	// FindDeliveries returns where a message was delivered, up to limit refs
	// after the opaque cursor, and the cursor that follows them (nil at the end).
	FindDeliveries(ctx context.Context, messageID store.ID, cursor []byte, limit int) ([]InboxRef, []byte, error)
	// RemoveInboxEntries deletes r.Job's message from the inboxes of r.Refs
	// (found by FindDeliveries), adjusting each inbox's counts (a ref
	// already removed changes nothing), and advances the stored job to
	// r.Cursor or removes it when r.Done, in one atomic step, under the rule
	// of DeliverInbox.
	RemoveInboxEntries(ctx context.Context, r Removal) ([]InboxChange, error)
}

// GroupDeliverer is a backend that stores the chunks of several delivery
// jobs in one atomic step: under sustained posting most jobs are one small
// chunk, and one commit for many of them is what keeps delivery up with
// posting. Call it through DeliverInboxes, which falls back to one
// DeliverInbox per chunk.
type GroupDeliverer interface {
	// DeliverInboxes applies each of ds (chunks of distinct jobs) as
	// DeliverInbox would, in order, in one atomic step: a chunk sees the
	// counts of the chunks before it. A chunk whose job is gone is skipped
	// (its Delivered.Err is NOT_FOUND) without failing the others; one
	// applied before changes nothing. It returns one Delivered per chunk,
	// or an error: then the chunks may be partly stored (a backend without
	// transactions), and the same call again, or each chunk alone, ends
	// them with every owner counted once.
	DeliverInboxes(ctx context.Context, ds []Delivery) ([]Delivered, error)
}

// Delivered is what one chunk of DeliverInboxes did.
type Delivered struct {
	Changes []InboxChange
	Err     error // NOT_FOUND: the chunk's job no longer exists
}

// DeliverInboxes applies ds through b's GroupDeliverer, if it has one
// (looking through wrappers that Unwrap), or else one DeliverInbox per
// chunk, in order, each its own atomic step. It returns one Delivered per
// chunk applied: on an error, ds[len(result)] failed and the chunks after
// it were not tried; those before it are applied.
func DeliverInboxes(ctx context.Context, b Backend, ds []Delivery) ([]Delivered, error) {
	if g, ok := groupDelivererOf(b); ok {
		return g.DeliverInboxes(ctx, ds)
	}
	return deliverEach(ctx, b, ds)
}

func groupDelivererOf(b Backend) (GroupDeliverer, bool) {
	switch w := b.(type) {
	case GroupDeliverer:
		return w, true
	case interface{ Unwrap() Backend }:
		return groupDelivererOf(w.Unwrap())
	}
	return nil, false
}

// deliverEach is DeliverInboxes one chunk at a time.
func deliverEach(ctx context.Context, b Backend, ds []Delivery) ([]Delivered, error) {
	out := make([]Delivered, 0, len(ds))
	for _, d := range ds {
		changes, err := b.DeliverInbox(ctx, d)
		if err != nil && store.ErrorCode(err) != store.ENOTFOUND {
			return out, err
		}
		out = append(out, Delivered{Changes: changes, Err: err})
	}
	return out, nil
}

// Caches stores cached inboxes (LayoutCache).
type Caches interface {
	// ReadInboxCache returns owner's cached inbox, or nil if there is none
	// or it expired before now.
	ReadInboxCache(ctx context.Context, owner store.ID, now time.Time) (*InboxCache, error)
	// PutInboxCache merges c.Items into owner's cache, creating it if
	// needed: entries already there are kept once, the newest capacity
	// are kept (Complete becomes false if any is dropped), and Expires is
	// set. Put with no items extends a cache's life, or creates an empty
	// one that deliveries append to while it is being filled.
	PutInboxCache(ctx context.Context, c *InboxCache, capacity int) error
	// DropInboxCache removes owner's cache; a missing one is no error.
	DropInboxCache(ctx context.Context, owner store.ID) error
}

// Jobs stores durable fan-out jobs that are not stored with a message, and finds the pending ones.
type Jobs interface {
	// StoreJob stores a JobFollow, JobUnfollow or JobHideReposts.
	StoreJob(ctx context.Context, j *Job) error
	// FinishJob removes a stored job (a JobRebuild: clears the rebuilding
	// flag) that has nothing to write; a missing job is no error. If the
	// job's count step was already applied (a repeat after a crash), the
	// backend completes the job's stored plan before ending it.
	FinishJob(ctx context.Context, j *Job) error
	// MarkSeen sets user's last-seen time to at. If rebuild is not nil and
	// the user was last seen before inactiveBefore, it also sets the user's
	// rebuilding flag and stores rebuild (a JobRebuild), in the same atomic
	// step, and reports true.
	MarkSeen(ctx context.Context, user store.ID, at, inactiveBefore time.Time, rebuild *Job) (bool, error)
	// PendingJobs returns every stored job not yet done, oldest first (by
	// ID), except that a job already begun comes first: one with a chunk
	// stored (a non-empty cursor) or, on a backend shared by several
	// processes, the one whose chunk was last begun. It must finish before
	// any other job runs: a backfill or rebuild run before it would skip
	// its message as one it will still deliver, though its cursor may be
	// past the owner.
	PendingJobs(ctx context.Context) ([]*Job, error)
	// JobBacklog counts the stored jobs not yet done, up to limit (at
	// limit there may be more), and finds when the oldest was stored,
	// without reading every job: a process that does not run the jobs
	// asks it every few seconds, however long the backlog.
	JobBacklog(ctx context.Context, limit int) (JobBacklog, error)
}

// UserUpdate changes a user's profile; nil fields are left as they are, an
// empty Bio, WebsiteURL or AvatarURL clears it. The last-seen time changes
// through MarkSeen.
type UserUpdate struct {
	DisplayName *string
	Bio         *string
	WebsiteURL  *string
	AvatarURL   *string
	// Private makes the account private (true) or public (false).
	Private *bool
	// MessagesFrom sets who may send the user a direct message.
	MessagesFrom *store.MessagePolicy
}

// MessageFilter selects an author's messages.
type MessageFilter struct {
	AuthorID store.ID
	store.Range
}

// MessageUpdate changes a message; nil fields are left as they are.
type MessageUpdate struct {
	Text     *string
	EditedAt *time.Time
	Mentions *[]store.ID // an empty slice: mentions no one
}

// InboxFilter selects a page of one stored inbox.
type InboxFilter struct {
	Owner  store.ID
	Layout Layout
	store.Range
}

// OutboxFilter selects messages of several authors.
type OutboxFilter struct {
	Authors     []store.ID
	store.Range          // FindOutbox
	After       store.ID // CountOutbox: above this message (NilID: all)
	Pulled      PullFilter
	// Home, if not nil, leaves out the replies and reposts a home timeline
	// does not show.
	Home *HomeRule
	// PendingFor, with owner lanes, makes an entry's Pending mean that
	// the share of its JobDeliver for this owner's lane is still to run:
	// the share of another lane does not reach this owner.
	PendingFor store.ID
}

// HomeRule is the home timeline's rule for one reader, for replies
// (docs/design.md#replies-at-home) and reposts
// (docs/design.md#reposts-at-home). A reply to another user than its
// author is kept only if it replies to the reader or to a user in Shown
// (those the reader follows), or the reader wrote it; posts and replies
// to oneself are always kept. A repost is kept unless the reader wrote
// its original or Shown holds the original's author: the reader has the
// original at home already. The reader's own repost is kept unless it is
// marked hidden (store.Message.HomeHidden), the same rule decided when it
// was made, so reading one's own outbox needs no follow graph.
// Every author a filter reads must be in Shown or be the reader: a
// backend may know a reply to oneself by that alone. Make one with
// NewHomeRule.
//
// Hidden (set with Hide) are the users the reader blocks or mutes and
// those who block the reader: a message by one of them, or another
// user's repost of one of their messages, is never kept, whatever the
// rest of the rule says. The reader's own reposts follow the rule above:
// what one wrote stays on one's timeline, as on one's profile.
type HomeRule struct {
	Reader store.ID
	Shown  []store.ID
	Hidden []store.ID
	shown  map[store.ID]bool
	hidden map[store.ID]bool
}

// Hide sets the users whose messages, and reposts of whose messages, the
// rule leaves out, and returns r.
func (r *HomeRule) Hide(hidden []store.ID) *HomeRule {
	r.Hidden = hidden
	r.hidden = make(map[store.ID]bool, len(hidden))
	for _, id := range hidden {
		r.hidden[id] = true
	}
	return r
}

// Hides reports whether the rule hides every message of user.
func (r *HomeRule) Hides(user store.ID) bool { return r != nil && r.hidden[user] }

// NewHomeRule returns the rule for reader, who follows the users in shown.
func NewHomeRule(reader store.ID, shown []store.ID) *HomeRule {
	r := &HomeRule{Reader: reader, Shown: shown, shown: make(map[store.ID]bool, len(shown))}
	for _, id := range shown {
		r.shown[id] = true
	}
	return r
}

// Keeps reports whether the rule keeps a message by author that replies
// to a message of replyTo, or reposts a message of repostOf (NilID for a
// post) and is marked hidden from its author's home or not. A nil rule
// keeps everything.
func (r *HomeRule) Keeps(author, replyTo, repostOf store.ID, hidden bool) bool {
	if r == nil {
		return true
	}
	if author != r.Reader && (r.hidden[author] || (!repostOf.IsZero() && r.hidden[repostOf])) {
		return false
	}
	if !repostOf.IsZero() {
		if author == r.Reader {
			return !hidden
		}
		return repostOf != r.Reader && !r.shown[repostOf]
	}
	return replyTo.IsZero() || replyTo == author || author == r.Reader || replyTo == r.Reader || r.shown[replyTo]
}

// PullFilter selects messages by whether fan-out pushes them (Message.Pulled).
type PullFilter uint8

// Pull filters.
const (
	AnyMessage PullFilter = iota
	PushedOnly
	PulledOnly
)

// OutboxEntry is a message found by FindOutbox.
type OutboxEntry struct {
	store.InboxEntry
	// ReplyToAuthorID is the author of the message it replies to (NilID
	// for a post), for the rule of replies at home.
	ReplyToAuthorID store.ID
	// RepostOfID and RepostOfAuthorID name the message a repost stands
	// for (NilID unless the entry is a repost), so that a reader can drop
	// a repost of a message it already shows without loading either.
	RepostOfID       store.ID
	RepostOfAuthorID store.ID
	// HomeHidden is the repost's store.Message.HomeHidden: its author's
	// own home timeline does not show it.
	HomeHidden bool
	// Pending is true while the message's JobDeliver is stored: the job,
	// not a backfill, brings it to the author's followers.
	Pending bool
}

// Delivery is one chunk of a JobDeliver.
type Delivery struct {
	Job    *Job
	Owners []store.ID
	// ActiveSince skips owners last seen before it (zero: none skipped).
	ActiveSince time.Time
	At          time.Time
	CacheCap    int    // LayoutCache: the capacity of a cache
	Cursor      []byte // the job's progress after this chunk
	Done        bool   // the chunk is the job's last: remove the job
}

// Insertion adds entries to one owner's inbox: the whole of a JobFollow or
// a JobRebuild.
type Insertion struct {
	Job     *Job
	Entries []store.InboxEntry
	At      time.Time
}

// AuthorRemoval is the whole of a JobUnfollow.
type AuthorRemoval struct {
	Job *Job
}

// OwnerRemoval is one chunk of a JobHideReposts: the entries to remove
// from the job's owner's inbox, and the job's cursor after the chunk.
type OwnerRemoval struct {
	Job        *Job
	MessageIDs []store.ID
	Cursor     []byte
	Done       bool
}

// Removal is one chunk of a JobRetract.
type Removal struct {
	Job    *Job
	Refs   []InboxRef
	Cursor []byte
	Done   bool
}

// InboxCache is a cached inbox (strategy cache, after Inbox caches:
// docs/design.md#cached-inboxes): a user's newest entries in one record.
type InboxCache struct {
	Owner store.ID
	Items []store.InboxItem // newest first
	// Complete is true when Items held every entry of the inbox when the
	// cache was built, so that a page older than Items is empty rather than
	// a fall back to fan-out on read.
	Complete bool
	Expires  time.Time
}

// Leaser is implemented by backends that several Herald processes share.
// Only the holder of the fan-out lease runs stored jobs: deliveries then
// reach every inbox in one order, from one writer, which is what lets a
// backend without multi-document transactions make each step idempotent.
type Leaser interface {
	// TryFanoutLease takes or renews the fan-out lease for holder for ttl
	// and reports whether holder has it.
	TryFanoutLease(ctx context.Context, holder string, ttl time.Duration) (bool, error)
	// ReleaseFanoutLease gives the lease up if holder has it, so another
	// process can take it at once.
	ReleaseFanoutLease(ctx context.Context, holder string) error
}

// OwnerLanes is implemented by shared backends whose fan-out runs on N
// lanes partitioned by inbox owner (docs/design.md#owner-lanes): an
// owner's jobs run on its lane only (OwnerLane), and each lane runs its
// own share of every message job (Job.Lane), so every inbox keeps one
// writer. Each lane has a lease of its own, so the lanes spread over the
// processes sharing the backend.
type OwnerLanes interface {
	Leaser
	// FanoutLanes returns the number of lanes stored in the backend,
	// storing want first if none is.
	FanoutLanes(ctx context.Context, want int) (int, error)
	// TryLaneLease takes or renews lane's lease for holder for ttl and
	// reports whether holder has it.
	TryLaneLease(ctx context.Context, lane int, holder string, ttl time.Duration) (bool, error)
	// ReleaseLaneLease gives lane's lease up if holder has it.
	ReleaseLaneLease(ctx context.Context, lane int, holder string) error
	// Heartbeat records holder as live for ttl and returns the number of
	// live processes, holder included. A ttl of 0 ends holder's heartbeat
	// (a graceful stop), so the others count it out before it lapses.
	Heartbeat(ctx context.Context, holder string, ttl time.Duration) (int, error)
	// PendingLaneJobs is PendingJobs for one lane: the message jobs whose
	// share for lane is not done (each with Lane set) and the jobs of
	// lane's owners, the one that lane's last holder had begun first.
	PendingLaneJobs(ctx context.Context, lane int) ([]*Job, error)
}

// OwnerLane returns owner's lane among n: a stable hash (FNV-1a) of the
// owner, modulo n.
func OwnerLane(owner store.ID, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for _, b := range owner {
		h = (h ^ uint32(b)) * 16777619
	}
	return int(h % uint32(n))
}
