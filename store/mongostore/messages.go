package mongostore

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// messageDoc is a stored message with its pending job and deletion mark.
type messageDoc struct {
	docs.Message `bson:",inline"`
	Job          *jobDoc    `bson:"j,omitempty"`
	Deleted      *time.Time `bson:"x,omitempty"`
	// Counted and Uncounted record that the author's message count has
	// taken this message in, and (after a deletion) out again.
	Counted   bool `bson:"mn,omitempty"`
	Uncounted bool `bson:"xn,omitempty"`
	// The fan-out job's part in counting (countByJob): it read the message
	// not yet counted (mr; xr for the deletion), and it counted it (mj, xj).
	JobSawUncounted  bool `bson:"mr,omitempty"`
	JobCounted       bool `bson:"mj,omitempty"`
	JobSawNotRemoved bool `bson:"xr,omitempty"`
	JobUncounted     bool `bson:"xj,omitempty"`
}

// countFlags are d's flags of the count (deleted false) or of the uncount:
// done, and the job's two.
func (d *messageDoc) countFlags(deleted bool) (done, jobSaw, jobDone bool) {
	if deleted {
		return d.Uncounted, d.JobSawNotRemoved, d.JobUncounted
	}
	return d.Counted, d.JobSawUncounted, d.JobCounted
}

// jobDoc is a message's pending fan-out job: kind, layout and cursor.
type jobDoc struct {
	Kind   int32  `bson:"k"`
	Layout int32  `bson:"l,omitempty"`
	Cursor []byte `bson:"cur,omitempty"`
	// Plan is the plan of the delivery chunk at Cursor, stored before the
	// chunk counts anything (see deliverStored); a retraction that replaces
	// the delivery keeps it, to undo what the chunk did.
	Plan *chunkPlan `bson:"p,omitempty"`
	// Claim names the group (group.go) whose plan holds this share, from
	// before its count until its advance.
	Claim *primitive.ObjectID `bson:"gc,omitempty"`
	// With owner lanes: the lanes whose share is not done, and the
	// cursor and plan of each lane but 0 (lanes.go).
	Lanes  []int32               `bson:"pl,omitempty"`
	Shares map[string]*laneShare `bson:"ln,omitempty"`
	// End marks a retraction whose last lane claimed its end: its records
	// may be gone (finishShare).
	End bool `bson:"end,omitempty"`
}

func newJobDoc(j *storage.Job) *jobDoc {
	return &jobDoc{Kind: int32(j.Kind), Layout: int32(j.Layout), Cursor: j.Cursor}
}

// laneJob returns lane's share of d's job among n lanes.
func (d *messageDoc) laneJob(lane, n int) *storage.Job {
	if d.Job == nil {
		return nil
	}
	sh, _ := d.Job.share(lane, n)
	j := &storage.Job{
		ID: store.ID(d.ID), Kind: storage.JobKind(d.Job.Kind), Layout: storage.Layout(d.Job.Layout),
		MessageID: store.ID(d.ID), AuthorID: store.ID(d.Author), CreatedAt: d.Created.UTC(), Cursor: sh.Cursor, Lane: lane,
	}
	if d.ReplyBy != nil {
		j.ReplyToAuthorID = store.ID(*d.ReplyBy)
	}
	if d.RepostBy != nil {
		j.RepostOfAuthorID = store.ID(*d.RepostBy)
	}
	return j
}

// live matches messages not deleted.
var live = bson.E{Key: "x", Value: bson.D{{Key: "$exists", Value: false}}}

func msgFilter(id store.ID) bson.D {
	return bson.D{{Key: "_id", Value: oid(id)}, live}
}

// msgKey finds message id by its shard key, (a, _id), when the author is
// known, so the query goes to one shard.
func msgKey(id, author store.ID) bson.D {
	if author.IsZero() {
		return bson.D{{Key: "_id", Value: oid(id)}}
	}
	return bson.D{{Key: "a", Value: oid(author)}, {Key: "_id", Value: oid(id)}}
}

// Markers of the author's message count, so it changes once per message.
func postedOp(id store.ID) string  { return "m" + id.String() }
func deletedOp(id store.ID) string { return "d" + id.String() }

