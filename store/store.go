// Package store is Herald's domain: the users, messages, inbox items and
// events the API speaks of, their IDs, the ranges that page them, the rules
// that validate them and the errors (with their codes) every layer returns.
// It imports nothing of Herald's. The use cases are in store/service, the
// storage contract in store/storage, live events in store/pubsub.
package store

import "time"

// User is a Herald account. Counters are kept by the backend as the follow
// graph and the outbox change; they are never computed by scanning.
type User struct {
	ID          ID
	Handle      string // lowercase, 3–30 of [a-z0-9_], unique
	DisplayName string
	// Bio, WebsiteURL and AvatarURL are the profile the user wrote
	// (updateProfile); empty when unset.
	Bio            string
	WebsiteURL     string
	AvatarURL      string
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
	// KeptToken is the one token a revocation of all kept (the session
	// that changed the password): valid though issued under an older
	// TokenVersion.
	KeptToken string
	// DeletedAt is when the account was deleted (deleteAccount); zero for
	// a live account. A deleted user is read only by ListDeletedUsers.
	DeletedAt time.Time
	// Private makes the account private (Mastodon's locked accounts): a
	// follow is a request it answers, and only the users it approved see
	// its messages, likes and follow lists.
	Private bool
	// NeverBlocked is set when the account is created and cleared for
	// good by the first block of it: a reader nobody has ever blocked
	// needs no read of who blocks them. Absent (false) on accounts stored
	// before it existed, which are read as maybe blocked.
	NeverBlocked bool
	// MessagesFrom says who may send the user a direct message.
	MessagesFrom MessagePolicy
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

// MessageKind tells a post from a reply and a repost. The values are the
// GraphQL enum values.
type MessageKind string

// Message kinds.
const (
	KindPost  MessageKind = "POST"
	KindReply MessageKind = "REPLY"
	// KindRepost is a repost: a message with no text of its own, stored in
	// the reposter's outbox and delivered like a post, that stands for the
	// message it names (RepostOfID). It sits in timelines at the time it
	// was made, keyed by its own ID.
	KindRepost MessageKind = "REPOST"
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
	// Mentions are the users @mentioned in Text (see ParseMentions), in
	// the order first mentioned, resolved when the message was posted or
	// last edited: a handle that named no user then mentions no one.
	Mentions []ID
	// LikeCount is how many users like the message, kept by the backend
	// with each like and unlike; never counted by scanning.
	LikeCount int
	// RootID and RootAuthorID name the first message of a reply's thread
	// (the post that the chain of replies started from); NilID for a post.
	RootID       ID
	RootAuthorID ID
	// ReplyCount is how many live replies answer the message, kept by the
	// backend as replies are created and deleted; never counted by scanning.
	ReplyCount int
	// RepostOfID and RepostOfAuthorID name the message a repost stands
	// for (never itself a repost); NilID unless Kind is KindRepost.
	RepostOfID       ID
	RepostOfAuthorID ID
	// HomeHidden marks a repost its author's own home timeline does not
	// show: when it was made, its author wrote the message reposted or
	// followed that message's author, so had the original at home. It is
	// decided once, so a later follow or unfollow does not change it.
	HomeHidden bool
	// RepostCount is how many live reposts the message has, kept by the
	// backend as reposts are created and deleted, like ReplyCount.
	RepostCount int
}

// Like is one user's like of one message. Its ID is made at the time of
// the like, so lists of likes page newest first by it.
type Like struct {
	ID        ID
	UserID    ID
	MessageID ID
	AuthorID  ID // the message's author, to find the message by key
	CreatedAt time.Time
}

// Key returns the key of the liked message.
func (l Like) Key() MessageKey { return MessageKey{ID: l.MessageID, AuthorID: l.AuthorID} }

// Key returns the key that finds m in storage.
func (m *Message) Key() MessageKey { return MessageKey{ID: m.ID, AuthorID: m.AuthorID} }

// RepliesToOther reports whether m is a reply to another user than its
// author: one that a home timeline shows only to the readers who follow
// that user too (docs/design.md#replies-at-home).
func (m *Message) RepliesToOther() bool {
	return m.Kind == KindReply && m.ReplyToAuthorID != m.AuthorID
}

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
	// Original is, when Message is a repost, the message it reposts,
	// which the timeline shows in its place; filled by Service.Inbox.
	Original *Message
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
