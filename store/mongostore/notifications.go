package mongostore

import (
	"context"
	"errors"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// The notifications feed: one document per group (collNotifGroups), one per
// actor of a group (collNotifActors), and one head per owner
// (collNotifHeads) with the feed's counts and read mark.
//
// A notice writes four documents and no transaction makes them one step,
// so the head also serves as the owner's claim: a Notify or a
// MarkNotificationsRead first sets the head's pending operation (np), which
// holds the whole notice, and the last step clears it together with the
// count change. While np is set the owner's other operations wait, so each
// step can be made conditional on the state the claim read:
//
//  1. claim: set np on the head, reading the counts and the mark;
//  2. upsert the group by (o, k), created without a place in the feed (no
//     t) and with no actor;
//  3. insert the actor (unique on (g, u)), with the count the group had and
//     the changes to the feed's counts (rs); a duplicate key means the actor
//     was already counted, unless the duplicate is this notice's own;
//  4. update the group only if its count is still the one the actor
//     recorded: count, latest actors, t (its place in the feed);
//  5. apply the count changes to the head only if np is still this notice,
//     and clear np in the same update.
//
// A crash anywhere leaves np set: a retry of the notice (same ID) resumes at
// once, and any other operation of the owner resumes it once the claim has
// expired (notifClaimTTL), or at once if the step failed in a process that
// lives on (expireClaim). Resuming redoes each step, and each step applies
// once.
const (
	collNotifGroups = "notifications"
	collNotifActors = "notifactors"
	collNotifHeads  = "notifheads"
)

// Kind codes stored in groups (nk) and pending notices. New kinds go at
// the end, so that stored codes keep their meaning.
var notifKinds = []store.NotificationKind{"", store.NotifyFollowed, store.NotifyLiked, store.NotifyReposted, store.NotifyReplied, store.NotifyMentioned, store.NotifyFollowRequested}

func notifKindCode(k store.NotificationKind) int32 {
	for i, v := range notifKinds {
		if v == k {
			return int32(i)
		}
	}
	return 0
}

func notifKind(c int32) store.NotificationKind {
	if c < 0 || int(c) >= len(notifKinds) {
		return ""
	}
	return notifKinds[c]
}

// notifGroupDoc is a group. T, the newest actor's activity ID, is absent
// until the first actor is counted, which keeps the group out of the feed.
type notifGroupDoc struct {
	ID      primitive.ObjectID   `bson:"_id"`
	Owner   primitive.ObjectID   `bson:"o"`
	Key     string               `bson:"k"`
	Kind    int32                `bson:"nk"`
	Message primitive.ObjectID   `bson:"m,omitempty"`
	Author  primitive.ObjectID   `bson:"a,omitempty"`
	Count   int32                `bson:"nc"`
	Latest  primitive.ObjectID   `bson:"t,omitempty"`
	Actors  []primitive.ObjectID `bson:"nl,omitempty"`
}

func (d *notifGroupDoc) store() store.NotificationGroup {
	return store.NotificationGroup{ID: store.ID(d.ID), Owner: store.ID(d.Owner), Kind: notifKind(d.Kind), Key: d.Key,
		Message: store.MessageKey{ID: store.ID(d.Message), AuthorID: store.ID(d.Author)}, Count: int(d.Count), LatestID: store.ID(d.Latest),
		LatestActors: docs.ToIDs(d.Actors)}
}

// notifActorDoc is one actor of a group; its _id is the activity's. RS is
// what its notice needs to resume: the group's count before it, shifted
// left by two, and the changes to the feed's total (2) and unread (1).
type notifActorDoc struct {
	ID    primitive.ObjectID `bson:"_id"`
	Group primitive.ObjectID `bson:"g"`
	User  primitive.ObjectID `bson:"u"`
	// Owner is the feed's owner: listing a group's actors names it, so
	// that one owner's group id cannot list another's actors.
	Owner  primitive.ObjectID `bson:"o"`
	Resume int32              `bson:"rs"`
}

// notifPending is a head's pending operation: a notice, or (no k) a read
// mark being moved.
type notifPending struct {
	ID      primitive.ObjectID `bson:"ni"`
	Expires time.Time          `bson:"nx"`
	Key     string             `bson:"k,omitempty"`
	Kind    int32              `bson:"nk,omitempty"`
	Actor   primitive.ObjectID `bson:"u,omitempty"`
	Message primitive.ObjectID `bson:"m,omitempty"`
	Author  primitive.ObjectID `bson:"a,omitempty"`
	// Plan is the group step of a RemoveNotificationActor under way.
	Plan *removalPlan `bson:"nq,omitempty"`
}

func (p *notifPending) notice(owner store.ID) storage.Notice {
	return storage.Notice{Owner: owner, Kind: notifKind(p.Kind), Key: p.Key, Actor: store.ID(p.Actor),
		Message: store.MessageKey{ID: store.ID(p.Message), AuthorID: store.ID(p.Author)}, ID: store.ID(p.ID)}
}

// notifHeadDoc is an owner's feed head.
type notifHeadDoc struct {
	Owner   primitive.ObjectID `bson:"_id"`
	Total   int32              `bson:"nt"`
	Unread  int32              `bson:"nu"`
	Mark    primitive.ObjectID `bson:"nr,omitempty"`
	Pending *notifPending      `bson:"np,omitempty"`
}

func (h *notifHeadDoc) counts() store.NotificationCounts {
	return store.NotificationCounts{Total: int(h.Total), Unread: int(h.Unread), ReadMark: store.ID(h.Mark)}
}

const after = options.After

// notifClaimTTL bounds how long a claim may be held; an older one was left
// by a crashed process and is taken over. Tests shorten it.
var notifClaimTTL = lockTTL

// claimFeed sets p as owner's pending operation and returns the head as it
// was then, and the claim's expiry (np.nx as stored), which says the claim
// is still the caller's and not taken over. A pending operation of a
// crashed process is finished first, once its claim expired; if it is p
// itself (a retry), claimFeed takes its claim over and reports resume.
func (s *Store) claimFeed(ctx context.Context, owner store.ID, p notifPending) (h notifHeadDoc, held time.Time, resume bool, err error) {
	for {
		now := time.Now().UTC()
		// Milliseconds, as stored, so that the expiry names the claim.
		p.Expires = now.Add(notifClaimTTL).Truncate(time.Millisecond)
		h = notifHeadDoc{}
		err = s.notifHeads.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "np", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "np", Value: p}}}}, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(after)).Decode(&h)
		if err == nil {
			h.Pending = nil
			return h, p.Expires, false, nil
		} else if !isDuplicate(err) {
			return h, held, false, wrap("claim notifications", err)
		}
		if err := s.notifHeads.FindOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}}).Decode(&h); err != nil && !errors.Is(err, mongo.ErrNoDocuments) {
			return h, held, false, wrap("claim notifications", err)
		}
		if q := h.Pending; q != nil && (q.ID == p.ID || q.Expires.Before(now)) {
			// Take the claim over (one taker wins), then finish its
			// operation: a notice completes, a mark move is dropped. A
			// retry of p resumes under the claim it took over.
			res, err := s.notifHeads.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "np.ni", Value: q.ID}, {Key: "np.nx", Value: q.Expires}},
				bson.D{{Key: "$set", Value: bson.D{{Key: "np.nx", Value: p.Expires}}}})
			if err != nil {
				return h, held, false, wrap("claim notifications", err)
			}
			if res.ModifiedCount == 1 {
				h.Pending = nil
				if q.ID == p.ID {
					return h, p.Expires, true, nil
				}
				if q.Plan != nil {
					if _, _, err := s.finishActorRemoval(ctx, owner, q.ID, time.Time{}, q.Plan, nil); err != nil {
						s.expireClaim(ctx, owner, q.ID)
						return h, held, false, err
					}
				} else if q.Key != "" {
					if _, err := s.applyNotice(ctx, h, p.Expires, q.notice(owner), true); err != nil {
						s.expireClaim(ctx, owner, q.ID)
						return h, held, false, err
					}
				} else if err := s.releaseFeed(ctx, owner, q.ID); err != nil {
					s.expireClaim(ctx, owner, q.ID)
					return h, held, false, err
				}
			}
			continue
		}
		select {
		case <-ctx.Done():
			return h, held, false, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// expireClaim makes owner's pending operation id, which failed in this
// process, expire now, so that the owner's next operation finishes it at
// once rather than after notifClaimTTL, longer than a notice waits for a
// claim. It is best effort (a failure leaves the claim to its TTL) and runs
// even when ctx has ended, which may be why the operation failed.
func (s *Store) expireClaim(ctx context.Context, owner store.ID, id primitive.ObjectID) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_, _ = s.notifHeads.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "np.ni", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "np.nx", Value: time.Now().UTC()}}}})
}

