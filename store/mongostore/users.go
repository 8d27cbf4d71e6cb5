package mongostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// userDoc is a stored user: the shared document plus what only this
// backend keeps on it (see collUsers in schema.go).
type userDoc struct {
	docs.User `bson:",inline"`
	// Search holds the user's search terms (store.SearchTerms), indexed:
	// searchUsers reads a range of the index.
	Search   []string `bson:"q,omitempty"`
	AttrsVer int64    `bson:"av,omitempty"`

	EntriesTotal  int64               `bson:"et,omitempty"`
	EntriesUnread int64               `bson:"eu,omitempty"`
	BucketsTotal  int64               `bson:"bt,omitempty"`
	BucketsUnread int64               `bson:"bu,omitempty"`
	NewestBucket  *primitive.ObjectID `bson:"bk,omitempty"`
	NewestCount   int64               `bson:"bn,omitempty"`
	NewestMessage *primitive.ObjectID `bson:"bm,omitempty"`
	ReadMark      primitive.ObjectID  `bson:"ir,omitempty"`
	Version       int64               `bson:"iv,omitempty"`
	Rebuild       *rebuildDoc         `bson:"rb,omitempty"`

	LastJob     string     `bson:"lj,omitempty"`
	LastEntries []planItem `bson:"lq,omitempty"`
	LastAdded   bool       `bson:"la,omitempty"`
	LastLayout  int32      `bson:"ll,omitempty"`

	Ops []string `bson:"po,omitempty"`
}

// rebuildDoc is a user's rebuilding flag: the stored JobRebuild. The
// instance tells one rebuild of the user from the next, since the job's
// ID is the user's.
type rebuildDoc struct {
	Instance primitive.ObjectID `bson:"i"`
	Layout   int32              `bson:"l"`
	Created  time.Time          `bson:"c"`
}

// planItem is one entry of a count step's plan: the entry, and in the
// bucket layout the bucket it goes to or comes from.
type planItem struct {
	Message primitive.ObjectID `bson:"m"`
	Author  primitive.ObjectID `bson:"a,omitempty"`
	Created time.Time          `bson:"c,omitempty"`
	Bucket  primitive.ObjectID `bson:"b,omitempty"`
}

// Counter fields of the stored layouts.
func totalField(l storage.Layout) string {
	if l == storage.LayoutEntries {
		return "et"
	}
	return "bt"
}

func unreadField(l storage.Layout) string {
	if l == storage.LayoutEntries {
		return "eu"
	}
	return "bu"
}

// inboxProjection is what a count or a change needs of the user document.
var inboxProjection = bson.D{
	{Key: "et", Value: 1}, {Key: "eu", Value: 1}, {Key: "bt", Value: 1}, {Key: "bu", Value: 1},
	{Key: "bk", Value: 1}, {Key: "bn", Value: 1}, {Key: "bm", Value: 1}, {Key: "ir", Value: 1}, {Key: "iv", Value: 1},
	{Key: "rb", Value: 1}, {Key: "lj", Value: 1}, {Key: "lq", Value: 1}, {Key: "la", Value: 1}, {Key: "ll", Value: 1},
}

// counts returns the inbox counts of layout l: Total and Unread only for the
// layouts that keep them.
func (d *userDoc) counts(l storage.Layout) store.InboxCounts {
	c := store.InboxCounts{ReadMark: store.ID(d.ReadMark), Rebuilding: d.Rebuild != nil}
	switch l {
	case storage.LayoutEntries:
		c.Total, c.Unread = int(d.EntriesTotal), int(d.EntriesUnread)
	case storage.LayoutBuckets:
		c.Total, c.Unread = int(d.BucketsTotal), int(d.BucketsUnread)
	}
	return c
}

func oid(id store.ID) primitive.ObjectID { return primitive.ObjectID(id) }

