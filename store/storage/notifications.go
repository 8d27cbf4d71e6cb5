package storage

import "herald/store"

// Notice is one activity to notify its owner of.
type Notice struct {
	Owner store.ID
	Kind  store.NotificationKind
	// Key is the group the activity joins (store.NotificationGroupKey).
	Key   string
	Actor store.ID
	// Message is the message concerned (NilID for a follow).
	Message store.MessageKey
	// ID is the activity's ID, made from its time: the group's ID if the
	// notice creates it, and its LatestID if the actor is new to it. A
	// retry passes the same ID.
	ID store.ID
}

// NotifyResult is what Notify did.
type NotifyResult struct {
	Group   store.NotificationGroup
	Counts  store.NotificationCounts
	Changed bool
}

// ActorRemoval is what RemoveNotificationActor did: the groups it removed
// (the actor was their only one) and those it changed in place, and the
// feed's counts after.
type ActorRemoval struct {
	Removed []store.ID
	Updated []store.ID
	Counts  store.NotificationCounts
}
