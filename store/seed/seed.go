// Package seed generates a realistic social network and loads it into a
// backend in bulk (herald seed, herald bench).
//
// The network is a function of its Config alone: the same seed and sizes
// give the same users, IDs, edges and messages on every machine, which is
// what lets an interrupted load resume and a benchmark find its authors
// without asking the server. Popularity follows Zipf's law with exponent
// 1, as follower counts do in real networks: a few authors are followed by
// most users, most by tens. How many users each user follows is
// exponentially distributed around the average. Messages are spread evenly
// over the users and over 30 days, a tenth of them replies; the inboxes
// hold what fan-out on write would have delivered, every follower of the
// author having been active throughout. Likes go where attention does: a
// message's expected likes are proportional to its author's followers,
// the count geometric around that (most messages get none or a few, some
// many), nine in ten likers drawn among those followers, within hours of
// the message. Reposts go the same way, fewer of them, and reach the
// reposter's followers who do not follow the original's author.
package seed

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"herald/store"
	"herald/store/service"
	"herald/store/storage"
)

// Epoch is when the generated history starts: users are created at Epoch,
// follow each other an hour later, and post over the 30 days after that.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	historyLength = 30 * 24 * time.Hour
	replyShare    = 0.1
	// mentionShare is the share of posts that mention a user their author
	// follows; every reply mentions the author it answers, as Mastodon's
	// and Twitter's reply boxes start with that @handle.
	mentionShare = 0.1
	// maxUsers keeps user IDs distinct: a user's ID carries its index in
	// the 3-byte counter.
	maxUsers = 1 << 24
	// likeFollowerShare is the share of likes (and of reposts) drawn
	// among the followers of the message's author; the others come from
	// anyone, as a reposted or searched message finds readers beyond its
	// author's followers.
	likeFollowerShare = 0.9
	// likeDelay is the mean time from a message to a like of it
	// (exponential: most likes come in the first hours).
	likeDelay = 2 * time.Hour
	// repostDelay is the mean time from a message to a repost of it: a
	// repost spreads what its reposter has just read, as a like does.
	repostDelay = likeDelay
)

// DefaultAvgLikes is the average number of likes per message when
// Config.AvgLikes is 0. Two likes a message is twenty for each reply (a
// tenth of the messages are replies): likes commonly outnumber replies by
// an order of magnitude on public timelines. And it keeps the networks
// fast to load: herald seed's default network holds about 200 records
// per message (follows and inbox entries), to which it adds 2, and
// herald bench's about 22, to which it adds 2 (9%: 0.6 s of its 8 s
// load, docs/benchmarks.md).
const DefaultAvgLikes = 2

// DefaultAvgReposts is the average number of reposts per user when
// Config.AvgReposts is 0. At 0.3 a user herald seed's default network has
// 30,540 reposts, one for every seven likes, as public timelines show
// fewer reposts than likes by about that much. A repost costs what a post
// does: an outbox record and an entry in each follower's inbox it reaches
// (94 on average there, though most reposters follow popular authors and
// so do most of their followers), 2.9 million entries in all, 15% more
// records to load.
const DefaultAvgReposts = 0.3

// Config describes a network.
type Config struct {
	Seed       uint64
	Users      int
	AvgFollows int // the average number of users each user follows
	Messages   int // in all
	// Pinned gives the most popular authors exact follower counts, in
	// order (a benchmark's authors of 100k, 10k and 1k followers); the
	// other authors get theirs from the Zipf draws, in which pinned
	// authors take no part.
	Pinned []int
	// Strategy decides what is stored: the inboxes of its layout, and
	// under StrategyHybrid which messages are pulled (those whose author
	// has more than CelebrityThreshold followers).
	Strategy           service.Strategy
	CelebrityThreshold int
	// AvgLikes is the average number of likes a message gets: 0 means
	// DefaultAvgLikes, a negative value none.
	AvgLikes float64
	// AvgReposts is the average number of reposts a user makes: 0 means
	// DefaultAvgReposts, a negative value none.
	AvgReposts float64
}

// Handle returns the handle of user i.
func Handle(i int) string { return fmt.Sprintf("user%d", i+1) }

