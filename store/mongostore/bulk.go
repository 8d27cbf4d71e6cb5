package mongostore

import (
	"context"
	"errors"
	"slices"
	"sync"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

var _ storage.BulkLoader = (*Store)(nil)

// Bulk loading writes the documents the primitives would have written for
// the same history, each by an idempotent write keyed by its natural key
// (an upsert that sets, never increments), so loading a batch again
// leaves what loading it once left:
//
//   - a user: its fields set on the document keyed by _id, the inbox fields
//     kept (a user reloaded after its inbox keeps the inbox's counts), and
//     its handle claim; a claim the user held for another handle goes;
//   - an edge: the followees edge in its final state (followed) and the
//     followers edge, as a finished Follow leaves them;
//   - a message: marked counted (mn), since its author's counters come
//     with the user, so a deletion takes it out of them once; no job; its
//     like count (lc) as given, the count of its loaded likes; a repost
//     with its guard in reposts, inserted first (as CreateMessage does) by
//     an upsert on its pair (u, o) that sets nothing on a match, as a
//     like's: a cut between leaves a guard whose repost is missing, which
//     the next load repairs (or, past its claim, a repost takes over),
//     never a repost without its guard; the original's repost count (rp)
//     as given, the count of its loaded reposts;
//   - a like: its document as a finished Like leaves it (no st), inserted
//     by an upsert on its pair (u, m) that sets nothing on a match: a pair
//     that holds a like already keeps it, so loading again writes nothing
//     and a like made since (another _id) stays the pair's one;
//   - an inbox (LayoutEntries or LayoutBuckets): its entries, or its
//     buckets cut oldest first into runs of bucketSize as deliveries in
//     order would have filled them (each keyed by its first message, the
//     newest one holding the rest); the inbox's other entries or buckets,
//     if any, are removed, so it is replaced rather than merged; one
//     delivery record per message and batch, keyed by its last owner as a
//     delivered chunk's is, naming the owner and bucket of each entry; and
//     the owner's counts: total = unread = the items, no read mark, not
//     rebuilding, no last count step, and for buckets the newest bucket's
//     key, fill and message (bk, bn, bm), which placement goes on from.
//
// The writes of a batch are a few unordered bulk writes, run at once where
// they touch different documents; a batch reads nothing but the claims on
// its handles. Nothing is atomic across documents: a batch cut short is
// repaired by loading it again, which is what the progress record, written
// last, is for.

// LoadBulk implements storage.BulkLoader. A malformed batch (a zero ID, a
// user, edge, message, like or inbox owner twice, a handle twice, too many
// attributes, an inbox not newest first or with a message twice, inbox
// items in a layout that stores none) is BAD_USER_INPUT and a handle held
// by a user outside the batch is CONFLICT; either way nothing of the batch
// is written. An inbox whose owner is not loaded is NOT_FOUND, found only
// once the batch's other writes are made (the batch's progress is not
// stored). Inboxes in a layout that stores none must be empty; they are
// ignored.
func (s *Store) LoadBulk(ctx context.Context, b *storage.Bulk) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if len(b.Users) > 0 {
		if err := s.loadUsers(ctx, b.Users); err != nil {
			return err
		}
	}
	tasks := []func() error{
		func() error { return s.loadMessages(ctx, b.Messages) },
		func() error { return s.loadLikes(ctx, b.Likes) },
		func() error { return s.loadInboxes(ctx, b.Layout, b.Inboxes) },
	}
	tasks = append(tasks, s.edgeTasks(ctx, b.Edges)...)
	if err := concurrently(tasks...); err != nil {
		return err
	}
	if b.Progress == nil {
		return nil
	}
	_, err := s.db.Collection(collProgress).UpdateOne(ctx, bson.D{{Key: "_id", Value: b.Progress.Name}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "v", Value: b.Progress.Value}}}}, options.Update().SetUpsert(true))
	return wrap("bulk: progress", err)
}