// releaseFeed clears owner's pending operation id.
func (s *Store) releaseFeed(ctx context.Context, owner store.ID, id primitive.ObjectID) error {
	_, err := s.notifHeads.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "np.ni", Value: id}}, bson.D{{Key: "$unset", Value: bson.D{{Key: "np", Value: ""}}}})
	return wrap("release notifications", err)
}

// Notify implements storage.Backend: see the steps above. A new actor
// costs five round trips (claim, group, actor, group, head), an actor
// already counted four (claim, group, actor, release); a contended claim
// adds a read of the head and a wait.
func (s *Store) Notify(ctx context.Context, n storage.Notice) (storage.NotifyResult, error) {
	p := notifPending{ID: oid(n.ID), Key: n.Key, Kind: notifKindCode(n.Kind), Actor: oid(n.Actor), Message: oid(n.Message.ID), Author: oid(n.Message.AuthorID)}
	h, held, resume, err := s.claimFeed(ctx, n.Owner, p)
	if err == nil {
		var res storage.NotifyResult
		if res, err = s.applyNotice(ctx, h, held, n, resume); err == nil {
			return res, nil
		}
	}
	// The claim may be n's (set before the failure, or by a try cut short).
	s.expireClaim(ctx, n.Owner, p.ID)
	return storage.NotifyResult{}, err
}

