package seed

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	celebrityReposts := 0
	for i := range n.Users() {
		for _, it := range n.inbox(i).Items {
			m := n.messageByID(t, it.MessageID)
			assert.False(t, m.Pulled, "a pulled message is in no inbox")
			if m.Kind == store.KindRepost && n.Followers(userIndex(n, m.AuthorID)) > 100 {
				celebrityReposts++
			}
		}
	}
	assert.NotZero(t, celebrityReposts, "a celebrity's reposts are pushed")
	for j := range n.Reposts() {
		assert.False(t, n.Repost(j).Pulled, "a repost is never pulled")
	}
}

// messageByID returns the message or repost whose ID is id.
func (n *Network) messageByID(t *testing.T, id store.ID) *store.Message {
	for k := range n.cfg.Messages {
		if n.messageID(k) == id {
			return n.message(k)
		}
	}
	for j := range n.Reposts() {
		if n.repostIDs[j] == id {
			return n.Repost(j)
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
	reposts := make(map[store.ID]int)
	posted := make([]int, n.Users())
	for k := range n.cfg.Messages {
		posted[n.msgAuthor[k]]++
	}
	for j := range n.Reposts() {
		m := n.Repost(j)
		ids[m.ID] = true
		reposts[m.RepostOfID]++
		posted[userIndex(n, m.AuthorID)]++
	}
	require.NotZero(t, n.Reposts())
	assert.Len(t, ids, n.Users()+n.cfg.Messages+n.Reposts(), "every id distinct")
	for k := range n.cfg.Messages {
		m := n.message(k)
		assert.Equal(t, replies[m.ID], m.ReplyCount, "a message's reply count is its replies")
		assert.Equal(t, reposts[m.ID], m.RepostCount, "a message's repost count is its reposts")
	}
	for i := range n.Users() {
		assert.Equal(t, posted[i], n.user(i, nil, time.Time{}).MessageCount, "a user's message count holds their reposts, as CreateMessage counts them")
	}
}

// memLoader keeps what is loaded, keyed so that a repeat overwrites, and
// fails once at batch failAt. It refuses a like before its user and its
// message, and a repost before its reposter and its original, as the
// contract orders them.
type memLoader struct {
	users    map[store.ID]store.User
	edges    map[[2]store.ID]bool
	messages map[store.ID]store.Message
	likes    map[[2]store.ID]store.Like
	inboxes  map[store.ID]int
	progress map[string][]byte
	batches  int
	failAt   int
}

func newMemLoader() *memLoader {
	return &memLoader{
		users: map[store.ID]store.User{}, edges: map[[2]store.ID]bool{}, messages: map[store.ID]store.Message{},
		likes: map[[2]store.ID]store.Like{}, inboxes: map[store.ID]int{}, progress: map[string][]byte{}, failAt: -1,
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
		if msg.Kind == store.KindRepost {
			_, user := m.users[msg.AuthorID]
			orig, ok := m.messages[msg.RepostOfID]
			if !user || !ok || orig.AuthorID != msg.RepostOfAuthorID {
				return fmt.Errorf("repost %s before its reposter or its original", msg.ID)
			}
		}
		m.messages[msg.ID] = *msg
	}
	for _, l := range b.Likes {
		_, user := m.users[l.UserID]
		msg, ok := m.messages[l.MessageID]
		if !user || !ok || msg.AuthorID != l.AuthorID {
			return fmt.Errorf("like %s before its user or its message", l.ID)
		}
		m.likes[[2]store.ID{l.UserID, l.MessageID}] = l
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

	require.NotZero(t, n.Reposts())
	assert.Len(t, whole.messages, n.Config().Messages+n.Reposts(), "the messages and the reposts")
	assert.Len(t, whole.likes, n.Likes())
	// Cut in the middle, and in the reposts' batches.
	reposts := slices.IndexFunc(n.plan(opts, opts.BatchRecords), func(b batch) bool {
		bk := b.build()
		return len(bk.Messages) > 0 && bk.Messages[0].Kind == store.KindRepost
	})
	require.Positive(t, reposts)
	var cut *memLoader
	for _, at := range []int{all / 2, reposts, reposts + 1} {
		cut = newMemLoader()
		cut.failAt = at
		first, err := Load(context.Background(), cut, n, opts)
		require.ErrorContains(t, err, "disk full")
		assert.Equal(t, at, first)
		second, err := Load(context.Background(), cut, n, opts)
		require.NoError(t, err)
		assert.Equal(t, all-first, second, "the second load skips what the first loaded")
		assert.Equal(t, whole.users, cut.users)
		assert.Equal(t, whole.edges, cut.edges)
		assert.Equal(t, whole.messages, cut.messages)
		assert.Equal(t, whole.likes, cut.likes)
		assert.Equal(t, whole.inboxes, cut.inboxes)
	}

	again, err := Load(context.Background(), cut, n, opts)
	require.NoError(t, err)
	assert.Zero(t, again, "a finished load has nothing left to do")

	other, err := Generate(Config{Seed: 6, Users: 400, AvgFollows: 8, Messages: 600})
	require.NoError(t, err)
	_, err = Load(context.Background(), cut, other, opts)
	assert.ErrorContains(t, err, "another seeded network")
	other, err = Generate(Config{Seed: 5, Users: 400, AvgFollows: 8, Messages: 600, AvgReposts: -1})
	require.NoError(t, err)
	_, err = Load(context.Background(), cut, other, opts)
	assert.ErrorContains(t, err, "another seeded network", "the same network without its reposts is another")
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

func TestGenerate_Likes(t *testing.T) {
	cfg := Config{Seed: 4, Users: 3000, AvgFollows: 20, Messages: 20_000, Pinned: []int{2000}}
	n, err := Generate(cfg)
	require.NoError(t, err)
	again, err := Generate(cfg)
	require.NoError(t, err)
	assert.Equal(t, float64(DefaultAvgLikes), n.Config().AvgLikes, "0 is the default")

	type pair struct{ user, message store.ID }
	pairs := map[pair]bool{}
	ids := map[store.ID]bool{}
	counts := make([]int, cfg.Messages)
	byFollowers := 0
	for k := range cfg.Messages {
		likes := n.MessageLikes(k)
		require.Equal(t, likes, again.MessageLikes(k), "the same likes on every run")
		m := n.message(k)
		counts[k] = len(likes)
		assert.Equal(t, len(likes), m.LikeCount, "a message's count is its likes")
		for i, l := range likes {
			assert.Equal(t, m.ID, l.MessageID)
			assert.Equal(t, m.AuthorID, l.AuthorID)
			assert.NotEqual(t, m.AuthorID, l.UserID, "no self-like")
			assert.False(t, pairs[pair{l.UserID, l.MessageID}], "a user likes a message once")
			assert.False(t, ids[l.ID], "like ids are distinct")
			pairs[pair{l.UserID, l.MessageID}], ids[l.ID] = true, true
			assert.True(t, l.CreatedAt.After(m.CreatedAt), "a like comes after its message")
			assert.Equal(t, l.ID.Time(), l.CreatedAt, "a like's time is its ID's")
			if i > 0 {
				assert.Positive(t, l.ID.Compare(likes[i-1].ID), "oldest first")
			}
			u := userIndex(n, l.UserID)
			if _, ok := slices.BinarySearch(n.FollowersOf(int(n.msgAuthor[k])), uint32(u)); ok {
				byFollowers++
			}
		}
	}
	assert.Len(t, ids, n.Likes(), "the likes add up")
	avg := float64(n.Likes()) / float64(cfg.Messages)
	assert.InDelta(t, DefaultAvgLikes, avg, 0.5, "average likes per message")
	assert.Greater(t, float64(byFollowers)/float64(n.Likes()), 0.75, "most likers follow the author")

	// Heavy-tailed: most messages have none or one, the top 1% hold a
	// fifth of all likes, and the most followed author's messages take far
	// more than a median author's.
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	assert.LessOrEqual(t, sorted[len(sorted)/2], 1, "the median message")
	top := 0
	for _, c := range sorted[len(sorted)*99/100:] {
		top += c
	}
	assert.Greater(t, float64(top)/float64(n.Likes()), 0.2, "the top 1%% of messages' share")
	followers := make([]int, n.Users())
	for i := range followers {
		followers[i] = n.Followers(i)
	}
	slices.Sort(followers)
	median := followers[len(followers)/2]
	var popular, ordinary, popularN, ordinaryN int
	for k, a := range n.msgAuthor {
		switch f := n.Followers(int(a)); {
		case f >= 20*max(median, 1):
			popular, popularN = popular+counts[k], popularN+1
		case f <= median:
			ordinary, ordinaryN = ordinary+counts[k], ordinaryN+1
		}
	}
	require.NotZero(t, popularN)
	require.NotZero(t, ordinaryN)
	assert.Greater(t, float64(popular)/float64(popularN), 10*float64(ordinary)/float64(ordinaryN), "popular authors' messages take the likes")

	for avgLikes, want := range map[float64]float64{-1: 0, 6: 6} {
		c := cfg
		c.AvgLikes = avgLikes
		other, err := Generate(c)
		require.NoError(t, err)
		assert.InDelta(t, want, float64(other.Likes())/float64(c.Messages), 1, "AvgLikes %v", avgLikes)
		assert.Equal(t, n.message(7).Text, other.message(7).Text, "likes change nothing else")
	}
	_, err = Generate(Config{Seed: 1, Users: 10, Messages: 10, AvgLikes: math.Inf(1)})
	assert.Error(t, err)
}

// userIndex returns the index of the user whose ID is id.
func userIndex(n *Network, id store.ID) int {
	i := int(id[9])<<16 | int(id[10])<<8 | int(id[11])
	if n.UserID(i) != id {
		panic("not a user of the network")
	}
	return i
}

func TestNetwork_LikeIDs(t *testing.T) {
	n, err := Generate(Config{Seed: 1, Users: 10, Messages: 10})
	require.NoError(t, err)
	at := Epoch.Add(time.Hour)
	seen := map[store.ID]int{}
	for _, j := range []int{0, 1, 1 << 24, 1<<24 + 1, 1 << 25, 1<<48 - 1} {
		id := n.likeID(at, j)
		assert.Equal(t, at, id.Time().UTC())
		_, dup := seen[id]
		assert.False(t, dup, "like %d's ID is like %d's", j, seen[id])
		seen[id] = j
	}
}

func TestGenerate_Reposts(t *testing.T) {
	cfg := Config{Seed: 4, Users: 20_000, AvgFollows: 20, Messages: 20_000, Pinned: []int{10_000}}
	n, err := Generate(cfg)
	require.NoError(t, err)
	again, err := Generate(cfg)
	require.NoError(t, err)
	assert.Equal(t, DefaultAvgReposts, n.Config().AvgReposts, "0 is the default")

	type pair struct{ user, message store.ID }
	pairs := map[pair]bool{}
	counts := make([]int, cfg.Messages)
	byFollowers := 0
	for j := range n.Reposts() {
		r := n.Repost(j)
		require.Equal(t, r, again.Repost(j), "the same reposts on every run")
		k := int(n.repostOf[j])
		m := n.message(k)
		counts[k]++
		assert.Equal(t, store.KindRepost, r.Kind)
		assert.Empty(t, r.Text)
		assert.Empty(t, r.Mentions)
		assert.Equal(t, m.ID, r.RepostOfID)
		assert.Equal(t, m.AuthorID, r.RepostOfAuthorID)
		assert.NotEqual(t, store.KindRepost, m.Kind, "the original is no repost")
		assert.NotEqual(t, m.AuthorID, r.AuthorID, "no one reposts their own message")
		assert.False(t, pairs[pair{r.AuthorID, m.ID}], "a user reposts a message once")
		pairs[pair{r.AuthorID, m.ID}] = true
		assert.True(t, r.CreatedAt.After(m.CreatedAt), "a repost comes after its original")
		assert.Equal(t, r.ID.Time().UTC(), r.CreatedAt, "a repost's time is its ID's")
		if _, ok := slices.BinarySearch(n.FollowersOf(int(n.msgAuthor[k])), uint32(userIndex(n, r.AuthorID))); ok {
			byFollowers++
		}
	}
	for i := range n.Users() {
		assert.True(t, slices.IsSortedFunc(n.byReposter[i], func(a, b uint32) int { return n.repostIDs[a].Compare(n.repostIDs[b]) }), "a user's reposts oldest first")
	}
	assert.Len(t, pairs, n.Reposts())
	assert.InDelta(t, DefaultAvgReposts, float64(n.Reposts())/float64(cfg.Users), 0.1, "average reposts per user")
	assert.Greater(t, float64(byFollowers)/float64(n.Reposts()), 0.75, "most reposters follow the author")

	// As likes: most messages are never reposted, and the most followed
	// authors' messages are reposted far more than a median author's.
	sorted := slices.Clone(counts)
	slices.Sort(sorted)
	assert.Zero(t, sorted[len(sorted)/2], "the median message")
	top := 0
	for _, c := range sorted[len(sorted)*99/100:] {
		top += c
	}
	assert.Greater(t, float64(top)/float64(n.Reposts()), 0.2, "the top 1%% of messages' share")
	var pinned, pinnedN, rest, restN int
	for k, a := range n.msgAuthor {
		if int(a) == n.Pinned(0) {
			pinned, pinnedN = pinned+counts[k], pinnedN+1
		} else {
			rest, restN = rest+counts[k], restN+1
		}
	}
	require.NotZero(t, pinnedN)
	assert.Greater(t, float64(pinned)/float64(pinnedN), 10*float64(rest)/float64(restN), "a popular author's messages are reposted")

	for avg, want := range map[float64]float64{-1: 0, 2: 2} {
		c := cfg
		c.AvgReposts = avg
		other, err := Generate(c)
		require.NoError(t, err)
		assert.InDelta(t, want, float64(other.Reposts())/float64(c.Users), 0.3, "AvgReposts %v", avg)
		assert.Equal(t, n.message(7).Text, other.message(7).Text, "reposts change nothing else")
		assert.Equal(t, n.MessageLikes(7), other.MessageLikes(7), "reposts change no like")
		assert.Equal(t, n.Likes(), other.Likes())
	}
	_, err = Generate(Config{Seed: 1, Users: 10, Messages: 10, AvgReposts: math.NaN()})
	assert.Error(t, err)
}

// TestGenerate_RepostsAtHome checks the seeded inboxes against the rule of
// reposts: a repost reaches the followers of its reposter but the
// original's author and those who follow that author, under every stored
// layout and at every follower count (hybrid pushes a celebrity's
// reposts).
func TestGenerate_RepostsAtHome(t *testing.T) {
	for _, st := range []service.Strategy{service.StrategyWrite, service.StrategyHybrid} {
		n, err := Generate(Config{Seed: 2, Users: 300, AvgFollows: 10, Messages: 3000, AvgReposts: 3, Strategy: st, CelebrityThreshold: 30})
		require.NoError(t, err)
		kept, shown, ownHidden := 0, 0, 0
		for i := range n.Users() {
			in := map[store.ID]bool{}
			for _, it := range n.inbox(i).Items {
				in[it.MessageID] = true
			}
			for _, v := range n.Following(i) {
				for _, j := range n.byReposter[v] {
					r := n.Repost(int(j))
					a := userIndex(n, r.RepostOfAuthorID)
					want := a != i && !slices.Contains(n.Following(i), uint32(a))
					assert.Equal(t, want, in[r.ID], "%s: user %d, repost %d", st, i, j)
					if want {
						shown++
					} else {
						kept++
					}
				}
			}
			assert.Len(t, in, n.InboxSize(i))
			own := 0
			for _, j := range n.byReposter[i] {
				// Marked as the service marks it: hidden from one's own
				// home if one wrote the original or follows its author.
				r := n.Repost(int(j))
				a := userIndex(n, r.RepostOfAuthorID)
				hidden := a == i || slices.Contains(n.Following(i), uint32(a))
				assert.Equal(t, hidden, r.HomeHidden, "%s: user %d's repost %d", st, i, j)
				if hidden {
					ownHidden++
				} else {
					own++
				}
			}
			assert.Equal(t, n.InboxSize(i)+len(n.byAuthor[i])+own+n.pulledShown(i), n.TimelineSize(i),
				"%s: the timeline adds one's own messages, one's own reposts not marked hidden, and the pulled messages", st)
		}
		assert.NotZero(t, kept, "%s: some reposts are kept out", st)
		assert.NotZero(t, shown, "%s: some reposts are shown", st)
		assert.NotZero(t, ownHidden, "%s: some reposts are hidden from their reposter's home", st)
	}
}

// pulledShown counts the pulled messages user i's timeline shows.
func (n *Network) pulledShown(i int) int {
	c := 0
	for _, v := range n.following[i] {
		for _, k := range n.byAuthor[v] {
			if n.isPulled(int(k)) && n.shows(i, int(k)) {
				c++
			}
		}
	}
	return c
}

func TestNetwork_RepostIDs(t *testing.T) {
	n, err := Generate(Config{Seed: 1, Users: 10, Messages: 10})
	require.NoError(t, err)
	at := n.messageTime(3)
	seen := map[store.ID]int{}
	for _, j := range []int{0, 1, 3, 1 << 24, 1<<24 + 3, 1 << 25, 1<<47 - 1} {
		id := n.repostID(at, j)
		assert.Equal(t, at, id.Time().UTC())
		assert.NotEqual(t, n.messageID(3), id, "repost %d has a message's ID", j)
		_, dup := seen[id]
		assert.False(t, dup, "repost %d's ID is repost %d's", j, seen[id])
		seen[id] = j
	}
}

// The conversations come in the proportions conversations.go sets: a
// tenth of the users started direct conversations with people they
// follow, one user in 500 a group of 3 to 20, and some of the members
// have something unread.
func TestGenerate_Conversations(t *testing.T) {
	cfg := Config{Seed: 1, Users: 20_000, AvgFollows: 20, Messages: 100}
	n, err := Generate(cfg)
	require.NoError(t, err)
	convs := n.Conversations()
	starters := map[int]bool{}
	ids := map[store.ConversationID]bool{}
	var groups, memberships, unread, messages int
	for _, c := range convs {
		id := c.ID(n)
		assert.False(t, ids[id], "a conversation twice")
		ids[id] = true
		assert.Equal(t, c.Group, id.IsGroup())
		last := uint64(len(c.Authors))
		messages += len(c.Authors)
		if c.Group {
			groups++
			assert.GreaterOrEqual(t, len(c.Members), minGroup)
			assert.LessOrEqual(t, len(c.Members), maxGroup)
			assert.LessOrEqual(t, len(c.Authors), maxGroupMessages)
			assert.Len(t, slices.Compact(slices.Sorted(slices.Values(c.Members))), len(c.Members), "members are distinct")
		} else {
			starters[c.Members[0]] = true
			_, follows := slices.BinarySearch(n.Following(c.Members[0]), uint32(c.Members[1]))
			assert.True(t, follows, "a direct conversation is with someone its starter follows")
			assert.GreaterOrEqual(t, len(c.Authors), 1)
			assert.LessOrEqual(t, len(c.Authors), maxDirectMessages)
		}
		for i, m := range c.Members {
			memberships++
			assert.LessOrEqual(t, c.Reads[i], last)
			for s, a := range c.Authors {
				assert.Contains(t, c.Members, a, "an author is a member")
				if a == m {
					assert.GreaterOrEqual(t, c.Reads[i], uint64(s+1), "a sender read its own message")
				}
			}
			if c.Reads[i] < last {
				unread++
			}
		}
		for seq := range last {
			m := n.convMessage(c, 0, seq+1)
			assert.Equal(t, id, m.ConversationID)
			assert.NotEmpty(t, m.Text)
		}
	}
	assert.InDelta(t, directShare, float64(len(starters))/float64(cfg.Users), 0.02, "users who started direct conversations")
	assert.InDelta(t, cfg.Users/groupUsers, groups, 3, "groups")
	share := float64(unread) / float64(memberships)
	assert.True(t, share > 0.05 && share < 0.4, "members with unread messages: %.2f", share)
	assert.Equal(t, messages, n.ConversationMessages())
	t.Logf("%d conversations (%d groups), %d messages, %.0f%% of memberships with unread messages", len(convs), groups, messages, 100*share)

	again, err := Generate(cfg)
	require.NoError(t, err)
	assert.Equal(t, convs, again.Conversations(), "the same on every run")
}
