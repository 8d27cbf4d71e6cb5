package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/service"
)

func testConversationService(t *testing.T, open OpenFunc) {
	t.Run("Direct", func(t *testing.T) { testServiceDirect(t, open) })
	t.Run("Blocks", func(t *testing.T) { testServiceDirectBlocks(t, open) })
	t.Run("MessagesFrom", func(t *testing.T) { testServiceMessagesFrom(t, open) })
	t.Run("Group", func(t *testing.T) { testServiceGroup(t, open) })
	t.Run("EditDelete", func(t *testing.T) { testServiceConversationEdits(t, open) })
	t.Run("Pages", func(t *testing.T) { testServiceConversationPages(t, open) })
}

func code(err error) string { return store.ErrorCode(err) }

func nextConversationEvent(t *testing.T, events <-chan store.Event) store.Event {
	t.Helper()
	for {
		select {
		case ev := <-events:
			if ev.Type.Conversational() {
				return ev
			}
		case <-time.After(5 * time.Second):
			require.FailNow(t, "no conversation event")
			return store.Event{}
		}
	}
}

func testServiceDirect(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, hub := newService(t, b, c)
	alice, bob, carol := mustSignUp(t, svc, "alice"), mustSignUp(t, svc, "bob"), mustSignUp(t, svc, "carol")
	bobEvents, err := hub.Subscribe(t.Context(), bob.ID)
	require.NoError(t, err)

	_, err = svc.SendDirectMessage(ctx, alice.ID, alice.ID, "me")
	assert.Equal(t, store.EINVALID, code(err))
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, "  ")
	assert.Equal(t, store.EINVALID, code(err), "blank")
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, strings.Repeat("x", store.MessageMaxLen+1))
	assert.Equal(t, store.EINVALID, code(err), "too long, as for posts")
	_, err = svc.SendDirectMessage(ctx, alice.ID, store.NewID(c.Now()), "who?")
	assert.Equal(t, store.ENOTFOUND, code(err))

	m, err := svc.SendDirectMessage(ctx, alice.ID, bob.ID, "hi bob")
	require.NoError(t, err)
	assert.Equal(t, uint64(1), m.Seq)
	conv := store.DirectConversationID(alice.ID, bob.ID)
	assert.Equal(t, conv, m.ConversationID)
	ev := nextConversationEvent(t, bobEvents)
	assert.Equal(t, store.Event{Type: store.EventConversationMessage, UserID: bob.ID, Conversation: &store.ConversationRef{ID: conv, Seq: 1}, MessageID: m.ID, AuthorID: alice.ID, Position: ev.Position}, ev)

	reply, err := svc.SendConversationMessage(ctx, bob.ID, conv, "hi alice")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), reply.Seq)
	nextConversationEvent(t, bobEvents) // his own message, for his other devices

	// Not a member: the conversation does not exist for carol.
	_, err = svc.Conversation(ctx, carol.ID, conv)
	assert.Equal(t, store.ENOTFOUND, code(err))
	_, err = svc.ConversationMessages(ctx, carol.ID, conv, store.SeqRange{Limit: 10})
	assert.Equal(t, store.ENOTFOUND, code(err))
	_, err = svc.SendConversationMessage(ctx, carol.ID, conv, "hey")
	assert.Equal(t, store.ENOTFOUND, code(err))
	_, err = svc.MarkConversationRead(ctx, carol.ID, conv, 2)
	assert.Equal(t, store.ENOTFOUND, code(err))
	_, err = svc.Conversation(ctx, carol.ID, store.ConversationID("bad"))
	assert.Equal(t, store.ENOTFOUND, code(err))

	u, err := svc.UnreadConversations(ctx, alice.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, u.Total())
	u, err = svc.MarkConversationRead(ctx, alice.ID, conv, 99)
	require.NoError(t, err)
	assert.Zero(t, u.Total())
	ev = nextConversationEvent(t, bobEvents)
	assert.Equal(t, store.EventConversationRead, ev.Type)
	assert.Equal(t, alice.ID, ev.Subject, "a read receipt")
	assert.Equal(t, &store.ConversationRef{ID: conv, Seq: 2}, ev.Conversation, "read up to the last message, not past it")
	got, err := svc.Conversation(ctx, bob.ID, conv)
	require.NoError(t, err)
	assert.Equal(t, uint64(2), got.ReadSeq(alice.ID))
}

