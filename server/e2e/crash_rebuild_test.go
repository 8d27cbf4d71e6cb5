package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/server/datadir"
	"herald/server/internal/servertest"
	"herald/store"
	"herald/store/embedded"
	"herald/store/storage"
)

const (
	// rebuildAuthors each have rebuildSeeded messages stored before the
	// test starts, as if posted while the readers were away.
	rebuildAuthors = 10
	rebuildSeeded  = 4
	// The readers were last seen rebuildAway ago; the server's
	// -inactive-after is 30 days.
	rebuildAway = 60 * 24 * time.Hour
	// rebuildClients bounds the concurrent requests of returning readers.
	rebuildClients = 8
	// rebuildPoll is how often a rebuilding inbox is asked about. Each ask
	// is a GraphQL request that takes CPU from the rebuilds it waits for.
	rebuildPoll = 50 * time.Millisecond
	// rebuildCap is the server's default InboxCap: a rebuild brings back
	// the newest 50 messages. The test keeps every message within it, so
	// that each reader must end with all of them, whatever the timing.
	rebuildCap = 50
)

// rebuildFractions place the kill points of the killed rounds over the time
// measured in round 0 from the first returning request until the last
// rebuild of the batch was done: from among the requests to near the end.
var rebuildFractions = []float64{0, 0.15, 0.3, 0.5, 0.7, 0.9}

// rebuildScale returns how many readers follow every author, and how many
// of them return in each round; those of no batch return in the final
// pass. Under -race the server binary has the race detector too, and there
// a rebuild with its requests costs about ten times as much (on two cores:
// ~20 ms, against ~2 ms; a restarted server more), so the test takes a
// fifth of the readers to stay within a minute. A batch is then still over
// a second of rebuilds, which the kill points spread over.
func rebuildScale() (readers, batch int) {
	if servertest.RaceEnabled() {
		return 600, 60
	}
	return 3000, 300
}

const inboxProbe = `{ inbox(first: 1) { rebuilding totalCount } }`

