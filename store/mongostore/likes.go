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

// Like states in likes documents. A like or unlike writes two documents
// (the like, the message's like count lc) and forgets a marker, so the like
// records how far it got: if a crash stops one half way, the next like or
// unlike of the pair finishes it, and the count changes once per operation
// (incOnce on the message). Operations on one pair run one at a time
// (lockLike). A like that is done has no st: most likes are, and the field
// would cost every one of them.
const (
	likeLiking   = 1 // created; the count may not be done
	likeUnliking = 2 // being removed; the count may be done already
)

// likeDoc is one user's like of one message (see collLikes in schema.go).
// Its time is its _id's, so it is not stored apart; its operations are
// named after its _id (likedOp, unlikedOp), since a like document is
// counted in once and out once, so they are not stored either.
type likeDoc struct {
	ID      primitive.ObjectID `bson:"_id"`
	User    primitive.ObjectID `bson:"u"`
	Message primitive.ObjectID `bson:"m"`
	Author  primitive.ObjectID `bson:"a"`
	State   int32              `bson:"st,omitempty"`
}

func (d *likeDoc) store() store.Like {
	id := store.ID(d.ID)
	return store.Like{ID: id, UserID: store.ID(d.User), MessageID: store.ID(d.Message), AuthorID: store.ID(d.Author), CreatedAt: id.Time()}
}

// key finds the liked message by its shard key.
func (d *likeDoc) key() bson.D { return msgKey(store.ID(d.Message), store.ID(d.Author)) }

// likePair finds the like by its shard key, (u, m), so that every write of it
// goes to one shard; id (if not zero) makes the write apply only to this
// like, not to a later one of the same pair.
func likePair(user, message primitive.ObjectID, id primitive.ObjectID) bson.D {
	f := bson.D{{Key: "u", Value: user}, {Key: "m", Value: message}}
	if !id.IsZero() {
		f = append(f, bson.E{Key: "_id", Value: id})
	}
	return f
}

// Markers of a like's change to its message's count.
func likedOp(d *likeDoc) string   { return "l" + d.ID.Hex() }
func unlikedOp(d *likeDoc) string { return "u" + d.ID.Hex() }

// lockLike serialises likes and unlikes of one pair (see lock). The prefix
// keeps the key apart from follow pairs'.
func (s *Store) lockLike(ctx context.Context, user, message store.ID) (func(), error) {
	return s.lock(ctx, "l"+user.String()+message.String())
}

// liveMessage returns the author of the live message of key, asking the
// one shard of its author when the key names it; NOT_FOUND if it does not
// exist or was deleted.
func (s *Store) liveMessage(ctx context.Context, key store.MessageKey, label string) (primitive.ObjectID, error) {
	var d struct {
		Author primitive.ObjectID `bson:"a"`
	}
	err := s.messages.FindOne(ctx, append(msgKey(key.ID, key.AuthorID), live), options.FindOne().SetProjection(bson.D{{Key: "a", Value: 1}})).Decode(&d)
	if err != nil {
		return primitive.NilObjectID, missing(err, "message not found", label)
	}
	return d.Author, nil
}

// Like implements storage.Backend: check the message, lock the pair,
// create the like (liking), count it on the message once, mark it done,
// forget the marker, unlock.
func (s *Store) Like(ctx context.Context, user store.ID, key store.MessageKey, at time.Time) (bool, error) {
	author, err := s.liveMessage(ctx, key, "like")
	if err != nil {
		return false, err
	}
	unlock, err := s.lockLike(ctx, user, key.ID)
	if err != nil {
		return false, err
	}
	defer unlock()
	return s.like(ctx, oid(user), oid(key.ID), author, at)
}

func (s *Store) like(ctx context.Context, user, message, author primitive.ObjectID, at time.Time) (bool, error) {
	ins := bson.D{{Key: "_id", Value: oid(store.NewID(at))}, {Key: "a", Value: author}, {Key: "st", Value: int32(likeLiking)}}
	var d likeDoc
	err := s.likes.FindOneAndUpdate(ctx, likePair(user, message, primitive.NilObjectID), bson.D{{Key: "$setOnInsert", Value: ins}},
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&d)
	if isDuplicate(err) {
		// Two upserts of the pair at once: only when a lock expired under a
		// slow holder. The other's like is there now.
		return s.like(ctx, user, message, author, at)
	} else if err != nil {
		return false, wrap("like", err)
	}
	switch d.State {
	case 0:
		return false, nil
	case likeUnliking:
		// An unlike stopped half way: finish it, then like anew.
		if err := s.finishUnlike(ctx, &d); err != nil {
			return false, err
		}
		return s.like(ctx, user, message, author, at)
	}
	// Ours, or one a crash left half done, which no caller saw succeed:
	// either way this call makes it.
	return true, s.finishLike(ctx, &d)
}