func testServiceDirectBlocks(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, _ := newService(t, b, c)
	alice, bob := mustSignUp(t, svc, "alice"), mustSignUp(t, svc, "bob")
	_, err := svc.SendDirectMessage(ctx, alice.ID, bob.ID, "before")
	require.NoError(t, err)
	_, err = svc.Block(ctx, bob.ID, alice.ID)
	require.NoError(t, err)
	conv := store.DirectConversationID(alice.ID, bob.ID)
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, "blocked")
	assert.Equal(t, store.EFORBIDDEN, code(err), "the blocked user cannot send")
	_, err = svc.SendConversationMessage(ctx, alice.ID, conv, "blocked")
	assert.Equal(t, store.EFORBIDDEN, code(err), "not in the existing conversation either")
	_, err = svc.SendConversationMessage(ctx, bob.ID, conv, "blocker")
	assert.Equal(t, store.EFORBIDDEN, code(err), "nor the blocker")
	_, err = svc.Unblock(ctx, bob.ID, alice.ID)
	require.NoError(t, err)
	m, err := svc.SendConversationMessage(ctx, alice.ID, conv, "after")
	require.NoError(t, err)
	assert.Equal(t, uint64(2), m.Seq)
}

func testServiceMessagesFrom(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, _ := newService(t, b, c)
	alice, bob := mustSignUp(t, svc, "alice"), mustSignUp(t, svc, "bob")
	assert.Equal(t, store.MessagesFromEveryone, bob.MessagesFrom)
	u, err := svc.SetMessagesFrom(ctx, bob.ID, store.MessagesFromNobody)
	require.NoError(t, err)
	assert.Equal(t, store.MessagesFromNobody, u.MessagesFrom)
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, "hi")
	assert.Equal(t, store.EFORBIDDEN, code(err))

	_, err = svc.SetMessagesFrom(ctx, bob.ID, store.MessagesFromFollowed)
	require.NoError(t, err)
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, "hi")
	assert.Equal(t, store.EFORBIDDEN, code(err), "bob does not follow alice")
	_, err = svc.Follow(ctx, alice.ID, bob.ID)
	require.NoError(t, err)
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, "hi")
	assert.Equal(t, store.EFORBIDDEN, code(err), "alice following bob is not enough")
	_, err = svc.Follow(ctx, bob.ID, alice.ID)
	require.NoError(t, err)
	_, err = svc.SendDirectMessage(ctx, alice.ID, bob.ID, "hi")
	require.NoError(t, err, "bob follows alice")
	_, err = svc.SendDirectMessage(ctx, bob.ID, alice.ID, "hello")
	require.NoError(t, err, "alice takes messages from everyone")

	_, err = svc.SetMessagesFrom(ctx, bob.ID, store.MessagesFromEveryone)
	require.NoError(t, err)
	got, err := b.FindUserByID(ctx, bob.ID)
	require.NoError(t, err)
	assert.Equal(t, store.MessagesFromEveryone, got.MessagesFrom, "stored")
	_, err = svc.SetMessagesFrom(ctx, bob.ID, store.MessagePolicy(9))
	assert.Equal(t, store.EINVALID, code(err))
}

