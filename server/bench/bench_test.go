package bench

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/server/internal/servertest"
	"herald/store/service"
)

// TestBench runs herald bench, as built, on a small network with every
// section, and checks that each figure was measured: a section that
// stopped measuring, or a target that lost its verdict, shows here. The
// figures themselves are the machine's; only their presence and sense are
// checked.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary: not in -short")
	}
	bin := servertest.BuildHerald(t)
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(bin, "bench", "-users", "3000", "-avg-follows", "20", "-messages", "6000",
		"-posts", "2", "-duration", "300ms", "-concurrency", "1,8", "-viewers", "20", "-subscribers", "40",
		"-raw-entries", "20000", "-strategy-users", "1500",
		"-sustained-duration", "2s", "-sustained-followers", "40", "-json", out)
	table, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "bench failed:\n%s\n%s", table, stderr)
	assert.Contains(t, string(table), "herald bench")

	data, err := os.ReadFile(out)
	require.NoError(t, err)
	var r benchReport
	require.NoError(t, json.Unmarshal(data, &r))
	assert.Equal(t, "bucket", r.Fanout)

	sections := map[string]int{}
	targets := 0
	for _, f := range r.Figures {
		sections[f.Section]++
		assert.False(t, math.IsNaN(f.Value), "%s: measured", f.Name)
		if strings.Contains(f.Name, "storage calls") {
			t.Logf("%s: %.2f (%s)", f.Name, f.Value, f.Note)
		}
		if f.Pass != nil {
			targets++
			assert.NotEmpty(t, f.Target, f.Name)
		}
		switch {
		case strings.HasPrefix(f.Name, "send a direct message") && strings.HasSuffix(f.Name, "storage calls per send"):
			assert.InDelta(t, 2, f.Value, 0.05, "both users (FindUsersByIDs: neither was ever blocked, so no FindBlockers), the send (one batch on the embedded engine)")
		case strings.HasPrefix(f.Name, "conversation page") && strings.HasSuffix(f.Name, "storage calls per request"):
			assert.InDelta(t, 3, f.Value, 0.05, "the conversation (its messages check the membership on it: FindConversations once), the page, its authors in one batch")
		case strings.HasPrefix(f.Name, "conversation list") && strings.HasSuffix(f.Name, "storage calls per request"):
			assert.GreaterOrEqual(t, f.Value, 5.0, "the list, its conversations, the read state (twice: the page's and conversationsUnreadCount), the peers and last authors")
			assert.LessOrEqual(t, f.Value, 7.05, "the list, its conversations, the read state twice, the peers and the last authors in at most two batches")
		case strings.Contains(f.Name, "with likes") && strings.Contains(f.Name, "storage calls per request"):
			assert.GreaterOrEqual(t, f.Value, 6.0, "the plain page's calls and FindLiked and FindReposts: the counts come with the messages, the mentioned users and reposters with the authors")
			assert.LessOrEqual(t, f.Value, 8.05, "the plain page's calls and FindLiked and FindReposts, and the visibility rule of the messages reposted (FindBlockers): the counts come with the messages, the mentioned users and reposters with the authors")
		case strings.Contains(f.Name, "storage calls per request"):
			// The buckets, the reader's own outbox (read once: whether
			// one's own reposts are at home was decided when they were
			// made), the messages, the authors; and the messages
			// reposted, on a page holding reposts, with the visibility
			// rule of their authors (one FindBlockers).
			assert.GreaterOrEqual(t, f.Value, 4.0, "a bucketed page with authors and counts")
			assert.LessOrEqual(t, f.Value, 6.05, "a bucketed page with authors and counts")
		case strings.Contains(f.Name, "like, then unlike") && strings.Contains(f.Name, "storage calls per mutation"):
			assert.InDelta(t, 4.5, f.Value, 0.1, "a like reads the message for its author, reads the author and whether it blocks the viewer (the visibility rule), likes it, checks the relations both ways for the notice (FindBlockers, FindBlocked) and notifies the author (7); an unlike reads and unlikes (2)")
		case strings.Contains(f.Name, "repost, then unrepost") && strings.Contains(f.Name, "storage calls per mutation"):
			assert.InDelta(t, 12.5, f.Value, 0.1, "a repost reads the message, reads its author and whether it blocks the viewer (the visibility rule), checks whether the viewer follows its author (whether it is at the viewer's own home), stores itself, checks the relations both ways for the notice and notifies the author, and its fan-out lists the followers, leaves out those who hide the reposter or the original's author or whom that author blocks (3 calls), checks them against the original's author and delivers, the job running as a group of one: one DeliverInboxes (14); an unrepost reads the message, finds the repost, reads and deletes it, its retraction finds the deliveries and removes them, and its REMOVED lists the followers and checks them as the delivery did (11); the reposter's own events read the repost's mark, no check: the viewer's followers fit one chunk")
		}
		if strings.HasSuffix(f.Name, "requests/s") {
			assert.Positive(t, f.Value)
		}
	}
	assert.Equal(t, 1, sections["raw"])
	assert.Equal(t, 3, sections["fanout"], "the author of 1,000 followers: post latency, delivery time, deliveries/s")
	assert.Equal(t, 12, sections["reads"], "two concurrencies, three figures each; the rich page, two; likes, two; reposts, two")
	assert.Equal(t, 2, sections["live"], "memory per subscriber, delivery to all")
	assert.Equal(t, 7, sections["conversations"], "a send's p50, p99 and storage calls; the page's and the list's requests/s and storage calls")
	assert.Equal(t, 5, sections["sustained"], "posts/s, deliveries/s, delivery to the subscribed followers, the backlog, the drain")
	assert.Equal(t, 2*len(laneCounts), sections["lanes"], "deliveries/s and the time to the last follower, per lane count")
	for _, f := range r.Figures {
		if f.Section == "lanes" {
			assert.Positive(t, f.Value, f.Name)
		}
	}
	assert.GreaterOrEqual(t, targets, 6)
	for _, f := range r.Figures {
		if f.Section == "live" && strings.Contains(f.Name, "has the event") {
			assert.Contains(t, f.Note, " 0 events missing", "every subscriber got every post")
		}
		if f.Section == "sustained" && strings.HasPrefix(f.Name, "posts acknowledged") {
			assert.Positive(t, f.Value, "posts were acknowledged")
			assert.Contains(t, f.Note, " 0 posts failed", "no rate limit refused the posters")
		}
		if f.Section == "sustained" && strings.Contains(f.Name, "subscribed follower") {
			assert.Contains(t, f.Note, " 0 never arrived", "every post reached its author's subscribed followers after the drain")
			assert.Contains(t, f.Note, " 0 subscriptions ended by the server", "no subscription ended while its connection stayed open")
		}
	}

	require.Len(t, r.Strategies, len(service.Strategies))
	for i, s := range r.Strategies {
		assert.Equal(t, string(service.Strategies[i]), s.Strategy)
		assert.Positive(t, s.ReadsPerSec, s.Strategy)
		assert.Positive(t, s.PostP50Ms, s.Strategy)
		assert.Positive(t, s.DeliveryP50Ms, s.Strategy)
		assert.Positive(t, s.StoredBytesUser, s.Strategy)
	}
}
