package storage

import (
	"time"

	"herald/store"
)

// InboxRef locates one stored entry: its owner and, in the bucket layout,
// the bucket holding it (NilID in the others).
type InboxRef struct {
	Owner  store.ID
	Bucket store.ID
}

// InboxChange reports one inbox changed by a delivery or a removal: where
// the entry is, its message, and the inbox's counts after the change, unless
// NoCounts (the layout keeps none: the reader computes them).
type InboxChange struct {
	InboxRef
	MessageID store.ID
	Counts    store.InboxCounts
	NoCounts  bool
}

// BucketSize is the number of entries in one inbox bucket (Social Inboxes,
// Inbox caches; docs/design.md#buckets): the newest 50 entries span at most
// 2 buckets, the newest 100 at most 3.
const BucketSize = 50

// Layout is how a backend stores inboxes. Each strategy uses one; every
// backend supports all of them side by side.
type Layout uint8

// Inbox layouts.
const (
	// LayoutNone stores no entries, only the read mark and rebuilding
	// flag: strategy read.
	LayoutNone Layout = iota
	// LayoutEntries stores one record per entry, keyed (owner, message):
	// strategy write.
	LayoutEntries
	// LayoutBuckets stores records of about BucketSize entries per owner:
	// strategies bucket and hybrid.
	LayoutBuckets
	// LayoutCache stores one capped record of the newest entries, only for
	// users who have one: strategy cache.
	LayoutCache
)

// Stores reports whether the layout stores every entry of an inbox, with
// its counts.
func (l Layout) Stores() bool { return l == LayoutEntries || l == LayoutBuckets }

// JobKind says what a fan-out job does.
type JobKind uint8

// Job kinds. Every kind is stored and runs on one of the fan-out's
// ordered lanes: an author's messages' jobs and the follows and unfollows
// of that author on the author's lane.
const (
	// JobDeliver delivers a new message to its author's followers.
	JobDeliver JobKind = 1
	// JobRetract removes a deleted message from every inbox it reached.
	JobRetract JobKind = 2
	// JobFollow brings the followee's (AuthorID) recent messages into the
	// follower's (OwnerID) inbox.
	JobFollow JobKind = 3
	// JobUnfollow removes the unfollowed author's (AuthorID) entries from
	// the former follower's (OwnerID) inbox.
	JobUnfollow JobKind = 4
	// JobRebuild rebuilds a returning user's (OwnerID) inbox from their
	// followees' recent messages. A backend stores it as the user's
	// rebuilding flag (see Backend.MarkSeen).
	JobRebuild JobKind = 5
	// JobHideReposts removes from the owner's (OwnerID) stored inbox the
	// other users' reposts of messages by a user the owner now hides
	// (AuthorID: blocked, muted, or blocking the owner), delivered before
	// the block or mute; it walks the inbox in chunks, its cursor the last
	// entry looked at.
	JobHideReposts JobKind = 6
)

// Job is durable fan-out work, stored with the change that caused it (the new
// message, its deletion, a follow, an unfollow, a user's return) and
// advanced atomically with each chunk it writes, so a crash at any moment
// neither loses nor repeats a delivery. A message has at most one job at a
// time.
type Job struct {
	// ID names the job: the message's ID for JobDeliver and JobRetract, the
	// owner's for JobRebuild, an ID of its own for JobFollow and JobUnfollow.
	ID     store.ID
	Kind   JobKind
	Layout Layout // the layout the job writes, fixed when it is stored
	// MessageID, AuthorID and CreatedAt are the message's (JobDeliver,
	// JobRetract); AuthorID is the followee for JobFollow and JobUnfollow.
	MessageID store.ID
	AuthorID  store.ID
	OwnerID   store.ID // the inbox owner of JobFollow, JobUnfollow and JobRebuild
	CreatedAt time.Time
	// ReplyToAuthorID is, for a JobDeliver of a reply, the author of the
	// message replied to: a reply to another user reaches only the
	// followers who follow that user too (docs/design.md#replies-at-home).
	ReplyToAuthorID store.ID
	// RepostOfAuthorID is, for a JobDeliver of a repost, the author of the
	// message reposted: a follower who follows that author, or is that
	// author, has the original at home and does not get the repost
	// (docs/design.md#reposts-at-home).
	RepostOfAuthorID store.ID
	// Cursor is the progress so far, opaque to everything but the step that
	// made it: the last follower delivered to, or the position in the
	// message's delivery records. Empty means not started.
	Cursor []byte
	// Lane is, with owner lanes (OwnerLanes), the lane whose share of a
	// JobDeliver or JobRetract this is: the share that reaches the owners
	// of that lane. Zero otherwise, and for the jobs of one owner.
	Lane int
}

// JobBacklog is what Jobs.JobBacklog reports of the stored jobs not done.
type JobBacklog struct {
	// Jobs is their number, counted up to the limit asked: at the limit,
	// at least that many.
	Jobs int
	// Oldest is when the oldest of them was stored, its CreatedAt, except
	// for a JobRetract, whose CreatedAt is its message's: for that one,
	// when the message was deleted, or, on a backend that does not record
	// it, when the backend first counted the job. Zero without jobs.
	Oldest time.Time
}

// Entry returns the inbox entry a JobDeliver delivers.
func (j *Job) Entry() store.InboxEntry {
	return store.InboxEntry{MessageID: j.MessageID, AuthorID: j.AuthorID, CreatedAt: j.CreatedAt}
}
