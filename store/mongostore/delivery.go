package mongostore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// DeliverInbox implements storage.Backend in a fixed number of round trips
// per chunk, whatever its size (see deliverStored and deliverUnstored),
// then moves the job on, conditional on its cursor.
func (s *Store) DeliverInbox(ctx context.Context, d storage.Delivery) ([]storage.InboxChange, error) {
	job, plan, err := s.startChunk(ctx, d.Job)
	if err != nil || job == nil {
		return nil, err
	}
	var changes []storage.InboxChange
	switch {
	case job.Layout.Stores() && (len(d.Owners) > 0 || plan != nil):
		changes, err = s.deliverStored(ctx, job, plan, d)
	case !job.Layout.Stores() && len(d.Owners) > 0:
		changes, err = s.deliverUnstored(ctx, job, d)
	}
	if err != nil {
		return nil, err
	}
	if err := s.advanceJob(ctx, job, d.Cursor, d.Done); err != nil {
		return nil, err
	}
	return changes, nil
}

// deliverStored delivers a chunk in LayoutEntries or LayoutBuckets:
//
//  1. the inbox fields of the chunk's owners are read: d.Owners, and on a
//     repeat of the chunk the owners of its stored plan;
//  2. the plan, the active owners and the record's key, is stored in the
//     message's job (a repeat adds the owners the Service lists now that
//     it lacks), before anything is counted: a repeat after a crash, or the
//     retraction that replaces the job, then finds every owner the chunk
//     may have counted, even one that unfollowed since;
//  3. (buckets, rare) the covering bucket of each owner whose newest
//     bucket is above the message (clock skew), one query each, at once;
//  4. the count step: per planned owner not yet counted for this message,
//     one update that counts the entry and records its bucket (lq),
//     applied only if the owner's inbox version and read mark are still
//     what was read (only a mark-read can move them meanwhile: then those
//     owners are read and counted again); it sets the job's marker, so a
//     repeat of the chunk finds the owners it counted;
//  5. the entries are written: upserts of (owner, bucket) that skip an
//     entry already there, or inserts against the unique (o, m);
//  6. the chunk's delivery record is upserted, its refs added to a set,
//     so a repeat completes it rather than colliding with it.
func (s *Store) deliverStored(ctx context.Context, job *storage.Job, plan *chunkPlan, d storage.Delivery) ([]storage.InboxChange, error) {
	lay := job.Layout
	msg := oid(job.MessageID)
	mark := deliverMark(job.MessageID)
	ids := oids(d.Owners)
	if plan != nil {
		for _, o := range plan.Owners {
			if !slices.Contains(ids, any(o)) {
				ids = append(ids, o)
			}
		}
	}
	proj := append(slices.Clone(inboxProjection), bson.E{Key: "s", Value: 1})
	heads, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, options.Find().SetProjection(proj))
	if err != nil {
		return nil, err
	}
	if plan, err = s.storePlan(ctx, job, plan, d, heads); err != nil || len(plan.Owners) == 0 {
		return nil, err
	}
	inPlan := make(map[primitive.ObjectID]bool, len(plan.Owners))
	for _, o := range plan.Owners {
		inPlan[o] = true
	}
	var counted []*userDoc
	var pending []*userDoc
	for _, h := range heads {
		switch {
		case !inPlan[h.ID]:
		case h.LastJob == mark:
			counted = append(counted, h) // counted by an earlier run of this chunk
		default:
			pending = append(pending, h)
		}
	}
	for n := 1; len(pending) > 0; n++ {
		buckets, err := s.placeAll(ctx, lay, msg, pending)
		if err != nil {
			return nil, err
		}
		models := make([]mongo.WriteModel, len(pending))
		planned := make([]*userDoc, len(pending))
		ids := make(bson.A, len(pending))
		for i, h := range pending {
			after, upd := countDelivery(h, lay, msg, buckets[i], mark)
			models[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "_id", Value: h.ID}, {Key: "lj", Value: bson.D{{Key: "$ne", Value: mark}}},
					{Key: "iv", Value: versionMatch(h.Version)}, {Key: "ir", Value: markMatch(h.ReadMark)}}).
				SetUpdate(upd)
			planned[i], ids[i] = after, h.ID
		}
		res, err := s.users.BulkWrite(ctx, models, unordered)
		if err != nil {
			return nil, wrap("deliver: count", err)
		}
		if int(res.MatchedCount) == len(models) {
			counted = append(counted, planned...)
			break
		}
		if err := again(ctx, n, "deliver: count"); err != nil {
			return nil, err
		}
		// Some moved: read them again; those now marked were counted.
		reread, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, options.Find().SetProjection(proj))
		if err != nil {
			return nil, err
		}
		pending = pending[:0]
		for _, h := range reread {
			if h.LastJob == mark {
				counted = append(counted, h)
			} else {
				pending = append(pending, h)
			}
		}
	}
	if len(counted) == 0 {
		return nil, nil
	}
	buckets := make([]primitive.ObjectID, len(counted))
	if lay == storage.LayoutBuckets {
		if err := s.placeCounted(ctx, msg, counted, buckets); err != nil {
			return nil, err
		}
	}
	entry := entryDoc{Message: msg, Author: oid(job.AuthorID), Created: job.CreatedAt, Delivered: d.At}
	writes := make([]mongo.WriteModel, len(counted))
	refs := make([]deliveryRef, len(counted))
	changes := make([]storage.InboxChange, len(counted))
	for i, h := range counted {
		if lay == storage.LayoutBuckets {
			writes[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "o", Value: h.ID}, {Key: "k", Value: buckets[i]}, {Key: "e.m", Value: bson.D{{Key: "$ne", Value: msg}}}}).
				SetUpdate(bson.D{{Key: "$push", Value: bson.D{{Key: "e", Value: entry}}}}).
				SetUpsert(true)
		} else {
			writes[i] = mongo.NewInsertOneModel().SetDocument(entryRow{Owner: h.ID, Entry: entry})
		}
		refs[i] = deliveryRef{Owner: h.ID, Bucket: buckets[i]}
		changes[i] = storage.InboxChange{InboxRef: storage.InboxRef{Owner: store.ID(h.ID), Bucket: store.ID(buckets[i])}, MessageID: job.MessageID, Counts: h.counts(lay)}
	}
	coll := s.entries
	if lay == storage.LayoutBuckets {
		coll = s.buckets
	}
	if _, err := coll.BulkWrite(ctx, writes, unordered); err != nil && !onlyDuplicates(err) {
		return nil, wrap("deliver: write entries", err)
	}
	if err := s.record(ctx, msg, plan.Key, refs); err != nil {
		return nil, err
	}
	return changes, nil
}

