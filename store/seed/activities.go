package seed

// The network's activities beside posting: how many likes and reposts each
// message gets, who makes them and when, and the likes and reposts as
// stored.

import (
	"math/rand/v2"
	"slices"
	"time"

	"herald/store"
)

// countLikes draws how many likes each message gets: AvgLikes on average
// (spread).
func (n *Network) countLikes(rng *rand.Rand) {
	n.likeStart = n.spread(rng, n.cfg.AvgLikes*float64(n.cfg.Messages))
}

// spread draws how many of total acts (likes, reposts) each message gets,
// and returns their running sums: message k gets start[k+1]-start[k].
// Each message's expectation is proportional to its author's followers
// plus one (an author nobody follows is still read now and then), the
// count geometric around it, so that a few messages of popular authors
// take many and most messages few or none. A message gets at most half
// the other users' acts, so that distinct users are found soon.
func (n *Network) spread(rng *rand.Rand, total float64) []int {
	m := n.cfg.Messages
	start := make([]int, m+1)
	if total <= 0 || m == 0 {
		return start
	}
	weight := 0.0
	for _, a := range n.msgAuthor {
		weight += float64(len(n.followers[a]) + 1)
	}
	scale := total / weight
	most := float64((n.cfg.Users - 1) / 2)
	for k, a := range n.msgAuthor {
		mean := scale * float64(len(n.followers[a])+1)
		// floor(x + U) has mean x: the average holds for small means too.
		c := int(min(rng.ExpFloat64()*mean+rng.Float64(), most))
		start[k+1] = start[k] + c
	}
	return start
}

// repost draws the reposts: AvgReposts a user, spread over the messages
// as likes are, each reposter drawn as a liker is (pick), each repost
// within hours of its original. A repost's original is always a message
// of the network, never a repost, and never its reposter's own.
func (n *Network) repost(rng *rand.Rand) {
	n.repostStart = n.spread(rng, n.cfg.AvgReposts*float64(n.cfg.Users))
	total := n.Reposts()
	n.repostOf = make([]uint32, 0, total)
	n.reposter = make([]uint32, 0, total)
	n.repostIDs = make([]store.ID, 0, total)
	n.byReposter = make([][]uint32, n.cfg.Users)
	for k := range n.cfg.Messages {
		c := n.repostCount(k)
		if c == 0 {
			continue
		}
		users := n.pick(rng, k, c)
		t := n.messageTime(k)
		for _, d := range delays(rng, c, repostDelay) {
			j := len(n.repostIDs)
			n.repostOf = append(n.repostOf, uint32(k))
			n.reposter = append(n.reposter, users[j-n.repostStart[k]])
			n.repostIDs = append(n.repostIDs, n.repostID(t.Add(d), j))
		}
	}
	for j, u := range n.reposter {
		n.byReposter[u] = append(n.byReposter[u], uint32(j))
	}
	for _, list := range n.byReposter {
		slices.SortFunc(list, func(a, b uint32) int { return n.repostIDs[a].Compare(n.repostIDs[b]) })
	}
}

// Likes returns the number of likes.
func (n *Network) Likes() int { return n.likeStart[n.cfg.Messages] }

// likeCount returns the number of likes of message k.
func (n *Network) likeCount(k int) int { return n.likeStart[k+1] - n.likeStart[k] }

// MessageLikes returns the likes of message k, oldest first: no two by one
// user, none by its author, each after the message. A like's CreatedAt is
// its ID's time, as the backends list it. The likers are drawn from a
// stream of k's own, so a batch draws only its messages' likers (pick).
func (n *Network) MessageLikes(k int) []store.Like {
	lo, c := n.likeStart[k], n.likeCount(k)
	if c == 0 {
		return nil
	}
	// content's stream is (Seed, k), with k below 1<<63.
	r := rand.New(rand.NewPCG(n.cfg.Seed, uint64(k)|1<<63))
	likers := n.pick(r, k, c)
	t, id, author := n.messageTime(k), n.messageID(k), n.UserID(int(n.msgAuthor[k]))
	likes := make([]store.Like, c)
	for i, d := range delays(r, c, likeDelay) {
		lid := n.likeID(t.Add(d), lo+i)
		likes[i] = store.Like{ID: lid, UserID: n.UserID(int(likers[i])), MessageID: id, AuthorID: author, CreatedAt: lid.Time()}
	}
	return likes
}

