package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store/storage"
)

// JobBacklog implements storage.Backend without reading the jobs: a count
// of each place jobs are kept (messages through the partial jobs index,
// the jobs collection, users through the partial rebuilding index), each
// stopped at what limit leaves, and the oldest of each kind by one indexed
// read: a JobDeliver by its message's _id (its creation), a JobRetract by
// its deletion time x (the retractions index: its _id is the message's,
// older than the retraction), a job of the jobs collection by its _id (an
// ID taken when it was stored), a JobRebuild by rb.i (the same).
func (s *Store) JobBacklog(ctx context.Context, limit int) (storage.JobBacklog, error) {
	var b storage.JobBacklog
	withJob := bson.E{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}
	counts := []struct {
		coll interface {
			CountDocuments(context.Context, interface{}, ...*options.CountOptions) (int64, error)
		}
		filter bson.D
		hint   string // the partial index to count, not the collection
	}{
		{s.messages, bson.D{withJob}, "jobs"},
		{s.jobs, bson.D{}, ""},
		{s.users, bson.D{{Key: "rb", Value: bson.D{{Key: "$exists", Value: true}}}}, "rebuilding"},
	}
	for _, c := range counts {
		if b.Jobs >= limit {
			break
		}
		opts := options.Count().SetLimit(int64(limit - b.Jobs))
		if c.hint != "" {
			opts.SetHint(c.hint)
		}
		n, err := c.coll.CountDocuments(ctx, c.filter, opts)
		if err != nil {
			return storage.JobBacklog{}, wrap("count jobs", err)
		}
		b.Jobs += int(n)
	}
	if b.Jobs == 0 {
		return b, nil
	}
	older := func(t time.Time) {
		if !t.IsZero() && (b.Oldest.IsZero() || t.Before(b.Oldest)) {
			b.Oldest = t.UTC()
		}
	}

	var m messageDoc
	err := s.messages.FindOne(ctx, bson.D{withJob, {Key: "j.k", Value: int32(storage.JobDeliver)}},
		options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}}).SetProjection(bson.D{{Key: "c", Value: 1}}).SetHint("jobs")).Decode(&m)
	if err = found(err); err != nil {
		return storage.JobBacklog{}, wrap("find oldest job", err)
	}
	older(m.Created)

	m = messageDoc{}
	err = s.messages.FindOne(ctx, bson.D{withJob, {Key: "j.k", Value: int32(storage.JobRetract)}},
		options.FindOne().SetSort(bson.D{{Key: "j.k", Value: 1}, {Key: "x", Value: 1}}).SetProjection(bson.D{{Key: "x", Value: 1}}).SetHint("retractions")).Decode(&m)
	if err = found(err); err != nil {
		return storage.JobBacklog{}, wrap("find oldest job", err)
	}
	if m.Deleted != nil {
		older(*m.Deleted)
	}

	var j struct {
		Created time.Time `bson:"c"`
	}
	err = s.jobs.FindOne(ctx, bson.D{}, options.FindOne().SetSort(bson.D{{Key: "_id", Value: 1}}).SetProjection(bson.D{{Key: "c", Value: 1}})).Decode(&j)
	if err = found(err); err != nil {
		return storage.JobBacklog{}, wrap("find oldest job", err)
	}
	older(j.Created)

	var u userDoc
	err = s.users.FindOne(ctx, bson.D{{Key: "rb", Value: bson.D{{Key: "$exists", Value: true}}}},
		options.FindOne().SetSort(bson.D{{Key: "rb.i", Value: 1}}).SetProjection(bson.D{{Key: "rb", Value: 1}}).SetHint("rebuilding")).Decode(&u)
	if err = found(err); err != nil {
		return storage.JobBacklog{}, wrap("find oldest job", err)
	}
	if u.Rebuild != nil {
		older(u.Rebuild.Created)
	}
	return b, nil
}

// found returns err, nil for no document.
func found(err error) error {
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	return err
}