// idRange returns what reads r over a list ordered by the ID field: the
// filter that keeps r's side of r.From (none when From is NilID) and the
// sort that reads nearest first, for a list newest first or not.
func idRange(field string, r store.Range, newestFirst bool) (filter bson.D, sort bson.D) {
	op, dir := "$lt", -1
	if r.Ascending(newestFirst) {
		op, dir = "$gt", 1
	}
	if !r.From.IsZero() {
		filter = bson.D{{Key: field, Value: bson.D{{Key: op, Value: oid(r.From)}}}}
	}
	return filter, bson.D{{Key: field, Value: dir}}
}

func oids(ids []store.ID) bson.A {
	a := make(bson.A, len(ids))
	for i, id := range ids {
		a[i] = oid(id)
	}
	return a
}

// CreateUser implements storage.Backend. The user document goes first and
// the handle claim second: a crash between them leaves an unreachable user
// document, never a handle claimed by nobody.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	if _, err := s.users.InsertOne(ctx, &userDoc{User: *docs.FromUser(u), Search: store.SearchTerms(u.Handle, u.DisplayName)}); err != nil {
		return wrap("create user", err)
	}
	_, err := s.handles.InsertOne(ctx, bson.D{{Key: "_id", Value: u.Handle}, {Key: "u", Value: oid(u.ID)}})
	if isDuplicate(err) {
		_, _ = s.users.DeleteOne(ctx, bson.D{{Key: "_id", Value: oid(u.ID)}})
		return store.Errorf(store.ECONFLICT, "handle %q is taken", u.Handle)
	}
	return wrap("claim handle", err)
}

func (s *Store) decodeUser(ctx context.Context, d *userDoc) (*store.User, error) {
	u := d.Store()
	attrs, err := s.attributes(ctx, d.Attrs)
	u.Attributes = attrs
	return u, err
}

func (s *Store) findUserDoc(ctx context.Context, id store.ID) (*userDoc, error) {
	var d userDoc
	if err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: oid(id)}}).Decode(&d); err != nil {
		return nil, missing(err, "user not found", "find user")
	}
	return &d, nil
}

// FindUserByID implements storage.Backend.
func (s *Store) FindUserByID(ctx context.Context, id store.ID) (*store.User, error) {
	d, err := s.findUserDoc(ctx, id)
	if err != nil {
		return nil, err
	}
	if d.Deleted != nil {
		return nil, store.Errorf(store.ENOTFOUND, "user not found")
	}
	return s.decodeUser(ctx, d)
}

// notDeleted is the filter element of a live user: writes to the profile,
// the attributes and the search terms leave a deleted one alone.
var notDeleted = bson.E{Key: "dl", Value: bson.D{{Key: "$exists", Value: false}}}

// FindUsersByIDs implements storage.Backend.
func (s *Store) FindUsersByIDs(ctx context.Context, ids []store.ID) ([]*store.User, error) {
	out := make([]*store.User, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	docs, err := s.findUserDocs(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: oids(ids)}}}})
	if err != nil {
		return nil, err
	}
	byID := make(map[store.ID]*store.User, len(docs))
	for _, d := range docs {
		if d.Deleted != nil {
			continue
		}
		u, err := s.decodeUser(ctx, d)
		if err != nil {
			return nil, err
		}
		byID[u.ID] = u
	}
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out, nil
}

func (s *Store) findUserDocs(ctx context.Context, filter bson.D, opts ...*options.FindOptions) ([]*userDoc, error) {
	cur, err := s.users.Find(ctx, filter, opts...)
	if err != nil {
		return nil, wrap("find users", err)
	}
	var docs []*userDoc
	return docs, wrap("find users", cur.All(ctx, &docs))
}

// FindUserByHandle implements storage.Backend.
func (s *Store) FindUserByHandle(ctx context.Context, handle string) (*store.User, error) {
	var claim struct {
		User primitive.ObjectID `bson:"u"`
	}
	if err := s.handles.FindOne(ctx, bson.D{{Key: "_id", Value: handle}}).Decode(&claim); err != nil {
		return nil, missing(err, "user not found", "find handle")
	}
	return s.FindUserByID(ctx, store.ID(claim.User))
}