// CreateMessage implements storage.Backend. The message and its job are one
// document, so they are stored together; the author's count follows (see
// count), and the job repeats that step in case a crash came between.
func (s *Store) CreateMessage(ctx context.Context, m *store.Message, job *storage.Job) error {
	if err := s.usersExist(ctx, m.AuthorID); err != nil {
		return err
	}
	if m.Kind == store.KindRepost {
		// Its guard first: a repost stored is one its author may hold.
		if err := s.claimRepost(ctx, m); err != nil {
			return err
		}
	}
	d := &messageDoc{Message: *docs.FromMessage(m)}
	if job != nil {
		if err := s.ensureLanes(ctx); err != nil {
			return err
		}
		d.Job = newJobDoc(job)
		n := s.laneCount()
		if n > 1 {
			d.Job.Lanes = allLanes(n)
		}
	}
	if _, err := s.messages.InsertOne(ctx, d); err != nil {
		return wrap("create message", err)
	}
	return s.count(ctx, d, false, false)
}

// countInc is what message d adds to its author's counters (sign 1) or
// takes away (-1): the message count, and the pulled count if it is pulled.
func countInc(d *messageDoc, sign int64) bson.D {
	inc := bson.D{{Key: "mc", Value: sign}}
	if d.Pulled {
		inc = append(inc, bson.E{Key: "pc", Value: sign})
	}
	return inc
}

// count takes message d into its author's message count (or out of it,
// for a deletion) exactly once, and a reply into its parent's reply count
// (rc) or a repost into its original's repost count (rp) too (parentKey,
// parentInc): each increment is marked on its document (incOnce, the same
// operation on both) until the message records that it was counted, so a
// retry at any point neither repeats nor skips one. The parent's comes
// after the user's and before the flag, so while the user still has the
// marker the parent may or may not have been counted, and once the flag
// is set both were.
//
// Two callers count each change: the poster (or deleter), here with byJob
// false, and the fan-out job's first chunk on lane 0 (countByJob), which
// repeats it in case the poster died. A marker forgotten while the other
// still acts on a read from before the flag would let that one count
// again, so the markers are forgotten only once neither can: by the poster
// if the job has not read the message uncounted (mr) or has counted it
// (mj), else by the job once it has counted and the poster's flag is set.
// The flags are set by findAndModify, so of two callers the second sees
// the first's. A poster that dies between its increment and its flag
// leaves its marker on the author (a few bytes, never read again).
func (s *Store) count(ctx context.Context, d *messageDoc, deleted, byJob bool) error {
	id, author := store.ID(d.ID), store.ID(d.Author)
	op, inc, sign := postedOp(id), countInc(d, 1), int64(1)
	flag, jobRead, jobFlag := "mn", "mr", "mj"
	if deleted {
		op, inc, sign = deletedOp(id), countInc(d, -1), -1
		flag, jobRead, jobFlag = "xn", "xr", "xj"
	}
	if done, _, _ := d.countFlags(deleted); done {
		return nil
	}
	if deleted {
		// A repost's guard goes first, so that its author may repost
		// again while the count is finished; every retry of this step
		// repeats it until the flag below is set.
		if err := s.releaseRepost(ctx, d); err != nil {
			return err
		}
	}
	parent := parentKey(d)
	if deleted && !d.Counted {
		// Deleted before its count was finished: if the increment never
		// happened (no marker), there is nothing to take back.
		n, err := s.users.CountDocuments(ctx, bson.D{{Key: "_id", Value: d.Author}, {Key: "po", Value: postedOp(id)}})
		if err != nil {
			return wrap("count message", err)
		}
		if n == 0 {
			_, err := s.messages.UpdateOne(ctx, msgKey(id, author), bson.D{{Key: "$set", Value: bson.D{{Key: "mn", Value: true}, {Key: "xn", Value: true}}}})
			return wrap("count message", err)
		}
		// It happened: take it back below, then forget its marker too (a
		// stale marker would be harmless).
		defer func() { _ = s.forgetOp(ctx, s.users, userKey(author), postedOp(id)) }()
		if parent != nil {
			// The parent's increment may not have happened yet: finish it
			// (once, by its marker), so that the decrement below takes back
			// one that is there and rc never goes below 0.
			if err := s.incOnce(ctx, s.messages, append(parent, live), postedOp(id), parentInc(d, 1)); err != nil {
				return err
			}
			defer func() { _ = s.forgetOp(ctx, s.messages, parent, postedOp(id)) }()
		}
	}
	if err := s.incOnce(ctx, s.users, userKey(author), op, inc); err != nil {
		return err
	}
	if parent != nil {
		// A deleted parent is not counted (live): its count is never read.
		// rc never goes below 0: a decrement comes only after the flag mn
		// (so the increment was done, or the parent was already deleted
		// and still is) or after the increment was finished above.
		if err := s.incOnce(ctx, s.messages, append(parent, live), op, parentInc(d, sign)); err != nil {
			return err
		}
	}
	set := bson.D{{Key: flag, Value: true}}
	opts := options.FindOneAndUpdate().SetProjection(bson.D{{Key: flag, Value: 1}, {Key: jobRead, Value: 1}, {Key: jobFlag, Value: 1}})
	if byJob {
		set = append(set, bson.E{Key: jobFlag, Value: true})
	}
	var was messageDoc // before the update
	err := s.messages.FindOneAndUpdate(ctx, msgKey(id, author), bson.D{{Key: "$set", Value: set}}, opts).Decode(&was)
	done, jobSaw, jobDone := was.countFlags(deleted)
	switch {
	case errors.Is(err, mongo.ErrNoDocuments):
		// Gone: its retraction has ended, so the job counted before.
	case err != nil:
		return wrap("count message", err)
	case byJob && (!done || jobDone):
		return nil // the poster's flag is to come, and it forgets them
	case !byJob && jobSaw && !jobDone:
		return nil // the job may still count: it forgets them
	}
	if err := s.forgetOp(ctx, s.users, userKey(author), op); err != nil || parent == nil {
		return err
	}
	return s.forgetOp(ctx, s.messages, parent, op)
}

