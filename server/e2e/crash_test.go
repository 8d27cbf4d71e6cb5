package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/server/datadir"
	"herald/server/internal/servertest"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// crashSeed fixes the randomness of a crash test (the jitter of its kill
// points, and which readers return when in TestCrash_KillDuringRebuild), so
// that a failing run can be repeated with the seed it logged:
//
//	go test -run TestCrash_KillDuringFanout ./server/e2e/ -args -crash.seed=N
//
// The delays then have the same fractions of the work's time, which is
// measured anew on each run, so the moment of each kill is close to the
// failing run's but not identical: a process is killed by the wall clock.
var crashSeed = flag.Uint64("crash.seed", 0, "seed of the crash tests' kill-point jitter (0: from the clock)")

// crashRand returns the random source of a crash test, from -crash.seed or
// the clock, and logs how to repeat the run.
func crashRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := *crashSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("kill-point seed %d (repeat with -run '^%s$' -args -crash.seed=%d)", seed, t.Name(), seed)
	return rand.New(rand.NewPCG(seed, seed))
}

const (
	// crashFollowers is the author's follower count: 20 chunks of the
	// server's default 1000, so a kill can land between many of them.
	crashFollowers = 20000
	crashPassword  = "crash test password"
	// crashSecret is HERALD_TOKEN_SECRET for every run of the binary, so the
	// tokens issued by the first run stay valid after each kill.
	crashSecret = "crash-test-token-secret-0123456789abcdef"
	// crashWait bounds every wait for the server: a fan-out that does not
	// finish by then is a failure, not something to wait out.
	crashWait = 60 * time.Second
	// crashPoll is how often the last follower's inbox is polled. Not
	// shorter: on two cores each poll takes CPU from the fan-out it waits
	// for (much more under -race), and the times reported come from the
	// server's own timestamps, not from when a poll noticed.
	crashPoll = 20 * time.Millisecond
)

// crashFractions place the kill points of the killed rounds over the
// fan-out time measured in round 0: from straight after the post was
// accepted to near the end.
var crashFractions = []float64{0, 0.1, 0.3, 0.5, 0.7, 0.9}

// crashRound is one killed round, as the final check reports it.
type crashRound struct {
	delay    time.Duration // from the accepted post to SIGKILL
	killedAt time.Time     // once the process was seen dead
	resumed  time.Duration // from the restart until the last follower had the post, by the server's clock
	proc     *heraldProc   // the restarted server
}