// FindUsersByHandles implements storage.Backend in 2 round trips, however
// many handles: their claims, then their users.
func (s *Store) FindUsersByHandles(ctx context.Context, handles []string) ([]*store.User, error) {
	out := make([]*store.User, len(handles))
	if len(handles) == 0 {
		return out, nil
	}
	cur, err := s.handles.Find(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: handles}}}})
	if err != nil {
		return nil, wrap("find handles", err)
	}
	var claims []struct {
		Handle string             `bson:"_id"`
		User   primitive.ObjectID `bson:"u"`
	}
	if err := cur.All(ctx, &claims); err != nil {
		return nil, wrap("find handles", err)
	}
	owner := make(map[string]store.ID, len(claims))
	ids := make([]store.ID, 0, len(claims))
	for _, c := range claims {
		owner[c.Handle] = store.ID(c.User)
		ids = append(ids, store.ID(c.User))
	}
	users, err := s.FindUsersByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	byID := make(map[store.ID]*store.User, len(users))
	for _, u := range users {
		if u != nil {
			byID[u.ID] = u
		}
	}
	for i, h := range handles {
		if id, ok := owner[h]; ok {
			out[i] = byID[id]
		}
	}
	return out, nil
}

// UpdateUser implements storage.Backend.
func (s *Store) UpdateUser(ctx context.Context, id store.ID, upd storage.UserUpdate) (*store.User, error) {
	set, unset := bson.D{}, bson.D{}
	if upd.DisplayName != nil {
		// The search terms change with the name, in the same update; they
		// need the handle, which never changes, so reading it first races
		// with nothing.
		var h struct {
			Handle string `bson:"h"`
		}
		err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: oid(id)}}, options.FindOne().SetProjection(bson.D{{Key: "h", Value: 1}})).Decode(&h)
		if err != nil {
			return nil, missing(err, "user not found", "update user")
		}
		set = append(set, bson.E{Key: "n", Value: *upd.DisplayName}, bson.E{Key: "q", Value: store.SearchTerms(h.Handle, *upd.DisplayName)})
	}
	// A cleared profile field is removed, as an unset one is never stored.
	for _, f := range []struct {
		key string
		v   *string
	}{{"bi", upd.Bio}, {"w", upd.WebsiteURL}, {"au", upd.AvatarURL}} {
		switch {
		case f.v == nil:
		case *f.v == "":
			unset = append(unset, bson.E{Key: f.key, Value: ""})
		default:
			set = append(set, bson.E{Key: f.key, Value: *f.v})
		}
	}
	// A public account stores no flag, as a cleared field.
	switch {
	case upd.Private == nil:
	case *upd.Private:
		set = append(set, bson.E{Key: "pv", Value: true})
	default:
		unset = append(unset, bson.E{Key: "pv", Value: ""})
	}
	switch {
	case upd.MessagesFrom == nil:
	case *upd.MessagesFrom != store.MessagesFromEveryone:
		set = append(set, bson.E{Key: "mf", Value: int32(*upd.MessagesFrom)})
	default:
		unset = append(unset, bson.E{Key: "mf", Value: ""})
	}
	if len(set) == 0 && len(unset) == 0 {
		return s.FindUserByID(ctx, id)
	}
	change := bson.D{}
	if len(set) > 0 {
		change = append(change, bson.E{Key: "$set", Value: set})
	}
	if len(unset) > 0 {
		change = append(change, bson.E{Key: "$unset", Value: unset})
	}
	var d userDoc
	err := s.users.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(id)}, notDeleted}, change,
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if err != nil {
		return nil, missing(err, "user not found", "update user")
	}
	return s.decodeUser(ctx, &d)
}