// Network is a generated network in compact form: users by index.
type Network struct {
	cfg       Config
	node      [3]byte
	following [][]uint32 // by follower, ascending
	followers [][]uint32 // by followee, ascending
	msgAuthor []uint32   // by message index, which is time order
	replyTo   []int32    // -1: a post
	replies   []int32    // how many replies answer each message
	byAuthor  [][]uint32 // message indices by author, ascending
	pulled    []bool     // by user: their messages are pulled
	pinned    []uint32   // the pinned authors, as Config.Pinned orders them
	// likeStart[k] is the number of likes of the messages before k, so
	// message k has likeStart[k+1]-likeStart[k]; its likers are drawn
	// when asked for (MessageLikes), from a stream of its own.
	likeStart []int
	// Reposts are numbered in the order of their originals, then oldest
	// first: repostStart[k] is the number of reposts of the messages
	// before k, repost j reposts message repostOf[j], is by reposter[j]
	// and has ID repostIDs[j], and byReposter lists each user's reposts
	// oldest first.
	repostStart []int
	repostOf    []uint32
	reposter    []uint32
	repostIDs   []store.ID
	byReposter  [][]uint32
	// convs are drawn on first use (Conversations).
	convOnce sync.Once
	convs    []*Conversation
}

// Generate builds the network cfg describes.
func Generate(cfg Config) (*Network, error) {
	switch {
	case cfg.Users < 2 || cfg.Users > maxUsers:
		return nil, fmt.Errorf("seed: users must be within 2..%d", maxUsers)
	case cfg.AvgFollows < 0 || cfg.AvgFollows >= cfg.Users:
		return nil, fmt.Errorf("seed: the average follows must be within 0..%d", cfg.Users-1)
	case cfg.Messages < 0:
		return nil, errors.New("seed: messages must not be negative")
	case len(cfg.Pinned) >= cfg.Users:
		return nil, errors.New("seed: more pinned authors than users")
	case math.IsNaN(cfg.AvgLikes) || math.IsInf(cfg.AvgLikes, 0):
		return nil, errors.New("seed: the average likes must be a number")
	case math.IsNaN(cfg.AvgReposts) || math.IsInf(cfg.AvgReposts, 0):
		return nil, errors.New("seed: the average reposts must be a number")
	}
	for _, n := range cfg.Pinned {
		if n < 0 || n > cfg.Users-1 {
			return nil, fmt.Errorf("seed: a pinned author cannot have %d followers among %d users", n, cfg.Users)
		}
	}
	if cfg.Strategy == "" {
		cfg.Strategy = service.StrategyBucket
	}
	switch {
	case cfg.AvgLikes == 0:
		cfg.AvgLikes = DefaultAvgLikes
	case cfg.AvgLikes < 0:
		cfg.AvgLikes = -1
	}
	switch {
	case cfg.AvgReposts == 0:
		cfg.AvgReposts = DefaultAvgReposts
	case cfg.AvgReposts < 0:
		cfg.AvgReposts = -1
	}
	n := &Network{cfg: cfg}
	h := fnv.New32a()
	_ = binary.Write(h, binary.BigEndian, cfg.Seed)
	sum := h.Sum32()
	n.node = [3]byte{byte(sum >> 16), byte(sum >> 8), byte(sum)}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6865726c64)) // "herld"
	n.follow(rng)
	n.post(rng)
	n.countLikes(rng)
	n.repost(rng)
	return n, nil
}

