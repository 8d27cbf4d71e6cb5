package mongostore

import (
	"context"
	"time"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/bson"

	"herald/store"
)

// The building blocks of operations that write several documents without a
// transaction (follows, likes, message counts): a short lock that makes
// the operations on one pair run one at a time, and counter changes applied
// once per operation, marked on the counted document itself.

// lockTTL bounds how long a lock holder may take; a lock older than this
// is taken over (its holder crashed: requests end long before).
const lockTTL = 30 * time.Second

// lock serialises the operations that share key (a follow pair, a like
// pair): their steps touch several documents, and an operation reading the
// state while another is half way could apply a counter change twice (or,
// after that one forgot its marker, again). It waits for the lock until
// ctx ends and returns the unlock.
func (s *Store) lock(ctx context.Context, key string) (func(), error) {
	tok := store.NewID(time.Now()).String()
	for {
		now := time.Now().UTC()
		_, err := s.locks.InsertOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "k", Value: tok}, {Key: "x", Value: now.Add(lockTTL)}})
		if err == nil {
			return func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				_, _ = s.locks.DeleteOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "k", Value: tok}})
			}, nil
		} else if !isDuplicate(err) {
			return nil, wrap("lock", err)
		}
		// Held: take it over if it expired, else wait a moment.
		if res, err := s.locks.DeleteOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "x", Value: bson.D{{Key: "$lt", Value: now}}}}); err != nil {
			return nil, wrap("lock", err)
		} else if res.DeletedCount == 1 {
			continue
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// userKey finds user id's document (users are sharded on _id).
func userKey(id store.ID) bson.D { return bson.D{{Key: "_id", Value: oid(id)}} }

// incOnce applies inc to the counters of the document filter finds (which
// names its shard key: a user by userKey, a message by msgKey) once for
// operation op: the update also records op in the document's pending
// operations (po), and is conditional on op not being there, so a retry
// changes nothing. When the operation has recorded elsewhere that its
// counters are done, it calls forgetOp, which keeps po small. A document
// that is gone is not counted, and no error.
func (s *Store) incOnce(ctx context.Context, coll lungo.ICollection, filter bson.D, op string, inc bson.D) error {
	cond := append(filter[:len(filter):len(filter)], bson.E{Key: "po", Value: bson.D{{Key: "$ne", Value: op}}})
	_, err := coll.UpdateOne(ctx, cond, bson.D{{Key: "$inc", Value: inc}, {Key: "$push", Value: bson.D{{Key: "po", Value: op}}}})
	return wrap("update counters", err)
}

// forgetOp drops finished operations from the pending operations of the
// document filter finds, in one update.
func (s *Store) forgetOp(ctx context.Context, coll lungo.ICollection, filter bson.D, ops ...string) error {
	pull := bson.D{{Key: "po", Value: ops[0]}}
	if len(ops) > 1 {
		pull = bson.D{{Key: "po", Value: bson.D{{Key: "$in", Value: ops}}}}
	}
	_, err := coll.UpdateOne(ctx, filter, bson.D{{Key: "$pull", Value: pull}})
	return wrap("update counters", err)
}

// findPresent reports, for each of ids, whether coll holds an edge of user
// (u) to it (field), in one query covered by the (u, field) index.
func (s *Store) findPresent(ctx context.Context, coll lungo.ICollection, user store.ID, field string, ids []store.ID) ([]bool, error) {
	out := make([]bool, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	found, err := s.findIDs(ctx, coll, field, bson.D{{Key: "u", Value: oid(user)}, {Key: field, Value: bson.D{{Key: "$in", Value: oids(ids)}}}}, nil, 0)
	if err != nil {
		return nil, err
	}
	set := make(map[store.ID]bool, len(found))
	for _, id := range found {
		set[id] = true
	}
	for i, id := range ids {
		out[i] = set[id]
	}
	return out, nil
}
