package cli

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/datadir"
	"herald/server/httpserver"
	"herald/server/internal/servertest"
	"herald/store"
	"herald/store/embedded"
	"herald/store/pubsub"
	"herald/store/seed"
	"herald/store/service"
)

// seedCmd runs herald seed with args on the embedded store in dir, with
// the server's default timeline settings.
func seedCmd(dir string, args []string, stdout, stderr io.Writer) error {
	var sf SeedFlags
	fs := flag.NewFlagSet("herald seed", flag.ContinueOnError)
	sf.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg := SeedConfig{DataDir: dir, Fanout: service.StrategyBucket, CelebrityThreshold: 10_000}
	return Seed(context.Background(), sf, cfg, slog.New(slog.DiscardHandler), stdout, stderr)
}

// TestSeed seeds a small network through the command, seeds it again (a
// no-op), and serves it: a seeded user logs in with the seed password and
// reads the inbox fan-out on write would have filled.
func TestSeed(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-users", "300", "-avg-follows", "8", "-messages", "900", "-seed", "4", "-batch", "500", "-password", "opensesame"}
	var out, errOut bytes.Buffer
	require.NoError(t, seedCmd(dir, args, &out, &errOut))
	assert.Contains(t, out.String(), "seeded 300 users")
	assert.Contains(t, errOut.String(), "seeding", "a progress bar")

	assert.Contains(t, out.String(), "conversations with")

	out.Reset()
	require.NoError(t, seedCmd(dir, append(args, "-quiet"), &out, io.Discard))
	assert.Contains(t, out.String(), "already seeded")
	assert.Contains(t, out.String(), "(0 sent now", "a seed again sends no conversation message twice")

	err := seedCmd(dir, []string{"-users", "301", "-quiet"}, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "another seeded network", "a different network is not mixed in")

	n, err := seed.Generate(seed.Config{Seed: 4, Users: 300, AvgFollows: 8, Messages: 900})
	require.NoError(t, err)
	reader := 0
	for i := range n.Users() {
		if n.InboxSize(i) > n.InboxSize(reader) {
			reader = i
		}
	}
	// Served as the server serves the data directory.
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(filepath.Join(dir, datadir.EmbeddedDir), embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	svc := service.NewService(st, hub, service.Options{Logger: log})
	require.NoError(t, svc.Start(context.Background()))
	base := servertest.Serve(t, httpserver.DefaultOptions(), log, svc, nil, nil, func() {
		hub.Close()
		_ = st.Close()
	}).URL
	login := servertest.MustGQL(t, base, "", `mutation($h: String!) { logIn(input: {handle: $h, password: "opensesame"}) { token } }`, map[string]any{"h": seed.Handle(reader)})
	token := login["logIn"].(map[string]any)["token"].(string)
	home := servertest.MustGQL(t, base, token, `{ viewer { followingCount } inbox(first: 50) { totalCount unreadCount edges { node { author { handle } } } } }`, nil)
	inbox := home["inbox"].(map[string]any)
	assert.EqualValues(t, n.InboxSize(reader), inbox["totalCount"])
	assert.EqualValues(t, n.InboxSize(reader), inbox["unreadCount"])
	assert.Len(t, inbox["edges"], min(50, n.InboxSize(reader)))
	assert.EqualValues(t, len(n.Following(reader)), home["viewer"].(map[string]any)["followingCount"])

	// A group's creator and a direct conversation's starter see their
	// conversations with the seeded last messages and unread counts.
	convs := n.Conversations()
	var users []int
	for _, group := range []bool{false, true} {
		i := slices.IndexFunc(convs, func(c *seed.Conversation) bool { return c.Group == group })
		require.GreaterOrEqual(t, i, 0, "a conversation with group %v", group)
		users = append(users, convs[i].Members[0])
	}
	for _, u := range users {
		want := map[int]int{} // last seq → unread, over the user's conversations with messages
		total, count := 0, 0
		for _, d := range convs {
			if i := slices.Index(d.Members, u); i >= 0 {
				count++
				last := len(d.Authors)
				want[last] += last - int(d.Reads[i])
				total += last - int(d.Reads[i])
			}
		}
		tok := servertest.MustGQL(t, base, "", `mutation($h: String!) { logIn(input: {handle: $h, password: "opensesame"}) { token } }`, map[string]any{"h": seed.Handle(u)})["logIn"].(map[string]any)["token"].(string)
		d := servertest.MustGQL(t, base, tok, `{ conversationsUnreadCount conversations(first: 100) { edges { node { unreadCount lastMessage { seq } } } } }`, nil)
		assert.EqualValues(t, total, d["conversationsUnreadCount"], "user %d's unread messages", u)
		edges := d["conversations"].(map[string]any)["edges"].([]any)
		assert.Len(t, edges, count, "user %d's conversations", u)
		got := map[int]int{}
		for _, e := range edges {
			node := e.(map[string]any)["node"].(map[string]any)
			last := 0
			if lm, ok := node["lastMessage"].(map[string]any); ok {
				last = int(lm["seq"].(float64))
			}
			got[last] += int(node["unreadCount"].(float64))
		}
		assert.Equal(t, want, got, "user %d: unread counts by last seq", u)
	}

	// The reader's seeded likes, most recent first, each message with its
	// seeded count.
	var want []store.Like
	likeCounts := map[store.ID]int{}
	for k := range 900 {
		likes := n.MessageLikes(k)
		for _, l := range likes {
			likeCounts[l.MessageID] = len(likes)
			if l.UserID == n.UserID(reader) {
				want = append(want, l)
			}
		}
	}
	require.NotEmpty(t, want, "the reader likes something")
	slices.SortFunc(want, func(a, b store.Like) int { return b.ID.Compare(a.ID) })
	var wantCounts []any
	for _, l := range want {
		wantCounts = append(wantCounts, float64(likeCounts[l.MessageID]))
	}
	liked := servertest.MustGQL(t, base, token, `{ viewer { likes(first: 100) { edges { node { likeCount viewerHasLiked likedBy(first: 1) { totalCount } } } } } }`, nil)
	var gotCounts []any
	for _, e := range liked["viewer"].(map[string]any)["likes"].(map[string]any)["edges"].([]any) {
		node := e.(map[string]any)["node"].(map[string]any)
		assert.Equal(t, true, node["viewerHasLiked"])
		assert.Equal(t, node["likeCount"], node["likedBy"].(map[string]any)["totalCount"])
		gotCounts = append(gotCounts, node["likeCount"])
	}
	assert.Equal(t, wantCounts, gotCounts)
}

// TestSeed_AvgLikes seeds a network without likes, and refuses a negative
// average.
func TestSeed_AvgLikes(t *testing.T) {
	args := []string{"-users", "50", "-avg-follows", "3", "-messages", "50", "-quiet"}
	var out bytes.Buffer
	require.NoError(t, seedCmd(t.TempDir(), append(args, "-avg-likes", "0"), &out, io.Discard))
	assert.Contains(t, out.String(), "50 messages, 0 likes")
	out.Reset()
	require.NoError(t, seedCmd(t.TempDir(), args, &out, io.Discard))
	assert.NotContains(t, out.String(), " 0 likes", "likes by default")
	err := seedCmd(t.TempDir(), append(args, "-avg-likes", "-1"), io.Discard, io.Discard)
	assert.ErrorContains(t, err, "-avg-likes")
}

// TestSeed_AvgReposts seeds a network without reposts and one with the
// default average, and refuses a negative average.
func TestSeed_AvgReposts(t *testing.T) {
	args := []string{"-users", "50", "-avg-follows", "3", "-messages", "50", "-quiet"}
	var out bytes.Buffer
	require.NoError(t, seedCmd(t.TempDir(), append(args, "-avg-reposts", "0"), &out, io.Discard))
	assert.Contains(t, out.String(), " likes, 0 reposts,")
	out.Reset()
	require.NoError(t, seedCmd(t.TempDir(), append(args, "-users", "1000"), &out, io.Discard))
	n, err := seed.Generate(seed.Config{Seed: 1, Users: 1000, AvgFollows: 3, Messages: 50})
	require.NoError(t, err)
	require.NotZero(t, n.Reposts())
	assert.Contains(t, out.String(), fmt.Sprintf(" likes, %d reposts,", n.Reposts()), "reposts by default")
	err = seedCmd(t.TempDir(), append(args, "-avg-reposts", "-1"), io.Discard, io.Discard)
	assert.ErrorContains(t, err, "-avg-reposts")
}
