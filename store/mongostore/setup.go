package mongostore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/256dpi/lungo"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
)

// `herald mongo setup` applies schema.go to a deployment: the indexes
// always, and on a sharded cluster the shard keys and, optionally, zones
// that keep old messages on cheaper shards (Turms: docs/design.md#zones).
// Plan lists the steps without touching a server, so an operator can read
// them first (-dry-run); Apply runs them. Every step may be run again:
// index creation with an existing spec, enableSharding, shardCollection
// with the same key and addShardToZone are no-ops, and the zone ranges are
// replaced.

// Zone names for SetupOptions.TimeZones.
const (
	ZoneHot  = "hot"
	ZoneCold = "cold"
)

// DefaultColdAfter is the default age at which messages move to the cold
// zone.
const DefaultColdAfter = 90 * 24 * time.Hour

// SetupOptions select what Plan includes.
type SetupOptions struct {
	// Database is Herald's database; "herald" by default.
	Database string
	// Sharded adds enableSharding and a shardCollection per collection.
	Sharded bool
	// TimeZones (with Sharded) shards messages on _id and adds the hot and
	// cold zone ranges, split at ColdAfter ago.
	TimeZones bool
	// DMSenderIndex adds optionalIndexes' index of conversation messages
	// by sender.
	DMSenderIndex bool
	// ColdAfter is the age at which messages become cold; DefaultColdAfter
	// by default. The cutoff is rounded down to a UTC midnight, so runs on
	// one day plan the same ranges.
	ColdAfter time.Duration
	// HotShards and ColdShards are added to the hot and cold zones. They
	// may be empty on a later run: zone membership stays.
	HotShards, ColdShards []string
	// Now is the clock; time.Now by default.
	Now func() time.Time
}

// StepKind says how Apply runs a Step.
type StepKind int

// Step kinds.
const (
	// StepIndex creates an index through the driver's Indexes API;
	// Command shows the equivalent createIndexes.
	StepIndex StepKind = iota
	// StepCommand runs Command on Database (admin, for every sharding
	// command).
	StepCommand
	// StepClearZones removes the collection's current hot and cold zone
	// ranges: Command is the query on config.tags that finds them, and
	// each is removed with updateZoneKeyRange and zone null. MongoDB
	// refuses overlapping ranges, and a range is removed only by naming
	// its exact bounds, so moving the cutoff means reading the old ones.
	StepClearZones
)

// Step is one thing setup does.
type Step struct {
	Kind StepKind
	// Description says what the step does and why (the reasons are the
	// ones written beside the indexes and shard keys in schema.go).
	Description string
	// Database is where Command runs.
	Database string
	// Command is the command document, as sent (see StepKind).
	Command bson.D
	// Sharding marks the steps that need a sharded cluster.
	Sharding bool

	coll     string           // StepIndex
	index    mongo.IndexModel // StepIndex
	shardKey bool             // StepIndex: an index for a shard key only
	ns       string           // StepClearZones: the collection
	filter   bson.D           // StepClearZones: its ranges in config.tags
}

// CommandJSON returns Command as relaxed extended JSON, which mongosh
// accepts as it is.
func (s Step) CommandJSON() string {
	b, err := bson.MarshalExtJSON(s.Command, false, false)
	if err != nil {
		return fmt.Sprintf("<unprintable command: %v>", err)
	}
	return string(b)
}

