package storetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testConversations(t *testing.T, open OpenFunc) {
	t.Run("Direct", func(t *testing.T) { testDirectConversation(t, open) })
	t.Run("History", func(t *testing.T) { testConversationHistory(t, open) })
	t.Run("Group", func(t *testing.T) { testGroupConversation(t, open) })
	t.Run("Members", func(t *testing.T) { testConversationMembers(t, open) })
	t.Run("LastAdmin", func(t *testing.T) { testConversationLastAdmin(t, open) })
	t.Run("LastAdminRace", func(t *testing.T) { testConversationLastAdminRace(t, open) })
	t.Run("SendRacesRemoval", func(t *testing.T) { testConversationSendRacesRemoval(t, open) })
	t.Run("Read", func(t *testing.T) { testConversationRead(t, open) })
	t.Run("EditDelete", func(t *testing.T) { testConversationEditDelete(t, open) })
	t.Run("List", func(t *testing.T) { testConversationList(t, open) })
	t.Run("ConcurrentSends", func(t *testing.T) { testConversationConcurrentSends(t, open) })
	t.Run("Service", func(t *testing.T) { testConversationService(t, open) })
}

// sendDM stores a message of author in conv and returns it.
func sendDM(t *testing.T, b storage.Backend, c *clock, conv store.ConversationID, author store.ID, text string) (*store.ConversationMessage, *store.Conversation) {
	t.Helper()
	now := c.Now()
	m := &store.ConversationMessage{ID: store.NewID(now), ConversationID: conv, AuthorID: author, Text: text, CreatedAt: now}
	got, err := b.AppendConversationMessage(ctx, m)
	require.NoError(t, err)
	return m, got
}

func seqsOf(ms []*store.ConversationMessage) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

func unreadOf(t *testing.T, b storage.Backend, user store.ID) store.UnreadConversations {
	t.Helper()
	u, err := b.ReadUnreadConversations(ctx, user)
	require.NoError(t, err)
	return u
}

func listOf(t *testing.T, b storage.Backend, user store.ID) []store.ConversationEntry {
	t.Helper()
	l, err := b.ListConversations(ctx, user, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	return l
}

func newGroup(t *testing.T, b storage.Backend, c *clock, creator store.ID, members ...store.ID) *store.Conversation {
	t.Helper()
	now := c.Now()
	g := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: "group", CreatorID: creator,
		Members: append([]store.ID{creator}, members...), Admins: []store.ID{creator}, CreatedAt: now}
	require.NoError(t, b.CreateConversation(ctx, g))
	return g
}

func testDirectConversation(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	alice, bob, carol := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	conv := store.DirectConversationID(bob.ID, alice.ID)
	assert.Equal(t, conv, store.DirectConversationID(alice.ID, bob.ID), "either user names it")
	assert.False(t, conv.IsGroup())

	none, err := b.FindConversations(ctx, []store.ConversationID{conv})
	require.NoError(t, err)
	assert.Equal(t, []*store.Conversation{nil}, none, "no conversation before its first message")

	m1, got := sendDM(t, b, c, conv, alice.ID, "hi")
	assert.Equal(t, uint64(1), m1.Seq)
	assert.ElementsMatch(t, []store.ID{alice.ID, bob.ID}, got.Members, "the first message creates it with its two users")
	assert.Equal(t, uint64(1), got.LastSeq)
	m2, _ := sendDM(t, b, c, conv, bob.ID, "hello")
	m3, got := sendDM(t, b, c, conv, alice.ID, "how are you?")
	assert.Equal(t, []uint64{2, 3}, []uint64{m2.Seq, m3.Seq})
	assert.Equal(t, uint64(3), got.LastSeq)

	// A third user is no member.
	_, err = b.AppendConversationMessage(ctx, &store.ConversationMessage{ID: store.NewID(c.Now()), ConversationID: conv, AuthorID: carol.ID, Text: "x", CreatedAt: c.Now()})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))

	found, err := b.FindConversations(ctx, []store.ConversationID{conv, store.DirectConversationID(alice.ID, carol.ID)})
	require.NoError(t, err)
	require.NotNil(t, found[0])
	assert.Nil(t, found[1])
	assert.Equal(t, uint64(3), found[0].LastSeq, "the intruder took no seq")
	assert.Equal(t, uint64(3), found[0].ReadSeq(alice.ID), "sending reads the conversation")
	assert.Equal(t, uint64(2), found[0].ReadSeq(bob.ID))

	// Each user's unread: bob has m3 only (he read up to his own m2).
	assert.Equal(t, store.UnreadConversations{conv: {LastSeq: 3, ReadSeq: 2}}, unreadOf(t, b, bob.ID))
	assert.Empty(t, unreadOf(t, b, alice.ID))
	assert.Empty(t, unreadOf(t, b, carol.ID))

	for _, u := range []store.ID{alice.ID, bob.ID} {
		l := listOf(t, b, u)
		require.Len(t, l, 1)
		assert.Equal(t, conv, l[0].ConversationID)
		assert.Equal(t, m3.ID, l[0].LastActivity)
		require.NotNil(t, l[0].Last)
		assert.Equal(t, "how are you?", l[0].Last.Text)
		assert.Equal(t, uint64(3), l[0].Last.Seq)
		assert.Equal(t, alice.ID, l[0].Last.AuthorID)
	}
	assert.Empty(t, listOf(t, b, carol.ID))
}

