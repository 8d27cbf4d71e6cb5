package store

import (
	"strconv"
	"time"
)

// NotificationKind is what a notification tells its owner. The values are
// the GraphQL enum values.
type NotificationKind string

// Notification kinds.
const (
	// NotifyFollowed: a user followed the owner.
	NotifyFollowed NotificationKind = "FOLLOWED"
	// NotifyLiked: a user liked the owner's message.
	NotifyLiked NotificationKind = "LIKED"
	// NotifyReposted: a user reposted the owner's message.
	NotifyReposted NotificationKind = "REPOSTED"
	// NotifyReplied: a user replied to the owner's message; the group's
	// message is the reply.
	NotifyReplied NotificationKind = "REPLIED"
	// NotifyMentioned: a user's message mentions the owner; the group's
	// message is that message.
	NotifyMentioned NotificationKind = "MENTIONED"
	// NotifyFollowRequested: a user asked to follow the owner's private
	// account; grouped as follows are.
	NotifyFollowRequested NotificationKind = "FOLLOW_REQUESTED"
)

// NotificationGroupSpan is the time slot within which likes and reposts of
// one message, and follows, group into one notification. Slots are fixed,
// counted from the Unix epoch, so that a notice's group follows from the
// notice alone: a retried notice lands in the group its first try chose,
// with no state to read. Mastodon 4.3 uses 12 hours too, but from the hour
// its group started (kept in Redis), so its window slides; ours may split
// two likes a minute apart across a slot boundary.
const NotificationGroupSpan = 12 * time.Hour

// NotificationGroupKey is the key of the group a notice of kind joins:
// kind and target (the message; none for a follow or a follow request) and, for the kinds that
// group, the time slot of at. A reply or a mention is a group of its own:
// its key names its message, whose author is its one actor.
func NotificationGroupKey(kind NotificationKind, message ID, at time.Time) string {
	k := string(kind)
	follows := kind == NotifyFollowed || kind == NotifyFollowRequested
	if !follows {
		k += "-" + message.String()
	}
	if follows || kind == NotifyLiked || kind == NotifyReposted {
		k += "-" + strconv.FormatInt(at.UnixMilli()/NotificationGroupSpan.Milliseconds(), 10)
	}
	return k
}

// NotificationGroup is one entry of a user's notifications feed: the
// activities of one kind on one target within a slot (see
// NotificationGroupKey), by Count distinct actors.
type NotificationGroup struct {
	// ID is stable for the group's life (its first activity's ID), so a
	// client cache keyed by it updates in place when the group moves.
	ID    ID
	Owner ID
	Kind  NotificationKind
	Key   string
	// Message is the message concerned; NilID for NotifyFollowed and
	// NotifyFollowRequested.
	Message MessageKey
	// Count is the number of distinct actors.
	Count int
	// LatestActors are the newest actors, newest first, at most
	// LatestActorsShown.
	LatestActors []ID
	// LatestID is the newest actor's activity ID: the group's place in
	// the feed, newest first, and its cursor.
	LatestID ID
}

// LatestActorsShown is how many of a group's newest actors it keeps at hand.
const LatestActorsShown = 3

// LatestAt is when the group's newest activity happened.
func (g *NotificationGroup) LatestAt() time.Time { return g.LatestID.Time() }

// Unread reports whether the group changed since the owner's read mark.
func (g *NotificationGroup) Unread(c NotificationCounts) bool {
	return g.LatestID.Compare(c.ReadMark) > 0
}

// NotificationCounts are a feed's counts: groups in all, groups unread
// (their newest activity above ReadMark).
type NotificationCounts struct {
	Total, Unread int
	ReadMark      ID
}

// NotificationActor is one actor of a group: the user and the ID of their
// first activity in the group (its place in the actors list, newest
// first).
type NotificationActor struct {
	ID     ID
	UserID ID
}
