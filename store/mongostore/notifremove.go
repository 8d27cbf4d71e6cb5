package mongostore

import (
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

// Removing an actor from a feed (RemoveNotificationActor) runs under the
// owner's claim, as a notice does, one group at a time. A group's step
// touches three documents (the group, the actor, the head), so its plan is
// written into the claim (np.nq) before any of them changes:
//
//  1. plan: the group, its count as read, its latest actors without the
//     actor, the actor's document, and what the head loses (a group
//     removed: one in total, and one unread if it was unread);
//  2. the group: removed if the actor was its only one, else its count
//     lowered and its latest actors set, each only if its count is still
//     the one planned, so a step applies once;
//  3. the actor's document is deleted;
//  4. the head takes the plan's changes in the update that replaces the
//     plan with the next group's and renews the claim (or releases it):
//     exactly once, as it is conditional on the plan.
//
// A crash leaves the plan in the claim, and the owner's every other
// operation waits on the claim and, once it expired, finishes the plan
// (steps 2 to 4, each idempotent) before anything else: each group is old
// or new, and the counts agree with the groups. A re-run of the removal
// then finds the actor's groups that are left.

// removalPlan is one group's step of a removal (np.nq).
type removalPlan struct {
	Group primitive.ObjectID   `bson:"g"`
	Key   string               `bson:"k"`
	Count int32                `bson:"nc"`
	Nl    []primitive.ObjectID `bson:"nl,omitempty"`
	Actor primitive.ObjectID   `bson:"na"`
	// Drop is the head's losses, total (2) and unread (1).
	Drop int32 `bson:"nd,omitempty"`
}

// RemoveNotificationActor implements storage.Backend: see the steps above.
// Finding the actor's groups is one read of the index (o, u) of the actors
// per 100 groups; each group costs four round trips (its read, then its
// group, its actor, and the head with the next plan), five when the actor
// was among its latest (their successors are read); the claim and the
// first plan add two, and each further 100 groups a claim and a find: an
// actor in k groups costs 3 + 4k to 3 + 5k, an actor in none three
// (claim, find, release).
func (s *Store) RemoveNotificationActor(ctx context.Context, owner, actor store.ID) (storage.ActorRemoval, error) {
	id := oid(store.NewID(time.Now()))
	out, err := s.removeActor(ctx, owner, actor, id)
	if err != nil {
		s.expireClaim(ctx, owner, id)
	}
	return out, err
}

// removeActorBatch bounds the actor documents read at once. Tests lower it.
var removeActorBatch = 100

func (s *Store) removeActor(ctx context.Context, owner, actor store.ID, id primitive.ObjectID) (storage.ActorRemoval, error) {
	var out storage.ActorRemoval
	h, held, _, err := s.claimFeed(ctx, owner, notifPending{ID: id, Actor: oid(actor)})
	if err != nil {
		return out, err
	}
	c := h.counts()
	out.Counts = c
	var plan *removalPlan
	for {
		cur, err := s.notifActors.Find(ctx, bson.D{{Key: "o", Value: oid(owner)}, {Key: "u", Value: oid(actor)}},
			options.Find().SetProjection(bson.D{{Key: "g", Value: 1}}).SetLimit(int64(removeActorBatch)))
		if err != nil {
			return out, wrap("find notification actor", err)
		}
		var ds []notifActorDoc
		if err := cur.All(ctx, &ds); err != nil {
			return out, wrap("find notification actor", err)
		}
		if len(ds) == 0 {
			break
		}
		for i := range ds {
			next, err := s.planActorRemoval(ctx, owner, actor, &ds[i], c)
			if err != nil {
				return out, err
			}
			if plan == nil {
				// The first plan goes into the claim on its own; the next
				// ones with the head update of the one before.
				res, err := s.notifHeads.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "np.ni", Value: id}, {Key: "np.nx", Value: held}},
					bson.D{{Key: "$set", Value: bson.D{{Key: "np.nq", Value: next}}}})
				if err != nil {
					return out, wrap("plan notification removal", err)
				} else if res.MatchedCount == 0 {
					return out, errors.New("mongostore: notifications claim lost")
				}
			} else if c, held, err = s.finishActorRemoval(ctx, owner, id, held, plan, next); err != nil {
				return out, err
			} else {
				out.Counts = c
			}
			plan = next
			if plan.Count == 0 {
				continue // a stray actor document
			} else if plan.Drop != 0 {
				out.Removed = append(out.Removed, store.ID(plan.Group))
			} else {
				out.Updated = append(out.Updated, store.ID(plan.Group))
			}
			// The plan's changes to the counts, as the head will take them.
			c.Total -= int(plan.Drop >> 1)
			c.Unread -= int(plan.Drop & 1)
		}
		// The actor documents of this batch are deleted by the steps
		// above, but for the last one's, which the next find would meet
		// again: finish it first.
		if c, _, err = s.finishActorRemoval(ctx, owner, id, held, plan, nil); err != nil {
			return out, err
		}
		out.Counts = c
		if len(ds) < removeActorBatch {
			// The find, under the claim, saw every one: no notice of the
			// owner has run since. The last step released the claim.
			return out, nil
		}
		if h, held, _, err = s.claimFeed(ctx, owner, notifPending{ID: id, Actor: oid(actor)}); err != nil {
			return out, err
		}
		plan = nil
	}
	return out, s.releaseFeed(ctx, owner, id)
}

