package seed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

func TestGenerate_Deterministic(t *testing.T) {
	cfg := Config{Seed: 7, Users: 2000, AvgFollows: 20, Messages: 3000}
	a, err := Generate(cfg)
	require.NoError(t, err)
	b, err := Generate(cfg)
	require.NoError(t, err)
	assert.Equal(t, a.following, b.following)
	assert.Equal(t, a.msgAuthor, b.msgAuthor)
	assert.Equal(t, a.message(42), b.message(42))

	cfg.Seed = 8
	c, err := Generate(cfg)
	require.NoError(t, err)
	assert.NotEqual(t, a.following, c.following, "another seed, another graph")
	assert.NotEqual(t, a.UserID(0), c.UserID(0), "another seed, other ids")
}

func TestGenerate_PowerLaw(t *testing.T) {
	n, err := Generate(Config{Seed: 1, Users: 20_000, AvgFollows: 50, Messages: 100})
	require.NoError(t, err)
	counts := make([]int, n.Users())
	for i := range counts {
		counts[i] = n.Followers(i)
	}
	slices.Sort(counts)
	avg := float64(n.Edges()) / float64(n.Users())
	assert.InDelta(t, 50, avg, 5, "average follows")
	median, top := counts[len(counts)/2], counts[len(counts)-1]
	assert.Less(t, median, 50, "most authors have a few tens of followers at most")
	assert.Greater(t, top, n.Users()*3/4, "the most popular author is followed by most users")
	assert.Greater(t, counts[len(counts)-10], 10*median, "a heavy head")

	for i := range n.Users() {
		f := n.Following(i)
		assert.True(t, slices.IsSorted(f))
		assert.NotContains(t, f, uint32(i), "nobody follows themselves")
		assert.Len(t, slices.Compact(slices.Clone(f)), len(f), "no edge twice")
	}
}

func TestGenerate_Pinned(t *testing.T) {
	n, err := Generate(Config{Seed: 3, Users: 3000, AvgFollows: 5, Messages: 10, Pinned: []int{2999, 1000, 10}})
	require.NoError(t, err)
	for j, want := range []int{2999, 1000, 10} {
		assert.Equal(t, want, n.Followers(n.Pinned(j)), "pinned author %d", j)
	}
	_, err = Generate(Config{Seed: 3, Users: 3000, AvgFollows: 5, Pinned: []int{3000}})
	assert.Error(t, err, "more followers than other users")
}

func TestGenerate_Hybrid(t *testing.T) {
	n, err := Generate(Config{Seed: 1, Users: 500, AvgFollows: 10, Messages: 2000, Strategy: service.StrategyHybrid, CelebrityThreshold: 100})
	require.NoError(t, err)
	pulled := 0
	for k := range 2000 {
		m := n.message(k)
		a := int(n.msgAuthor[k])
		// A reply to another user is pushed, to the followers who follow
		// that user too.
		assert.Equal(t, n.Followers(a) > 100 && !m.RepliesToOther(), m.Pulled)
		if m.Pulled {
			pulled++
		}
	}
	require.NotZero(t, pulled, "some authors are above the threshold")
	for i := range n.Users() {
		for _, it := range n.inbox(i).Items {
			m := n.messageByID(t, it.MessageID)
			assert.False(t, m.Pulled, "a pulled message is in no inbox")
		}
	}
}

func (n *Network) messageByID(t *testing.T, id store.ID) *store.Message {
	for k := range n.cfg.Messages {
		if n.messageID(k) == id {
			return n.message(k)
		}
	}
	t.Fatalf("no message %s", id)
	return nil
}

func TestNetwork_Records(t *testing.T) {
	n, err := Generate(Config{Seed: 1, Users: 300, AvgFollows: 10, Messages: 900})
	require.NoError(t, err)
	for i := range n.Users() {
		in := n.inbox(i)
		assert.Len(t, in.Items, n.InboxSize(i))
		assert.True(t, slices.IsSortedFunc(in.Items, func(a, b store.InboxItem) int { return b.MessageID.Compare(a.MessageID) }), "newest first")
	}
	ids := make(map[store.ID]bool)
	mentioningPosts := 0
	replies := make(map[store.ID]int)
	for i := range n.Users() {
		ids[n.UserID(i)] = true
		u := n.user(i, nil, time.Time{})
		assert.Equal(t, Handle(i), u.Handle)
	}
	for k := range n.cfg.Messages {
		m := n.message(k)
		ids[m.ID] = true
		assert.True(t, m.CreatedAt.Before(time.Now()))
		if k > 0 {
			assert.Positive(t, m.ID.Compare(n.messageID(k-1)), "message ids increase with time")
		}
		if m.Kind == store.KindReply {
			assert.Negative(t, m.ReplyToID.Compare(m.ID), "a reply answers an older message")
			require.NotEmpty(t, m.Mentions, "a reply mentions the author it answers")
			root := n.message(int(n.replyTo[k]))
			if root.Kind == store.KindReply {
				assert.Equal(t, root.RootID, m.RootID, "a reply's reply keeps its thread's root")
			} else {
				assert.Equal(t, root.ID, m.RootID)
			}
			replies[m.ReplyToID]++
			assert.Equal(t, m.ReplyToAuthorID, m.Mentions[0])
		}
		// The stored mentions are what the service would resolve from the
		// text: handles of existing users, in order.
		var resolved []store.ID
		for _, h := range store.ParseMentions(m.Text) {
			var i int
			_, err := fmt.Sscanf(h, "user%d", &i)
			require.NoError(t, err, h)
			resolved = append(resolved, n.UserID(i-1))
		}
		assert.Equal(t, resolved, m.Mentions, m.Text)
		if len(m.Mentions) > 0 && m.Kind == store.KindPost {
			mentioningPosts++
		}
	}
	// About mentionShare of the posts that could mention someone do.
	assert.InDelta(t, mentionShare*float64(n.cfg.Messages)*(1-replyShare), float64(mentioningPosts), 40)
	assert.Len(t, ids, n.Users()+n.cfg.Messages, "every id distinct")
	for k := range n.cfg.Messages {
		m := n.message(k)
		assert.Equal(t, replies[m.ID], m.ReplyCount, "a message's reply count is its replies")
	}
}

