// Package bench is herald bench: it measures a Herald server end to end,
// over loopback HTTP and websocket, against Herald's targets. Without -url
// it seeds data directories of its own and starts this binary as the
// server on them.
package bench

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"herald/graph/auth"
	"herald/server/datadir"
	"herald/store"
	"herald/store/embedded"
	"herald/store/seed"
	"herald/store/service"
)

// Flags are bench's own flags; the server's flags (Config) set the
// timeline strategy and its knobs.
type Flags struct {
	url          string
	jsonOut      string
	seed         uint64
	users        int
	avgFollows   int
	messages     int
	posts        int
	duration     time.Duration
	concurrency  string
	viewers      int
	subscribers  int
	liveTimeout  time.Duration
	rawEntries   int
	stratUsers   int
	skip         string
	seedBatch    int
	keepData     bool
	concurrencyN []int

	sustainedDuration    time.Duration
	sustainedConcurrency int
	sustainedFollowers   int
}

// Register registers the flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.url, "url", "", "measure the server at this base URL (e.g. http://127.0.0.1:8080), seeded by herald seed with the same -seed, -users, -avg-follows and -messages, whose token secret bench reads from HERALD_TOKEN_SECRET or -data; empty: bench seeds a data directory of its own and starts a server on it")
	fs.StringVar(&f.jsonOut, "json", "", "also write the results as JSON to this file (- for standard output, instead of the table)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the generated network")
	fs.IntVar(&f.users, "users", 101_000, "users in the network; bench's own network pins authors of 100,000, 10,000 and 1,000 followers among them")
	fs.IntVar(&f.avgFollows, "avg-follows", 10, "average number of users each user follows")
	fs.IntVar(&f.messages, "messages", 101_000, "messages in the network")
	fs.IntVar(&f.posts, "posts", 20, "posts by each fan-out author")
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "how long the timeline reads run at each concurrency")
	fs.StringVar(&f.concurrency, "concurrency", "1,8,64", "concurrent clients of the timeline reads, comma-separated")
	fs.IntVar(&f.viewers, "viewers", 1000, "distinct users whose timelines are read")
	fs.IntVar(&f.subscribers, "subscribers", 10_000, "websocket subscribers of the live test, followers of one author")
	fs.DurationVar(&f.liveTimeout, "live-timeout", 10*time.Second, "how long the live test waits for every subscriber's event")
	fs.IntVar(&f.rawEntries, "raw-entries", 1_000_000, "inbox entries appended to measure the embedded engine's own limit")
	fs.IntVar(&f.stratUsers, "strategy-users", 20_000, "users in the network each strategy is measured on (it pins an author of 1,000 followers)")
	fs.DurationVar(&f.sustainedDuration, "sustained-duration", 60*time.Second, "how long the sustained section posts")
	fs.IntVar(&f.sustainedConcurrency, "sustained-concurrency", 8, "clients posting at once in the sustained section")
	fs.IntVar(&f.sustainedFollowers, "sustained-followers", 200, "followers subscribed in the sustained section, each drawn for one of its posting authors")
	fs.StringVar(&f.skip, "skip", "", "sections not to run, comma-separated: raw, fanout, reads, live, conversations, sustained, strategies, lanes")
	fs.IntVar(&f.seedBatch, "seed-batch", seed.DefaultBatchRecords, "records written in one batch when bench seeds")
	fs.BoolVar(&f.keepData, "keep-data", false, "keep the data directories bench creates (their paths are printed)")
}

// Usage heads bench's -h.
const Usage = `Usage: herald bench [flags]

Measures Herald end to end over loopback HTTP and websocket and prints
each figure beside its target, PASS or MISS. Without -url it seeds a
network into a temporary data directory, starts this binary as a server
on it (flags such as -fanout pass through), and measures: the embedded
engine's own append limit (raw), fan-out from authors of 1k, 10k and 100k
followers (fanout), timeline reads at several concurrencies (reads),
websocket subscribers receiving a post (live), typical authors posting
from several clients at once for a minute while subscribed followers time
each post's arrival (sustained), sending direct messages and reading a
conversation's page and the conversation list (conversations), every
strategy on one smaller network (strategies), and fan-out with 1, 2 and
4 lanes while the most followed authors of that network post at once
(lanes). Server-side figures are
read from the server's /metrics. Every loop is bounded in count and time.

Flags:`

