package mongostore

import (
	"bytes"
	"context"
	"encoding/hex"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// hideMark names the count step of the chunk of JobHideReposts j that
// starts at cursor: each chunk is counted once.
func hideMark(j store.ID, cursor []byte) string { return "h" + j.String() + hex.EncodeToString(cursor) }

// RemoveOwnerEntries implements storage.Backend. A chunk runs as a
// whole-inbox job does, in steps each safe to repeat: the job is checked
// to be at the chunk's cursor (else the chunk was applied: nothing
// changes), the count step takes the listed entries that are there off the
// owner's counters and stores them as the plan (a repeat finds the stored
// plan by the chunk's mark), the plan is removed, and the job advances
// (conditionally on its cursor) or ends. A crash between steps leaves the
// job at the chunk's cursor, and its re-run completes the chunk.
func (s *Store) RemoveOwnerEntries(ctx context.Context, r storage.OwnerRemoval) ([]storage.InboxChange, error) {
	if r.Job.Kind != storage.JobHideReposts {
		return nil, store.Errorf(store.EINTERNAL, "RemoveOwnerEntries runs hide jobs, not kind %d", r.Job.Kind)
	}
	oj, err := s.startOwnerJob(ctx, r.Job)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(oj.job.Cursor, r.Job.Cursor) {
		return nil, nil // applied already
	}
	lay, owner := oj.job.Layout, oj.job.OwnerID
	if !lay.Stores() {
		return nil, store.Errorf(store.EINTERNAL, "job %s writes layout %d, which stores no entries", oj.job.ID, lay)
	}
	var changes []storage.InboxChange
	if len(r.MessageIDs) > 0 {
		changes, err = s.removeCounted(ctx, oj, hideMark(oj.job.ID, oj.job.Cursor), func(head *userDoc) ([]planItem, bson.D, error) {
			return s.planOwnerRemoval(ctx, owner, lay, head, r.MessageIDs)
		})
		if err != nil {
			return nil, err
		}
	}
	if r.Done {
		return changes, s.endOwnerJob(ctx, oj)
	}
	at := bson.D{{Key: "_id", Value: oj.inst}}
	if len(oj.job.Cursor) == 0 {
		at = append(at, bson.E{Key: "cur", Value: bson.D{{Key: "$exists", Value: false}}})
	} else {
		at = append(at, bson.E{Key: "cur", Value: oj.job.Cursor})
	}
	_, err = s.jobs.UpdateOne(ctx, at, bson.D{{Key: "$set", Value: bson.D{{Key: "cur", Value: r.Cursor}}}})
	return changes, wrap("advance job", err)
}

// planOwnerRemoval returns the entries of ids that owner's inbox holds
// (with their buckets) and the count step's update.
func (s *Store) planOwnerRemoval(ctx context.Context, owner store.ID, lay storage.Layout, head *userDoc, ids []store.ID) ([]planItem, bson.D, error) {
	ms := make(bson.A, 0, len(ids))
	want := make(map[primitive.ObjectID]bool, len(ids))
	for _, id := range ids {
		if !want[oid(id)] {
			want[oid(id)] = true
			ms = append(ms, oid(id))
		}
	}
	var plan []planItem
	if lay == storage.LayoutEntries {
		present, err := s.idSet(ctx, s.entries, "m", bson.D{{Key: "o", Value: oid(owner)}, {Key: "m", Value: bson.D{{Key: "$in", Value: ms}}}})
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			if present[m.(primitive.ObjectID)] {
				plan = append(plan, planItem{Message: m.(primitive.ObjectID)})
			}
		}
	} else {
		cur, err := s.buckets.Find(ctx, bson.D{{Key: "o", Value: oid(owner)}, {Key: "e.m", Value: bson.D{{Key: "$in", Value: ms}}}},
			options.Find().SetProjection(bucketKeysAndEntries))
		if err != nil {
			return nil, nil, wrap("find owner entries", err)
		}
		var bs []bucketDoc
		if err := cur.All(ctx, &bs); err != nil {
			return nil, nil, wrap("find owner entries", err)
		}
		for _, b := range bs {
			for _, e := range b.Entries {
				if want[e.Message] {
					want[e.Message] = false // once, in one bucket
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
