package mongostore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/storage"
)

var _ storage.OwnerLanes = (*Store)(nil)

// Owner lanes (docs/design.md#owner-lanes). With N > 1 lanes a message
// job holds one share per lane: j.pl lists the lanes whose share is not
// done, and each lane keeps its own cursor and chunk plan, lane 0's where
// a one-lane job keeps them (j.cur, j.p), lane i's in j.ln.<i>. An owner's
// inbox is written by its lane only, so the per-inbox markers (lj, lq)
// still hold one job at a time.

// laneShare is one lane's cursor and chunk plan of a message job.
type laneShare struct {
	Cursor []byte              `bson:"cur,omitempty"`
	Plan   *chunkPlan          `bson:"p,omitempty"`
	Claim  *primitive.ObjectID `bson:"gc,omitempty"`
}

const laneConfigID = "fanout/config"

// laneCount returns the number of lanes, as EnsureIndexes, ensureLanes or
// FanoutLanes last read it: 1 before any did, or while none is stored.
func (s *Store) laneCount() int {
	return max(int(s.lanes.Load()), 1)
}

// readLanes reads the number of lanes stored. None stored leaves it
// unknown (0; laneCount says 1), so that ensureLanes reads it again: the
// first process's fan-out may store a number above 1 any time.
func (s *Store) readLanes(ctx context.Context) error {
	var d struct {
		N int32 `bson:"n"`
	}
	err := s.leases.FindOne(ctx, bson.D{{Key: "_id", Value: laneConfigID}}).Decode(&d)
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return wrap("read fan-out lanes", err)
	}
	if err == nil {
		s.lanes.Store(max(d.N, 1))
	}
	return nil
}

// ensureLanes reads the number of lanes if it is not known yet, before a
// message job is written: the server answers requests before its fan-out
// (or EnsureIndexes) has read it, and a job stored for one lane under
// N > 1 would be no lane's share (lane 0 adopts such jobs: adoptJobs).
// Once known it costs nothing.
func (s *Store) ensureLanes(ctx context.Context) error {
	if s.lanes.Load() > 0 {
		return nil
	}
	return s.readLanes(ctx)
}

// FanoutLanes implements storage.OwnerLanes. A first number above 1 is
// stored only while no job is pending: a job stored for one lane (no
// j.pl) would be no lane's share; with jobs pending it stores 1.
func (s *Store) FanoutLanes(ctx context.Context, want int) (int, error) {
	var d struct {
		N int32 `bson:"n"`
	}
	err := s.leases.FindOne(ctx, bson.D{{Key: "_id", Value: laneConfigID}}).Decode(&d)
	switch {
	case err == nil:
		s.lanes.Store(max(d.N, 1))
		return int(max(d.N, 1)), nil
	case !errors.Is(err, mongo.ErrNoDocuments):
		return 0, wrap("fan-out lanes", err)
	case want > 1:
		backlog, err := s.JobBacklog(ctx, 1)
		if err != nil {
			return 0, err
		}
		live, err := s.fanoutLive(ctx)
		if err != nil {
			return 0, err
		}
		if backlog.Jobs > 0 || live {
			want = 1
		}
	}
	for range 2 { // two first upserts at once: one collides, then finds
		err = s.leases.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: laneConfigID}},
			bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "n", Value: int32(max(want, 1))}}}},
			options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&d)
		if !isDuplicate(err) {
			break
		}
	}
	if err != nil {
		return 0, wrap("fan-out lanes", err)
	}
	s.lanes.Store(max(d.N, 1))
	return int(max(d.N, 1)), nil
}

// SetFanoutLanes stores n as the number of lanes (herald mongo setup). It
// refuses while a job is pending (a job stored under one N is shared out
// among that N's lanes) and while a process may run: one still hashing
// by the old N would give an inbox two writers. A process that starts
// between the check and the write reads the new N; one already running
// stops its lanes at its next renewal (their jobs are pending anyway).
func (s *Store) SetFanoutLanes(ctx context.Context, n int) error {
	live, err := s.fanoutLive(ctx)
	if err != nil {
		return err
	}
	if live {
		return store.Errorf(store.EINVALID, "fan-out lanes: a process is running (a live heartbeat or fan-out lease); stop every process first")
	}
	backlog, err := s.JobBacklog(ctx, 1)
	if err != nil {
		return err
	}
	if backlog.Jobs > 0 {
		return store.Errorf(store.EINVALID, "fan-out lanes: jobs are pending; drain the queue first")
	}
	_, err = s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: laneConfigID}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "n", Value: int32(max(n, 1))}}}}, options.Update().SetUpsert(true))
	if err == nil {
		s.lanes.Store(int32(max(n, 1)))
	}
	return wrap("fan-out lanes", err)
}

