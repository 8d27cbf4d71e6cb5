package service_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
	"herald/store/storetest"
)

// The measured trade-off table of the timeline strategies
// (docs/benchmarks.md#timeline-strategies-measured). Every strategy
// runs on the embedded backend over the same generated graph: a reader who
// follows many ordinary authors and one celebrity, whose followers are a
// large pool of users. Writes and bytes are Pebble's own counters
// (embedded.Stats); calls are counted by a wrapper around the Backend.
//
//	go test -run '^$' -bench Strategies -benchtime=1x -count=3 ./store/
//
// It prints that document's table at the end; HERALD_BENCH_CACHE_MIB sets the
// block cache size.

// strategyGraph sizes the graph and the measurements.
type strategyGraph struct {
	Authors         int // ordinary authors the reader follows, besides the celebrity
	AuthorFollowers int // pool users following each ordinary author, besides the reader
	Messages        int // messages per author before measuring
	CelebFollowers  int // the celebrity's followers: the whole pool
	Posts           int // ordinary posts per measured iteration
	Reads           int // inbox reads per measured iteration
}

// benchGraph is the size docs/benchmarks.md's table is measured at: the
// reader follows 200 authors; a post reaches 10,000 followers.
var benchGraph = strategyGraph{Authors: 199, AuthorFollowers: 99, Messages: 5, CelebFollowers: 10_000, Posts: 20, Reads: 100}

// smokeGraph runs every measurement on a tiny graph under go test.
var smokeGraph = strategyGraph{Authors: 19, AuthorFollowers: 4, Messages: 4, CelebFollowers: 30, Posts: 3, Reads: 3}

const pageSize = 50

// graph is the users and follows every strategy starts from: a closed
// data directory, copied for each strategy, so that all of them measure
// the very same graph and it is built once.
type graph struct {
	dir     string
	reader  store.ID
	authors []store.ID // ordinary authors, all followed by the reader
	celeb   store.ID
	pool    []store.ID // the celebrity's followers
}

// bench is one strategy's service over a copy of the graph.
type bench struct {
	graph
	tb    testing.TB
	st    *embedded.Store
	calls *storetest.Counting
	svc   *service.Service

	mu       sync.Mutex
	timeline []store.ID // every message of the reader's followees
}