// SearchUsers implements storage.Backend: one query on the search index,
// its range bounded by limit. $elemMatch keeps both bounds on one term (a
// plain range on an array matches a user with one term above the prefix
// and another below its end).
func (s *Store) SearchUsers(ctx context.Context, prefix string, limit int) ([]*store.User, error) {
	filter := bson.D{{Key: "q", Value: bson.D{{Key: "$elemMatch", Value: bson.D{
		{Key: "$gte", Value: prefix}, {Key: "$lt", Value: prefix + "\U0010FFFF"},
	}}}}}
	cur, err := s.users.Find(ctx, filter, options.Find().SetLimit(int64(limit)).SetHint("search"))
	if err != nil {
		return nil, wrap("search users", err)
	}
	var found []userDoc
	if err := cur.All(ctx, &found); err != nil {
		return nil, wrap("search users", err)
	}
	out := make([]*store.User, 0, len(found))
	for i := range found {
		if found[i].Deleted != nil {
			continue
		}
		u, err := s.decodeUser(ctx, &found[i])
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// usersExist returns NOT_FOUND unless every id is a user.
func (s *Store) usersExist(ctx context.Context, ids ...store.ID) error {
	n, err := s.users.CountDocuments(ctx, bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: oids(ids)}}}})
	if err != nil {
		return wrap("find users", err)
	}
	want := len(ids)
	if len(ids) == 2 && ids[0] == ids[1] {
		want = 1
	}
	if int(n) != want {
		return store.Errorf(store.ENOTFOUND, "user not found")
	}
	return nil
}

// MarkSeen implements storage.Backend. A returning user's flag and last-seen
// time are one conditional update, so a user is found returning, and a
// rebuild stored, once. The flag is set only if none is pending: a pending
// rebuild may be half done, and its instance is what makes it idempotent.
func (s *Store) MarkSeen(ctx context.Context, user store.ID, at, inactiveBefore time.Time, rebuild *storage.Job) (bool, error) {
	if rebuild != nil {
		rb := rebuildDoc{Instance: primitive.NewObjectID(), Layout: int32(rebuild.Layout), Created: rebuild.CreatedAt}
		res, err := s.users.UpdateOne(ctx,
			bson.D{{Key: "_id", Value: oid(user)}, {Key: "s", Value: bson.D{{Key: "$lt", Value: inactiveBefore}}}, {Key: "rb", Value: bson.D{{Key: "$exists", Value: false}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: at}, {Key: "rb", Value: rb}}}})
		if err != nil {
			return false, wrap("mark seen", err)
		}
		if res.MatchedCount == 1 {
			return true, nil
		}
	}
	var before struct {
		Seen    time.Time `bson:"s"`
		Rebuild bson.Raw  `bson:"rb"`
	}
	err := s.users.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(user)}}, bson.D{{Key: "$set", Value: bson.D{{Key: "s", Value: at}}}},
		options.FindOneAndUpdate().SetProjection(bson.D{{Key: "s", Value: 1}, {Key: "rb", Value: 1}})).Decode(&before)
	if err != nil {
		return false, missing(err, "user not found", "mark seen")
	}
	// Inactive with a rebuild already pending: the flag is set, as asked.
	return rebuild != nil && before.Seen.Before(inactiveBefore) && before.Rebuild != nil, nil
}

// ListPullAuthors implements storage.Backend, through the partial index of
// users with pulled messages.
func (s *Store) ListPullAuthors(ctx context.Context) ([]store.ID, error) {
	cur, err := s.users.Find(ctx, bson.D{{Key: "pc", Value: bson.D{{Key: "$gt", Value: 0}}}},
		options.Find().SetProjection(bson.D{{Key: "_id", Value: 1}}).SetSort(bson.D{{Key: "_id", Value: 1}}))
	if err != nil {
		return nil, wrap("list pull authors", err)
	}
	var rows []struct {
		ID primitive.ObjectID `bson:"_id"`
	}
	if err := cur.All(ctx, &rows); err != nil {
		return nil, wrap("list pull authors", err)
	}
	out := make([]store.ID, len(rows))
	for i, r := range rows {
		out[i] = store.ID(r.ID)
	}
	return out, nil
}

// findInboxHead reads the inbox fields of owner's user document; a missing
// user reads as an empty inbox, and found false.
func (s *Store) findInboxHead(ctx context.Context, owner store.ID) (*userDoc, bool, error) {
	var d userDoc
	err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: oid(owner)}}, options.FindOne().SetProjection(inboxProjection)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return &userDoc{}, false, nil
	}
	return &d, err == nil, wrap("read inbox head", err)
}

