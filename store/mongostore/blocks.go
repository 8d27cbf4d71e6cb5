package mongostore

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
)

// relationDoc is one user's block or mute of another (see collBlocks in
// schema.go). Its time is its _id's. An edge is one document, written
// once: no count changes with it, so a block is one insert and needs no
// lock or marker.
type relationDoc struct {
	ID     primitive.ObjectID `bson:"_id"`
	User   primitive.ObjectID `bson:"u"`
	Target primitive.ObjectID `bson:"o"`
	Kind   int32              `bson:"rk"`
}

// relationEdge finds an edge by its shard key and its kind.
func relationEdge(user, target store.ID, kind store.RelationKind) bson.D {
	return bson.D{{Key: "u", Value: oid(user)}, {Key: "o", Value: oid(target)}, {Key: "rk", Value: int32(kind)}}
}

// Block implements storage.Backend: check the target, then insert the
// edge; the unique index (u, o, rk) refuses a second one, also one racing.
func (s *Store) Block(ctx context.Context, user, target store.ID, kind store.RelationKind, at time.Time) (bool, error) {
	if err := store.CheckRelation(user, target, kind); err != nil {
		return false, err
	}
	if kind == store.RelationBlock {
		// The target's NeverBlocked goes first: a crash before the
		// insert leaves it cleared for nothing, never a block behind it.
		// The update is the check that the target exists, as usersExist
		// is for a mute: the same one round trip.
		res, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(target)}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "nb", Value: ""}}}})
		if err != nil {
			return false, wrap("block", err)
		}
		if res.MatchedCount == 0 {
			return false, store.Errorf(store.ENOTFOUND, "user not found")
		}
	} else if err := s.usersExist(ctx, target); err != nil {
		return false, err
	}
	_, err := s.blocks.InsertOne(ctx, append(bson.D{{Key: "_id", Value: oid(store.NewID(at))}}, relationEdge(user, target, kind)...))
	if isDuplicate(err) {
		return false, nil
	}
	if err != nil {
		return false, wrap("block", err)
	}
	return true, nil
}

// Unblock implements storage.Backend: one delete by the shard key.
func (s *Store) Unblock(ctx context.Context, user, target store.ID, kind store.RelationKind) (bool, error) {
	if !kind.Valid() {
		return false, store.Errorf(store.EINVALID, "unknown relation kind %d", kind)
	}
	res, err := s.blocks.DeleteOne(ctx, relationEdge(user, target, kind))
	if err != nil {
		return false, wrap("unblock", err)
	}
	return res.DeletedCount > 0, nil
}

// ListBlocked implements storage.Backend, through the index (u, rk, _id),
// on the shard of user.
func (s *Store) ListBlocked(ctx context.Context, user store.ID, kind store.RelationKind, r store.Range) ([]store.Relation, error) {
	cond, sort := idRange("_id", r, true)
	opts := options.Find().SetSort(sort)
	if r.Limit > 0 {
		opts.SetLimit(int64(r.Limit))
	}
	filter := append(bson.D{{Key: "u", Value: oid(user)}, {Key: "rk", Value: int32(kind)}}, cond...)
	cur, err := s.blocks.Find(ctx, filter, opts)
	if err != nil {
		return nil, wrap("list blocked", err)
	}
	var ds []relationDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("list blocked", err)
	}
	out := make([]store.Relation, len(ds))
	for i, d := range ds {
		id := store.ID(d.ID)
		out[i] = store.Relation{ID: id, UserID: user, TargetID: store.ID(d.Target), Kind: kind, CreatedAt: id.Time()}
	}
	return out, nil
}

// FindBlocked implements storage.Backend: one query on the unique index
// (u, o, rk), covered, on the shard of user.
func (s *Store) FindBlocked(ctx context.Context, user store.ID, kind store.RelationKind, targets []store.ID) ([]bool, error) {
	out := make([]bool, len(targets))
	if len(targets) == 0 {
		return out, nil
	}
	found, err := s.findIDs(ctx, s.blocks, "o", bson.D{{Key: "u", Value: oid(user)}, {Key: "o", Value: bson.D{{Key: "$in", Value: oids(targets)}}}, {Key: "rk", Value: int32(kind)}}, nil, 0)
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

// FindBlockers implements storage.Backend: one query on the unique index
// (u, o, rk), covered, that names the owners, so it goes only to their
// shards.
func (s *Store) FindBlockers(ctx context.Context, author store.ID, owners []store.ID) ([]store.RelationKind, error) {
	out := make([]store.RelationKind, len(owners))
	if len(owners) == 0 {
		return out, nil
	}
	cur, err := s.blocks.Find(ctx, bson.D{{Key: "u", Value: bson.D{{Key: "$in", Value: oids(owners)}}}, {Key: "o", Value: oid(author)}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 0}, {Key: "u", Value: 1}, {Key: "rk", Value: 1}}))
	if err != nil {
		return nil, wrap("find blockers", err)
	}
	var ds []relationDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("find blockers", err)
	}
	kinds := make(map[store.ID]store.RelationKind, len(ds))
	for _, d := range ds {
		kinds[store.ID(d.User)] |= store.RelationKind(d.Kind)
	}
	for i, id := range owners {
		out[i] = kinds[id]
	}
	return out, nil
}

// ListFiltered implements storage.Backend: one range of the unique index
// (u, o, rk), covered, on the shard of user. A target both blocked and
// muted is two documents, so it reads up to twice limit.
func (s *Store) ListFiltered(ctx context.Context, user store.ID, limit int) ([]store.ID, error) {
	if limit <= 0 {
		return nil, nil
	}
	found, err := s.findIDs(ctx, s.blocks, "o", bson.D{{Key: "u", Value: oid(user)}}, bson.D{{Key: "o", Value: 1}}, 2*limit)
	if err != nil {
		return nil, err
	}
	out := make([]store.ID, 0, min(len(found), limit))
	for _, id := range found {
		if len(out) == limit {
			break
		}
		if len(out) == 0 || out[len(out)-1] != id {
			out = append(out, id)
		}
	}
	return out, nil
}

// ListBlockers implements storage.Backend: one range of the index
// (o, rk, u), covered. It names no shard key (blocks are sharded by the
// blocker), so on a sharded cluster it asks every shard: one round trip
// from the client, once per home page read by fan-out on read.
func (s *Store) ListBlockers(ctx context.Context, target store.ID, limit int) ([]store.ID, error) {
	if limit <= 0 {
		return nil, nil
	}
	return s.findIDs(ctx, s.blocks, "u", bson.D{{Key: "o", Value: oid(target)}, {Key: "rk", Value: int32(store.RelationBlock)}}, bson.D{{Key: "u", Value: 1}}, limit)
}