// TestCrash_KillDuringFanout starts the real binary over an author with
// 20,000 followers, posts (or, every other round, reposts a message of a
// user none of them follows), kills the process with SIGKILL at a
// different moment of the fan-out in each round, restarts it and waits
// until the fan-out is complete. At the end every follower must hold every
// post and repost exactly once, newest first, with exact counts, each
// reposted message must count its one repost, and no job may be left.
func TestCrash_KillDuringFanout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server binary and kills it repeatedly; skipped in -short mode")
	}
	ctx := context.Background()
	bin := servertest.BuildHerald(t)
	data := t.TempDir()
	dbDir := filepath.Join(data, datadir.EmbeddedDir)

	seedStart := time.Now()
	author, followers, originals := seedCrashGraph(t, dbDir, crashFollowers)
	t.Logf("seeded an author and %d followers in %v", len(followers), time.Since(seedStart).Round(time.Millisecond))

	rng := crashRand(t)

	// Round 0 is not killed: it measures how long one fan-out takes, from
	// the post's creation until the last follower (highest id; followers
	// are delivered to in id order) has it, both stamped by the server.
	p := startHeraldForCrash(t, bin, data)
	base := "http://" + p.addr
	writer := logInForCrash(t, base, "author")
	require.Equal(t, author, storeIDOf(t, "User", writer.ID))
	reader := logInForCrash(t, base, "lastfan")
	require.Equal(t, followers[len(followers)-1], storeIDOf(t, "User", reader.ID))

	// posted holds each round's message id as GraphQL gives it; a repost
	// round's is empty (repost returns the original), its repost being
	// found in the store at the end.
	var posted []string
	posted = append(posted, servertest.MustPost(t, base, writer, "round 0"))
	delivered, created := waitInboxTotal(t, base, reader.Token, len(posted))
	fanout := delivered.Sub(created)
	require.Positive(t, fanout, "a fan-out to %d followers takes over a millisecond", len(followers))
	t.Logf("round 0: fan-out to %d followers took %v (not killed)", len(followers), fanout.Round(100*time.Microsecond))

	var rounds []crashRound
	for k, frac := range crashFractions {
		// Jitter of up to 5% of the fan-out time moves the kill points
		// between runs, so that over time they cover every moment.
		jitter := time.Duration(rng.Int64N(int64(fanout/20) + 1))
		delay := time.Duration(frac*float64(fanout)) + jitter

		if reposts(k + 1) {
			d := servertest.MustGQL(t, base, writer.Token, `mutation($id: ID!) { repost(messageId: $id) { repostCount } }`,
				map[string]any{"id": globalIDOf("Message", originals[k+1].ID)})
			require.EqualValues(t, 1, d["repost"].(map[string]any)["repostCount"], "round %d: the repost is counted when repost returns", k+1)
			posted = append(posted, "")
		} else {
			posted = append(posted, servertest.MustPost(t, base, writer, fmt.Sprintf("round %d", k+1)))
		}
		time.Sleep(delay)
		killedAt := killHerald(t, p)

		restarted := time.Now()
		p = startHeraldForCrash(t, bin, data)
		base = "http://" + p.addr
		// The tokens issued before the kill still work: the secret is fixed.
		done, _ := waitInboxTotal(t, base, reader.Token, len(posted))
		r := crashRound{delay: delay, killedAt: killedAt, resumed: done.Sub(restarted), proc: p}
		rounds = append(rounds, r)
		if r.resumed < 0 {
			// The last follower had the post before the restart: the kill
			// came after the fan-out's last chunk.
			t.Logf("round %d: killed %v after the post was accepted; the fan-out had completed before the kill",
				k+1, delay.Round(100*time.Microsecond))
		} else {
			t.Logf("round %d: killed %v after the post was accepted; the restart completed the fan-out %v after it began",
				k+1, delay.Round(100*time.Microsecond), r.resumed.Round(time.Millisecond))
		}
	}
	p.stop(t)

	// Every server has exited: the test may open the store itself.
	st, err := embedded.Open(dbDir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })

	ids := make([]store.ID, len(posted))
	keys := make([]store.MessageKey, len(posted))
	index := make(map[store.ID]int, len(posted)) // message id -> round
	for k, s := range posted {
		if reposts(k) {
			r, err := st.FindReposts(ctx, author, []store.MessageKey{originals[k]})
			require.NoError(t, err)
			require.False(t, r[0].IsZero(), "round %d: the author's repost is stored", k)
			ids[k] = r[0]
		} else {
			ids[k] = storeIDOf(t, "Message", s)
		}
		keys[k] = store.MessageKey{ID: ids[k], AuthorID: author}
		index[ids[k]] = k
	}
	msgs, err := st.FindMessagesByKeys(ctx, keys)
	require.NoError(t, err)
	for k, m := range msgs {
		require.NotNil(t, m, "message of round %d", k)
		if reposts(k) {
			assert.Equal(t, store.KindRepost, m.Kind, "round %d", k)
			assert.Equal(t, originals[k].ID, m.RepostOfID, "round %d", k)
		} else {
			assert.Equal(t, fmt.Sprintf("round %d", k), m.Text)
		}
	}
	reposted, err := st.FindMessagesByKeys(ctx, originals)
	require.NoError(t, err)
	for k, m := range reposted {
		require.NotNil(t, m, "original of round %d", k)
		assert.Equal(t, b2i(reposts(k)), m.RepostCount, "round %d: the reposted message counts its one repost exactly once", k)
	}
	a, err := st.FindUserByID(ctx, author)
	require.NoError(t, err)
	assert.Equal(t, len(posted), a.MessageCount, "the author's message count")
	assert.Equal(t, crashFollowers, a.FollowerCount, "the author's follower count")
	pending, err := st.PendingJobs(ctx)
	require.NoError(t, err)
	assert.Empty(t, pending, "fan-out jobs left after a clean stop")

	n := len(posted)
	want := store.InboxCounts{Total: n, Unread: n}
	var (
		lost, duplicated, foreign int
		badCounts, badOrder       int
		firstBad                  string
		beforeKill                = make([]int, n) // per round: followers that had the post when it was killed
	)
	bad := func(format string, args ...any) {
		if firstBad == "" {
			firstBad = fmt.Sprintf(format, args...)
		}
	}
	for _, f := range followers {
		items, counts, err := st.ReadInbox(ctx, storage.InboxFilter{Owner: f, Layout: storage.LayoutBuckets, Range: store.Forward(store.NilID, 100)})
		require.NoError(t, err)
		if counts != want {
			badCounts++
			bad("follower %s: counts %+v, want %+v", f, counts, want)
		}
		seen := make([]int, n)
		for _, it := range items {
			k, ok := index[it.MessageID]
			if !ok {
				foreign++
				bad("follower %s: message %s was never posted", f, it.MessageID)
				continue
			}
			seen[k]++
			// A killed server delivered before it died; its successor
			// delivers only after starting and opening the store, well over
			// a millisecond (the resolution of DeliveredAt) later.
			if k > 0 && !it.DeliveredAt.After(rounds[k-1].killedAt) {
				beforeKill[k]++
			}
		}
		for k, c := range seen {
			switch {
			case c == 0:
				lost++
				bad("follower %s: the post of round %d is missing", f, k)
			case c > 1:
				duplicated += c - 1
				bad("follower %s: the post of round %d is there %d times", f, k, c)
			}
		}
		// Newest first: inboxes are ordered by message id, so the posts
		// come in reverse posting order.
		inOrder := len(items) == n
		for i := 0; inOrder && i < n; i++ {
			inOrder = items[i].MessageID == ids[n-1-i]
		}
		if !inOrder {
			badOrder++
			bad("follower %s: inbox not the %d posts newest first: %v", f, n, items)
		}
	}

	kills := make([]time.Duration, len(rounds))
	partial := 0
	for i, r := range rounds {
		k := i + 1
		kills[i] = r.delay.Round(100 * time.Microsecond)
		what := "post"
		if reposts(k) {
			what = "repost"
		}
		t.Logf("round %d: killed at %v (%.0f%% of the measured fan-out time), when %d/%d followers had the %s",
			k, kills[i], 100*float64(r.delay)/float64(fanout), beforeKill[k], len(followers), what)
		if beforeKill[k] > 0 && beforeKill[k] < len(followers) {
			partial++
		}
		if beforeKill[k] < len(followers) {
			// The job was interrupted, so the restart must have found it.
			assert.Contains(t, r.proc.log(), `"msg":"resuming fan-out"`, "round %d: restart after a kill mid-fan-out", k)
		}
	}
	t.Logf("runs=%d kill points=%v followers=%d items lost=%d duplicated=%d", len(rounds), kills, len(followers), lost, duplicated)
	// Without a kill between two chunks the test would only show that a
	// job survives whole; the kill points are spread so that several land
	// mid-fan-out.
	assert.Positive(t, partial, "no kill landed while the fan-out was partly delivered")
	assert.Zero(t, lost, "items lost; first problem: %s", firstBad)
	assert.Zero(t, duplicated, "items duplicated; first problem: %s", firstBad)
	assert.Zero(t, foreign, "items never posted; first problem: %s", firstBad)
	assert.Zero(t, badCounts, "followers with wrong counts; first problem: %s", firstBad)
	assert.Zero(t, badOrder, "followers with a misordered inbox; first problem: %s", firstBad)
}

