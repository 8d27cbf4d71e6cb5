package main

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store/seed"
)

func noEnv(string) string { return "" }

// TestSeed seeds a small network through the command, seeds it again (a
// no-op), and serves it: a seeded user logs in with the seed password and
// reads the inbox fan-out on write would have filled.
func TestSeed(t *testing.T) {
	dir := t.TempDir()
	args := []string{"seed", "-data", dir, "-users", "300", "-avg-follows", "8", "-messages", "900", "-seed", "4", "-batch", "500", "-password", "opensesame"}
	var out, errOut bytes.Buffer
	require.NoError(t, run(context.Background(), args, noEnv, &out, &errOut))
	assert.Contains(t, out.String(), "seeded 300 users")
	assert.Contains(t, errOut.String(), "seeding", "a progress bar")

	out.Reset()
	require.NoError(t, run(context.Background(), append(args, "-quiet"), noEnv, &out, io.Discard))
	assert.Contains(t, out.String(), "already seeded")

	err := run(context.Background(), []string{"seed", "-data", dir, "-users", "301", "-quiet"}, noEnv, io.Discard, io.Discard)
	assert.ErrorContains(t, err, "another seeded network", "a different network is not mixed in")

	n, err := seed.Generate(seed.Config{Seed: 4, Users: 300, AvgFollows: 8, Messages: 900})
	require.NoError(t, err)
	reader := 0
	for i := range n.Users() {
		if n.InboxSize(i) > n.InboxSize(reader) {
			reader = i
		}
	}
	r := startRun(t, []string{"-addr", "127.0.0.1:0", "-data", dir}, noEnv)
	base := "http://" + loggedAddr(t, r.logs, r.done, "listening")
	login := mustGQL(t, base, "", `mutation($h: String!) { logIn(input: {handle: $h, password: "opensesame"}) { token } }`, map[string]any{"h": seed.Handle(reader)})
	token := login["logIn"].(map[string]any)["token"].(string)
	home := mustGQL(t, base, token, `{ viewer { followingCount } inbox(first: 50) { totalCount unreadCount edges { node { author { handle } } } } }`, nil)
	inbox := home["inbox"].(map[string]any)
	assert.EqualValues(t, n.InboxSize(reader), inbox["totalCount"])
	assert.EqualValues(t, n.InboxSize(reader), inbox["unreadCount"])
	assert.Len(t, inbox["edges"], min(50, n.InboxSize(reader)))
	assert.EqualValues(t, len(n.Following(reader)), home["viewer"].(map[string]any)["followingCount"])
	r.stop(t)
}
