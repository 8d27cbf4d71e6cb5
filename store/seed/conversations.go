package seed

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"herald/store"
	"herald/store/storage"
)

// Conversations: a tenth of the users have direct conversations with some
// of the people they follow (as messaging follows the graph), and one
// user in groupUsers made a group of a few people it follows; each
// conversation holds a few messages, and most members have read them all.
const (
	// directShare is the share of users who started direct
	// conversations, each with 1 to maxDirectPerUser of its followees.
	directShare      = 0.1
	maxDirectPerUser = 2
	// A direct conversation holds 1 to maxDirectMessages messages, its
	// two users taking turns at random.
	maxDirectMessages = 6
	// groupUsers users per group, of minGroup to maxGroup members (the
	// creator and people it follows), with up to maxGroupMessages
	// messages.
	groupUsers       = 500
	minGroup         = 3
	maxGroup         = 20
	maxGroupMessages = 30
	// readAllShare of the members have read the whole conversation; the
	// others stopped at a random earlier message (a sender has read its
	// own messages, so that is the least it read).
	readAllShare = 0.7
	// convCounter is where conversation ids' counters start, apart from
	// the users' and the messages' (an id is a time and a counter).
	convCounter = 1 << 23
)

// Conversation is one generated conversation: its members (user indices;
// a group's creator first), each message's author and each member's read
// position, aligned with Members.
type Conversation struct {
	Group   bool
	Members []int
	Authors []int
	Reads   []uint64
	start   time.Time
	id      store.ID // a group's
}

// ID returns the conversation's id in the network n.
func (c *Conversation) ID(n *Network) store.ConversationID {
	if c.Group {
		return store.GroupConversationID(c.id)
	}
	return store.DirectConversationID(n.UserID(c.Members[0]), n.UserID(c.Members[1]))
}

// Conversations returns the network's conversations, the same on every
// run: drawn from a stream of their own, so that they change nothing else
// of the network.
func (n *Network) Conversations() []*Conversation {
	n.convOnce.Do(func() { n.convs = n.drawConversations() })
	return n.convs
}

func (n *Network) drawConversations() []*Conversation {
	rng := rand.New(rand.NewPCG(n.cfg.Seed, 0x636f6e76)) // "conv"
	var out []*Conversation
	span := historyLength * 9 / 10
	start := func() time.Time {
		return n.followTime().Add(time.Hour + time.Duration(rng.Int64N(int64(span))).Truncate(time.Millisecond))
	}
	pairs := map[[2]int]bool{}
	for u := range n.cfg.Users {
		if len(n.following[u]) == 0 || rng.Float64() >= directShare {
			continue
		}
		for range 1 + rng.IntN(maxDirectPerUser) {
			v := int(n.following[u][rng.IntN(len(n.following[u]))])
			p := [2]int{min(u, v), max(u, v)}
			if pairs[p] {
				continue
			}
			pairs[p] = true
			c := &Conversation{Members: []int{u, v}, start: start()}
			for range 1 + rng.IntN(maxDirectMessages) {
				c.Authors = append(c.Authors, c.Members[rng.IntN(2)])
			}
			out = append(out, c)
		}
	}
	// At least one group, so that a small network has one too.
	for g := range max(1, n.cfg.Users/groupUsers) {
		creator := rng.IntN(n.cfg.Users)
		f := n.following[creator]
		members := []int{creator}
		want := minGroup + rng.IntN(maxGroup-minGroup+1)
		for tries := 0; len(members) < want && tries < 4*maxGroup; tries++ {
			// People it follows, and anyone where it follows too few.
			v := rng.IntN(n.cfg.Users)
			if len(f) >= want {
				v = int(f[rng.IntN(len(f))])
			}
			if !slices.Contains(members, v) {
				members = append(members, v)
			}
		}
		if len(members) < minGroup {
			continue
		}
		c := &Conversation{Group: true, Members: members, start: start()}
		c.id = n.id(c.start, uint32(convCounter+g))
		for range rng.IntN(maxGroupMessages + 1) {
			c.Authors = append(c.Authors, members[rng.IntN(len(members))])
		}
		out = append(out, c)
	}
	for _, c := range out {
		last := uint64(len(c.Authors))
		c.Reads = make([]uint64, len(c.Members))
		for i, m := range c.Members {
			read := last
			if rng.Float64() >= readAllShare {
				read = uint64(rng.IntN(int(last) + 1))
			}
			for s, a := range c.Authors {
				if a == m {
					read = max(read, uint64(s+1))
				}
			}
			c.Reads[i] = read
		}
	}
	return out
}