// fanoutLive reports whether any process may be running: a live
// heartbeat (proc/*) or a live fan-out lease (fanout, fanout/<lane>; a
// process from before owner lanes holds fanout without a heartbeat).
func (s *Store) fanoutLive(ctx context.Context) (bool, error) {
	now := time.Now().UTC()
	n, err := s.leases.CountDocuments(ctx, bson.D{
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: "proc/"}, {Key: "$lt", Value: "proc0"}}}},
			bson.D{{Key: "_id", Value: bson.D{{Key: "$gte", Value: "fanout"}, {Key: "$lt", Value: "fanout0"}}}},
		}},
		{Key: "x", Value: bson.D{{Key: "$gte", Value: now}}},
	}, options.Count().SetLimit(1))
	return n > 0, wrap("fan-out lanes", err)
}

// laneLeaseID names lane's lease document; lane 0's is the one-lane
// lease's.
func laneLeaseID(lane int) string {
	if lane == 0 {
		return "fanout"
	}
	return "fanout/" + strconv.Itoa(lane)
}

// laneField names field f (cur or p) of lane's share of a message job.
func laneField(lane int, f string) string {
	if lane == 0 {
		return "j." + f
	}
	return "j.ln." + strconv.Itoa(lane) + "." + f
}

// jobLane returns the lane j runs on: its share's for a message job, its
// owner's for the others.
func jobLane(j *storage.Job, n int) int {
	switch j.Kind {
	case storage.JobDeliver, storage.JobRetract:
		return j.Lane
	}
	return storage.OwnerLane(j.OwnerID, n)
}

// allLanes returns the lanes 0 to n-1, as j.pl stores them.
func allLanes(n int) []int32 {
	ls := make([]int32, n)
	for i := range ls {
		ls[i] = int32(i)
	}
	return ls
}

// share returns lane's share of job d: its cursor and plan, and whether
// it is still to run.
func (d *jobDoc) share(lane int, n int) (laneShare, bool) {
	if n <= 1 {
		return laneShare{Cursor: d.Cursor, Plan: d.Plan, Claim: d.Claim}, true
	}
	pending := slices.Contains(d.Lanes, int32(lane))
	if lane == 0 {
		return laneShare{Cursor: d.Cursor, Plan: d.Plan, Claim: d.Claim}, pending
	}
	if sh := d.Shares[strconv.Itoa(lane)]; sh != nil {
		return *sh, pending
	}
	return laneShare{}, pending
}

// finishShare ends lane's share of a message job at its cursor: it pulls
// the lane from j.pl, or, if it is the last lane there, ends the job (for
// a retraction: claims the end (j.end), then deletes its records, then the
// message). Each is one conditional update, so of two lanes finishing at
// once exactly one ends the job.
func (s *Store) finishShare(ctx context.Context, j *storage.Job) error {
	lane := int32(j.Lane)
	for range 3 {
		res, err := s.messages.UpdateOne(ctx,
			append(s.jobFilter(j), unclaimed(j.Lane), bson.E{Key: "$and", Value: bson.A{bson.D{{Key: "j.pl", Value: bson.D{{Key: "$ne", Value: bson.A{lane}}}}}}}),
			bson.D{
				{Key: "$pull", Value: bson.D{{Key: "j.pl", Value: lane}}},
				{Key: "$unset", Value: bson.D{{Key: laneField(j.Lane, "cur"), Value: ""}, {Key: laneField(j.Lane, "p"), Value: ""}}},
			})
		if err != nil {
			return wrap("advance job", err)
		}
		if res.MatchedCount > 0 {
			return nil
		}
		last := append(s.jobFilter(j), unclaimed(j.Lane), bson.E{Key: "$and", Value: bson.A{bson.D{{Key: "j.pl", Value: bson.A{lane}}}}})
		if j.Kind == storage.JobRetract {
			// Claim being last before deleting the records: a stale
			// runner of this lane whose pull matched nothing (the new
			// holder pulled it) must not wipe records that other lanes'
			// shares still read. After a crash past the claim the lane,
			// still in j.pl, runs its last chunk again and gets here.
			claim, err := s.messages.UpdateOne(ctx, last, bson.D{{Key: "$set", Value: bson.D{{Key: "j.end", Value: true}}}})
			if err != nil {
				return wrap("advance job", err)
			}
			if claim.MatchedCount > 0 {
				if _, err := s.deliveries.DeleteMany(ctx, bson.D{{Key: "m", Value: oid(j.MessageID)}}); err != nil {
					return wrap("retract: records", err)
				}
				_, err := s.messages.DeleteOne(ctx, append(msgKey(j.MessageID, j.AuthorID), bson.E{Key: "j.end", Value: true}))
				return wrap("advance job", err)
			}
		} else {
			res, err := s.messages.UpdateOne(ctx, last, bson.D{{Key: "$unset", Value: bson.D{{Key: "j", Value: ""}}}})
			if err != nil {
				return wrap("advance job", err)
			}
			if res.MatchedCount > 0 {
				return nil
			}
		}
		// Neither matched: another lane finished in between, or the job
		// moved on (deleted); read again.
		n, err := s.messages.CountDocuments(ctx, s.jobFilter(j))
		if err != nil || n == 0 {
			return wrap("advance job", err)
		}
	}
	return errors.New("mongostore: a lane's share of a job did not end; retried")
}

