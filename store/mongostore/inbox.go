package mongostore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// Inbox writes touch several documents (the owner's counters, the entries,
// the delivery records, the job), so each is a sequence of idempotent
// steps, and fan-out runs one job at a time (storage.Leaser), the job a
// crashed holder had begun first. Every job that changes an inbox's counts
// does it in one count step, an update of the user document that is
// conditional on the job's marker (lj) not being there and sets it, with
// the step's plan (lq: the entries it adds or removes, and their buckets).
// The entries are written after the count: a repeat skips the count and
// writes the plan again, which changes nothing where it was written.

// entryDoc is one inbox entry inside a bucket or a cache.
type entryDoc struct {
	Message   primitive.ObjectID `bson:"m"`
	Author    primitive.ObjectID `bson:"a"`
	Created   time.Time          `bson:"c"`
	Delivered time.Time          `bson:"d"`
}

func (e entryDoc) item() store.InboxItem {
	return store.InboxItem{
		InboxEntry:  store.InboxEntry{MessageID: store.ID(e.Message), AuthorID: store.ID(e.Author), CreatedAt: e.Created.UTC()},
		DeliveredAt: e.Delivered.UTC(),
	}
}

// entryRow is one document of the entries collection (LayoutEntries).
type entryRow struct {
	Owner primitive.ObjectID `bson:"o"`
	Entry entryDoc           `bson:",inline"`
}

// bucketDoc is one bucket (LayoutBuckets); see collBuckets.
type bucketDoc struct {
	Owner   primitive.ObjectID `bson:"o"`
	Key     primitive.ObjectID `bson:"k"`
	Entries []entryDoc         `bson:"e"`
}

// deliveryDoc records where one chunk, or one insertion, of a message went.
type deliveryDoc struct {
	Message primitive.ObjectID `bson:"m"`
	Key     primitive.ObjectID `bson:"k"`
	Refs    []deliveryRef      `bson:"r"`
}

type deliveryRef struct {
	Owner  primitive.ObjectID `bson:"o"`
	Bucket primitive.ObjectID `bson:"b,omitempty"`
}

// Markers of count steps (lj): one per job, so a repeat is recognised.
func deliverMark(m store.ID) string             { return "d" + m.String() }
func retractMark(m store.ID) string             { return "r" + m.String() }
func insertMark(inst primitive.ObjectID) string { return "i" + inst.Hex() }
func unfollowMark(j store.ID) string            { return "u" + j.String() }

var (
	unordered = options.BulkWrite().SetOrdered(false)
	ordered   = options.BulkWrite().SetOrdered(true)
)

func cmpID(a, b primitive.ObjectID) int { return bytes.Compare(a[:], b[:]) }

// startChunk returns the stored job of a chunk if the chunk should apply,
// with the chunk's stored plan if a run of it stored one: NOT_FOUND if the
// job is gone, nil if the job has moved past the chunk. On a job's first
// chunk it also finishes counting its message, in case the process stopped
// between storing the message and counting it; and before any write of the
// chunk it records the job as running (beginJob). Every message filter
// names the author, the shard key's prefix, so it goes to one shard.
func (s *Store) startChunk(ctx context.Context, j *storage.Job) (*storage.Job, *chunkPlan, error) {
	var d messageDoc
	err := s.messages.FindOne(ctx, msgKey(j.MessageID, j.AuthorID),
		options.FindOne().SetProjection(bson.D{{Key: "t", Value: 0}})).Decode(&d)
	if err != nil {
		return nil, nil, missing(err, "job not found", "find job")
	}
	stored := d.job()
	if stored == nil || stored.Kind != j.Kind {
		return nil, nil, store.Errorf(store.ENOTFOUND, "job not found")
	}
	if !bytes.Equal(stored.Cursor, j.Cursor) {
		return nil, nil, nil
	}
	if len(stored.Cursor) == 0 {
		if err := s.count(ctx, &d, stored.Kind == storage.JobRetract); err != nil {
			return nil, nil, err
		}
	}
	return stored, d.Job.Plan, s.beginJob(ctx, stored)
}