// ConversationMessages returns how many messages the conversations hold.
func (n *Network) ConversationMessages() int {
	m := 0
	for _, c := range n.Conversations() {
		m += len(c.Authors)
	}
	return m
}

// convMessage is message seq (1, 2...) of conversation c, the k-th
// conversation: a minute or so after the one before.
func (n *Network) convMessage(c *Conversation, k int, seq uint64) *store.ConversationMessage {
	at := c.start.Add(time.Duration(seq) * time.Minute)
	r := rand.New(rand.NewPCG(n.cfg.Seed, uint64(k)<<8|seq))
	var b strings.Builder
	for i := range 2 + r.IntN(12) {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return &store.ConversationMessage{
		// The counter tells apart messages of the same millisecond.
		ID:             n.id(at, uint32(k*maxGroupMessages)+uint32(seq)),
		ConversationID: c.ID(n), AuthorID: n.UserID(c.Authors[seq-1]), Text: b.String(), CreatedAt: at,
	}
}

// convWorkers load conversations side by side: on MongoDB each send is
// several round trips, which they overlap.
const convWorkers = 4

// LoadConversations writes the network's conversations into st through
// its ordinary operations (the bulk path has no conversations): a group's
// creation, each message's send and each member's read mark. It is
// resumable: a conversation's messages up to its stored last seq are
// skipped, and creation and read marks are idempotent. It returns the
// number of messages it sent. Run it after Load, which makes the users.
func LoadConversations(ctx context.Context, st storage.Conversations, n *Network, progress func(records int)) (int, error) {
	convs := n.Conversations()
	var mu sync.Mutex
	sent := 0
	var firstErr error
	var wg sync.WaitGroup
	for w := range convWorkers {
		wg.Go(func() {
			for k := w; k < len(convs); k += convWorkers {
				s, err := n.loadConversation(ctx, st, convs[k], k)
				mu.Lock()
				sent += s
				if err != nil && firstErr == nil {
					firstErr = err
				}
				stop := firstErr != nil
				mu.Unlock()
				if progress != nil {
					progress(s)
				}
				if stop {
					return
				}
			}
		})
	}
	wg.Wait()
	return sent, firstErr
}

func (n *Network) loadConversation(ctx context.Context, st storage.Conversations, c *Conversation, k int) (int, error) {
	id := c.ID(n)
	found, err := st.FindConversations(ctx, []store.ConversationID{id})
	if err != nil {
		return 0, fmt.Errorf("seed: conversation %d: %w", k, err)
	}
	var have uint64
	if found[0] != nil {
		have = found[0].LastSeq
	} else if c.Group {
		members := make([]store.ID, len(c.Members))
		for i, m := range c.Members {
			members[i] = n.UserID(m)
		}
		g := &store.Conversation{ID: id, Name: fmt.Sprintf("Group %d", k+1), CreatorID: members[0], Members: members,
			Admins: members[:1], CreatedAt: c.start}
		if err := st.CreateConversation(ctx, g); err != nil {
			return 0, fmt.Errorf("seed: group %d: %w", k, err)
		}
	}
	sent := 0
	for seq := have + 1; seq <= uint64(len(c.Authors)); seq++ {
		if _, err := st.AppendConversationMessage(ctx, n.convMessage(c, k, seq)); err != nil {
			return sent, fmt.Errorf("seed: conversation %d, message %d: %w", k, seq, err)
		}
		sent++
	}
	for i, m := range c.Members {
		// Sending read the sender's own messages: a mark only for more.
		own := uint64(0)
		for s, a := range c.Authors {
			if a == m {
				own = uint64(s + 1)
			}
		}
		if c.Reads[i] <= own {
			continue
		}
		if _, err := st.MarkConversationRead(ctx, n.UserID(m), id, c.Reads[i]); err != nil {
			return sent, fmt.Errorf("seed: conversation %d, read mark: %w", k, err)
		}
	}
	return sent, nil
}
