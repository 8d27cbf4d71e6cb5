package mongostore

import (
	"context"
	"errors"
	"time"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
)

// Edge states in followees documents. A follow or unfollow touches four
// documents (two edges, two counters), so the followees edge records how far
// it got: if a crash stops one half way, the next follow or unfollow of the
// pair finishes it, and the counters change once per operation (incOnce).
// Operations on one pair run one at a time (lockPair).
const (
	edgeFollowing   = 0 // created; the other writes may not all be done
	edgeFollowed    = 1 // every write of the follow is done
	edgeUnfollowing = 2 // being removed
)

type edgeDoc struct {
	User  primitive.ObjectID `bson:"u"`
	Other primitive.ObjectID `bson:"o"`
	At    time.Time          `bson:"t"`
	Op    string             `bson:"op,omitempty"`
	State int                `bson:"st"`
	UnOp  string             `bson:"uop,omitempty"`
}

func edgeFilter(u, o store.ID) bson.D {
	return bson.D{{Key: "u", Value: oid(u)}, {Key: "o", Value: oid(o)}}
}

// lockTTL bounds how long a lock holder may take; a lock older than this
// is taken over (its holder crashed: requests end long before).
const lockTTL = 30 * time.Second

// lockPair serialises follows and unfollows of one pair: their steps touch
// four documents, and an operation reading the edge while another is half
// way could apply a counter change twice. It waits for the lock until ctx
// ends and returns the unlock.
func (s *Store) lockPair(ctx context.Context, follower, followee store.ID) (func(), error) {
	key := follower.String() + followee.String()
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

// Follow implements storage.Backend.
func (s *Store) Follow(ctx context.Context, follower, followee store.ID, at time.Time) (bool, error) {
	if err := s.usersExist(ctx, follower, followee); err != nil {
		return false, err
	}
	unlock, err := s.lockPair(ctx, follower, followee)
	if err != nil {
		return false, err
	}
	defer unlock()
	return s.follow(ctx, follower, followee, at)
}

func (s *Store) follow(ctx context.Context, follower, followee store.ID, at time.Time) (bool, error) {
	op := "f" + store.NewID(at).String()
	upd := bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "t", Value: at}, {Key: "op", Value: op}, {Key: "st", Value: edgeFollowing}}}}
	opts := options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)
	var e edgeDoc
	err := s.followees.FindOneAndUpdate(ctx, edgeFilter(follower, followee), upd, opts).Decode(&e)
	if err != nil {
		return false, wrap("follow", err)
	}
	switch e.State {
	case edgeFollowed:
		return false, nil
	case edgeUnfollowing:
		// An unfollow stopped half way: finish it, then follow anew.
		if err := s.finishUnfollow(ctx, &e); err != nil {
			return false, err
		}
		return s.follow(ctx, follower, followee, at)
	}
	return true, s.finishFollow(ctx, &e)
}

// finishFollow does the rest of a follow whose followees edge exists. Every
// step is idempotent, so an operation that finds a follow left half done by
// a crash finishes it; the caller holds the pair's lock.
func (s *Store) finishFollow(ctx context.Context, e *edgeDoc) error {
	follower, followee := store.ID(e.User), store.ID(e.Other)
	_, err := s.followers.UpdateOne(ctx, edgeFilter(followee, follower),
		bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "t", Value: e.At}}}}, options.Update().SetUpsert(true))
	if err != nil && !isDuplicate(err) {
		return wrap("follow", err)
	}
	if err := s.incOnce(ctx, follower, e.Op, bson.D{{Key: "fg", Value: 1}}); err != nil {
		return err
	}
	if err := s.incOnce(ctx, followee, e.Op, bson.D{{Key: "fr", Value: 1}}); err != nil {
		return err
	}
	_, err = s.followees.UpdateOne(ctx, append(edgeFilter(follower, followee), bson.E{Key: "op", Value: e.Op}, bson.E{Key: "st", Value: edgeFollowing}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "st", Value: edgeFollowed}}}})
	if err != nil {
		return wrap("follow", err)
	}
	// The edge now says the counters are done: their markers can go.
	if err := s.forgetOp(ctx, follower, e.Op); err != nil {
		return err
	}
	return s.forgetOp(ctx, followee, e.Op)
}