// buildGraph makes the users and follows straight through the backend (no
// bcrypt), from parallel writers so that synced commits share fsyncs.
func buildGraph(tb testing.TB, g strategyGraph) *graph {
	tb.Helper()
	ctx := context.Background()
	gr := &graph{dir: tb.TempDir()}
	st, err := embedded.Open(gr.dir, embedded.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	mk := func(handle string) store.ID {
		u := &store.User{ID: store.NewID(now), Handle: handle, DisplayName: handle, CreatedAt: now, LastSeenAt: now}
		if err := st.CreateUser(ctx, u); err != nil {
			tb.Error(err) // Fatal may not be called from the parallel writers
		}
		return u.ID
	}
	gr.reader, gr.celeb = mk("reader"), mk("celeb")
	gr.authors = make([]store.ID, g.Authors)
	gr.pool = make([]store.ID, g.CelebFollowers)
	parallel(len(gr.authors), func(i int) { gr.authors[i] = mk(fmt.Sprintf("a%05d", i)) })
	parallel(len(gr.pool), func(i int) { gr.pool[i] = mk(fmt.Sprintf("p%05d", i)) })

	// Each author's followers are a fixed random draw from the pool.
	rng := rand.New(rand.NewPCG(1, 2))
	follows := make([][]store.ID, len(gr.pool)) // pool user → authors followed
	for _, a := range gr.authors {
		for _, p := range rng.Perm(len(gr.pool))[:g.AuthorFollowers] {
			follows[p] = append(follows[p], a)
		}
	}
	follow := func(f, e store.ID) {
		if _, err := st.Follow(ctx, f, e, now); err != nil {
			tb.Error(err)
		}
	}
	parallel(len(gr.pool), func(i int) {
		follow(gr.pool[i], gr.celeb)
		for _, a := range follows[i] {
			follow(gr.pool[i], a)
		}
	})
	parallel(len(gr.authors)+1, func(i int) {
		if i == len(gr.authors) {
			follow(gr.reader, gr.celeb)
		} else {
			follow(gr.reader, gr.authors[i])
		}
	})
	if err := st.Close(); err != nil {
		tb.Fatal(err)
	}
	if tb.Failed() {
		tb.FailNow()
	}
	return gr
}

// newBench opens a copy of gr, stores the authors' first messages as
// strategy would, and runs their fan-out.
func newBench(tb testing.TB, gr *graph, g strategyGraph, strategy service.Strategy) *bench {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	if err := os.CopyFS(dir, os.DirFS(gr.dir)); err != nil {
		tb.Fatal(err)
	}
	st, err := embedded.Open(dir, embedded.Options{CacheBytes: cacheBytes(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	x := &bench{graph: *gr, tb: tb, st: st, calls: storetest.NewCounting(st)}

	// Under hybrid the celebrity is above the threshold and ordinary
	// authors below it.
	x.svc = service.NewService(x.calls, pubsub.NewHub(), service.Options{
		Strategy:           strategy,
		CelebrityThreshold: g.CelebFollowers / 2,
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})

	// Messages are stored with the job PostMessage would store; Start then
	// runs the jobs, as after a restart.
	parallel(len(x.authors)+1, func(i int) {
		author, pulled := x.celeb, strategy == service.StrategyHybrid
		if i < len(x.authors) {
			author, pulled = x.authors[i], false
		}
		for range g.Messages {
			at := time.Now().UTC().Truncate(time.Millisecond)
			m := &store.Message{ID: store.NewID(at), AuthorID: author, Text: messageText, Kind: store.KindPost, CreatedAt: at, Pulled: pulled}
			var job *storage.Job
			if layout := strategy.Layout(); layout != storage.LayoutNone && !pulled {
				job = &storage.Job{ID: m.ID, Kind: storage.JobDeliver, Layout: layout, MessageID: m.ID, AuthorID: author, CreatedAt: at}
			}
			if err := st.CreateMessage(ctx, m, job); err != nil {
				tb.Error(err) // Fatal may not be called from the parallel writers
			}
			x.addTimeline(m.ID)
		}
	})
	if tb.Failed() {
		tb.FailNow()
	}
	if err := x.svc.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = x.svc.Close(context.Background()) })
	x.waitIdle()
	// Reads are measured against sstables, as for data older than the memtable.
	if err := st.Flush(); err != nil {
		tb.Fatal(err)
	}
	return x
}

// cacheBytes is the block cache size to measure with: the backend's
// default, or HERALD_BENCH_CACHE_MIB, to see what the cache changes.
func cacheBytes(tb testing.TB) int64 {
	v := os.Getenv("HERALD_BENCH_CACHE_MIB")
	if v == "" {
		return 0
	}
	mib, err := strconv.ParseInt(v, 10, 64)
	if err != nil || mib <= 0 {
		tb.Fatalf("HERALD_BENCH_CACHE_MIB=%q: want a positive number of MiB", v)
	}
	return mib << 20
}

const messageText = "a message of ordinary length, say eighty characters or so, for the benchmark"

// parallel runs f(0..n-1) on 32 goroutines.
func parallel(n int, f func(i int)) {
	const workers = 32
	var wg sync.WaitGroup
	for w := range min(workers, n) {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				f(i)
			}
		})
	}
	wg.Wait()
}

func (x *bench) addTimeline(id store.ID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.timeline = append(x.timeline, id)
}

// waitIdle waits until the fan-out has nothing queued or running.
func (x *bench) waitIdle() {
	deadline := time.Now().Add(2 * time.Minute)
	for !x.svc.Idle() {
		if time.Now().After(deadline) {
			x.tb.Fatal("fan-out still busy after 2 minutes")
		}
		time.Sleep(20 * time.Microsecond)
	}
}

// settle waits until Pebble runs no flush or compaction, so that the
// measurement does not share the two cores with one left by the last.
func (x *bench) settle() {
	deadline := time.Now().Add(30 * time.Second)
	for x.stats().Busy && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
}

func (x *bench) stats() embedded.Stats {
	s, err := x.st.Stats()
	if err != nil {
		x.tb.Fatal(err)
	}
	return s
}

func (x *bench) liveBytes() (int64, map[byte]embedded.Usage) {
	u, err := x.st.LiveData()
	if err != nil {
		x.tb.Fatal(err)
	}
	var n int64
	for _, v := range u {
		n += v.Bytes
	}
	return n, u
}

