package store

import "time"

// EventType says what happened in an inbox. The values are the GraphQL enum values.
type EventType string

// Inbox event types.
const (
	// EventAdded: an item arrived in the inbox.
	EventAdded EventType = "ADDED"
	// EventEdited: a message in the inbox was edited.
	EventEdited EventType = "EDITED"
	// EventDeleted: a message in the inbox no longer exists (its author
	// deleted it).
	EventDeleted EventType = "DELETED"
	// EventRemoved: an item left the inbox, though its message still
	// exists (its owner unfollowed the author).
	EventRemoved EventType = "REMOVED"
	// EventRead: the inbox was marked read.
	EventRead EventType = "READ"
	// EventSessionsRevoked is not an inbox event: it is published on
	// SessionsTopic when tokens of the user Subject were ended, so that
	// every process forgets what it knew of them and closes the sockets
	// they opened.
	EventSessionsRevoked EventType = "SESSIONS_REVOKED"
	// EventNotified is not an inbox event: a group of the user's
	// notifications feed (Group) was created or gained an actor. Counts
	// are the feed's counts (NotificationCounts) after the change.
	EventNotified EventType = "NOTIFIED"
	// EventNotificationsRead: the user's notifications were marked read;
	// Counts are the feed's counts after.
	EventNotificationsRead EventType = "NOTIFICATIONS_READ"
	// EventNotificationRemoved: group Group of the user's notifications
	// feed is gone (its only actor was blocked or muted).
	EventNotificationRemoved EventType = "NOTIFICATION_REMOVED"
	// EventNotificationUpdated: group Group lost an actor (blocked or
	// muted) and changed in place: its count and latest actors, not its
	// place in the feed.
	EventNotificationUpdated EventType = "NOTIFICATION_UPDATED"

	// Conversation events are published to every member of the
	// conversation Conversation.ID (UserID the member told).
	//
	// EventConversationMessage: message MessageID (seq Conversation.Seq,
	// by AuthorID) was added.
	EventConversationMessage EventType = "CONVERSATION_MESSAGE"
	// EventConversationMessageEdited: message MessageID (seq
	// Conversation.Seq) was edited; EventConversationMessageDeleted: deleted (its place kept).
	EventConversationMessageEdited  EventType = "CONVERSATION_MESSAGE_EDITED"
	EventConversationMessageDeleted EventType = "CONVERSATION_MESSAGE_DELETED"
	// EventConversationRead: member Subject has read up to
	// Conversation.Seq (a read
	// receipt, and the reader's own unread count on its other devices).
	EventConversationRead EventType = "CONVERSATION_READ"
	// EventConversationMemberAdded and EventConversationMemberRemoved:
	// Subject joined or left the conversation (was added or removed, or
	// left); the removed member is told too, and has access no more.
	EventConversationMemberAdded   EventType = "CONVERSATION_MEMBER_ADDED"
	EventConversationMemberRemoved EventType = "CONVERSATION_MEMBER_REMOVED"
)

// Conversational reports whether t is an event of a conversation, which
// inbox and notification subscriptions skip.
func (t EventType) Conversational() bool {
	switch t {
	case EventConversationMessage, EventConversationMessageEdited, EventConversationMessageDeleted,
		EventConversationRead, EventConversationMemberAdded, EventConversationMemberRemoved:
		return true
	}
	return false
}

// Notification reports whether t is an event of the notifications feed,
// which inbox subscriptions skip.
func (t EventType) Notification() bool {
	switch t {
	case EventNotified, EventNotificationsRead, EventNotificationRemoved, EventNotificationUpdated:
		return true
	}
	return false
}

// Event is a change in one user's inbox, published after the change is
// stored. Counts are the inbox's counts after the change, except for
// EventEdited, which leaves them zero: an edit changes no count, and its
// publisher does not read them.
type Event struct {
	Type      EventType
	UserID    ID // the inbox owner
	MessageID ID // NilID for EventRead
	AuthorID  ID // the message's author, to find it by key; NilID for EventRead
	Counts    InboxCounts
	// DeliveredAt is when an EventAdded's item reached the inbox, as the
	// inbox's pages show it (InboxItem.DeliveredAt).
	DeliveredAt time.Time
	// NoCounts is true when the publisher did not know the counts (a
	// strategy that computes them at read time): subscribers read them.
	NoCounts bool
	// Subject is the user an event on SessionsTopic concerns.
	Subject ID
	// Group is the notification group of an EventNotified,
	// EventNotificationRemoved or EventNotificationUpdated.
	Group ID
	// Conversation is a conversation event's conversation and seq; nil
	// for every other event (a pointer, so that the inbox events a hub
	// retains do not pay for the fields). Read only: the events of one
	// change share it.
	Conversation *ConversationRef
	// Position is where the event stands in the stream its hub delivers,
	// set by the hub (or, on MongoDB, by the events document that carried
	// it): a subscription resumes after the event a position names.
	Position EventPosition
}

// ConversationRef is what a conversation event concerns: the
// conversation and the seq of its message, or the read position of an
// EventConversationRead (0 for membership events).
type ConversationRef struct {
	ID  ConversationID
	Seq uint64
}

// EventPosition names one event of a hub's stream. It is unique, the same
// in every process that receives the event, and says nothing of order:
// only the hub that retained the events knows which came after it.
type EventPosition struct {
	// Batch is the id of the events document that carried the event
	// (MongoDB), or the epoch of the process's hub (in process).
	Batch ID
	// Index is the event's index in its document (MongoDB), or its
	// sequence number in the hub's epoch (in process).
	Index uint64
}

// IsZero reports whether p names no event.
func (p EventPosition) IsZero() bool { return p == EventPosition{} }

// IsInbox reports whether t is one of the types the inboxEvents
// subscription delivers.
func (t EventType) IsInbox() bool {
	switch t {
	case EventAdded, EventEdited, EventDeleted, EventRemoved, EventRead:
		return true
	}
	return false
}
