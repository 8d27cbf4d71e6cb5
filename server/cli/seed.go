package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/schollz/progressbar/v3"

	"herald/server/datadir"
	"herald/store"
	"herald/store/embedded"
	"herald/store/mongostore"
	"herald/store/seed"
	"herald/store/service"
	"herald/store/storage"
)

// SeedFlags are seed's own flags; the server's flags (SeedConfig) name the
// store and the timeline settings.
type SeedFlags struct {
	seed       uint64
	users      int
	avgFollows int
	messages   int
	avgLikes   float64
	avgReposts float64
	password   string
	batch      int
	quiet      bool
}

// Register registers the flags on fs.
func (f *SeedFlags) Register(fs *flag.FlagSet) {
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the generated network: the same seed and sizes give the same network")
	fs.IntVar(&f.users, "users", 100_000, "number of users (handles user1, user2, …)")
	fs.IntVar(&f.avgFollows, "avg-follows", 100, "average number of users each user follows")
	fs.IntVar(&f.messages, "messages", 100_000, "number of messages, spread evenly over the users")
	fs.Float64Var(&f.avgLikes, "avg-likes", seed.DefaultAvgLikes, "average number of likes per message, most of them on popular authors' messages, by their followers (0: none)")
	fs.Float64Var(&f.avgReposts, "avg-reposts", seed.DefaultAvgReposts, "average number of reposts per user, most of them of popular authors' messages (0: none)")
	fs.StringVar(&f.password, "password", "herald-seed", "every seeded user's password")
	fs.IntVar(&f.batch, "batch", seed.DefaultBatchRecords, "records written in one batch")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress bar")
}

// SeedUsage heads seed's -h.
const SeedUsage = `Usage: herald seed [flags]

Generates a social network (users, a follow graph whose follower counts
follow a power law, messages, likes and reposts that go mostly to popular
authors, and the inboxes the timeline strategy stores) from -seed and the sizes, and
writes it into the store the server would open with the same flags: the
embedded store in -data, or MongoDB with -mongodb-uri. It writes in
batches, bypassing the API, and keeps its progress in the store: run it
again after an interruption and it goes on where it stopped. Seed an empty
store, with the -fanout and -celebrity-threshold the server will run with.

Flags:`

// SeedConfig is what seed takes of the server's configuration: the store
// to write into, and the timeline settings the network is generated for.
type SeedConfig struct {
	// DataDir holds the embedded store, unless MongoURI is set.
	DataDir           string
	MongoURI          string
	MongoDatabase     string
	MongoPoolSize     uint64
	MongoTimeout      time.Duration
	MongoWriteConcern string

	Fanout             service.Strategy
	CelebrityThreshold int
}

// Seed is herald seed, with its flags sf and the server's cfg parsed; it
// logs to log.
func Seed(ctx context.Context, sf SeedFlags, cfg SeedConfig, log *slog.Logger, stdout, stderr io.Writer) error {
	if sf.batch < 1 {
		return errors.New("-batch must be positive")
	}
	avgLikes := sf.avgLikes
	switch {
	case avgLikes < 0:
		return errors.New("-avg-likes must not be negative")
	case avgLikes == 0:
		avgLikes = -1 // none; 0 is the default to seed.Config
	}
	avgReposts := sf.avgReposts
	switch {
	case avgReposts < 0:
		return errors.New("-avg-reposts must not be negative")
	case avgReposts == 0:
		avgReposts = -1
	}
	start := time.Now()
	n, err := seed.Generate(seed.Config{
		Seed: sf.seed, Users: sf.users, AvgFollows: sf.avgFollows, Messages: sf.messages, AvgLikes: avgLikes, AvgReposts: avgReposts,
		Strategy: cfg.Fanout, CelebrityThreshold: cfg.CelebrityThreshold,
	})
	if err != nil {
		return err
	}
	hash, err := store.HashPassword(sf.password, 0)
	if err != nil {
		return fmt.Errorf("-password: %w", err)
	}
	loader, closeStore, err := openLoader(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer closeStore()

	records := n.Records()
	bar := progressbar.NewOptions64(int64(records),
		progressbar.OptionSetWriter(stderr),
		progressbar.OptionSetVisibility(!sf.quiet),
		progressbar.OptionSetDescription("seeding"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString("records"),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(stderr) }),
	)
	loaded, err := seed.Load(ctx, loader, n, seed.LoadOptions{
		PasswordHash: hash, LastSeen: time.Now(), BatchRecords: sf.batch,
		Progress: func(r int) { _ = bar.Add(r) },
	})
	if err != nil {
		return err
	}
	_ = bar.Finish()
	// Conversations go through the backend's own operations, after the
	// users they name; a resumed seed skips the messages already sent.
	convStart := time.Now()
	sent, err := seed.LoadConversations(ctx, loader, n, nil)
	if err != nil {
		return err
	}
	convs := fmt.Sprintf("%d conversations with %d messages (%d sent now, in %v)", len(n.Conversations()), n.ConversationMessages(), sent, time.Since(convStart).Round(time.Millisecond))
	took := time.Since(start)
	if loaded == 0 {
		fmt.Fprintf(stdout, "already seeded: %d users, %d follows, %d messages, %d likes, %d reposts; %s\n", n.Users(), n.Edges(), sf.messages, n.Likes(), n.Reposts(), convs)
		return nil
	}
	fmt.Fprintf(stdout, "seeded %d users, %d follows, %d messages, %d likes, %d reposts, %d records in all, in %v (%.0f records/s)\n",
		n.Users(), n.Edges(), sf.messages, n.Likes(), n.Reposts(), records, took.Round(time.Millisecond), float64(records)/took.Seconds())
	fmt.Fprintln(stdout, convs)
	fmt.Fprintf(stdout, "log in as %s … %s with password %q\n", seed.Handle(0), seed.Handle(n.Users()-1), sf.password)
	return nil
}

// seedLoader is what herald seed writes through: the bulk path, and the
// conversations' own operations.
type seedLoader interface {
	storage.BulkLoader
	storage.Conversations
}

// openLoader opens the store cfg names for a bulk load: the embedded store
// in its data directory, or MongoDB with its indexes ensured.
func openLoader(ctx context.Context, cfg SeedConfig, log *slog.Logger) (seedLoader, func(), error) {
	if cfg.MongoURI == "" {
		st, err := embedded.Open(filepath.Join(cfg.DataDir, datadir.EmbeddedDir), embedded.Options{Logger: log})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { _ = st.Close() }, nil
	}
	client, err := mongostore.Connect(ctx, mongostore.ConnectOptions{
		URI: cfg.MongoURI, Database: cfg.MongoDatabase, MaxPoolSize: cfg.MongoPoolSize,
		ConnectTimeout: cfg.MongoTimeout, WriteConcern: cfg.MongoWriteConcern,
	})
	if err != nil {
		return nil, nil, err
	}
	st := mongostore.New(client, cfg.MongoDatabase, mongostore.Options{Logger: log})
	ictx, cancel := context.WithTimeout(ctx, cfg.MongoTimeout)
	defer cancel()
	if err := st.EnsureIndexes(ictx); err != nil {
		_ = st.Close()
		return nil, nil, fmt.Errorf("mongodb indexes: %w", err)
	}
	return st, func() { _ = st.Close() }, nil
}