// countByJob is count for a fan-out job's first chunk, given d as the job
// read it: when the count is not done, it first records on the message
// that the job read it so (mr, xr), reading it again in the same step, so
// that the poster leaves the markers for the job to forget.
func (s *Store) countByJob(ctx context.Context, d *messageDoc, deleted bool) error {
	if done, _, _ := d.countFlags(deleted); done {
		return nil
	}
	read := "mr"
	if deleted {
		read = "xr"
	}
	var fresh messageDoc
	err := s.messages.FindOneAndUpdate(ctx, msgKey(store.ID(d.ID), store.ID(d.Author)),
		bson.D{{Key: "$set", Value: bson.D{{Key: read, Value: true}}}},
		options.FindOneAndUpdate().SetProjection(bson.D{{Key: "t", Value: 0}}).SetReturnDocument(options.After)).Decode(&fresh)
	if err != nil {
		return missing(err, "job not found", "count message")
	}
	return s.count(ctx, &fresh, deleted, true)
}

// liveKey finds live message id by _id alone (which may ask every shard)
// and returns the filter that names it by its shard key, (a, _id), and
// live: a findAndModify on a sharded collection must name the shard key
// (before MongoDB 7.0), and then goes to one shard.
func (s *Store) liveKey(ctx context.Context, id store.ID, label string) (bson.D, error) {
	var d struct {
		Author primitive.ObjectID `bson:"a"`
	}
	err := s.messages.FindOne(ctx, msgFilter(id), options.FindOne().SetProjection(bson.D{{Key: "a", Value: 1}})).Decode(&d)
	if err != nil {
		return nil, missing(err, "message not found", label)
	}
	return append(msgKey(id, store.ID(d.Author)), live), nil
}

// FindMessageByID implements storage.Backend. Without the author it may ask
// every shard; hot paths use FindMessagesByKeys.
func (s *Store) FindMessageByID(ctx context.Context, id store.ID) (*store.Message, error) {
	var d messageDoc
	if err := s.messages.FindOne(ctx, msgFilter(id)).Decode(&d); err != nil {
		return nil, missing(err, "message not found", "find message")
	}
	return d.Store(), nil
}