// applyNotice runs steps 2 to 5 of n under the claim, which expires at
// held, from head h as the claim found it. resume says n was pending
// already (a try of it was cut short): only then may an actor document of
// n's own ID be n's, half done.
func (s *Store) applyNotice(ctx context.Context, h notifHeadDoc, held time.Time, n storage.Notice, resume bool) (storage.NotifyResult, error) {
	var g notifGroupDoc
	set := bson.D{{Key: "_id", Value: oid(n.ID)}, {Key: "nk", Value: notifKindCode(n.Kind)}, {Key: "nc", Value: int32(0)}}
	if !n.Message.ID.IsZero() {
		set = append(set, bson.E{Key: "m", Value: oid(n.Message.ID)}, bson.E{Key: "a", Value: oid(n.Message.AuthorID)})
	}
	err := s.notifGroups.FindOneAndUpdate(ctx, bson.D{{Key: "o", Value: oid(n.Owner)}, {Key: "k", Value: n.Key}},
		bson.D{{Key: "$setOnInsert", Value: set}}, options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(after)).Decode(&g)
	if err != nil {
		return storage.NotifyResult{}, wrap("notify group", err)
	}
	c := h.counts()
	res := storage.NotifyResult{Group: g.store(), Counts: c}
	// What counting the actor changes, from the group and head as read.
	latest := g.Latest
	if n.ID.Compare(store.ID(latest)) > 0 {
		latest = oid(n.ID)
	}
	wasUnread := !g.Latest.IsZero() && store.ID(g.Latest).Compare(c.ReadMark) > 0
	var dt, du int32
	if g.Latest.IsZero() {
		dt = 1
	}
	if !wasUnread && store.ID(latest).Compare(c.ReadMark) > 0 {
		du = 1
	}
	a := notifActorDoc{ID: oid(n.ID), Group: g.ID, User: oid(n.Actor), Owner: oid(n.Owner), Resume: g.Count<<2 | dt<<1 | du}
	if _, err := s.notifActors.InsertOne(ctx, &a); isDuplicate(err) {
		// Counted before, unless it is this notice's own, from a try cut
		// short: only a resumed notice can have one.
		var had notifActorDoc
		if resume {
			if err := s.notifActors.FindOne(ctx, bson.D{{Key: "g", Value: g.ID}, {Key: "u", Value: oid(n.Actor)}}).Decode(&had); err != nil {
				return storage.NotifyResult{}, wrap("notify actor", err)
			}
		}
		if had.ID != a.ID {
			// Released only if the claim is still this try's: a taker
			// that resumed n meanwhile may have inserted that actor, and
			// finishes n under the claim.
			_, err := s.notifHeads.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(n.Owner)}, {Key: "np.ni", Value: oid(n.ID)}, {Key: "np.nx", Value: held}},
				bson.D{{Key: "$unset", Value: bson.D{{Key: "np", Value: ""}}}})
			return res, wrap("release notifications", err)
		}
		a = had
	} else if err != nil {
		return storage.NotifyResult{}, wrap("notify actor", err)
	}
	count, dt, du := a.Resume>>2, a.Resume>>1&1, a.Resume&1
	actors := append([]primitive.ObjectID{a.User}, g.Actors...)[:min(len(g.Actors)+1, store.LatestActorsShown)]
	// The filters name the shard key (o, k): findAndModify needs it.
	err = s.notifGroups.FindOneAndUpdate(ctx, bson.D{{Key: "o", Value: oid(n.Owner)}, {Key: "k", Value: n.Key}, {Key: "_id", Value: g.ID}, {Key: "nc", Value: count}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "nc", Value: count + 1}, {Key: "t", Value: latest}, {Key: "nl", Value: actors}}}},
		options.FindOneAndUpdate().SetReturnDocument(after)).Decode(&g)
	if errors.Is(err, mongo.ErrNoDocuments) {
		// Done by the try this one resumes.
		err = s.notifGroups.FindOne(ctx, bson.D{{Key: "o", Value: oid(n.Owner)}, {Key: "k", Value: n.Key}}).Decode(&g)
	}
	if err != nil {
		return storage.NotifyResult{}, wrap("notify group", err)
	}
	err = s.notifHeads.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(n.Owner)}, {Key: "np.ni", Value: oid(n.ID)}},
		bson.D{{Key: "$inc", Value: bson.D{{Key: "nt", Value: dt}, {Key: "nu", Value: du}}}, {Key: "$unset", Value: bson.D{{Key: "np", Value: ""}}}},
		options.FindOneAndUpdate().SetReturnDocument(after)).Decode(&h)
	if errors.Is(err, mongo.ErrNoDocuments) {
		err = s.notifHeads.FindOne(ctx, bson.D{{Key: "_id", Value: oid(n.Owner)}}).Decode(&h)
	}
	if err != nil {
		return storage.NotifyResult{}, wrap("notify counts", err)
	}
	return storage.NotifyResult{Group: g.store(), Counts: h.counts(), Changed: true}, nil
}