// reposts reports whether round k reposts a message instead of posting one:
// every other killed round, so that kills land in both kinds of fan-out.
func reposts(k int) bool { return k%2 == 0 && k > 0 }

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// seedCrashGraph creates, directly in the embedded store at dir, an author
// and n followers, and returns the followers' ids in id order, and one
// message per round by a user none of them follows, for the rounds that
// repost (reposts). Going
// through the backend rather than GraphQL takes seconds, not minutes. The
// author and the last follower ("lastfan") are signed up with
// crashPassword to log in over GraphQL; lastfan is made after all the
// others, so it has the highest id and the fan-out reaches it last.
func seedCrashGraph(t *testing.T, dir string, n int) (store.ID, []store.ID, []store.MessageKey) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(dir, embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	defer func() {
		hub.Close()
		require.NoError(t, st.Close())
	}()
	// The lowest bcrypt cost keeps sign-up fast; logIn checks any cost.
	svc := service.NewService(st, hub, service.Options{Logger: log, PasswordCost: bcrypt.MinCost})
	author, err := svc.SignUp(ctx, service.SignUpInput{Handle: "author", Password: crashPassword})
	require.NoError(t, err)

	followers := make([]store.ID, n)
	seedParallel(t, n-1, func(i int) error {
		now := time.Now().UTC().Truncate(time.Millisecond)
		h := fmt.Sprintf("f%d", i)
		u := &store.User{ID: store.NewID(now), Handle: h, DisplayName: h, CreatedAt: now, LastSeenAt: now}
		if err := st.CreateUser(ctx, u); err != nil {
			return fmt.Errorf("follower %d: %w", i, err)
		}
		if _, err := st.Follow(ctx, u.ID, author.ID, now); err != nil {
			return fmt.Errorf("follower %d: %w", i, err)
		}
		followers[i] = u.ID
		return nil
	})

	last, err := svc.SignUp(ctx, service.SignUpInput{Handle: "lastfan", Password: crashPassword})
	require.NoError(t, err)
	_, err = st.Follow(ctx, last.ID, author.ID, time.Now())
	require.NoError(t, err)
	followers[n-1] = last.ID
	slices.SortFunc(followers, store.ID.Compare)
	require.Equal(t, last.ID, followers[n-1], "lastfan has the highest id")

	a, err := st.FindUserByID(ctx, author.ID)
	require.NoError(t, err)
	require.Equal(t, n, a.FollowerCount)

	other, err := svc.SignUp(ctx, service.SignUpInput{Handle: "other", Password: crashPassword})
	require.NoError(t, err)
	originals := make([]store.MessageKey, len(crashFractions)+1)
	for k := range originals {
		// No fan-out job: other has no followers.
		now := time.Now().UTC().Truncate(time.Millisecond)
		m := &store.Message{ID: store.NewID(now), AuthorID: other.ID, Text: fmt.Sprintf("to repost in round %d", k), Kind: store.KindPost, CreatedAt: now}
		require.NoError(t, st.CreateMessage(ctx, m, nil))
		originals[k] = m.Key()
	}
	return author.ID, followers, originals
}

