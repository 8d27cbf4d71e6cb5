package mongostore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
)

// entryDoc is one inbox entry inside a bucket.
type entryDoc struct {
	Message   primitive.ObjectID `bson:"m"`
	Author    primitive.ObjectID `bson:"a"`
	Created   time.Time          `bson:"c"`
	Delivered time.Time          `bson:"d"`
	Seq       int64              `bson:"q"`
}

type bucketDoc struct {
	Owner   primitive.ObjectID `bson:"o"`
	Bucket  int64              `bson:"s"`
	Entries []entryDoc         `bson:"e"`
}

// deliveryDoc records where one chunk of a message went.
type deliveryDoc struct {
	Message primitive.ObjectID `bson:"m"`
	Last    primitive.ObjectID `bson:"k"`
	Refs    []deliveryRef      `bson:"r"`
}

type deliveryRef struct {
	Owner primitive.ObjectID `bson:"o"`
	Seq   int64              `bson:"q"`
}

func bucketOf(seq uint64) int64 { return int64((seq - 1) / bucketSize) }

var unordered = options.BulkWrite().SetOrdered(false)

// startChunk returns the stored job of a chunk if the chunk should apply:
// NOT_FOUND if the job is gone, nil if the job has moved past the chunk.
// On a job's first chunk it also finishes counting its message, in case the
// process stopped between storing the message and counting it; and before
// any write of the chunk it records the job as running (beginJob).
func (s *Store) startChunk(ctx context.Context, j *store.Job) (*store.Job, error) {
	var d messageDoc
	err := s.messages.FindOne(ctx, bson.D{{Key: "_id", Value: oid(j.MessageID)}},
		options.FindOne().SetProjection(bson.D{{Key: "t", Value: 0}})).Decode(&d)
	if err != nil {
		return nil, missing(err, "job not found", "find job")
	}
	stored := d.job()
	if stored == nil || stored.Kind != j.Kind {
		return nil, store.Errorf(store.ENOTFOUND, "job not found")
	}
	if !bytes.Equal(stored.Cursor, j.Cursor) {
		return nil, nil
	}
	if len(stored.Cursor) == 0 {
		if err := s.count(ctx, &d, stored.Kind == store.JobRetract); err != nil {
			return nil, err
		}
	}
	return stored, s.beginJob(ctx, stored)
}

// advanceJob moves a job from its cursor to the next, or ends it. The
// update names the old cursor, so of two processes running one chunk only
// one moves the job on.
func (s *Store) advanceJob(ctx context.Context, j *store.Job, cursor []byte, done bool) error {
	filter := bson.D{{Key: "_id", Value: oid(j.MessageID)}, {Key: "j.k", Value: int32(j.Kind)}}
	if len(j.Cursor) == 0 {
		filter = append(filter, bson.E{Key: "j.cur", Value: bson.D{{Key: "$exists", Value: false}}})
	} else {
		filter = append(filter, bson.E{Key: "j.cur", Value: j.Cursor})
	}
	var err error
	switch {
	case done && j.Kind == store.JobRetract:
		_, err = s.messages.DeleteOne(ctx, filter)
	case done:
		_, err = s.messages.UpdateOne(ctx, filter, bson.D{{Key: "$unset", Value: bson.D{{Key: "j", Value: ""}}}})
	default:
		_, err = s.messages.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "j.cur", Value: cursor}}}})
	}
	return wrap("advance job", err)
}