// BulkProgress implements storage.BulkLoader.
func (s *Store) BulkProgress(ctx context.Context, name string) ([]byte, error) {
	var d struct {
		Value []byte `bson:"v"`
	}
	err := s.db.Collection(collProgress).FindOne(ctx, bson.D{{Key: "_id", Value: name}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap("bulk: read progress", err)
	}
	return d.Value, nil
}

// concurrently runs fns at once and returns the first error, in fns'
// order, once all have returned.
func concurrently(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, f := range fns {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// loadUsers writes users: the claims on their handles are read first (the
// one read of a batch), so that a handle held outside the batch fails it
// before anything is written; then the user documents, then the claims,
// in CreateUser's order, so that a cut between leaves a user without a
// claim, never a claim without its user. A claim held by a user of the
// batch for another handle is released before the claims are made, so
// two users may swap handles in one batch.
func (s *Store) loadUsers(ctx context.Context, users []*store.User) error {
	handles := make(bson.A, len(users))
	ids := make(bson.A, len(users))
	byID := make(map[primitive.ObjectID]string, len(users))
	for i, u := range users {
		handles[i], ids[i] = u.Handle, oid(u.ID)
		byID[oid(u.ID)] = u.Handle
	}
	cur, err := s.handles.Find(ctx, bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: handles}}}},
		bson.D{{Key: "u", Value: bson.D{{Key: "$in", Value: ids}}}},
	}}})
	if err != nil {
		return wrap("bulk: read handles", err)
	}
	var claims []struct {
		Handle string             `bson:"_id"`
		User   primitive.ObjectID `bson:"u"`
	}
	if err := cur.All(ctx, &claims); err != nil {
		return wrap("bulk: read handles", err)
	}
	var stale []mongo.WriteModel
	for _, c := range claims {
		h, inBatch := byID[c.User]
		switch {
		case !inBatch:
			return store.Errorf(store.ECONFLICT, "handle %q is taken", c.Handle)
		case h != c.Handle:
			stale = append(stale, mongo.NewDeleteOneModel().SetFilter(bson.D{{Key: "_id", Value: c.Handle}, {Key: "u", Value: c.User}}))
		}
	}
	tokens, err := s.bulkTokens(ctx, users)
	if err != nil {
		return err
	}
	docsW := make([]mongo.WriteModel, len(users))
	claimsW := make([]mongo.WriteModel, len(users))
	for i, u := range users {
		upd, err := userSet(u, tokens)
		if err != nil {
			return err
		}
		docsW[i] = mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: oid(u.ID)}}).SetUpdate(upd).SetUpsert(true)
		claimsW[i] = mongo.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: u.Handle}, {Key: "u", Value: oid(u.ID)}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "u", Value: oid(u.ID)}}}}).SetUpsert(true)
	}
	if _, err := s.users.BulkWrite(ctx, docsW, unordered); err != nil {
		return wrap("bulk: users", err)
	}
	if len(stale) > 0 {
		if _, err := s.handles.BulkWrite(ctx, stale, unordered); err != nil {
			return wrap("bulk: release handles", err)
		}
	}
	if _, err := s.handles.BulkWrite(ctx, claimsW, unordered); err != nil {
		if isDuplicate(err) {
			// Claimed by another writer since the check.
			return store.Errorf(store.ECONFLICT, "a handle of the batch was taken while it loaded")
		}
		return wrap("bulk: claim handles", err)
	}
	return nil
}

// bulkTokens returns the name-store tokens of the users' attribute names,
// registering new names. A name is registered once and then cached, so a
// load pays for each distinct name once, not per user.
func (s *Store) bulkTokens(ctx context.Context, users []*store.User) (map[string]int32, error) {
	tokens := map[string]int32{}
	for _, u := range users {
		for _, a := range u.Attributes {
			if _, ok := tokens[a.Name]; ok {
				continue
			}
			tok, _, err := s.token(ctx, a.Name, true)
			if err != nil {
				return nil, err
			}
			tokens[a.Name] = tok
		}
	}
	return tokens, nil
}

