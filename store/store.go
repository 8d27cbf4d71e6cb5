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
	// Attributes are the app's custom attributes, sorted by name.
	Attributes []Attribute
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

// InboxItem is an entry at its place in one owner's inbox. Seq is the
// owner's inbox sequence number, starting at 1; it orders the inbox and
// decides the bucket (bucket = (Seq-1)/BucketSize).
type InboxItem struct {
	InboxEntry
	Seq         uint64
	DeliveredAt time.Time
	// Message is filled by Service.Inbox; backends leave it nil.
	Message *Message
}

// InboxCounts are an inbox's counters, kept by the backend on every change.
// Seq is the last sequence number handed out, ReadSeq the Seq at the last
// mark-read; Total counts the entries present and Unread those above ReadSeq.
type InboxCounts struct {
	Seq     uint64
	ReadSeq uint64
	Total   int
	Unread  int
}

// InboxRef locates one delivered entry: its owner and sequence number.
type InboxRef struct {
	Owner ID
	Seq   uint64
}

// InboxChange reports one inbox changed by a delivery or a removal: the
// entry's place and the inbox's counts after the change.
type InboxChange struct {
	InboxRef
	Counts InboxCounts
}

// BucketSize is the number of entries in one inbox bucket (seeds 000 and 002):
// the newest 50 entries span at most 2 buckets, the newest 100 at most 3.
const BucketSize = 50

// JobKind says what a fan-out job does.
type JobKind uint8

// Job kinds.
const (
	// JobDeliver delivers a new message to its author's followers.
	JobDeliver JobKind = 1
	// JobRetract removes a deleted message from every inbox it reached.
	JobRetract JobKind = 2
)

// Job is durable fan-out work, stored with the change that caused it (the new
// message, or its deletion) and advanced atomically with each chunk it
// delivers, so a crash at any moment neither loses nor repeats a delivery.
// A message has at most one job at a time.
type Job struct {
	Kind      JobKind
	MessageID ID
	AuthorID  ID
	CreatedAt time.Time // the message's creation time, copied into entries
	// Cursor is the progress so far, opaque to everything but the step that
	// made it: the last follower delivered to, or the position in the
	// message's delivery records. Empty means not started.
	Cursor []byte
}

// Key returns the key of the job's message.
func (e InboxEntry) Key() MessageKey { return MessageKey{ID: e.MessageID, AuthorID: e.AuthorID} }

// Entry returns the inbox entry the job delivers.
func (j *Job) Entry() InboxEntry {
	return InboxEntry{MessageID: j.MessageID, AuthorID: j.AuthorID, CreatedAt: j.CreatedAt}
}