// storePlan stores the chunk's plan, or on a repeat adds to the stored
// one the active owners of d it lacks, and returns it. heads are the
// inbox fields of d's owners (and the plan's); inactive owners of d are
// left out (a rebuild brings the message when they return), while a
// planned owner stays: it may be counted already.
func (s *Store) storePlan(ctx context.Context, job *storage.Job, plan *chunkPlan, d storage.Delivery, heads []*userDoc) (*chunkPlan, error) {
	found := make(map[primitive.ObjectID]*userDoc, len(heads))
	for _, h := range heads {
		found[h.ID] = h
	}
	var add []primitive.ObjectID
	for _, id := range d.Owners {
		h := found[oid(id)]
		switch {
		case h == nil: // no such user any more
		case !d.ActiveSince.IsZero() && h.Seen.Before(d.ActiveSince):
		case plan != nil && slices.Contains(plan.Owners, h.ID):
		default:
			add = append(add, h.ID)
		}
	}
	if len(add) == 0 {
		if plan == nil {
			return &chunkPlan{}, nil
		}
		return plan, nil
	}
	// Not on a share a group claimed (group.go): the group counts it.
	filter := append(s.jobFilter(job), unclaimed(job.Lane))
	p := laneField(job.Lane, "p")
	var upd bson.D
	if plan == nil {
		plan = &chunkPlan{Key: oid(d.Owners[len(d.Owners)-1]), Owners: add}
		filter = append(filter, bson.E{Key: p, Value: bson.D{{Key: "$exists", Value: false}}})
		upd = bson.D{{Key: "$set", Value: bson.D{{Key: p, Value: plan}}}}
	} else {
		plan = &chunkPlan{Key: plan.Key, Owners: append(slices.Clone(plan.Owners), add...)}
		filter = append(filter, bson.E{Key: p + ".k", Value: plan.Key})
		upd = bson.D{{Key: "$addToSet", Value: bson.D{{Key: p + ".o", Value: bson.D{{Key: "$each", Value: add}}}}}}
	}
	res, err := s.messages.UpdateOne(ctx, filter, upd)
	if err != nil {
		return nil, wrap("deliver: plan", err)
	}
	if res.MatchedCount == 0 {
		// The job moved (deleted, or another process ran the chunk):
		// the Service reads it again.
		return nil, errors.New("mongostore deliver: the job moved while its chunk was planned")
	}
	return plan, nil
}