// TestCrash_KillDuringRebuild starts the real binary over 3,000 readers
// (600 under -race; see rebuildScale) who were away for 60 days and follow
// ten authors with 40 messages between them. In each round a batch of readers comes back (one request
// each), which stores a rebuild job per reader, an author posts (a delivery
// racing the rebuilds), and the process is killed with SIGKILL at a
// different moment of the rebuilds, then restarted. After each kill the
// store is checked while no server runs; at the end every reader comes back
// once more and must hold every message exactly once, newest first, with
// exact counts, and no job may be left.
func TestCrash_KillDuringRebuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server binary and kills it repeatedly; skipped in -short mode")
	}
	require.LessOrEqual(t, rebuildAuthors*rebuildSeeded+1+len(rebuildFractions), rebuildCap,
		"every message fits in one rebuild, so the final inboxes are exact")
	nReaders, batchSize := rebuildScale()
	require.Less(t, (1+len(rebuildFractions))*batchSize, nReaders, "some readers return only in the final pass")
	ctx := context.Background()
	testStart := time.Now()
	bin := servertest.BuildHerald(t)
	data := t.TempDir()
	dbDir := filepath.Join(data, datadir.EmbeddedDir)

	seedStart := time.Now()
	g := seedRebuildGraph(t, dbDir, nReaders)
	t.Logf("seeded %d authors, %d messages and %d inactive readers following every author in %v",
		len(g.authors), len(g.seeded), len(g.readers), time.Since(seedStart).Round(time.Millisecond))

	rng := crashRand(t)
	// Tokens are minted here, with the server's secret: logging every
	// reader in would cost a bcrypt check each.
	signer := auth.NewSigner([]byte(crashSecret), time.Hour)
	tokens := make(map[store.ID]string, len(g.readers)+len(g.authors))
	for _, id := range slices.Concat(g.readers, g.authors) {
		tok, _, err := signer.IssueFor(id, 0)
		require.NoError(t, err)
		tokens[id] = tok
	}
	// Batches are drawn at random, so the order in which a restarted
	// server resumes rebuilds (by reader id) is not the order they were
	// stored in.
	order := slices.Clone(g.readers)
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	batch := func(k int) []store.ID { return order[k*batchSize : (k+1)*batchSize] }

	c := newCrashClient()
	var (
		rounds    []rebuildRound
		attempted = map[string]bool{} // texts of the posts sent
		acked     []store.ID          // posts the server answered
		problems  []string            // found between rounds
	)

	// Round 0 is not killed: it measures how long a batch of returns takes
	// to rebuild, from the first request until the last reader of the batch
	// is no longer rebuilding.
	p := startHeraldForCrash(t, bin, data)
	base := "http://" + p.addr
	start := time.Now()
	run := startReturns(c, base, tokens, batch(0), g.authors[0], "round 0")
	attempted["round 0"] = true
	run.wait()
	for _, r := range run.results {
		require.NoError(t, r.err, "round 0: the request of reader %s", r.reader)
	}
	require.NoError(t, run.post.err, "round 0: the post")
	acked = append(acked, run.post.id)
	rebuilding := checkReturns(t, 0, run.results, len(g.seeded))
	waitRebuilt(t, c, base, tokens, run.completed(), start.Add(crashWait))
	measured := time.Since(start)
	require.Positive(t, measured)
	t.Logf("round 0: %d readers returned (%d answered rebuilding: true); their rebuilds took %v (not killed)",
		len(run.results), rebuilding, measured.Round(time.Millisecond))

	for i, frac := range rebuildFractions {
		k := i + 1
		text := fmt.Sprintf("round %d", k)
		// Jitter of up to 5% of the measured time moves the kill points
		// between runs, so that over time they cover every moment.
		delay := time.Duration(frac*float64(measured)) + time.Duration(rng.Int64N(int64(measured/20)+1))
		start := time.Now()
		run := startReturns(c, base, tokens, batch(k), g.authors[k%len(g.authors)], text)
		attempted[text] = true
		time.Sleep(time.Until(start.Add(delay)))
		killHerald(t, p)
		run.wait()
		// A kill cuts requests off; it never makes the server answer an error.
		for _, r := range run.results {
			var ge gqlErrors
			require.False(t, errors.As(r.err, &ge), "round %d: reader %s: %v", k, r.reader, r.err)
		}
		var ge gqlErrors
		require.False(t, errors.As(run.post.err, &ge), "round %d: the post: %v", k, run.post.err)
		if run.post.id != store.NilID {
			acked = append(acked, run.post.id)
		}
		answered := 0
		for _, r := range run.results {
			if r.err == nil {
				answered++
			}
		}
		saidRebuilding := checkReturns(t, k, run.results, len(g.seeded))

		// No server runs: the store on disk is what the killed process
		// committed, so it tells exactly which rebuilds were done.
		st := inspectAfterKill(t, dbDir, g, batch(k), g.authors[k%len(g.authors)], text)
		for _, pr := range st.problems {
			problems = append(problems, fmt.Sprintf("round %d: %s", k, pr))
		}
		if run.post.id != store.NilID {
			assert.Equal(t, run.post.id, st.post, "round %d: the acknowledged post is stored", k)
		}

		restarted := time.Now()
		p = startHeraldForCrash(t, bin, data)
		base = "http://" + p.addr
		if len(st.jobs) > 0 {
			// Rebuilds were stored and not done: the restart must find them.
			assert.Contains(t, p.log(), `"msg":"resuming fan-out"`, "round %d: restart after a kill with %d jobs stored", k, len(st.jobs))
		}
		// The resumed rebuilds run in reader id order.
		waitRebuilt(t, c, base, tokens, st.pending, restarted.Add(crashWait))
		r := rebuildRound{delay: delay, answered: answered, rebuilding: saidRebuilding, state: st, resumed: time.Since(restarted)}
		rounds = append(rounds, r)
		t.Logf("round %d: killed %v after the first return (%.0f%% of round 0's rebuild time): %d/%d requests answered (%d said rebuilding), "+
			"then %d readers rebuilt, %d rebuilding, %d not yet seen; post stored: %v; the restart finished the %d stored jobs in %v",
			k, delay.Round(100*time.Microsecond), 100*float64(delay)/float64(measured), answered, len(run.results), saidRebuilding,
			st.rebuilt, len(st.pending), st.unseen, st.post != store.NilID, len(st.jobs), r.resumed.Round(time.Millisecond))
	}

	// The last restart is running. Every reader makes a request: the readers
	// of no batch, and those whose return never committed before a kill,
	// are still inactive, so this rebuilds them.
	stillAway := make(map[store.ID]bool)
	for _, id := range order[(1+len(rebuildFractions))*batchSize:] {
		stillAway[id] = true
	}
	for _, r := range rounds {
		for _, id := range r.state.unseenIDs {
			stillAway[id] = true
		}
	}
	finalStart := time.Now()
	final := startReturns(c, base, tokens, order, store.NilID, "")
	final.wait()
	var returning []store.ID // those that answered rebuilding, in answer order
	for _, r := range final.results {
		require.NoError(t, r.err, "final pass: the request of reader %s", r.reader)
		if r.rebuilding {
			returning = append(returning, r.reader)
			assert.True(t, stillAway[r.reader], "final pass: reader %s rebuilding, but its return was committed earlier", r.reader)
		}
	}
	waitRebuilt(t, c, base, tokens, returning, finalStart.Add(crashWait))
	t.Logf("final pass: %d readers still inactive returned (%d answered rebuilding: true); all rebuilt %v after the first request",
		len(stillAway), len(returning), time.Since(finalStart).Round(time.Millisecond))
	p.stop(t)

	// Every server has exited: the test may open the store itself.
	bk, err := embedded.Open(dbDir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = bk.Close() })
	pending, err := bk.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "jobs left after a clean stop")

	// The expected inbox: every message of every author, as stored. Each
	// is one seeded, or a post sent by the test (a post whose request a
	// kill cut off may or may not have been stored; the store says which).
	var want []store.ID
	for _, a := range g.authors {
		ms, err := bk.FindMessages(ctx, storage.MessageFilter{AuthorID: a, Range: store.Forward(store.NilID, 2*rebuildCap)})
		require.NoError(t, err)
		for _, m := range ms {
			require.True(t, g.seeded[m.ID] || attempted[m.Text], "message %s (%q) was neither seeded nor posted", m.ID, m.Text)
			want = append(want, m.ID)
		}
	}
	for _, id := range acked {
		require.Contains(t, want, id, "an acknowledged post is stored")
	}
	for id := range g.seeded {
		require.Contains(t, want, id, "a seeded message is stored")
	}
	slices.SortFunc(want, func(a, b store.ID) int { return b.Compare(a) }) // newest first
	n := len(want)
	require.LessOrEqual(t, n, rebuildCap)
	wantCounts := store.InboxCounts{Total: n, Unread: n}

	index := make(map[store.ID]bool, n)
	for _, id := range want {
		index[id] = true
	}
	var (
		lost, duplicated, foreign int
		badCounts, badOrder       int
		firstBad                  string
	)
	bad := func(format string, args ...any) {
		if firstBad == "" {
			firstBad = fmt.Sprintf(format, args...)
		}
	}
	for _, r := range g.readers {
		items, counts, err := bk.ReadInbox(ctx, storage.InboxFilter{Owner: r, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 2*rebuildCap)})
		require.NoError(t, err)
		if counts != wantCounts {
			badCounts++
			bad("reader %s: counts %+v, want %+v", r, counts, wantCounts)
		}
		seen := make(map[store.ID]int, n)
		got := make([]store.ID, len(items))
		for i, it := range items {
			got[i] = it.MessageID
			if !index[it.MessageID] {
				foreign++
				bad("reader %s: message %s is no author's", r, it.MessageID)
				continue
			}
			seen[it.MessageID]++
		}
		for _, id := range want {
			switch c := seen[id]; {
			case c == 0:
				lost++
				bad("reader %s: message %s is missing", r, id)
			case c > 1:
				duplicated += c - 1
				bad("reader %s: message %s is there %d times", r, id, c)
			}
		}
		if !slices.Equal(got, want) {
			badOrder++
			bad("reader %s: inbox %v, want the %d messages newest first %v", r, got, n, want)
		}
	}

	kills := make([]time.Duration, len(rounds))
	partial := 0
	for i, r := range rounds {
		kills[i] = r.delay.Round(100 * time.Microsecond)
		// A kill that found some rebuilds of its batch done and others
		// stored but not done is the one that tests resuming mid-way.
		if r.state.rebuilt > 0 && len(r.state.pending) > 0 {
			partial++
		}
	}
	t.Logf("runs=%d kill points=%v readers=%d messages=%d items lost=%d duplicated=%d (%d kills mid-rebuild; test took %v)",
		len(rounds), kills, len(g.readers), n, lost, duplicated, partial, time.Since(testStart).Round(time.Millisecond))
	assert.Empty(t, problems, "inconsistent states found after kills")
	assert.Positive(t, partial, "no kill landed while a batch's rebuilds were partly done")
	assert.Zero(t, lost, "items lost; first problem: %s", firstBad)
	assert.Zero(t, duplicated, "items duplicated; first problem: %s", firstBad)
	assert.Zero(t, foreign, "items no author wrote; first problem: %s", firstBad)
	assert.Zero(t, badCounts, "readers with wrong counts; first problem: %s", firstBad)
	assert.Zero(t, badOrder, "readers with a misordered inbox; first problem: %s", firstBad)
}