// DeliverInbox implements store.Backend in a fixed number of round trips
// per chunk, whatever its size, each step idempotent:
//
//  1. each owner's inbox sequence is incremented (with total and unread),
//     once per message: the update is conditional on the owner's last
//     delivered message (ld) not being this one, and sets it;
//  2. the owners' new sequences are read back: fan-out runs one job at a
//     time (store.Leaser), so an owner's ld is this message exactly when
//     its sequence was taken for it;
//  3. each entry is pushed into its bucket (owner, (seq-1)/50), upserted,
//     unless the bucket holds it already; a repeat collides with the unique
//     (o, s) index and is ignored;
//  4. the chunk's delivery record is inserted (unique per chunk);
//  5. the job moves on, conditional on its cursor.
func (s *Store) DeliverInbox(ctx context.Context, d store.Delivery) ([]store.InboxChange, error) {
	job, err := s.startChunk(ctx, d.Job)
	if err != nil || job == nil {
		return nil, err
	}
	msg := oid(job.MessageID)
	var changes []store.InboxChange
	if len(d.Owners) > 0 {
		incs := make([]mongo.WriteModel, len(d.Owners))
		for i, o := range d.Owners {
			incs[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "_id", Value: oid(o)}, {Key: "ld", Value: bson.D{{Key: "$ne", Value: msg}}}}).
				SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "is", Value: 1}, {Key: "it", Value: 1}, {Key: "iu", Value: 1}}}, {Key: "$set", Value: bson.D{{Key: "ld", Value: msg}}}})
		}
		if _, err := s.users.BulkWrite(ctx, incs, unordered); err != nil {
			return nil, wrap("deliver: count", err)
		}
		heads, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: oids(d.Owners)}}}},
			options.Find().SetProjection(bson.D{{Key: "is", Value: 1}, {Key: "it", Value: 1}, {Key: "iu", Value: 1}, {Key: "ir", Value: 1}, {Key: "ld", Value: 1}}))
		if err != nil {
			return nil, err
		}
		entry := entryDoc{Message: msg, Author: oid(job.AuthorID), Created: job.CreatedAt, Delivered: d.At}
		pushes := make([]mongo.WriteModel, 0, len(heads))
		rec := deliveryDoc{Message: msg, Last: oid(d.Owners[len(d.Owners)-1])}
		for _, h := range heads {
			if h.Delivered != msg {
				continue // not a follower any more, or not a user
			}
			c := h.counts()
			e := entry
			e.Seq = int64(c.Seq)
			pushes = append(pushes, mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "o", Value: h.ID}, {Key: "s", Value: bucketOf(c.Seq)}, {Key: "e.m", Value: bson.D{{Key: "$ne", Value: msg}}}}).
				SetUpdate(bson.D{{Key: "$push", Value: bson.D{{Key: "e", Value: e}}}}).
				SetUpsert(true))
			rec.Refs = append(rec.Refs, deliveryRef{Owner: h.ID, Seq: e.Seq})
			changes = append(changes, store.InboxChange{InboxRef: store.InboxRef{Owner: store.ID(h.ID), Seq: c.Seq}, Counts: c})
		}
		if len(pushes) > 0 {
			if _, err := s.buckets.BulkWrite(ctx, pushes, unordered); err != nil && !onlyDuplicates(err) {
				return nil, wrap("deliver: push", err)
			}
			if _, err := s.deliveries.InsertOne(ctx, rec); err != nil && !isDuplicate(err) {
				return nil, wrap("deliver: record", err)
			}
		}
	}
	if err := s.advanceJob(ctx, job, d.Cursor, d.Done); err != nil {
		return nil, err
	}
	return changes, nil
}

// onlyDuplicates reports whether every error of a bulk write is a unique
// index violation: the writes that already happened.
func onlyDuplicates(err error) bool {
	var bwe mongo.BulkWriteException
	if !errors.As(err, &bwe) || bwe.WriteConcernError != nil {
		return isDuplicate(err)
	}
	for _, we := range bwe.WriteErrors {
		if !isDuplicate(we) {
			return false
		}
	}
	return true
}

// ReadInbox implements store.Backend. The owner's counts and the newest
// buckets are read at once; the newest 50 entries span at most two buckets.
func (s *Store) ReadInbox(ctx context.Context, f store.InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	type headResult struct {
		c   store.InboxCounts
		err error
	}
	headc := make(chan headResult, 1)
	go func() {
		var d userDoc
		err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: oid(f.Owner)}},
			options.FindOne().SetProjection(bson.D{{Key: "is", Value: 1}, {Key: "it", Value: 1}, {Key: "iu", Value: 1}, {Key: "ir", Value: 1}})).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			err = nil
		}
		headc <- headResult{d.counts(), wrap("read inbox counts", err)}
	}()
	var items []store.InboxItem
	var err error
	if f.Limit > 0 {
		items, err = s.readBuckets(ctx, f)
	}
	head := <-headc
	if err == nil {
		err = head.err
	}
	return items, head.c, err
}

