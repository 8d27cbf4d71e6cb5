package mongostore

import (
	"context"

	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo/options"

	"herald/store"
)

// Reply threads. A reply names its parent (r, with its author ra) and its
// thread's root (rt, rta), stored as given; the parent keeps the count of
// its live replies (rc) beside the message, as lc for likes. The count
// changes in count's once-only step, with the author's message count (see
// count), so every retry of that step (the job's first chunk, a deletion
// finishing a half-done count) covers it too.

// parentKey finds the message d replies to by its shard key (a, _id), so
// its count's writes go to one shard; nil if d is not a reply.
func parentKey(d *messageDoc) bson.D {
	if d.ReplyTo == nil {
		return nil
	}
	var author store.ID
	if d.ReplyBy != nil {
		author = store.ID(*d.ReplyBy)
	}
	return msgKey(store.ID(*d.ReplyTo), author)
}

// replyInc is what a reply adds to its parent's counters (sign 1) or takes
// away (-1).
func replyInc(sign int64) bson.D { return bson.D{{Key: "rc", Value: sign}} }

// ListReplies implements storage.Backend, through the partial replies index
// (r, _id), oldest first. Messages are sharded by author and replies to
// one message come from any author, so on a sharded cluster it asks every
// shard, each for at most r.Limit.
func (s *Store) ListReplies(ctx context.Context, parent store.ID, r store.Range) ([]*store.Message, error) {
	cond, sort := idRange("_id", r, false)
	filter := append(bson.D{{Key: "r", Value: oid(parent)}, live}, cond...)
	opts := options.Find().SetSort(sort)
	if r.Limit > 0 {
		opts.SetLimit(int64(r.Limit))
	}
	return s.findMessages(ctx, filter, opts)
}
