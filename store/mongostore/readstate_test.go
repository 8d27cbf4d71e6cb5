package mongostore_test

import (
	"context"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"

	"herald/store"
	"herald/store/mongostore"
	"herald/store/storage"
)

// TestReadState_TrimmedOnLeave: a user's read state (one dmreads
// document) holds an entry per conversation, read or not; leaving a group,
// or being removed from it, takes its entry out, so the document is
// bounded by the conversations the user is in, not by those it ever was
// in (docs/design.md#conversations gives the bound).
func TestReadState_TrimmedOnLeave(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	st := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	next := func() time.Time { at = at.Add(time.Millisecond); return at }
	owner, me, peer := store.NewID(next()), store.NewID(next()), store.NewID(next())
	send := func(conv store.ConversationID, author store.ID) {
		now := next()
		_, err := st.AppendConversationMessage(ctx, &store.ConversationMessage{ID: store.NewID(now), ConversationID: conv, AuthorID: author, Text: "x", CreatedAt: now})
		require.NoError(t, err)
	}
	entries := func() bson.Raw {
		var r bson.Raw
		require.NoError(t, st.Database().Collection("dmreads").FindOne(ctx, bson.D{{Key: "_id", Value: primitive.ObjectID(me)}}).Decode(&r))
		return r.Lookup("v").Document()
	}
	const groups = 20
	var ids []store.ConversationID
	for i := range groups {
		now := next()
		g := &store.Conversation{ID: store.GroupConversationID(store.NewID(now)), Name: "g", CreatorID: owner,
			Members: []store.ID{owner, me}, Admins: []store.ID{owner}, CreatedAt: now}
		require.NoError(t, st.CreateConversation(ctx, g))
		send(g.ID, owner)
		if i%2 == 0 {
			// Read: no unread count, but the entry stays (a later
			// message needs its read seq).
			_, err := st.MarkConversationRead(ctx, me, g.ID, 1)
			require.NoError(t, err)
		}
		ids = append(ids, g.ID)
	}
	direct := store.DirectConversationID(me, peer)
	send(direct, peer)
	elems, err := entries().Elements()
	require.NoError(t, err)
	require.Len(t, elems, groups+1, "an entry per conversation, read or not")
	sizes := map[int]int{}
	for _, e := range elems {
		sizes[len(e.Key())] = max(sizes[len(e.Key())], len(e))
	}
	t.Logf("read-state entry: %d bytes for a group (read: l and r), %d for a direct conversation (unread: l only, r adds 11)", sizes[24], sizes[48])
	assert.Equal(t, 53, sizes[24], "docs/design.md's bound")
	assert.Equal(t, 66, sizes[48], "docs/design.md's bound")

	for _, g := range ids {
		_, err := st.ChangeConversationMembers(ctx, g, storage.MemberChange{Remove: me})
		require.NoError(t, err)
	}
	elems, err = entries().Elements()
	require.NoError(t, err)
	require.Len(t, elems, 1, "only the direct conversation is left")
	assert.Equal(t, direct.String(), elems[0].Key())
	u, err := st.ReadUnreadConversations(ctx, me)
	require.NoError(t, err)
	assert.Equal(t, store.UnreadConversations{direct: {LastSeq: 1}}, u)
}