// seedParallel runs write(i) for i in [0, n) on 32 goroutines and fails the
// test if any returns an error. Every write is a synced commit; 32 writers
// at once share fsyncs.
func seedParallel(t *testing.T, n int, write func(i int) error) {
	t.Helper()
	const par = 32
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for w := range par {
		wg.Go(func() {
			for i := w; i < n; i += par {
				if err := write(i); err != nil {
					// No require here: FailNow must run on the test's goroutine.
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// startHeraldForCrash starts the binary with HERALD_TOKEN_SECRET set to
// crashSecret and logging at info: debug would log every one of the
// thousands of polls, and on two cores that slows the fan-out being timed.
func startHeraldForCrash(t *testing.T, bin, data string) *heraldProc {
	t.Helper()
	return startHeraldWith(t, bin, data, "info", datadir.EnvTokenSecret+"="+crashSecret)
}

func killHerald(t *testing.T, p *heraldProc) time.Time {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("server still running 30s after SIGKILL")
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"the server died of the kill, not before it: %v; log:\n%s", p.cmd.ProcessState, p.log())
	return time.Now()
}

// logInForCrash logs in with crashPassword over GraphQL.
func logInForCrash(t *testing.T, base, handle string) servertest.User {
	t.Helper()
	d := servertest.MustGQL(t, base, "", `mutation($h: String!, $p: String!) { logIn(input: {handle: $h, password: $p}) { token user { id handle } } }`,
		map[string]any{"h": handle, "p": crashPassword})
	p := d["logIn"].(map[string]any)
	u := p["user"].(map[string]any)
	return servertest.User{ID: u["id"].(string), Handle: u["handle"].(string), Token: p["token"].(string)}
}

// storeIDOf decodes a GraphQL global id, base64url("<typ>:<24 hex>") as
// graph/id.go makes it, into the store id it names.
func storeIDOf(t *testing.T, typ, global string) store.ID {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(global)
	require.NoError(t, err, "global id %q", global)
	hexID, ok := strings.CutPrefix(string(raw), typ+":")
	require.True(t, ok, "global id %q names a %s", global, typ)
	id, err := store.ParseID(hexID)
	require.NoError(t, err, "global id %q", global)
	return id
}

// globalIDOf makes the GraphQL global id of a store id, as storeIDOf
// reads it.
func globalIDOf(typ string, id store.ID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(typ + ":" + id.String()))
}

// waitInboxTotal polls the inbox of the token's owner over GraphQL until it
// holds want messages, and returns when the newest of them was delivered
// and created, by the server's clock (to the millisecond). Reading an inbox
// does not mark it read, so polling leaves the counts alone.
func waitInboxTotal(t *testing.T, base, token string, want int) (delivered, created time.Time) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(crashWait)
	for i := 0; ; i++ {
		d := servertest.MustGQL(t, base, token, `query($n: Int!) { inbox(first: $n) { totalCount edges { deliveredAt node { createdAt } } } }`, map[string]any{"n": want})
		inbox := d["inbox"].(map[string]any)
		got := int(inbox["totalCount"].(float64))
		edges := inbox["edges"].([]any)
		// A count rises before its entry shows (store/embedded's
		// ReadInbox), so the page can lag the count for a moment: the
		// newest entry is the last post's once the page holds them all.
		if got == want && len(edges) == want {
			e := edges[0].(map[string]any)
			delivered, err := time.Parse(time.RFC3339Nano, e["deliveredAt"].(string))
			require.NoError(t, err)
			created, err := time.Parse(time.RFC3339Nano, e["node"].(map[string]any)["createdAt"].(string))
			require.NoError(t, err)
			return delivered, created
		}
		require.LessOrEqual(t, got, want, "more messages than were posted")
		require.True(t, i < int(crashWait/crashPoll) && time.Now().Before(deadline),
			"the inbox holds %d of %d messages (%d shown) after %v", got, want, len(edges), time.Since(start))
		time.Sleep(crashPoll)
	}
}