// rebuildRound is one killed round, as the summary reports it.
type rebuildRound struct {
	delay      time.Duration // from the first return to SIGKILL
	answered   int           // returns the killed server answered
	rebuilding int           // of which said rebuilding
	state      killState
	resumed    time.Duration // from the restart until the resumed rebuilds were done
}

// rebuildGraph is what seedRebuildGraph stored.
type rebuildGraph struct {
	authors []store.ID
	readers []store.ID // in id order
	seeded  map[store.ID]bool
	away    time.Time // the readers' last-seen time
}

// seedRebuildGraph creates, directly in the embedded store at dir, the
// authors, their messages (stored with no job: posted while the readers
// were away, whom fan-out skips) and the readers, last seen rebuildAway
// ago, each following every author. Going through the backend with
// parallel writers takes seconds.
func seedRebuildGraph(t *testing.T, dir string, readers int) *rebuildGraph {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Open(dir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()

	now := time.Now().UTC().Truncate(time.Millisecond)
	g := &rebuildGraph{seeded: make(map[store.ID]bool), away: now.Add(-rebuildAway)}
	for i := range rebuildAuthors {
		h := fmt.Sprintf("author%d", i)
		u := &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, CreatedAt: now, LastSeenAt: now}
		require.NoError(t, st.CreateUser(ctx, u))
		g.authors = append(g.authors, u.ID)
	}
	// Round robin over the authors, so that the newest messages of the
	// merge come from all of them.
	for k := range rebuildSeeded {
		for i, a := range g.authors {
			at := time.Now().UTC().Truncate(time.Millisecond)
			m := &store.Message{ID: store.NewID(at), AuthorID: a, Text: fmt.Sprintf("seeded %d of author%d", k, i), Kind: store.KindPost, CreatedAt: at}
			require.NoError(t, st.CreateMessage(ctx, m, nil))
			g.seeded[m.ID] = true
		}
	}

	g.readers = make([]store.ID, readers)
	seedParallel(t, readers, func(i int) error {
		h := fmt.Sprintf("reader%d", i)
		u := &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, CreatedAt: now, LastSeenAt: g.away}
		if err := st.CreateUser(ctx, u); err != nil {
			return fmt.Errorf("reader %d: %w", i, err)
		}
		for _, a := range g.authors {
			if _, err := st.Follow(ctx, u.ID, a, g.away); err != nil {
				return fmt.Errorf("reader %d: %w", i, err)
			}
		}
		g.readers[i] = u.ID
		return nil
	})
	slices.SortFunc(g.readers, store.ID.Compare)

	for _, a := range g.authors {
		u, err := st.FindUserByID(ctx, a)
		require.NoError(t, err)
		require.Equal(t, readers, u.FollowerCount)
		require.Equal(t, rebuildSeeded, u.MessageCount)
	}
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	require.Empty(t, pending, "seeding stores no job")
	return g
}