func testConversationHistory(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	alice, bob := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	conv := store.DirectConversationID(alice.ID, bob.ID)
	other := store.DirectConversationID(alice.ID, mustCreateUser(t, b, c).ID)
	for i := range 7 {
		sendDM(t, b, c, conv, []store.ID{alice.ID, bob.ID}[i%2], "m")
		sendDM(t, b, c, other, alice.ID, "o")
	}
	page := func(r store.SeqRange) []uint64 {
		ms, err := b.ListConversationMessages(ctx, conv, r)
		require.NoError(t, err)
		for _, m := range ms {
			assert.Equal(t, conv, m.ConversationID)
		}
		return seqsOf(ms)
	}
	assert.Equal(t, []uint64{7, 6, 5}, page(store.SeqRange{Limit: 3}), "newest first")
	assert.Equal(t, []uint64{4, 3, 2}, page(store.SeqRange{From: 5, Limit: 3}), "older than the cursor")
	assert.Equal(t, []uint64{1}, page(store.SeqRange{From: 2, Limit: 3}))
	assert.Empty(t, page(store.SeqRange{From: 1, Limit: 3}))
	assert.Equal(t, []uint64{1, 2, 3}, page(store.SeqRange{Limit: 3, Reverse: true}), "from the oldest, reversed")
	assert.Equal(t, []uint64{5, 6, 7}, page(store.SeqRange{From: 4, Limit: 5, Reverse: true}), "newer than the cursor, nearest first")
	ms, err := b.ListConversationMessages(ctx, conv, store.SeqRange{Limit: 1})
	require.NoError(t, err)
	require.Len(t, ms, 1)
	assert.Equal(t, alice.ID, ms[0].AuthorID)
	assert.Equal(t, ms[0].ID.Time().UTC(), ms[0].CreatedAt)
	assert.Nil(t, ms[0].EditedAt)
}