// checkPage fails unless page is the newest pageSize messages of the
// reader's followees, with its total count.
func (x *bench) checkPage(page service.InboxPage) {
	x.tb.Helper()
	x.mu.Lock()
	want := slices.Clone(x.timeline)
	x.mu.Unlock()
	slices.SortFunc(want, func(a, b store.ID) int { return b.Compare(a) })
	total := len(want)
	want = want[:min(pageSize, len(want))]
	got := make([]store.ID, len(page.Items))
	for i, it := range page.Items {
		got[i] = it.MessageID
		if it.Message == nil || it.Message.ID != it.MessageID {
			x.tb.Fatalf("%s: item %d has no message loaded", x.svc.Strategy(), i)
		}
	}
	if !slices.Equal(got, want) {
		x.tb.Fatalf("%s: the inbox page holds %d items, not the newest %d of %d messages", x.svc.Strategy(), len(got), len(want), total)
	}
	if !page.HasMore || page.Counts.Total != total || page.Counts.Unread != total {
		x.tb.Fatalf("%s: hasMore %v, counts %+v; want true, total and unread %d", x.svc.Strategy(), page.HasMore, page.Counts, total)
	}
}

// readCost is the cost of n inbox reads.
type readCost struct {
	n       int
	elapsed time.Duration // in Service.Inbox only
	each    []time.Duration
	calls   map[string]int64
	pebble  embedded.Stats
}

func (r readCost) per(v float64) float64 { return v / float64(r.n) }

// reads reads the reader's first page n times, each checked. With miss,
// the reader's cache is dropped before each read (not measured), so that
// the cache strategy reads on a miss.
func (x *bench) reads(n int, miss bool) readCost {
	ctx := context.Background()
	r := readCost{n: n, calls: map[string]int64{}}
	x.settle()
	for range n {
		if miss {
			if err := x.st.DropInboxCache(ctx, x.reader); err != nil {
				x.tb.Fatal(err)
			}
		}
		x.calls.Reset()
		before := x.stats()
		start := time.Now()
		page, err := x.svc.Inbox(ctx, x.reader, store.Forward(store.NilID, pageSize))
		r.elapsed += time.Since(start)
		r.each = append(r.each, time.Since(start))
		d := x.stats().Sub(before)
		if err != nil {
			x.tb.Fatal(err)
		}
		calls, _ := x.calls.Snapshot()
		for k, v := range calls {
			r.calls[k] += v
		}
		r.pebble = addStats(r.pebble, d)
		x.checkPage(page)
	}
	return r
}

func addStats(a, b embedded.Stats) embedded.Stats {
	return embedded.Stats{KeysWritten: a.KeysWritten + b.KeysWritten, WALBytes: a.WALBytes + b.WALBytes, BlockReads: a.BlockReads + b.BlockReads, BlockMisses: a.BlockMisses + b.BlockMisses}
}

// writeCost is the cost of n posts, each until its fan-out was done.
type writeCost struct {
	n       int
	elapsed time.Duration
	each    []time.Duration
	pebble  embedded.Stats
	stored  int64 // growth of the live data
	commits int   // backend calls that write (each is one synced batch here)
}

// posts posts n messages by ordinary authors in turn, each waited for.
func (x *bench) posts(n int, iter int) writeCost {
	ctx := context.Background()
	w := writeCost{n: n}
	x.settle()
	live0, _ := x.liveBytes()
	x.calls.Reset()
	before := x.stats()
	for i := range n {
		author := x.authors[(iter*n+i)%len(x.authors)]
		start := time.Now()
		m, err := x.svc.PostMessage(ctx, author, service.PostInput{Text: messageText})
		if err != nil {
			x.tb.Fatal(err)
		}
		x.waitIdle()
		w.elapsed += time.Since(start)
		w.each = append(w.each, time.Since(start))
		x.addTimeline(m.ID)
	}
	w.pebble = x.stats().Sub(before)
	w.commits = int(x.calls.Writes())
	live1, _ := x.liveBytes()
	w.stored = live1 - live0
	return w
}

