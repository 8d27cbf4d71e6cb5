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
)

// Reposts. A repost is a message (k 2) in the reposter's outbox naming
// the message it reposts (ro, with its author roa), and hh: true when it
// is not at its reposter's own home (store.Message.HomeHidden, absent
// when false); the original keeps
// the count of its live reposts (rp) beside lc and rc. The count changes
// in count's once-only step, exactly as a reply's parent's rc does (see
// replies.go): parentKey and parentInc name the original and rp, so every
// retry path of that step (the job's first chunk, a deletion finishing a
// half-done count) covers reposts too.
//
// One repost per (user, message): messages are sharded by (a, _id) (or
// _id), and a unique index of a sharded collection must start with its
// shard key, so the messages collection cannot refuse a second (a, ro).
// The guard is a document of its own in reposts, {_id: repost, u: user,
// o: original}, under the unique index (u, o), sharded on (u, o) (like a
// like). CreateMessage inserts the guard before the message: a second
// repost finds it (a duplicate key) and is CONFLICT. Without a transaction
// the two inserts can be cut apart, so a guard may outlive its repost; a
// guard is stale, and taken over, when its repost was deleted, or was
// never stored and its claim (the repost ID's time) is older than
// repostClaimTTL: a repost still being stored is younger than that. A
// deletion removes the guard before its count step (in count, which the
// retraction's first chunk repeats), so a repost may be made again at once;
// a deletion without a job, which nothing repeats, removes it after its
// count step, so that a crash leaves at worst the guard (taken over once
// expired), not a count wrong.
//
// FindReposts does not read guards, which may be stale: it reads the
// reposter's live reposts through the partial messages index (a, ro), on
// the reposter's shard.

// repostClaimTTL is how long a guard whose repost is not stored (yet)
// holds the pair: a repost's two inserts take far less; an older such
// guard was left by a crash.
var repostClaimTTL = lockTTL

// repostDoc is the guard of one user's repost of one message.
type repostDoc struct {
	ID       primitive.ObjectID `bson:"_id"` // the repost
	User     primitive.ObjectID `bson:"u"`
	Original primitive.ObjectID `bson:"o"`
}

// guardKey finds the guard of repost d by its shard key (u, o) and its _id,
// so it matches only that repost's guard.
func guardKey(d *repostDoc) bson.D {
	return bson.D{{Key: "u", Value: d.User}, {Key: "o", Value: d.Original}, {Key: "_id", Value: d.ID}}
}

// claimRepost checks that repost m may be stored and inserts its guard:
// NOT_FOUND if the original is missing or deleted, BAD_USER_INPUT if it
// is a repost, CONFLICT if m's author has another repost of it (live, or
// being stored). A guard of m itself (a retry) is m's.
func (s *Store) claimRepost(ctx context.Context, m *store.Message) error {
	var orig docs.Message
	err := s.messages.FindOne(ctx, append(msgKey(m.RepostOfID, m.RepostOfAuthorID), live),
		options.FindOne().SetProjection(bson.D{{Key: "k", Value: 1}, {Key: "ro", Value: 1}})).Decode(&orig)
	if err != nil {
		return missing(err, "reposted message not found", "create repost")
	}
	if orig.Store().Kind == store.KindRepost {
		return store.Errorf(store.EINVALID, "a repost cannot be reposted; repost its original")
	}
	g := &repostDoc{ID: oid(m.ID), User: oid(m.AuthorID), Original: oid(m.RepostOfID)}
	pair := bson.D{{Key: "u", Value: g.User}, {Key: "o", Value: g.Original}}
	// Each turn either inserts the guard, finds it taken (CONFLICT), or
	// removes a stale one; a few turns cover a race with other reposts
	// taking a stale guard over.
	for range 3 {
		_, err := s.reposts.InsertOne(ctx, g)
		if err == nil {
			return nil
		} else if !isDuplicate(err) {
			return wrap("create repost", err)
		}
		var held repostDoc
		if err := s.reposts.FindOne(ctx, pair).Decode(&held); errors.Is(err, mongo.ErrNoDocuments) {
			continue // released meanwhile
		} else if err != nil {
			return wrap("create repost", err)
		}
		if held.ID == g.ID {
			return nil
		}
		stale, err := s.staleGuard(ctx, &held)
		if err != nil {
			return err
		} else if !stale {
			return store.Errorf(store.ECONFLICT, "message already reposted")
		}
		if _, err := s.reposts.DeleteOne(ctx, guardKey(&held)); err != nil {
			return wrap("create repost", err)
		}
	}
	return store.Errorf(store.ECONFLICT, "message already reposted")
}