// readBuckets reads entries newest first below f.Before, a few buckets at a
// time: as many as the page needs if they are full, more if retractions
// left gaps.
func (s *Store) readBuckets(ctx context.Context, f store.InboxFilter) ([]store.InboxItem, error) {
	filter := bson.D{{Key: "o", Value: oid(f.Owner)}}
	if f.Before > 0 {
		if f.Before == 1 {
			return nil, nil
		}
		filter = append(filter, bson.E{Key: "s", Value: bson.D{{Key: "$lte", Value: bucketOf(f.Before - 1)}}})
	}
	items := make([]store.InboxItem, 0, f.Limit)
	batch := int64(f.Limit/bucketSize + 2)
	for {
		cur, err := s.buckets.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "s", Value: -1}}).SetLimit(batch))
		if err != nil {
			return nil, wrap("read inbox", err)
		}
		var bs []bucketDoc
		if err := cur.All(ctx, &bs); err != nil {
			return nil, wrap("read inbox", err)
		}
		for _, b := range bs {
			es := b.Entries
			slices.SortFunc(es, func(x, y entryDoc) int { return int(y.Seq - x.Seq) })
			for _, e := range es {
				if f.Before > 0 && uint64(e.Seq) >= f.Before {
					continue
				}
				items = append(items, store.InboxItem{
					InboxEntry:  store.InboxEntry{MessageID: store.ID(e.Message), AuthorID: store.ID(e.Author), CreatedAt: e.Created.UTC()},
					Seq:         uint64(e.Seq),
					DeliveredAt: e.Delivered.UTC(),
				})
				if len(items) == f.Limit {
					return items, nil
				}
			}
		}
		if len(bs) < int(batch) {
			return items, nil
		}
		last := bs[len(bs)-1].Bucket
		filter = bson.D{{Key: "o", Value: oid(f.Owner)}, {Key: "s", Value: bson.D{{Key: "$lt", Value: last}}}}
	}
}

// MarkInboxRead implements store.Backend: the read mark moves to the
// sequence read with it, conditionally, so a delivery in between is not
// marked read unseen.
func (s *Store) MarkInboxRead(ctx context.Context, owner store.ID) (store.InboxCounts, error) {
	for {
		d, err := s.findUserDoc(ctx, owner)
		if err != nil {
			return store.InboxCounts{}, err
		}
		// versionMatch: a user whose inbox never received anything has no
		// counter fields yet, which must match as 0.
		res, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "is", Value: versionMatch(d.Seq)}, {Key: "it", Value: versionMatch(d.Total)}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "ir", Value: d.Seq}, {Key: "iu", Value: int64(0)}}}})
		if err != nil {
			return store.InboxCounts{}, wrap("mark read", err)
		}
		if res.MatchedCount == 1 {
			c := d.counts()
			c.ReadSeq, c.Unread = c.Seq, 0
			return c, nil
		}
		if err := ctx.Err(); err != nil {
			return store.InboxCounts{}, err
		}
	}
}

// FindDeliveries implements store.Backend. The cursor is the last owner of
// the last record returned.
func (s *Store) FindDeliveries(ctx context.Context, messageID store.ID, cursor []byte, limit int) ([]store.InboxRef, []byte, error) {
	filter := bson.D{{Key: "m", Value: oid(messageID)}}
	if len(cursor) == len(primitive.ObjectID{}) {
		filter = append(filter, bson.E{Key: "k", Value: bson.D{{Key: "$gt", Value: primitive.ObjectID(cursor)}}})
	}
	cur, err := s.deliveries.Find(ctx, filter, options.Find().SetSort(bson.D{{Key: "k", Value: 1}}))
	if err != nil {
		return nil, nil, wrap("find deliveries", err)
	}
	defer cur.Close(ctx)
	var refs []store.InboxRef
	var next []byte
	for len(refs) < limit && cur.Next(ctx) {
		var d deliveryDoc
		if err := cur.Decode(&d); err != nil {
			return nil, nil, wrap("find deliveries", err)
		}
		for _, r := range d.Refs {
			refs = append(refs, store.InboxRef{Owner: store.ID(r.Owner), Seq: uint64(r.Seq)})
		}
		next = bytes.Clone(d.Last[:])
	}
	if err := cur.Err(); err != nil {
		return nil, nil, wrap("find deliveries", err)
	}
	if !cur.Next(ctx) {
		next = nil // no record after these
	}
	return refs, next, cur.Err()
}