// jobFilter matches j's message while its job is j's kind at j's cursor.
func jobFilter(j *storage.Job) bson.D {
	filter := append(msgKey(j.MessageID, j.AuthorID), bson.E{Key: "j.k", Value: int32(j.Kind)})
	if len(j.Cursor) == 0 {
		return append(filter, bson.E{Key: "j.cur", Value: bson.D{{Key: "$exists", Value: false}}})
	}
	return append(filter, bson.E{Key: "j.cur", Value: j.Cursor})
}

// advanceJob moves a job from its cursor to the next, dropping the chunk's
// plan, or ends it. The update names the old cursor, so of two processes
// running one chunk only one moves the job on.
func (s *Store) advanceJob(ctx context.Context, j *storage.Job, cursor []byte, done bool) error {
	filter := jobFilter(j)
	var err error
	switch {
	case done && j.Kind == storage.JobRetract:
		_, err = s.messages.DeleteOne(ctx, filter)
	case done:
		_, err = s.messages.UpdateOne(ctx, filter, bson.D{{Key: "$unset", Value: bson.D{{Key: "j", Value: ""}}}})
	default:
		_, err = s.messages.UpdateOne(ctx, filter, bson.D{
			{Key: "$set", Value: bson.D{{Key: "j.cur", Value: cursor}}},
			{Key: "$unset", Value: bson.D{{Key: "j.p", Value: ""}}},
		})
	}
	return wrap("advance job", err)
}

// readFilter matches an owner for whom message m is unread (above the read
// mark, or no mark) or read.
func readFilter(m primitive.ObjectID, unread bool) bson.E {
	if unread {
		return bson.E{Key: "ir", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: m}}}}}
	}
	return bson.E{Key: "ir", Value: bson.D{{Key: "$gte", Value: m}}}
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

// chunkPlan is a delivery chunk's plan, stored in its job (j.p) before the
// chunk counts anything: the owners it delivers to, and the key of its
// delivery record (the last owner the Service first listed).
type chunkPlan struct {
	Key    primitive.ObjectID   `bson:"k"`
	Owners []primitive.ObjectID `bson:"o"`
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
	filter := jobFilter(job)
	var upd bson.D
	if plan == nil {
		plan = &chunkPlan{Key: oid(d.Owners[len(d.Owners)-1]), Owners: add}
		filter = append(filter, bson.E{Key: "j.p", Value: bson.D{{Key: "$exists", Value: false}}})
		upd = bson.D{{Key: "$set", Value: bson.D{{Key: "j.p", Value: plan}}}}
	} else {
		plan = &chunkPlan{Key: plan.Key, Owners: append(slices.Clone(plan.Owners), add...)}
		filter = append(filter, bson.E{Key: "j.p.k", Value: plan.Key})
		upd = bson.D{{Key: "$addToSet", Value: bson.D{{Key: "j.p.o", Value: bson.D{{Key: "$each", Value: add}}}}}}
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
		entry := entryDoc{Message: msg, Author: oid(job.AuthorID), Created: job.CreatedAt, Delivered: d.At}
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

// ReadInbox implements storage.Backend: the entries, each layout in one
// query (more only for a bucket page that retractions left short), then
// the owner's counts. In that order, because a delivery counts an entry
// before it writes it: a page never shows an entry its counts lack, as it
// could if the two were read at once. A removal (an unfollow, a
// retraction) counts before it removes, so the entries of the owner's last
// count step, if it removes, are left out of the page: its counts have
// dropped them already, and its writes may still be under way. A page
// that loses entries so is read again, a little longer.
func (s *Store) ReadInbox(ctx context.Context, f storage.InboxFilter) ([]store.InboxItem, store.InboxCounts, error) {
	want := f.Limit
	for attempt := 1; ; attempt++ {
		var items []store.InboxItem
		var err error
		if f.Limit > 0 {
			switch f.Layout {
			case storage.LayoutEntries:
				items, err = s.readEntries(ctx, f)
			case storage.LayoutBuckets:
				items, err = s.readBuckets(ctx, f)
			}
		}
		if err != nil {
			return nil, store.InboxCounts{}, err
		}
		d, _, err := s.findInboxHead(ctx, f.Owner)
		if err != nil {
			return nil, store.InboxCounts{}, err
		}
		full := len(items) == f.Limit
		if !d.LastAdded && d.LastLayout == int32(f.Layout) && len(d.LastEntries) > 0 {
			items = slices.DeleteFunc(items, func(it store.InboxItem) bool {
				return slices.ContainsFunc(d.LastEntries, func(p planItem) bool { return p.Message == oid(it.MessageID) })
			})
		}
		if len(items) >= want || !full || attempt == 3 {
			return items[:min(len(items), want)], d.counts(f.Layout), nil
		}
		f.Limit = want + len(d.LastEntries)
	}
}

// readEntries is one range read of the (o, m) index.
func (s *Store) readEntries(ctx context.Context, f storage.InboxFilter) ([]store.InboxItem, error) {
	cond, sort := idRange("m", f.Range, true)
	filter := append(bson.D{{Key: "o", Value: oid(f.Owner)}}, cond...)
	cur, err := s.entries.Find(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(f.Limit)))
	if err != nil {
		return nil, wrap("read inbox", err)
	}
	var rows []entryRow
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("read inbox", err)
	}
	items := make([]store.InboxItem, len(rows))
	for i, r := range rows {
		items[i] = r.Entry.item()
	}
	return items, nil
}