// Plan returns the steps for opts, in the order they must run: indexes
// first (a non-empty collection can only be sharded on an indexed key),
// then sharding, then zones (a zone must have a shard before it can have a
// range).
func Plan(opts SetupOptions) []Step {
	if opts.Database == "" {
		opts.Database = "herald"
	}
	if opts.ColdAfter <= 0 {
		opts.ColdAfter = DefaultColdAfter
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	db := opts.Database
	var steps []Step
	for _, ix := range indexes {
		steps = append(steps, indexStep(db, ix, false))
	}
	if opts.DMSenderIndex {
		steps = append(steps, indexStep(db, dmSenderIndex, false))
	}
	if !opts.Sharded {
		return steps
	}

	keys := plannedShardKeys(opts.TimeZones)
	for _, k := range keys {
		if !indexSupports(k.coll, k.key) {
			ix := idx(k.coll, k.key, options.Index().SetName("shardkey"),
				"supports the shard key, which no other index does (shardCollection needs one on a non-empty collection)")
			steps = append(steps, indexStep(db, ix, true))
		}
	}
	steps = append(steps, Step{
		Kind:        StepCommand,
		Description: fmt.Sprintf("enable sharding for database %s (needed before MongoDB 6.0, a no-op since)", db),
		Database:    "admin",
		Command:     bson.D{{Key: "enableSharding", Value: db}},
		Sharding:    true,
	})
	for _, k := range keys {
		steps = append(steps, Step{
			Kind:        StepCommand,
			Description: fmt.Sprintf("shard %s on %s: %s", k.coll, keyString(k.key), k.why),
			Database:    "admin",
			Command:     bson.D{{Key: "shardCollection", Value: db + "." + k.coll}, {Key: "key", Value: k.key}},
			Sharding:    true,
		})
	}
	if opts.TimeZones {
		steps = append(steps, zoneSteps(db, opts)...)
	}
	return steps
}

// shardKey is a collection's planned shard key.
type shardKey struct {
	coll string
	key  bson.D
	why  string
}

// messagesByTime is the messages shard key with time zones.
//
// A zone is a range of the shard key, so keeping old messages apart needs
// a key that orders by time first: _id, whose leading bytes are the
// creation time in milliseconds (store.ID). Every message lookup of an
// inbox page names _id (inbox entries hold message IDs), so those stay
// targeted. What it costs: an author's outbox page, {a, _id < cursor},
// reads every shard holding messages older than the cursor; and all new
// messages go to the chunk at the top of the key range, one shard at a
// time, which is acceptable because a post is one insert (its fan-out
// writes go to buckets, sharded by owner). Choose it before messages are
// first sharded: shardCollection cannot change a collection's key, and
// moving an existing one from (a, _id) to _id takes reshardCollection
// (MongoDB 5.0+), which setup does not run.
var messagesByTime = shardKey{collMessages, bson.D{{Key: "_id", Value: 1}},
	"ordered by time, so hot and cold zones are ranges of it; inbox message loads name _id"}

func plannedShardKeys(timeZones bool) []shardKey {
	keys := make([]shardKey, 0, len(shardKeys))
	for _, k := range shardKeys {
		if timeZones && k.coll == collMessages {
			keys = append(keys, messagesByTime)
			continue
		}
		keys = append(keys, shardKey{k.coll, k.key, k.why})
	}
	return keys
}

// zoneSteps assign shards to the zones and split messages between them at
// the cutoff: [MinKey, cutoff) cold, [cutoff, MaxKey) hot.
//
// The cutoff is fixed when setup runs: messages older than ColdAfter stay
// in the hot range until setup runs again, which replaces both ranges with
// ones split at the new cutoff; the balancer then splits the chunks at the
// new boundary and moves the ones that crossed it to the cold shards. Run
// setup daily (cron) to move the boundary forward; between the removal of
// the old ranges and the addition of the new ones (milliseconds), the
// balancer sees no zones and could start a migration, which the new ranges
// then undo.
func zoneSteps(db string, opts SetupOptions) []Step {
	ns := db + "." + collMessages
	var steps []Step
	for _, z := range []struct {
		zone   string
		shards []string
	}{{ZoneHot, opts.HotShards}, {ZoneCold, opts.ColdShards}} {
		for _, sh := range z.shards {
			steps = append(steps, Step{
				Kind:        StepCommand,
				Description: fmt.Sprintf("add shard %s to zone %s", sh, z.zone),
				Database:    "admin",
				Command:     bson.D{{Key: "addShardToZone", Value: sh}, {Key: "zone", Value: z.zone}},
				Sharding:    true,
			})
		}
	}
	filter := bson.D{{Key: "ns", Value: ns}, {Key: "tag", Value: bson.D{{Key: "$in", Value: bson.A{ZoneHot, ZoneCold}}}}}
	steps = append(steps, Step{
		Kind:        StepClearZones,
		Description: fmt.Sprintf("remove the current %s and %s ranges of %s (found in config.tags; each removed by updateZoneKeyRange with zone null), so the new ranges do not overlap them", ZoneHot, ZoneCold, ns),
		Database:    "config",
		Command:     bson.D{{Key: "find", Value: "tags"}, {Key: "filter", Value: filter}},
		Sharding:    true,
		ns:          ns,
		filter:      filter,
	})
	cutoff := opts.Now().Add(-opts.ColdAfter).UTC().Truncate(24 * time.Hour)
	at := idAt(cutoff)
	age := opts.ColdAfter.String()
	if opts.ColdAfter%(24*time.Hour) == 0 {
		age = fmt.Sprintf("%d days", opts.ColdAfter/(24*time.Hour))
	}
	for _, r := range []struct {
		zone     string
		min, max any
		what     string
	}{
		{ZoneCold, primitive.MinKey{}, at, fmt.Sprintf("messages created before %s (%s ago, rounded down to midnight UTC)", cutoff.Format(time.DateOnly), age)},
		{ZoneHot, at, primitive.MaxKey{}, fmt.Sprintf("messages created since %s, and every new one", cutoff.Format(time.DateOnly))},
	} {
		steps = append(steps, Step{
			Kind:        StepCommand,
			Description: fmt.Sprintf("zone %s: %s", r.zone, r.what),
			Database:    "admin",
			Command: bson.D{
				{Key: "updateZoneKeyRange", Value: ns},
				{Key: "min", Value: bson.D{{Key: "_id", Value: r.min}}},
				{Key: "max", Value: bson.D{{Key: "_id", Value: r.max}}},
				{Key: "zone", Value: r.zone},
			},
			Sharding: true,
		})
	}
	return steps
}

// idAt returns the smallest ID made at t: Herald's IDs (store.ID) begin
// with 6 bytes of Unix milliseconds, not the driver's 4 bytes of seconds,
// so primitive.NewObjectIDFromTimestamp would put the cutoff decades off.
func idAt(t time.Time) primitive.ObjectID {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMilli()))
	var id primitive.ObjectID
	copy(id[0:6], b[2:8])
	return id
}