// readHead returns owner's head (zero counts before any notice).
func (s *Store) readHead(ctx context.Context, owner store.ID) (notifHeadDoc, error) {
	var h notifHeadDoc
	err := s.notifHeads.FindOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}}, options.FindOne().SetProjection(bson.D{{Key: "np", Value: 0}})).Decode(&h)
	if errors.Is(err, mongo.ErrNoDocuments) {
		err = nil
	}
	return h, wrap("read notification counts", err)
}

// ReadNotifications implements storage.Backend: the head, then one range
// of the index (o, t). Groups still without t (their first notice under
// way) are not in it.
func (s *Store) ReadNotifications(ctx context.Context, owner store.ID, r store.Range) ([]store.NotificationGroup, store.NotificationCounts, error) {
	h, err := s.readHead(ctx, owner)
	if err != nil {
		return nil, store.NotificationCounts{}, err
	}
	if r.Limit <= 0 {
		return nil, h.counts(), nil
	}
	cond, sort := idRange("t", r, true)
	if cond == nil {
		cond = bson.D{{Key: "t", Value: bson.D{{Key: "$gt", Value: primitive.NilObjectID}}}}
	}
	opts := options.Find().SetSort(sort).SetLimit(int64(r.Limit))
	cur, err := s.notifGroups.Find(ctx, append(bson.D{{Key: "o", Value: oid(owner)}}, cond...), opts)
	if err != nil {
		return nil, store.NotificationCounts{}, wrap("read notifications", err)
	}
	var ds []notifGroupDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, store.NotificationCounts{}, wrap("read notifications", err)
	}
	out := make([]store.NotificationGroup, len(ds))
	for i := range ds {
		out[i] = ds[i].store()
	}
	return out, h.counts(), nil
}