// figure is one measured number and, where there is one, its target.
type figure struct {
	Section string  `json:"section"`
	Name    string  `json:"name"`
	Value   float64 `json:"value"`
	Unit    string  `json:"unit"`
	Target  string  `json:"target,omitempty"`
	Pass    *bool   `json:"pass,omitempty"`
	Note    string  `json:"note,omitempty"`
	Samples int     `json:"samples,omitempty"`
}

// strategyRow is one line of the strategies table.
type strategyRow struct {
	Strategy        string  `json:"strategy"`
	PostP50Ms       float64 `json:"post_p50_ms"`
	DeliveryP50Ms   float64 `json:"delivery_1k_p50_ms"`
	DiskPerPostKiB  float64 `json:"disk_per_post_kib"`
	ReadsPerSec     float64 `json:"reads_per_sec_c8"`
	ReadP50Ms       float64 `json:"read_server_p50_ms"`
	ReadP99Ms       float64 `json:"read_server_p99_ms"`
	RoundTrips      float64 `json:"storage_calls_per_read"`
	StoredBytesUser float64 `json:"seeded_bytes_per_user"`
}

// benchReport is what -json writes.
type benchReport struct {
	Date    string `json:"date"`
	Command string `json:"command"`
	Machine string `json:"machine"`
	Fanout  string `json:"fanout"`
	Network string `json:"network"`
	// StrategiesNetwork is the network of the strategies table.
	StrategiesNetwork string        `json:"strategies_network,omitempty"`
	Figures           []figure      `json:"figures"`
	Strategies        []strategyRow `json:"strategies,omitempty"`
	Seconds           float64       `json:"seconds"`
}

// Config is what bench takes of the server's configuration: the timeline
// strategy and its knobs, which the servers bench starts run with, and
// where a server at -url keeps its token secret.
type Config struct {
	Fanout             service.Strategy
	CelebrityThreshold int
	InactiveAfter      time.Duration
	InboxCap           int
	CacheTTL           time.Duration
	FollowBackfill     int
	// DataDir is the data directory of a server at -url, whose token
	// secret bench reads unless TokenSecret is set.
	DataDir     string
	TokenSecret []byte
	// MongoURI is the server's -mongodb-uri, which bench takes only with
	// -url.
	MongoURI string
}

// bench is one run of herald bench.
type bench struct {
	cfg    Config
	f      Flags
	log    *slog.Logger
	stderr io.Writer
	srv    *benchServer
	net    *seed.Network
	signer *auth.Signer
	report benchReport
	skip   map[string]bool
	raw    float64 // entries/s
	// cleanup are the data directories to remove at the end.
	cleanup []string
}

func (b *bench) add(fig figure) { b.report.Figures = append(b.report.Figures, fig) }

func atLeast(v, target float64, format string) (string, *bool) {
	p := v >= target
	return fmt.Sprintf("≥ "+format, target), &p
}

func atMost(v, target float64, format string) (string, *bool) {
	p := v <= target
	return fmt.Sprintf("≤ "+format, target), &p
}