// userSet is the update that makes user u's document hold u: every field
// of the stored user set (in CreateUser's encoding), the optional ones
// (pulled count, attributes) unset when empty. The fields this backend
// keeps on the user (inbox counts and marks) are left as they are.
func userSet(u *store.User, tokens map[string]int32) (bson.D, error) {
	d := docs.FromUser(u)
	for _, a := range u.Attributes {
		d.Attrs = append(d.Attrs, docs.Attr{Token: tokens[a.Name], Value: a.Value})
	}
	slices.SortFunc(d.Attrs, func(a, b docs.Attr) int { return int(a.Token - b.Token) })
	b, err := bson.Marshal(d)
	if err != nil {
		return nil, wrap("bulk: encode user", err)
	}
	elems, err := bson.Raw(b).Elements()
	if err != nil {
		return nil, wrap("bulk: encode user", err)
	}
	set := make(bson.D, 0, len(elems)+1)
	for _, e := range elems {
		if e.Key() != "_id" {
			set = append(set, bson.E{Key: e.Key(), Value: e.Value()})
		}
	}
	set = append(set, bson.E{Key: "q", Value: store.SearchTerms(u.Handle, u.DisplayName)})
	upd := bson.D{{Key: "$set", Value: set}}
	var unset bson.D
	if d.Pulled == 0 {
		unset = append(unset, bson.E{Key: "pc", Value: ""})
	}
	if len(d.Attrs) == 0 {
		unset = append(unset, bson.E{Key: "at", Value: ""})
	}
	if len(unset) > 0 {
		upd = append(upd, bson.E{Key: "$unset", Value: unset})
	}
	return upd, nil
}

// edgeTasks returns the writes of edges: both directions, each replaced
// whole by its unique (u, o), as a finished Follow leaves them.
func (s *Store) edgeTasks(ctx context.Context, edges []storage.Edge) []func() error {
	if len(edges) == 0 {
		return nil
	}
	followees := make([]mongo.WriteModel, len(edges))
	followers := make([]mongo.WriteModel, len(edges))
	for i, e := range edges {
		followees[i] = mongo.NewReplaceOneModel().SetFilter(edgeFilter(e.Follower, e.Followee)).
			SetReplacement(edgeDoc{User: oid(e.Follower), Other: oid(e.Followee), At: e.At, State: edgeFollowed}).SetUpsert(true)
		followers[i] = mongo.NewReplaceOneModel().SetFilter(edgeFilter(e.Followee, e.Follower)).
			SetReplacement(bson.D{{Key: "u", Value: oid(e.Followee)}, {Key: "o", Value: oid(e.Follower)}, {Key: "t", Value: e.At}}).SetUpsert(true)
	}
	return []func() error{
		func() error {
			_, err := s.followees.BulkWrite(ctx, followees, unordered)
			return wrap("bulk: followees", err)
		},
		func() error {
			_, err := s.followers.BulkWrite(ctx, followers, unordered)
			return wrap("bulk: followers", err)
		},
	}
}

// loadMessages replaces each message whole by its shard key (a, _id),
// counted (its author's counters come with the user) and without a job
// (it is delivered: its entries come with the inboxes), after the guards
// of the reposts among them.
func (s *Store) loadMessages(ctx context.Context, msgs []*store.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, len(msgs))
	var guards []mongo.WriteModel
	for i, m := range msgs {
		models[i] = mongo.NewReplaceOneModel().SetFilter(msgKey(m.ID, m.AuthorID)).
			SetReplacement(&messageDoc{Message: *docs.FromMessage(m), Counted: true}).SetUpsert(true)
		if m.Kind == store.KindRepost {
			guards = append(guards, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "u", Value: oid(m.AuthorID)}, {Key: "o", Value: oid(m.RepostOfID)}}).
				SetUpdate(bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "_id", Value: oid(m.ID)}}}}).SetUpsert(true))
		}
	}
	if len(guards) > 0 {
		if _, err := s.reposts.BulkWrite(ctx, guards, unordered); err != nil {
			return wrap("bulk: repost guards", err)
		}
	}
	_, err := s.messages.BulkWrite(ctx, models, unordered)
	return wrap("bulk: messages", err)
}

