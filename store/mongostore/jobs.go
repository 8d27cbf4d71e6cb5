package mongostore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// A JobFollow, JobUnfollow or JobRebuild writes one owner's inbox in one
// backend call: the job is checked and recorded as running, the count step
// applies the job's plan to the owner's counters (or, on a repeat, finds
// the plan it stored), the plan is written, and the job ends. Each step is
// idempotent, and the job ends last, so a crash anywhere is repaired by
// running the job again.

// ownerJob is a stored whole-inbox job about to run.
type ownerJob struct {
	job *storage.Job
	// inst names this run of the job: its ID, or the rebuild's instance
	// (a user's rebuilds share the user's ID).
	inst  primitive.ObjectID
	head  *userDoc // the owner's inbox fields
	found bool     // the owner exists
}

// startOwnerJob returns j as stored (NOT_FOUND if it is not) and records
// it as running.
func (s *Store) startOwnerJob(ctx context.Context, j *storage.Job) (*ownerJob, error) {
	oj := &ownerJob{}
	switch j.Kind {
	case storage.JobFollow, storage.JobUnfollow, storage.JobHideReposts:
		var d docs.Job
		if err := s.jobs.FindOne(ctx, bson.D{{Key: "_id", Value: oid(j.ID)}, {Key: "k", Value: int32(j.Kind)}}).Decode(&d); err != nil {
			return nil, missing(err, "job not found", "find job")
		}
		oj.job, oj.inst = d.Store(), d.ID
		var err error
		if oj.head, oj.found, err = s.findInboxHead(ctx, oj.job.OwnerID); err != nil {
			return nil, err
		}
	case storage.JobRebuild:
		var d userDoc
		err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: oid(j.OwnerID)}, {Key: "rb", Value: bson.D{{Key: "$exists", Value: true}}}},
			options.FindOne().SetProjection(inboxProjection)).Decode(&d)
		if err != nil {
			return nil, missing(err, "job not found", "find job")
		}
		oj.job, oj.inst, oj.head, oj.found = rebuildJob(&d), d.Rebuild.Instance, &d, true
	default:
		return nil, store.Errorf(store.EINTERNAL, "job kind %d writes no whole inbox", j.Kind)
	}
	return oj, s.beginJob(ctx, oj.job)
}

// endOwnerJob removes the job, or clears the rebuilding flag of this
// rebuild (a newer one stays).
func (s *Store) endOwnerJob(ctx context.Context, oj *ownerJob) error {
	var err error
	if oj.job.Kind == storage.JobRebuild {
		_, err = s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(oj.job.OwnerID)}, {Key: "rb.i", Value: oj.inst}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "rb", Value: ""}}}})
	} else {
		_, err = s.jobs.DeleteOne(ctx, bson.D{{Key: "_id", Value: oj.inst}})
	}
	return wrap("end job", err)
}

// markMatch matches a stored read mark. The zero mark (read as the zero
// value from a missing field) matches a missing mark and a stored zero
// one, which older versions wrote for an empty inbox marked read: a count
// step conditional on the mark must match what it read.
func markMatch(m primitive.ObjectID) any {
	if m.IsZero() {
		return bson.D{{Key: "$in", Value: bson.A{nil, primitive.ObjectID{}}}}
	}
	return m
}