// record adds refs to the delivery record of msg keyed key: an upsert
// whose refs are a set, so a repeated chunk completes the record it wrote
// before instead of colliding with it.
func (s *Store) record(ctx context.Context, msg, key primitive.ObjectID, refs []deliveryRef) error {
	_, err := s.deliveries.UpdateOne(ctx, bson.D{{Key: "m", Value: msg}, {Key: "k", Value: key}},
		bson.D{{Key: "$addToSet", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$each", Value: refs}}}}}},
		options.Update().SetUpsert(true))
	if isDuplicate(err) {
		// Two upserts raced to create it: the other made it; add to it.
		_, err = s.deliveries.UpdateOne(ctx, bson.D{{Key: "m", Value: msg}, {Key: "k", Value: key}},
			bson.D{{Key: "$addToSet", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$each", Value: refs}}}}}})
	}
	return wrap("deliver: record", err)
}

// placement returns the bucket owner h's entry of msg goes to, by the rule
// of collBuckets, if h's inbox fields tell: a new newest bucket keyed msg if
// there is none, or msg is newer than every entry and the newest bucket
// has had 50; the newest bucket if msg is not below its key. Else (an
// older bucket) it reports false: the covering bucket must be looked up.
func placement(h *userDoc, msg primitive.ObjectID) (primitive.ObjectID, bool) {
	switch {
	case h.NewestBucket == nil || (h.NewestMessage != nil && cmpID(*h.NewestMessage, msg) < 0 && h.NewestCount >= bucketSize):
		return msg, true
	case cmpID(*h.NewestBucket, msg) <= 0:
		return *h.NewestBucket, true
	}
	return primitive.ObjectID{}, false
}

// countDelivery returns owner h's inbox fields after the count step of a
// delivery of msg into bucket (LayoutBuckets, see placement), and the
// update that makes them so. The step's plan (lq) names the bucket, so a
// repeat, or a retraction, finds where the entry goes without asking.
func countDelivery(h *userDoc, lay storage.Layout, msg, bucket primitive.ObjectID, mark string) (*userDoc, bson.D) {
	a := *h
	inc := bson.D{{Key: totalField(lay), Value: int64(1)}, {Key: "iv", Value: int64(1)}}
	unread := cmpID(msg, h.ReadMark) > 0
	if unread {
		inc = append(inc, bson.E{Key: unreadField(lay), Value: int64(1)})
	}
	lq := []planItem{{Message: msg, Bucket: bucket}}
	set := bson.D{{Key: "lj", Value: mark}, {Key: "lq", Value: lq}, {Key: "la", Value: true}, {Key: "ll", Value: int32(lay)}}
	a.Version++
	a.LastJob, a.LastEntries, a.LastAdded, a.LastLayout = mark, lq, true, int32(lay)
	var upd bson.D
	if lay == storage.LayoutEntries {
		a.EntriesTotal++
		if unread {
			a.EntriesUnread++
		}
	} else {
		a.BucketsTotal++
		if unread {
			a.BucketsUnread++
		}
		switch {
		case h.NewestBucket == nil || (bucket == msg && cmpID(*h.NewestBucket, msg) < 0):
			m := msg
			a.NewestBucket, a.NewestCount, a.NewestMessage = &m, 1, &m
			set = append(set, bson.E{Key: "bk", Value: msg}, bson.E{Key: "bn", Value: int64(1)}, bson.E{Key: "bm", Value: msg})
		case bucket == *h.NewestBucket:
			a.NewestCount++
			inc = append(inc, bson.E{Key: "bn", Value: int64(1)})
			if h.NewestMessage == nil || cmpID(*h.NewestMessage, msg) < 0 {
				m := msg
				a.NewestMessage = &m
				upd = append(upd, bson.E{Key: "$max", Value: bson.D{{Key: "bm", Value: msg}}})
			}
		}
	}
	return &a, append(bson.D{{Key: "$inc", Value: inc}, {Key: "$set", Value: set}}, upd...)
}

// placeAll returns the bucket each of pending's entry of msg goes to
// (LayoutBuckets; none in LayoutEntries): by placement, else the covering
// bucket, found by one query per owner, run at once; an entry older than
// every bucket keys a bucket of its own.
func (s *Store) placeAll(ctx context.Context, lay storage.Layout, msg primitive.ObjectID, pending []*userDoc) ([]primitive.ObjectID, error) {
	buckets := make([]primitive.ObjectID, len(pending))
	if lay != storage.LayoutBuckets {
		return buckets, nil
	}
	var lookup []*userDoc
	var at []int
	for i, h := range pending {
		if k, ok := placement(h, msg); ok {
			buckets[i] = k
		} else {
			lookup, at = append(lookup, h), append(at, i)
		}
	}
	found := make([]primitive.ObjectID, len(lookup))
	if err := s.coveringBuckets(ctx, msg, lookup, found); err != nil {
		return nil, err
	}
	for j, i := range at {
		buckets[i] = found[j]
	}
	return buckets, nil
}

// placeCounted sets buckets[i], the bucket counted[i]'s entry of msg goes
// to: the one its count step recorded (lq), or, for a step recorded
// without it (an older version), the newest bucket when it is at or below
// msg, else the covering bucket. A repeat finds the same bucket: only
// this job writes these inboxes.
func (s *Store) placeCounted(ctx context.Context, msg primitive.ObjectID, counted []*userDoc, buckets []primitive.ObjectID) error {
	var lookup []*userDoc
	var at []int
	for i, h := range counted {
		switch {
		case len(h.LastEntries) == 1 && !h.LastEntries[0].Bucket.IsZero():
			buckets[i] = h.LastEntries[0].Bucket
		case h.NewestBucket != nil && cmpID(*h.NewestBucket, msg) <= 0:
			buckets[i] = *h.NewestBucket
		default:
			lookup, at = append(lookup, h), append(at, i)
		}
	}
	found := make([]primitive.ObjectID, len(lookup))
	if err := s.coveringBuckets(ctx, msg, lookup, found); err != nil {
		return err
	}
	for j, i := range at {
		buckets[i] = found[j]
	}
	return nil
}

// coveringBuckets sets keys[i] to the key of owners[i]'s bucket covering
// msg, or msg if none does, one query per owner, at most 8 at once.
func (s *Store) coveringBuckets(ctx context.Context, msg primitive.ObjectID, owners []*userDoc, keys []primitive.ObjectID) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		sem      = make(chan struct{}, 8)
	)
	for i, h := range owners {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			k, ok, err := s.coveringBucket(ctx, h.ID, msg)
			if !ok {
				k = msg
			}
			mu.Lock()
			defer mu.Unlock()
			keys[i] = k
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// coveringBucket returns the key of owner's bucket that covers m: the
// largest key at or below it.
func (s *Store) coveringBucket(ctx context.Context, owner, m primitive.ObjectID) (primitive.ObjectID, bool, error) {
	var b struct {
		Key primitive.ObjectID `bson:"k"`
	}
	err := s.buckets.FindOne(ctx, bson.D{{Key: "o", Value: owner}, {Key: "k", Value: bson.D{{Key: "$lte", Value: m}}}},
		options.FindOne().SetSort(bson.D{{Key: "k", Value: -1}}).SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "k", Value: 1}})).Decode(&b)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return primitive.ObjectID{}, false, nil
	}
	return b.Key, err == nil, wrap("find covering bucket", err)
}

// deliverUnstored delivers a chunk in LayoutCache or LayoutNone: the
// active owners are found by one projection query (none when every owner
// counts), each live cache gets the entry (LayoutCache), and every active
// owner is recorded and reported, without counts: the message reaches
// their inbox through fan-out on read.
func (s *Store) deliverUnstored(ctx context.Context, job *storage.Job, d storage.Delivery) ([]storage.InboxChange, error) {
	active := d.Owners
	if !d.ActiveSince.IsZero() {
		var err error
		if active, err = s.activeUsers(ctx, d.Owners, d.ActiveSince); err != nil {
			return nil, err
		}
	}
	if len(active) == 0 {
		return nil, nil
	}
	msg := oid(job.MessageID)
	if job.Layout == storage.LayoutCache {
		entry := entryDoc{Message: msg, Author: oid(job.AuthorID), Created: job.CreatedAt, Delivered: job.CreatedAt}
		if err := s.pushToCaches(ctx, active, entry, d.At, d.CacheCap); err != nil {
			return nil, err
		}
	}
	refs := make([]deliveryRef, len(active))
	changes := make([]storage.InboxChange, len(active))
	for i, o := range active {
		refs[i] = deliveryRef{Owner: oid(o)}
		changes[i] = storage.InboxChange{InboxRef: storage.InboxRef{Owner: o}, MessageID: job.MessageID, NoCounts: true}
	}
	if err := s.record(ctx, msg, oid(d.Owners[len(d.Owners)-1]), refs); err != nil {
		return nil, err
	}
	return changes, nil
}

// activeUsers returns those of ids last seen at or after since, in the
// order of ids.
func (s *Store) activeUsers(ctx context.Context, ids []store.ID, since time.Time) ([]store.ID, error) {
	cur, err := s.users.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: oids(ids)}}}, {Key: "s", Value: bson.D{{Key: "$gte", Value: since}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, wrap("find active users", err)
	}
	var rows []struct {
		ID primitive.ObjectID `bson:"_id"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("find active users", err)
	}
	set := make(map[store.ID]bool, len(rows))
	for _, r := range rows {
		set[store.ID(r.ID)] = true
	}
	out := make([]store.ID, 0, len(rows))
	for _, id := range ids {
		if set[id] {
			out = append(out, id)
			delete(set, id)
		}
	}
	return out, nil
}