// RemoveInboxEntries implements store.Backend. Counts go first, once per
// owner and message (the owner's last retracted message, lr, marks it),
// then the entries are pulled from their buckets, which is idempotent.
func (s *Store) RemoveInboxEntries(ctx context.Context, r store.Removal) ([]store.InboxChange, error) {
	job, err := s.startChunk(ctx, r.Job)
	if err != nil || job == nil {
		return nil, err
	}
	msg := oid(job.MessageID)
	var changes []store.InboxChange
	if len(r.Refs) > 0 {
		decs := make([]mongo.WriteModel, 0, 2*len(r.Refs))
		pulls := make([]mongo.WriteModel, len(r.Refs))
		owners := make([]store.ID, len(r.Refs))
		for i, ref := range r.Refs {
			notYet := bson.E{Key: "lr", Value: bson.D{{Key: "$ne", Value: msg}}}
			// Unread only if the entry is above the read mark.
			decs = append(decs,
				mongo.NewUpdateOneModel().
					SetFilter(bson.D{{Key: "_id", Value: oid(ref.Owner)}, notYet, {Key: "ir", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: int64(ref.Seq)}}}}}}).
					SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "it", Value: -1}, {Key: "iu", Value: -1}}}, {Key: "$set", Value: bson.D{{Key: "lr", Value: msg}}}}),
				mongo.NewUpdateOneModel().
					SetFilter(bson.D{{Key: "_id", Value: oid(ref.Owner)}, notYet}).
					SetUpdate(bson.D{{Key: "$inc", Value: bson.D{{Key: "it", Value: -1}}}, {Key: "$set", Value: bson.D{{Key: "lr", Value: msg}}}}))
			pulls[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "o", Value: oid(ref.Owner)}, {Key: "s", Value: bucketOf(ref.Seq)}}).
				SetUpdate(bson.D{{Key: "$pull", Value: bson.D{{Key: "e", Value: bson.D{{Key: "m", Value: msg}}}}}})
			owners[i] = ref.Owner
		}
		// Ordered: of each owner's pair, the second applies only if the first did not.
		if _, err := s.users.BulkWrite(ctx, decs, options.BulkWrite().SetOrdered(true)); err != nil {
			return nil, wrap("retract: count", err)
		}
		if _, err := s.buckets.BulkWrite(ctx, pulls, unordered); err != nil {
			return nil, wrap("retract: pull", err)
		}
		heads, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: oids(owners)}}}},
			options.Find().SetProjection(bson.D{{Key: "is", Value: 1}, {Key: "it", Value: 1}, {Key: "iu", Value: 1}, {Key: "ir", Value: 1}}))
		if err != nil {
			return nil, err
		}
		seqs := make(map[store.ID]uint64, len(r.Refs))
		for _, ref := range r.Refs {
			seqs[ref.Owner] = ref.Seq
		}
		for _, h := range heads {
			id := store.ID(h.ID)
			changes = append(changes, store.InboxChange{InboxRef: store.InboxRef{Owner: id, Seq: seqs[id]}, Counts: h.counts()})
		}
	}
	if r.Done {
		if _, err := s.deliveries.DeleteMany(ctx, bson.D{{Key: "m", Value: msg}}); err != nil {
			return nil, wrap("retract: records", err)
		}
	}
	if err := s.advanceJob(ctx, job, r.Cursor, r.Done); err != nil {
		return nil, err
	}
	return changes, nil
}
