// Package store is Herald's domain: users, the follow graph, messages and
// inboxes, the storage contract every backend implements (Backend), the live
// event contract (Events), and the timeline strategies and fan-out written
// once above those contracts (Service). It imports no storage driver.
package store

import "time"

// User is a Herald account. Counters are kept by the backend as the follow
// graph and the outbox change; they are never computed by scanning.
type User struct {
	ID             ID
	Handle         string // lowercase, 3–30 of [a-z0-9_], unique
	DisplayName    string
	PasswordHash   []byte
	CreatedAt      time.Time
	LastSeenAt     time.Time
	FollowerCount  int
	FollowingCount int
	MessageCount   int
	// PulledCount counts the user's messages that are Pulled (not deleted).
	PulledCount int
	// Attributes are the app's custom attributes, sorted by name.
	Attributes []Attribute
	// TokenVersion goes up when every token of the user is ended
	// (logOutEverywhere): a token issued under an older one is refused.
	TokenVersion int
	// RevokedTokens are the user's tokens ended one by one (logOut) and
	// not yet expired.
	RevokedTokens []RevokedToken
}

// Attribute is a custom user attribute: any name the app chooses, a string value.
type Attribute struct {
	Name  string
	Value string
}

// AttributeChange sets (Value non-nil) or removes (Value nil) one attribute.
type AttributeChange struct {
	Name  string
	Value *string
}

// MessageKind tells a post from a reply. The values are the GraphQL enum values.
type MessageKind string

// Message kinds.
const (
	KindPost  MessageKind = "POST"
	KindReply MessageKind = "REPLY"
)

// Message is stored once, in its author's outbox. Inbox entries point at it,
// so an edit or a deletion shows in every inbox at once.
type Message struct {
	ID        ID
	AuthorID  ID
	Text      string
	Kind      MessageKind
	ReplyToID ID // NilID unless Kind is KindReply
	// ReplyToAuthorID is the replied-to message's author, so that loading
	// the replied-to message can name its author, which is how a sharded
	// backend finds it without asking every shard.
	ReplyToAuthorID ID
	CreatedAt       time.Time
	EditedAt        *time.Time
	// Pulled marks a message that fan-out does not push into inboxes:
	// under strategy hybrid, a post by an author with more followers than
	// the celebrity threshold. Readers merge it in from the outbox.
	Pulled bool
}

// Key returns the key that finds m in storage.
func (m *Message) Key() MessageKey { return MessageKey{ID: m.ID, AuthorID: m.AuthorID} }

// MessageKey finds a message: its ID and, when known, its author. Messages
// are placed by author (a sharded backend keeps an author's messages
// together), so a lookup that knows the author asks one place only; NilID
// means unknown.
type MessageKey struct {
	ID       ID
	AuthorID ID
}

// InboxEntry is what fan-out delivers to a follower: a pointer to the message
// with the fields needed to merge, shard and order without loading it.
type InboxEntry struct {
	MessageID ID
	AuthorID  ID
	CreatedAt time.Time
}

// Key returns the key of the entry's message.
func (e InboxEntry) Key() MessageKey { return MessageKey{ID: e.MessageID, AuthorID: e.AuthorID} }

// InboxItem is an entry as one owner's inbox holds it. Every inbox, under
// every strategy, is ordered by MessageID (the message's time), newest
// first, whatever order entries arrived in: follow backfills and rebuilds
// bring older messages after newer ones, and fan-out on read merges by time.
type InboxItem struct {
	InboxEntry
	// DeliveredAt is when the entry reached the inbox; the message's
	// creation time where the strategy reads it from outboxes.
	DeliveredAt time.Time
	// Message is filled by Service.Inbox; backends leave it nil.
	Message *Message
}

// InboxCounts are an inbox's counters. Total counts the items in the inbox;
// Unread those newer than ReadMark, the newest message at the last
// markInboxRead. Rebuilding is true while a returning user's inbox is being
// rebuilt. Backends keep Total and Unread for the layouts that store
// entries, on every change; for the others the Service computes them.
type InboxCounts struct {
	Total      int
	Unread     int
	ReadMark   ID
	Rebuilding bool
}

// InboxRef locates one stored entry: its owner and, in the bucket layout,
// the bucket holding it (NilID in the others).
type InboxRef struct {
	Owner  ID
	Bucket ID
}

// InboxChange reports one inbox changed by a delivery or a removal: where
// the entry is, its message, and the inbox's counts after the change, unless
// NoCounts (the layout keeps none: the reader computes them).
type InboxChange struct {
	InboxRef
	MessageID ID
	Counts    InboxCounts
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

// Job kinds. Every kind is stored and runs on the fan-out's one ordered
// lane.
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
)

// Job is durable fan-out work, stored with the change that caused it (the new
// message, its deletion, a follow, an unfollow, a user's return) and
// advanced atomically with each chunk it writes, so a crash at any moment
// neither loses nor repeats a delivery. A message has at most one job at a
// time.
type Job struct {
	// ID names the job: the message's ID for JobDeliver and JobRetract, the
	// owner's for JobRebuild, an ID of its own for JobFollow and JobUnfollow.
	ID     ID
	Kind   JobKind
	Layout Layout // the layout the job writes, fixed when it is stored
	// MessageID, AuthorID and CreatedAt are the message's (JobDeliver,
	// JobRetract); AuthorID is the followee for JobFollow and JobUnfollow.
	MessageID ID
	AuthorID  ID
	OwnerID   ID // the inbox owner of JobFollow, JobUnfollow and JobRebuild
	CreatedAt time.Time
	// Cursor is the progress so far, opaque to everything but the step that
	// made it: the last follower delivered to, or the position in the
	// message's delivery records. Empty means not started.
	Cursor []byte
}

// Entry returns the inbox entry a JobDeliver delivers.
func (j *Job) Entry() InboxEntry {
	return InboxEntry{MessageID: j.MessageID, AuthorID: j.AuthorID, CreatedAt: j.CreatedAt}
}
