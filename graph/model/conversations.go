package model

import "herald/store"

// Conversation is a conversation of the viewer's, with what the list of
// conversations read with it: a field the list did not read is read when
// selected.
type Conversation struct {
	*store.Conversation
	// Last is the newest message (nil: none) when LastKnown.
	Last      *store.ConversationMessage
	LastKnown bool
	// Unread is the viewer's unread count in it, when known.
	Unread *int
}

// ReadPosition is a member's read position in a conversation.
type ReadPosition struct {
	MemberID store.ID
	Seq      int
}

// ConversationEvent is a live change in one of the viewer's conversations,
// with what its type carries read as the event is sent.
type ConversationEvent struct {
	Type   ConversationEventType
	ConvID store.ConversationID
	// Edge is a MESSAGE's new edge; Message an EDITED's message.
	Edge    *ConversationMessageEdge
	Message *store.ConversationMessage
	// DeletedMessageID is a DELETED's message's global id.
	DeletedMessageID *string
	// MemberID is the reader of a READ, the member of a MEMBER_ADDED or
	// MEMBER_REMOVED; store.NilID otherwise.
	MemberID store.ID
	ReadSeq  *int
	// Conversation is a membership event's conversation, nil for the
	// member who left.
	Conversation *Conversation
	UnreadCount  int
	Cursor       string
}
