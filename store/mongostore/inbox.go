package mongostore

import (
	"bytes"
	"context"
	"errors"
	"time"

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

// chunkPlan is a delivery chunk's plan, stored in its job (j.p) before the
// chunk counts anything: the owners it delivers to, and the key of its
// delivery record (the last owner the Service first listed).
type chunkPlan struct {
	Key    primitive.ObjectID   `bson:"k"`
	Owners []primitive.ObjectID `bson:"o"`
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
	var stored *storage.Job
	var sh laneShare
	settled := false
	n := s.laneCount()
	// A share a group claimed: the group is finished first (or its stale
	// claim released), then the share read again. Each settling takes a
	// claim off for good, so this ends.
	for {
		d = messageDoc{} // a decode leaves the fields the document lacks
		err := s.messages.FindOne(ctx, msgKey(j.MessageID, j.AuthorID),
			options.FindOne().SetProjection(bson.D{{Key: "t", Value: 0}})).Decode(&d)
		if err != nil {
			return nil, nil, missing(err, "job not found", "find job")
		}
		stored = d.laneJob(j.Lane, n)
		if stored == nil || stored.Kind != j.Kind {
			return nil, nil, store.Errorf(store.ENOTFOUND, "job not found")
		}
		var pending bool
		sh, pending = d.Job.share(j.Lane, n)
		if !pending {
			return nil, nil, store.Errorf(store.ENOTFOUND, "job's share done")
		}
		if sh.Claim == nil {
			break
		}
		if err := s.settleClaim(ctx, j, *sh.Claim); err != nil {
			return nil, nil, err
		}
		settled = true
	}
	if settled && j.Kind == storage.JobRetract {
		// The group may have written records the chunk's refs (read
		// before) lack: the Service reads them again.
		return nil, nil, errors.New("mongostore retract: a group's claim was settled; the records are read again")
	}
	if !bytes.Equal(stored.Cursor, j.Cursor) {
		return nil, nil, nil
	}
	// With owner lanes only lane 0's share counts: count's steps assume
	// one writer (two lanes at once could both take the message out, one
	// after the other's marker is forgotten), and lane 0's share runs
	// before the job can end.
	if len(stored.Cursor) == 0 && j.Lane == 0 {
		if err := s.countByJob(ctx, &d, stored.Kind == storage.JobRetract); err != nil {
			return nil, nil, err
		}
	}
	return stored, sh.Plan, s.beginJob(ctx, stored)
}

// jobFilter matches j's message while its job is j's kind at j's cursor
// (with owner lanes: j's lane's share at its cursor, not done).
func (s *Store) jobFilter(j *storage.Job) bson.D {
	filter := append(msgKey(j.MessageID, j.AuthorID), bson.E{Key: "j.k", Value: int32(j.Kind)})
	if s.lanes.Load() > 1 {
		filter = append(filter, bson.E{Key: "j.pl", Value: int32(j.Lane)})
	}
	cur := laneField(j.Lane, "cur")
	if len(j.Cursor) == 0 {
		return append(filter, bson.E{Key: cur, Value: bson.D{{Key: "$exists", Value: false}}})
	}
	return append(filter, bson.E{Key: cur, Value: j.Cursor})
}

// advanceJob moves a job from its cursor to the next, dropping the chunk's
// plan, or ends it. The update names the old cursor, so of two processes
// running one chunk only one moves the job on.
func (s *Store) advanceJob(ctx context.Context, j *storage.Job, cursor []byte, done bool) error {
	filter := append(s.jobFilter(j), unclaimed(j.Lane))
	var err error
	switch {
	case s.lanes.Load() > 1 && done:
		return s.finishShare(ctx, j)
	case done && j.Kind == storage.JobRetract:
		_, err = s.messages.DeleteOne(ctx, filter)
	case done:
		_, err = s.messages.UpdateOne(ctx, filter, bson.D{{Key: "$unset", Value: bson.D{{Key: "j", Value: ""}}}})
	default:
		_, err = s.messages.UpdateOne(ctx, filter, bson.D{
			{Key: "$set", Value: bson.D{{Key: laneField(j.Lane, "cur"), Value: cursor}}},
			{Key: "$unset", Value: bson.D{{Key: laneField(j.Lane, "p"), Value: ""}}},
		})
	}
	return wrap("advance job", err)
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

// bucketKeysAndEntries projects what a scan of buckets reads. Whole
// entries, not only their messages ("e.m"): lungo's engine does not
// project fields inside arrays.
var bucketKeysAndEntries = bson.D{{Key: "k", Value: 1}, {Key: "e", Value: 1}}