// memLoader keeps what is loaded, keyed so that a repeat overwrites, and
// fails once at batch failAt.
type memLoader struct {
	users    map[store.ID]store.User
	edges    map[[2]store.ID]bool
	messages map[store.ID]store.Message
	inboxes  map[store.ID]int
	progress map[string][]byte
	batches  int
	failAt   int
}

func newMemLoader() *memLoader {
	return &memLoader{
		users: map[store.ID]store.User{}, edges: map[[2]store.ID]bool{}, messages: map[store.ID]store.Message{},
		inboxes: map[store.ID]int{}, progress: map[string][]byte{}, failAt: -1,
	}
}

func (m *memLoader) LoadBulk(_ context.Context, b *storage.Bulk) error {
	if m.batches == m.failAt {
		m.failAt = -1
		return errors.New("disk full")
	}
	m.batches++
	for _, u := range b.Users {
		m.users[u.ID] = *u
	}
	for _, e := range b.Edges {
		m.edges[[2]store.ID{e.Follower, e.Followee}] = true
	}
	for _, msg := range b.Messages {
		m.messages[msg.ID] = *msg
	}
	for _, in := range b.Inboxes {
		m.inboxes[in.Owner] = len(in.Items)
	}
	if b.Progress != nil {
		m.progress[b.Progress.Name] = b.Progress.Value
	}
	return nil
}

func (m *memLoader) BulkProgress(_ context.Context, name string) ([]byte, error) {
	return m.progress[name], nil
}

func TestLoad_Resumes(t *testing.T) {
	n, err := Generate(Config{Seed: 5, Users: 400, AvgFollows: 8, Messages: 600})
	require.NoError(t, err)
	opts := LoadOptions{BatchRecords: 500, LastSeen: Epoch}

	whole := newMemLoader()
	total := 0
	opts.Progress = func(r int) { total += r }
	all, err := Load(context.Background(), whole, n, opts)
	require.NoError(t, err)
	assert.Equal(t, n.Records(), total, "the progress adds up to every record")
	assert.Greater(t, all, 5)

	cut := newMemLoader()
	cut.failAt = all / 2
	total = 0
	first, err := Load(context.Background(), cut, n, opts)
	require.ErrorContains(t, err, "disk full")
	assert.Equal(t, all/2, first)
	second, err := Load(context.Background(), cut, n, opts)
	require.NoError(t, err)
	assert.Equal(t, all-first, second, "the second load skips what the first loaded")
	assert.Equal(t, whole.users, cut.users)
	assert.Equal(t, whole.edges, cut.edges)
	assert.Equal(t, whole.messages, cut.messages)
	assert.Equal(t, whole.inboxes, cut.inboxes)

	again, err := Load(context.Background(), cut, n, opts)
	require.NoError(t, err)
	assert.Zero(t, again, "a finished load has nothing left to do")

	other, err := Generate(Config{Seed: 6, Users: 400, AvgFollows: 8, Messages: 600})
	require.NoError(t, err)
	_, err = Load(context.Background(), cut, other, opts)
	assert.ErrorContains(t, err, "another seeded network")
}

// BenchmarkGenerate measures generating herald seed's default network and
// building all its batches, without a store.
//
//	go test -run '^$' -bench Generate -benchtime 1x ./store/seed/
func BenchmarkGenerate(b *testing.B) {
	for b.Loop() {
		n, err := Generate(Config{Seed: 1, Users: 100_000, AvgFollows: 100, Messages: 100_000})
		require.NoError(b, err)
		records := 0
		for _, bt := range n.plan(LoadOptions{}, DefaultBatchRecords) {
			bt.build()
			records += bt.records
		}
		b.ReportMetric(float64(records), "records")
	}
}

// TestGenerate_RepliesAtHome checks the seeded inboxes against the rule of
// replies at home: a reply to another user is in the inbox of a follower of
// its author only if the follower follows that user too, or is that user.
func TestGenerate_RepliesAtHome(t *testing.T) {
	n, err := Generate(Config{Seed: 2, Users: 300, AvgFollows: 10, Messages: 3000})
	require.NoError(t, err)
	hidden, shownToOthers := 0, 0
	for i := range n.Users() {
		in := map[store.ID]bool{}
		for _, it := range n.inbox(i).Items {
			in[it.MessageID] = true
		}
		for _, v := range n.Following(i) {
			for _, k := range n.byAuthor[v] {
				m := n.message(int(k))
				want := !m.RepliesToOther() || m.ReplyToAuthorID == n.UserID(i) || slices.Contains(n.Following(i), uint32(n.msgAuthor[n.replyTo[k]]))
				assert.Equal(t, want, in[m.ID], "user %d, message %d", i, k)
				switch {
				case !want:
					hidden++
				case m.RepliesToOther():
					shownToOthers++
				}
			}
		}
		assert.Len(t, in, n.InboxSize(i))
	}
	assert.NotZero(t, hidden, "some replies are kept out")
	assert.NotZero(t, shownToOthers, "some replies to others are shown")
}
