package mongostore

import (
	"context"
	"slices"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// MarkInboxRead implements storage.Backend in one conditional write: the
// inbox fields are read, the entries above the new mark counted, and the
// mark and the unread count stored together, conditionally on the inbox
// version and the old mark, so a count step or another mark in between
// makes it read and count again. A cut anywhere leaves the old mark and
// count, and a retry starts over. The last count step's plan is counted as
// it will be once written, since its writes may still be under way.
func (s *Store) MarkInboxRead(ctx context.Context, owner store.ID, layout storage.Layout, mark store.ID) (store.InboxCounts, error) {
	m := oid(mark)
	for attempt := 1; ; attempt++ {
		d, found, err := s.findInboxHead(ctx, owner)
		if err == nil && !found {
			err = store.Errorf(store.ENOTFOUND, "user not found")
		}
		if err != nil {
			return store.InboxCounts{}, err
		}
		if mark.IsZero() || cmpID(d.ReadMark, m) >= 0 {
			// Not newer (no mark is newer than none: storing a zero one
			// would only make conditions on the mark harder to write).
			return d.counts(layout), nil
		}
		old := d.ReadMark
		d.ReadMark = m
		set := bson.D{{Key: "ir", Value: m}}
		n := 0
		if layout.Stores() {
			if n, err = s.countAbove(ctx, owner, layout, d); err != nil {
				return store.InboxCounts{}, err
			}
			set = append(set, bson.E{Key: unreadField(layout), Value: int64(n)})
		}
		// The version moves too: a count step computed from the old unread
		// count then reads it again.
		res, err := s.users.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: oid(owner)}, {Key: "iv", Value: versionMatch(d.Version)}, {Key: "ir", Value: markMatch(old)}},
			bson.D{{Key: "$set", Value: set}, {Key: "$inc", Value: bson.D{{Key: "iv", Value: int64(1)}}}})
		if err != nil {
			return store.InboxCounts{}, wrap("mark read", err)
		}
		if res.MatchedCount == 1 {
			c := d.counts(layout)
			if layout.Stores() {
				c.Unread = n
			}
			return c, nil
		}
		if err := again(ctx, attempt, "mark read"); err != nil {
			return store.InboxCounts{}, err
		}
	}
}

// countAbove counts the entries of owner's stored inbox above d's read
// mark, as they will be once d's last count step is written: the step's
// plan is left out of the scan and counted as added or removed.
func (s *Store) countAbove(ctx context.Context, owner store.ID, layout storage.Layout, d *userDoc) (int, error) {
	mark := d.ReadMark
	var pending []primitive.ObjectID
	n := 0
	if d.LastLayout == int32(layout) {
		for _, p := range d.LastEntries {
			pending = append(pending, p.Message)
			if d.LastAdded && cmpID(p.Message, mark) > 0 {
				n++
			}
		}
	}
	if layout == storage.LayoutEntries {
		filter := bson.D{{Key: "o", Value: oid(owner)}, {Key: "m", Value: bson.D{{Key: "$gt", Value: mark}}}}
		if len(pending) > 0 {
			filter[1].Value = bson.D{{Key: "$gt", Value: mark}, {Key: "$nin", Value: pending}}
		}
		c, err := s.entries.CountDocuments(ctx, filter)
		return n + int(c), wrap("count unread", err)
	}
	// Buckets newest first, down to the one that covers the mark.
	cur, err := s.buckets.Find(ctx, bson.D{{Key: "o", Value: oid(owner)}},
		options.Find().SetSort(bson.D{{Key: "k", Value: -1}}).SetProjection(bucketKeysAndEntries).SetBatchSize(16))
	if err != nil {
		return 0, wrap("count unread", err)
	}
	defer cur.Close(ctx)
	for cur.Next(ctx) {
		var b bucketDoc
		if err := cur.Decode(&b); err != nil {
			return 0, wrap("count unread", err)
		}
		for _, e := range b.Entries {
			if cmpID(e.Message, mark) > 0 && !slices.Contains(pending, e.Message) {
				n++
			}
		}
		if cmpID(b.Key, mark) <= 0 {
			break
		}
	}
	return n, wrap("count unread", cur.Err())
}
