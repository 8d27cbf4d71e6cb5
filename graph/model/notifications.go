package model

import "herald/store"

// NotificationGroup is a group of the viewer's notifications feed with the
// feed's counts as read with it, which tell whether the group is unread.
type NotificationGroup struct {
	store.NotificationGroup
	Counts store.NotificationCounts
}

// NotificationEvent is a live change in the viewer's notifications feed. It
// carries the group's id: the group resolves when the event is sent, as it
// is then.
type NotificationEvent struct {
	Type NotificationEventType
	// Group is the group of an ADDED or UPDATED event; store.NilID for
	// READ and REMOVED.
	Group store.ID
	// RemovedGroupID is the node id of a REMOVED event's group.
	RemovedGroupID *string
	// ReadMark is the feed's read mark after the change, which tells
	// whether the group is unread.
	ReadMark    store.ID
	UnreadCount int
	TotalCount  int
	// Cursor names the event, to resume after it.
	Cursor string
}