// loadLikes inserts each like whose pair has none, by its pair (the
// unique index (u, m), within the shard of u).
func (s *Store) loadLikes(ctx context.Context, likes []store.Like) error {
	if len(likes) == 0 {
		return nil
	}
	models := make([]mongo.WriteModel, len(likes))
	for i, l := range likes {
		models[i] = mongo.NewUpdateOneModel().SetFilter(likePair(oid(l.UserID), oid(l.MessageID), primitive.NilObjectID)).
			SetUpdate(bson.D{{Key: "$setOnInsert", Value: bson.D{{Key: "_id", Value: oid(l.ID)}, {Key: "a", Value: oid(l.AuthorID)}}}}).SetUpsert(true)
	}
	_, err := s.likes.BulkWrite(ctx, models, unordered)
	return wrap("bulk: likes", err)
}

// loadInboxes writes whole inboxes in layout lay (see the comment at the
// top): the entries or buckets with the removal of any others of their
// owners, the delivery records, and the owners' counts, three bulk writes
// at once.
func (s *Store) loadInboxes(ctx context.Context, lay storage.Layout, inboxes []storage.BulkInbox) error {
	if len(inboxes) == 0 || !lay.Stores() {
		return nil
	}
	var (
		writes []mongo.WriteModel
		counts = make([]mongo.WriteModel, len(inboxes))
		refs   = map[primitive.ObjectID][]deliveryRef{}
		msgs   []primitive.ObjectID // refs' keys in the order first met
	)
	addRef := func(m primitive.ObjectID, r deliveryRef) {
		if _, ok := refs[m]; !ok {
			msgs = append(msgs, m)
		}
		refs[m] = append(refs[m], r)
	}
	for i, in := range inboxes {
		o := oid(in.Owner)
		n := int64(len(in.Items))
		set := bson.D{}
		unset := bson.D{{Key: "ir", Value: ""}, {Key: "rb", Value: ""}, {Key: "lj", Value: ""}, {Key: "lq", Value: ""}, {Key: "la", Value: ""}, {Key: "ll", Value: ""}}
		if lay == storage.LayoutEntries {
			kept := make(bson.A, len(in.Items))
			for j, it := range in.Items {
				e := entryOf(it)
				kept[j] = e.Message
				writes = append(writes, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "o", Value: o}, {Key: "m", Value: e.Message}}).
					SetReplacement(entryRow{Owner: o, Entry: e}).SetUpsert(true))
				addRef(e.Message, deliveryRef{Owner: o})
			}
			writes = append(writes, mongo.NewDeleteManyModel().SetFilter(bson.D{{Key: "o", Value: o}, {Key: "m", Value: bson.D{{Key: "$nin", Value: kept}}}}))
			if n > 0 {
				set = append(set, bson.E{Key: "et", Value: n}, bson.E{Key: "eu", Value: n})
			} else {
				unset = append(unset, bson.E{Key: "et", Value: ""}, bson.E{Key: "eu", Value: ""})
			}
		} else {
			bs := cutBuckets(o, in.Items)
			kept := make(bson.A, len(bs))
			for j, b := range bs {
				kept[j] = b.Key
				writes = append(writes, mongo.NewReplaceOneModel().SetFilter(bson.D{{Key: "o", Value: o}, {Key: "k", Value: b.Key}}).
					SetReplacement(b).SetUpsert(true))
				for _, e := range b.Entries {
					addRef(e.Message, deliveryRef{Owner: o, Bucket: b.Key})
				}
			}
			writes = append(writes, mongo.NewDeleteManyModel().SetFilter(bson.D{{Key: "o", Value: o}, {Key: "k", Value: bson.D{{Key: "$nin", Value: kept}}}}))
			if n > 0 {
				newest := bs[len(bs)-1]
				set = append(set, bson.E{Key: "bt", Value: n}, bson.E{Key: "bu", Value: n},
					bson.E{Key: "bk", Value: newest.Key}, bson.E{Key: "bn", Value: int64(len(newest.Entries))}, bson.E{Key: "bm", Value: oid(in.Items[0].MessageID)})
			} else {
				unset = append(unset, bson.E{Key: "bt", Value: ""}, bson.E{Key: "bu", Value: ""}, bson.E{Key: "bk", Value: ""}, bson.E{Key: "bn", Value: ""}, bson.E{Key: "bm", Value: ""})
			}
		}
		upd := bson.D{{Key: "$unset", Value: unset}}
		if len(set) > 0 {
			upd = append(bson.D{{Key: "$set", Value: set}}, upd...)
		}
		counts[i] = mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: o}}).SetUpdate(upd)
	}
	records := make([]mongo.WriteModel, 0, len(msgs))
	for _, m := range msgs {
		rs := refs[m]
		slices.SortFunc(rs, func(a, b deliveryRef) int { return cmpID(a.Owner, b.Owner) })
		// Keyed by its last owner, as a delivered chunk's record is; refs
		// are a set, so a repeat adds nothing.
		records = append(records, mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "m", Value: m}, {Key: "k", Value: rs[len(rs)-1].Owner}}).
			SetUpdate(bson.D{{Key: "$addToSet", Value: bson.D{{Key: "r", Value: bson.D{{Key: "$each", Value: rs}}}}}}).SetUpsert(true))
	}
	coll := s.entries
	if lay == storage.LayoutBuckets {
		coll = s.buckets
	}
	var matched int64
	err := concurrently(
		func() error {
			_, err := coll.BulkWrite(ctx, writes, unordered)
			return wrap("bulk: inbox entries", err)
		},
		func() error {
			if len(records) == 0 {
				return nil
			}
			_, err := s.deliveries.BulkWrite(ctx, records, unordered)
			return wrap("bulk: delivery records", err)
		},
		func() error {
			res, err := s.users.BulkWrite(ctx, counts, unordered)
			if err == nil {
				matched = res.MatchedCount
			}
			return wrap("bulk: inbox counts", err)
		},
	)
	if err != nil {
		return err
	}
	if int(matched) != len(inboxes) {
		return store.Errorf(store.ENOTFOUND, "bulk: the owner of an inbox is not loaded")
	}
	return nil
}

func entryOf(it store.InboxItem) entryDoc {
	return entryDoc{Message: oid(it.MessageID), Author: oid(it.AuthorID), Created: it.CreatedAt, Delivered: it.DeliveredAt}
}

// cutBuckets cuts an inbox (items newest first) into owner's buckets as
// deliveries in order fill them: oldest first, bucketSize entries each,
// each keyed by its first (lowest) message and holding its entries in
// arrival order; the last, newest bucket holds the rest (1 to bucketSize).
// The newest page of bucketSize entries then spans at most 2 buckets.
func cutBuckets(owner primitive.ObjectID, items []store.InboxItem) []bucketDoc {
	var bs []bucketDoc
	for i := len(items) - 1; i >= 0; i-- {
		e := entryOf(items[i])
		if len(bs) == 0 || len(bs[len(bs)-1].Entries) == bucketSize {
			bs = append(bs, bucketDoc{Owner: owner, Key: e.Message, Entries: make([]entryDoc, 0, min(bucketSize, i+1))})
		}
		bs[len(bs)-1].Entries = append(bs[len(bs)-1].Entries, e)
	}
	return bs
}
