package mongostore

import (
	"context"
	"errors"
	"slices"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"

	"herald/store"
	"herald/store/storage"
)

// Claims of a group's jobs (docs/design.md, "Group commit on MongoDB",
// steps 5, 6 and 10): what keeps two plans from counting the same jobs,
// and tells a run whether the plan's count step is over.

var (
	// errGroupAborted: a job of the group could not be claimed (it moved,
	// or another run holds it), so nothing was counted and the plan was
	// dropped.
	errGroupAborted = errors.New("mongostore deliver: the group's jobs moved before it counted; dropped")
	// errGroupDone: the group was completed by another run.
	errGroupDone = errors.New("mongostore deliver: the group was finished by another run")
	// errGroupClaimed: another run of the plan recorded its claims, so
	// this one, refused a claim since, goes on as a claimed run.
	errGroupClaimed = errors.New("mongostore deliver: the group's claims are recorded by another run")
)

// claimGroup claims every job's share for g (gc = g's id), each on
// condition that it is still at the plan's cursor with no chunk's plan
// and no other group's claim, then records on the plan that it did. Only
// then may the group count: a one-job chunk stores its plan only on a
// share without a claim (storePlan), another group claims only free
// shares, and the claims go only with the advance (advanceGroup) or an
// abort before any count, so a run that finds a claim gone knows the
// count step is over. A claim refused is final (a share never comes
// back to a cursor), so the group is aborted: the claims it made are
// released and the plan dropped, and it reports errGroupAborted.
func (s *Store) claimGroup(ctx context.Context, g *groupPlan) error {
	lane := int(g.Lane)
	gc := laneField(lane, "gc")
	models := make([]mongo.WriteModel, len(g.Jobs))
	for k := range g.Jobs {
		filter := append(s.jobFilter(g.job(&g.Jobs[k])),
			bson.E{Key: laneField(lane, "p"), Value: bson.D{{Key: "$exists", Value: false}}},
			bson.E{Key: "$and", Value: bson.A{bson.D{{Key: "$or", Value: bson.A{
				bson.D{unclaimed(lane)},
				bson.D{{Key: gc, Value: g.ID}},
			}}}}})
		models[k] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: gc, Value: g.ID}}}})
	}
	res, err := s.messages.BulkWrite(ctx, models, unordered)
	if err != nil {
		return wrap("group: claim jobs", err)
	}
	if int(res.MatchedCount) < len(models) {
		// Drop the plan only while no run has recorded its claims.
		r, err := s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(lane)}, {Key: "g.id", Value: g.ID}, {Key: "g.cl", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "$unset", Value: bson.D{{Key: "g", Value: ""}}}})
		if err != nil {
			return wrap("group: drop plan", err)
		}
		if r.MatchedCount == 0 {
			cur, err := s.storedGroup(ctx, lane)
			if err != nil {
				return err
			}
			if cur != nil && cur.ID == g.ID && cur.Claimed {
				return errGroupClaimed
			}
		}
		if err := s.releaseClaims(ctx, g); err != nil {
			return err
		}
		return errGroupAborted
	}
	r, err := s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(lane)}, {Key: "g.id", Value: g.ID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "g.cl", Value: true}}}})
	if err != nil {
		return wrap("group: claim jobs", err)
	}
	if r.MatchedCount == 0 { // dropped by an abort
		if err := s.releaseClaims(ctx, g); err != nil {
			return err
		}
		return errGroupAborted
	}
	g.Claimed = true
	return nil
}

// unclaimed is the condition that lane's share of a job holds no group's
// claim: what a one-job chunk's plan and advance, and a share's end,
// require, so that they never move a share a group is counting.
func unclaimed(lane int) bson.E {
	return bson.E{Key: laneField(lane, "gc"), Value: bson.D{{Key: "$exists", Value: false}}}
}

// releaseClaims takes g's claims off its jobs.
func (s *Store) releaseClaims(ctx context.Context, g *groupPlan) error {
	gc := laneField(int(g.Lane), "gc")
	models := make([]mongo.WriteModel, len(g.Jobs))
	for k, gj := range g.Jobs {
		models[k] = mongo.NewUpdateOneModel().
			SetFilter(append(msgKey(store.ID(gj.Message), store.ID(gj.Author)), bson.E{Key: gc, Value: g.ID})).
			SetUpdate(bson.D{{Key: "$unset", Value: bson.D{{Key: gc, Value: ""}}}})
	}
	_, err := s.messages.BulkWrite(ctx, models, unordered)
	return wrap("group: release jobs", err)
}

// releaseUnmoved takes g's claims off the jobs its advance did not move
// (turned into retractions, or moved before), so that no claim of g is
// left once its plan is dropped; a claim left would read as the group
// still held. The advance took the others' off.
func (s *Store) releaseUnmoved(ctx context.Context, g *groupPlan, moved []bool) error {
	if !slices.Contains(moved, true) {
		return nil
	}
	return s.releaseClaims(ctx, g)
}

// groupHeld reports whether every job of g still holds g's claim: the
// group has not begun its advance, which comes after its count step.
func (s *Store) groupHeld(ctx context.Context, g *groupPlan) (bool, error) {
	keys := make(bson.A, len(g.Jobs))
	for k, gj := range g.Jobs {
		keys[k] = msgKey(store.ID(gj.Message), store.ID(gj.Author))
	}
	n, err := s.messages.CountDocuments(ctx, bson.D{{Key: "$or", Value: keys}, {Key: laneField(int(g.Lane), "gc"), Value: g.ID}})
	if err != nil {
		return false, wrap("group: check claims", err)
	}
	return int(n) == len(g.Jobs), nil
}

// heldOrDrop is groupHeld; when a claim is gone, the group's advance had
// begun (its count, entries and records done): the advance is finished
// (each move conditional on the plan's cursor, so those made are not
// made again), the plan dropped, and errGroupDone reported.
func (s *Store) heldOrDrop(ctx context.Context, g *groupPlan) (bool, error) {
	held, err := s.groupHeld(ctx, g)
	if err != nil || held {
		return held, err
	}
	moved, err := s.advanceGroup(ctx, g)
	if err != nil {
		return false, err
	}
	if err := s.releaseUnmoved(ctx, g, moved); err != nil {
		return false, err
	}
	if err := s.dropGroup(ctx, g); err != nil {
		return false, err
	}
	return false, errGroupDone
}

// dropGroup removes plan g from its lane's lease document.
func (s *Store) dropGroup(ctx context.Context, g *groupPlan) error {
	_, err := s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(int(g.Lane))}, {Key: "g.id", Value: g.ID}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "g", Value: ""}}}})
	return wrap("group: drop plan", err)
}

// settleClaim is for a one-job chunk that found its share claimed by
// group id: the group is finished if its plan is stored on the lane, and
// the claim released if not (a plan aborted before its count, or a
// job the group could not advance: a retraction now).
func (s *Store) settleClaim(ctx context.Context, j *storage.Job, id primitive.ObjectID) error {
	g, err := s.storedGroup(ctx, j.Lane)
	if err != nil {
		return err
	}
	if g != nil && g.ID == id {
		return s.finishStored(ctx, g)
	}
	gc := laneField(j.Lane, "gc")
	_, err = s.messages.UpdateOne(ctx, append(msgKey(j.MessageID, j.AuthorID), bson.E{Key: gc, Value: id}),
		bson.D{{Key: "$unset", Value: bson.D{{Key: gc, Value: ""}}}})
	return wrap("group: release job", err)
}