// countStep applies a whole-inbox job's count step: plan computes the
// plan and its counter update from the owner's inbox fields, and the
// update applies only if the marker is not there and neither the version
// nor the read mark moved since they were read (the unread count depends
// on the mark); else the fields are read again. A marker already there
// means the step was applied: its stored plan is returned. It returns the
// plan and the inbox fields after the step.
func (s *Store) countStep(ctx context.Context, oj *ownerJob, mark string, added bool,
	plan func(head *userDoc) ([]planItem, bson.D, error)) ([]planItem, *userDoc, error) {
	owner, head := oid(oj.job.OwnerID), oj.head
	if !oj.found {
		return nil, head, nil
	}
	for n := 1; ; n++ {
		if head.LastJob == mark {
			return head.LastEntries, head, nil
		}
		items, upd, err := plan(head)
		if err != nil || len(items) == 0 {
			return nil, head, err
		}
		last := bson.D{{Key: "lj", Value: mark}, {Key: "lq", Value: items}, {Key: "la", Value: added}, {Key: "ll", Value: int32(oj.job.Layout)}}
		if i := slices.IndexFunc(upd, func(e bson.E) bool { return e.Key == "$set" }); i >= 0 {
			upd[i].Value = append(upd[i].Value.(bson.D), last...)
		} else {
			upd = append(upd, bson.E{Key: "$set", Value: last})
		}
		filter := bson.D{{Key: "_id", Value: owner}, {Key: "lj", Value: bson.D{{Key: "$ne", Value: mark}}},
			{Key: "iv", Value: versionMatch(head.Version)}, {Key: "ir", Value: markMatch(head.ReadMark)}}
		var after userDoc
		err = s.users.FindOneAndUpdate(ctx, filter, upd,
			options.FindOneAndUpdate().SetReturnDocument(options.After).SetProjection(inboxProjection)).Decode(&after)
		if err == nil {
			return items, &after, nil
		}
		if !errors.Is(err, mongo.ErrNoDocuments) {
			return nil, nil, wrap("count", err)
		}
		if err := again(ctx, n, "count"); err != nil {
			return nil, nil, err
		}
		var found bool
		if head, found, err = s.findInboxHead(ctx, oj.job.OwnerID); err != nil || !found {
			return nil, head, err
		}
	}
}

// removeCounted runs an owner job's removal: the count step under mark
// (see countStep), then the planned entries' deletion, and returns one
// change per entry removed, each with the counts after the step.
func (s *Store) removeCounted(ctx context.Context, oj *ownerJob, mark string,
	plan func(head *userDoc) ([]planItem, bson.D, error)) ([]storage.InboxChange, error) {
	owner, lay := oj.job.OwnerID, oj.job.Layout
	items, after, err := s.countStep(ctx, oj, mark, false, plan)
	if err != nil {
		return nil, err
	}
	if len(items) > 0 {
		if err := s.writePlan(ctx, owner, lay, items, time.Time{}, false); err != nil {
			return nil, err
		}
	}
	changes := make([]storage.InboxChange, 0, len(items))
	for _, p := range items {
		changes = append(changes, storage.InboxChange{InboxRef: storage.InboxRef{Owner: owner, Bucket: store.ID(p.Bucket)}, MessageID: store.ID(p.Message), Counts: after.counts(lay)})
	}
	return changes, nil
}

// InsertInbox implements storage.Backend. The plan holds the entries that
// are live messages not in the inbox yet, each with its bucket (see
// planBuckets); it is counted, written, and recorded for retraction, one
// record per message keyed by this run of the job.
func (s *Store) InsertInbox(ctx context.Context, ins storage.Insertion) ([]storage.InboxChange, error) {
	if ins.Job.Kind != storage.JobFollow && ins.Job.Kind != storage.JobRebuild {
		return nil, store.Errorf(store.EINTERNAL, "InsertInbox runs follow and rebuild jobs, not kind %d", ins.Job.Kind)
	}
	oj, err := s.startOwnerJob(ctx, ins.Job)
	if err != nil {
		return nil, err
	}
	lay, owner := oj.job.Layout, oj.job.OwnerID
	var changes []storage.InboxChange
	if lay.Stores() && len(ins.Entries) > 0 {
		plan, after, err := s.countStep(ctx, oj, insertMark(oj.inst), true, func(head *userDoc) ([]planItem, bson.D, error) {
			return s.planInsertion(ctx, owner, lay, head, ins.Entries)
		})
		if err != nil {
			return nil, err
		}
		if err := s.writeInsertion(ctx, oj, plan, ins.At); err != nil {
			return nil, err
		}
		for _, p := range plan {
			changes = append(changes, storage.InboxChange{InboxRef: storage.InboxRef{Owner: owner, Bucket: store.ID(p.Bucket)}, MessageID: store.ID(p.Message), Counts: after.counts(lay)})
		}
	}
	if err := s.endOwnerJob(ctx, oj); err != nil {
		return nil, err
	}
	if oj.job.Kind == storage.JobRebuild {
		for i := range changes {
			changes[i].Counts.Rebuilding = false // ended with the job
		}
	}
	return changes, nil
}