// FindMessagesByKeys implements storage.Backend. When every key names its
// author the query names the shard key's prefix, so it goes only to the
// shards of those authors.
func (s *Store) FindMessagesByKeys(ctx context.Context, keys []store.MessageKey) ([]*store.Message, error) {
	out := make([]*store.Message, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	ids := make(bson.A, len(keys))
	authors := bson.A{}
	seen := map[store.ID]bool{}
	allAuthors := true
	for i, k := range keys {
		ids[i] = oid(k.ID)
		if k.AuthorID.IsZero() {
			allAuthors = false
		} else if !seen[k.AuthorID] {
			seen[k.AuthorID] = true
			authors = append(authors, oid(k.AuthorID))
		}
	}
	filter := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, live}
	if allAuthors {
		filter = append(bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: authors}}}}, filter...)
	}
	msgs, err := s.findMessages(ctx, filter, nil)
	if err != nil {
		return nil, err
	}
	byID := make(map[store.ID]*store.Message, len(msgs))
	for _, m := range msgs {
		byID[m.ID] = m
	}
	for i, k := range keys {
		out[i] = byID[k.ID]
	}
	return out, nil
}

func (s *Store) findMessages(ctx context.Context, filter bson.D, opts *options.FindOptions) ([]*store.Message, error) {
	if opts == nil {
		opts = options.Find()
	}
	opts.SetProjection(bson.D{{Key: "j", Value: 0}, {Key: "po", Value: 0}})
	cur, err := s.messages.Find(ctx, filter, opts)
	if err != nil {
		return nil, wrap("find messages", err)
	}
	var ds []*messageDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("find messages", err)
	}
	out := make([]*store.Message, len(ds))
	for i, d := range ds {
		out[i] = d.Store()
	}
	return out, nil
}

// FindMessages implements storage.Backend: the outbox, through the (a, _id) index.
func (s *Store) FindMessages(ctx context.Context, f storage.MessageFilter) ([]*store.Message, error) {
	cond, sort := idRange("_id", f.Range, true)
	filter := append(bson.D{{Key: "a", Value: oid(f.AuthorID)}, live}, cond...)
	return s.findMessages(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(f.Limit)))
}

// UpdateMessage implements storage.Backend.
func (s *Store) UpdateMessage(ctx context.Context, id store.ID, upd storage.MessageUpdate) (*store.Message, error) {
	set := bson.D{}
	if upd.Text != nil {
		set = append(set, bson.E{Key: "t", Value: *upd.Text})
	}
	if upd.EditedAt != nil {
		set = append(set, bson.E{Key: "e", Value: *upd.EditedAt})
	}
	unset := bson.D{}
	if upd.Mentions != nil {
		if ids := docs.FromIDs(*upd.Mentions); ids != nil {
			set = append(set, bson.E{Key: "me", Value: ids})
		} else {
			unset = append(unset, bson.E{Key: "me", Value: ""})
		}
	}
	if len(set) == 0 && len(unset) == 0 {
		return s.FindMessageByID(ctx, id)
	}
	filter, err := s.liveKey(ctx, id, "update message")
	if err != nil {
		return nil, err
	}
	var d messageDoc
	update := bson.D{}
	if len(set) > 0 {
		update = append(update, bson.E{Key: "$set", Value: set})
	}
	if len(unset) > 0 {
		update = append(update, bson.E{Key: "$unset", Value: unset})
	}
	err = s.messages.FindOneAndUpdate(ctx, filter, update,
		options.FindOneAndUpdate().SetReturnDocument(options.After).SetProjection(bson.D{{Key: "j", Value: 0}})).Decode(&d)
	if err != nil {
		return nil, missing(err, "message not found", "update message")
	}
	return d.Store(), nil
}

