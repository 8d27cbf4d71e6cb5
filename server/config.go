package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"herald/graph"
	"herald/server/cli"
	"herald/server/datadir"
	"herald/server/httpserver"
	"herald/store/mongostore"
	"herald/store/service"
)

// envPrefix starts the environment variable of every flag: -max-body-bytes
// falls back to HERALD_MAX_BODY_BYTES.
const envPrefix = "HERALD_"

// DefaultFanoutMaxLag is -fanout-max-lag's default: well past the lag of a
// burst the fan-out absorbs (seconds), well short of the minute after which
// followers plainly miss posts.
const DefaultFanoutMaxLag = 30 * time.Second

// config is everything the server reads from flags and the environment.
type config struct {
	Addr            string
	DataDir         string
	LogLevel        slog.Level
	LogFormat       string // "json" or "text"
	TokenTTL        time.Duration
	ShutdownTimeout time.Duration
	// PprofAddr is where the runtime profiles are served; "" (the
	// default) serves none.
	PprofAddr string
	// Metrics serves Prometheus metrics at /metrics and collects them.
	Metrics bool
	// The HTTP server's settings: origins, body, operation and websocket
	// limits, rate limits, timeouts and trusted proxies.
	httpserver.Options
	// TokenSecret comes from HERALD_TOKEN_SECRET; nil means "use or create
	// the secret file in DataDir".
	TokenSecret []byte

	// Timelines: the strategy and its knobs (service.Options).
	Fanout             service.Strategy
	CelebrityThreshold int
	InactiveAfter      time.Duration
	InboxCap           int
	CacheTTL           time.Duration
	FollowBackfill     int
	// FanoutLanes is how many lanes run stored fan-out jobs at once.
	FanoutLanes int
	// DeletionGrace is how long a deleted account's handle stays taken.
	DeletionGrace time.Duration
	// FanoutMaxLag is the fan-out lag past which posts and reposts to fan
	// out are refused with RATE_LIMITED (service.Options.FanoutMaxLag); 0:
	// never.
	FanoutMaxLag time.Duration

	// MongoURI selects the MongoDB backend instead of the embedded one.
	// It may hold credentials: it is never logged.
	MongoURI          string
	MongoDatabase     string
	MongoPoolSize     uint64 // 0: the driver's default (100)
	MongoTimeout      time.Duration
	MongoWriteConcern string // "majority" or a number of nodes
	// MongoEvents is how inbox events cross instances: auto, poll or
	// changestream (mongostore.EventsOptions.Mode).
	MongoEvents       string
	MongoPollInterval time.Duration
}

// parseConfig reads flags from args, falling back for each flag not given
// to its HERALD_* environment variable, then to its default. It returns
// flag.ErrHelp when -h or -help is given, after writing the usage to usage.
func parseConfig(args []string, getenv func(string) string, usage io.Writer) (config, error) {
	return parseCommandConfig(command{name: "herald", usage: serverUsage}, args, getenv, usage)
}

// serverUsage heads the server's -h.
const serverUsage = "Usage: herald [flags]\n       herald subscribe [-url ws://127.0.0.1:8080/graphql] [-token TOKEN]   print the token owner's inbox events\n       herald seed [flags]   load a generated social network into the store (herald seed -h)\n       herald bench [flags]   measure a server end to end against Herald's targets (herald bench -h)\n       herald mongo setup -mongodb-uri URI [-dry-run] [-sharded auto|yes|no] [-time-zones ...]   create MongoDB indexes, shard keys and zones (herald mongo setup -h)\n\nEvery flag may also be set by its environment variable, e.g. -max-body-bytes by HERALD_MAX_BODY_BYTES; a flag on the command line wins.\nThe token secret is read from HERALD_TOKEN_SECRET, or else from <data>/token-secret (created on first start);\ninstances sharing one MongoDB must share it, so give them HERALD_TOKEN_SECRET.\n\nFlags:"

// command is a subcommand that takes the server's flags (the store and
// the timeline strategy it works on) and flags of its own, which flags
// registers; they fall back to the environment alike.
type command struct {
	name  string
	usage string
	flags func(fs *flag.FlagSet)
}

