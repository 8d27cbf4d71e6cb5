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
	"herald/store/storage"
)

// Group commit (docs/design.md, "Group commit on MongoDB"): the small
// delivery chunks at the head of a lane are stored together in a fixed
// number of round trips. The group's plan (its jobs, their cursors and
// owners) is stored on the lane's lease document before anything is
// counted, each owner is counted once for the whole group under a group
// mark (lj = "g" + the group's id, lq = its entries of the group), and a
// repeat after a crash finishes the stored plan before anything else runs
// on the lane.

// groupPlan is a group's plan, stored on the lane's lease document (g).
type groupPlan struct {
	ID     primitive.ObjectID `bson:"id"`
	Layout int32              `bson:"l"`
	Lane   int32              `bson:"ln"`
	At     time.Time          `bson:"at"`
	Jobs   []groupJob         `bson:"j"`
	// Claimed records that every job's share was claimed for the group
	// (claimGroup), before anything was counted.
	Claimed bool `bson:"cl,omitempty"`
}

// groupJob is one job of a group: where it stands and goes, and the
// owners its chunk delivers to (active ones, chosen when planned).
type groupJob struct {
	Message primitive.ObjectID   `bson:"m"`
	Author  primitive.ObjectID   `bson:"a"`
	Created time.Time            `bson:"t"`
	Cursor  []byte               `bson:"c,omitempty"`
	Next    []byte               `bson:"n,omitempty"`
	Done    bool                 `bson:"d,omitempty"`
	Key     primitive.ObjectID   `bson:"k"`
	Owners  []primitive.ObjectID `bson:"o,omitempty"`
}

func groupMark(id primitive.ObjectID) string { return "g" + id.Hex() }

// job returns the stored job gj stands for, at its old cursor.
func (g *groupPlan) job(gj *groupJob) *storage.Job {
	return &storage.Job{
		ID: store.ID(gj.Message), Kind: storage.JobDeliver, Layout: storage.Layout(g.Layout),
		MessageID: store.ID(gj.Message), AuthorID: store.ID(gj.Author), CreatedAt: gj.Created,
		Cursor: gj.Cursor, Lane: int(g.Lane),
	}
}