// killState is what the store held for a batch after its server was killed.
type killState struct {
	unseen    int        // readers whose return was never committed
	unseenIDs []store.ID // them
	rebuilt   int        // readers returned and rebuilt
	pending   []store.ID // readers returned, rebuild stored and not done, in id order
	jobs      []*storage.Job
	post      store.ID // the round's post, if it was stored
	problems  []string
}

// inspectAfterKill opens the store at dir, which no process holds, and
// sorts the readers of a killed batch by what had been committed: a return
// (MarkSeen) sets the last-seen time, the rebuilding flag and the job in
// one step, and a rebuild inserts every entry and clears the flag and the
// job in one step. Any other combination is a problem.
func inspectAfterKill(t *testing.T, dir string, g *rebuildGraph, readers []store.ID, poster store.ID, text string) killState {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Open(dir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer func() { require.NoError(t, st.Close()) }()

	var ks killState
	bad := func(format string, args ...any) { ks.problems = append(ks.problems, fmt.Sprintf(format, args...)) }
	jobs, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	ks.jobs = jobs
	rebuildJobs := make(map[store.ID]bool)
	for _, j := range jobs {
		if j.Kind == storage.JobRebuild {
			rebuildJobs[j.OwnerID] = true
		}
	}
	inBatch := make(map[store.ID]bool, len(readers))
	for _, r := range readers {
		inBatch[r] = true
	}
	for owner := range rebuildJobs {
		if !inBatch[owner] {
			// Earlier batches' rebuilds were waited for after each restart.
			bad("a rebuild job of reader %s, who is not of this batch", owner)
		}
	}

	users, err := st.FindUsersByIDs(ctx, readers)
	require.NoError(t, err)
	for i, r := range readers {
		require.NotNil(t, users[i], "reader %s", r)
		items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: r, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 2*rebuildCap)})
		require.NoError(t, err)
		seeded := 0
		copies := make(map[store.ID]int, len(items))
		for _, it := range items {
			if copies[it.MessageID]++; copies[it.MessageID] == 2 {
				bad("reader %s holds message %s twice", r, it.MessageID)
			}
			if g.seeded[it.MessageID] {
				seeded++
			}
		}
		if counts.Total != len(items) || counts.Unread != len(items) {
			bad("reader %s: counts %+v for %d entries", r, counts, len(items))
		}
		returned := users[i].LastSeenAt.After(g.away)
		switch {
		case !returned:
			ks.unseen++
			ks.unseenIDs = append(ks.unseenIDs, r)
			// Still inactive: fan-out skipped it and nothing rebuilt it.
			if counts.Rebuilding || rebuildJobs[r] || len(items) > 0 {
				bad("reader %s, never seen back: rebuilding %v, job %v, %d entries", r, counts.Rebuilding, rebuildJobs[r], len(items))
			}
		case counts.Rebuilding:
			ks.pending = append(ks.pending, r)
			// Deliveries since its return may have reached it, but no
			// seeded message: only the rebuild brings those.
			if !rebuildJobs[r] || seeded > 0 {
				bad("reader %s, rebuilding: job %v, %d seeded messages", r, rebuildJobs[r], seeded)
			}
		default:
			ks.rebuilt++
			if rebuildJobs[r] || seeded != len(g.seeded) {
				bad("reader %s, rebuilt: job %v, %d of %d seeded messages", r, rebuildJobs[r], seeded, len(g.seeded))
			}
		}
	}
	slices.SortFunc(ks.pending, store.ID.Compare)

	ms, err := st.FindMessages(ctx, storage.MessageFilter{AuthorID: poster, Range: store.Forward(store.NilID, 1)})
	require.NoError(t, err)
	if len(ms) == 1 && ms[0].Text == text {
		ks.post = ms[0].ID
	}
	return ks
}