func testGroupConversation(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	owner, m1, m2, outsider := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	g := newGroup(t, b, c, owner.ID, m1.ID, m2.ID)
	assert.True(t, g.ID.IsGroup())
	assert.Equal(t, store.ECONFLICT, store.ErrorCode(b.CreateConversation(ctx, g)))

	found, err := b.FindConversations(ctx, []store.ConversationID{g.ID})
	require.NoError(t, err)
	require.NotNil(t, found[0])
	assert.Equal(t, "group", found[0].Name)
	assert.Equal(t, owner.ID, found[0].CreatorID)
	assert.Equal(t, []store.ID{owner.ID, m1.ID, m2.ID}, found[0].Members)
	assert.Equal(t, []store.ID{owner.ID}, found[0].Admins)
	assert.Equal(t, uint64(0), found[0].LastSeq)
	assert.True(t, found[0].CreatedAt.Equal(g.CreatedAt))

	// Every member lists it at once, with no last message yet.
	for _, u := range []store.ID{owner.ID, m1.ID, m2.ID} {
		l := listOf(t, b, u)
		require.Len(t, l, 1)
		assert.Equal(t, g.ID, l[0].ConversationID)
		assert.Equal(t, g.ID.Group(), l[0].LastActivity)
		assert.Nil(t, l[0].Last)
	}
	_, err = b.AppendConversationMessage(ctx, &store.ConversationMessage{ID: store.NewID(c.Now()), ConversationID: g.ID, AuthorID: outsider.ID, Text: "x", CreatedAt: c.Now()})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a non-member cannot send")
	_, err = b.AppendConversationMessage(ctx, &store.ConversationMessage{ID: store.NewID(c.Now()), ConversationID: store.GroupConversationID(store.NewID(c.Now())), AuthorID: owner.ID, Text: "x", CreatedAt: c.Now()})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a group is never created by a message")

	sendDM(t, b, c, g.ID, m1.ID, "one")
	last, _ := sendDM(t, b, c, g.ID, m2.ID, "two")
	assert.Equal(t, store.UnreadConversations{g.ID: {LastSeq: 2}}, unreadOf(t, b, owner.ID))
	assert.Equal(t, store.UnreadConversations{g.ID: {LastSeq: 2, ReadSeq: 1}}, unreadOf(t, b, m1.ID))
	assert.Empty(t, unreadOf(t, b, m2.ID))
	assert.Equal(t, last.ID, listOf(t, b, owner.ID)[0].LastActivity)
}

func testConversationMembers(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	owner, a, bb, cc := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	g := newGroup(t, b, c, owner.ID, a.ID)
	sendDM(t, b, c, g.ID, owner.ID, "before")

	_, err := b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Add: []store.ID{bb.ID, cc.ID}, MaxMembers: 3, At: c.Now()})
	assert.Equal(t, store.EINVALID, store.ErrorCode(err), "past the size limit")
	got, err := b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Add: []store.ID{bb.ID, a.ID, bb.ID}, MaxMembers: 3, At: c.Now()})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{owner.ID, a.ID, bb.ID}, got.Members, "a member already there and a repeat count once")
	again, err := b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Add: []store.ID{bb.ID}, MaxMembers: 3, At: c.Now()})
	require.NoError(t, err, "adding members already there is within the limit")
	assert.Equal(t, got.Members, again.Members)
	require.Len(t, listOf(t, b, bb.ID), 1, "the added member lists it")
	assert.Empty(t, unreadOf(t, b, bb.ID), "an added member has nothing unread from before")

	sendDM(t, b, c, g.ID, bb.ID, "joined")
	assert.Equal(t, store.UnreadConversations{g.ID: {LastSeq: 2}}, unreadOf(t, b, a.ID))

	// A member added later has read what came before: the next message is
	// its one unread, not the group's whole history.
	_, err = b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Add: []store.ID{cc.ID}, MaxMembers: 10, At: c.Now()})
	require.NoError(t, err)
	assert.Empty(t, unreadOf(t, b, cc.ID))
	sendDM(t, b, c, g.ID, owner.ID, "welcome")
	assert.Equal(t, store.UnreadConversations{g.ID: {LastSeq: 3, ReadSeq: 2}}, unreadOf(t, b, cc.ID))

	got, err = b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Remove: a.ID})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{owner.ID, bb.ID, cc.ID}, got.Members)
	assert.Empty(t, listOf(t, b, a.ID), "a removed member's list loses it")
	assert.Empty(t, unreadOf(t, b, a.ID), "and its unread count")
	_, err = b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Remove: a.ID})
	require.NoError(t, err, "removing again changes nothing")
	_, err = b.AppendConversationMessage(ctx, &store.ConversationMessage{ID: store.NewID(c.Now()), ConversationID: g.ID, AuthorID: a.ID, Text: "x", CreatedAt: c.Now()})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a removed member cannot send")
	sendDM(t, b, c, g.ID, owner.ID, "after")
	assert.Empty(t, listOf(t, b, a.ID), "nor is told of later messages")
	assert.Empty(t, unreadOf(t, b, a.ID))

	got, err = b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Remove: owner.ID})
	require.NoError(t, err)
	assert.Equal(t, []store.ID{bb.ID}, got.Admins, "a removed admin is no admin; the one left takes over")
	_, err = b.ChangeConversationMembers(ctx, store.GroupConversationID(store.NewID(c.Now())), storage.MemberChange{Remove: owner.ID})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
}