// FindNotificationGroup implements storage.Backend.
func (s *Store) FindNotificationGroup(ctx context.Context, owner, id store.ID) (*store.NotificationGroup, error) {
	var d notifGroupDoc
	err := s.notifGroups.FindOne(ctx, bson.D{{Key: "_id", Value: oid(id)}, {Key: "o", Value: oid(owner)}, {Key: "t", Value: bson.D{{Key: "$exists", Value: true}}}}).Decode(&d)
	if err != nil {
		return nil, missing(err, "notification group not found", "find notification group")
	}
	g := d.store()
	return &g, nil
}

// ListNotificationActors implements storage.Backend, through the index
// (g, _id), keeping the actors of owner's group only. An actor whose notice
// is still under way may show before the group counts it.
func (s *Store) ListNotificationActors(ctx context.Context, owner, group store.ID, r store.Range) ([]store.NotificationActor, error) {
	cond, sort := idRange("_id", r, true)
	opts := options.Find().SetSort(sort).SetProjection(bson.D{{Key: "u", Value: 1}})
	if r.Limit > 0 {
		opts.SetLimit(int64(r.Limit))
	}
	cur, err := s.notifActors.Find(ctx, append(bson.D{{Key: "g", Value: oid(group)}, {Key: "o", Value: oid(owner)}}, cond...), opts)
	if err != nil {
		return nil, wrap("list notification actors", err)
	}
	var ds []notifActorDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("list notification actors", err)
	}
	out := make([]store.NotificationActor, len(ds))
	for i, d := range ds {
		out[i] = store.NotificationActor{ID: store.ID(d.ID), UserID: store.ID(d.User)}
	}
	return out, nil
}

// MarkNotificationsRead implements storage.Backend, under the owner's claim:
// unread is recounted from the index (o, t) above the mark, and set with
// the mark as the claim is released.
func (s *Store) MarkNotificationsRead(ctx context.Context, owner, mark store.ID) (store.NotificationCounts, error) {
	id := oid(store.NewID(time.Now()))
	c, err := s.markRead(ctx, owner, mark, id)
	if err != nil {
		s.expireClaim(ctx, owner, id)
	}
	return c, err
}

// markRead is MarkNotificationsRead under the claim id.
func (s *Store) markRead(ctx context.Context, owner, mark store.ID, id primitive.ObjectID) (store.NotificationCounts, error) {
	h, _, _, err := s.claimFeed(ctx, owner, notifPending{ID: id})
	if err != nil {
		return store.NotificationCounts{}, err
	}
	if mark.Compare(store.ID(h.Mark)) <= 0 {
		return h.counts(), s.releaseFeed(ctx, owner, id)
	}
	n, err := s.notifGroups.CountDocuments(ctx, bson.D{{Key: "o", Value: oid(owner)}, {Key: "t", Value: bson.D{{Key: "$gt", Value: oid(mark)}}}})
	if err != nil {
		return store.NotificationCounts{}, wrap("count unread notifications", err)
	}
	err = s.notifHeads.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(owner)}, {Key: "np.ni", Value: id}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "nr", Value: oid(mark)}, {Key: "nu", Value: int32(n)}}}, {Key: "$unset", Value: bson.D{{Key: "np", Value: ""}}}},
		options.FindOneAndUpdate().SetReturnDocument(after)).Decode(&h)
	if err != nil {
		return store.NotificationCounts{}, wrap("mark notifications read", err)
	}
	return h.counts(), nil
}