// staleGuard reports whether guard g no longer holds its pair: its repost
// was deleted, or was never stored and its claim expired.
func (s *Store) staleGuard(ctx context.Context, g *repostDoc) (bool, error) {
	var d struct {
		Deleted *time.Time `bson:"x"`
	}
	err := s.messages.FindOne(ctx, msgKey(store.ID(g.ID), store.ID(g.User)),
		options.FindOne().SetProjection(bson.D{{Key: "x", Value: 1}})).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return time.Since(store.ID(g.ID).Time()) > repostClaimTTL, nil
	} else if err != nil {
		return false, wrap("create repost", err)
	}
	return d.Deleted != nil, nil
}

// releaseRepost removes the guard of repost d (if d is a repost), so its
// author may repost the message again. Removing it again is harmless.
func (s *Store) releaseRepost(ctx context.Context, d *messageDoc) error {
	if d.RepostOf == nil {
		return nil
	}
	_, err := s.reposts.DeleteOne(ctx, guardKey(&repostDoc{ID: d.ID, User: d.Author, Original: *d.RepostOf}))
	return wrap("delete repost", err)
}

// FindReposts implements storage.Backend: one query of user's live
// reposts of the originals through the partial index (a, ro), which names
// the shard key's prefix, so it goes to user's shard. It is not covered
// (deleted reposts are told by x, outside the index), but it reads at most
// one small document per original, plus any deleted repost whose
// retraction is still running.
func (s *Store) FindReposts(ctx context.Context, user store.ID, originals []store.MessageKey) ([]store.ID, error) {
	out := make([]store.ID, len(originals))
	if len(originals) == 0 {
		return out, nil
	}
	ids := make(bson.A, len(originals))
	for i, k := range originals {
		ids[i] = oid(k.ID)
	}
	cur, err := s.messages.Find(ctx, bson.D{{Key: "a", Value: oid(user)}, {Key: "ro", Value: bson.D{{Key: "$in", Value: ids}}}, live},
		options.Find().SetProjection(bson.D{{Key: "ro", Value: 1}}))
	if err != nil {
		return nil, wrap("find reposts", err)
	}
	var ds []struct {
		ID       primitive.ObjectID `bson:"_id"`
		RepostOf primitive.ObjectID `bson:"ro"`
	}
	if err := cur.All(ctx, &ds); err != nil {
		return nil, wrap("find reposts", err)
	}
	byOriginal := make(map[store.ID]store.ID, len(ds))
	for _, d := range ds {
		byOriginal[store.ID(d.RepostOf)] = store.ID(d.ID)
	}
	for i, k := range originals {
		out[i] = byOriginal[k.ID]
	}
	return out, nil
}

// ListReposts implements storage.Backend through the partial index
// messages (ro, _id), as ListReplies reads a message's replies: one query,
// the reposts' documents themselves (the guards in reposts may be stale).
func (s *Store) ListReposts(ctx context.Context, original store.ID, r store.Range) ([]*store.Message, error) {
	cond, sort := idRange("_id", r, true)
	filter := append(bson.D{{Key: "ro", Value: oid(original)}, live}, cond...)
	opts := options.Find().SetSort(sort)
	if r.Limit > 0 {
		opts.SetLimit(int64(r.Limit))
	}
	return s.findMessages(ctx, filter, opts)
}
