// Package mongostore is Herald's production backend: MongoDB, a replica set
// or a sharded cluster, through the official driver. It is written against
// lungo's driver interfaces so that the same code runs on a real MongoDB
// (lungo.Connect wraps the official client) and on lungo's embedded engine
// in tests.
//
// Nothing here uses multi-document transactions: each write is one atomic
// document update, and where an operation must touch several documents the
// steps are ordered and idempotent (conditional updates, upserts against
// unique indexes, markers of applied operations), so a retry after a failure
// at any point leaves nothing lost and nothing twice. See schema.go for the
// collections, indexes and shard keys, and the reasons for each.
package mongostore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"go.mongodb.org/mongo-driver/mongo/readconcern"
	"go.mongodb.org/mongo-driver/mongo/writeconcern"

	"herald/store"
	"herald/store/storage"
)

// Options configure a Store.
type Options struct {
	// Logger receives background errors; slog.Default() by default.
	Logger *slog.Logger
	// NoGroupCommit stores every delivery chunk alone (DeliverInbox), as
	// before group commit: for comparisons (measure_group_test.go).
	NoGroupCommit bool
}

// Store is the MongoDB backend. It is safe for concurrent use, and several
// Herald processes may share one database.
type Store struct {
	client lungo.IClient
	db     lungo.IDatabase
	log    *slog.Logger

	users, handles, followees, followers lungo.ICollection
	messages, entries, buckets, caches   lungo.ICollection
	jobs, deliveries, likes, reposts     lungo.ICollection
	blocks, followRequests               lungo.ICollection
	names, events, leases, locks         lungo.ICollection
	// the notifications feed (notifications.go)
	notifGroups, notifActors, notifHeads lungo.ICollection
	// conversations (conversations.go)
	convs, dms, userConvs, dmReads lungo.ICollection

	tokens  *tokenCache
	noGroup bool // Options.NoGroupCommit
	// noGroupOn holds the lanes this process knows no group plan is
	// stored on: it finished or found none since it last took the lane,
	// and stored none since (group.go).
	noGroupOn sync.Map
	// groupGen counts, by lane, the plans this process stored (a
	// *atomic.Uint64), so that a read that found none does not mark the
	// lane free of plans after one was stored meanwhile.
	groupGen sync.Map
	// inFlight is, by lane, the job this process last recorded as running
	// (beginJob).
	inFlight sync.Map
	// lanes is the number of fan-out lanes stored, once read (laneCount).
	lanes atomic.Int32
	// testHookSend, when set, runs at each point of a conversation send
	// where another write may come between its own (sendPoint).
	testHookSend atomic.Pointer[func(point int)]
}

var (
	_ storage.Backend = (*Store)(nil)
	_ storage.Leaser  = (*Store)(nil)
)

// ConnectOptions configure a connection to a real MongoDB.
type ConnectOptions struct {
	URI            string
	Database       string        // default "herald"
	MaxPoolSize    uint64        // default the driver's (100)
	ConnectTimeout time.Duration // default 10s
	// WriteConcern is "majority" (the default) or a number of nodes.
	WriteConcern string
}

// Connect connects to the MongoDB at o.URI. It does not wait for the
// server: a server that is down now is retried by every operation, and
// Ping reports whether it is reachable.
func Connect(ctx context.Context, o ConnectOptions) (lungo.IClient, error) {
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	co := options.Client().ApplyURI(o.URI).SetConnectTimeout(o.ConnectTimeout).SetServerSelectionTimeout(o.ConnectTimeout).
		SetReadConcern(readconcern.Majority())
	if o.MaxPoolSize > 0 {
		co.SetMaxPoolSize(o.MaxPoolSize)
	}
	wc, err := parseWriteConcern(o.WriteConcern)
	if err != nil {
		return nil, err
	}
	co.SetWriteConcern(wc)
	client, err := lungo.Connect(ctx, co)
	if err != nil {
		return nil, fmt.Errorf("connect to mongodb: %w", err)
	}
	return client, nil
}