// fanout posts one message by the celebrity and waits until every follower
// has it (or, where nothing is fanned out, until their subscriptions were
// told). A follower's first page must then start with it.
func (x *bench) fanout() writeCost {
	ctx := context.Background()
	w := writeCost{n: 1}
	x.settle()
	x.calls.Reset()
	before := x.stats()
	start := time.Now()
	m, err := x.svc.PostMessage(ctx, x.celeb, service.PostInput{Text: messageText})
	if err != nil {
		x.tb.Fatal(err)
	}
	x.waitIdle()
	w.elapsed = time.Since(start)
	w.pebble = x.stats().Sub(before)
	w.commits = int(x.calls.Writes())
	x.addTimeline(m.ID)
	page, err := x.svc.Inbox(ctx, x.pool[len(x.pool)-1], store.Forward(store.NilID, 1))
	if err != nil || len(page.Items) != 1 || page.Items[0].MessageID != m.ID {
		x.tb.Fatalf("%s: a follower's inbox does not start with the celebrity's post (%d items, %v)", x.svc.Strategy(), len(page.Items), err)
	}
	return w
}

// readVariants are the reads measured per strategy: the cache strategy's
// miss and hit separately.
func readVariants(s service.Strategy) []string {
	if s == service.StrategyCache {
		return []string{"read-miss", "read-hit"}
	}
	return []string{"read"}
}

func TestStrategiesBenchSmoke(t *testing.T) {
	gr := buildGraph(t, smokeGraph)
	for _, s := range service.Strategies {
		t.Run(string(s), func(t *testing.T) {
			x := newBench(t, gr, smokeGraph, s)
			for _, v := range readVariants(s) {
				r := x.reads(smokeGraph.Reads, v == "read-miss")
				if r.calls["FindMessagesByKeys"] == 0 {
					t.Fatalf("%s: no messages loaded", v)
				}
			}
			w := x.posts(smokeGraph.Posts, 0)
			if w.pebble.KeysWritten == 0 || w.pebble.WALBytes == 0 || w.stored <= 0 || w.commits < w.n {
				t.Fatalf("posts: %+v", w)
			}
			x.fanout()
			// The posts and the celebrity's post are on the reader's page now.
			x.reads(1, false)
		})
	}
}

// strategyResults collects every measurement of each strategy and
// metric (one per run of -count), for the table BenchmarkStrategies prints.
var strategyResults = map[string]map[string][]float64{}

func record(strategy, metric string, v float64) {
	if strategyResults[strategy] == nil {
		strategyResults[strategy] = map[string][]float64{}
	}
	strategyResults[strategy][metric] = append(strategyResults[strategy][metric], v)
}

// result is the median of a metric's measurements so far.
func result(strategy, metric string) float64 {
	vs := slices.Sorted(slices.Values(strategyResults[strategy][metric]))
	if len(vs) == 0 {
		return 0
	}
	return vs[len(vs)/2]
}

func BenchmarkStrategies(b *testing.B) {
	g := benchGraph
	start := time.Now()
	gr := buildGraph(b, g)
	fmt.Printf("graph: %d users, %d follows, built in %v\n", 2+g.Authors+g.CelebFollowers, g.CelebFollowers+g.Authors*g.AuthorFollowers+g.Authors+1, time.Since(start).Round(time.Millisecond))
	for _, s := range service.Strategies {
		b.Run(string(s), func(b *testing.B) {
			x := newBench(b, gr, g, s)
			for _, v := range readVariants(s) {
				b.Run(v, func(b *testing.B) {
					var r readCost
					for range b.N {
						r = x.reads(g.Reads, v == "read-miss")
					}
					var calls int64
					for _, c := range r.calls {
						calls += c
					}
					report(b, string(s), v, map[string]float64{
						"calls/read":  r.per(float64(calls)),
						"blocks/read": r.per(float64(r.pebble.BlockReads)),
						"misses/read": r.per(float64(r.pebble.BlockMisses)),
						"keys/read":   r.per(float64(r.pebble.KeysWritten)),
						"µs/read":     r.per(float64(r.elapsed.Microseconds())),
						"p50-µs/read": float64(median(r.each).Microseconds()),
					})
					b.Logf("%s %s: backend calls per read: %s", s, v, perRead(r))
				})
			}
			b.Run("post", func(b *testing.B) {
				var w writeCost
				for i := range b.N {
					w = x.posts(g.Posts, i)
				}
				n := float64(w.n)
				report(b, string(s), "post", map[string]float64{
					"keys/post":    float64(w.pebble.KeysWritten) / n,
					"walB/post":    float64(w.pebble.WALBytes) / n,
					"storedB/post": float64(w.stored) / n,
					"commits/post": float64(w.commits) / n,
					"µs/post":      float64(w.elapsed.Microseconds()) / n,
					"p50-µs/post":  float64(median(w.each).Microseconds()),
				})
			})
			b.Run("fanout10k", func(b *testing.B) {
				var w writeCost
				var total time.Duration
				for range b.N {
					w = x.fanout()
					total += w.elapsed
				}
				ms := float64(total.Microseconds()) / 1000 / float64(b.N)
				report(b, string(s), "fanout", map[string]float64{
					"ms/fanout":    ms,
					"deliveries/s": float64(g.CelebFollowers) / (ms / 1000),
					"keys/fanout":  float64(w.pebble.KeysWritten),
					"walB/fanout":  float64(w.pebble.WALBytes),
					"commits/post": float64(w.commits),
				})
			})
		})
	}
	// Printed, not logged: a parent benchmark's log is not shown.
	fmt.Printf("\n%s\n", strategyTable(g))
}

