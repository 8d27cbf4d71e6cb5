package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"time"

	"herald/store/mongostore"
)

// setupConfig is what `herald mongo setup` reads from its flags.
type setupConfig struct {
	URI       string
	Database  string
	DryRun    bool
	Sharded   string // auto, yes or no
	TimeZones bool
	// DMSenderIndex adds the optional index of conversation messages by
	// sender.
	DMSenderIndex bool
	ColdAfter     time.Duration
	HotShards     []string
	ColdShards    []string
	Timeout       time.Duration
	// FanoutLanes, if above 0, is the number of fan-out lanes to store.
	FanoutLanes int
}

// Mongo is `herald mongo <command>`; setup is the only command.
func Mongo(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "setup" {
		return errors.New("usage: herald mongo setup [flags] (herald mongo setup -h lists them)")
	}
	cfg, err := parseSetupConfig(args[1:], getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	} else if err != nil {
		return err
	}
	return runSetup(ctx, cfg, stdout)
}

// parseSetupConfig parses setup's flags. The URI and database fall back
// to the server's variables, HERALD_MONGODB_URI and
// HERALD_MONGODB_DATABASE, so setup runs in the server's environment as
// it is.
func parseSetupConfig(args []string, getenv func(string) string, usage io.Writer) (setupConfig, error) {
	var (
		cfg        setupConfig
		hot, cold  string
		uriDefault = getenv("HERALD_MONGODB_URI")
		dbDefault  = getenv("HERALD_MONGODB_DATABASE")
	)
	fs := flag.NewFlagSet("herald mongo setup", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.URI, "mongodb-uri", uriDefault, "MongoDB connection string (env HERALD_MONGODB_URI); not needed with -dry-run")
	fs.StringVar(&cfg.Database, "database", dbDefault, "Herald's database (env HERALD_MONGODB_DATABASE); by default the one the URI names, else "+DefaultDatabase)
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "print the commands as extended JSON without connecting or running them")
	fs.StringVar(&cfg.Sharded, "sharded", "auto", "shard the collections: auto (if connected to a mongos), yes or no")
	fs.BoolVar(&cfg.TimeZones, "time-zones", false, "shard messages by time and keep old ones on the cold shards (needs a sharded cluster; decide before messages are sharded, as changing a shard key takes reshardCollection); re-run daily to move the cutoff")
	fs.BoolVar(&cfg.DMSenderIndex, "dm-sender-index", false, "add the optional index of conversation messages by sender {a: 1, _id: -1} (a user's sent messages, e.g. an export), which sends then pay for; off by default, as Turms switches optional indexes on by configuration")
	fs.DurationVar(&cfg.ColdAfter, "cold-after", mongostore.DefaultColdAfter, "with -time-zones: the age at which messages move to the cold zone (at least 24h)")
	fs.StringVar(&hot, "hot-shards", "", "with -time-zones: comma-separated shards for recent messages")
	fs.StringVar(&cold, "cold-shards", "", "with -time-zones: comma-separated shards for old messages")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "how long to wait for MongoDB to answer before the steps run")
	fs.IntVar(&cfg.FanoutLanes, "fanout-lanes", 0, "store the number of fan-out lanes, partitioned by inbox owner and spread over the processes (1 to 64; 0 leaves it; refused while fan-out jobs are pending: stop every process and let the queue drain first)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(usage)
			fmt.Fprintln(usage, "Usage: herald mongo setup -mongodb-uri URI [flags]\n\nCreates Herald's indexes and, on a sharded cluster, its shard keys and zones.\nEvery step is safe to run again. -dry-run shows them first.\n\nFlags:")
			fs.PrintDefaults()
		}
		return setupConfig{}, err
	}
	if fs.NArg() > 0 {
		return setupConfig{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.HotShards, cfg.ColdShards = splitList(hot), splitList(cold)
	databaseGiven := dbDefault != ""
	fs.Visit(func(f *flag.Flag) { databaseGiven = databaseGiven || f.Name == "database" })
	if !databaseGiven {
		cfg.Database = URIDatabase(cfg.URI)
	}

	switch {
	case cfg.URI == "" && !cfg.DryRun:
		return setupConfig{}, errors.New("-mongodb-uri (or HERALD_MONGODB_URI) is required, except with -dry-run")
	case cfg.Sharded != "auto" && cfg.Sharded != "yes" && cfg.Sharded != "no":
		return setupConfig{}, fmt.Errorf("invalid -sharded %q: want auto, yes or no", cfg.Sharded)
	case cfg.TimeZones && cfg.Sharded == "no":
		return setupConfig{}, errors.New("-time-zones needs a sharded cluster; it cannot go with -sharded no")
	case !cfg.TimeZones && (len(cfg.HotShards) > 0 || len(cfg.ColdShards) > 0):
		return setupConfig{}, errors.New("-hot-shards and -cold-shards need -time-zones")
	case cfg.ColdAfter < 24*time.Hour:
		return setupConfig{}, errors.New("-cold-after must be at least 24h: the cutoff moves a day at a time")
	case cfg.FanoutLanes < 0 || cfg.FanoutLanes > 64:
		return setupConfig{}, fmt.Errorf("invalid -fanout-lanes %d: 1 to 64, or 0 to leave it", cfg.FanoutLanes)
	case cfg.Timeout <= 0:
		return setupConfig{}, errors.New("-timeout must be positive")
	}
	if err := ValidateDatabaseName(cfg.Database); err != nil {
		return setupConfig{}, fmt.Errorf("-database: %w", err)
	}
	for _, s := range cfg.HotShards {
		if slices.Contains(cfg.ColdShards, s) {
			return setupConfig{}, fmt.Errorf("shard %q is in both -hot-shards and -cold-shards", s)
		}
	}
	return cfg, nil
}

// ValidateDatabaseName applies MongoDB's rules for database names, to
// setup's -database and the server's -mongodb-database alike.
func ValidateDatabaseName(name string) error {
	if name == "" || len(name) > 63 || strings.ContainsAny(name, "/\\. \"$\x00") {
		return fmt.Errorf("invalid database name %q: 1 to 63 characters, none of / \\ . space \" $", name)
	}
	return nil
}

// DefaultDatabase is the database Herald uses when neither a flag nor the
// connection string names one.
const DefaultDatabase = "herald"

// URIDatabase returns the database a MongoDB connection string names (its
// path: mongodb://host/mydb?opts), or DefaultDatabase when it names none,
// as MongoDB's drivers and tools take it. It parses the string itself, for
// the driver's parser resolves a mongodb+srv:// host in DNS on the spot.
func URIDatabase(uri string) string {
	rest, ok := strings.CutPrefix(uri, "mongodb+srv://")
	if !ok {
		if rest, ok = strings.CutPrefix(uri, "mongodb://"); !ok {
			return DefaultDatabase
		}
	}
	rest, _, _ = strings.Cut(rest, "?")
	// The credentials may hold a percent-encoded '/', never a raw one:
	// the first '/' after the last '@' ends the hosts.
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	_, db, ok := strings.Cut(rest, "/")
	if !ok || db == "" {
		return DefaultDatabase
	}
	if name, err := url.PathUnescape(db); err == nil {
		return name
	}
	return db
}

func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func (c setupConfig) plan(sharded bool) []mongostore.Step {
	return mongostore.Plan(mongostore.SetupOptions{
		Database: c.Database, Sharded: sharded, TimeZones: c.TimeZones && sharded, DMSenderIndex: c.DMSenderIndex,
		ColdAfter: c.ColdAfter, HotShards: c.HotShards, ColdShards: c.ColdShards,
	})
}

// runSetup prints the plan (-dry-run) or connects and applies it.
func runSetup(ctx context.Context, cfg setupConfig, out io.Writer) error {
	if cfg.DryRun {
		printPlan(out, cfg, cfg.plan(cfg.Sharded != "no"))
		return nil
	}

	client, err := mongostore.Connect(ctx, mongostore.ConnectOptions{URI: cfg.URI, Database: cfg.Database, ConnectTimeout: cfg.Timeout})
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = client.Disconnect(dctx)
	}()
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if err := client.Ping(pctx, nil); err != nil {
		return fmt.Errorf("mongodb does not answer: %w", err)
	}
	sharded := cfg.Sharded == "yes"
	how := "-sharded " + cfg.Sharded
	if cfg.Sharded == "auto" {
		if sharded, err = mongostore.IsSharded(pctx, client); err != nil {
			return err
		}
		how = "detected"
	}
	if cfg.TimeZones && !sharded {
		return errors.New("-time-zones needs a sharded cluster, and this server is not a mongos")
	}
	fmt.Fprintf(out, "herald mongo setup: database %s, sharded cluster: %s (%s)\n", cfg.Database, yesNo(sharded), how)
	// No deadline on the steps: an index build on a large collection
	// takes as long as it takes; ctx (a signal) still stops it.
	if err := mongostore.Apply(ctx, client, cfg.Database, cfg.plan(sharded), out); err != nil {
		return err
	}
	// Users stored before search existed get their search terms.
	n, err := mongostore.New(client, cfg.Database, mongostore.Options{}).BackfillSearch(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "search terms given to %d users stored without them\n", n)
	if cfg.FanoutLanes > 0 {
		if err := mongostore.New(client, cfg.Database, mongostore.Options{}).SetFanoutLanes(ctx, cfg.FanoutLanes); err != nil {
			return err
		}
		fmt.Fprintf(out, "fan-out lanes: %d\n", cfg.FanoutLanes)
	}
	fmt.Fprintln(out, "done")
	return nil
}

// printPlan writes the steps for -dry-run: a numbered description, then
// the command as mongosh would take it, after the database it runs on.
func printPlan(out io.Writer, cfg setupConfig, steps []mongostore.Step) {
	fmt.Fprintf(out, "# herald mongo setup -dry-run: %d steps for database %s; nothing is run.\n", len(steps), cfg.Database)
	switch cfg.Sharded {
	case "auto":
		fmt.Fprintln(out, "# -sharded auto: the steps marked (if sharded) run only when connected to a mongos.")
	case "no":
		fmt.Fprintln(out, "# -sharded no: indexes only.")
	}
	for i, s := range steps {
		cond := ""
		if s.Sharding && cfg.Sharded == "auto" {
			cond = "(if sharded) "
		}
		fmt.Fprintf(out, "%d. %s%s\n   %s> db.runCommand(%s)\n", i+1, cond, s.Description, s.Database, s.CommandJSON())
		if s.Kind == mongostore.StepClearZones {
			fmt.Fprintln(out, "   then, for each range found: admin> db.runCommand({\"updateZoneKeyRange\":<ns>,\"min\":<min>,\"max\":<max>,\"zone\":null})")
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