// DeliverInboxes implements storage.GroupDeliverer. Chunks in the
// entries layout of one lane are stored as one group (see groupPlan);
// others, and a group holding a job whose share has a chunk's plan stored
// (a chunk cut short, repeated alone), go one DeliverInbox at a time.
func (s *Store) DeliverInboxes(ctx context.Context, ds []storage.Delivery) ([]storage.Delivered, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	lane := ds[0].Job.Lane
	grouped := true
	for _, d := range ds {
		if d.Job.Lane != lane || d.Job.Kind != storage.JobDeliver || d.Job.Layout != storage.LayoutEntries {
			grouped = false
		}
	}
	prior, err := s.finishGroup(ctx, lane)
	if err != nil {
		return nil, err
	}
	if prior != nil {
		// A plan left by this process's failed attempt (the Service's
		// retry) or finished under it: the jobs it covered are reported
		// with its changes, not as gone.
		if out, rest, idx := prior.cover(ds); len(rest) < len(ds) {
			if len(rest) > 0 {
				r, err := s.DeliverInboxes(ctx, rest)
				for k, d := range r {
					out[idx[k]] = d
				}
				if err != nil {
					return out[:idx[len(r)]], err
				}
			}
			return out, nil
		}
	}
	if !grouped || len(ds) == 1 || s.noGroup {
		return s.deliverEach(ctx, ds)
	}

	// The jobs as stored, in one read.
	keys := make(bson.A, len(ds))
	for i, d := range ds {
		keys[i] = msgKey(d.Job.MessageID, d.Job.AuthorID)
	}
	cur, err := s.messages.Find(ctx, bson.D{{Key: "$or", Value: keys}}, options.Find().SetProjection(bson.D{{Key: "t", Value: 0}}))
	if err != nil {
		return nil, wrap("group: find jobs", err)
	}
	var found []*messageDoc
	if err := cur.All(ctx, &found); err != nil {
		return nil, wrap("group: find jobs", err)
	}
	byID := make(map[store.ID]*messageDoc, len(found))
	for _, d := range found {
		byID[store.ID(d.ID)] = d
	}
	n := s.laneCount()
	out := make([]storage.Delivered, len(ds))
	var run []int // the chunks to store, indexes in ds
	for i, d := range ds {
		doc := byID[d.Job.MessageID]
		var stored *storage.Job
		if doc != nil {
			stored = doc.laneJob(lane, n)
		}
		if stored == nil || stored.Kind != storage.JobDeliver {
			out[i].Err = store.Errorf(store.ENOTFOUND, "job not found")
			continue
		}
		sh, pending := doc.Job.share(lane, n)
		switch {
		case !pending:
			out[i].Err = store.Errorf(store.ENOTFOUND, "job's share done")
			continue
		case !bytes.Equal(stored.Cursor, d.Job.Cursor):
			continue // applied before: changes nothing
		case sh.Plan != nil || stored.Layout != storage.LayoutEntries:
			return s.deliverEach(ctx, ds) // a chunk cut short: the one-job path repeats it
		}
		if len(stored.Cursor) == 0 && lane == 0 {
			// countByJob reads it again as it marks it read: the read
			// above may be many counts old.
			if err := s.countByJob(ctx, doc, false); store.ErrorCode(err) == store.ENOTFOUND {
				out[i].Err = err
				continue
			} else if err != nil {
				return nil, err
			}
		}
		run = append(run, i)
	}
	if len(run) == 0 {
		return out, nil
	}

	// The owners' inbox fields, and the plan.
	var ids bson.A
	seen := map[primitive.ObjectID]bool{}
	for _, i := range run {
		for _, o := range ds[i].Owners {
			if id := oid(o); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	heads := map[primitive.ObjectID]*userDoc{}
	if len(ids) > 0 {
		proj := append(slices.Clone(inboxProjection), bson.E{Key: "s", Value: 1})
		hs, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, options.Find().SetProjection(proj))
		if err != nil {
			return nil, err
		}
		for _, h := range hs {
			heads[h.ID] = h
		}
	}
	g := &groupPlan{ID: primitive.NewObjectID(), Layout: int32(storage.LayoutEntries), Lane: int32(lane), At: ds[run[0]].At.UTC()}
	planned := false
	for _, i := range run {
		d := ds[i]
		gj := groupJob{Message: oid(d.Job.MessageID), Author: oid(d.Job.AuthorID), Created: d.Job.CreatedAt.UTC(),
			Cursor: d.Job.Cursor, Next: d.Cursor, Done: d.Done}
		if len(d.Owners) > 0 {
			gj.Key = oid(d.Owners[len(d.Owners)-1])
		}
		for _, o := range d.Owners {
			h := heads[oid(o)]
			switch {
			case h == nil: // no such user any more
			case !d.ActiveSince.IsZero() && h.Seen.Before(d.ActiveSince):
			case slices.Contains(gj.Owners, h.ID):
			default:
				gj.Owners = append(gj.Owners, h.ID)
			}
		}
		planned = planned || len(gj.Owners) > 0
		g.Jobs = append(g.Jobs, gj)
	}
	if planned {
		if err := s.storeGroup(ctx, lane, g); err != nil {
			return nil, err
		}
	}
	changes, moved, err := s.completeOrRead(ctx, g, heads)
	if errors.Is(err, errGroupAborted) {
		return s.deliverEach(ctx, ds) // a job moved or was taken before the count
	}
	if err != nil {
		return nil, err
	}
	if planned {
		s.noGroupOn.Store(lane, true)
	}
	for k, i := range run {
		if moved[k] {
			out[i].Err = store.Errorf(store.ENOTFOUND, "job not found")
			continue
		}
		out[i].Changes = changes[k]
	}
	return out, nil
}

// deliverEach is DeliverInboxes one chunk at a time (storage's fallback).
func (s *Store) deliverEach(ctx context.Context, ds []storage.Delivery) ([]storage.Delivered, error) {
	out := make([]storage.Delivered, 0, len(ds))
	for _, d := range ds {
		changes, err := s.DeliverInbox(ctx, d)
		if err != nil && store.ErrorCode(err) != store.ENOTFOUND {
			return out, err
		}
		out = append(out, storage.Delivered{Changes: changes, Err: err})
	}
	return out, nil
}

// storeGroup stores g on its lane's lease document, on condition that no
// other group is stored there.
func (s *Store) storeGroup(ctx context.Context, lane int, g *groupPlan) error {
	gen := s.groupGeneration(lane)
	gen.Add(1) // odd while the store is under way (finishGroup)
	defer gen.Add(1)
	s.noGroupOn.Delete(lane)
	_, err := s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(lane)}, {Key: "g", Value: bson.D{{Key: "$exists", Value: false}}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "g", Value: g}}}}, options.Update().SetUpsert(true))
	if isDuplicate(err) {
		return errors.New("mongostore deliver: another group is stored on the lane")
	}
	return wrap("group: plan", err)
}