func testConversationRead(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	alice, bob, carol := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	direct := store.DirectConversationID(alice.ID, bob.ID)
	g := newGroup(t, b, c, carol.ID, bob.ID)
	for range 4 {
		sendDM(t, b, c, direct, alice.ID, "x")
	}
	for range 3 {
		sendDM(t, b, c, g.ID, carol.ID, "y")
	}
	u := unreadOf(t, b, bob.ID)
	assert.Equal(t, 4, u[direct].Unread())
	assert.Equal(t, 3, u[g.ID].Unread())
	assert.Equal(t, 7, u.Total())

	u, err := b.MarkConversationRead(ctx, bob.ID, direct, 3)
	require.NoError(t, err)
	assert.Equal(t, 1, u[direct].Unread())
	assert.Equal(t, 4, u.Total())
	u, err = b.MarkConversationRead(ctx, bob.ID, direct, 2)
	require.NoError(t, err)
	assert.Equal(t, 1, u[direct].Unread(), "a read position never goes back")
	u, err = b.MarkConversationRead(ctx, bob.ID, direct, 3)
	require.NoError(t, err, "marking again changes nothing")
	assert.Equal(t, 4, u.Total())
	assert.Equal(t, u, unreadOf(t, b, bob.ID))

	u, err = b.MarkConversationRead(ctx, bob.ID, g.ID, 3)
	require.NoError(t, err)
	assert.Equal(t, store.UnreadConversations{direct: {LastSeq: 4, ReadSeq: 3}}, u, "a read conversation leaves the unread ones")

	found, err := b.FindConversations(ctx, []store.ConversationID{direct, g.ID})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), found[0].ReadSeq(bob.ID), "read receipts")
	assert.Equal(t, uint64(4), found[0].ReadSeq(alice.ID))
	assert.Equal(t, uint64(3), found[1].ReadSeq(bob.ID))
	assert.Equal(t, uint64(3), found[1].ReadSeq(carol.ID))

	sendDM(t, b, c, g.ID, carol.ID, "z")
	assert.Equal(t, 2, unreadOf(t, b, bob.ID).Total(), "a new message counts from the read position")

	// A user not in a conversation marks nothing.
	u, err = b.MarkConversationRead(ctx, alice.ID, g.ID, 4)
	require.NoError(t, err)
	assert.Empty(t, u)
	found, err = b.FindConversations(ctx, []store.ConversationID{g.ID})
	require.NoError(t, err)
	assert.Equal(t, uint64(0), found[0].ReadSeq(alice.ID))
	assert.NotContains(t, found[0].Members, alice.ID)
}