// DeleteMessage implements storage.Backend. The deletion mark and the
// retraction job replace the pending job in one update of the message
// document; the message document itself goes when the retraction ends.
func (s *Store) DeleteMessage(ctx context.Context, id store.ID, retract *storage.Job) error {
	filter, err := s.liveKey(ctx, id, "delete message")
	if err != nil {
		return err
	}
	var d messageDoc
	if retract == nil {
		err = s.messages.FindOneAndDelete(ctx, filter).Decode(&d)
	} else {
		// The retraction takes the delivery's place field by field, so that
		// the plan of a delivery chunk cut short (j.p) stays for it. With
		// owner lanes every lane retracts, those done delivering too.
		if err := s.ensureLanes(ctx); err != nil {
			return err
		}
		n := s.laneCount()
		set := bson.D{{Key: "x", Value: time.Now().UTC()}, {Key: "j.k", Value: int32(retract.Kind)}, {Key: "j.l", Value: int32(retract.Layout)}}
		unset := bson.D{{Key: "j.cur", Value: ""}}
		if n > 1 {
			set = append(set, bson.E{Key: "j.pl", Value: allLanes(n)})
			for lane := 1; lane < n; lane++ {
				unset = append(unset, bson.E{Key: laneField(lane, "cur"), Value: ""})
			}
		}
		err = s.messages.FindOneAndUpdate(ctx, filter, bson.D{
			{Key: "$set", Value: set},
			{Key: "$unset", Value: unset},
		}, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	}
	if err != nil {
		return missing(err, "message not found", "delete message")
	}
	if retract == nil && d.Counted {
		// No job to repeat the count: the document is gone, so a repeat of
		// this deletion finds nothing to delete, and the markers that made
		// the decrements once have no use left; they go, or every deletion
		// would grow the user's (and the parent's) document. (A crash
		// between the writes leaves a count one high: the cost of no job.)
		author := store.ID(d.Author)
		if err := s.incOnce(ctx, s.users, userKey(author), deletedOp(id), countInc(&d, -1)); err != nil {
			return err
		}
		parent := parentKey(&d)
		if parent != nil {
			if err := s.incOnce(ctx, s.messages, append(parent, live), deletedOp(id), parentInc(&d, -1)); err != nil {
				return err
			}
		}
		if err := s.forgetOp(ctx, s.users, userKey(author), deletedOp(id)); err != nil {
			return err
		}
		if parent != nil {
			if err := s.forgetOp(ctx, s.messages, parent, deletedOp(id)); err != nil {
				return err
			}
		}
		// A repost's guard last: a crash before it leaves the pair held
		// only until the guard's claim expires (its repost is gone, so the
		// next repost takes it over), and no count wrong that the steps
		// above made right.
		return s.releaseRepost(ctx, &d)
	}
	// A message whose count was not finished (or with a job to repeat
	// this) takes the careful way; without a job the flag it sets lands
	// nowhere, the document being gone.
	return s.count(ctx, &d, true, false)
}

// FindOutbox implements storage.Backend: one query through the outbox
// index, {a: {$in: authors}, _id < from} newest first (or _id > from, oldest
// first, for a Reverse range), which goes only to
// the authors' shards. Pending is read from the message's own job.
func (s *Store) FindOutbox(ctx context.Context, f storage.OutboxFilter) ([]storage.OutboxEntry, error) {
	if len(f.Authors) == 0 || f.Limit <= 0 {
		return nil, nil
	}
	cond, sort := idRange("_id", f.Range, true)
	filter := append(outboxFilter(f), cond...)
	cur, err := s.messages.Find(ctx, filter, options.Find().SetSort(sort).SetLimit(int64(f.Limit)).
		SetProjection(bson.D{{Key: "a", Value: 1}, {Key: "c", Value: 1}, {Key: "ra", Value: 1}, {Key: "ro", Value: 1}, {Key: "roa", Value: 1}, {Key: "hh", Value: 1}, {Key: "j.k", Value: 1}, {Key: "j.pl", Value: 1}}))
	if err != nil {
		return nil, wrap("find outbox", err)
	}
	lane := -1 // any lane's share pending
	if !f.PendingFor.IsZero() {
		n := s.laneCount()
		if n > 1 {
			lane = storage.OwnerLane(f.PendingFor, n)
		}
	}
	var ds []struct {
		ID       primitive.ObjectID `bson:"_id"`
		Author   primitive.ObjectID `bson:"a"`
		Created  time.Time          `bson:"c"`
		ReplyBy  primitive.ObjectID `bson:"ra"`
		RepostOf primitive.ObjectID `bson:"ro"`
		RepostBy primitive.ObjectID `bson:"roa"`
		Hidden   bool               `bson:"hh"`
		Job      *jobDoc            `bson:"j"`
	}
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("find outbox", err)
	}
	out := make([]storage.OutboxEntry, len(ds))
	for i, d := range ds {
		out[i] = storage.OutboxEntry{
			InboxEntry:       store.InboxEntry{MessageID: store.ID(d.ID), AuthorID: store.ID(d.Author), CreatedAt: d.Created.UTC()},
			ReplyToAuthorID:  store.ID(d.ReplyBy),
			RepostOfID:       store.ID(d.RepostOf),
			RepostOfAuthorID: store.ID(d.RepostBy),
			HomeHidden:       d.Hidden,
			Pending: d.Job != nil && storage.JobKind(d.Job.Kind) == storage.JobDeliver &&
				(lane < 0 || len(d.Job.Lanes) == 0 || slices.Contains(d.Job.Lanes, int32(lane))),
		}
	}
	return out, nil
}

