package mongostore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

// Finishing a group's plan left stored (step 1), and reporting what a plan
// finished by another run delivered.

// finishGroup finishes the group a run cut short left on lane's lease
// document, if any: from its plan alone, so it writes what the first run
// would have.
//
// A process that knows no plan is stored on the lane (noGroupOn) skips the
// read: it finished or found none since it last took the lane's lease,
// and only the lane's holder stores one.
func (s *Store) finishGroup(ctx context.Context, lane int) (*finishedPlan, error) {
	if _, ok := s.noGroupOn.Load(lane); ok {
		return nil, nil
	}
	gen := s.groupGeneration(lane).Load()
	g, err := s.storedGroup(ctx, lane)
	if err != nil {
		return nil, err
	}
	var done *finishedPlan
	if g != nil {
		changes, moved, err := s.completeOrRead(ctx, g, nil)
		switch {
		case errors.Is(err, errGroupAborted):
		case err != nil:
			return nil, err
		default:
			done = &finishedPlan{g: g, changes: changes, moved: moved}
		}
	}
	// Odd: a store of this process is under way, whose plan the read may
	// have missed.
	if now := s.groupGeneration(lane).Load(); now == gen && now%2 == 0 {
		s.noGroupOn.Store(lane, true)
	}
	return done, nil
}

// finishedPlan is a plan finishGroup finished, with each job's changes.
type finishedPlan struct {
	g       *groupPlan
	changes [][]storage.InboxChange
	moved   []bool
}

// cover reports the chunks of ds that p's plan stood for (same lane,
// message and cursor) with p's changes, and returns the others, with
// their indexes in ds (and len(ds) last).
func (p *finishedPlan) cover(ds []storage.Delivery) ([]storage.Delivered, []storage.Delivery, []int) {
	out := make([]storage.Delivered, len(ds))
	var rest []storage.Delivery
	var idx []int
	for i, d := range ds {
		k := -1
		if d.Job.Lane == int(p.g.Lane) && d.Job.Kind == storage.JobDeliver {
			k = slices.IndexFunc(p.g.Jobs, func(gj groupJob) bool {
				return store.ID(gj.Message) == d.Job.MessageID && bytes.Equal(gj.Cursor, d.Job.Cursor)
			})
		}
		switch {
		case k < 0:
			rest = append(rest, d)
			idx = append(idx, i)
		case p.moved[k]:
			out[i].Err = store.Errorf(store.ENOTFOUND, "job not found")
		default:
			out[i].Changes = p.changes[k]
		}
	}
	return out, rest, append(idx, len(ds))
}

// completeOrRead is completeGroup, but when another run (the lane's poll,
// say) finished the plan, its changes are read back (plannedChanges) and
// no job reported moved, so that the jobs' events are published.
func (s *Store) completeOrRead(ctx context.Context, g *groupPlan, heads map[primitive.ObjectID]*userDoc) ([][]storage.InboxChange, []bool, error) {
	changes, moved, err := s.completeGroup(ctx, g, heads)
	if errors.Is(err, errGroupDone) {
		changes, err = s.plannedChanges(ctx, g)
		moved = make([]bool, len(g.Jobs))
	}
	return changes, moved, err
}

// plannedChanges reads back what plan g delivered (another run finished
// it): for each job, its owners holding the entry, with their counts now.
func (s *Store) plannedChanges(ctx context.Context, g *groupPlan) ([][]storage.InboxChange, error) {
	var owners, msgs bson.A
	seen := map[primitive.ObjectID]bool{}
	for _, gj := range g.Jobs {
		msgs = append(msgs, gj.Message)
		for _, o := range gj.Owners {
			if !seen[o] {
				seen[o] = true
				owners = append(owners, o)
			}
		}
	}
	changes := make([][]storage.InboxChange, len(g.Jobs))
	if len(owners) == 0 {
		return changes, nil
	}
	cur, err := s.entries.Find(ctx, bson.D{{Key: "o", Value: bson.D{{Key: "$in", Value: owners}}}, {Key: "m", Value: bson.D{{Key: "$in", Value: msgs}}}},
		options.Find().SetProjection(bson.D{{Key: "o", Value: 1}, {Key: "m", Value: 1}}))
	if err != nil {
		return nil, wrap("group: read entries", err)
	}
	var rows []entryRow
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("group: read entries", err)
	}
	type om struct{ o, m primitive.ObjectID }
	has := map[om]bool{}
	for _, r := range rows {
		has[om{r.Owner, r.Entry.Message}] = true
	}
	hs, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: owners}}}}, options.Find().SetProjection(inboxProjection))
	if err != nil {
		return nil, err
	}
	heads := map[primitive.ObjectID]*userDoc{}
	for _, h := range hs {
		heads[h.ID] = h
	}
	lay := storage.Layout(g.Layout)
	for k, gj := range g.Jobs {
		for _, o := range gj.Owners {
			if h := heads[o]; h != nil && has[om{o, gj.Message}] {
				changes[k] = append(changes[k], storage.InboxChange{InboxRef: storage.InboxRef{Owner: store.ID(o)}, MessageID: store.ID(gj.Message), Counts: h.counts(lay)})
			}
		}
	}
	return changes, nil
}

// finishStored finishes stored plan g; an aborted plan, or one another
// run completed, is finished too.
func (s *Store) finishStored(ctx context.Context, g *groupPlan) error {
	_, _, err := s.completeGroup(ctx, g, nil)
	if errors.Is(err, errGroupAborted) || errors.Is(err, errGroupDone) {
		return nil
	}
	return err
}

// groupGeneration is lane's count of plans this process stored.
func (s *Store) groupGeneration(lane int) *atomic.Uint64 {
	v, _ := s.groupGen.LoadOrStore(lane, new(atomic.Uint64))
	return v.(*atomic.Uint64)
}