// follow draws the follow graph.
func (n *Network) follow(rng *rand.Rand) {
	users := n.cfg.Users
	// Popularity rank r is user byRank[r], so the popular are not simply
	// the first users created.
	byRank := make([]uint32, users)
	for i := range byRank {
		byRank[i] = uint32(i)
	}
	rng.Shuffle(users, func(i, j int) { byRank[i], byRank[j] = byRank[j], byRank[i] })
	pinned := len(n.cfg.Pinned)
	n.pinned = byRank[:pinned:pinned]
	// The cumulative Zipf weights of the unpinned ranks.
	cum := make([]float64, users-pinned)
	total := 0.0
	for r := range cum {
		total += 1 / float64(r+pinned+1)
		cum[r] = total
	}
	n.following = make([][]uint32, users)
	seen := make(map[uint32]struct{})
	for u := range users {
		want := 0
		if n.cfg.AvgFollows > 0 {
			// Exponential around the average, at least one, and at most
			// half the unpinned users so that distinct draws end soon.
			want = max(1, int(math.Round(rng.ExpFloat64()*float64(n.cfg.AvgFollows))))
			want = min(want, (users-pinned)/2)
		}
		clear(seen)
		list := make([]uint32, 0, want)
		for len(list) < want {
			r := sort.SearchFloat64s(cum, rng.Float64()*total)
			v := byRank[min(r, len(cum)-1)+pinned]
			if v == uint32(u) {
				continue
			}
			if _, dup := seen[v]; dup {
				continue
			}
			seen[v] = struct{}{}
			list = append(list, v)
		}
		n.following[u] = list
	}
	// Pinned authors are followed by the first of a shuffled order.
	order := make([]uint32, users)
	copy(order, byRank)
	for r, count := range n.cfg.Pinned {
		author := byRank[r]
		rng.Shuffle(users, func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, u := range order {
			if count == 0 {
				break
			}
			if u != author {
				n.following[u] = append(n.following[u], author)
				count--
			}
		}
	}
	counts := make([]int, users)
	for _, list := range n.following {
		slices.Sort(list)
		for _, v := range list {
			counts[v]++
		}
	}
	n.followers = make([][]uint32, users)
	for v, c := range counts {
		n.followers[v] = make([]uint32, 0, c)
	}
	for u, list := range n.following {
		for _, v := range list {
			n.followers[v] = append(n.followers[v], uint32(u))
		}
	}
	n.pulled = make([]bool, users)
	if n.cfg.Strategy == service.StrategyHybrid {
		for v, c := range counts {
			n.pulled[v] = c > n.cfg.CelebrityThreshold
		}
	}
}

// post draws the messages: each by a uniformly chosen author, a tenth
// replying to an earlier message.
func (n *Network) post(rng *rand.Rand) {
	m := n.cfg.Messages
	n.msgAuthor = make([]uint32, m)
	n.replyTo = make([]int32, m)
	n.replies = make([]int32, m)
	n.byAuthor = make([][]uint32, n.cfg.Users)
	for k := range m {
		a := uint32(rng.IntN(n.cfg.Users))
		n.msgAuthor[k] = a
		n.replyTo[k] = -1
		if k > 0 && rng.Float64() < replyShare {
			n.replyTo[k] = int32(rng.IntN(k))
			n.replies[n.replyTo[k]]++
		}
		n.byAuthor[a] = append(n.byAuthor[a], uint32(k))
	}
}

// Config returns the network's configuration.
func (n *Network) Config() Config { return n.cfg }

// Users returns the number of users.
func (n *Network) Users() int { return n.cfg.Users }

// UserID returns the ID of user i.
func (n *Network) UserID(i int) store.ID { return n.id(n.userTime(i), uint32(i)) }

// Followers returns the number of followers of user i.
func (n *Network) Followers(i int) int { return len(n.followers[i]) }

// Following returns the users user i follows, ascending.
func (n *Network) Following(i int) []uint32 { return n.following[i] }

// FollowersOf returns the followers of user i, ascending.
func (n *Network) FollowersOf(i int) []uint32 { return n.followers[i] }

// Pinned returns the user index of pinned author j.
func (n *Network) Pinned(j int) int { return int(n.pinned[j]) }

// InboxSize returns how many items user i's inbox holds: the messages and
// reposts of the users it follows that reach it, but pulled messages.
func (n *Network) InboxSize(i int) int { return n.followedMessages(i, false) }

// InboxTotal returns user i's inbox total, as every strategy counts it:
// the messages and reposts of the users it follows that reach it, pulled
// messages included.
func (n *Network) InboxTotal(i int) int { return n.followedMessages(i, true) }

// TimelineSize returns how many items user i's timeline shows: its inbox
// total, its own messages, and its own reposts not marked hidden from its
// home (Repost's HomeHidden).
func (n *Network) TimelineSize(i int) int {
	size := n.InboxTotal(i) + len(n.byAuthor[i])
	for _, j := range n.byReposter[i] {
		if !n.homeHidden(int(j)) {
			size++
		}
	}
	return size
}

// followedMessages counts the messages and reposts of the users user i
// follows that its home timeline shows, pulled messages only if
// withPulled (a repost is never pulled).
func (n *Network) followedMessages(i int, withPulled bool) int {
	size := 0
	for _, v := range n.following[i] {
		for _, k := range n.byAuthor[v] {
			if n.shows(i, int(k)) && (withPulled || !n.isPulled(int(k))) {
				size++
			}
		}
		for _, j := range n.byReposter[v] {
			if n.reaches(i, int(j)) {
				size++
			}
		}
	}
	return size
}

// replyTarget returns the user message k replies to if it is another than
// its author, else -1.
func (n *Network) replyTarget(k int) int {
	r := n.replyTo[k]
	if r < 0 || n.msgAuthor[r] == n.msgAuthor[k] {
		return -1
	}
	return int(n.msgAuthor[r])
}

// isPulled reports whether message k is pulled under hybrid: its author is
// a celebrity and it is no reply to another user (those are pushed).
func (n *Network) isPulled(k int) bool { return n.pulled[n.msgAuthor[k]] && n.replyTarget(k) < 0 }

// shows reports whether the home timeline of user i, who follows the author
// of message k, shows it: the rule of replies at home.
func (n *Network) shows(i, k int) bool {
	x := n.replyTarget(k)
	if x < 0 || x == i {
		return true
	}
	_, follows := slices.BinarySearch(n.following[i], uint32(x))
	return follows
}

// reaches reports whether repost j reaches the home timeline of user i, who
// follows its reposter: the rule of reposts, by which a repost brings a
// message to those who would not see it otherwise, so it skips the
// original's author and the users who follow that author.
func (n *Network) reaches(i, j int) bool {
	a := n.msgAuthor[n.repostOf[j]]
	if int(a) == i {
		return false
	}
	_, follows := slices.BinarySearch(n.following[i], a)
	return !follows
}

// homeHidden reports whether repost j is hidden from its reposter's own
// home, as the service marks a repost when it is made: the reposter wrote
// the original or follows its author. A seeded network's follows do not
// change after its reposts, so that is the rule of reposts at home.
func (n *Network) homeHidden(j int) bool { return !n.reaches(int(n.reposter[j]), j) }

// Edges returns the number of follow edges.
func (n *Network) Edges() int {
	e := 0
	for _, list := range n.following {
		e += len(list)
	}
	return e
}

func (n *Network) id(t time.Time, counter uint32) store.ID {
	var id store.ID
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(t.UnixMilli()))
	copy(id[0:6], b[2:8])
	copy(id[6:9], n.node[:])
	id[9], id[10], id[11] = byte(counter>>16), byte(counter>>8), byte(counter)
	return id
}

