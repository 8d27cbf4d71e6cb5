package mongostore

import (
	"context"
	"errors"
	"fmt"
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

// lockPair serialises follows and unfollows of one pair (see lock).
func (s *Store) lockPair(ctx context.Context, follower, followee store.ID) (func(), error) {
	return s.lock(ctx, follower.String()+followee.String())
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
	if err := s.incOnce(ctx, s.users, userKey(follower), e.Op, bson.D{{Key: "fg", Value: 1}}); err != nil {
		return err
	}
	if err := s.incOnce(ctx, s.users, userKey(followee), e.Op, bson.D{{Key: "fr", Value: 1}}); err != nil {
		return err
	}
	_, err = s.followees.UpdateOne(ctx, append(edgeFilter(follower, followee), bson.E{Key: "op", Value: e.Op}, bson.E{Key: "st", Value: edgeFollowing}),
		bson.D{{Key: "$set", Value: bson.D{{Key: "st", Value: edgeFollowed}}}})
	if err != nil {
		return wrap("follow", err)
	}
	// The edge now says the counters are done: their markers can go.
	if err := s.forgetOp(ctx, s.users, userKey(follower), e.Op); err != nil {
		return err
	}
	return s.forgetOp(ctx, s.users, userKey(followee), e.Op)
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
	if err := s.incOnce(ctx, s.users, userKey(follower), e.UnOp, bson.D{{Key: "fg", Value: -1}}); err != nil {
		return err
	}
	if err := s.incOnce(ctx, s.users, userKey(followee), e.UnOp, bson.D{{Key: "fr", Value: -1}}); err != nil {
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
	if err := s.forgetOp(ctx, s.users, userKey(follower), e.UnOp); err != nil {
		return err
	}
	return s.forgetOp(ctx, s.users, userKey(followee), e.UnOp)
}

// FindFollowing implements storage.Backend.
func (s *Store) FindFollowing(ctx context.Context, follower store.ID, targets []store.ID) ([]bool, error) {
	return s.findPresent(ctx, s.followees, follower, "o", targets)
}

// FindFollowers implements storage.Backend: one covered query on the
// followers edges' (u, o) index, on the shard of followee.
func (s *Store) FindFollowers(ctx context.Context, followee store.ID, candidates []store.ID) ([]bool, error) {
	return s.findPresent(ctx, s.followers, followee, "o", candidates)
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
	return s.findIDs(ctx, coll, "o", append(bson.D{{Key: "u", Value: oid(user)}}, cond...), sort, r.Limit)
}

// findIDs reads the IDs in field of the documents filter selects, in sort
// order (nil: any), up to limit (0: all). The projection names only that
// field, so MongoDB answers from an index on (u, field) alone (a covered
// query: the follow edges' (u, o), the likes' (u, m)) on the one shard
// that holds u.
func (s *Store) findIDs(ctx context.Context, coll lungo.ICollection, field string, filter, sort bson.D, limit int) ([]store.ID, error) {
	opts := options.Find().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: field, Value: 1}})
	if sort != nil {
		opts.SetSort(sort)
	}
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := coll.Find(ctx, filter, opts)
	if err != nil {
		return nil, wrap("list ids", err)
	}
	var rows []bson.Raw
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("list ids", err)
	}
	out := make([]store.ID, len(rows))
	for i, r := range rows {
		id, ok := r.Lookup(field).ObjectIDOK()
		if !ok {
			return nil, wrap("list ids", fmt.Errorf("%s is not an ID", field))
		}
		out[i] = store.ID(id)
	}
	return out, nil
}
