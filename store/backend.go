package store

import (
	"context"
	"time"
)

// Backend is the storage contract. Each method is one round trip to storage
// and is safe for concurrent use. Physical layout (keys, documents, buckets,
// indexes) is private to each implementation; every backend passes the
// conformance suite in store/storetest.
//
// Reads of missing objects return NOT_FOUND, except the batch reads
// (FindUsersByIDs, FindMessagesByKeys), which return a slice aligned with the
// keys and nil where an object is missing or deleted.
type Backend interface {
	// CreateUser stores a new user. The handle must be lowercase; a taken
	// handle is CONFLICT.
	CreateUser(ctx context.Context, u *User) error
	FindUserByID(ctx context.Context, id ID) (*User, error)
	FindUsersByIDs(ctx context.Context, ids []ID) ([]*User, error)
	FindUserByHandle(ctx context.Context, handle string) (*User, error)
	UpdateUser(ctx context.Context, id ID, upd UserUpdate) (*User, error)
	// SetAttributes applies changes to a user's custom attributes, names
	// stored under name-store tokens, and returns the user. More than
	// MaxAttributes attributes is BAD_USER_INPUT, and nothing changes.
	SetAttributes(ctx context.Context, id ID, changes []AttributeChange) (*User, error)
	// FindUsersByAttribute returns up to limit users whose attribute name has
	// exactly value, in ID order after the given ID.
	FindUsersByAttribute(ctx context.Context, name, value string, after ID, limit int) ([]*User, error)
	// CountUsersByAttribute counts the users whose attribute name has
	// exactly value. It may cost a scan of the matching index entries.
	CountUsersByAttribute(ctx context.Context, name, value string) (int, error)

	// Follow makes follower follow followee, both edges and both counters in
	// one atomic step. It reports false if the edge already existed (nothing
	// changes). Unfollow is the reverse. Both return NOT_FOUND for an unknown user.
	Follow(ctx context.Context, follower, followee ID, at time.Time) (bool, error)
	Unfollow(ctx context.Context, follower, followee ID) (bool, error)
	// FindFollowing reports, for each target, whether follower follows it.
	FindFollowing(ctx context.Context, follower ID, targets []ID) ([]bool, error)
	// ListFollowers returns up to limit followers of user in ID order,
	// starting after the given ID (NilID: from the start). Only IDs: a
	// backend answers from the edge index alone.
	ListFollowers(ctx context.Context, user, after ID, limit int) ([]ID, error)
	// ListFollowing returns up to limit users that user follows, in ID order.
	ListFollowing(ctx context.Context, user, after ID, limit int) ([]ID, error)

	// CreateMessage stores m in its author's outbox, increments the author's
	// message count, and stores job (if not nil) in the same atomic step.
	CreateMessage(ctx context.Context, m *Message, job *Job) error
	// FindMessageByID returns NOT_FOUND for a deleted message.
	FindMessageByID(ctx context.Context, id ID) (*Message, error)
	FindMessagesByKeys(ctx context.Context, keys []MessageKey) ([]*Message, error)
	// FindMessages returns an author's messages, newest first.
	FindMessages(ctx context.Context, f MessageFilter) ([]*Message, error)
	UpdateMessage(ctx context.Context, id ID, upd MessageUpdate) (*Message, error)
	// DeleteMessage removes the message from its author's outbox, decrements
	// the author's message count, cancels the message's pending job and stores
	// retract (if not nil) in its place, in one atomic step. A delivery
	// racing with it either lands before (and is retracted) or fails.
	DeleteMessage(ctx context.Context, id ID, retract *Job) error

	// DeliverInbox appends d.Job's entry to the inbox of each of d.Owners,
	// taking the next sequence number of each inbox, updating its counts and
	// recording where the entry went (for FindDeliveries), and advances the
	// stored job to d.Cursor (or removes it when d.Done), all in one atomic
	// step. The chunk applies only if the stored job is still at d.Job.Cursor:
	// a chunk applied before changes nothing and returns no changes. It
	// returns NOT_FOUND if the job no longer exists (its message was deleted).
	DeliverInbox(ctx context.Context, d Delivery) ([]InboxChange, error)
	// ReadInbox returns up to f.Limit entries of an inbox, newest first,
	// below f.Before (0: from the newest), with the inbox's counts.
	ReadInbox(ctx context.Context, f InboxFilter) ([]InboxItem, InboxCounts, error)
	// MarkInboxRead sets the read mark to the newest entry.
	MarkInboxRead(ctx context.Context, owner ID) (InboxCounts, error)
	// FindDeliveries returns where a message was delivered, up to limit refs
	// after the opaque cursor, and the cursor that follows them (nil at the end).
	FindDeliveries(ctx context.Context, messageID ID, cursor []byte, limit int) ([]InboxRef, []byte, error)
	// RemoveInboxEntries deletes entries found by FindDeliveries, adjusting
	// each inbox's counts (a ref already removed changes nothing), and
	// advances the stored job to r.Cursor or removes it when r.Done, in one
	// atomic step, under the same rule as DeliverInbox: it applies only if the
	// stored job is still at r.Job.Cursor, and returns NOT_FOUND if the job
	// no longer exists.
	RemoveInboxEntries(ctx context.Context, r Removal) ([]InboxChange, error)

	// PendingJobs returns every stored job not yet done, oldest first; a
	// backend shared by several processes puts first the job whose chunk
	// was last begun, which must finish before any other job runs.
	PendingJobs(ctx context.Context) ([]*Job, error)

	// Close releases the backend. No method may be called after it.
	Close() error
}

// UserUpdate changes a user; nil fields are left as they are.
type UserUpdate struct {
	DisplayName *string
	LastSeenAt  *time.Time
}

// MessageFilter selects an author's messages.
type MessageFilter struct {
	AuthorID ID
	Before   ID // NilID: from the newest
	Limit    int
}

// MessageUpdate changes a message; nil fields are left as they are.
type MessageUpdate struct {
	Text     *string
	EditedAt *time.Time
}

// InboxFilter selects a page of one inbox.
type InboxFilter struct {
	Owner  ID
	Before uint64 // sequence number; 0: from the newest
	Limit  int
}

// Delivery is one chunk of a JobDeliver.
type Delivery struct {
	Job    *Job
	Owners []ID
	At     time.Time
	Cursor []byte // the job's progress after this chunk
	Done   bool   // the chunk is the job's last: remove the job
}

// Removal is one chunk of a JobRetract.
type Removal struct {
	Job    *Job
	Refs   []InboxRef
	Cursor []byte
	Done   bool
}

// Leaser is implemented by backends that several Herald processes share.
// Only the holder of the fan-out lease runs stored jobs: deliveries then
// reach every inbox in one order, from one writer, which is what lets a
// backend without multi-document transactions make each step idempotent.
type Leaser interface {
	// TryFanoutLease takes or renews the fan-out lease for holder for ttl
	// and reports whether holder has it.
	TryFanoutLease(ctx context.Context, holder string, ttl time.Duration) (bool, error)
	// ReleaseFanoutLease gives the lease up if holder has it, so another
	// process can take it at once.
	ReleaseFanoutLease(ctx context.Context, holder string) error
}