func testConversationEditDelete(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	alice, bob := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	conv := store.DirectConversationID(alice.ID, bob.ID)
	first, _ := sendDM(t, b, c, conv, alice.ID, "first")
	last, _ := sendDM(t, b, c, conv, alice.ID, "last")

	text := "edited"
	at := c.Now()
	got, err := b.UpdateConversationMessage(ctx, conv, last.Seq, storage.ConversationMessageUpdate{Text: &text, EditedAt: at})
	require.NoError(t, err)
	assert.Equal(t, "edited", got.Text)
	require.NotNil(t, got.EditedAt)
	assert.True(t, got.EditedAt.Equal(at))
	for _, u := range []store.ID{alice.ID, bob.ID} {
		assert.Equal(t, "edited", listOf(t, b, u)[0].Last.Text, "the last message's copies follow an edit")
	}
	old := "old edit"
	_, err = b.UpdateConversationMessage(ctx, conv, first.Seq, storage.ConversationMessageUpdate{Text: &old, EditedAt: c.Now()})
	require.NoError(t, err)
	assert.Equal(t, "edited", listOf(t, b, bob.ID)[0].Last.Text, "an edit of an older message leaves the copies")

	got, err = b.UpdateConversationMessage(ctx, conv, last.Seq, storage.ConversationMessageUpdate{Delete: true})
	require.NoError(t, err)
	assert.True(t, got.Deleted)
	assert.Empty(t, got.Text)
	_, err = b.UpdateConversationMessage(ctx, conv, last.Seq, storage.ConversationMessageUpdate{Delete: true})
	require.NoError(t, err, "deleting again repeats nothing harmful")
	_, err = b.UpdateConversationMessage(ctx, conv, last.Seq, storage.ConversationMessageUpdate{Text: &text, EditedAt: c.Now()})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "a deleted message cannot be edited")
	_, err = b.UpdateConversationMessage(ctx, conv, 9, storage.ConversationMessageUpdate{Delete: true})
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))

	l := listOf(t, b, bob.ID)
	assert.True(t, l[0].Last.Deleted, "the copy shows the deletion")
	assert.Empty(t, l[0].Last.Text)
	ms, err := b.ListConversationMessages(ctx, conv, store.SeqRange{Limit: 10})
	require.NoError(t, err)
	assert.Equal(t, []uint64{2, 1}, seqsOf(ms), "a deleted message keeps its place")
	assert.True(t, ms[0].Deleted)
	assert.Equal(t, "old edit", ms[1].Text)
	assert.Equal(t, 2, unreadOf(t, b, bob.ID).Total(), "a deletion changes no count")
	next, _ := sendDM(t, b, c, conv, bob.ID, "next")
	assert.Equal(t, uint64(3), next.Seq)
}

func testConversationList(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	me := mustCreateUser(t, b, c)
	var convs []store.ConversationID
	for range 5 {
		other := mustCreateUser(t, b, c)
		conv := store.DirectConversationID(me.ID, other.ID)
		convs = append(convs, conv)
		sendDM(t, b, c, conv, other.ID, "x")
	}
	// The oldest becomes the newest.
	sendDM(t, b, c, convs[0], me.ID, "bump")
	want := []store.ConversationID{convs[0], convs[4], convs[3], convs[2], convs[1]}
	l := listOf(t, b, me.ID)
	got := make([]store.ConversationID, len(l))
	for i, e := range l {
		got[i] = e.ConversationID
	}
	assert.Equal(t, want, got, "most recently active first, each once")

	p1, err := b.ListConversations(ctx, me.ID, store.Forward(store.NilID, 2))
	require.NoError(t, err)
	p2, err := b.ListConversations(ctx, me.ID, store.Forward(p1[1].LastActivity, 2))
	require.NoError(t, err)
	require.Len(t, p2, 2)
	assert.Equal(t, []store.ConversationID{want[2], want[3]}, []store.ConversationID{p2[0].ConversationID, p2[1].ConversationID})
	back, err := b.ListConversations(ctx, me.ID, store.Backward(p2[0].LastActivity, 5))
	require.NoError(t, err)
	require.Len(t, back, 2)
	assert.Equal(t, []store.ConversationID{want[1], want[0]}, []store.ConversationID{back[0].ConversationID, back[1].ConversationID}, "backward, nearest first")

	done, err := b.RecoverConversationSends(ctx, c.Now())
	require.NoError(t, err)
	assert.Empty(t, done, "finished sends leave nothing to recover")
}