// writeInsertion writes an insertion's counted plan to the owner's inbox
// and records each entry for retraction, one record per message keyed by
// this run of the job. Both writes may be repeated.
func (s *Store) writeInsertion(ctx context.Context, oj *ownerJob, plan []planItem, at time.Time) error {
	if len(plan) == 0 {
		return nil
	}
	owner := oj.job.OwnerID
	if err := s.writePlan(ctx, owner, oj.job.Layout, plan, at, true); err != nil {
		return err
	}
	recs := make([]mongo.WriteModel, len(plan))
	for i, p := range plan {
		recs[i] = mongo.NewInsertOneModel().SetDocument(deliveryDoc{Message: p.Message, Key: oj.inst, Refs: []deliveryRef{{Owner: oid(owner), Bucket: p.Bucket}}})
	}
	if _, err := s.deliveries.BulkWrite(ctx, recs, unordered); err != nil && !onlyDuplicates(err) {
		return wrap("insert: record", err)
	}
	return nil
}

// finishOwnerJob ends a whole-inbox job that the Service found nothing
// more to do for. If the job's count step was applied (a run cut short
// after it), its stored plan is written first: the counts already have it,
// whatever changed since (the edge back, or nothing left to bring).
func (s *Store) finishOwnerJob(ctx context.Context, j *storage.Job) error {
	oj, err := s.startOwnerJob(ctx, j)
	if store.ErrorCode(err) == store.ENOTFOUND {
		return nil // finished already
	} else if err != nil {
		return err
	}
	mark := insertMark(oj.inst)
	switch oj.job.Kind {
	case storage.JobUnfollow:
		mark = unfollowMark(oj.job.ID)
	case storage.JobHideReposts:
		mark = hideMark(oj.job.ID, oj.job.Cursor)
	}
	if h := oj.head; oj.found && h.LastJob == mark && len(h.LastEntries) > 0 {
		if h.LastAdded {
			err = s.writeInsertion(ctx, oj, h.LastEntries, time.Now().UTC())
		} else {
			err = s.writePlan(ctx, oj.job.OwnerID, storage.Layout(h.LastLayout), h.LastEntries, time.Time{}, false)
		}
		if err != nil {
			return err
		}
	}
	return s.endOwnerJob(ctx, oj)
}

// planInsertion returns the entries of es to add to owner's inbox, oldest
// first, and the count step's update. Entries already there, repeated in
// es, or of deleted messages are left out.
func (s *Store) planInsertion(ctx context.Context, owner store.ID, lay storage.Layout, head *userDoc, es []store.InboxEntry) ([]planItem, bson.D, error) {
	byID := make(map[primitive.ObjectID]store.InboxEntry, len(es))
	ids := make([]primitive.ObjectID, 0, len(es))
	authors := bson.A{}
	for _, e := range es {
		m := oid(e.MessageID)
		if _, dup := byID[m]; dup {
			continue
		}
		byID[m] = e
		ids = append(ids, m)
		if !slices.Contains(authors, any(oid(e.AuthorID))) {
			authors = append(authors, oid(e.AuthorID))
		}
	}
	slices.SortFunc(ids, cmpID)
	// A message deleted since the caller read it is not brought in: its
	// retraction may have run already.
	live, err := s.idSet(ctx, s.messages, "_id", bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: authors}}}, {Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, live})
	if err != nil {
		return nil, nil, err
	}
	var present map[primitive.ObjectID]bool
	var keys []primitive.ObjectID // LayoutBuckets: the buckets that cover ids, newest first
	if lay == storage.LayoutEntries {
		present, err = s.idSet(ctx, s.entries, "m", bson.D{{Key: "o", Value: oid(owner)}, {Key: "m", Value: bson.D{{Key: "$in", Value: ids}}}})
	} else {
		present, keys, err = s.scanBuckets(ctx, owner, ids[0], ids[len(ids)-1])
	}
	if err != nil {
		return nil, nil, err
	}
	var plan []planItem
	unread := int64(0)
	for _, m := range ids {
		if !live[m] || present[m] {
			continue
		}
		e := byID[m]
		plan = append(plan, planItem{Message: m, Author: oid(e.AuthorID), Created: e.CreatedAt})
		if cmpID(m, head.ReadMark) > 0 {
			unread++
		}
	}
	if len(plan) == 0 {
		return nil, nil, nil
	}
	n := int64(len(plan))
	upd := bson.D{{Key: "$inc", Value: bson.D{{Key: totalField(lay), Value: n}, {Key: unreadField(lay), Value: unread}, {Key: "iv", Value: int64(1)}}}}
	if lay == storage.LayoutBuckets {
		upd = planBuckets(head, keys, plan, upd)
	}
	return plan, upd, nil
}

