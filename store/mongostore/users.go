package mongostore

import (
	"context"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
	"herald/store/internal/docs"
)

// userDoc is a stored user: the shared document plus what only this
// backend keeps on it (see collUsers in schema.go).
type userDoc struct {
	docs.User `bson:",inline"`
	AttrsVer  int64              `bson:"av,omitempty"`
	Seq       int64              `bson:"is,omitempty"`
	Total     int64              `bson:"it,omitempty"`
	Unread    int64              `bson:"iu,omitempty"`
	ReadSeq   int64              `bson:"ir,omitempty"`
	Delivered primitive.ObjectID `bson:"ld,omitempty"`
	Retracted primitive.ObjectID `bson:"lr,omitempty"`
	Ops       []string           `bson:"po,omitempty"`
}

func (d *userDoc) counts() store.InboxCounts {
	return store.InboxCounts{Seq: uint64(d.Seq), ReadSeq: uint64(d.ReadSeq), Total: int(d.Total), Unread: int(d.Unread)}
}

// incOnce applies inc to user id's counters once for operation op: the
// update also records op in the user's pending operations (po), and is
// conditional on op not being there, so a retry changes nothing. When the
// operation has recorded elsewhere that its counters are done, it calls
// forgetOp, which keeps po small.
func (s *Store) incOnce(ctx context.Context, id store.ID, op string, inc bson.D) error {
	_, err := s.users.UpdateOne(ctx,
		bson.D{{Key: "_id", Value: oid(id)}, {Key: "po", Value: bson.D{{Key: "$ne", Value: op}}}},
		bson.D{{Key: "$inc", Value: inc}, {Key: "$push", Value: bson.D{{Key: "po", Value: op}}}})
	return wrap("update counters", err)
}

// forgetOp drops a finished operation from user id's pending operations.
func (s *Store) forgetOp(ctx context.Context, id store.ID, op string) error {
	_, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(id)}}, bson.D{{Key: "$pull", Value: bson.D{{Key: "po", Value: op}}}})
	return wrap("update counters", err)
}

func oid(id store.ID) primitive.ObjectID { return primitive.ObjectID(id) }

func oids(ids []store.ID) bson.A {
	a := make(bson.A, len(ids))
	for i, id := range ids {
		a[i] = oid(id)
	}
	return a
}

// CreateUser implements store.Backend. The user document goes first and
// the handle claim second: a crash between them leaves an unreachable user
// document, never a handle claimed by nobody.
func (s *Store) CreateUser(ctx context.Context, u *store.User) error {
	if _, err := s.users.InsertOne(ctx, &userDoc{User: *docs.FromUser(u)}); err != nil {
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

// FindUserByID implements store.Backend.
func (s *Store) FindUserByID(ctx context.Context, id store.ID) (*store.User, error) {
	d, err := s.findUserDoc(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.decodeUser(ctx, d)
}

// FindUsersByIDs implements store.Backend.
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

// FindUserByHandle implements store.Backend.
func (s *Store) FindUserByHandle(ctx context.Context, handle string) (*store.User, error) {
	var claim struct {
		User primitive.ObjectID `bson:"u"`
	}
	if err := s.handles.FindOne(ctx, bson.D{{Key: "_id", Value: handle}}).Decode(&claim); err != nil {
		return nil, missing(err, "user not found", "find handle")
	}
	return s.FindUserByID(ctx, store.ID(claim.User))
}

// UpdateUser implements store.Backend.
func (s *Store) UpdateUser(ctx context.Context, id store.ID, upd store.UserUpdate) (*store.User, error) {
	set := bson.D{}
	if upd.DisplayName != nil {
		set = append(set, bson.E{Key: "n", Value: *upd.DisplayName})
	}
	if upd.LastSeenAt != nil {
		set = append(set, bson.E{Key: "s", Value: *upd.LastSeenAt})
	}
	if len(set) == 0 {
		return s.FindUserByID(ctx, id)
	}
	var d userDoc
	err := s.users.FindOneAndUpdate(ctx, bson.D{{Key: "_id", Value: oid(id)}}, bson.D{{Key: "$set", Value: set}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
	if err != nil {
		return nil, missing(err, "user not found", "update user")
	}
	return s.decodeUser(ctx, &d)
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
