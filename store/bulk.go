package store

import (
	"context"
	"time"
)

// BulkLoader is implemented by backends that load a generated dataset in
// bulk (herald seed): records written as given, in large batches, with no
// fan-out jobs and no events, bypassing the Service. Each backend writes
// what its own primitives would have written for the same history: the
// user documents with their counters, both edge collections, the outbox,
// the inboxes of a stored layout with their counts and delivery records
// (so a later deletion retracts a loaded entry like a delivered one).
//
// Loading is idempotent: loading a batch again leaves what loading it once
// left, so an interrupted load resumes by loading the same batches again.
// A batch's records are final: a user's counters are the values after the
// whole dataset is loaded, and an inbox holds all its entries, so nothing
// is counted twice.
type BulkLoader interface {
	// LoadBulk writes b. Users are loaded in earlier batches than the
	// follows, messages and inboxes that name them. A handle held by
	// another user is CONFLICT, and that batch changes nothing.
	LoadBulk(ctx context.Context, b *Bulk) error
	// BulkProgress returns the value of the progress record name, last
	// stored with a batch by LoadBulk, or nil if there is none.
	BulkProgress(ctx context.Context, name string) ([]byte, error)
}

// Bulk is one batch of a bulk load. Any of its parts may be empty.
type Bulk struct {
	// Users are complete: counters, PasswordHash and LastSeenAt included.
	// Loading one replaces it, attributes included.
	Users []*User
	// Edges are follow edges; the counters they imply come with Users.
	Edges []Edge
	// Messages are stored in their authors' outboxes; the counters they
	// imply (MessageCount, PulledCount) come with Users.
	Messages []*Message
	// Inboxes are whole stored inboxes in Layout (LayoutEntries or
	// LayoutBuckets; other layouts store no entries and take none). Each
	// replaces its owner's counts: Total is the number of items, all of
	// them unread (no read mark), and its owner is not rebuilding.
	Layout  Layout
	Inboxes []BulkInbox
	// Progress, if not nil, is stored with the batch: in the same atomic
	// write where the backend has one, else after the batch's records.
	Progress *BulkProgress
}

// Edge is a follow edge: Follower follows Followee since At.
type Edge struct {
	Follower, Followee ID
	At                 time.Time
}

// BulkInbox is one owner's stored inbox. Items are newest first (by
// MessageID, as every inbox is ordered), each with its DeliveredAt.
type BulkInbox struct {
	Owner ID
	Items []InboxItem
}

// BulkProgress is a named record a bulk load keeps its progress in.
type BulkProgress struct {
	Name  string
	Value []byte
}
