package mongostore

import (
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// Collections, their indexes and shard keys. Each is chosen from the query
// that must stay on one shard (seed 003: no scatter-gather on a hot path);
// the reasons are written beside them. Field names are short (seed 001);
// the user and message documents are store/internal/docs, the rest below.
const (
	// users: docs.User plus the inbox counters and idempotency markers:
	//   is inbox sequence (entries ever delivered), it inbox total,
	//   iu inbox unread, ir read mark (the is at the last mark-read),
	//   ld last message delivered, lr last message retracted,
	//   po recent counter operations (follow edges, messages).
	// Sharded on _id: every read and write names the user.
	collUsers = "users"
	// handles: {_id: handle, u: user}. Unique handles need their own
	// collection: a sharded users collection cannot have a unique index on
	// anything but its shard key. Sharded on _id (the handle).
	collHandles = "handles"
	// followees: {u: user, o: followed user, t: time, op, st} — "who u
	// follows". followers: {u: user, o: follower, t} — "who follows u".
	// One document per edge and direction (seed 002, solution 4), both
	// sharded on u so either list is one shard, and listed through the
	// covered unique index (u, o).
	collFollowees = "followees"
	collFollowers = "followers"
	// messages: docs.Message plus j (the message's pending fan-out job:
	// k kind, cur cursor) and x (deleted at). The job lives in the message
	// so that a post and its job are one atomic insert. Sharded on (a, _id):
	// an author's outbox is one shard range and _id orders by time; inbox
	// entries carry the author, so loading a page's messages names the
	// shard key.
	collMessages = "messages"
	// buckets: {o: owner, s: bucket number, e: [entries]} — the inbox
	// (seed 000): up to 50 entries per document, found by (o, s), which is
	// unique and the shard key, so the newest 50 entries are at most two
	// documents on one shard.
	collBuckets = "buckets"
	// deliveries: {m: message, k: last owner of the chunk, r: [[owner, seq]]}
	// — where a message went, one document per delivered chunk, for
	// retraction and edit notices. Sharded on (m, k).
	collDeliveries = "deliveries"
	// names: the name store, {_id: least value, l: [names]} (seed 001).
	// Small and read through a cache: not sharded.
	collNames = "names"
	// events: {e: [events], x: expires} — inbox events crossing between
	// Herald processes through a change stream. TTL-expired. Not sharded.
	collEvents = "events"
	// leases: {_id: name, h: holder, x: expires, cur, ck} — the fan-out
	// lease, and the job its holder last began.
	collLeases = "leases"
	// locks: {_id: key, k: token, x: expires} — short locks that make the
	// steps of one follow or unfollow of a pair run one operation at a time.
	collLocks = "locks"
)

// bucketSize is the number of entries per bucket document.
const bucketSize = 50

// index describes one index of one collection.
type index struct {
	coll  string
	model mongo.IndexModel
	why   string
}

func idx(coll string, keys bson.D, opts *options.IndexOptions, why string) index {
	return index{coll: coll, model: mongo.IndexModel{Keys: keys, Options: opts}, why: why}
}

// indexes are every index Herald needs, created idempotently at start and
// by `herald mongo setup`.
var indexes = []index{
	idx(collUsers, bson.D{{Key: "at.k", Value: 1}, {Key: "at.v", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("attributes"),
		"usersByAttribute: equality on (token, value), paged by _id"),
	idx(collHandles, bson.D{{Key: "u", Value: 1}}, options.Index().SetName("user"),
		"find a user's handle claim"),
	idx(collFollowees, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, options.Index().SetName("edge").SetUnique(true),
		"one edge per pair; lists who u follows in o order, covered"),
	idx(collFollowers, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, options.Index().SetName("edge").SetUnique(true),
		"one edge per pair; lists u's followers in o order, covered, for fan-out"),
	idx(collMessages, bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("outbox"),
		"an author's messages newest first (the outbox, seed 002: (uid, created))"),
	idx(collMessages, bson.D{{Key: "j.k", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("jobs").SetPartialFilterExpression(bson.D{{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"pending fan-out jobs, oldest first; partial, so only messages with a job are indexed"),
	idx(collBuckets, bson.D{{Key: "o", Value: 1}, {Key: "s", Value: 1}}, options.Index().SetName("bucket").SetUnique(true),
		"one document per (owner, bucket); newest buckets of an inbox"),
	idx(collDeliveries, bson.D{{Key: "m", Value: 1}, {Key: "k", Value: 1}}, options.Index().SetName("chunk").SetUnique(true),
		"one record per delivered chunk, in order, so a repeated chunk records once"),
	idx(collLocks, bson.D{{Key: "x", Value: 1}}, options.Index().SetName("expiry").SetExpireAfterSeconds(60),
		"a lock left by a crashed process is removed (it is also taken over once expired)"),
	idx(collEvents, bson.D{{Key: "x", Value: 1}}, options.Index().SetName("expiry").SetExpireAfterSeconds(0),
		"events expire once every process has had time to read them"),
}

// shardKeys are the shard keys `herald mongo setup` applies on a sharded cluster.
var shardKeys = []struct {
	coll string
	key  bson.D
	why  string
}{
	{collUsers, bson.D{{Key: "_id", Value: "hashed"}}, "every user read and write names the user; hashed spreads new users evenly"},
	{collHandles, bson.D{{Key: "_id", Value: 1}}, "sign-up and log-in look a handle up by value"},
	{collFollowees, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, "who u follows: one shard range per user"},
	{collFollowers, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, "u's followers, streamed in o order by fan-out: one shard range per user"},
	{collMessages, bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: 1}}, "outbox pages and inbox message loads name the author"},
	{collBuckets, bson.D{{Key: "o", Value: 1}, {Key: "s", Value: 1}}, "an inbox's buckets stay together; reads name the owner (seed 000)"},
	{collDeliveries, bson.D{{Key: "m", Value: 1}, {Key: "k", Value: 1}}, "a message's delivery records are read in order"},
}

// FieldNames maps every short field name Herald stores to the descriptive
// name it stands for: the one place the mapping is written down, used to
// document it and to measure what short names save (LongNames).
var FieldNames = map[string]string{
	// users
	"h": "handle", "n": "displayName", "p": "passwordHash", "c": "createdAt", "s": "lastSeenAt",
	"fr": "followerCount", "fg": "followingCount", "mc": "messageCount", "at": "attributes",
	"k": "key", "v": "value", "av": "attributesVersion",
	"is": "inboxSequence", "it": "inboxTotal", "iu": "inboxUnread", "ir": "inboxReadMark",
	"ld": "lastDelivered", "lr": "lastRetracted", "po": "pendingOperations",
	// handles, follow edges
	"u": "user", "o": "other", "t": "time", "op": "operation", "st": "state", "uop": "unfollowOperation",
	// messages (t is the text there), jobs, deletion and counting marks
	"a": "author", "r": "replyTo", "ra": "replyToAuthor", "e": "editedAt", "j": "job", "cur": "cursor",
	"x": "deletedAt", "mn": "counted", "xn": "uncounted",
	// buckets and entries (o owner, s bucket, e entries; m message, d delivered, q sequence)
	"m": "message", "d": "deliveredAt", "q": "sequence",
	// names: l the names
	"l": "names",
}

// LongNames returns doc with every field renamed to its long name, to
// measure what the short names save.
func LongNames(doc bson.Raw) bson.Raw {
	out, err := bson.Marshal(longNames(doc))
	if err != nil {
		panic(err)
	}
	return out
}

func longNames(doc bson.Raw) bson.D {
	elems, _ := doc.Elements()
	out := make(bson.D, 0, len(elems))
	for _, e := range elems {
		k := e.Key()
		if long, ok := FieldNames[k]; ok {
			k = long
		}
		var v any = e.Value()
		switch e.Value().Type {
		case bson.TypeEmbeddedDocument:
			v = longNames(e.Value().Document())
		case bson.TypeArray:
			vals, _ := e.Value().Array().Values()
			arr := make(bson.A, len(vals))
			for i, x := range vals {
				if x.Type == bson.TypeEmbeddedDocument {
					arr[i] = longNames(x.Document())
				} else {
					arr[i] = x
				}
			}
			v = arr
		}
		out = append(out, bson.E{Key: k, Value: v})
	}
	return out
}