func (n *Network) userTime(i int) time.Time { return Epoch.Add(time.Duration(i) * time.Millisecond) }

// followTime is when every edge was made: after every user was created,
// before any message.
func (n *Network) followTime() time.Time { return n.userTime(n.cfg.Users).Add(time.Hour) }

func (n *Network) messageTime(k int) time.Time {
	step := max(time.Millisecond, historyLength/time.Duration(max(1, n.cfg.Messages)))
	return n.followTime().Add(time.Hour + time.Duration(k)*step.Truncate(time.Millisecond))
}

func (n *Network) messageID(k int) store.ID { return n.id(n.messageTime(k), uint32(k)) }

var words = strings.Fields(`the a timeline inbox message follow reply today we
	ship herald graph fan out read write bucket cache hybrid fast quiet morning
	coffee release notes deploy on call green tests weekend map trail river
	city music book new old small big good late early`)

// content is message k's text, 3 to 24 words, and the users it mentions,
// the same on every run: a reply starts by mentioning the author it
// answers, and a post may end by mentioning a user its author follows.
func (n *Network) content(k int) (string, []store.ID) {
	r := rand.New(rand.NewPCG(n.cfg.Seed, uint64(k)))
	var b strings.Builder
	var mentions []store.ID
	mention := func(u int) {
		b.WriteString("@" + Handle(u))
		mentions = append(mentions, n.UserID(u))
	}
	if rt := n.replyTo[k]; rt >= 0 {
		mention(int(n.msgAuthor[rt]))
		b.WriteByte(' ')
	}
	fmt.Fprintf(&b, "#%d", k+1)
	for range 3 + r.IntN(22) {
		b.WriteByte(' ')
		b.WriteString(words[r.IntN(len(words))])
	}
	if follows := n.following[n.msgAuthor[k]]; n.replyTo[k] < 0 && len(follows) > 0 && r.Float64() < mentionShare {
		b.WriteByte(' ')
		mention(int(follows[r.IntN(len(follows))]))
	}
	return b.String(), mentions
}