func indexStep(db string, ix index, shardKey bool) Step {
	name := ""
	if ix.model.Options != nil && ix.model.Options.Name != nil {
		name = *ix.model.Options.Name
	}
	what := "index"
	if shardKey {
		what = "shard key index"
	}
	return Step{
		Kind:        StepIndex,
		Description: fmt.Sprintf("%s %s.%s %s: %s", what, ix.coll, name, keyString(ix.model.Keys.(bson.D)), ix.why),
		Database:    db,
		Command:     bson.D{{Key: "createIndexes", Value: ix.coll}, {Key: "indexes", Value: bson.A{indexSpec(ix.model)}}},
		Sharding:    shardKey,
		coll:        ix.coll,
		index:       ix.model,
		shardKey:    shardKey,
	}
}

// indexSpec is an index as createIndexes takes it. It covers the options
// schema.go uses; a new option there needs a line here, which
// TestPlan_Indexes checks.
func indexSpec(m mongo.IndexModel) bson.D {
	spec := bson.D{{Key: "key", Value: m.Keys}}
	o := m.Options
	if o == nil {
		return spec
	}
	if o.Name != nil {
		spec = append(spec, bson.E{Key: "name", Value: *o.Name})
	}
	if o.Unique != nil {
		spec = append(spec, bson.E{Key: "unique", Value: *o.Unique})
	}
	if o.Sparse != nil {
		spec = append(spec, bson.E{Key: "sparse", Value: *o.Sparse})
	}
	if o.PartialFilterExpression != nil {
		spec = append(spec, bson.E{Key: "partialFilterExpression", Value: o.PartialFilterExpression})
	}
	if o.ExpireAfterSeconds != nil {
		spec = append(spec, bson.E{Key: "expireAfterSeconds", Value: *o.ExpireAfterSeconds})
	}
	return spec
}