// planBuckets places plan's entries (oldest first) in buckets by the rule
// of collBuckets, given the keys of the buckets covering them (newest
// first), and adds the newest bucket's changes to the count step upd:
// entries newer than every entry fill the newest bucket to 50, then start
// new ones; entries between the newest bucket's key and its newest entry
// join it; older ones join their covering bucket; ones older than every
// bucket start buckets of 50 of their own.
func planBuckets(head *userDoc, keys []primitive.ObjectID, plan []planItem, upd bson.D) bson.D {
	bk, bn, bm := head.NewestBucket, head.NewestCount, head.NewestMessage
	curKey, curCount := primitive.ObjectID{}, int64(bucketSize) // none: the first newer entry starts one
	if bk != nil {
		curKey, curCount = *bk, bn
	}
	var (
		moved      bool  // a new newest bucket
		intoNewest int64 // entries into the old newest bucket
		newest     *primitive.ObjectID
		orphans    []int // older than every bucket
	)
	for i := range plan {
		m := plan[i].Message
		switch {
		case bk != nil && cmpID(m, *bk) >= 0 && bm != nil && cmpID(m, *bm) <= 0:
			plan[i].Bucket = *bk
			intoNewest++
			curCount++ // fills the newest bucket, as bn counts it
		case bk == nil || cmpID(m, *bk) >= 0:
			if curCount >= bucketSize {
				curKey, curCount, moved = m, 0, true
			}
			plan[i].Bucket = curKey
			curCount++
			if !moved {
				intoNewest++
			}
			newest = &plan[i].Message
		default:
			if j := slices.IndexFunc(keys, func(k primitive.ObjectID) bool { return cmpID(k, m) <= 0 }); j >= 0 {
				plan[i].Bucket = keys[j]
			} else {
				orphans = append(orphans, i)
			}
		}
	}
	newKey, newCount := curKey, curCount
	for j, i := range orphans {
		if j%bucketSize == 0 {
			curKey = plan[i].Message
		}
		plan[i].Bucket = curKey
	}
	inc := upd[0].Value.(bson.D)
	switch {
	case moved:
		upd = append(upd, bson.E{Key: "$set", Value: bson.D{{Key: "bk", Value: newKey}, {Key: "bn", Value: newCount}}})
	case intoNewest > 0:
		inc = append(inc, bson.E{Key: "bn", Value: intoNewest})
	}
	upd[0].Value = inc
	if newest != nil {
		upd = append(upd, bson.E{Key: "$max", Value: bson.D{{Key: "bm", Value: *newest}}})
	}
	return upd
}

