package mongostore

import (
	"context"
	"encoding/binary"
	"slices"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// FindDeliveries implements storage.Backend. The cursor is the key of a
// record and the number of its refs already returned (4 bytes), so a page
// may end inside a record.
func (s *Store) FindDeliveries(ctx context.Context, messageID store.ID, cursor []byte, limit int) ([]storage.InboxRef, []byte, error) {
	filter := bson.D{{Key: "m", Value: oid(messageID)}}
	skip := 0
	if len(cursor) == deliveryCursorLen {
		var key primitive.ObjectID
		copy(key[:], cursor)
		skip = int(binary.BigEndian.Uint32(cursor[len(key):]))
		op := "$gt"
		if skip > 0 {
			op = "$gte"
		}
		filter = append(filter, bson.E{Key: "k", Value: bson.D{{Key: op, Value: key}}})
	}
	cur, err := s.deliveries.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "k", Value: 1}}))
	if err != nil {
		return nil, nil, wrap("find deliveries", err)
	}
	defer cur.Close(ctx)
	var refs []storage.InboxRef
	var next []byte
	for len(refs) < limit && cur.Next(ctx) {
		var d deliveryDoc
		if err := cur.Decode(&d); err != nil {
			return nil, nil, wrap("find deliveries", err)
		}
		rs := d.Refs[min(skip, len(d.Refs)):]
		n := min(len(rs), limit-len(refs))
		for _, r := range rs[:n] {
			refs = append(refs, storage.InboxRef{Owner: store.ID(r.Owner), Bucket: store.ID(r.Bucket)})
		}
		next = deliveryCursor(d.Key, 0)
		if n < len(rs) {
			// The page ends inside this record.
			return refs, deliveryCursor(d.Key, skip+n), nil
		}
		skip = 0
	}
	if err := cur.Err(); err != nil {
		return nil, nil, wrap("find deliveries", err)
	}
	if !cur.Next(ctx) {
		next = nil // no record after these
	}
	return refs, next, cur.Err()
}

const deliveryCursorLen = 12 + 4

func deliveryCursor(key primitive.ObjectID, done int) []byte {
	c := make([]byte, deliveryCursorLen)
	copy(c, key[:])
	binary.BigEndian.PutUint32(c[len(key):], uint32(done))
	return c
}

// RemoveInboxEntries implements storage.Backend. In the stored layouts the
// owners that still hold the entry are found first, their counts go down
// in one count step (ordered pairs: unread or read), and the entry is
// removed; a repeat finds the entries not yet removed and the marker on
// the counted owners. Caches only lose the entry.
func (s *Store) RemoveInboxEntries(ctx context.Context, r storage.Removal) ([]storage.InboxChange, error) {
	job, plan, err := s.startChunk(ctx, r.Job)
	if err != nil || job == nil {
		return nil, err
	}
	var changes []storage.InboxChange
	if len(r.Refs) > 0 || (plan != nil && job.Layout.Stores()) {
		switch job.Layout {
		case storage.LayoutEntries, storage.LayoutBuckets:
			changes, err = s.retractStored(ctx, job, plan, r.Refs)
		case storage.LayoutCache:
			changes, err = s.retractCached(ctx, job, r.Refs)
		default:
			for _, ref := range r.Refs {
				changes = append(changes, storage.InboxChange{InboxRef: storage.InboxRef{Owner: ref.Owner}, MessageID: job.MessageID, NoCounts: true})
			}
		}
		if err != nil {
			return nil, err
		}
	}
	if r.Done && s.lanes.Load() <= 1 { // with lanes, the last lane's (finishShare)
		if _, err := s.deliveries.DeleteMany(ctx, bson.D{{Key: "m", Value: oid(job.MessageID)}}); err != nil {
			return nil, wrap("retract: records", err)
		}
	}
	if err := s.advanceJob(ctx, job, r.Cursor, r.Done); err != nil {
		return nil, err
	}
	return changes, nil
}

