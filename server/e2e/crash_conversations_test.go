package e2e

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
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
)

const (
	// convUsers each send direct messages to the others and to one group
	// of all of them, and mark conversations read, concurrently.
	convUsers = 6
	// convKills bounds the killed rounds.
	convKills = 3
	// convOpsPerRound bounds each client's operations in a round, should
	// the kill come late.
	convOpsPerRound = 2000
)

// convLedger is what the server acknowledged: a send or a read mark that
// got its answer must be in the store after any later kill.
type convLedger struct {
	mu sync.Mutex
	// sent[conv][seq] is the acknowledged message and its author.
	sent map[store.ConversationID]map[uint64]ackedMessage
	// read[user][conv] is the highest acknowledged read mark (a send
	// reads its conversation too, so the sender's own sends count).
	read map[store.ID]map[store.ConversationID]uint64
	// newest[conv] is the global id of the newest acknowledged message,
	// which read marks point at.
	newest map[store.ConversationID]ackedRef
	// marks counts the acknowledged read marks.
	marks int
}

type ackedMessage struct {
	author store.ID
	text   string
}

type ackedRef struct {
	seq uint64
	id  string
}

func (l *convLedger) sentOne(author store.ID, conv store.ConversationID, seq uint64, id, text string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sent[conv] == nil {
		l.sent[conv] = map[uint64]ackedMessage{}
	}
	l.sent[conv][seq] = ackedMessage{author: author, text: text}
	if seq > l.newest[conv].seq {
		l.newest[conv] = ackedRef{seq: seq, id: id}
	}
	l.readLocked(author, conv, seq)
}

func (l *convLedger) readLocked(user store.ID, conv store.ConversationID, seq uint64) {
	if l.read[user] == nil {
		l.read[user] = map[store.ConversationID]uint64{}
	}
	l.read[user][conv] = max(l.read[user][conv], seq)
}

func (l *convLedger) markedRead(user store.ID, conv store.ConversationID, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.readLocked(user, conv, seq)
}

func (l *convLedger) newestOf(conv store.ConversationID) (ackedRef, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.newest[conv]
	return r, ok
}