func testConversationConcurrentSends(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	owner := mustCreateUser(t, b, c)
	var members []store.ID
	for range 3 {
		members = append(members, mustCreateUser(t, b, c).ID)
	}
	g := newGroup(t, b, c, owner.ID, members...)
	const each = 5
	var wg sync.WaitGroup
	for _, u := range append([]store.ID{owner.ID}, members...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				now := c.Now()
				_, err := b.AppendConversationMessage(ctx, &store.ConversationMessage{ID: store.NewID(now), ConversationID: g.ID, AuthorID: u, Text: "x", CreatedAt: now})
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	ms, err := b.ListConversationMessages(ctx, g.ID, store.SeqRange{Limit: 100, Reverse: true})
	require.NoError(t, err)
	require.Len(t, ms, 4*each)
	for i, m := range ms {
		assert.Equal(t, uint64(i+1), m.Seq, "seqs are dense and unique")
	}
	found, err := b.FindConversations(ctx, []store.ConversationID{g.ID})
	require.NoError(t, err)
	assert.Equal(t, uint64(4*each), found[0].LastSeq)
	for _, u := range append([]store.ID{owner.ID}, members...) {
		st := unreadOf(t, b, u)[g.ID]
		if st.LastSeq != 0 {
			assert.Equal(t, uint64(4*each), st.LastSeq, "every member was told of the last message")
		}
		l := listOf(t, b, u)
		require.Len(t, l, 1)
		assert.Equal(t, uint64(4*each), l[0].Last.Seq, "each list shows the newest message")
	}
}

// removeMember removes user from conv and returns the conversation after.
func removeMember(t *testing.T, b storage.Backend, conv store.ConversationID, user store.ID) *store.Conversation {
	t.Helper()
	got, err := b.ChangeConversationMembers(ctx, conv, storage.MemberChange{Remove: user})
	require.NoError(t, err)
	found, err := b.FindConversations(ctx, []store.ConversationID{conv})
	require.NoError(t, err)
	assert.Equal(t, found[0].Members, got.Members, "it returns the conversation as stored")
	assert.Equal(t, found[0].Admins, got.Admins, "it returns the conversation as stored")
	return got
}

// A group never loses its last admin while it has members: the
// longest-standing member left takes over, in the removal's own update.
func testConversationLastAdmin(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	var u []store.ID
	for range 6 {
		u = append(u, mustCreateUser(t, b, c).ID)
	}
	now := c.Now()
	g := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: "g", CreatorID: u[0],
		Members: u[:5], Admins: []store.ID{u[0], u[1]}, CreatedAt: now}
	require.NoError(t, b.CreateConversation(ctx, g))

	got := removeMember(t, b, g.ID, u[0])
	assert.Equal(t, []store.ID{u[1]}, got.Admins, "another admin stays: no one is promoted")
	got = removeMember(t, b, g.ID, u[4])
	assert.Equal(t, []store.ID{u[1]}, got.Admins, "a member leaving changes no admin")
	_, err := b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Add: []store.ID{u[5]}, MaxMembers: 10, At: c.Now()})
	require.NoError(t, err)

	got = removeMember(t, b, g.ID, u[1])
	assert.Equal(t, []store.ID{u[2], u[3], u[5]}, got.Members)
	assert.Equal(t, []store.ID{u[2]}, got.Admins, "the last admin left: the longest-standing member takes over")
	got = removeMember(t, b, g.ID, u[1])
	assert.Equal(t, []store.ID{u[2]}, got.Admins, "removing again changes nothing")
	got = removeMember(t, b, g.ID, u[2])
	assert.Equal(t, []store.ID{u[3]}, got.Admins, "not the newest member")
	got = removeMember(t, b, g.ID, u[3])
	assert.Equal(t, []store.ID{u[5]}, got.Admins)
	assert.Equal(t, []store.ID{u[5]}, got.Members)
	got = removeMember(t, b, g.ID, u[5])
	assert.Empty(t, got.Members, "the last member leaves")
	assert.Empty(t, got.Admins, "and no one is left to manage it")

	// A group with no admin (made before this rule) gets one at its next
	// removal.
	now = c.Now()
	orphan := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: "o", CreatorID: u[0],
		Members: []store.ID{u[0], u[1], u[2]}, CreatedAt: now}
	require.NoError(t, b.CreateConversation(ctx, orphan))
	got = removeMember(t, b, orphan.ID, u[1])
	assert.Equal(t, []store.ID{u[0]}, got.Admins)
}