// scanBuckets reads owner's buckets from the one covering hi down to the
// one covering lo, and returns the messages they hold and their keys,
// newest first.
func (s *Store) scanBuckets(ctx context.Context, owner store.ID, lo, hi primitive.ObjectID) (map[primitive.ObjectID]bool, []primitive.ObjectID, error) {
	cur, err := s.buckets.Find(ctx, bson.D{{Key: "o", Value: oid(owner)}, {Key: "k", Value: bson.D{{Key: "$lte", Value: hi}}}},
		options.Find().SetSort(bson.D{{Key: "k", Value: -1}}).SetProjection(bucketKeysAndEntries).SetBatchSize(16))
	if err != nil {
		return nil, nil, wrap("scan buckets", err)
	}
	defer cur.Close(ctx)
	present := map[primitive.ObjectID]bool{}
	var keys []primitive.ObjectID
	for cur.Next(ctx) {
		var b bucketDoc
		if err := cur.Decode(&b); err != nil {
			return nil, nil, wrap("scan buckets", err)
		}
		keys = append(keys, b.Key)
		for _, e := range b.Entries {
			present[e.Message] = true
		}
		if cmpID(b.Key, lo) <= 0 {
			break
		}
	}
	return present, keys, wrap("scan buckets", cur.Err())
}

// idSet returns the values of field (an ObjectID) in the documents of
// coll that filter matches.
func (s *Store) idSet(ctx context.Context, coll lungo.ICollection, field string, filter bson.D) (map[primitive.ObjectID]bool, error) {
	proj := bson.D{{Key: field, Value: 1}}
	if field != "_id" {
		proj = append(proj, bson.E{Key: "_id", Value: 0})
	}
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(proj))
	if err != nil {
		return nil, wrap("find ids", err)
	}
	var rows []bson.Raw
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("find ids", err)
	}
	set := make(map[primitive.ObjectID]bool, len(rows))
	for _, r := range rows {
		if id, ok := r.Lookup(field).ObjectIDOK(); ok {
			set[id] = true
		}
	}
	return set, nil
}

// writePlan writes a count step's plan to owner's inbox: adds (entries
// inserted against the unique (o, m), or pushed per bucket by an upsert
// that applies only if none of its entries is there: a push is atomic, so
// all or none of them are) or removes. Every write may be repeated.
func (s *Store) writePlan(ctx context.Context, owner store.ID, lay storage.Layout, plan []planItem, at time.Time, add bool) error {
	o := oid(owner)
	if lay == storage.LayoutEntries {
		if !add {
			ms := make(bson.A, len(plan))
			for i, p := range plan {
				ms[i] = p.Message
			}
			_, err := s.entries.DeleteMany(ctx, bson.D{{Key: "o", Value: o}, {Key: "m", Value: bson.D{{Key: "$in", Value: ms}}}})
			return wrap("remove entries", err)
		}
		models := make([]mongo.WriteModel, len(plan))
		for i, p := range plan {
			models[i] = mongo.NewInsertOneModel().SetDocument(entryRow{Owner: o, Entry: entryDoc{Message: p.Message, Author: p.Author, Created: p.Created, Delivered: at}})
		}
		if _, err := s.entries.BulkWrite(ctx, models, unordered); err != nil && !onlyDuplicates(err) {
			return wrap("insert entries", err)
		}
		return nil
	}
	var order []primitive.ObjectID
	groups := map[primitive.ObjectID][]planItem{}
	for _, p := range plan {
		if _, ok := groups[p.Bucket]; !ok {
			order = append(order, p.Bucket)
		}
		groups[p.Bucket] = append(groups[p.Bucket], p)
	}
	models := make([]mongo.WriteModel, len(order))
	for i, k := range order {
		ms := make(bson.A, len(groups[k]))
		es := make(bson.A, len(groups[k]))
		for j, p := range groups[k] {
			ms[j] = p.Message
			es[j] = entryDoc{Message: p.Message, Author: p.Author, Created: p.Created, Delivered: at}
		}
		if add {
			models[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "o", Value: o}, {Key: "k", Value: k}, {Key: "e.m", Value: bson.D{{Key: "$nin", Value: ms}}}}).
				SetUpdate(bson.D{{Key: "$push", Value: bson.D{{Key: "e", Value: bson.D{{Key: "$each", Value: es}}}}}}).
				SetUpsert(true)
		} else {
			models[i] = mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "o", Value: o}, {Key: "k", Value: k}}).
				SetUpdate(bson.D{{Key: "$pull", Value: bson.D{{Key: "e", Value: bson.D{{Key: "m", Value: bson.D{{Key: "$in", Value: ms}}}}}}}})
		}
	}
	if _, err := s.buckets.BulkWrite(ctx, models, unordered); err != nil && !onlyDuplicates(err) {
		return wrap("write buckets", err)
	}
	return nil
}