// TryLaneLease implements storage.OwnerLanes: the lease document is taken
// if it is free, expired or already this holder's; another holder's live
// lease makes the upsert collide with its _id. A lease newly taken (not
// this holder's live one before) forgets this process's record of the
// lane's running job: another holder may have recorded its own since, and
// beginJob must write this process's again.
func (s *Store) TryLaneLease(ctx context.Context, lane int, holder string, ttl time.Duration) (bool, error) {
	now := time.Now().UTC()
	var before struct {
		Holder string    `bson:"h"`
		Until  time.Time `bson:"x"`
	}
	err := s.leases.FindOneAndUpdate(ctx,
		bson.D{{Key: "_id", Value: laneLeaseID(lane)}, {Key: "$or", Value: bson.A{
			bson.D{{Key: "h", Value: holder}},
			// Expired, or never taken (a document made by beginJob has no x).
			bson.D{{Key: "x", Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gte", Value: now}}}}}},
		}}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "h", Value: holder}, {Key: "x", Value: now.Add(ttl)}}}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.Before).
			SetProjection(bson.D{{Key: "h", Value: 1}, {Key: "x", Value: 1}})).Decode(&before)
	if isDuplicate(err) {
		return false, nil
	}
	if err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
		return false, wrap("fan-out lease", err)
	}
	if before.Holder != holder || before.Until.Before(now) {
		s.inFlight.Delete(lane)
		s.noGroupOn.Delete(lane)
	}
	return true, nil
}

// ReleaseLaneLease implements storage.OwnerLanes: the lease expires now,
// and this process's record of the lane's running job is forgotten (see
// TryLaneLease).
func (s *Store) ReleaseLaneLease(ctx context.Context, lane int, holder string) error {
	s.inFlight.Delete(lane)
	s.noGroupOn.Delete(lane)
	_, err := s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: laneLeaseID(lane)}, {Key: "h", Value: holder}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: time.Unix(0, 0).UTC()}}}})
	return wrap("fan-out lease", err)
}

// Heartbeat implements storage.OwnerLanes: a document proc/<holder> per
// process, with its expiry; the live ones are counted by an _id range,
// and those expired a ttl ago are removed.
func (s *Store) Heartbeat(ctx context.Context, holder string, ttl time.Duration) (int, error) {
	if ttl <= 0 { // the process stops: the others count it out at once
		_, err := s.leases.DeleteOne(ctx, bson.D{{Key: "_id", Value: "proc/" + holder}})
		return 0, wrap("heartbeat", err)
	}
	now := time.Now().UTC()
	if _, err := s.leases.UpdateOne(ctx, bson.D{{Key: "_id", Value: "proc/" + holder}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "x", Value: now.Add(ttl)}}}}, options.Update().SetUpsert(true)); err != nil {
		return 0, wrap("heartbeat", err)
	}
	procs := bson.D{{Key: "$gte", Value: "proc/"}, {Key: "$lt", Value: "proc0"}} // '0' follows '/'
	if _, err := s.leases.DeleteMany(ctx, bson.D{{Key: "_id", Value: procs}, {Key: "x", Value: bson.D{{Key: "$lt", Value: now.Add(-ttl)}}}}); err != nil {
		return 0, wrap("heartbeat", err)
	}
	n, err := s.leases.CountDocuments(ctx, bson.D{{Key: "_id", Value: procs}, {Key: "x", Value: bson.D{{Key: "$gte", Value: now}}}})
	return max(int(n), 1), wrap("heartbeat", err)
}

