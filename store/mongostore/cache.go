package mongostore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// cacheDoc is a cached inbox (LayoutCache, after Inbox caches:
// docs/design.md#cached-inboxes); see collCaches. The version cv changes
// with every write, so that PutInboxCache's merge, which is computed here,
// applies only to the document it read.
type cacheDoc struct {
	Owner    primitive.ObjectID `bson:"_id"`
	Entries  []entryDoc         `bson:"e"`
	Complete bool               `bson:"f"`
	Expires  time.Time          `bson:"x"`
	Version  int64              `bson:"cv"`
}

// ReadInboxCache implements storage.Backend. A cache past its expiry may
// still be stored until the TTL monitor runs; it reads as none.
func (s *Store) ReadInboxCache(ctx context.Context, owner store.ID, now time.Time) (*storage.InboxCache, error) {
	var d cacheDoc
	err := s.caches.FindOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "x", Value: bson.D{{Key: "$gte", Value: now}}}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	} else if err != nil {
		return nil, wrap("read inbox cache", err)
	}
	c := &storage.InboxCache{Owner: owner, Complete: d.Complete, Expires: d.Expires.UTC(), Items: make([]store.InboxItem, len(d.Entries))}
	slices.SortFunc(d.Entries, func(x, y entryDoc) int { return cmpID(y.Message, x.Message) })
	for i, e := range d.Entries {
		c.Items[i] = e.item()
	}
	return c, nil
}

// PutInboxCache implements storage.Backend: the merge is computed from the
// stored cache and written back conditionally on its version, so an entry
// a delivery pushed meanwhile is not lost (the merge is then redone). A
// cache past its expiry that the TTL monitor has not removed yet is merged
// into like any other: the backend has no clock of its own to tell.
func (s *Store) PutInboxCache(ctx context.Context, c *storage.InboxCache, capacity int) error {
	if capacity <= 0 {
		capacity = bucketSize
	}
	owner := oid(c.Owner)
	for n := 1; ; n++ {
		var old cacheDoc
		err := s.caches.FindOne(ctx, bson.D{{Key: "_id", Value: owner}}).Decode(&old)
		exists := err == nil
		if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return wrap("put inbox cache", err)
		}
		if exists && len(c.Items) == 0 {
			_, err := s.caches.UpdateOne(ctx, bson.D{{Key: "_id", Value: owner}}, bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: c.Expires}}}})
			return wrap("put inbox cache", err)
		}
		merged := old.Entries
		seen := make(map[primitive.ObjectID]bool, len(merged)+len(c.Items))
		for _, e := range merged {
			seen[e.Message] = true
		}
		for _, it := range c.Items {
			m := oid(it.MessageID)
			if seen[m] {
				continue
			}
			seen[m] = true
			merged = append(merged, entryDoc{Message: m, Author: oid(it.AuthorID), Created: it.CreatedAt, Delivered: it.DeliveredAt})
		}
		slices.SortFunc(merged, func(x, y entryDoc) int { return cmpID(y.Message, x.Message) })
		complete := c.Complete || (exists && old.Complete)
		if len(merged) > capacity {
			merged, complete = merged[:capacity], false
		}
		if merged == nil {
			merged = []entryDoc{}
		}
		if !exists {
			_, err := s.caches.InsertOne(ctx, cacheDoc{Owner: owner, Entries: merged, Complete: complete, Expires: c.Expires, Version: 1})
			if isDuplicate(err) {
				continue // created meanwhile: merge into it
			}
			return wrap("put inbox cache", err)
		}
		res, err := s.caches.UpdateOne(ctx, bson.D{{Key: "_id", Value: owner}, {Key: "cv", Value: old.Version}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "e", Value: merged}, {Key: "f", Value: complete}, {Key: "x", Value: c.Expires}}}, {Key: "$inc", Value: bson.D{{Key: "cv", Value: int64(1)}}}})
		if err != nil {
			return wrap("put inbox cache", err)
		}
		if res.MatchedCount == 1 {
			return nil
		}
		if err := again(ctx, n, "put inbox cache"); err != nil {
			return err
		}
	}
}