// Two admins removing each other at once (or leaving at once) leave the
// group with an admin: whichever removal comes second sees no other
// admin and promotes.
func testConversationLastAdminRace(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	var u []store.ID
	for range 4 {
		u = append(u, mustCreateUser(t, b, c).ID)
	}
	for range 10 {
		now := c.Now()
		g := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: "g", CreatorID: u[0],
			Members: u, Admins: []store.ID{u[0], u[1]}, CreatedAt: now}
		require.NoError(t, b.CreateConversation(ctx, g))
		var wg sync.WaitGroup
		for _, r := range u[:2] {
			wg.Go(func() {
				_, err := b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Remove: r})
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		found, err := b.FindConversations(ctx, []store.ConversationID{g.ID})
		require.NoError(t, err)
		assert.Equal(t, u[2:], found[0].Members)
		assert.Equal(t, []store.ID{u[2]}, found[0].Admins, "the longest-standing member left is the admin")
	}
}

// SendInterleaver is a backend (or a test's wrapper of one) whose
// AppendConversationMessage is several steps that another write may come
// between. A backend whose sends are atomic has no such point and need
// not implement it: the suite then runs a removal before and after a
// whole send, the only orders there are.
type SendInterleaver interface {
	// SendPoints is how many such points a send has.
	SendPoints() int
	// InterleaveSend makes the next send call fn at its point-th point
	// (1 to SendPoints), on the sender's goroutine.
	InterleaveSend(point int, fn func())
}

// A member removed while a message to the group is being sent (after the
// send read the members) never keeps an unread count, a read state or a
// list entry of the group, at any point of the send; the send still
// succeeds, and the others count it.
func testConversationSendRacesRemoval(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	points := 0
	si, ok := b.(SendInterleaver)
	if ok {
		points = si.SendPoints()
	}
	// point -1: the removal before the send; 0: after it; 1..: within.
	for point := -1; point <= points; point++ {
		owner, stays, removed := mustCreateUser(t, b, c), mustCreateUser(t, b, c), mustCreateUser(t, b, c)
		g := newGroup(t, b, c, owner.ID, stays.ID, removed.ID)
		sendDM(t, b, c, g.ID, removed.ID, "hello")
		remove := func() {
			_, err := b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Remove: removed.ID})
			require.NoError(t, err)
		}
		if point == -1 {
			remove()
		} else if point > 0 {
			si.InterleaveSend(point, remove)
		}
		m, got := sendDM(t, b, c, g.ID, owner.ID, "racing")
		if point == 0 {
			remove()
		}
		assert.Equal(t, uint64(2), m.Seq)
		if point == -1 || point == 1 || point == 2 {
			assert.NotContains(t, got.Members, removed.ID, "point %d: the send returns the members after the removal, whom it tells", point)
		}
		assert.Empty(t, unreadOf(t, b, removed.ID), "point %d: no unread count of a group one left", point)
		assert.Empty(t, listOf(t, b, removed.ID), "point %d: no list entry", point)
		found, err := b.FindConversations(ctx, []store.ConversationID{g.ID})
		require.NoError(t, err)
		assert.Equal(t, []store.ID{owner.ID, stays.ID}, found[0].Members, "point %d", point)
		assert.Equal(t, uint64(2), found[0].LastSeq, "point %d", point)
		assert.Equal(t, store.UnreadConversations{g.ID: {LastSeq: 2}}, unreadOf(t, b, stays.ID), "point %d: the others count it", point)
		assert.Equal(t, "racing", listOf(t, b, stays.ID)[0].Last.Text, "point %d", point)

		// Rejoining starts clean: nothing of the time away is counted as
		// told, and the next message is listed.
		_, err = b.ChangeConversationMembers(ctx, g.ID, storage.MemberChange{Add: []store.ID{removed.ID}, MaxMembers: 10, At: c.Now()})
		require.NoError(t, err)
		sendDM(t, b, c, g.ID, stays.ID, "welcome back")
		require.Len(t, listOf(t, b, removed.ID), 1, "point %d", point)
		assert.Equal(t, "welcome back", listOf(t, b, removed.ID)[0].Last.Text, "point %d", point)
	}
}