// Run is herald bench, run with args, which Flags bf and the server's cfg
// were parsed from; it logs to log.
func Run(ctx context.Context, cfg Config, bf Flags, args []string, log *slog.Logger, stdout, stderr io.Writer) error {
	var err error
	if bf.concurrencyN, err = splitInts(bf.concurrency); err != nil {
		return fmt.Errorf("-concurrency: %w", err)
	}
	if bf.posts < 1 || bf.duration <= 0 || bf.viewers < 1 || bf.subscribers < 0 || bf.rawEntries < 1 || bf.seedBatch < 1 ||
		bf.sustainedDuration <= 0 || bf.sustainedConcurrency < 1 || bf.sustainedFollowers < 1 {
		return errors.New("bench: -posts, -duration, -viewers, -raw-entries, -seed-batch and the -sustained- flags must be positive, -subscribers not negative")
	}
	if bf.url == "" && cfg.MongoURI != "" {
		return errors.New("bench starts an embedded server of its own; to measure MongoDB, seed it with herald seed, start herald on it and give bench its -url")
	}
	b := &bench{cfg: cfg, f: bf, log: log, stderr: stderr, skip: map[string]bool{}}
	for s := range strings.SplitSeq(bf.skip, ",") {
		if s = strings.TrimSpace(s); s != "" {
			b.skip[s] = true
		}
	}
	raiseFileLimit(b.log)
	start := time.Now()
	b.report.Date = start.UTC().Format(time.RFC3339)
	b.report.Command = "herald bench " + strings.Join(args, " ")
	b.report.Machine = fmt.Sprintf("%s/%s, %d CPUs, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	b.report.Fanout = string(cfg.Fanout)

	if err := b.run(ctx); err != nil {
		return err
	}
	b.report.Seconds = time.Since(start).Seconds()
	return b.write(stdout)
}

func (b *bench) run(ctx context.Context) error {
	if !b.skip["raw"] {
		if err := b.measureRaw(); err != nil {
			return err
		}
	}
	if !b.skip["fanout"] || !b.skip["reads"] || !b.skip["live"] || !b.skip["sustained"] || !b.skip["conversations"] {
		if err := b.startMain(ctx); err != nil {
			return err
		}
		err := b.mainSections(ctx)
		b.srv.stop()
		if err != nil {
			return err
		}
	}
	if !b.skip["strategies"] {
		if b.f.url != "" {
			fmt.Fprintln(b.stderr, "bench: the strategies section needs servers of bench's own; skipped with -url")
		} else if err := b.measureStrategies(ctx); err != nil {
			return err
		}
	}
	if !b.skip["lanes"] {
		if b.f.url != "" {
			fmt.Fprintln(b.stderr, "bench: the lanes section needs servers of bench's own; skipped with -url")
		} else if err := b.measureLanes(ctx); err != nil {
			return fmt.Errorf("bench lanes: %w", err)
		}
	}
	return nil
}

func (b *bench) mainSections(ctx context.Context) error {
	if !b.skip["fanout"] {
		if err := b.measureFanout(ctx); err != nil {
			return fmt.Errorf("bench fanout: %w", err)
		}
	}
	if !b.skip["reads"] {
		if err := b.measureReads(ctx, "reads", b.f.concurrencyN, b.f.duration, nil); err != nil {
			return fmt.Errorf("bench reads: %w", err)
		}
		// The readers, warmed up by the reads above: no second warm-up.
		tokens, err := b.readerTokens()
		if err != nil {
			return fmt.Errorf("bench reads: %w", err)
		}
		if err := b.measureRichReads(ctx, "reads", tokens, b.f.duration); err != nil {
			return fmt.Errorf("bench reads: %w", err)
		}
		for _, tg := range []toggle{likeToggle, repostToggle} {
			if err := b.measureToggle(ctx, "reads", tokens[0], tg); err != nil {
				return fmt.Errorf("bench %ss: %w", tg.name, err)
			}
		}
	}
	if !b.skip["live"] && b.f.subscribers > 0 {
		if err := b.measureLive(ctx); err != nil {
			return fmt.Errorf("bench live: %w", err)
		}
	}
	if !b.skip["conversations"] {
		if err := b.measureConversations(ctx); err != nil {
			return fmt.Errorf("bench conversations: %w", err)
		}
	}
	// Last: it leaves the network many posts heavier.
	if !b.skip["sustained"] {
		if err := b.measureSustained(ctx); err != nil {
			return fmt.Errorf("bench sustained: %w", err)
		}
	}
	return nil
}

// measureRaw measures the embedded engine's own limit for fan-out's
// writes, in a fresh directory, before any server runs.
func (b *bench) measureRaw() error {
	dir, err := os.MkdirTemp("", "herald-bench-raw-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(b.stderr, "bench: raw engine: appending %d inbox entries\n", b.f.rawEntries)
	// Batches of the size a delivery chunk commits.
	rate, err := embedded.RawAppendRate(filepath.Join(dir, "db"), b.f.rawEntries, service.DefaultChunkSize)
	if err != nil {
		return err
	}
	b.raw = rate
	b.add(figure{Section: "raw", Name: "engine append limit (synced batches of one key per entry)", Value: rate, Unit: "entries/s"})
	return nil
}

// startMain seeds bench's network (or takes the one at -url) and its
// server.
func (b *bench) startMain(ctx context.Context) error {
	cfg := seed.Config{Seed: b.f.seed, Users: b.f.users, AvgFollows: b.f.avgFollows, Messages: b.f.messages,
		Strategy: b.cfg.Fanout, CelebrityThreshold: b.cfg.CelebrityThreshold}
	if b.f.url == "" {
		cfg.Pinned = []int{100_000, 10_000, 1_000}
		for len(cfg.Pinned) > 0 && cfg.Pinned[0] >= b.f.users {
			cfg.Pinned = cfg.Pinned[1:] // a small network pins what fits
		}
	}
	n, err := seed.Generate(cfg)
	if err != nil {
		return err
	}
	b.net = n
	b.report.Network = describeNetwork(n)
	if b.f.url != "" {
		secret := b.cfg.TokenSecret
		if secret == nil {
			if secret, err = readTokenSecret(b.cfg.DataDir); err != nil {
				return err
			}
		}
		b.signer = auth.NewSigner(secret, 24*time.Hour)
		b.srv = &benchServer{base: strings.TrimSuffix(b.f.url, "/"), client: newBenchClient(128)}
		return nil
	}
	dir, secret, err := b.seedDir(ctx, n, "main")
	if err != nil {
		return err
	}
	b.signer = auth.NewSigner(secret, 24*time.Hour)
	b.srv, err = startBenchServer(ctx, dir, b.serverFlags(b.cfg.Fanout), b.stderr)
	return err
}

// serverFlags are the flags of a server bench starts: its strategy, and
// the timeline settings bench was given.
func (b *bench) serverFlags(st service.Strategy) []string {
	return []string{
		"-fanout", string(st),
		"-celebrity-threshold", fmt.Sprint(b.cfg.CelebrityThreshold),
		"-inbox-cap", fmt.Sprint(b.cfg.InboxCap),
		"-cache-ttl", b.cfg.CacheTTL.String(),
		"-follow-backfill", fmt.Sprint(b.cfg.FollowBackfill),
		"-inactive-after", b.cfg.InactiveAfter.String(),
	}
}

// seedDir seeds n into a new temporary data directory and returns it
// with the token secret the server will use.
func (b *bench) seedDir(ctx context.Context, n *seed.Network, name string) (string, []byte, error) {
	dir, err := os.MkdirTemp("", "herald-bench-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	if b.f.keepData {
		fmt.Fprintf(b.stderr, "bench: data directory %s\n", dir)
	}
	b.cleanup = append(b.cleanup, dir)
	secret, err := datadir.LoadTokenSecret(dir, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		return "", nil, err
	}
	st, err := embedded.Open(filepath.Join(dir, datadir.EmbeddedDir), embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", nil, err
	}
	hash, err := store.HashPassword("herald-bench", 0)
	if err != nil {
		_ = st.Close()
		return "", nil, err
	}
	fmt.Fprintf(b.stderr, "bench: seeding %s (%d records)\n", describeNetwork(n), n.Records())
	t0 := time.Now()
	_, err = seed.Load(ctx, st, n, seed.LoadOptions{PasswordHash: hash, LastSeen: time.Now(), BatchRecords: b.f.seedBatch})
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", nil, err
	}
	fmt.Fprintf(b.stderr, "bench: seeded in %v\n", time.Since(t0).Round(time.Millisecond))
	return dir, secret, nil
}

func describeNetwork(n *seed.Network) string {
	c := n.Config()
	return fmt.Sprintf("seed %d, %d users, %d follows, %d messages", c.Seed, n.Users(), n.Edges(), c.Messages)
}

// token returns a bearer token of user i.
func (b *bench) token(i int) (string, error) {
	t, _, err := b.signer.IssueFor(b.net.UserID(i), 0) // seeded users have never logged out
	return t, err
}

// readTokenSecret reads the secret a server keeps in its data directory,
// without creating one.
func readTokenSecret(dataDir string) ([]byte, error) {
	secret, err := datadir.ReadSecretFile(filepath.Join(dataDir, datadir.SecretFile))
	if err != nil {
		return nil, fmt.Errorf("bench: the server's token secret: set %s, or -data to the server's data directory: %w", datadir.EnvTokenSecret, err)
	}
	return secret, nil
}

// raiseFileLimit raises the open-file limit to its hard limit: every
// websocket subscriber is a connection, in bench and in the server it
// starts, which inherits the limit.
func raiseFileLimit(log *slog.Logger) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return
	}
	if l.Cur < l.Max {
		l.Cur = l.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
			log.Warn("bench: cannot raise the open-file limit", "err", err)
		}
	}
}