func parseWriteConcern(s string) (*writeconcern.WriteConcern, error) {
	switch s {
	case "", "majority":
		return writeconcern.Majority(), nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != s {
		return nil, fmt.Errorf("write concern %q: want majority or a number of nodes", s)
	}
	return &writeconcern.WriteConcern{W: n}, nil
}

// New returns a Store over database name of client. Call EnsureIndexes
// before serving.
func New(client lungo.IClient, name string, opts Options) *Store {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	db := client.Database(name)
	return &Store{
		client: client, db: db, log: opts.Logger, noGroup: opts.NoGroupCommit,
		users: db.Collection(collUsers), handles: db.Collection(collHandles),
		followees: db.Collection(collFollowees), followers: db.Collection(collFollowers),
		messages: db.Collection(collMessages), entries: db.Collection(collEntries),
		buckets: db.Collection(collBuckets), caches: db.Collection(collCaches), jobs: db.Collection(collJobs),
		deliveries: db.Collection(collDeliveries), likes: db.Collection(collLikes), names: db.Collection(collNames),
		events: db.Collection(collEvents), leases: db.Collection(collLeases), locks: db.Collection(collLocks),
		reposts: db.Collection(collReposts), blocks: db.Collection(collBlocks), followRequests: db.Collection(collFollowRequests), notifGroups: db.Collection(collNotifGroups),
		notifActors: db.Collection(collNotifActors), notifHeads: db.Collection(collNotifHeads),
		convs: db.Collection(collConvs), dms: db.Collection(collDMs), userConvs: db.Collection(collUserConvs), dmReads: db.Collection(collDMReads),
		tokens: newTokenCache(),
	}
}

// Database returns the database the store uses.
func (s *Store) Database() lungo.IDatabase { return s.db }

// EnsureIndexes creates every index that does not exist yet, and reads
// the number of fan-out lanes stored, which every message job is stored
// for. It is idempotent.
func (s *Store) EnsureIndexes(ctx context.Context) error {
	for _, ix := range indexes {
		if _, err := s.db.Collection(ix.coll).Indexes().CreateOne(ctx, ix.model); err != nil {
			return fmt.Errorf("create index %s on %s: %w", *ix.model.Options.Name, ix.coll, err)
		}
	}
	return s.readLanes(ctx)
}

// Ping reports whether MongoDB answers.
func (s *Store) Ping(ctx context.Context) error {
	return s.client.Ping(ctx, nil)
}

// Close disconnects the client.
func (s *Store) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return s.client.Disconnect(ctx)
}

// isDuplicate reports a unique index violation, from MongoDB or lungo.
func isDuplicate(err error) bool {
	return err != nil && (mongo.IsDuplicateKeyError(err) || lungo.IsUniquenessError(err))
}

// missing translates a missing document into NOT_FOUND with the given
// message and labels any other error (nil stays nil).
func missing(err error, notFound, label string) error {
	if errors.Is(err, mongo.ErrNoDocuments) {
		return store.Errorf(store.ENOTFOUND, "%s", notFound)
	}
	return wrap(label, err)
}

// wrap labels a driver error; errors that are already coded pass through,
// and MongoDB's out-of-disk-space errors become STORAGE_FULL.
func wrap(label string, err error) error {
	if err == nil {
		return nil
	}
	var e *store.Error
	if errors.As(err, &e) {
		return err
	}
	if outOfDiskSpace(err) {
		return fmt.Errorf("mongostore %s: %w (%w)", label, errStorageFull, err)
	}
	return fmt.Errorf("mongostore %s: %w", label, err)
}

// codeOutOfDiskSpace is MongoDB's OutOfDiskSpace error code.
const codeOutOfDiskSpace = 14031

// errStorageFull is what a write gets while MongoDB's disk is full.
var errStorageFull = &store.Error{
	Code:    store.ESTORAGEFULL,
	Message: "the database's disk is full: writes are refused until space is freed; reads still work",
}

// outOfDiskSpace reports MongoDB's OutOfDiskSpace, in a command error or
// among a write's errors (mongo.ServerError covers both).
func outOfDiskSpace(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(codeOutOfDiskSpace)
}

// maxAttempts bounds a loop of conditional writes that keep losing to
// concurrent changes. Each loss means another writer moved the document,
// so many in a row point at a condition that can never match: the caller
// (the fan-out retries with a backoff of its own) is better told than spun.
const maxAttempts = 25

// again is called before attempt n+1 of a conditional write that matched
// nothing. It returns ctx's error, or an error once maxAttempts were made,
// and otherwise waits a little longer each time, so that contending
// writers spread out.
func again(ctx context.Context, n int, what string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n >= maxAttempts {
		return fmt.Errorf("mongostore %s: the document kept changing; gave up after %d attempts", what, n)
	}
	if n < 2 {
		return nil
	}
	t := time.NewTimer(min(time.Millisecond<<min(n-2, 7), 100*time.Millisecond))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
