package mongostore_test

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/pubsub"
	"herald/store/service"
)

var farAhead = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// A send is five writes (conversations.go); a process killed before any
// of them loses only that unacknowledged message, and the recovery pass
// finishes it exactly: dense seqs, every list and unread count as after
// a clean send, and a repeat of the recovery changes nothing.
func TestFaults_ConversationSendRecovered(t *testing.T) {
	ctx := context.Background()
	for cut := int32(1); cut <= 5; cut++ {
		st, f := openFaulty(t)
		owner, a, b := mkUser(t, st, "owner"), mkUser(t, st, "a"), mkUser(t, st, "b")
		now := tickClock()
		g := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: "g", CreatorID: owner,
			Members: []store.ID{owner, a, b}, Admins: []store.ID{owner}, CreatedAt: now}
		require.NoError(t, st.CreateConversation(ctx, g))
		send := func(author store.ID, text string) (*store.ConversationMessage, error) {
			at := tickClock()
			m := &store.ConversationMessage{ID: store.NewID(at), ConversationID: g.ID, AuthorID: author, Text: text, CreatedAt: at}
			_, err := st.AppendConversationMessage(ctx, m)
			return m, err
		}
		_, err := send(a, "first")
		require.NoError(t, err)

		f.convWrite.Store(cut)
		lost, err := send(owner, "cut short")
		require.Error(t, err, "write %d fails", cut)
		// IDs never go back, so after other tests they may be later than
		// the fault clock: the bound is far ahead.
		done, err := st.RecoverConversationSends(ctx, farAhead)
		require.NoError(t, err)
		stored := cut > 1 // the first write is the message's insert
		if stored {
			require.Len(t, done, 1, "write %d: the pending send is finished", cut)
			assert.Equal(t, lost.ID, done[0].ID)
			assert.Equal(t, uint64(2), done[0].Seq)
			assert.Equal(t, g.ID, done[0].ConversationID)
		} else {
			assert.Empty(t, done)
		}
		done, err = st.RecoverConversationSends(ctx, farAhead)
		require.NoError(t, err)
		assert.Empty(t, done, "a finished send is not pending")

		next, err := send(b, "next")
		require.NoError(t, err)
		ms, err := st.ListConversationMessages(ctx, g.ID, store.SeqRange{Limit: 10, Reverse: true})
		require.NoError(t, err)
		var texts []string
		for i, m := range ms {
			assert.Equal(t, uint64(i+1), m.Seq, "write %d: seqs stay dense", cut)
			texts = append(texts, m.Text)
		}
		want := []string{"first", "next"}
		last := uint64(2)
		if stored {
			want = []string{"first", "cut short", "next"}
			last = 3
		}
		assert.Equal(t, want, texts, "write %d", cut)
		assert.Equal(t, last, next.Seq)

		// Counts as after clean sends: the owner read its own message (if
		// stored) but not b's; a read its own first message only.
		ownerRead := uint64(0)
		if stored {
			ownerRead = 2
		}
		unread := func(u store.ID) store.UnreadState {
			got, err := st.ReadUnreadConversations(ctx, u)
			require.NoError(t, err)
			return got[g.ID]
		}
		assert.Equal(t, store.UnreadState{LastSeq: last, ReadSeq: ownerRead}, unread(owner), "write %d", cut)
		assert.Equal(t, store.UnreadState{LastSeq: last, ReadSeq: 1}, unread(a), "write %d", cut)
		assert.Equal(t, store.UnreadState{}, unread(b), "write %d: b sent the last", cut)
		for _, u := range []store.ID{owner, a, b} {
			l, err := st.ListConversations(ctx, u, store.Forward(store.NilID, 10))
			require.NoError(t, err)
			require.Len(t, l, 1)
			assert.Equal(t, "next", l[0].Last.Text)
		}
		found, err := st.FindConversations(ctx, []store.ConversationID{g.ID})
		require.NoError(t, err)
		assert.Equal(t, last, found[0].LastSeq)
		assert.Equal(t, ownerRead, found[0].ReadSeq(owner), "write %d: the read receipt", cut)
	}
}

// Recovery leaves a send still in progress alone: only those older than
// its bound.
func TestFaults_ConversationRecoveryBound(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	x, y := mkUser(t, st, "x"), mkUser(t, st, "y")
	at := tickClock()
	f.convWrite.Store(3)
	id := store.NewID(at)
	_, err := st.AppendConversationMessage(ctx, &store.ConversationMessage{ID: id, ConversationID: store.DirectConversationID(x, y), AuthorID: x, Text: "hi", CreatedAt: at})
	require.Error(t, err)
	done, err := st.RecoverConversationSends(ctx, id.Time())
	require.NoError(t, err)
	assert.Empty(t, done, "not older than the bound")
	done, err = st.RecoverConversationSends(ctx, id.Time().Add(time.Millisecond))
	require.NoError(t, err)
	assert.Len(t, done, 1)
}

// The sweeper of the fan-out lease holder finishes a send its sender
// left pending, once it is older than the grace a live sender has, and
// tells every member of it.
func TestFaults_ConversationSweeperRecovers(t *testing.T) {
	ctx := context.Background()
	st, f := openFaulty(t)
	var now atomic.Int64
	now.Store(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli())
	clock := func() time.Time { return time.UnixMilli(now.Load()).UTC() }
	hub := pubsub.NewHub()
	defer hub.Close()
	svc := service.NewService(st, hub, service.Options{Now: clock, PasswordCost: bcrypt.MinCost, JobPoll: 5 * time.Millisecond,
		DeletionPoll: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	alice, err := svc.SignUp(ctx, service.SignUpInput{Handle: "alice", Password: "password123"})
	require.NoError(t, err)
	bob, err := svc.SignUp(ctx, service.SignUpInput{Handle: "bob", Password: "password123"})
	require.NoError(t, err)
	events, err := hub.Subscribe(t.Context(), bob.ID)
	require.NoError(t, err)

	f.convWrite.Store(4) // the conversation, the message and the lists are stored; the read states and the seq are not
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, "lost reply")
	require.Error(t, err)
	require.NoError(t, svc.Start(ctx))
	defer func() { _ = svc.Close(ctx) }()
	time.Sleep(50 * time.Millisecond)
	u, err := svc.UnreadConversations(ctx, bob.ID)
	require.NoError(t, err)
	assert.Zero(t, u.Total(), "a send younger than the grace is its sender's to finish")

	now.Add(time.Minute.Milliseconds())
	var ev store.Event
	select {
	case ev = <-events:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the recovered message was not announced")
	}
	assert.Equal(t, store.EventConversationMessage, ev.Type)
	assert.Equal(t, &store.ConversationRef{ID: store.DirectConversationID(alice.ID, bob.ID), Seq: 1}, ev.Conversation)
	assert.Equal(t, alice.ID, ev.AuthorID)
	u, err = svc.UnreadConversations(ctx, bob.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, u.Total(), "bob is told of it, and counts it")
	page, err := svc.Conversations(ctx, bob.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, "lost reply", page.Items[0].Entry.Last.Text)
}