// indexSupports reports whether an index of schema.go, or the _id index,
// can serve as the index of shard key key on coll: it must begin with the
// key's fields in ascending order and be neither partial nor sparse. A
// hashed key needs a hashed index, which schema.go has none of.
func indexSupports(coll string, key bson.D) bool {
	if len(key) == 1 && key[0].Key == "_id" && key[0].Value == 1 {
		return true
	}
	for _, ix := range indexes {
		o := ix.model.Options
		if ix.coll != coll || (o != nil && (o.PartialFilterExpression != nil || (o.Sparse != nil && *o.Sparse))) {
			continue
		}
		keys := ix.model.Keys.(bson.D)
		if len(keys) < len(key) {
			continue
		}
		ok := true
		for i, k := range key {
			if keys[i].Key != k.Key || keys[i].Value != 1 || k.Value != 1 {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// keyString shows an index key compactly: {a: 1, _id: -1}.
func keyString(key bson.D) string {
	b, err := bson.MarshalExtJSON(key, false, false)
	if err != nil {
		return fmt.Sprint(key)
	}
	return string(b)
}

// MongoDB error codes setup looks for.
const (
	codeAlreadyInitialized   = 23 // enableSharding or shardCollection done before (older servers)
	codeCommandNotFound      = 59 // hello, before MongoDB 4.4.2
	codeIndexOptionsConflict = 85 // an index on these keys exists under another name
)

// IsSharded reports whether client is connected to a sharded cluster: a
// mongos answers hello (isMaster before MongoDB 4.4.2) with msg
// "isdbgrid". lungo's engine is never sharded.
func IsSharded(ctx context.Context, client lungo.IClient) (bool, error) {
	if _, ok := client.(*lungo.Client); ok {
		return false, nil
	}
	admin := client.Database("admin")
	var reply struct {
		Msg string `bson:"msg"`
	}
	err := admin.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&reply)
	if hasCode(err, codeCommandNotFound) {
		err = admin.RunCommand(ctx, bson.D{{Key: "isMaster", Value: 1}}).Decode(&reply)
	}
	if err != nil {
		return false, fmt.Errorf("hello: %w", err)
	}
	return reply.Msg == "isdbgrid", nil
}

// Apply runs steps against client, writing a line per step (and per zone
// range removed) to out. It stops at the first failure and returns it;
// what ran before stays done, and running Apply again continues safely.
// Index steps run in database dbName, which must be the one the steps
// were planned for. lungo's engine runs no commands (it has no
// RunCommand), so there Apply refuses any step but index creation before
// running anything.
func Apply(ctx context.Context, client lungo.IClient, dbName string, steps []Step, out io.Writer) error {
	_, embedded := client.(*lungo.Client)
	for i, s := range steps {
		if s.Kind == StepIndex && s.Database != dbName {
			return fmt.Errorf("step %d plans database %s, not %s", i+1, s.Database, dbName)
		}
		if embedded && s.Kind != StepIndex {
			return fmt.Errorf("step %d (%s) needs a MongoDB server: lungo's engine runs no commands", i+1, s.Description)
		}
	}
	for i, s := range steps {
		fmt.Fprintf(out, "%d/%d %s\n", i+1, len(steps), s.Description)
		result, err := applyStep(ctx, client, dbName, s, out)
		if err != nil {
			fmt.Fprintf(out, "    failed: %v\n", err)
			return fmt.Errorf("step %d (%s): %w", i+1, s.Description, err)
		}
		fmt.Fprintf(out, "    %s\n", result)
	}
	return nil
}

func applyStep(ctx context.Context, client lungo.IClient, dbName string, s Step, out io.Writer) (string, error) {
	switch s.Kind {
	case StepIndex:
		name, err := client.Database(dbName).Collection(s.coll).Indexes().CreateOne(ctx, s.index)
		if s.shardKey && hasCode(err, codeIndexOptionsConflict) {
			// shardCollection, run by hand before, may have made it
			// under its own name; either serves the shard key.
			return "ok: an index on these keys exists under another name", nil
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ok: index %s present", name), nil
	case StepCommand:
		err := client.Database(s.Database).RunCommand(ctx, s.Command).Err()
		if hasCode(err, codeAlreadyInitialized) {
			return "ok: already done", nil
		}
		if err != nil {
			return "", err
		}
		return "ok", nil
	case StepClearZones:
		return clearZones(ctx, client, s, out)
	}
	return "", fmt.Errorf("unknown step kind %d", s.Kind)
}

// clearZones removes the zone ranges StepClearZones names.
func clearZones(ctx context.Context, client lungo.IClient, s Step, out io.Writer) (string, error) {
	cur, err := client.Database(s.Database).Collection("tags").Find(ctx, s.filter)
	if err != nil {
		return "", err
	}
	var ranges []struct {
		Min bson.Raw `bson:"min"`
		Max bson.Raw `bson:"max"`
		Tag string   `bson:"tag"`
	}
	if err := cur.All(ctx, &ranges); err != nil {
		return "", err
	}
	for _, r := range ranges {
		cmd := bson.D{{Key: "updateZoneKeyRange", Value: s.ns}, {Key: "min", Value: r.Min}, {Key: "max", Value: r.Max}, {Key: "zone", Value: nil}}
		if err := client.Database("admin").RunCommand(ctx, cmd).Err(); err != nil {
			return "", fmt.Errorf("remove %s range [%s, %s): %w", r.Tag, r.Min, r.Max, err)
		}
		fmt.Fprintf(out, "    removed %s range [%s, %s)\n", r.Tag, r.Min, r.Max)
	}
	return fmt.Sprintf("ok: %d ranges removed", len(ranges)), nil
}

// hasCode reports a server error with code.
func hasCode(err error, code int) bool {
	var se mongo.ServerError
	return err != nil && errors.As(err, &se) && se.HasErrorCode(code)
}