// Unfollow implements storage.Backend.
func (s *Store) Unfollow(ctx context.Context, follower, followee store.ID) (bool, error) {
	if err := s.usersExist(ctx, follower, followee); err != nil {
		return false, err
	}
	unlock, err := s.lockPair(ctx, follower, followee)
	if err != nil {
		return false, err
	}
	defer unlock()
	var e edgeDoc
	err = s.followees.FindOne(ctx, edgeFilter(follower, followee)).Decode(&e)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	} else if err != nil {
		return false, wrap("unfollow", err)
	}
	if e.State == edgeFollowing {
		// The follow stopped half way: finish it so its counts are right to undo.
		if err := s.finishFollow(ctx, &e); err != nil {
			return false, err
		}
	}
	if e.UnOp == "" {
		e.UnOp, e.State = "u"+store.NewID(time.Now()).String(), edgeUnfollowing
		_, err := s.followees.UpdateOne(ctx, edgeFilter(follower, followee),
			bson.D{{Key: "$set", Value: bson.D{{Key: "st", Value: edgeUnfollowing}, {Key: "uop", Value: e.UnOp}}}})
		if err != nil {
			return false, wrap("unfollow", err)
		}
	}
	return true, s.finishUnfollow(ctx, &e)
}

// finishUnfollow does the rest of an unfollow whose followees edge carries
// its operation. Every step is idempotent; the edge goes last.
func (s *Store) finishUnfollow(ctx context.Context, e *edgeDoc) error {
	follower, followee := store.ID(e.User), store.ID(e.Other)
	if err := s.incOnce(ctx, follower, e.UnOp, bson.D{{Key: "fg", Value: -1}}); err != nil {
		return err
	}
	if err := s.incOnce(ctx, followee, e.UnOp, bson.D{{Key: "fr", Value: -1}}); err != nil {
		return err
	}
	if _, err := s.followers.DeleteOne(ctx, edgeFilter(followee, follower)); err != nil {
		return wrap("unfollow", err)
	}
	if _, err := s.followees.DeleteOne(ctx, append(edgeFilter(follower, followee), bson.E{Key: "uop", Value: e.UnOp})); err != nil {
		return wrap("unfollow", err)
	}
	// A crash before these leaves a stale marker, which no later operation
	// uses: harmless.
	if err := s.forgetOp(ctx, follower, e.UnOp); err != nil {
		return err
	}
	return s.forgetOp(ctx, followee, e.UnOp)
}

// FindFollowing implements storage.Backend.
func (s *Store) FindFollowing(ctx context.Context, follower store.ID, targets []store.ID) ([]bool, error) {
	out := make([]bool, len(targets))
	if len(targets) == 0 {
		return out, nil
	}
	ids, err := s.findEdges(ctx, s.followees, bson.D{{Key: "u", Value: oid(follower)}, {Key: "o", Value: bson.D{{Key: "$in", Value: oids(targets)}}}}, nil, 0)
	if err != nil {
		return nil, err
	}
	set := make(map[store.ID]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	for i, t := range targets {
		out[i] = set[t]
	}
	return out, nil
}

// ListFollowers implements storage.Backend.
func (s *Store) ListFollowers(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	return s.listEdges(ctx, s.followers, user, r)
}

// ListFollowing implements storage.Backend.
func (s *Store) ListFollowing(ctx context.Context, user store.ID, r store.Range) ([]store.ID, error) {
	return s.listEdges(ctx, s.followees, user, r)
}

// listEdges reads user's edges within r through the (u, o) index.
func (s *Store) listEdges(ctx context.Context, coll lungo.ICollection, user store.ID, r store.Range) ([]store.ID, error) {
	cond, sort := idRange("o", r, false)
	return s.findEdges(ctx, coll, append(bson.D{{Key: "u", Value: oid(user)}}, cond...), sort, r.Limit)
}

// findEdges reads the other ends of the edges filter selects, in sort
// order (nil: any), up to limit (0: all). The projection names only
// indexed fields, so MongoDB answers from the (u, o) index alone (a
// covered query) on the one shard that holds u.
func (s *Store) findEdges(ctx context.Context, coll lungo.ICollection, filter, sort bson.D, limit int) ([]store.ID, error) {
	opts := options.Find().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "o", Value: 1}})
	if sort != nil {
		opts.SetSort(sort)
	}
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, wrap("list edges", err)
	}
	var rows []struct {
		Other primitive.ObjectID `bson:"o"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("list edges", err)
	}
	out := make([]store.ID, len(rows))
	for i, r := range rows {
		out[i] = store.ID(r.Other)
	}
	return out, nil
}