// pick draws c distinct users, none the author of message k, as those who
// like or repost it: each a follower of the author with probability
// likeFollowerShare (a follower drawn already gives way to anyone), else
// anyone but the author.
func (n *Network) pick(r *rand.Rand, k, c int) []uint32 {
	a := n.msgAuthor[k]
	followers := n.followers[a]
	users := make([]uint32, 0, c)
	var seen map[uint32]struct{} // for many users; a few are searched in users
	if c > 32 {
		seen = make(map[uint32]struct{}, c)
	}
	taken := func(u uint32) bool {
		if seen != nil {
			_, ok := seen[u]
			return ok
		}
		return slices.Contains(users, u)
	}
	for len(users) < c {
		u := uint32(r.IntN(n.cfg.Users))
		if len(followers) > 0 && r.Float64() < likeFollowerShare {
			if f := followers[r.IntN(len(followers))]; !taken(f) {
				u = f
			}
		}
		if u == a || taken(u) {
			continue
		}
		users = append(users, u)
		if seen != nil {
			seen[u] = struct{}{}
		}
	}
	return users
}

// delays draws c delays from a message to the acts on it, ascending: 1 ms
// plus an exponential delay of the given mean, in whole milliseconds.
func delays(r *rand.Rand, c int, mean time.Duration) []time.Duration {
	ds := make([]time.Duration, c)
	for i := range ds {
		ds[i] = time.Millisecond + time.Duration(r.ExpFloat64()*float64(mean)).Truncate(time.Millisecond)
	}
	slices.Sort(ds)
	return ds
}

// likeID is the ID of like j (in message order, then oldest first) made
// at t: its counter holds j's low 24 bits and its node the network's node
// with j's next 24 bits flipped, so likes' IDs are distinct whatever
// their times, and time-ordered as store.NewID's.
func (n *Network) likeID(t time.Time, j int) store.ID {
	id := n.id(t, uint32(j))
	hi := j >> 24
	id[6], id[7], id[8] = id[6]^byte(hi>>16), id[7]^byte(hi>>8), id[8]^byte(hi)
	return id
}

// Reposts returns the number of reposts.
func (n *Network) Reposts() int { return n.repostStart[n.cfg.Messages] }

// repostCount returns the number of reposts of message k.
func (n *Network) repostCount(k int) int { return n.repostStart[k+1] - n.repostStart[k] }

// repostID is the ID of repost j made at t: as likeID's, with the node's
// top bit flipped besides, so that no repost has a message's ID (a repost
// is a message: both are keyed by ID in one place) for fewer than 1<<47
// reposts.
func (n *Network) repostID(t time.Time, j int) store.ID {
	id := n.likeID(t, j)
	id[6] ^= 0x80
	return id
}

// Repost returns repost j as CreateMessage stores it: a message of its
// reposter with no text, naming its original and the original's author,
// marked hidden from its reposter's home as Service.Repost marks it.
func (n *Network) Repost(j int) *store.Message {
	k, id := int(n.repostOf[j]), n.repostIDs[j]
	return &store.Message{
		ID: id, AuthorID: n.UserID(int(n.reposter[j])), Kind: store.KindRepost, CreatedAt: id.Time().UTC(),
		RepostOfID: n.messageID(k), RepostOfAuthorID: n.UserID(int(n.msgAuthor[k])), HomeHidden: n.homeHidden(j),
	}
}