// CountOutbox implements storage.Backend: a count over the outbox index.
func (s *Store) CountOutbox(ctx context.Context, f storage.OutboxFilter) (int, error) {
	if len(f.Authors) == 0 {
		return 0, nil
	}
	filter := outboxFilter(f)
	if !f.After.IsZero() {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: oid(f.After)}}})
	}
	n, err := s.messages.CountDocuments(ctx, filter)
	return int(n), wrap("count outbox", err)
}

func outboxFilter(f storage.OutboxFilter) bson.D {
	authors := f.Authors
	if r := f.Home; r != nil && len(r.Hidden) > 0 {
		// The hidden users' own messages are left out by not reading
		// their outboxes; reposts of their messages by roa.
		authors = slices.DeleteFunc(slices.Clone(authors), r.Hides)
	}
	filter := bson.D{{Key: "a", Value: bson.D{{Key: "$in", Value: oids(authors)}}}, live}
	if r := f.Home; r != nil {
		// The reader's own messages pass but a repost marked hidden from
		// their home; the others, by the rule. A reply to oneself has ra
		// equal to a, one of the authors, who are among the users shown.
		// The others' reposts of hidden users' messages are left out with
		// the reposts of users shown.
		shown := append(oids(r.Shown), oid(r.Reader))
		notReposted := append(slices.Clip(shown), oids(r.Hidden)...)
		filter = append(filter, bson.E{Key: "$or", Value: bson.A{
			bson.D{{Key: "a", Value: oid(r.Reader)}, {Key: "hh", Value: bson.D{{Key: "$ne", Value: true}}}},
			bson.D{
				{Key: "a", Value: bson.D{{Key: "$ne", Value: oid(r.Reader)}}},
				{Key: "$or", Value: bson.A{
					bson.D{{Key: "ra", Value: bson.D{{Key: "$exists", Value: false}}}},
					bson.D{{Key: "ra", Value: bson.D{{Key: "$in", Value: shown}}}},
				}},
				{Key: "roa", Value: bson.D{{Key: "$nin", Value: notReposted}}}, // $nin passes a message with no roa: all but reposts
			},
		}})
	}
	switch f.Pulled {
	case storage.PushedOnly:
		filter = append(filter, bson.E{Key: "pl", Value: bson.D{{Key: "$ne", Value: true}}})
	case storage.PulledOnly:
		filter = append(filter, bson.E{Key: "pl", Value: true})
	}
	return filter
}

// StoreJob implements storage.Backend. Storing a job again is no error.
func (s *Store) StoreJob(ctx context.Context, j *storage.Job) error {
	if j.Kind != storage.JobFollow && j.Kind != storage.JobUnfollow && j.Kind != storage.JobHideReposts {
		return store.Errorf(store.EINTERNAL, "StoreJob stores follow, unfollow and hide jobs, not kind %d", j.Kind)
	}
	_, err := s.jobs.InsertOne(ctx, docs.FromJob(j))
	if isDuplicate(err) {
		return nil
	}
	return wrap("store job", err)
}

// FinishJob implements storage.Backend: each kind is removed where it is
// stored, conditionally on its kind, so a newer job in its place stays. A
// whole-inbox job whose count step was applied writes its plan first (see
// finishOwnerJob).
func (s *Store) FinishJob(ctx context.Context, j *storage.Job) error {
	var err error
	switch j.Kind {
	case storage.JobFollow, storage.JobUnfollow, storage.JobRebuild, storage.JobHideReposts:
		return s.finishOwnerJob(ctx, j)
	case storage.JobDeliver:
		_, err = s.messages.UpdateOne(ctx, append(msgKey(j.MessageID, j.AuthorID), bson.E{Key: "j.k", Value: int32(j.Kind)}),
			bson.D{{Key: "$unset", Value: bson.D{{Key: "j", Value: ""}}}})
	case storage.JobRetract:
		// Its records first: the message's document is what keeps the job.
		if _, err = s.deliveries.DeleteMany(ctx, bson.D{{Key: "m", Value: oid(j.MessageID)}}); err == nil {
			_, err = s.messages.DeleteOne(ctx, append(msgKey(j.MessageID, j.AuthorID), bson.E{Key: "j.k", Value: int32(j.Kind)}))
		}
	default:
		return store.Errorf(store.EINTERNAL, "unknown job kind %d", j.Kind)
	}
	return wrap("finish job", err)
}

