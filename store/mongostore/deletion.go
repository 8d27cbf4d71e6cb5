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
)

// DeleteUser implements storage.Backend: one update of the user document,
// which holds the tombstone, the token version, the search terms and the
// attributes, so it is atomic without a transaction. Raising av makes a
// racing SetAttributes read again, and find the user deleted.
func (s *Store) DeleteUser(ctx context.Context, id store.ID, at time.Time) error {
	res, err := s.users.UpdateOne(ctx, bson.D{{Key: "_id", Value: oid(id)}, notDeleted}, bson.D{
		{Key: "$set", Value: bson.D{{Key: "dl", Value: at.UTC()}}},
		{Key: "$inc", Value: bson.D{{Key: "tv", Value: int64(1)}, {Key: "av", Value: int64(1)}}},
		{Key: "$unset", Value: bson.D{{Key: "q", Value: ""}, {Key: "at", Value: ""}, {Key: "rt", Value: ""}, {Key: "kt", Value: ""}}},
	})
	if err != nil {
		return wrap("delete user", err)
	}
	if res.MatchedCount == 1 {
		return nil
	}
	// Deleted already, or unknown.
	_, err = s.findUserDoc(ctx, id)
	return err
}

// ListDeletedUsers implements storage.Backend, through the partial index
// of deleted users.
func (s *Store) ListDeletedUsers(ctx context.Context, after store.ID, limit int) ([]*store.User, error) {
	filter := bson.D{{Key: "dl", Value: bson.D{{Key: "$exists", Value: true}}}}
	if !after.IsZero() {
		filter = append(filter, bson.E{Key: "_id", Value: bson.D{{Key: "$gt", Value: oid(after)}}})
	}
	ds, err := s.findUserDocs(ctx, filter, options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(limit)).SetHint("deleted"))
	if err != nil {
		return nil, err
	}
	out := make([]*store.User, len(ds))
	for i, d := range ds {
		out[i] = d.Store() // no attributes: deletion removed them
	}
	return out, nil
}

// PurgeUser implements storage.Backend: the handle claim first, then the
// user document, so that a crash between them leaves a deleted user that
// ListDeletedUsers still finds, never a claim of a user gone.
func (s *Store) PurgeUser(ctx context.Context, id store.ID) error {
	var d struct {
		Handle  string     `bson:"h"`
		Deleted *time.Time `bson:"dl"`
	}
	err := s.users.FindOne(ctx, bson.D{{Key: "_id", Value: oid(id)}}, options.FindOne().SetProjection(bson.D{{Key: "h", Value: 1}, {Key: "dl", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	} else if err != nil {
		return wrap("purge user", err)
	}
	if d.Deleted == nil {
		return store.Errorf(store.ECONFLICT, "the account is not deleted")
	}
	// Only this user's claim: once freed, the handle may be someone else's.
	if _, err := s.handles.DeleteOne(ctx, bson.D{{Key: "_id", Value: d.Handle}, {Key: "u", Value: primitive.ObjectID(id)}}); err != nil {
		return wrap("free handle", err)
	}
	_, err = s.users.DeleteOne(ctx, bson.D{{Key: "_id", Value: oid(id)}, {Key: "dl", Value: bson.D{{Key: "$exists", Value: true}}}})
	return wrap("purge user", err)
}