// readBuckets reads the entries within f.Range, nearest to f.From first:
// the buckets on the range's side of the cursor, nearest first, as many as
// the page needs if they are full (2 for 50 entries), more if retractions
// left gaps or a bucket is short. Read newest first, the first bucket below
// the cursor covers it (see collBuckets); read oldest first (a Reverse
// range), the covering bucket has a key not above the cursor and may hold
// entries above it, so it is read first, on its own.
func (s *Store) readBuckets(ctx context.Context, f storage.InboxFilter) ([]store.InboxItem, error) {
	owner, from := oid(f.Owner), oid(f.From)
	dir := -1 // the order of reading: -1 newest first, 1 oldest first
	if f.Reverse {
		dir = 1
	}
	items := make([]store.InboxItem, 0, f.Limit)
	// take appends the entries of bs on the range's side of the cursor, in
	// reading order, and reports whether the page is full.
	take := func(bs []bucketDoc) bool {
		for _, b := range bs {
			es := b.Entries
			slices.SortFunc(es, func(x, y entryDoc) int { return dir * cmpID(x.Message, y.Message) })
			for _, e := range es {
				if !f.From.IsZero() && dir*cmpID(e.Message, from) <= 0 {
					continue
				}
				items = append(items, e.item())
				if len(items) == f.Limit {
					return true
				}
			}
		}
		return false
	}
	read := func(filter, sort bson.D, limit int64) ([]bucketDoc, error) {
		cur, err := s.buckets.Find(ctx, filter, options.Find().SetSort(sort).SetLimit(limit))
		var bs []bucketDoc
		if err == nil {
			err = cur.All(ctx, &bs)
		}
		return bs, wrap("read inbox", err)
	}
	if f.Reverse && !f.From.IsZero() {
		covering, err := read(bson.D{{Key: "o", Value: owner}, {Key: "k", Value: bson.D{{Key: "$lte", Value: from}}}}, bson.D{{Key: "k", Value: -1}}, 1)
		if err != nil {
			return nil, err
		}
		if take(covering) {
			return items, nil
		}
	}
	// One bucket more than full buckets of the page less one entry would
	// take (the first is partly beyond the cursor, or the newest, not
	// full): a page of 50 and the one more the Service asks for read 2,
	// and a third only in the loop below, if those two are short.
	batch := int64((f.Limit-1)/bucketSize + 2)
	next := f.Range
	for {
		cond, sort := idRange("k", next, true)
		bs, err := read(append(bson.D{{Key: "o", Value: owner}}, cond...), sort, batch)
		if err != nil {
			return nil, err
		}
		if take(bs) || len(bs) < int(batch) {
			return items, nil
		}
		next.From = store.ID(bs[len(bs)-1].Key)
		batch *= 2
	}
}

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
	if r.Done {
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

// bucketKeysAndEntries projects what a scan of buckets reads. Whole
// entries, not only their messages ("e.m"): lungo's engine does not
// project fields inside arrays.
var bucketKeysAndEntries = bson.D{{Key: "k", Value: 1}, {Key: "e", Value: 1}}