func (n *Network) message(k int) *store.Message {
	t := n.messageTime(k)
	a := int(n.msgAuthor[k])
	text, mentions := n.content(k)
	m := &store.Message{
		ID: n.messageID(k), AuthorID: n.UserID(a), Text: text, Kind: store.KindPost,
		CreatedAt: t, Pulled: n.isPulled(k), Mentions: mentions,
	}
	m.ReplyCount, m.LikeCount, m.RepostCount = int(n.replies[k]), n.likeCount(k), n.repostCount(k)
	if r := n.replyTo[k]; r >= 0 {
		m.Kind, m.ReplyToID, m.ReplyToAuthorID = store.KindReply, n.messageID(int(r)), n.UserID(int(n.msgAuthor[r]))
		root := int(r)
		for n.replyTo[root] >= 0 {
			root = int(n.replyTo[root])
		}
		m.RootID, m.RootAuthorID = n.messageID(root), n.UserID(int(n.msgAuthor[root]))
	}
	return m
}

// user is user i as stored, counters final.
func (n *Network) user(i int, passwordHash []byte, seen time.Time) *store.User {
	t := n.userTime(i)
	pulled := 0
	for _, k := range n.byAuthor[i] {
		if n.isPulled(int(k)) {
			pulled++
		}
	}
	return &store.User{
		ID: n.UserID(i), Handle: Handle(i), DisplayName: fmt.Sprintf("User %d", i+1),
		PasswordHash: passwordHash, CreatedAt: t, LastSeenAt: seen,
		FollowerCount: len(n.followers[i]), FollowingCount: len(n.following[i]),
		MessageCount: len(n.byAuthor[i]) + len(n.byReposter[i]), PulledCount: pulled,
		NeverBlocked: true, // the network has no blocks
	}
}

// inbox is user i's inbox, newest first: the messages and the reposts the
// fan-out delivers, merged.
func (n *Network) inbox(i int) storage.BulkInbox {
	ks := make([]uint32, 0, n.InboxSize(i))
	var js []uint32
	for _, v := range n.following[i] {
		for _, k := range n.byAuthor[v] {
			if n.shows(i, int(k)) && !n.isPulled(int(k)) {
				ks = append(ks, k)
			}
		}
		for _, j := range n.byReposter[v] {
			if n.reaches(i, int(j)) {
				js = append(js, j)
			}
		}
	}
	slices.SortFunc(ks, func(a, b uint32) int { return cmp.Compare(b, a) })
	slices.SortFunc(js, func(a, b uint32) int { return n.repostIDs[b].Compare(n.repostIDs[a]) })
	items := make([]store.InboxItem, 0, len(ks)+len(js))
	for len(ks) > 0 || len(js) > 0 {
		var it store.InboxItem
		if len(js) == 0 || len(ks) > 0 && n.messageID(int(ks[0])).Compare(n.repostIDs[js[0]]) > 0 {
			k := int(ks[0])
			ks = ks[1:]
			t := n.messageTime(k)
			it.InboxEntry = store.InboxEntry{MessageID: n.messageID(k), AuthorID: n.UserID(int(n.msgAuthor[k])), CreatedAt: t}
		} else {
			j := int(js[0])
			js = js[1:]
			id := n.repostIDs[j]
			it.InboxEntry = store.InboxEntry{MessageID: id, AuthorID: n.UserID(int(n.reposter[j])), CreatedAt: id.Time().UTC()}
		}
		it.DeliveredAt = it.CreatedAt
		items = append(items, it)
	}
	return storage.BulkInbox{Owner: n.UserID(i), Items: items}
}