// DropInboxCache implements storage.Backend.
func (s *Store) DropInboxCache(ctx context.Context, owner store.ID) error {
	_, err := s.caches.DeleteOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}})
	return wrap("drop inbox cache", err)
}

// pushToCaches adds entry to the live caches of owners, keeping the newest
// capacity (Inbox caches: $push with $each, $sort and $slice), unless a cache
// holds it already. Per owner, an ordered pair: a full cache loses its
// oldest entry and so its completeness; a cache with room only gains.
func (s *Store) pushToCaches(ctx context.Context, owners []store.ID, entry entryDoc, at time.Time, capacity int) error {
	if capacity <= 0 {
		capacity = bucketSize
	}
	push := bson.D{{Key: "e", Value: bson.D{
		{Key: "$each", Value: bson.A{entry}},
		{Key: "$sort", Value: bson.D{{Key: "m", Value: -1}}},
		{Key: "$slice", Value: capacity},
	}}}
	full := "e." + strconv.Itoa(capacity-1)
	models := make([]mongo.WriteModel, 0, 2*len(owners))
	for _, o := range owners {
		base := bson.D{{Key: "_id", Value: oid(o)}, {Key: "x", Value: bson.D{{Key: "$gte", Value: at}}}, {Key: "e.m", Value: bson.D{{Key: "$ne", Value: entry.Message}}}}
		models = append(models,
			mongo.NewUpdateOneModel().
				SetFilter(append(slices.Clone(base), bson.E{Key: full, Value: bson.D{{Key: "$exists", Value: true}}})).
				SetUpdate(bson.D{{Key: "$push", Value: push}, {Key: "$set", Value: bson.D{{Key: "f", Value: false}}}, {Key: "$inc", Value: bson.D{{Key: "cv", Value: int64(1)}}}}),
			mongo.NewUpdateOneModel().
				SetFilter(append(slices.Clone(base), bson.E{Key: full, Value: bson.D{{Key: "$exists", Value: false}}})).
				SetUpdate(bson.D{{Key: "$push", Value: push}, {Key: "$inc", Value: bson.D{{Key: "cv", Value: int64(1)}}}}))
	}
	_, err := s.caches.BulkWrite(ctx, models, ordered)
	return wrap("deliver: caches", err)
}

// retractCached removes a message from the caches of refs' owners; every
// owner is reported (the message leaves their fan-out on read too).
func (s *Store) retractCached(ctx context.Context, job *storage.Job, refs []storage.InboxRef) ([]storage.InboxChange, error) {
	msg := oid(job.MessageID)
	models := make([]mongo.WriteModel, len(refs))
	changes := make([]storage.InboxChange, len(refs))
	for i, ref := range refs {
		models[i] = mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: oid(ref.Owner)}, {Key: "e.m", Value: msg}}).
			SetUpdate(bson.D{{Key: "$pull", Value: bson.D{{Key: "e", Value: bson.D{{Key: "m", Value: msg}}}}}, {Key: "$inc", Value: bson.D{{Key: "cv", Value: int64(1)}}}})
		changes[i] = storage.InboxChange{InboxRef: storage.InboxRef{Owner: ref.Owner}, MessageID: job.MessageID, NoCounts: true}
	}
	if _, err := s.caches.BulkWrite(ctx, models, unordered); err != nil {
		return nil, wrap("retract: caches", err)
	}
	return changes, nil
}

// removeAuthorFromCache removes author's entries from owner's cache and
// returns them.
func (s *Store) removeAuthorFromCache(ctx context.Context, owner, author store.ID) ([]entryDoc, error) {
	var before cacheDoc
	err := s.caches.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "e.a", Value: oid(author)}},
		bson.D{{Key: "$pull", Value: bson.D{{Key: "e", Value: bson.D{{Key: "a", Value: oid(author)}}}}}, {Key: "$inc", Value: bson.D{{Key: "cv", Value: int64(1)}}}},
		options.FindOneAndUpdate().SetProjection(bson.D{{Key: "e", Value: 1}})).Decode(&before)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	} else if err != nil {
		return nil, wrap("unfollow: cache", err)
	}
	var out []entryDoc
	for _, e := range before.Entries {
		if e.Author == oid(author) {
			out = append(out, e)
		}
	}
	return out, nil
}