// finishLike does the rest of a like whose document exists. Every step is
// idempotent, so an operation that finds a like left half done by a crash
// finishes it; the caller holds the pair's lock.
func (s *Store) finishLike(ctx context.Context, d *likeDoc) error {
	op := likedOp(d)
	if err := s.incOnce(ctx, s.messages, d.key(), op, bson.D{{Key: "lc", Value: int64(1)}}); err != nil {
		return err
	}
	_, err := s.likes.UpdateOne(ctx, append(likePair(d.User, d.Message, d.ID), bson.E{Key: "st", Value: int32(likeLiking)}),
		bson.D{{Key: "$unset", Value: bson.D{{Key: "st", Value: ""}}}})
	if err != nil {
		return wrap("like", err)
	}
	d.State = 0
	// The like now says the count is done: its marker can go.
	return s.forgetOp(ctx, s.messages, d.key(), op)
}

// Unlike implements storage.Backend: check the message, lock the pair,
// mark the like unliking, take it from the count once, delete it, forget
// the markers, unlock.
func (s *Store) Unlike(ctx context.Context, user store.ID, key store.MessageKey) (bool, error) {
	if _, err := s.liveMessage(ctx, key, "unlike"); err != nil {
		return false, err
	}
	unlock, err := s.lockLike(ctx, user, key.ID)
	if err != nil {
		return false, err
	}
	defer unlock()
	pair := likePair(oid(user), oid(key.ID), primitive.NilObjectID)
	for {
		// The common case, a like that is done, is marked in one step.
		var d likeDoc
		err := s.likes.FindOneAndUpdate(ctx, append(pair, bson.E{Key: "st", Value: bson.D{{Key: "$exists", Value: false}}}),
			bson.D{{Key: "$set", Value: bson.D{{Key: "st", Value: int32(likeUnliking)}}}},
			options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&d)
		if err == nil {
			return true, s.finishUnlike(ctx, &d)
		} else if !errors.Is(err, mongo.ErrNoDocuments) {
			return false, wrap("unlike", err)
		}
		// No like, or one left half done by a crash.
		err = s.likes.FindOne(ctx, pair).Decode(&d)
		if errors.Is(err, mongo.ErrNoDocuments) {
			return false, nil
		} else if err != nil {
			return false, wrap("unlike", err)
		}
		if d.State == likeUnliking {
			return true, s.finishUnlike(ctx, &d)
		}
		// Liking: finish it so its count is right to undo, then unlike.
		if err := s.finishLike(ctx, &d); err != nil {
			return false, err
		}
	}
}

// finishUnlike does the rest of an unlike whose like is marked unliking.
// Every step is idempotent; the like goes after the count, so a crash
// between them leaves it unliking for the next operation to finish.
func (s *Store) finishUnlike(ctx context.Context, d *likeDoc) error {
	op := unlikedOp(d)
	if err := s.incOnce(ctx, s.messages, d.key(), op, bson.D{{Key: "lc", Value: int64(-1)}}); err != nil {
		return err
	}
	if _, err := s.likes.DeleteOne(ctx, likePair(d.User, d.Message, d.ID)); err != nil {
		return wrap("unlike", err)
	}
	// The like's marker goes too, in case a crash left it: with the like
	// gone, no operation would forget it. A crash before this leaves stale
	// markers, which no later operation uses: harmless.
	return s.forgetOp(ctx, s.messages, d.key(), op, likedOp(d))
}

// Readers see a like from its first write (the like document) to its last
// (the document's deletion), whatever its state, as follows' readers see
// an edge: a like left half done by a crash reads as liked, which is what
// the next like or unlike of the pair settles from. Meanwhile the message's
// LikeCount may differ from the lists by that one like.

// FindLiked implements storage.Backend: one query on the unique index
// (u, m), covered, on the shard of user. It needs only the message IDs.
func (s *Store) FindLiked(ctx context.Context, user store.ID, keys []store.MessageKey) ([]bool, error) {
	ids := make([]store.ID, len(keys))
	for i, k := range keys {
		ids[i] = k.ID
	}
	return s.findPresent(ctx, s.likes, user, "m", ids)
}

// ListLikers implements storage.Backend, through the index (m, _id). Likes
// are sharded by user, so it asks every shard, each for at most r.Limit.
func (s *Store) ListLikers(ctx context.Context, message store.ID, r store.Range) ([]store.Like, error) {
	return s.listLikes(ctx, bson.D{{Key: "m", Value: oid(message)}}, r)
}

// ListLikes implements storage.Backend, through the index (u, _id), on the
// shard of user.
func (s *Store) ListLikes(ctx context.Context, user store.ID, r store.Range) ([]store.Like, error) {
	return s.listLikes(ctx, bson.D{{Key: "u", Value: oid(user)}}, r)
}

// listLikes reads the likes filter selects within r, newest first by _id.
func (s *Store) listLikes(ctx context.Context, filter bson.D, r store.Range) ([]store.Like, error) {
	cond, sort := idRange("_id", r, true)
	opts := options.Find().SetSort(sort).SetProjection(bson.D{{Key: "st", Value: 0}})
	if r.Limit > 0 {
		opts.SetLimit(int64(r.Limit))
	}
	cur, err := s.likes.Find(ctx, append(filter, cond...), opts)
	if err != nil {
		return nil, wrap("list likes", err)
	}
	var ds []likeDoc
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("list likes", err)
	}
	out := make([]store.Like, len(ds))
	for i := range ds {
		out[i] = ds[i].store()
	}
	return out, nil
}