func testServiceGroup(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, hub := newServiceWith(t, b, c, service.Options{MaxGroupMembers: 4})
	owner, a, bb, cc, dd := mustSignUp(t, svc, "owner"), mustSignUp(t, svc, "ann"), mustSignUp(t, svc, "ben"), mustSignUp(t, svc, "cid"), mustSignUp(t, svc, "dan")
	aEvents, err := hub.Subscribe(t.Context(), a.ID)
	require.NoError(t, err)

	_, err = svc.CreateGroup(ctx, owner.ID, " ", []store.ID{a.ID})
	assert.Equal(t, store.EINVALID, code(err), "a name is needed")
	_, err = svc.CreateGroup(ctx, owner.ID, "big", []store.ID{a.ID, bb.ID, cc.ID, dd.ID})
	assert.Equal(t, store.EINVALID, code(err), "past the size limit")
	_, err = svc.CreateGroup(ctx, owner.ID, "ghosts", []store.ID{store.NewID(c.Now())})
	assert.Equal(t, store.ENOTFOUND, code(err))
	g, err := svc.CreateGroup(ctx, owner.ID, " friends ", []store.ID{a.ID, bb.ID, a.ID, owner.ID})
	require.NoError(t, err)
	assert.Equal(t, "friends", g.Name)
	assert.Equal(t, []store.ID{owner.ID, a.ID, bb.ID}, g.Members)
	assert.Equal(t, []store.ID{owner.ID}, g.Admins, "the creator is an admin")
	ev := nextConversationEvent(t, aEvents)
	assert.Equal(t, store.EventConversationMemberAdded, ev.Type)
	assert.Equal(t, a.ID, ev.Subject)
	assert.Equal(t, &store.ConversationRef{ID: g.ID}, ev.Conversation)

	_, err = svc.AddConversationMembers(ctx, a.ID, g.ID, []store.ID{cc.ID})
	assert.Equal(t, store.EFORBIDDEN, code(err), "only admins add")
	_, err = svc.AddConversationMembers(ctx, cc.ID, g.ID, []store.ID{cc.ID})
	assert.Equal(t, store.ENOTFOUND, code(err), "a non-member sees no group")
	_, err = svc.AddConversationMembers(ctx, owner.ID, g.ID, []store.ID{cc.ID, dd.ID})
	assert.Equal(t, store.EINVALID, code(err), "past the size limit")
	g, err = svc.AddConversationMembers(ctx, owner.ID, g.ID, []store.ID{cc.ID})
	require.NoError(t, err)
	assert.Len(t, g.Members, 4)
	ev = nextConversationEvent(t, aEvents)
	assert.Equal(t, store.EventConversationMemberAdded, ev.Type)
	assert.Equal(t, cc.ID, ev.Subject)

	_, err = svc.SendConversationMessage(ctx, dd.ID, g.ID, "let me in")
	assert.Equal(t, store.ENOTFOUND, code(err))
	for _, u := range []store.ID{owner.ID, bb.ID, cc.ID} {
		_, err := svc.SendConversationMessage(ctx, u, g.ID, "hello")
		require.NoError(t, err)
	}
	unread, err := svc.UnreadConversations(ctx, a.ID)
	require.NoError(t, err)
	assert.Equal(t, 3, unread.Total())

	_, err = svc.RemoveConversationMember(ctx, a.ID, g.ID, bb.ID)
	assert.Equal(t, store.EFORBIDDEN, code(err), "only admins remove")
	_, err = svc.RemoveConversationMember(ctx, owner.ID, g.ID, dd.ID)
	assert.Equal(t, store.ENOTFOUND, code(err), "not a member")
	g, err = svc.RemoveConversationMember(ctx, owner.ID, g.ID, a.ID)
	require.NoError(t, err)
	assert.NotContains(t, g.Members, a.ID)
	for ev = nextConversationEvent(t, aEvents); ev.Type == store.EventConversationMessage; ev = nextConversationEvent(t, aEvents) {
	}
	assert.Equal(t, store.EventConversationMemberRemoved, ev.Type, "the removed member is told")
	assert.Equal(t, a.ID, ev.Subject)

	_, err = svc.Conversation(ctx, a.ID, g.ID)
	assert.Equal(t, store.ENOTFOUND, code(err), "removed: no access")
	_, err = svc.ConversationMessages(ctx, a.ID, g.ID, store.SeqRange{Limit: 10})
	assert.Equal(t, store.ENOTFOUND, code(err))
	page, err := svc.Conversations(ctx, a.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	unread, err = svc.UnreadConversations(ctx, a.ID)
	require.NoError(t, err)
	assert.Zero(t, unread.Total(), "its unread count went with it")

	require.NoError(t, svc.LeaveConversation(ctx, cc.ID, g.ID))
	_, err = svc.SendConversationMessage(ctx, cc.ID, g.ID, "back?")
	assert.Equal(t, store.ENOTFOUND, code(err), "a leaver has no access")
	assert.Equal(t, store.ENOTFOUND, code(svc.LeaveConversation(ctx, cc.ID, g.ID)))

	direct, err := svc.SendDirectMessage(ctx, owner.ID, bb.ID, "psst")
	require.NoError(t, err)
	_, err = svc.AddConversationMembers(ctx, owner.ID, direct.ConversationID, []store.ID{cc.ID})
	assert.Equal(t, store.EINVALID, code(err), "a direct conversation has no members to add")
}

func testServiceConversationEdits(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, hub := newService(t, b, c)
	alice, bob := mustSignUp(t, svc, "alice"), mustSignUp(t, svc, "bob")
	bobEvents, err := hub.Subscribe(t.Context(), bob.ID)
	require.NoError(t, err)
	m, err := svc.SendDirectMessage(ctx, alice.ID, bob.ID, "helo")
	require.NoError(t, err)
	nextConversationEvent(t, bobEvents)
	conv := m.ConversationID

	_, err = svc.EditConversationMessage(ctx, bob.ID, conv, m.Seq, "mine now")
	assert.Equal(t, store.EFORBIDDEN, code(err), "only one's own messages")
	_, err = svc.DeleteConversationMessage(ctx, bob.ID, conv, m.Seq)
	assert.Equal(t, store.EFORBIDDEN, code(err))
	_, err = svc.EditConversationMessage(ctx, alice.ID, conv, 7, "x")
	assert.Equal(t, store.ENOTFOUND, code(err))

	edited, err := svc.EditConversationMessage(ctx, alice.ID, conv, m.Seq, "hello")
	require.NoError(t, err)
	assert.Equal(t, "hello", edited.Text)
	require.NotNil(t, edited.EditedAt)
	ev := nextConversationEvent(t, bobEvents)
	assert.Equal(t, store.Event{Type: store.EventConversationMessageEdited, UserID: bob.ID, Conversation: &store.ConversationRef{ID: conv, Seq: 1}, MessageID: m.ID, AuthorID: alice.ID, Position: ev.Position}, ev)
	page, err := svc.Conversations(ctx, bob.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, "hello", page.Items[0].Entry.Last.Text, "seen by every member")
	assert.Equal(t, 1, page.Items[0].Unread)

	_, err = svc.DeleteConversationMessage(ctx, alice.ID, conv, m.Seq)
	require.NoError(t, err)
	ev = nextConversationEvent(t, bobEvents)
	assert.Equal(t, store.EventConversationMessageDeleted, ev.Type)
	assert.Equal(t, m.ID, ev.MessageID)
	_, err = svc.EditConversationMessage(ctx, alice.ID, conv, m.Seq, "undo")
	assert.Equal(t, store.ENOTFOUND, code(err), "a deleted message is gone")
	_, err = svc.DeleteConversationMessage(ctx, alice.ID, conv, m.Seq)
	assert.Equal(t, store.ENOTFOUND, code(err))
	ms, err := svc.ConversationMessages(ctx, bob.ID, conv, store.SeqRange{Limit: 10})
	require.NoError(t, err)
	require.Len(t, ms.Messages, 1)
	assert.True(t, ms.Messages[0].Deleted)
	assert.Empty(t, ms.Messages[0].Text)
	unread, err := svc.UnreadConversations(ctx, bob.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, unread.Total(), "a deletion keeps the count exact: the place is unread until read")
}

func testServiceConversationPages(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	svc, _ := newService(t, b, c)
	me := mustSignUp(t, svc, "mine")
	var others []*store.User
	for _, h := range []string{"o_one", "o_two", "o_three", "o_four", "o_five"} {
		o := mustSignUp(t, svc, h)
		others = append(others, o)
		for range 2 {
			_, err := svc.SendDirectMessage(ctx, o.ID, me.ID, "x")
			require.NoError(t, err)
		}
	}
	conv := store.DirectConversationID(me.ID, others[0].ID)
	for range 3 {
		_, err := svc.SendDirectMessage(ctx, others[0].ID, me.ID, "more")
		require.NoError(t, err)
	}

	// Messages: newest first, both ways.
	p, err := svc.ConversationMessages(ctx, me.ID, conv, store.SeqRange{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, []uint64{5, 4}, seqsOf(p.Messages))
	assert.True(t, p.HasMore)
	p, err = svc.ConversationMessages(ctx, me.ID, conv, store.SeqRange{From: 4, Limit: 3})
	require.NoError(t, err)
	assert.Equal(t, []uint64{3, 2, 1}, seqsOf(p.Messages))
	assert.False(t, p.HasMore)
	p, err = svc.ConversationMessages(ctx, me.ID, conv, store.SeqRange{From: 2, Limit: 2, Reverse: true})
	require.NoError(t, err)
	assert.Equal(t, []uint64{4, 3}, seqsOf(p.Messages), "backward pages are in the list's order")
	assert.True(t, p.HasMore)

	// Conversations: most recently active first, with unread counts.
	cp, err := svc.Conversations(ctx, me.ID, store.Forward(store.NilID, 2))
	require.NoError(t, err)
	require.Len(t, cp.Items, 2)
	assert.True(t, cp.HasMore)
	assert.Equal(t, conv, cp.Items[0].Conversation.ID)
	assert.Equal(t, 5, cp.Items[0].Unread)
	assert.Equal(t, "more", cp.Items[0].Entry.Last.Text)
	assert.Equal(t, store.DirectConversationID(me.ID, others[4].ID), cp.Items[1].Conversation.ID)
	assert.Equal(t, 2, cp.Items[1].Unread)
	rest, err := svc.Conversations(ctx, me.ID, store.Forward(cp.Items[1].Entry.LastActivity, 10))
	require.NoError(t, err)
	assert.Len(t, rest.Items, 3)
	assert.False(t, rest.HasMore)
	back, err := svc.Conversations(ctx, me.ID, store.Backward(rest.Items[0].Entry.LastActivity, 10))
	require.NoError(t, err)
	require.Len(t, back.Items, 2)
	assert.Equal(t, cp.Items[0].Conversation.ID, back.Items[0].Conversation.ID, "in the list's order")

	unread, err := svc.UnreadConversations(ctx, me.ID)
	require.NoError(t, err)
	assert.Equal(t, 13, unread.Total())
	unread, err = svc.MarkConversationRead(ctx, me.ID, conv, 3)
	require.NoError(t, err)
	assert.Equal(t, 10, unread.Total())
	assert.Equal(t, 2, unread[conv].Unread())
	_, err = svc.SendDirectMessage(ctx, me.ID, others[1].ID, "reply")
	require.NoError(t, err)
	unread, err = svc.UnreadConversations(ctx, me.ID)
	require.NoError(t, err)
	assert.Equal(t, 8, unread.Total(), "replying reads the conversation")
}