// RevokeTokens implements storage.Backend. It reads the user, applies r,
// and writes the result only if the token fields are still as read, so
// that concurrent revocations each apply on top of the other (a retry
// re-reads): 2 round trips when uncontended.
func (s *Store) RevokeTokens(ctx context.Context, id store.ID, r store.TokenRevocation) (*store.User, error) {
	const attempts = 16
	for range attempts {
		d, err := s.findUserDoc(ctx, id)
		if err != nil {
			return nil, err
		}
		version, revoked, kept := r.Apply(int(d.TokenVer), d.RevokedTokens(), d.Kept)
		filter := bson.D{{Key: "_id", Value: oid(id)}, asRead("tv", d.TokenVer, d.TokenVer == 0), asRead("rt", d.Revoked, len(d.Revoked) == 0), asRead("kt", d.Kept, d.Kept == "")}
		set, unset := bson.D{}, bson.D{}
		if version != 0 {
			set = append(set, bson.E{Key: "tv", Value: int64(version)})
		}
		if kept != "" {
			set = append(set, bson.E{Key: "kt", Value: kept})
		} else {
			unset = append(unset, bson.E{Key: "kt", Value: ""})
		}
		if r.PasswordHash != nil {
			set = append(set, bson.E{Key: "p", Value: r.PasswordHash})
		}
		if stored := docs.FromRevoked(revoked); stored != nil {
			set = append(set, bson.E{Key: "rt", Value: stored})
		} else {
			unset = append(unset, bson.E{Key: "rt", Value: ""})
		}
		update := bson.D{}
		if len(set) > 0 {
			update = append(update, bson.E{Key: "$set", Value: set})
		}
		if len(unset) > 0 {
			update = append(update, bson.E{Key: "$unset", Value: unset})
		}
		var after userDoc
		err = s.users.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&after)
		if errors.Is(err, mongo.ErrNoDocuments) {
			continue // changed since read (or deleted: the next read says so)
		} else if err != nil {
			return nil, wrap("revoke tokens", err)
		}
		return s.decodeUser(ctx, &after)
	}
	return nil, fmt.Errorf("mongostore revoke tokens: user %s changed %d times while revoking", id, attempts)
}

// asRead is a filter element matching field as it was read: absent when
// it was empty (omitempty fields are not stored), else equal.
func asRead(field string, v any, empty bool) bson.E {
	if empty {
		return bson.E{Key: field, Value: bson.D{{Key: "$exists", Value: false}}}
	}
	return bson.E{Key: field, Value: v}
}

// BackfillSearch gives search terms to the users stored before users had
// them, a chunk of 1,000 at a time, and returns how many it changed. A user
// with terms is left alone, so it is idempotent, and a run stopped halfway
// is finished by the next.
func (s *Store) BackfillSearch(ctx context.Context) (int, error) {
	missing := bson.D{{Key: "q", Value: bson.D{{Key: "$exists", Value: false}}}}
	done := 0
	for {
		cur, err := s.users.Find(ctx, missing, options.Find().SetLimit(1000).SetProjection(bson.D{{Key: "h", Value: 1}, {Key: "n", Value: 1}}))
		if err != nil {
			return done, wrap("backfill search terms", err)
		}
		var chunk []struct {
			ID     primitive.ObjectID `bson:"_id"`
			Handle string             `bson:"h"`
			Name   string             `bson:"n"`
		}
		if err := cur.All(ctx, &chunk); err != nil {
			return done, wrap("backfill search terms", err)
		}
		if len(chunk) == 0 {
			return done, nil
		}
		w := make([]mongo.WriteModel, len(chunk))
		for i, u := range chunk {
			// Only where still missing: a rename meanwhile set the terms of
			// the new name.
			w[i] = mongo.NewUpdateOneModel().SetFilter(bson.D{{Key: "_id", Value: u.ID}, missing[0]}).
				SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "q", Value: store.SearchTerms(u.Handle, u.Name)}}}})
		}
		if _, err := s.users.BulkWrite(ctx, w, unordered); err != nil {
			return done, wrap("backfill search terms", err)
		}
		done += len(chunk)
	}
}
