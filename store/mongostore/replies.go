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

// parentKey finds the message whose count d changes (the one it replies
// to, or the one it reposts) by its shard key (a, _id), so the count's
// writes go to one shard; nil if d is neither a reply nor a repost.
func parentKey(d *messageDoc) bson.D {
	id, by := d.ReplyTo, d.ReplyBy
	if d.RepostOf != nil {
		id, by = d.RepostOf, d.RepostBy
	}
	if id == nil {
		return nil
	}
	var author store.ID
	if by != nil {
		author = store.ID(*by)
	}
	return msgKey(store.ID(*id), author)
}

// parentInc is what d adds to the counters of the message parentKey finds
// (sign 1) or takes away (-1): a reply its parent's rc, a repost its
// original's rp.
func parentInc(d *messageDoc, sign int64) bson.D {
	if d.RepostOf != nil {
		return bson.D{{Key: "rp", Value: sign}}
	}
	return bson.D{{Key: "rc", Value: sign}}
}

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
