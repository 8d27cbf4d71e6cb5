package mongostore

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
)

// followRequestDoc is a request to follow a private account (see
// collFollowRequests in schema.go). Its time is its _id's. A request is
// one document, written once, with no count beside it: one insert, no
// lock or marker.
type followRequestDoc struct {
	ID     primitive.ObjectID `bson:"_id"`
	User   primitive.ObjectID `bson:"u"`
	Target primitive.ObjectID `bson:"o"`
}

// followRequestOf finds a request by its shard key.
func followRequestOf(user, target store.ID) bson.D {
	return bson.D{{Key: "o", Value: oid(target)}, {Key: "u", Value: oid(user)}}
}

// RequestFollow implements storage.Backend: check the target, then insert
// the request; the unique index (o, u) refuses a second one, also one
// racing.
func (s *Store) RequestFollow(ctx context.Context, user, target store.ID, at time.Time) (bool, error) {
	if user == target {
		return false, store.Errorf(store.EINVALID, "a user cannot ask to follow themselves")
	}
	if err := s.usersExist(ctx, target); err != nil {
		return false, err
	}
	_, err := s.followRequests.InsertOne(ctx, append(bson.D{{Key: "_id", Value: oid(store.NewID(at))}}, followRequestOf(user, target)...))
	if isDuplicate(err) {
		return false, nil
	}
	if err != nil {
		return false, wrap("request follow", err)
	}
	return true, nil
}

// RemoveFollowRequest implements storage.Backend: one delete by the shard
// key.
func (s *Store) RemoveFollowRequest(ctx context.Context, user, target store.ID) (bool, error) {
	res, err := s.followRequests.DeleteOne(ctx, followRequestOf(user, target))
	if err != nil {
		return false, wrap("remove follow request", err)
	}
	return res.DeletedCount > 0, nil
}

// ListFollowRequests implements storage.Backend, through the index
// (o, _id), on the shard of target.
func (s *Store) ListFollowRequests(ctx context.Context, target store.ID, r store.Range) ([]store.FollowRequest, error) {
	cond, sort := idRange("_id", r, false)
	opts := options.Find().SetSort(sort)
	if r.Limit > 0 {
		opts.SetLimit(int64(r.Limit))
	}
	cur, err := s.followRequests.Find(ctx, append(bson.D{{Key: "o", Value: oid(target)}}, cond...), opts)
	if err != nil {
		return nil, wrap("list follow requests", err)
	}
	var ds []followRequestDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("list follow requests", err)
	}
	out := make([]store.FollowRequest, len(ds))
	for i, d := range ds {
		id := store.ID(d.ID)
		out[i] = store.FollowRequest{ID: id, UserID: store.ID(d.User), TargetID: target, CreatedAt: id.Time().UTC()}
	}
	return out, nil
}

// FindFollowRequests implements storage.Backend: one query on the unique
// index (o, u), covered, that names the targets, so it goes only to their
// shards.
func (s *Store) FindFollowRequests(ctx context.Context, user store.ID, targets []store.ID) ([]bool, error) {
	out := make([]bool, len(targets))
	if len(targets) == 0 {
		return out, nil
	}
	found, err := s.findIDs(ctx, s.followRequests, "o", bson.D{{Key: "o", Value: bson.D{{Key: "$in", Value: oids(targets)}}}, {Key: "u", Value: oid(user)}}, nil, 0)
	if err != nil {
		return nil, err
	}
	set := make(map[store.ID]bool, len(found))
	for _, id := range found {
		set[id] = true
	}
	for i, id := range targets {
		out[i] = set[id]
	}
	return out, nil
}

// CountFollowRequests implements storage.Backend: a count of the index
// (o, _id) range of target, on its shard.
func (s *Store) CountFollowRequests(ctx context.Context, target store.ID) (int, error) {
	n, err := s.followRequests.CountDocuments(ctx, bson.D{{Key: "o", Value: oid(target)}})
	return int(n), wrap("count follow requests", err)
}
