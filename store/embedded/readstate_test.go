package embedded_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/internal/docs"
	"herald/store/storage"
)

// TestReadState_TrimmedOnLeave: a user's read state (its W key) holds an
// entry per conversation, read or not; leaving a group, or being removed
// from it, takes its entry out, so the value is bounded by the
// conversations the user is in, not by those it ever was in.
func TestReadState_TrimmedOnLeave(t *testing.T) {
	ctx := context.Background()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	defer s.Close()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	next := func() time.Time { at = at.Add(time.Millisecond); return at }
	owner, me, peer := store.NewID(next()), store.NewID(next()), store.NewID(next())
	send := func(conv store.ConversationID, author store.ID) {
		now := next()
		_, err := s.AppendConversationMessage(ctx, &store.ConversationMessage{ID: store.NewID(now), ConversationID: conv, AuthorID: author, Text: "x", CreatedAt: now})
		require.NoError(t, err)
	}
	entries := func() map[string]docs.ReadPos {
		dump, err := s.Dump()
		require.NoError(t, err)
		v, ok := dump["W"+string(me[:])]
		require.True(t, ok, "the read state")
		var st docs.ReadState
		require.NoError(t, docs.Unmarshal([]byte(v), &st))
		return st.V
	}
	const groups = 20
	var ids []store.ConversationID
	for i := range groups {
		now := next()
		g := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: "g", CreatorID: owner,
			Members: []store.ID{owner, me}, Admins: []store.ID{owner}, CreatedAt: now}
		require.NoError(t, s.CreateConversation(ctx, g))
		send(g.ID, owner)
		if i%2 == 0 {
			_, err := s.MarkConversationRead(ctx, me, g.ID, 1)
			require.NoError(t, err)
		}
		ids = append(ids, g.ID)
	}
	direct := store.DirectConversationID(me, peer)
	send(direct, peer)
	require.Len(t, entries(), groups+1, "an entry per conversation, read or not")
	for _, g := range ids {
		_, err := s.ChangeConversationMembers(ctx, g, storage.MemberChange{Remove: me})
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]docs.ReadPos{direct.String(): {Last: 1}}, entries(), "only the direct conversation is left")
}