// write prints the table, or the JSON, and writes the JSON file.
func (b *bench) write(stdout io.Writer) error {
	for _, dir := range b.cleanup {
		if !b.f.keepData {
			_ = os.RemoveAll(dir)
		}
	}
	if b.f.jsonOut != "" {
		js, err := json.MarshalIndent(b.report, "", "  ")
		if err != nil {
			return err
		}
		js = append(js, '\n')
		if b.f.jsonOut == "-" {
			_, err = stdout.Write(js)
			return err
		}
		if err := os.WriteFile(b.f.jsonOut, js, 0o644); err != nil {
			return err
		}
	}
	r := b.report
	fmt.Fprintf(stdout, "herald bench, %s, %s\nstrategy %s; network %s; %.0f s\n\n", r.Date, r.Machine, r.Fanout, r.Network, r.Seconds)
	tw := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "section\tfigure\tvalue\ttarget\t")
	missed := 0
	for _, f := range r.Figures {
		verdict := ""
		if f.Pass != nil {
			verdict = "PASS"
			if !*f.Pass {
				verdict, missed = "MISS", missed+1
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s %s\t%s %s\t%s\n", f.Section, f.Name, formatValue(f.Value), f.Unit, f.Target, verdict, f.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Strategies) > 0 {
		fmt.Fprintf(stdout, "\nstrategies (each on %s; an author of 1,000 followers posts):\n", r.StrategiesNetwork)
		tw = tabwriter.NewWriter(stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "strategy\tpost p50 ms\tdelivered to all p50 ms\tdisk per post KiB\tseeded bytes/user\treads/s c=8\tread p50 ms\tread p99 ms\tstorage calls/read\t")
		for _, s := range r.Strategies {
			fmt.Fprintf(tw, "%s\t%.2f\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t%.2f\t%.1f\t\n", s.Strategy, s.PostP50Ms, s.DeliveryP50Ms, s.DiskPerPostKiB, s.StoredBytesUser, s.ReadsPerSec, s.ReadP50Ms, s.ReadP99Ms, s.RoundTrips)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if missed > 0 {
		fmt.Fprintf(stdout, "\n%d target(s) missed\n", missed)
	} else {
		fmt.Fprintln(stdout, "\nevery target met")
	}
	return nil
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}