// planActorRemoval reads the group of actor document d and returns the plan of
// its step, from the counts c.
func (s *Store) planActorRemoval(ctx context.Context, owner, actor store.ID, d *notifActorDoc, c store.NotificationCounts) (*removalPlan, error) {
	p := &removalPlan{Group: d.Group, Actor: d.ID}
	var g notifGroupDoc
	err := s.notifGroups.FindOne(ctx, bson.D{{Key: "_id", Value: d.Group}, {Key: "o", Value: oid(owner)}}).Decode(&g)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return p, nil // a stray actor document: only it goes (no Drop, Count 0)
	} else if err != nil {
		return nil, wrap("read notification group", err)
	}
	p.Key, p.Count, p.Nl = g.Key, g.Count, g.Actors
	if g.Count <= 1 {
		p.Drop = 2
		if !g.Latest.IsZero() && store.ID(g.Latest).Compare(c.ReadMark) > 0 {
			p.Drop |= 1
		}
		return p, nil
	}
	if slices.Contains(g.Actors, oid(actor)) {
		// The newest actors but this one: one more than shown.
		cur, err := s.notifActors.Find(ctx, bson.D{{Key: "g", Value: g.ID}, {Key: "o", Value: oid(owner)}},
			options.Find().SetSort(bson.D{{Key: "_id", Value: -1}}).SetLimit(store.LatestActorsShown+1).SetProjection(bson.D{{Key: "u", Value: 1}}))
		if err != nil {
			return nil, wrap("list notification actors", err)
		}
		var as []notifActorDoc
		if err := cur.All(ctx, &as); err != nil {
			return nil, wrap("list notification actors", err)
		}
		p.Nl = nil
		for _, a := range as {
			if a.User != oid(actor) && len(p.Nl) < store.LatestActorsShown {
				p.Nl = append(p.Nl, a.User)
			}
		}
	}
	return p, nil
}

// finishActorRemoval applies steps 2 to 4 of plan p under the claim id, whose
// head update sets next as the plan (nil: releases the claim), and returns
// the feed's counts after. Each step may have been done before. Setting the
// next plan also renews the claim, which expires at held (zero: a taker
// finishing p, which releases), so that a removal of many groups, longer
// than notifClaimTTL in all, is not taken over while it runs: a taker
// would finish its plan and release, and a notice could then bring the
// group's count back to the planned one before the removal's own write of
// that group landed. It returns the claim's new expiry.
func (s *Store) finishActorRemoval(ctx context.Context, owner store.ID, id primitive.ObjectID, held time.Time, p, next *removalPlan) (store.NotificationCounts, time.Time, error) {
	if p.Count > 0 {
		// The filters name the shard key (o, k).
		filter := bson.D{{Key: "o", Value: oid(owner)}, {Key: "k", Value: p.Key}, {Key: "_id", Value: p.Group}, {Key: "nc", Value: p.Count}}
		var err error
		if p.Drop != 0 {
			_, err = s.notifGroups.DeleteOne(ctx, filter)
		} else {
			_, err = s.notifGroups.UpdateOne(ctx, filter, bson.D{{Key: "$set", Value: bson.D{{Key: "nc", Value: p.Count - 1}, {Key: "nl", Value: p.Nl}}}})
		}
		if err != nil {
			return store.NotificationCounts{}, held, wrap("remove notification actor", err)
		}
	}
	if _, err := s.notifActors.DeleteOne(ctx, bson.D{{Key: "_id", Value: p.Actor}, {Key: "g", Value: p.Group}}); err != nil {
		return store.NotificationCounts{}, held, wrap("remove notification actor", err)
	}
	filter := bson.D{{Key: "_id", Value: oid(owner)}, {Key: "np.ni", Value: id}, {Key: "np.nq.na", Value: p.Actor}}
	upd := bson.D{{Key: "$inc", Value: bson.D{{Key: "nt", Value: -(p.Drop >> 1)}, {Key: "nu", Value: -(p.Drop & 1)}}}}
	renewed := held
	if next != nil {
		renewed = time.Now().UTC().Add(notifClaimTTL).Truncate(time.Millisecond)
		filter = append(filter, bson.E{Key: "np.nx", Value: held})
		upd = append(upd, bson.E{Key: "$set", Value: bson.D{{Key: "np.nq", Value: next}, {Key: "np.nx", Value: renewed}}})
	} else {
		upd = append(upd, bson.E{Key: "$unset", Value: bson.D{{Key: "np", Value: ""}}})
	}
	var h notifHeadDoc
	err := s.notifHeads.FindOneAndUpdate(ctx, filter, upd,
		options.FindOneAndUpdate().SetReturnDocument(after).SetProjection(bson.D{{Key: "np", Value: 0}})).Decode(&h)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.NotificationCounts{}, held, errors.New("mongostore: notifications claim lost")
	} else if err != nil {
		return store.NotificationCounts{}, held, wrap("remove notification actor", err)
	}
	return h.counts(), renewed, nil
}