// median is the middle of ds: on a shared machine, less at the mercy of
// the other processes than the mean.
func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

// report reports metrics on b and records them for the table under
// phase/metric.
func report(b *testing.B, strategy, phase string, ms map[string]float64) {
	for _, k := range slices.Sorted(maps.Keys(ms)) {
		b.ReportMetric(ms[k], k)
		record(strategy, phase+" "+k, ms[k])
	}
}

// perRead formats backend calls per read, by method.
func perRead(r readCost) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.calls)) {
		parts = append(parts, fmt.Sprintf("%s %.4g", k, r.per(float64(r.calls[k]))))
	}
	return strings.Join(parts, ", ")
}

// strategyTable renders the recorded results (medians over -count) as the
// markdown table of docs/benchmarks.md. A fan-out that stored fewer keys than there are followers only
// told their subscriptions: the post reaches timelines when they are read.
func strategyTable(g strategyGraph) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "| strategy | post to %d followers: keys written | WAL bytes | bytes stored | until delivered (median) | post to %s followers: keys written | WAL bytes | until delivered | deliveries/s | inbox read of %d, reader following %d: backend calls | Pebble blocks (cache misses) | µs (median) |\n",
		g.AuthorFollowers+1, countString(float64(g.CelebFollowers)), pageSize, g.Authors+1)
	sb.WriteString("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, s := range service.Strategies {
		if strategyResults[string(s)] == nil {
			continue
		}
		r := func(metric string) float64 { return result(string(s), metric) }
		var calls, blocks, micros []string
		for _, v := range readVariants(s) {
			tag := ""
			if v != "read" {
				tag = " " + strings.TrimPrefix(v, "read-")
			}
			calls = append(calls, fmt.Sprintf("%.0f%s", r(v+" calls/read"), tag))
			blocks = append(blocks, fmt.Sprintf("%.0f (%.0f)%s", r(v+" blocks/read"), r(v+" misses/read"), tag))
			micros = append(micros, fmt.Sprintf("%.0f%s", r(v+" p50-µs/read"), tag))
		}
		rate := countString(r("fanout deliveries/s"))
		if r("fanout keys/fanout") < float64(g.CelebFollowers) {
			rate = "none stored"
		}
		fmt.Fprintf(&sb, "| `%s` | %.0f | %s | %s | %.1f ms | %s | %s | %.1f ms | %s | %s | %s | %s |\n", s,
			r("post keys/post"), bytesString(r("post walB/post")), bytesString(r("post storedB/post")), r("post p50-µs/post")/1000,
			countString(r("fanout keys/fanout")), bytesString(r("fanout walB/fanout")), r("fanout ms/fanout"), rate,
			strings.Join(calls, ", "), strings.Join(blocks, ", "), strings.Join(micros, ", "))
	}
	return sb.String()
}

func bytesString(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	case v >= 10<<10:
		return fmt.Sprintf("%.0f KiB", v/(1<<10))
	}
	return fmt.Sprintf("%.0f B", v)
}

func countString(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0fk", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.0f,%03.0f", float64(int(v)/1000), float64(int(v)%1000))
	}
	return fmt.Sprintf("%.0f", v)
}