// PendingJobs implements storage.Backend: the jobs kept in messages (through
// the partial jobs index), in the jobs collection, and as users' rebuilding
// flags (through the partial rebuilding index), merged by ID.
func (s *Store) PendingJobs(ctx context.Context) ([]*storage.Job, error) {
	return s.pendingJobs(ctx, 0, 1)
}

// pendingJobs returns the jobs of lane among n: with n > 1 the shares of
// message jobs that lane has not done, and the owner jobs of its owners.
func (s *Store) pendingJobs(ctx context.Context, lane, n int) ([]*storage.Job, error) {
	// A group cut short is finished first: its plan names the inboxes
	// that nothing else may write before it is done (group.go).
	if _, err := s.finishGroup(ctx, lane); err != nil {
		return nil, err
	}
	filter := bson.D{{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}}
	if n > 1 {
		if lane == 0 {
			if err := s.adoptJobs(ctx, n); err != nil {
				return nil, err
			}
		}
		filter = bson.D{{Key: "j.pl", Value: int32(lane)}}
	}
	cur, err := s.messages.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: "t", Value: 0}}))
	if err != nil {
		return nil, wrap("find jobs", err)
	}
	var ds []*messageDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("find jobs", err)
	}
	out := make([]*storage.Job, 0, len(ds))
	planned := map[store.ID]bool{} // jobs with a chunk's plan stored: begun
	for _, d := range ds {
		out = append(out, d.laneJob(lane, n))
		if sh, _ := d.Job.share(lane, n); sh.Plan != nil {
			planned[store.ID(d.ID)] = true
		}
	}
	mine := func(owner store.ID) bool { return storage.OwnerLane(owner, n) == lane }
	cur, err = s.jobs.Find(ctx, bson.D{})
	if err != nil {
		return nil, wrap("find jobs", err)
	}
	var js []*docs.Job
	if err := cur.All(ctx, &js); err != nil {
		return nil, wrap("find jobs", err)
	}
	for _, j := range js {
		if j := j.Store(); mine(j.OwnerID) {
			out = append(out, j)
		}
	}
	cur, err = s.users.Find(ctx, bson.D{{Key: "rb", Value: bson.D{{Key: "$exists", Value: true}}}},
		options.Find().SetProjection(bson.D{{Key: "rb", Value: 1}}))
	if err != nil {
		return nil, wrap("find jobs", err)
	}
	var us []*userDoc
	if err := cur.All(ctx, &us); err != nil {
		return nil, wrap("find jobs", err)
	}
	for _, u := range us {
		if j := rebuildJob(u); mine(j.OwnerID) {
			out = append(out, j)
		}
	}
	slices.SortFunc(out, func(a, b *storage.Job) int {
		if c := bytes.Compare(a.ID[:], b.ID[:]); c != 0 {
			return c
		}
		return int(a.Kind) - int(b.Kind)
	})
	// A job begun (a chunk stored, or planned: a delivery cut short, or
	// the retraction that took its place) goes first: its cursor may be
	// past owners that a backfill or rebuild would leave to it.
	begun := func(j *storage.Job) int {
		if len(j.Cursor) > 0 || (j.MessageID == j.ID && planned[j.ID]) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b *storage.Job) int { return begun(a) - begun(b) })
	// The job a lease holder had begun goes first (see beginJob).
	running, ok, err := s.runningJob(ctx, lane)
	if err != nil || !ok {
		return out, err
	}
	if i := slices.IndexFunc(out, func(j *storage.Job) bool { return j.ID == running.id && j.Kind == running.kind }); i > 0 {
		j := out[i]
		copy(out[1:i+1], out[:i])
		out[0] = j
	}
	return out, nil
}

// rebuildJob is the JobRebuild that user d's rebuilding flag stands for.
func rebuildJob(d *userDoc) *storage.Job {
	return &storage.Job{
		ID: store.ID(d.ID), Kind: storage.JobRebuild, Layout: storage.Layout(d.Rebuild.Layout),
		OwnerID: store.ID(d.ID), CreatedAt: d.Rebuild.Created.UTC(),
	}
}