// retractStored removes the message from the stored inboxes of refs and,
// if the job carries the plan of a delivery chunk cut short (the message
// was deleted while it ran), from its planned owners: those whose marker
// names the delivery were counted, whether or not their entry was written
// or recorded, so they are holders too, in the bucket their count step
// recorded.
func (s *Store) retractStored(ctx context.Context, job *storage.Job, plan *chunkPlan, refs []storage.InboxRef) ([]storage.InboxChange, error) {
	lay := job.Layout
	msg := oid(job.MessageID)
	bucketOf := make(map[store.ID]store.ID, len(refs))
	var or bson.A
	for _, ref := range refs {
		if _, dup := bucketOf[ref.Owner]; dup {
			continue
		}
		bucketOf[ref.Owner] = ref.Bucket
		or = append(or, bson.D{{Key: "o", Value: oid(ref.Owner)}, {Key: "k", Value: oid(ref.Bucket)}})
	}
	var counted []store.ID // planned owners counted by the cut delivery
	if plan != nil && len(plan.Owners) > 0 {
		heads, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: plan.Owners}}}, {Key: "lj", Value: deliverMark(job.MessageID)}},
			options.Find().SetProjection(inboxProjection))
		if err != nil {
			return nil, err
		}
		buckets := make([]primitive.ObjectID, len(heads))
		if lay == storage.LayoutBuckets {
			if err := s.placeCounted(ctx, msg, heads, buckets); err != nil {
				return nil, err
			}
		}
		for i, h := range heads {
			o := store.ID(h.ID)
			counted = append(counted, o)
			if _, dup := bucketOf[o]; !dup {
				bucketOf[o] = store.ID(buckets[i])
				or = append(or, bson.D{{Key: "o", Value: h.ID}, {Key: "k", Value: buckets[i]}})
			}
		}
	}
	owners := make([]store.ID, 0, len(bucketOf))
	for o := range bucketOf {
		owners = append(owners, o)
	}
	if len(owners) == 0 {
		return nil, nil
	}
	var present []store.ID
	var err error
	if lay == storage.LayoutEntries {
		present, err = s.holders(ctx, s.entries, bson.D{{Key: "o", Value: bson.D{{Key: "$in", Value: oids(owners)}}}, {Key: "m", Value: msg}})
	} else {
		present, err = s.holders(ctx, s.buckets, bson.D{{Key: "$or", Value: or}, {Key: "e.m", Value: msg}})
	}
	for _, o := range counted {
		if !slices.Contains(present, o) {
			present = append(present, o)
		}
	}
	if err != nil || len(present) == 0 {
		return nil, err
	}
	mark := retractMark(job.MessageID)
	total, unread := totalField(lay), unreadField(lay)
	models := make([]mongo.WriteModel, 0, 2*len(present))
	for _, o := range present {
		set := bson.D{{Key: "lj", Value: mark}, {Key: "lq", Value: []planItem{{Message: msg, Bucket: oid(bucketOf[o])}}}, {Key: "la", Value: false}, {Key: "ll", Value: int32(lay)}}
		notYet := bson.E{Key: "lj", Value: bson.D{{Key: "$ne", Value: mark}}}
		models = append(models,
			mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "_id", Value: oid(o)}, notYet, readFilter(msg, true)}).
				SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: total, Value: int64(-1)}, {Key: unread, Value: int64(-1)}, {Key: "iv", Value: int64(1)}}}, {Key: "$set", Value: set}}),
			mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "_id", Value: oid(o)}, notYet, readFilter(msg, false)}).
				SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: total, Value: int64(-1)}, {Key: "iv", Value: int64(1)}}}, {Key: "$set", Value: set}}))
	}
	if _, err := s.users.BulkWrite(ctx, models, ordered); err != nil {
		return nil, wrap("retract: count", err)
	}
	if lay == storage.LayoutEntries {
		_, err = s.entries.DeleteMany(ctx, bson.D{{Key: "o", Value: bson.D{{Key: "$in", Value: oids(present)}}}, {Key: "m", Value: msg}})
	} else {
		pulls := make([]mongo.WriteModel, len(present))
		for i, o := range present {
			pulls[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "o", Value: oid(o)}, {Key: "k", Value: oid(bucketOf[o])}}).
				SetUpdate(bson.D{{Key: "$pull", Value: bson.D{{Key: "e", Value: bson.D{{Key: "m", Value: msg}}}}}})
		}
		_, err = s.buckets.BulkWrite(ctx, pulls, unordered)
	}
	if err != nil {
		return nil, wrap("retract: remove", err)
	}
	heads, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: oids(present)}}}},
		options.Find().SetProjection(inboxProjection))
	if err != nil {
		return nil, err
	}
	changes := make([]storage.InboxChange, len(heads))
	for i, h := range heads {
		id := store.ID(h.ID)
		changes[i] = storage.InboxChange{InboxRef: storage.InboxRef{Owner: id, Bucket: bucketOf[id]}, MessageID: job.MessageID, Counts: h.counts(lay)}
	}
	return changes, nil
}

// readFilter matches an owner for whom message m is unread (above the read
// mark, or no mark) or read.
func readFilter(m primitive.ObjectID, unread bool) bson.E {
	if unread {
		return bson.E{Key: "ir", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: m}}}}}
	}
	return bson.E{Key: "ir", Value: bson.D{{Key: "$gte", Value: m}}}
}

// holders returns the distinct owners (o) of the documents filter matches.
func (s *Store) holders(ctx context.Context, coll lungo.ICollection, filter bson.D) ([]store.ID, error) {
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "o", Value: 1}}))
	if err != nil {
		return nil, wrap("find holders", err)
	}
	var rows []struct {
		Owner primitive.ObjectID `bson:"o"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("find holders", err)
	}
	out := make([]store.ID, 0, len(rows))
	for _, r := range rows {
		if id := store.ID(r.Owner); !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}