// parseCommandConfig is parseConfig for cmd.
func parseCommandConfig(cmd command, args []string, getenv func(string) string, usage io.Writer) (config, error) {
	var (
		cfg      config
		logLevel string
		origins  string
		fanout   string
		userRate string
		addrRate string
		qUser    string
		qAddr    string
		logIns   string
		exports  string
		proxies  string
	)
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are returned, usage printed only on -h
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	// The HTTP server's settings default to httpserver.DefaultOptions (the
	// operation limits to graph.DefaultConfig), which its tests run with.
	def := httpserver.DefaultOptions()
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "listen address (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.DataDir, "data", "./herald-data", "data directory of the embedded store and the token secret")
	fs.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.StringVar(&cfg.LogFormat, "log-format", "json", "log format: json or text")
	fs.StringVar(&origins, "allowed-origins", "", "comma-separated origins (scheme://host[:port]) besides the server's own whose pages may call /graphql (CORS) and open its websocket; * allows any")
	fs.DurationVar(&cfg.TokenTTL, "token-ttl", 24*time.Hour, "lifetime of issued bearer tokens")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", def.MaxBodyBytes, "largest accepted request body or websocket message, in bytes")
	fs.BoolVar(&cfg.Introspection, "introspection", def.Introspection, "allow GraphQL introspection queries")
	fs.IntVar(&cfg.ComplexityLimit, "complexity-limit", def.ComplexityLimit, "largest accepted query complexity")
	fs.IntVar(&cfg.MaxDepth, "max-depth", def.MaxDepth, "deepest accepted query nesting")
	fs.IntVar(&cfg.MaxBatch, "max-batch", def.MaxBatch, "most operations in one batched POST (a JSON array of requests); 0 or 1 turns batching off")
	fs.IntVar(&cfg.MaxSubscriptionsPerConnection, "max-subscriptions-per-connection", def.MaxSubscriptionsPerConnection, "most operations running at once on one websocket; one more is answered with a TOO_MANY_SUBSCRIPTIONS error (0: no limit)")
	fs.IntVar(&cfg.MaxWebsocketsPerUser, "max-websockets-per-user", def.MaxWebsocketsPerUser, "most open websockets of one user, checked at connection_init; one more is closed with 1013 (0: no limit)")
	fs.IntVar(&cfg.MaxWebsocketsPerAddress, "max-websockets-per-address", def.MaxWebsocketsPerAddress, "most open websockets from one client address (an IPv6 /64); one more is closed with 1013 (0: no limit)")
	fs.IntVar(&cfg.MaxWebsockets, "max-websockets", def.MaxWebsockets, "most open websockets in all; one more is closed with 1013 (0: no limit)")
	fs.StringVar(&userRate, "rate-limit-user", def.RateLimitUser.String(), "mutations per signed-in user: COUNT/PERIOD[,burst=N], PERIOD s, m, h or a duration; 0 turns it off")
	fs.StringVar(&addrRate, "rate-limit-address", def.RateLimitAddress.String(), "mutations per client address (an IPv6 /64), signUp and logIn included: COUNT/PERIOD[,burst=N]; 0 turns it off")
	fs.StringVar(&qUser, "rate-limit-query-user", def.RateLimitQueryUser.String(), "query cost (complexity points) per signed-in user: COUNT/PERIOD[,burst=N]; 0 turns it off")
	fs.StringVar(&qAddr, "rate-limit-query-address", def.RateLimitQueryAddress.String(), "query cost (complexity points) per client address: COUNT/PERIOD[,burst=N]; 0 turns it off")
	fs.StringVar(&exports, "rate-limit-export", def.RateLimitExport.String(), "account exports (exportAccount) per signed-in user: COUNT/PERIOD[,burst=N]; 0 turns it off")
	fs.StringVar(&logIns, "rate-limit-login", def.RateLimitLogIn.String(), "failed logIns per handle, from any address: COUNT/PERIOD[,burst=N]; 0 turns it off")
	fs.IntVar(&cfg.MaxAliases, "max-aliases", def.MaxAliases, "most aliased fields in one operation")
	fs.IntVar(&cfg.MaxRootFields, "max-root-fields", def.MaxRootFields, "most root fields in one operation (each root mutation field also takes a rate-limit token)")
	fs.IntVar(&cfg.MaxTokens, "max-tokens", def.MaxTokens, "most lexical tokens in one GraphQL document")
	fs.IntVar(&cfg.MaxResponseBytes, "max-response-bytes", def.MaxResponseBytes, "largest response data, in bytes; a larger one is replaced by an error")
	fs.DurationVar(&cfg.QueryTimeout, "query-timeout", def.QueryTimeout, "how long one query or mutation (or one subscription event) may run")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", def.ReadTimeout, "how long a client may take to send a request's headers and body")
	fs.DurationVar(&cfg.WriteTimeout, "write-timeout", def.WriteTimeout, "how long a client may take to receive a response once it is ready")
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated addresses or CIDRs of reverse proxies whose X-Forwarded-For names the client address (none: the peer is the client)")
	fs.StringVar(&cfg.PprofAddr, "pprof", "", "serve runtime profiles (net/http/pprof) at /debug/pprof/ on this address of their own, e.g. 127.0.0.1:6060; empty serves none")
	fs.BoolVar(&cfg.Metrics, "metrics", true, "serve Prometheus metrics at GET /metrics, unauthenticated: keep the path off the public side of the proxy; false collects none")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for requests and queued fan-out")
	fs.StringVar(&fanout, "fanout", string(service.StrategyBucket), "timeline strategy: read (fan-out on read), write (fan-out on write), bucket (fan-out on write into buckets of 50), cache (cached inbox) or hybrid (bucket, but celebrities' posts are merged in at read time)")
	fs.IntVar(&cfg.CelebrityThreshold, "celebrity-threshold", 10_000, "hybrid: authors with more followers than this are not fanned out")
	fs.DurationVar(&cfg.InactiveAfter, "inactive-after", 30*24*time.Hour, "users not seen for this long are skipped by fan-out; their inbox is rebuilt when they return")
	fs.IntVar(&cfg.InboxCap, "inbox-cap", 50, "entries in a cached inbox (cache), and entries a returning user's rebuild brings back")
	fs.DurationVar(&cfg.CacheTTL, "cache-ttl", 24*time.Hour, "cache: how long an unread cached inbox lives")
	fs.DurationVar(&cfg.DeletionGrace, "deletion-grace", service.DefaultDeletionGrace, "how long a deleted account's handle stays taken (and the account's record kept) before it is purged and the handle can be signed up again")
	fs.DurationVar(&cfg.FanoutMaxLag, "fanout-max-lag", DefaultFanoutMaxLag, "when delivery is further behind than this (the age of the oldest unfinished fan-out job), postMessage and repost answer RATE_LIMITED with a retry hint until it catches up; 0 disables")
	fs.IntVar(&cfg.FollowBackfill, "follow-backfill", 50, "how many of a followee's recent messages a follow brings into the follower's inbox")
	fs.IntVar(&cfg.FanoutLanes, "fanout-lanes", 1, "how many ordered lanes run stored fan-out jobs at once: by author on the embedded engine; by inbox owner on MongoDB, spread over the processes, the first process's number stored for all")
	fs.StringVar(&cfg.MongoURI, "mongodb-uri", "", "MongoDB connection string (mongodb:// or mongodb+srv://); when set, MongoDB is the store instead of the embedded engine. Prefer HERALD_MONGODB_URI when it holds a password")
	fs.StringVar(&cfg.MongoDatabase, "mongodb-database", "", "MongoDB database name (default: the one -mongodb-uri names, else "+cli.DefaultDatabase+")")
	fs.Uint64Var(&cfg.MongoPoolSize, "mongodb-pool-size", 0, "largest number of connections per MongoDB server (0: the driver's default, 100)")
	fs.DurationVar(&cfg.MongoTimeout, "mongodb-timeout", 10*time.Second, "how long to wait for MongoDB: connecting, finding a server, and all storage work of one HTTP request")
	fs.StringVar(&cfg.MongoWriteConcern, "mongodb-write-concern", "majority", "MongoDB write concern: majority, or a number of nodes (at least 1)")
	fs.StringVar(&cfg.MongoEvents, "mongodb-events", "auto", "how inbox events cross instances: auto (a change stream where MongoDB has them, as a replica set or sharded cluster does, else polling), changestream, poll (read the events collection every -mongodb-poll-interval), or local (a single instance: events reach its own subscribers only, with neither)")
	fs.DurationVar(&cfg.MongoPollInterval, "mongodb-poll-interval", 250*time.Millisecond, "with polling (-mongodb-events), how often each instance reads the events collection when it found nothing new: an event's added latency is up to this, half of it on average")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(usage)
			fmt.Fprintln(usage, cmd.usage)
			fs.PrintDefaults()
		}
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	given := make(map[string]bool)
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || envErr != nil {
			return
		}
		name := envName(f.Name)
		if v := getenv(name); v != "" {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("invalid %s=%q: %v", name, v, err)
			}
		}
	})
	if envErr != nil {
		return config{}, envErr
	}
	// The URI's database is the default, as MongoDB's drivers and tools
	// take it; the flag (or its variable) overrides it.
	if !given["mongodb-database"] && getenv(envName("mongodb-database")) == "" {
		cfg.MongoDatabase = cli.URIDatabase(cfg.MongoURI)
	}

	var err error
	if cfg.LogLevel, err = parseLogLevel(logLevel); err != nil {
		return config{}, err
	}
	if cfg.Fanout, err = service.ParseStrategy(fanout); err != nil {
		return config{}, err
	}
	if cfg.CelebrityThreshold < 1 || cfg.InboxCap < 1 || cfg.InboxCap > 1000 || cfg.FollowBackfill < 0 || cfg.FollowBackfill > 1000 {
		return config{}, fmt.Errorf("invalid timeline settings: -celebrity-threshold must be at least 1, -inbox-cap 1 to 1000, -follow-backfill 0 to 1000")
	}
	if cfg.FanoutLanes < 1 || cfg.FanoutLanes > 64 {
		return config{}, fmt.Errorf("invalid -fanout-lanes %d: 1 to 64", cfg.FanoutLanes)
	}
	if cfg.CacheTTL <= 0 {
		return config{}, fmt.Errorf("invalid timeline settings: -cache-ttl must be positive")
	}
	// Last-seen is written at most once per service.SeenEvery, so a shorter
	// -inactive-after would call users idle while they are not.
	if cfg.InactiveAfter < service.SeenEvery {
		return config{}, fmt.Errorf("invalid timeline settings: -inactive-after must be at least %v", service.SeenEvery)
	}
	if cfg.FanoutMaxLag < 0 {
		return config{}, fmt.Errorf("invalid timeline settings: -fanout-max-lag must not be negative (0 disables it)")
	}
	if cfg.DeletionGrace <= 0 {
		return config{}, fmt.Errorf("invalid settings: -deletion-grace must be positive")
	}
	if cfg.LogFormat != "json" && cfg.LogFormat != "text" {
		return config{}, fmt.Errorf("invalid log format %q: want json or text", cfg.LogFormat)
	}
	for o := range strings.SplitSeq(origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			cfg.AllowedOrigins = append(cfg.AllowedOrigins, o)
		}
	}
	if err := httpserver.ValidateOrigins(cfg.AllowedOrigins); err != nil {
		return config{}, err
	}
	if cfg.RateLimitUser, err = graph.ParseRate(userRate); err != nil {
		return config{}, fmt.Errorf("-rate-limit-user: %w", err)
	}
	if cfg.RateLimitAddress, err = graph.ParseRate(addrRate); err != nil {
		return config{}, fmt.Errorf("-rate-limit-address: %w", err)
	}
	if cfg.RateLimitQueryUser, err = graph.ParseRate(qUser); err != nil {
		return config{}, fmt.Errorf("-rate-limit-query-user: %w", err)
	}
	if cfg.RateLimitQueryAddress, err = graph.ParseRate(qAddr); err != nil {
		return config{}, fmt.Errorf("-rate-limit-query-address: %w", err)
	}
	if cfg.RateLimitExport, err = graph.ParseRate(exports); err != nil {
		return config{}, fmt.Errorf("-rate-limit-export: %w", err)
	}
	if cfg.RateLimitLogIn, err = graph.ParseRate(logIns); err != nil {
		return config{}, fmt.Errorf("-rate-limit-login: %w", err)
	}
	if cfg.TrustedProxies, err = httpserver.ParseTrustedProxies(proxies); err != nil {
		return config{}, fmt.Errorf("-trusted-proxies: %w", err)
	}
	switch {
	case cfg.Addr == "":
		return config{}, errors.New("-addr must not be empty")
	case cfg.DataDir == "":
		return config{}, errors.New("-data must not be empty")
	case cfg.TokenTTL <= 0:
		return config{}, errors.New("-token-ttl must be positive")
	case cfg.MaxBodyBytes <= 0:
		return config{}, errors.New("-max-body-bytes must be positive")
	case cfg.ComplexityLimit <= 0:
		return config{}, errors.New("-complexity-limit must be positive")
	case cfg.MaxDepth <= 0:
		return config{}, errors.New("-max-depth must be positive")
	case cfg.ShutdownTimeout <= 0:
		return config{}, errors.New("-shutdown-timeout must be positive")
	case cfg.MaxBatch < 0:
		return config{}, errors.New("-max-batch must not be negative")
	case cfg.MaxSubscriptionsPerConnection < 0 || cfg.MaxWebsocketsPerUser < 0 || cfg.MaxWebsocketsPerAddress < 0 || cfg.MaxWebsockets < 0:
		return config{}, errors.New("-max-subscriptions-per-connection, -max-websockets-per-user, -max-websockets-per-address and -max-websockets must not be negative")
	case cfg.MaxAliases <= 0 || cfg.MaxRootFields <= 0 || cfg.MaxTokens <= 0 || cfg.MaxResponseBytes <= 0:
		return config{}, errors.New("-max-aliases, -max-root-fields, -max-tokens and -max-response-bytes must be positive")
	case cfg.QueryTimeout <= 0 || cfg.ReadTimeout <= 0 || cfg.WriteTimeout <= 0:
		return config{}, errors.New("-query-timeout, -read-timeout and -write-timeout must be positive")
	}
	if cfg.MongoURI != "" {
		if err := validateMongo(cfg); err != nil {
			return config{}, err
		}
	}

	if s := getenv(datadir.EnvTokenSecret); s != "" {
		if len(s) < datadir.MinSecretLen {
			return config{}, fmt.Errorf("%s is %d bytes; it must be at least %d", datadir.EnvTokenSecret, len(s), datadir.MinSecretLen)
		}
		cfg.TokenSecret = []byte(s)
	}
	return cfg, nil
}