// TestCrash_KillDuringConversations kills the real binary with SIGKILL
// while several clients send direct and group messages and mark
// conversations read over GraphQL (several rounds, at random moments),
// restarts it each time, and checks at the end that every acknowledged
// send is in its conversation's history with its seq, seqs are dense,
// every member's unread count (last seq − read seq) and total are exact
// and agree with the receipts and the acknowledged read marks, and every
// list entry holds its conversation's newest message. Over GraphQL too.
func TestCrash_KillDuringConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server binary and kills it repeatedly; skipped in -short mode")
	}
	ctx := context.Background()
	bin := servertest.BuildHerald(t)
	data := t.TempDir()
	dbDir := filepath.Join(data, datadir.EmbeddedDir)
	users, group := seedConversations(t, dbDir)
	rng := crashRand(t)
	// Every client sends as fast as it is answered: no rate limit may
	// refuse it (a refusal would be a failure, not a kill's effect).
	env := []string{datadir.EnvTokenSecret + "=" + crashSecret,
		"HERALD_RATE_LIMIT_USER=0", "HERALD_RATE_LIMIT_ADDRESS=0",
		"HERALD_RATE_LIMIT_QUERY_USER=0", "HERALD_RATE_LIMIT_QUERY_ADDRESS=0"}

	p := startHeraldWith(t, bin, data, "info", env...)
	tokens := make([]string, convUsers)
	for i := range users {
		u := logInForCrash(t, "http://"+p.addr, fmt.Sprintf("conv%d", i))
		require.Equal(t, users[i], storeIDOf(t, "User", u.ID))
		tokens[i] = u.Token
	}
	led := &convLedger{
		sent:   map[store.ConversationID]map[uint64]ackedMessage{},
		read:   map[store.ID]map[store.ConversationID]uint64{},
		newest: map[store.ConversationID]ackedRef{},
	}
	c := newCrashClient()
	acked := 0
	for k := range convKills {
		base := "http://" + p.addr
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var unexpected []error
		var ops int
		for i := range users {
			// Drawn here: rng is not for concurrent use.
			r := rand.New(rand.NewPCG(rng.Uint64(), uint64(i)))
			wg.Go(func() {
				n, err := convClient(c, base, led, users, tokens, group, i, r, stop)
				mu.Lock()
				defer mu.Unlock()
				ops += n
				if err != nil {
					unexpected = append(unexpected, err)
				}
			})
		}
		delay := time.Duration(150+rng.IntN(350)) * time.Millisecond
		time.Sleep(delay)
		killHerald(t, p)
		close(stop)
		wg.Wait()
		require.Empty(t, unexpected, "answers other than the kill's")
		t.Logf("round %d: killed after %v, %d operations acknowledged", k+1, delay, ops)
		acked += ops
		p = startHeraldWith(t, bin, data, "info", env...)
	}
	require.Positive(t, acked, "no operation was acknowledged before the kills")

	// Over GraphQL, after the last restart: each member's list, unread
	// counts and total.
	base := "http://" + p.addr
	type listed struct {
		unread  int
		lastSeq uint64
	}
	gqlTotals := make([]int, convUsers)
	gqlLists := make([]map[store.ConversationID]listed, convUsers)
	for i := range users {
		d := servertest.MustGQL(t, base, tokens[i], `{ conversationsUnreadCount conversations(first: 50) { edges { node { id unreadCount lastMessage { seq } } } } }`, nil)
		gqlTotals[i] = int(d["conversationsUnreadCount"].(float64))
		gqlLists[i] = map[store.ConversationID]listed{}
		for _, e := range d["conversations"].(map[string]any)["edges"].([]any) {
			n := e.(map[string]any)["node"].(map[string]any)
			var l listed
			l.unread = int(n["unreadCount"].(float64))
			if lm, ok := n["lastMessage"].(map[string]any); ok {
				l.lastSeq = uint64(lm["seq"].(float64))
			}
			gqlLists[i][convIDOf(t, n["id"].(string))] = l
		}
	}
	p.stop(t)

	// In the store: histories, read states, receipts and lists.
	st, err := embedded.Open(dbDir, embedded.Options{Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ids := []store.ConversationID{group}
	for i := range users {
		for j := i + 1; j < len(users); j++ {
			ids = append(ids, store.DirectConversationID(users[i], users[j]))
		}
	}
	found, err := st.FindConversations(ctx, ids)
	require.NoError(t, err)
	convs := map[store.ConversationID]*store.Conversation{}
	newestText := map[store.ConversationID]string{}
	// newestID is the highest message id of each conversation: an
	// entry's place, since ids and seqs of concurrent senders may be in
	// different orders (design.md, "List order").
	newestID := map[store.ConversationID]store.ID{}
	stored := 0
	for i, conv := range found {
		if conv == nil {
			assert.Empty(t, led.sent[ids[i]], "an acknowledged direct message's conversation is missing")
			continue
		}
		convs[conv.ID] = conv
		ms, err := st.ListConversationMessages(ctx, conv.ID, store.SeqRange{Limit: int(conv.LastSeq) + 10})
		require.NoError(t, err)
		require.Len(t, ms, int(conv.LastSeq), "conversation %s: its history holds its last seq's messages", conv.ID)
		for j, m := range ms {
			require.Equal(t, conv.LastSeq-uint64(j), m.Seq, "conversation %s: seqs dense, newest first", conv.ID)
		}
		if len(ms) > 0 {
			newestText[conv.ID] = ms[0].Text
		}
		bySeq := map[uint64]*store.ConversationMessage{}
		for _, m := range ms {
			bySeq[m.Seq] = m
			if m.ID.Compare(newestID[conv.ID]) > 0 {
				newestID[conv.ID] = m.ID
			}
		}
		for seq, a := range led.sent[conv.ID] {
			m := bySeq[seq]
			if assert.NotNil(t, m, "conversation %s: acknowledged message %d lost", conv.ID, seq) {
				assert.Equal(t, a.text, m.Text, "conversation %s seq %d", conv.ID, seq)
				assert.Equal(t, a.author, m.AuthorID, "conversation %s seq %d", conv.ID, seq)
			}
		}
		stored += len(ms)
	}
	unacked := stored
	for _, s := range led.sent {
		unacked -= len(s)
	}
	t.Logf("%d messages stored, %d of them sent but not acknowledged (cut off by a kill); %d read marks acknowledged", stored, unacked, led.marks)
	require.Positive(t, led.marks, "no read mark was acknowledged")
	unreadAll := 0

	for i, u := range users {
		state, err := st.ReadUnreadConversations(ctx, u)
		require.NoError(t, err)
		total := 0
		for id, conv := range convs {
			if conv.LastSeq == 0 || !conv.IsMember(u) {
				continue
			}
			at := -1
			for j, m := range conv.Members {
				if m == u {
					at = j
				}
			}
			require.GreaterOrEqual(t, at, 0, "user %d is a member of %s", i, id)
			read := conv.ReadSeqs[at] // the receipt
			assert.GreaterOrEqual(t, read, led.read[u][id], "user %d, conversation %s: an acknowledged read mark (or send) lost", i, id)
			assert.LessOrEqual(t, read, conv.LastSeq, "user %d, conversation %s: read past the last", i, id)
			unread := int(conv.LastSeq - read)
			// The read state holds the conversations with unread
			// messages; each must agree with the receipt and the history.
			if s, ok := state[id]; ok {
				assert.Equal(t, conv.LastSeq, s.LastSeq, "user %d, conversation %s: told of the last seq", i, id)
				assert.Equal(t, read, s.ReadSeq, "user %d, conversation %s: the read state and the receipt", i, id)
				assert.Equal(t, unread, s.Unread())
			} else {
				assert.Zero(t, unread, "user %d, conversation %s: unread messages missing from the read state", i, id)
			}
			total += unread
			g, ok := gqlLists[i][id]
			if assert.True(t, ok, "user %d: conversation %s in its list over GraphQL", i, id) {
				assert.Equal(t, unread, g.unread, "user %d, conversation %s: unreadCount over GraphQL", i, id)
				assert.Equal(t, conv.LastSeq, g.lastSeq, "user %d, conversation %s: lastMessage over GraphQL", i, id)
			}
		}
		assert.Equal(t, total, state.Total(), "user %d: the total of its read state", i)
		unreadAll += total
		assert.Equal(t, total, gqlTotals[i], "user %d: conversationsUnreadCount", i)

		entries, err := st.ListConversations(ctx, u, store.Forward(store.NilID, 100))
		require.NoError(t, err)
		seen := map[store.ConversationID]bool{}
		for j, e := range entries {
			conv := convs[e.ConversationID]
			require.NotNil(t, conv, "user %d: an entry of an unknown conversation", i)
			seen[e.ConversationID] = true
			if j > 0 {
				assert.Negative(t, e.LastActivity.Compare(entries[j-1].LastActivity), "user %d: list newest first", i)
			}
			if conv.LastSeq == 0 {
				assert.Nil(t, e.Last)
				continue
			}
			if assert.NotNil(t, e.Last, "user %d, conversation %s: the entry's last message", i, e.ConversationID) {
				assert.Equal(t, conv.LastSeq, e.Last.Seq, "user %d, conversation %s: the entry's last message is the newest", i, e.ConversationID)
				assert.Equal(t, newestText[e.ConversationID], e.Last.Text)
				assert.Equal(t, newestID[e.ConversationID], e.LastActivity, "user %d: the entry's place is its newest message id", i)
			}
		}
		for id, conv := range convs {
			if conv.IsMember(u) {
				assert.True(t, seen[id], "user %d: conversation %s missing from its list", i, id)
			}
		}
	}
	assert.Positive(t, unreadAll, "nobody has an unread message: the counts were not put to the test")
}

// convClient is user i's client: until stop or a transport error (the
// kill), it sends a direct message to another user, a message to the
// group, or marks a conversation read up to its newest acknowledged
// message, and records what was acknowledged. It returns how many
// operations were, and any answer that was neither a success nor the
// kill's cut.
func convClient(c *crashClient, base string, led *convLedger, users []store.ID, tokens []string, group store.ConversationID, i int, r *rand.Rand, stop <-chan struct{}) (int, error) {
	me := users[i]
	const send = `{ id seq conversationId }`
	for n := range convOpsPerRound {
		select {
		case <-stop:
			return n, nil
		default:
		}
		peer := (i + 1 + r.IntN(len(users)-1)) % len(users)
		direct := store.DirectConversationID(me, users[peer])
		text := fmt.Sprintf("from %d, op %d, %x", i, n, r.Uint32())
		var d map[string]any
		var err error
		var conv store.ConversationID
		var readSeq uint64
		switch op := r.IntN(10); {
		case op < 4:
			conv = direct
			d, err = c.do(base, tokens[i], `mutation($to: ID!, $t: String!) { m: sendDirectMessage(to: $to, text: $t) `+send+` }`,
				map[string]any{"to": globalIDOf("User", users[peer]), "t": text})
		case op < 7:
			conv = group
			d, err = c.do(base, tokens[i], `mutation($c: ID!, $t: String!) { m: sendGroupMessage(conversationId: $c, text: $t) `+send+` }`,
				map[string]any{"c": convGlobalID(group), "t": text})
		default:
			conv = group
			if r.IntN(2) == 0 {
				conv = direct
			}
			ref, ok := led.newestOf(conv)
			if !ok {
				continue
			}
			readSeq = ref.seq
			d, err = c.do(base, tokens[i], `mutation($c: ID!, $m: ID) { markConversationRead(id: $c, upTo: $m) { id } }`,
				map[string]any{"c": convGlobalID(conv), "m": ref.id})
		}
		if err != nil {
			if _, ok := errors.AsType[gqlErrors](err); ok {
				return n, fmt.Errorf("user %d: %w", i, err)
			}
			return n, nil // cut off by the kill: not acknowledged
		}
		if readSeq > 0 {
			led.markedRead(me, conv, readSeq)
			led.mu.Lock()
			led.marks++
			led.mu.Unlock()
			continue
		}
		m := d["m"].(map[string]any)
		led.sentOne(me, conv, uint64(m["seq"].(float64)), m["id"].(string), text)
	}
	return convOpsPerRound, nil
}

// seedConversations makes, in the embedded store at dir, convUsers users
// conv0... (crashPassword) and a group of them all, and returns them and
// the group.
func seedConversations(t *testing.T, dir string) ([]store.ID, store.ConversationID) {
	t.Helper()
	ctx := context.Background()
	log := slog.New(slog.DiscardHandler)
	st, err := embedded.Open(dir, embedded.Options{Logger: log})
	require.NoError(t, err)
	hub := pubsub.NewHub()
	svc := service.NewService(st, hub, service.Options{Logger: log, PasswordCost: bcrypt.MinCost})
	require.NoError(t, svc.Start(ctx))
	defer func() {
		require.NoError(t, svc.Close(ctx))
		hub.Close()
		require.NoError(t, st.Close())
	}()
	users := make([]store.ID, convUsers)
	for i := range users {
		u, err := svc.SignUp(ctx, service.SignUpInput{Handle: fmt.Sprintf("conv%d", i), Password: crashPassword})
		require.NoError(t, err)
		users[i] = u.ID
	}
	g, err := svc.CreateGroup(ctx, users[0], "all of us", users[1:])
	require.NoError(t, err)
	return users, g.ID
}

// convGlobalID and convIDOf spell a conversation's GraphQL id as
// graph/conversations.go does.
func convGlobalID(c store.ConversationID) string {
	return base64.RawURLEncoding.EncodeToString([]byte("Conversation:" + c.String()))
}

func convIDOf(t *testing.T, global string) store.ConversationID {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(global)
	require.NoError(t, err)
	h, ok := strings.CutPrefix(string(raw), "Conversation:")
	require.True(t, ok, "global id %q names a conversation", global)
	id, err := store.ParseConversationID(h)
	require.NoError(t, err)
	return id
}