// PendingLaneJobs implements storage.OwnerLanes: the message jobs with
// lane in j.pl (through the partial joblanes index), and the owner jobs
// and rebuilding flags of lane's owners (read whole and kept on read: they
// are few at a time).
func (s *Store) PendingLaneJobs(ctx context.Context, lane int) ([]*storage.Job, error) {
	return s.pendingJobs(ctx, lane, s.laneCount())
}

// adoptJobs, run by lane 0's poll with N > 1, gives a lane share to each
// message job stored without j.pl: one written for one lane before its
// process knew N (or by a process from before owner lanes), which no lane
// would run. Every lane gets a share, from where the job stands: its
// cursor is where every lane's share goes on (a delivery's last follower
// reached, in the order each lane lists its own; a retraction's position
// in the delivery records, which every lane reads whole), and the plan of
// a chunk cut short is split, each lane keeping its own owners (and the
// record's key), so that no lane ever writes another lane's inboxes. A
// job not begun thus runs as if stored under N. Each update is
// conditional on j.pl still missing and on the cursor and plan read; lane
// 0's holder is the only adopter and no one-lane process runs beside it.
// What stays open: a chunk cut short before N > 1 was stored is run again
// by each lane for its owners, and an owner whose lane ran another job on
// its inbox in between (before the adoption) is counted again.
func (s *Store) adoptJobs(ctx context.Context, n int) error {
	noLanes := bson.E{Key: "j.pl", Value: bson.D{{Key: "$exists", Value: false}}}
	cur, err := s.messages.Find(ctx, bson.D{{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}, noLanes},
		options.Find().SetProjection(bson.D{{Key: "a", Value: 1}, {Key: "j", Value: 1}}))
	if err != nil {
		return wrap("adopt jobs", err)
	}
	var ds []*messageDoc
	if err := cur.All(ctx, &ds); err != nil {
		return wrap("adopt jobs", err)
	}
	for _, d := range ds {
		id := store.ID(d.ID)
		filter := append(msgKey(id, store.ID(d.Author)), bson.E{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}, noLanes)
		set := bson.D{{Key: "j.pl", Value: allLanes(n)}}
		var unset bson.D
		if cursor := d.Job.Cursor; len(cursor) > 0 {
			filter = append(filter, bson.E{Key: "j.cur", Value: cursor})
			for lane := 1; lane < n; lane++ {
				set = append(set, bson.E{Key: laneField(lane, "cur"), Value: cursor})
			}
		} else {
			filter = append(filter, bson.E{Key: "j.cur", Value: bson.D{{Key: "$exists", Value: false}}})
		}
		if plan := d.Job.Plan; plan != nil {
			filter = append(filter, bson.E{Key: "j.p.k", Value: plan.Key}, bson.E{Key: "j.p.o", Value: bson.D{{Key: "$size", Value: len(plan.Owners)}}})
			parts := make([][]primitive.ObjectID, n)
			for _, o := range plan.Owners {
				l := storage.OwnerLane(store.ID(o), n)
				parts[l] = append(parts[l], o)
			}
			for lane, owners := range parts {
				switch {
				case len(owners) > 0:
					set = append(set, bson.E{Key: laneField(lane, "p"), Value: &chunkPlan{Key: plan.Key, Owners: owners}})
				case lane == 0:
					unset = append(unset, bson.E{Key: "j.p", Value: ""})
				}
			}
		} else {
			filter = append(filter, bson.E{Key: "j.p", Value: bson.D{{Key: "$exists", Value: false}}})
		}
		upd := bson.D{{Key: "$set", Value: set}}
		if len(unset) > 0 {
			upd = append(upd, bson.E{Key: "$unset", Value: unset})
		}
		res, err := s.messages.UpdateOne(ctx, filter, upd)
		if err != nil {
			return wrap("adopt jobs", err)
		}
		if res.MatchedCount > 0 {
			s.log.Error("fan-out lanes: a message job was stored for one lane under more; lane 0 shared it out among the lanes", "message", id.String(), "begun", len(d.Job.Cursor) > 0 || d.Job.Plan != nil)
		}
	}
	return nil
}
