package storage

import (
	"context"
	"time"

	"herald/store"
)

// BulkLoader is implemented by backends that load a generated dataset in
// bulk (herald seed): records written as given, in large batches, with no
// fan-out jobs, no notifications and no events, bypassing the Service.
// Each backend writes what its own primitives would have written for the
// same history: the user documents with their counters, both edge
// collections, the outbox, the likes as both lists and the pair's record,
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
	// follows, messages, likes and inboxes that name them. A handle held
	// by another user is CONFLICT, and that batch changes nothing.
	LoadBulk(ctx context.Context, b *Bulk) error
	// BulkProgress returns the value of the progress record name, last
	// stored with a batch by LoadBulk, or nil if there is none.
	BulkProgress(ctx context.Context, name string) ([]byte, error)
}

// Bulk is one batch of a bulk load. Any of its parts may be empty.
type Bulk struct {
	// Users are complete: counters, PasswordHash and LastSeenAt included.
	// Loading one replaces it, attributes included.
	Users []*store.User
	// Edges are follow edges; the counters they imply come with Users.
	Edges []Edge
	// Messages are stored in their authors' outboxes; the counters they
	// imply (MessageCount, PulledCount) come with Users. A repost among
	// them is stored as CreateMessage stores it, with the record that
	// allows one repost per user and message; the count it implies
	// (RepostCount) comes with its original, in this batch or another.
	// The pair (reposter, original) must hold no repost but this one, as
	// a like's pair.
	Messages []*store.Message
	// Likes are stored as Like stores them, each under its ID (its
	// CreatedAt is the ID's time), listed for its message and for its
	// user; the count they imply (LikeCount) comes with Messages, in this
	// batch or another. The pair (user, message) of each must hold no
	// like but this one: loading it again is the same, while a pair liked
	// anew since a load (another ID) may end up with two likes listed.
	Likes []store.Like
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
	Follower, Followee store.ID
	At                 time.Time
}

// BulkInbox is one owner's stored inbox. Items are newest first (by
// MessageID, as every inbox is ordered), each with its DeliveredAt.
type BulkInbox struct {
	Owner store.ID
	Items []store.InboxItem
}

// BulkProgress is a named record a bulk load keeps its progress in.
type BulkProgress struct {
	Name  string
	Value []byte
}

// Validate checks what a batch says of itself, reading nothing: a zero ID,
// a repost without its original, a user, edge, message, like (its ID or
// its pair), repost's pair or inbox owner twice,
// too many attributes or one twice, inbox items in a layout that stores none, or an inbox not newest
// first without repeats is BAD_USER_INPUT; a handle twice in the batch is
// CONFLICT. Backends call it before writing anything.
func (b *Bulk) Validate() error {
	invalid := func(format string, args ...any) error { return store.Errorf(store.EINVALID, "bulk: "+format, args...) }
	ids := make(map[store.ID]bool, len(b.Users))
	handles := make(map[string]bool, len(b.Users))
	for _, u := range b.Users {
		switch {
		case u == nil || u.ID.IsZero() || u.Handle == "":
			return invalid("a user without an ID or a handle")
		case ids[u.ID]:
			return invalid("user %s twice in a batch", u.ID)
		case handles[u.Handle]:
			return store.Errorf(store.ECONFLICT, "handle %q is taken", u.Handle)
		case len(u.Attributes) > store.MaxAttributes:
			return invalid("user %s has more than %d attributes", u.ID, store.MaxAttributes)
		}
		ids[u.ID], handles[u.Handle] = true, true
		names := make(map[string]bool, len(u.Attributes))
		for _, a := range u.Attributes {
			if names[a.Name] {
				return invalid("attribute %q twice on user %s", a.Name, u.ID)
			}
			names[a.Name] = true
		}
	}
	pairs := make(map[[2]store.ID]bool, len(b.Edges))
	for _, e := range b.Edges {
		k := [2]store.ID{e.Follower, e.Followee}
		switch {
		case e.Follower.IsZero() || e.Followee.IsZero():
			return invalid("an edge without a user")
		case pairs[k]:
			return invalid("edge %s → %s twice in a batch", e.Follower, e.Followee)
		}
		pairs[k] = true
	}
	msgs := make(map[store.ID]bool, len(b.Messages))
	reposted := map[[2]store.ID]bool{}
	for _, m := range b.Messages {
		switch {
		case m == nil || m.ID.IsZero() || m.AuthorID.IsZero():
			return invalid("a message without an ID or an author")
		case msgs[m.ID]:
			return invalid("message %s twice in a batch", m.ID)
		}
		msgs[m.ID] = true
		if m.Kind != store.KindRepost {
			continue
		}
		k := [2]store.ID{m.AuthorID, m.RepostOfID}
		switch {
		case m.RepostOfID.IsZero() || m.RepostOfAuthorID.IsZero() || m.RepostOfID == m.ID:
			return invalid("repost %s without its original or its author", m.ID)
		case reposted[k]:
			return invalid("user %s reposts message %s twice in a batch", m.AuthorID, m.RepostOfID)
		}
		reposted[k] = true
	}
	likes := make(map[store.ID]bool, len(b.Likes))
	liked := make(map[[2]store.ID]bool, len(b.Likes))
	for _, l := range b.Likes {
		k := [2]store.ID{l.UserID, l.MessageID}
		switch {
		case l.ID.IsZero() || l.UserID.IsZero() || l.MessageID.IsZero() || l.AuthorID.IsZero():
			return invalid("a like without an ID, a user, a message or an author")
		case likes[l.ID]:
			return invalid("like %s twice in a batch", l.ID)
		case liked[k]:
			return invalid("user %s likes message %s twice in a batch", l.UserID, l.MessageID)
		}
		likes[l.ID], liked[k] = true, true
	}
	owners := make(map[store.ID]bool, len(b.Inboxes))
	for _, in := range b.Inboxes {
		switch {
		case in.Owner.IsZero():
			return invalid("an inbox without an owner")
		case owners[in.Owner]:
			return invalid("the inbox of %s twice in a batch", in.Owner)
		case len(in.Items) > 0 && !b.Layout.Stores():
			return invalid("inbox items for layout %d, which stores none", b.Layout)
		}
		owners[in.Owner] = true
		// Strictly newest first: a repeated message would count twice.
		for i, it := range in.Items {
			if it.MessageID.IsZero() {
				return invalid("an inbox item without a message")
			}
			if i > 0 && it.MessageID.Compare(in.Items[i-1].MessageID) >= 0 {
				return invalid("the inbox of %s is not newest first without repeats", in.Owner)
			}
		}
	}
	return nil
}