// storedGroup returns the group plan stored on lane's lease document, if any.
func (s *Store) storedGroup(ctx context.Context, lane int) (*groupPlan, error) {
	var d struct {
		Group *groupPlan `bson:"g"`
	}
	err := s.leases.FindOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(lane)}},
		options.FindOne().SetProjection(bson.D{{Key: "g", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("group: read plan", err)
	}
	return d.Group, nil
}

// completeGroup runs a stored group's writes: the count step of every
// owner not counted yet under the group mark, the entries, the delivery
// records, the jobs' advance, and the plan's removal. heads are the
// owners' inbox fields read before the plan was stored (nil: read them).
// It returns each job's changes, with the counts after its chunk, and
// which jobs had moved (deleted meanwhile: their records are written for
// the retraction).
func (s *Store) completeGroup(ctx context.Context, g *groupPlan, heads map[primitive.ObjectID]*userDoc) ([][]storage.InboxChange, []bool, error) {
	lay := storage.Layout(g.Layout)
	mark := groupMark(g.ID)
	// Each owner's entries of the group, in job order.
	items := map[primitive.ObjectID][]planItem{}
	var owners []primitive.ObjectID
	for _, gj := range g.Jobs {
		for _, o := range gj.Owners {
			if _, ok := items[o]; !ok {
				owners = append(owners, o)
			}
			items[o] = append(items[o], planItem{Message: gj.Message})
		}
	}
	base := map[primitive.ObjectID]*userDoc{} // the fields before the count, if known
	counted := map[primitive.ObjectID]*userDoc{}
	if len(owners) > 0 {
		if !g.Claimed {
			if err := s.claimGroup(ctx, g); errors.Is(err, errGroupClaimed) {
				g.Claimed, heads = true, nil
			} else if err != nil {
				return nil, nil, err
			}
		}
		var pending []*userDoc
		if heads == nil {
			hs, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: owners}}}}, options.Find().SetProjection(inboxProjection))
			if err != nil {
				return nil, nil, err
			}
			// Read after the owners: a claim gone means the count step was
			// over before they were read, so an owner without the mark was
			// counted and written since, not missed.
			if held, err := s.heldOrDrop(ctx, g); err != nil || !held {
				return nil, nil, err
			}
			for _, h := range hs {
				if h.LastJob == mark {
					counted[h.ID] = h
				} else {
					pending = append(pending, h)
				}
			}
		} else {
			for _, o := range owners {
				pending = append(pending, heads[o])
			}
		}
		for n := 1; len(pending) > 0; n++ {
			models := make([]mongo.WriteModel, len(pending))
			ids := make(bson.A, len(pending))
			for i, h := range pending {
				models[i] = mongo.NewUpdateOneModel().
					SetFilter(bson.D{{Key: "_id", Value: h.ID}, {Key: "lj", Value: bson.D{{Key: "$ne", Value: mark}}},
						{Key: "iv", Value: versionMatch(h.Version)}, {Key: "ir", Value: markMatch(h.ReadMark)}}).
					SetUpdate(countGroup(h, lay, items[h.ID], mark))
				ids[i] = h.ID
				base[h.ID] = h
			}
			res, err := s.users.BulkWrite(ctx, models, unordered)
			if err != nil {
				return nil, nil, wrap("group: count", err)
			}
			if int(res.MatchedCount) == len(models) {
				for _, h := range pending {
					counted[h.ID] = nil
				}
				break
			}
			if err := again(ctx, n, "group: count"); err != nil {
				return nil, nil, err
			}
			// Some moved (a mark-read, or another run's writes): read them
			// again, then stop if another run has finished the group.
			reread, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}, options.Find().SetProjection(inboxProjection))
			if err != nil {
				return nil, nil, err
			}
			if held, err := s.heldOrDrop(ctx, g); err != nil || !held {
				return nil, nil, err
			}
			pending = pending[:0]
			for _, h := range reread {
				if h.LastJob == mark {
					// Counted by another run, from its own read: this
					// run's base is not the count's.
					counted[h.ID] = h
					delete(base, h.ID)
				} else {
					pending = append(pending, h)
				}
			}
		}
	}

	// Entries, records, changes.
	var writes, records []mongo.WriteModel
	changes := make([][]storage.InboxChange, len(g.Jobs))
	seenSoFar := map[primitive.ObjectID]int{}
	for k, gj := range g.Jobs {
		entry := entryDoc{Message: gj.Message, Author: gj.Author, Created: gj.Created, Delivered: g.At}
		var refs []deliveryRef
		for _, o := range gj.Owners {
			if _, ok := counted[o]; !ok {
				continue // gone
			}
			writes = append(writes, mongo.NewInsertOneModel().SetDocument(entryRow{Owner: o, Entry: entry}))
			refs = append(refs, deliveryRef{Owner: o})
			seenSoFar[o]++
			changes[k] = append(changes[k], storage.InboxChange{InboxRef: storage.InboxRef{Owner: store.ID(o)}, MessageID: store.ID(gj.Message),
				Counts: countsAfter(base[o], counted[o], lay, items[o][:seenSoFar[o]])})
		}
		if len(refs) > 0 {
			records = append(records, mongo.NewUpdateOneModel().
				SetFilter(bson.D{{Key: "m", Value: gj.Message}, {Key: "k", Value: gj.Key}}).
				SetUpdate(bson.D{{Key: "$addToSet", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$each", Value: refs}}}}}}).
				SetUpsert(true))
		}
	}
	if len(writes) > 0 {
		if _, err := s.entries.BulkWrite(ctx, writes, unordered); err != nil && !onlyDuplicates(err) {
			return nil, nil, wrap("group: write entries", err)
		}
	}
	if len(records) > 0 {
		_, err := s.deliveries.BulkWrite(ctx, records, unordered)
		if onlyDuplicates(err) && err != nil {
			// Two upserts raced to create a record: it is there now.
			_, err = s.deliveries.BulkWrite(ctx, records, unordered)
		}
		if err != nil {
			return nil, nil, wrap("group: record", err)
		}
	}
	moved, err := s.advanceGroup(ctx, g)
	if err != nil || len(owners) == 0 {
		return changes, moved, err
	}
	if err := s.releaseUnmoved(ctx, g, moved); err != nil {
		return nil, nil, err
	}
	if err := s.dropGroup(ctx, g); err != nil {
		return nil, nil, err
	}
	return changes, moved, nil
}

// countGroup is owner h's count step for a group: its entries of the
// group counted at once, under the group mark.
func countGroup(h *userDoc, lay storage.Layout, lq []planItem, mark string) bson.D {
	unread := int64(0)
	for _, it := range lq {
		if cmpID(it.Message, h.ReadMark) > 0 {
			unread++
		}
	}
	inc := bson.D{{Key: totalField(lay), Value: int64(len(lq))}, {Key: "iv", Value: int64(1)}}
	if unread > 0 {
		inc = append(inc, bson.E{Key: unreadField(lay), Value: unread})
	}
	set := bson.D{{Key: "lj", Value: mark}, {Key: "lq", Value: lq}, {Key: "la", Value: true}, {Key: "ll", Value: int32(lay)}}
	return bson.D{{Key: "$inc", Value: inc}, {Key: "$set", Value: set}}
}

// countsAfter returns an owner's counts after its entries so far of a
// group: on top of before, the fields the count step applied to (nil
// when counted by an earlier run: then after, read since, is reported).
func countsAfter(before, after *userDoc, lay storage.Layout, so []planItem) store.InboxCounts {
	if before == nil {
		if after == nil {
			return store.InboxCounts{}
		}
		return after.counts(lay)
	}
	c := before.counts(lay)
	for _, it := range so {
		c.Total++
		if cmpID(it.Message, before.ReadMark) > 0 {
			c.Unread++
		}
	}
	return c
}

// advanceGroup moves each job of g from its cursor to the next, or ends
// its share (with owner lanes: pulls the lane from j.pl, then ends the
// jobs whose last lane it was), in a bulk write or two, each update
// conditional on the cursor the plan names. It reports the jobs that did
// not move (gone, or turned into a retraction) as moved; a job advanced
// by an earlier run counts as moved too, which only a repeat sees.
func (s *Store) advanceGroup(ctx context.Context, g *groupPlan) ([]bool, error) {
	lanes := s.lanes.Load() > 1
	var first, ends []mongo.WriteModel
	for k := range g.Jobs {
		gj := &g.Jobs[k]
		j := g.job(gj)
		filter := s.jobFilter(j)
		switch {
		case lanes && gj.Done:
			lane := int32(j.Lane)
			first = append(first, mongo.NewUpdateOneModel().
				SetFilter(append(slices.Clone(filter), bson.E{Key: "$and", Value: bson.A{bson.D{{Key: "j.pl", Value: bson.D{{Key: "$ne", Value: bson.A{lane}}}}}}})).
				SetUpdate(bson.D{
					{Key: "$pull", Value: bson.D{{Key: "j.pl", Value: lane}}},
					{Key: "$unset", Value: bson.D{{Key: laneField(j.Lane, "cur"), Value: ""}, {Key: laneField(j.Lane, "p"), Value: ""}, {Key: laneField(j.Lane, "gc"), Value: ""}}},
				}))
			ends = append(ends, mongo.NewUpdateOneModel().
				SetFilter(append(slices.Clone(filter), bson.E{Key: "$and", Value: bson.A{bson.D{{Key: "j.pl", Value: bson.A{lane}}}}})).
				SetUpdate(bson.D{{Key: "$unset", Value: bson.D{{Key: "j", Value: ""}}}}))
		case gj.Done:
			first = append(first, mongo.NewUpdateOneModel().SetFilter(filter).
				SetUpdate(bson.D{{Key: "$unset", Value: bson.D{{Key: "j", Value: ""}}}}))
		default:
			first = append(first, mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(bson.D{
				{Key: "$set", Value: bson.D{{Key: laneField(j.Lane, "cur"), Value: gj.Next}}},
				{Key: "$unset", Value: bson.D{{Key: laneField(j.Lane, "p"), Value: ""}, {Key: laneField(j.Lane, "gc"), Value: ""}}},
			}))
		}
	}
	res, err := s.messages.BulkWrite(ctx, first, ordered)
	if err != nil {
		return nil, wrap("group: advance jobs", err)
	}
	matched := res.MatchedCount
	if len(ends) > 0 && int(matched) < len(first) {
		// The pulls that matched nothing: this lane was the last.
		r2, err := s.messages.BulkWrite(ctx, ends, ordered)
		if err != nil {
			return nil, wrap("group: end jobs", err)
		}
		matched += r2.MatchedCount
	}
	moved := make([]bool, len(g.Jobs))
	if int(matched) == len(first) {
		return moved, nil
	}
	// Some did not move (rare): a job turned into a retraction meanwhile
	// (or gone) moved; a job still at the plan's cursor is one whose end
	// raced another lane's: it is finished alone.
	for k := range g.Jobs {
		gj := &g.Jobs[k]
		var d messageDoc
		err := s.messages.FindOne(ctx, msgKey(store.ID(gj.Message), store.ID(gj.Author)),
			options.FindOne().SetProjection(bson.D{{Key: "j", Value: 1}, {Key: "a", Value: 1}})).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			moved[k] = true
			continue
		}
		if err != nil {
			return nil, wrap("group: advance jobs", err)
		}
		if d.Job != nil && d.Job.Kind != int32(storage.JobDeliver) {
			moved[k] = true
			continue
		}
		j := g.job(gj)
		if n, err := s.messages.CountDocuments(ctx, s.jobFilter(j)); err != nil {
			return nil, wrap("group: advance jobs", err)
		} else if n > 0 {
			gc := laneField(j.Lane, "gc")
			if _, err := s.messages.UpdateOne(ctx, append(msgKey(j.MessageID, j.AuthorID), bson.E{Key: gc, Value: g.ID}),
				bson.D{{Key: "$unset", Value: bson.D{{Key: gc, Value: ""}}}}); err != nil {
				return nil, wrap("group: advance jobs", err)
			}
			if err := s.advanceJob(ctx, j, gj.Next, gj.Done); err != nil {
				return nil, err
			}
		}
	}
	return moved, nil
}