// RemoveAuthorEntries implements storage.Backend. The plan is the author's
// entries in the inbox, found through the (o, a) index of entries, or by
// reading the owner's buckets that hold any (an unfollow is rare; an index
// on the entries' authors would cost every delivery a write).
func (s *Store) RemoveAuthorEntries(ctx context.Context, r storage.AuthorRemoval) ([]storage.InboxChange, error) {
	if r.Job.Kind != storage.JobUnfollow {
		return nil, store.Errorf(store.EINTERNAL, "RemoveAuthorEntries runs unfollow jobs, not kind %d", r.Job.Kind)
	}
	oj, err := s.startOwnerJob(ctx, r.Job)
	if err != nil {
		return nil, err
	}
	lay, owner, author := oj.job.Layout, oj.job.OwnerID, oj.job.AuthorID
	var changes []storage.InboxChange
	switch {
	case lay.Stores():
		changes, err = s.removeCounted(ctx, oj, unfollowMark(oj.job.ID), func(head *userDoc) ([]planItem, bson.D, error) {
			return s.planRemoval(ctx, owner, author, lay, head)
		})
		if err != nil {
			return nil, err
		}
	case lay == storage.LayoutCache:
		removed, err := s.removeAuthorFromCache(ctx, owner, author)
		if err != nil {
			return nil, err
		}
		for _, e := range removed {
			changes = append(changes, storage.InboxChange{InboxRef: storage.InboxRef{Owner: owner}, MessageID: store.ID(e.Message), NoCounts: true})
		}
	}
	if err := s.endOwnerJob(ctx, oj); err != nil {
		return nil, err
	}
	return changes, nil
}

// planRemoval returns author's entries in owner's inbox and the count
// step's update.
func (s *Store) planRemoval(ctx context.Context, owner, author store.ID, lay storage.Layout, head *userDoc) ([]planItem, bson.D, error) {
	var plan []planItem
	if lay == storage.LayoutEntries {
		cur, err := s.entries.Find(ctx, bson.D{{Key: "o", Value: oid(owner)}, {Key: "a", Value: oid(author)}},
			options.Find().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "m", Value: 1}}))
		if err != nil {
			return nil, nil, wrap("find author entries", err)
		}
		var rows []entryRow
		if err := cur.All(ctx, &rows); err != nil {
			return nil, nil, wrap("find author entries", err)
		}
		for _, r := range rows {
			plan = append(plan, planItem{Message: r.Entry.Message})
		}
	} else {
		cur, err := s.buckets.Find(ctx, bson.D{{Key: "o", Value: oid(owner)}, {Key: "e.a", Value: oid(author)}},
			options.Find().SetProjection(bucketKeysAndEntries))
		if err != nil {
			return nil, nil, wrap("find author entries", err)
		}
		var bs []bucketDoc
		if err := cur.All(ctx, &bs); err != nil {
			return nil, nil, wrap("find author entries", err)
		}
		for _, b := range bs {
			for _, e := range b.Entries {
				if e.Author == oid(author) {
					plan = append(plan, planItem{Message: e.Message, Bucket: b.Key})
				}
			}
		}
	}
	if len(plan) == 0 {
		return nil, nil, nil
	}
	return plan, removalUpdate(lay, head, plan), nil
}

// removalUpdate is the count step's update for removing plan's entries
// from the inbox head describes: the total, and the unread above its mark.
func removalUpdate(lay storage.Layout, head *userDoc, plan []planItem) bson.D {
	unread := int64(0)
	for _, p := range plan {
		if cmpID(p.Message, head.ReadMark) > 0 {
			unread++
		}
	}
	return bson.D{{Key: "$inc", Value: bson.D{{Key: totalField(lay), Value: -int64(len(plan))}, {Key: unreadField(lay), Value: -unread}, {Key: "iv", Value: int64(1)}}}}
}
