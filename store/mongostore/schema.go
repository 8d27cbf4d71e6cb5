package mongostore

import (
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// Collections, their indexes and shard keys. Each is chosen from the query
// that must stay on one shard (Turms: no scatter-gather on a hot path;
// docs/design.md#shard-keys); the reasons are written beside them. Field
// names are short (Field names and name store: docs/design.md#field-names);
// the user and message documents are store/internal/docs, the rest below.
const (
	// users: docs.User plus what this backend keeps on it:
	//   q        search terms (store.SearchTerms), multikey-indexed for
	//            searchUsers (docs/design.md#search);
	//   et, eu   LayoutEntries inbox total and unread;
	//   bt, bu   LayoutBuckets inbox total and unread;
	//   bk, bn, bm  the newest bucket's key, the entries placed in it, and
	//            the newest message ever placed in the inbox (see buckets);
	//   ir       read mark (a message ID), shared by every layout;
	//   iv       inbox version, incremented by every count change, so
	//            MarkInboxRead's recount applies only if nothing moved;
	//   rb       the rebuilding flag, which is the stored JobRebuild:
	//            {i instance, l layout, c created};
	//   lj, lq, la, ll  the last job that changed the inbox's counts: its
	//            marker, its entries ({m, a, c, b bucket}), whether it adds
	//            them (else removes), and its layout. The marker makes the
	//            count step apply once; the entries are the step's plan, so
	//            a repeat after a crash writes exactly what was counted,
	//            and MarkInboxRead counts them as they will be.
	//   po       recent counter operations (follow edges, messages).
	// Sharded on _id: every read and write names the user. Partial indexes
	// find the few users with a rebuild pending or with pulled messages.
	collUsers = "users"
	// handles: {_id: handle, u: user}. Unique handles need their own
	// collection: a sharded users collection cannot have a unique index on
	// anything but its shard key. Sharded on _id (the handle).
	collHandles = "handles"
	// followees: {u: user, o: followed user, t: time, op, st} — "who u
	// follows". followers: {u: user, o: follower, t} — "who follows u".
	// One document per edge and direction (Inbox caches' solution 4), both
	// sharded on u so either list is one shard, and listed through the
	// covered unique index (u, o). See docs/design.md#follow-graph.
	collFollowees = "followees"
	collFollowers = "followers"
	// messages: docs.Message plus j (the message's pending fan-out job:
	// k kind, l layout, cur cursor, p the plan of the delivery chunk at
	// cur: {k record key, o owners}), x (deleted at), mn and xn (counted in
	// and out of the author's message count, and a reply into and out of
	// its parent's rc, a repost its original's rp) and po (the like-,
	// reply- and repost-count operations not yet forgotten, as on users). docs.Message's lc, the like count, and
	// rc, the reply count, are kept here, beside the message that every
	// read loads anyway; each like and reply changes them once (see likes
	// and replies). A reply's tr and tra (its thread's root) are stored as
	// given. The job lives in the
	// message so that a post and its job are one atomic insert. Sharded on
	// (a, _id): an author's outbox is one shard range and _id orders by
	// time; inbox entries carry the author, so loading a page's messages
	// names the shard key, and fan-out on read ({a: {$in}, _id < cursor})
	// goes only to the shards of the followees.
	collMessages = "messages"
	// likes: {_id: like, u: user, m: message, a: its author, st: state} —
	// one document per like; its _id is made at the like's time, so it
	// orders both lists and holds the time. st is there only while a like
	// or unlike is half done (1 liking, 2 unliking): the message's count
	// (lc) changes in a second write, once per operation, with a marker on
	// the message named after the like's _id (see likes.go). The unique
	// index (u, m) is the pair's upsert and FindLiked's covered read; (m,
	// _id) lists a message's likers, (u, _id) a user's likes, newest first.
	// Sharded on (u, m): Like, Unlike and FindLiked (a timeline page's
	// hearts) name the user, so each goes to one shard, and a popular
	// message's likes spread over the shards rather than filling one hot
	// chunk; ListLikers asks every shard, each from its (m, _id) index.
	collLikes = "likes"
	// reposts: {_id: repost, u: user, o: original} — the guard of one
	// user's repost of one message (the repost itself is a message, k 2,
	// with ro and roa naming the original, whose rp counts it; see
	// reposts.go). The unique index (u, o) allows one repost per pair:
	// messages cannot hold that index, since a sharded collection's unique
	// index must start with its shard key. Sharded on (u, o), as likes.
	collReposts = "reposts"
	// blocks: {_id: relation, u: user, o: target, rk: kind} — one document
	// per block or mute (rk 1 block, 2 mute); its _id is made at its time,
	// so it orders a user's list and holds the time. The unique index
	// (u, o, rk) is one edge per (user, target, kind): Block is an insert
	// that a duplicate key makes a no-op. It also answers FindBlocked
	// ({u, rk, o: $in}), ListFiltered ({u} in o order) covered, and
	// FindBlockers ({u: $in owners, o: author}), one seek per owner;
	// (u, rk, _id) lists a user's relations of a kind, newest first;
	// (o, rk, u) lists who blocks a reader (ListBlockers), covered.
	// Sharded on (u, o), as likes: every write and every read but
	// ListBlockers names the user, so it goes to one shard, and
	// FindBlockers names the owners, so it goes only to the shards of the
	// chunk's owners (a fan-out chunk is a run of followers in ID order:
	// few shard ranges), with no second copy of each edge keyed by target.
	// ListBlockers asks every shard, once per home page read by fan-out
	// on read, bounded by its limit.
	collBlocks = "blocks"
	// followreqs: {_id: request, u: user, o: the private account} — one
	// document per pending request to follow a private account; its _id
	// is made at its time, so it orders the account's list, oldest first,
	// and holds the time. The unique index (o, u) is one request per pair:
	// RequestFollow is an insert that a duplicate key makes a no-op, and
	// it answers FindFollowRequests ({o: $in targets, u}) covered, one seek
	// per target; (o, _id) lists an account's requests. Sharded on (o, u):
	// the list (followRequests) and the answers (approve, reject) name the
	// account, so they go to one shard; a page's viewerRequestedFollow
	// names the page's users, so it asks only their shards.
	collFollowRequests = "followreqs"
	// Conversations (docs/design.md#conversations; Turms: collections that
	// follow the key queries, ids that carry the kind, optional indexes).
	//
	// convs: docs.Conv — {_id: conversation ID (binData: the two users'
	// IDs for a direct conversation, 24 bytes; the group's ID, 12), n
	// name, cr creator, m members, ad admins, sq last seq, t created, rd
	// read receipts {member hex: seq}}. Members are bounded by the group
	// size limit, so they live here: a send reads membership and the
	// fan-out list in one read. Sharded on hashed _id: every read and
	// write names the conversation.
	collConvs = "convs"
	// dms: docs.ConvMsg — {_id: message (its time), c conversation, s
	// seq, a author, x text, e edited, d deleted, p pending}. The unique
	// index (c, s) is the history (a page is one range, newest first, not
	// two ranges of sent and received) and the claim of a seq (a send's
	// insert; a duplicate takes the next). Sharded on (c, s): a
	// conversation stays together, and every read and write names c.
	collDMs = "dms"
	// userconvs: {u user, c conversation, lt the latest message's ID (or
	// the time the user joined), ls the last message's seq, lm a copy of
	// it} — each
	// user's conversation list: (u, lt) pages it most recently active
	// first; the unique (u, c) makes a send's upsert one entry per pair.
	// Sharded on (u, c): the list and its updates name the user.
	collUserConvs = "userconvs"
	// dmreads: docs.ReadState — {_id: user, v: {conversation hex: {l last
	// seq told, r read seq}}}: every unread count of a user in one
	// document, raised by $max only, so a repeated write counts nothing
	// twice. Sharded on hashed _id.
	collDMReads = "dmreads"
	// entries: {o: owner, m: message, a: author, c: created, d: delivered}
	// — LayoutEntries (strategy write, Social Inboxes' fan-out on write): one
	// document per inbox entry. A page is one range read of the unique
	// index (o, m), newest first; sharded on (o, m), so an inbox is one
	// shard range. (o, a) finds an unfollowed author's entries.
	collEntries = "entries"
	// buckets: {o: owner, k: key, e: [{m, a, c, d}]} — LayoutBuckets
	// (strategies bucket and hybrid, from Social Inboxes; see
	// docs/design.md#buckets): about 50 entries a document.
	//
	// Inboxes are ordered by message ID, and entries arrive out of order
	// (follow backfills and rebuilds bring older messages; clocks of
	// processes differ), so a bucket is not named by a sequence number but
	// keyed by the ID of its first (lowest) message: the bucket k covers
	// the IDs [k, next bucket's k). A read below cursor C is then
	// {o, k < C} sorted by k descending: the first bucket covers C, the
	// rest follow in order, and each bucket's entries sorted by m are the
	// inbox's order, so pages are exact and a deep page starts at its place
	// through the index (o, k), without a scan from the newest.
	//
	// Placement keeps that invariant without moving entries (a split
	// would rewrite two documents, which is not atomic without
	// transactions). The user document keeps the newest bucket's key (bk),
	// how many entries were placed in it (bn) and the newest message placed
	// so far (bm). A message newer than bm goes into the newest bucket
	// while it has had fewer than 50, else starts a new bucket keyed by
	// itself; one at or below bm but not below bk joins the newest bucket
	// (which may pass 50); an older one joins its covering bucket (the
	// largest k at or below it), which may pass 50 too; one older than every
	// bucket starts a bucket of its own. A new bucket is only keyed above
	// everything in the inbox, or below every bucket, so no bucket ever
	// holds an entry at or above the next bucket's key. The placement is
	// decided in the same atomic update of the user document that counts
	// the entry, so a repeated step places it in the same bucket; the push
	// is an upsert of (o, k) that skips an entry already there.
	//
	// In the common case (in order, few removals) every bucket but the
	// newest holds 50 entries, so the newest 50 entries are in at most 2
	// documents and the newest 100 in at most 3. Delivery references carry
	// the bucket key, so a retraction pulls from exactly one document.
	// Unique index and shard key (o, k): an inbox is one shard range, read
	// newest first.
	collBuckets = "buckets"
	// caches: {_id: owner, e: [{m, a, c, d}] newest first, f: complete,
	// x: expires, cv: version} — LayoutCache (Inbox caches' cached inbox):
	// one capped document per user who has one, created lazily on read;
	// deliveries push only into live ones ($push $each $sort $slice), and
	// idle ones expire through the TTL index on x. Sharded on _id: every
	// read and write names the owner.
	collCaches = "caches"
	// jobs: docs.Job — the follow and unfollow jobs (JobDeliver and
	// JobRetract live in their message, JobRebuild on its user). Few and
	// short-lived, read whole by PendingJobs: not sharded.
	collJobs = "jobs"
	// deliveries: {m: message, k: record key, r: [{o owner, b bucket}]} —
	// where a message went, one document per delivered chunk (k its last
	// owner), per insertion (k the follow job's or the rebuild's ID) or per
	// bulk-loaded batch of inboxes holding it (k its last owner), for
	// retraction and edit notices. A chunk's record is an upsert adding to
	// the set r, so a repeated chunk completes it. Sharded on (m, k).
	collDeliveries = "deliveries"
	// names: the name store, {_id: least value, l: [names]} (Field names
	// and name store: docs/design.md#name-store).
	// Small and read through a cache: not sharded.
	collNames = "names"
	// events: {e: [events], q: sequence, x: expires} — inbox events
	// crossing between Herald processes through a change stream, or read
	// in q order where there is none. TTL-expired. Not sharded.
	collEvents = "events"
	// eventseq: {_id: "events", n: last sequence number} — the counter
	// that numbers events documents (q). One document: not sharded.
	collEventSeq = "eventseq"
	// leases: {_id: name, h: holder, x: expires, cur, ck} — the fan-out
	// lease of each lane (fanout, fanout/<lane>), and the job its holder
	// last began; fanout/config {n}: the number of lanes; proc/<holder>
	// {x}: a live process (owner lanes' fair share).
	collLeases = "leases"
	// locks: {_id: key, k: token, x: expires} — short locks that make the
	// steps of one follow or unfollow (or like or unlike) of a pair run one
	// operation at a time.
	collLocks = "locks"
	// progress: {_id: name, v: value} — the progress records of bulk loads
	// (storage.BulkLoader), written after each batch. Few: not sharded.
	collProgress = "progress"
)

// bucketSize is the number of entries a bucket is filled to before a newer
// entry starts the next one.
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
	idx(collUsers, bson.D{{Key: "q", Value: 1}}, options.Index().SetName("search"),
		"searchUsers: a prefix range of the users' search terms (multikey), read up to a bound"),
	idx(collUsers, bson.D{{Key: "rb.i", Value: 1}}, options.Index().SetName("rebuilding").SetPartialFilterExpression(bson.D{{Key: "rb", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"pending rebuilds (the rebuilding flag is the job); partial, so only users being rebuilt are indexed"),
	idx(collUsers, bson.D{{Key: "pc", Value: 1}}, options.Index().SetName("pulled").SetPartialFilterExpression(bson.D{{Key: "pc", Value: bson.D{{Key: "$gt", Value: 0}}}}),
		"authors with pulled (celebrity) messages, for hybrid reads; partial, so only those authors are indexed"),
	idx(collHandles, bson.D{{Key: "u", Value: 1}}, options.Index().SetName("user"),
		"find a user's handle claim"),
	idx(collFollowees, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, options.Index().SetName("edge").SetUnique(true),
		"one edge per pair; lists who u follows in o order, covered"),
	idx(collFollowers, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, options.Index().SetName("edge").SetUnique(true),
		"one edge per pair; lists u's followers in o order, covered, for fan-out"),
	idx(collMessages, bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("outbox"),
		"an author's messages newest first (the outbox; Inbox caches: (uid, created)); fan-out on read merges several with $in"),
	idx(collMessages, bson.D{{Key: "j.k", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("jobs").SetPartialFilterExpression(bson.D{{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"pending fan-out jobs, oldest first; partial, so only messages with a job are indexed"),
	idx(collMessages, bson.D{{Key: "j.pl", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("joblanes").SetPartialFilterExpression(bson.D{{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"a fan-out lane's share of pending message jobs (PendingLaneJobs, owner lanes); multikey, partial, so only messages with a job are indexed"),
	idx(collMessages, bson.D{{Key: "j.k", Value: 1}, {Key: "x", Value: 1}}, options.Index().SetName("retractions").SetPartialFilterExpression(bson.D{{Key: "j", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"the oldest pending retraction by its deletion time, for the fan-out backlog (JobBacklog); partial, so only messages with a job are indexed"),
	idx(collMessages, bson.D{{Key: "r", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("replies").SetPartialFilterExpression(bson.D{{Key: "r", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"a message's replies oldest first (ListReplies); partial, so only replies are indexed; messages are sharded by author, so it asks every shard"),
	idx(collMessages, bson.D{{Key: "a", Value: 1}, {Key: "ro", Value: 1}}, options.Index().SetName("reposts").SetPartialFilterExpression(bson.D{{Key: "ro", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"a user's reposts of a page's messages (FindReposts: viewerHasReposted, unrepost); partial, so only reposts are indexed; names the shard key's prefix"),
	idx(collMessages, bson.D{{Key: "ro", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("repostsOf").SetPartialFilterExpression(bson.D{{Key: "ro", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"a message's reposts newest first (ListReposts: deleting a message deletes them); partial, so only reposts are indexed; messages are sharded by author, so it asks every shard"),
	idx(collReposts, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, options.Index().SetName("repost").SetUnique(true),
		"one repost per (user, message): a second is refused by a duplicate key"),
	idx(collBlocks, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}, {Key: "rk", Value: 1}}, options.Index().SetName("relation").SetUnique(true),
		"one block or mute per (user, target, kind); whether u blocks a page's authors, all u filters, and which owners block an author, covered"),
	idx(collBlocks, bson.D{{Key: "u", Value: 1}, {Key: "rk", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("relations"),
		"a user's blocks or mutes newest first (ListBlocked)"),
	idx(collBlocks, bson.D{{Key: "o", Value: 1}, {Key: "rk", Value: 1}, {Key: "u", Value: 1}}, options.Index().SetName("blockers"),
		"who blocks a reader, covered (ListBlockers): their messages leave the reader's home timeline; names no shard key, so it asks every shard"),
	idx(collFollowRequests, bson.D{{Key: "o", Value: 1}, {Key: "u", Value: 1}}, options.Index().SetName("request").SetUnique(true),
		"one request per (private account, user); whether a user asked to follow a page's users, covered"),
	idx(collFollowRequests, bson.D{{Key: "o", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("requests"),
		"a private account's follow requests oldest first (ListFollowRequests)"),
	idx(collDMs, bson.D{{Key: "c", Value: 1}, {Key: "s", Value: 1}}, options.Index().SetName("history").SetUnique(true),
		"a conversation's messages by seq: a history page is one range, and the unique seq is a send's claim"),
	idx(collDMs, bson.D{{Key: "p", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("pending").SetPartialFilterExpression(bson.D{{Key: "p", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"sends left unfinished, for recovery; partial, so only pending messages are indexed"),
	idx(collUserConvs, bson.D{{Key: "u", Value: 1}, {Key: "c", Value: 1}}, options.Index().SetName("entry").SetUnique(true),
		"one list entry per (user, conversation): a send's upsert, and an edit's update of the members' copies"),
	idx(collUserConvs, bson.D{{Key: "u", Value: 1}, {Key: "lt", Value: -1}}, options.Index().SetName("list"),
		"a user's conversations, most recently active first: a page is one range"),
	idx(collLikes, bson.D{{Key: "u", Value: 1}, {Key: "m", Value: 1}}, options.Index().SetName("like").SetUnique(true),
		"one like per (user, message); whether u likes a page's messages, covered"),
	idx(collLikes, bson.D{{Key: "m", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("likers"),
		"a message's likes newest first (ListLikers)"),
	idx(collLikes, bson.D{{Key: "u", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("liked"),
		"a user's likes newest first (ListLikes)"),
	idx(collNotifGroups, bson.D{{Key: "o", Value: 1}, {Key: "k", Value: 1}}, options.Index().SetName("group").SetUnique(true),
		"one group per (owner, group key): a notice finds its group"),
	idx(collNotifGroups, bson.D{{Key: "o", Value: 1}, {Key: "t", Value: -1}}, options.Index().SetName("feed"),
		"the notifications feed, newest activity first: a page is one range; unread is counted above the mark"),
	idx(collNotifActors, bson.D{{Key: "g", Value: 1}, {Key: "u", Value: 1}}, options.Index().SetName("actor").SetUnique(true),
		"one actor per (group, user): a repeated activity counts once"),
	idx(collNotifActors, bson.D{{Key: "g", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("actors"),
		"a group's actors newest first (ListNotificationActors)"),
	idx(collNotifActors, bson.D{{Key: "o", Value: 1}, {Key: "u", Value: 1}}, options.Index().SetName("byactor"),
		"one actor's groups in one feed: what a block or a mute removes (RemoveNotificationActor)"),
	idx(collEntries, bson.D{{Key: "o", Value: 1}, {Key: "m", Value: 1}}, options.Index().SetName("entry").SetUnique(true),
		"one entry per (owner, message); an inbox page is one range of it, read backwards"),
	idx(collEntries, bson.D{{Key: "o", Value: 1}, {Key: "a", Value: 1}}, options.Index().SetName("author"),
		"an unfollowed author's entries in one inbox"),
	idx(collBuckets, bson.D{{Key: "o", Value: 1}, {Key: "k", Value: 1}}, options.Index().SetName("bucket").SetUnique(true),
		"one document per (owner, first message); the buckets below a cursor, newest first"),
	idx(collDeliveries, bson.D{{Key: "m", Value: 1}, {Key: "k", Value: 1}}, options.Index().SetName("chunk").SetUnique(true),
		"one record per delivered chunk or insertion, in order, so a repeated step records once"),
	idx(collUsers, bson.D{{Key: "dl", Value: 1}, {Key: "_id", Value: 1}}, options.Index().SetName("deleted").SetPartialFilterExpression(bson.D{{Key: "dl", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"deleted accounts not yet purged, for the deletion sweeper; partial, so only those are indexed"),
	idx(collLocks, bson.D{{Key: "x", Value: 1}}, options.Index().SetName("expiry").SetExpireAfterSeconds(60),
		"a lock left by a crashed process is removed (it is also taken over once expired)"),
	idx(collCaches, bson.D{{Key: "x", Value: 1}}, options.Index().SetName("expiry").SetExpireAfterSeconds(0),
		"idle users' cached inboxes expire (Inbox caches)"),
	idx(collEvents, bson.D{{Key: "q", Value: 1}}, options.Index().SetName("seq").SetUnique(true).SetPartialFilterExpression(bson.D{{Key: "q", Value: bson.D{{Key: "$exists", Value: true}}}}),
		"events polled in sequence order where there are no change streams; unique, so a poller's placeholder for a number never written and a late publisher cannot both take it; partial, as documents from before numbering have none"),
	idx(collEvents, bson.D{{Key: "x", Value: 1}}, options.Index().SetName("expiry").SetExpireAfterSeconds(0),
		"events expire once every process has had time to read them"),
}

// dmSenderIndex is an optional index (Turms: indexes a deployment switches
// on only when it needs the feature), which `herald mongo setup
// -dm-sender-index` adds and EnsureIndexes never does: every send would
// pay for it, and no query of Herald's needs it.
var dmSenderIndex = idx(collDMs, bson.D{{Key: "a", Value: 1}, {Key: "_id", Value: -1}}, options.Index().SetName("sender"),
	"optional: the conversation messages a user sent, newest first (an export of one's messages); names no shard key, so it asks every shard")

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
	{collLikes, bson.D{{Key: "u", Value: 1}, {Key: "m", Value: 1}}, "like, unlike and a page's liked flags name the user; a popular message's likes spread over the shards"},
	{collReposts, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, "a repost's guard is inserted, read and removed by (user, original); the unique (u, o) needs the shard key as its prefix"},
	{collBlocks, bson.D{{Key: "u", Value: 1}, {Key: "o", Value: 1}}, "block, unblock, lists and a page's checks name the user; fan-out's check names a chunk's owners, so it asks only their shards; the unique (u, o, rk) needs the shard key as its prefix"},
	{collFollowRequests, bson.D{{Key: "o", Value: 1}, {Key: "u", Value: 1}}, "the list and its answers name the private account; a page's checks name the page's users, so they ask only their shards; the unique (o, u) needs the shard key as its prefix"},
	{collConvs, bson.D{{Key: "_id", Value: "hashed"}}, "every conversation read and write names it; hashed spreads them evenly"},
	{collDMs, bson.D{{Key: "c", Value: 1}, {Key: "s", Value: 1}}, "a conversation's history stays together: a page and every edit name (c, s); the unique (c, s), the claim of each seq, needs the shard key as its prefix, so no time zones here (docs/design.md, Shard keys and time zones)"},
	{collUserConvs, bson.D{{Key: "u", Value: 1}, {Key: "c", Value: 1}}, "a user's list and its updates name the user; the unique (u, c) needs the shard key as its prefix"},
	{collDMReads, bson.D{{Key: "_id", Value: "hashed"}}, "every read state read and write names the user; hashed spreads them evenly"},
	{collNotifGroups, bson.D{{Key: "o", Value: 1}, {Key: "k", Value: 1}}, "every read and write names the owner, so a feed page and a notice stay on one shard; the unique (o, k) needs the shard key as its prefix"},
	{collNotifActors, bson.D{{Key: "g", Value: 1}, {Key: "u", Value: 1}}, "a notice's dedupe and a group's actors name the group; the unique (g, u) needs the shard key as its prefix"},
	{collNotifHeads, bson.D{{Key: "_id", Value: "hashed"}}, "every head read and write names the owner; hashed spreads them evenly"},
	{collEntries, bson.D{{Key: "o", Value: 1}, {Key: "m", Value: 1}}, "an inbox's entries stay together; reads name the owner (Social Inboxes: recipient)"},
	{collBuckets, bson.D{{Key: "o", Value: 1}, {Key: "k", Value: 1}}, "an inbox's buckets stay together; reads name the owner (Social Inboxes: owner and bucket)"},
	{collCaches, bson.D{{Key: "_id", Value: "hashed"}}, "every cache read and write names the owner; hashed spreads them evenly"},
	{collDeliveries, bson.D{{Key: "m", Value: 1}, {Key: "k", Value: 1}}, "a message's delivery records are read in order"},
}

// FieldNames maps every short field name Herald stores to the descriptive
// name it stands for: the one place the mapping is written down, used to
// document it and to measure what short names save (TestBytes).
var FieldNames = map[string]string{
	// users
	"h": "handle", "n": "displayName", "bi": "bio", "w": "websiteUrl", "au": "avatarUrl", "q": "searchTerms", "p": "passwordHash", "c": "createdAt", "s": "lastSeenAt",
	"fr": "followerCount", "fg": "followingCount", "mc": "messageCount", "pc": "pulledCount", "at": "attributes",
	"k": "key", "v": "value", "av": "attributesVersion", "tv": "tokenVersion", "rt": "revokedTokens",
	"kt": "keptToken", "dl": "accountDeletedAt",
	"et": "entriesTotal", "eu": "entriesUnread", "bt": "bucketsTotal", "bu": "bucketsUnread",
	"bk": "newestBucket", "bn": "newestBucketCount", "bm": "newestMessage",
	"ir": "readMark", "iv": "inboxVersion", "rb": "rebuild", "i": "instance",
	"lj": "lastJob", "lq": "lastEntries", "la": "lastAdded", "ll": "lastLayout", "po": "pendingOperations",
	// handles, follow edges and likes
	"u": "user", "o": "other", "t": "time", "op": "operation", "st": "state", "uop": "unfollowOperation",
	// messages (t is the text there), jobs, deletion and counting marks
	"a": "author", "r": "replyTo", "ra": "replyToAuthor", "e": "editedAt", "pl": "pulled", "j": "job", "cur": "cursor",
	"x": "deletedAt", "mn": "counted", "xn": "uncounted", "gc": "groupClaim", "cl": "claimed",
	"mr": "jobSawUncounted", "mj": "jobCounted", "xr": "jobSawNotRemoved", "xj": "jobUncounted", "me": "mentions", "lc": "likeCount",
	// and threads
	"tr": "threadRoot", "tra": "threadRootAuthor", "rc": "replyCount",
	// and reposts
	// and blocks (u the user, o the target)
	"rk": "relationKind",
	// and follow requests (u the user, o the private account); users' pv
	"pv": "private", "mf": "messagesFrom",
	"ro": "repostOf", "roa": "repostOfAuthor", "rp": "repostCount", "hh": "homeHidden",
	// entries, buckets and caches (o owner, k key, e entries; m message,
	// d delivered, b bucket; f complete, cv version)
	"m": "message", "d": "deliveredAt", "b": "bucket", "f": "complete", "cv": "cacheVersion",
	// notifications: groups (o owner, k key, m and a the message, t the
	// newest activity), actors (u the user), heads
	"nk": "notificationKind", "nc": "actorCount", "nl": "latestActors", "g": "group", "rs": "resumeState",
	"nt": "notificationsTotal", "nu": "notificationsUnread", "nr": "notificationsReadMark",
	"np": "pendingNotice", "ni": "noticeID", "nx": "claimExpires",
	// and an actor's removal under way (np.nq: g, k, nc, nl as above)
	"nq": "pendingRemoval", "na": "removedActor", "nd": "removalDrops",
	// conversations: convs (n name, m members, ad admins, sq last seq,
	// rd read receipts), dms (c conversation, s seq, x text, d deleted,
	// p pending), userconvs (lt last activity, lm last message), dmreads
	// (v conversations: l last seq, r read seq)
	"cr": "creator", "ad": "admins", "sq": "lastSeq", "rd": "readSeqs", "lt": "lastActivity", "ls": "lastMessageSeq", "lm": "lastMessage",
	// names (l the names) and jobs (l the layout, p the chunk's plan)
	"l": "names",
}
