package storage

import (
	"context"
	"time"

	"herald/store"
)

// Conversations stores direct and group conversations
// (docs/design.md#conversations): each conversation with its members,
// admins, last sequence number and members' read positions; its messages
// keyed by (conversation, seq), so a page of history is one range; each
// user's conversation list, most recently active first, with the last
// message; and each user's read state (store.UnreadConversations), one
// record per user, so unread counts are one read. Every write is
// idempotent: a repeat after a failure completes it and counts nothing
// twice.
type Conversations interface {
	// CreateConversation stores group conversation c (its Members,
	// Admins, Name, CreatorID, CreatedAt) and puts it in each member's
	// list at c's ID (its creation). An existing one is CONFLICT.
	CreateConversation(ctx context.Context, c *store.Conversation) error
	// FindConversations returns the conversations of ids, aligned with
	// them, nil where there is none, in one read.
	FindConversations(ctx context.Context, ids []store.ConversationID) ([]*store.Conversation, error)
	// AppendConversationMessage stores m as the next message of its
	// conversation: it sets m.Seq to the conversation's last seq plus
	// one, stores m, moves m into every member's list (unless the list
	// holds a newer message of it already) and raises every member's
	// known last seq to m.Seq, the author's read position too (sending
	// reads the conversation), and returns the conversation after (its
	// members whom to tell). A member removed while the send runs keeps
	// no list entry or read state of it, whatever the interleaving. The
	// author must be a member, else NOT_FOUND and nothing changes. A
	// direct conversation (24-byte ID) is created, with its two users,
	// by its first message. Without transactions, the steps after the
	// first are a pending send that RecoverConversationSends finishes if
	// the sender stops before it does; readers never see a seq whose
	// message is missing for long.
	AppendConversationMessage(ctx context.Context, m *store.ConversationMessage) (*store.Conversation, error)
	// RecoverConversationSends finishes every pending send left by a
	// failed AppendConversationMessage stored before olderThan, and
	// returns the messages it finished (with their seqs), which no one
	// was told of. A backend whose sends are atomic has none.
	RecoverConversationSends(ctx context.Context, olderThan time.Time) ([]*store.ConversationMessage, error)
	// ListConversationMessages returns conv's messages within r, newest
	// first, deleted ones included (as tombstones).
	ListConversationMessages(ctx context.Context, conv store.ConversationID, r store.SeqRange) ([]*store.ConversationMessage, error)
	// UpdateConversationMessage edits (Text and EditedAt) or deletes
	// (Delete: its text removed, its place kept) the message seq of conv,
	// and the copy of it in members' lists where it is the last, and
	// returns it. A missing message is NOT_FOUND, and so is editing a
	// deleted one; deleting a deleted one repeats the update of the
	// copies (a repeat after a failure) and returns it.
	UpdateConversationMessage(ctx context.Context, conv store.ConversationID, seq uint64, upd ConversationMessageUpdate) (*store.ConversationMessage, error)
	// ChangeConversationMembers adds ch.Add (up to ch.MaxMembers members
	// in all: more is BAD_USER_INPUT, nothing changes) or removes
	// ch.Remove (from members and admins), puts the conversation in each
	// added member's list and takes it out of the removed member's list
	// and read state, and returns the conversation after. An added
	// member's read position starts at the conversation's last seq, so
	// the history before the join is not unread. Members already there,
	// or a removed one already gone, change nothing. A removal that
	// would leave members but no admin (the last admin leaves or is
	// removed) makes the longest-standing remaining member (the first of
	// Members) the admin, in the same atomic update of the conversation.
	// A missing conversation is NOT_FOUND.
	ChangeConversationMembers(ctx context.Context, conv store.ConversationID, ch MemberChange) (*store.Conversation, error)
	// ListConversations returns user's conversation list within r (its
	// From an entry's LastActivity), most recently active first. An entry
	// may outlive the membership by a failed removal: callers check it.
	ListConversations(ctx context.Context, user store.ID, r store.Range) ([]store.ConversationEntry, error)
	// MarkConversationRead raises user's read position in conv to seq
	// (never lowers it), in the user's read state and the conversation's
	// read receipts, and returns the user's read state after.
	MarkConversationRead(ctx context.Context, user store.ID, conv store.ConversationID, seq uint64) (store.UnreadConversations, error)
	// ReadUnreadConversations returns user's read state in every
	// conversation with unread messages: one read of one record.
	ReadUnreadConversations(ctx context.Context, user store.ID) (store.UnreadConversations, error)
}

// ConversationMessageUpdate edits or deletes a conversation message.
type ConversationMessageUpdate struct {
	Text     *string
	EditedAt time.Time
	Delete   bool
}

// MemberChange adds members to a conversation or removes one.
type MemberChange struct {
	Add        []store.ID
	Remove     store.ID
	MaxMembers int
	// At is when the change is made: an added member's list entry sits
	// there until a message comes.
	At time.Time
}