// validateMongo checks the MongoDB flags, so that a mistake is reported
// at start rather than as failed requests.
func validateMongo(cfg config) error {
	if !strings.HasPrefix(cfg.MongoURI, "mongodb://") && !strings.HasPrefix(cfg.MongoURI, "mongodb+srv://") {
		// Not the URI itself: it may hold a password.
		return errors.New("-mongodb-uri must start with mongodb:// or mongodb+srv://")
	}
	if err := cli.ValidateDatabaseName(cfg.MongoDatabase); err != nil {
		return fmt.Errorf("-mongodb-database: %w", err)
	}
	if cfg.MongoTimeout <= 0 {
		return errors.New("-mongodb-timeout must be positive")
	}
	if err := validateWriteConcern(cfg.MongoWriteConcern); err != nil {
		return fmt.Errorf("-mongodb-write-concern: %w", err)
	}
	if _, err := eventsMode(cfg.MongoEvents); err != nil {
		return err
	}
	if cfg.MongoPollInterval <= 0 {
		return errors.New("-mongodb-poll-interval must be positive")
	}
	return nil
}

// eventsMode maps -mongodb-events to its mode.
func eventsMode(s string) (mongostore.EventsMode, error) {
	switch s {
	case "auto":
		return mongostore.EventsAuto, nil
	case "poll":
		return mongostore.EventsPoll, nil
	case "changestream":
		return mongostore.EventsChangeStream, nil
	case "local":
		return mongostore.EventsLocal, nil
	}
	return "", fmt.Errorf("-mongodb-events must be auto, poll, changestream or local, not %q", s)
}

// validateWriteConcern accepts "majority" or a number of nodes of at least
// 1. w: 0 is refused: unacknowledged writes would hide the duplicate-key
// errors that uniqueness and idempotent retries rely on.
func validateWriteConcern(s string) error {
	if s == "majority" {
		return nil
	}
	if n, err := strconv.Atoi(s); err != nil || n < 1 || strconv.Itoa(n) != s {
		return fmt.Errorf("%q: want majority or a number of nodes, at least 1", s)
	}
	return nil
}

// envName returns the environment variable of a flag: "max-body-bytes" →
// "HERALD_MAX_BODY_BYTES".
func envName(flagName string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

func parseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("invalid log level %q: want debug, info, warn or error", s)
}
