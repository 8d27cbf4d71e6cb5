package mongostore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/256dpi/lungo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/bson"
	"go.mongodb.org/mongo-driver/bson/primitive"
	"go.mongodb.org/mongo-driver/mongo"
	"go.mongodb.org/mongo-driver/mongo/options"
	"golang.org/x/crypto/bcrypt"

	"herald/store"
	"herald/store/internal/docs"
	"herald/store/mongostore"
	"herald/store/pubsub"
	"herald/store/service"
	"herald/store/storage"
)

// storageCalls counts the storage calls an observed backend makes.
type storageCalls struct{ n atomic.Int64 }

func (c *storageCalls) Observe(string, time.Time, error) { c.n.Add(1) }

func (c countingColl) UpdateMany(ctx context.Context, f, u interface{}, o ...*options.UpdateOptions) (*mongo.UpdateResult, error) {
	c.n.Add(1)
	return c.ICollection.UpdateMany(ctx, f, u, o...)
}

// TestRoundTrips_Conversations measures each conversation operation as
// the service makes it: storage calls (the same on every backend) and
// MongoDB round trips. The table is in docs/design.md#conversations.
func TestRoundTrips_Conversations(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	var n, docsRead atomic.Int64
	st := mongostore.New(countingClient{client, &n, &docsRead}, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	calls := &storageCalls{}
	svc := service.NewService(storage.Observe(st, calls), pubsub.NewHub(), service.Options{PasswordCost: bcrypt.MinCost, Logger: slog.New(slog.DiscardHandler)})
	users := make([]store.ID, 12)
	for i := range users {
		u, err := svc.SignUp(ctx, service.SignUpInput{Handle: fmt.Sprintf("user_%d", i), Password: "password123"})
		require.NoError(t, err)
		users[i] = u.ID
	}
	var group store.ConversationID
	direct := store.DirectConversationID(users[0], users[1])
	type cost struct{ calls, trips int64 }
	measure := func(what string, do func()) cost {
		calls.n.Store(0)
		n.Store(0)
		do()
		c := cost{calls.n.Load(), n.Load()}
		t.Logf("%-40s %2d storage calls, %2d MongoDB round trips", what, c.calls, c.trips)
		return c
	}
	ok := func(_ any, err error) { require.NoError(t, err) }
	for _, m := range []struct {
		what string
		do   func()
		want cost
	}{
		{"send direct, first message", func() { ok(svc.SendDirectMessage(ctx, users[0], users[1], "hi")) }, cost{2, 8}}, // both users; the send (no blocks read: neither was ever blocked)
		{"send direct", func() { ok(svc.SendDirectMessage(ctx, users[1], users[0], "hello")) }, cost{2, 7}},
		{"create group of 10", func() {
			g, err := svc.CreateGroup(ctx, users[0], "ten", users[1:10])
			require.NoError(t, err)
			group = g.ID
		}, cost{2, 3}}, // the members and the creator (nobody blocked: no block reads), the group
		{"send group of 10", func() { ok(svc.SendConversationMessage(ctx, users[2], group, "all")) }, cost{1, 6}},
		{"read a page of messages", func() { ok(svc.ConversationMessages(ctx, users[3], group, store.SeqRange{Limit: 20})) }, cost{2, 2}},
		{"list conversations (a page)", func() { ok(svc.Conversations(ctx, users[1], store.Forward(store.NilID, 20))) }, cost{3, 3}},
		{"unread counts (total and each)", func() { ok(svc.UnreadConversations(ctx, users[1])) }, cost{1, 1}},
		{"mark read", func() { ok(svc.MarkConversationRead(ctx, users[3], group, 1)) }, cost{2, 3}},
		{"edit a message", func() { ok(svc.EditConversationMessage(ctx, users[2], group, 1, "all of you")) }, cost{3, 5}},
		{"delete a message", func() { ok(svc.DeleteConversationMessage(ctx, users[0], direct, 1)) }, cost{3, 5}},
		{"add a member", func() { ok(svc.AddConversationMembers(ctx, users[0], group, users[10:11])) }, cost{3, 6}}, // the group, the user and the adder, the change (update, entry, read state)
		{"remove a member", func() { ok(svc.RemoveConversationMember(ctx, users[0], group, users[10])) }, cost{2, 4}},
		{"the last admin leaves (a member takes over)", func() { require.NoError(t, svc.LeaveConversation(ctx, users[0], group)) }, cost{2, 6}},
	} {
		assert.Equal(t, m.want, measure(m.what, m.do), m.what)
	}
}

// TestBytes_Conversations measures the stored size of each conversation
// document, with short field names and long.
func TestBytes_Conversations(t *testing.T) {
	ctx := context.Background()
	client, engine, err := lungo.Open(ctx, lungo.Options{Store: lungo.NewMemoryStore()})
	require.NoError(t, err)
	defer engine.Close()
	st := mongostore.New(client, "herald", mongostore.Options{})
	require.NoError(t, st.EnsureIndexes(ctx))
	clk := &measureClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	users := make([]store.ID, 10)
	for i := range users {
		users[i] = store.NewID(clk.now())
	}
	send := func(conv store.ConversationID, author store.ID) *store.ConversationMessage {
		at := clk.now()
		m := &store.ConversationMessage{ID: store.NewID(at), ConversationID: conv, AuthorID: author, Text: strings.Repeat("x", 80), CreatedAt: at}
		_, err := st.AppendConversationMessage(ctx, m)
		require.NoError(t, err)
		return m
	}
	direct := store.DirectConversationID(users[0], users[1])
	dm := send(direct, users[0])
	g := &store.Conversation{ID: store.GroupConversationID(store.NewID(clk.now())), Name: "a group name", CreatorID: users[0],
		Members: users, Admins: users[:1], CreatedAt: clk.t}
	require.NoError(t, st.CreateConversation(ctx, g))
	for _, u := range users {
		send(g.ID, u) // every member has sent, so every receipt is stored
	}
	raw := func(coll string, filter bson.D) bson.Raw {
		var r bson.Raw
		require.NoError(t, st.Database().Collection(coll).FindOne(ctx, filter).Decode(&r))
		return r
	}
	reads := raw("dmreads", bson.D{{Key: "_id", Value: primitive.ObjectID(users[2])}})
	entry := reads.Lookup("v").Document()
	elems, err := entry.Elements()
	require.NoError(t, err)
	rows := []struct {
		what string
		doc  bson.Raw
		size int
	}{
		{"conversation message (80 characters)", raw("dms", bson.D{{Key: "_id", Value: primitive.ObjectID(dm.ID)}}), 0},
		{"conversation list entry (80-character last message)", raw("userconvs", bson.D{{Key: "u", Value: primitive.ObjectID(users[1])}}), 0},
		{"direct conversation", raw("convs", bson.D{{Key: "_id", Value: docs.ConvDocID(direct)}}), 0},
		{"group conversation, 10 members, 10 receipts", raw("convs", bson.D{{Key: "_id", Value: docs.ConvDocID(g.ID)}}), 0},
		{"read state, 1 user in 1 group", reads, 0},
		{"read state, per conversation (group)", nil, len(elems[0])},
	}
	t.Logf("%-52s %6s %6s", "stored document", "short", "long")
	for _, r := range rows {
		if r.doc == nil {
			t.Logf("%-52s %6d", r.what, r.size)
			continue
		}
		t.Logf("%-52s %6d %6d", r.what, len(r.doc), len(longNames(r.doc)))
	}
	assert.LessOrEqual(t, len(rows[0].doc), 80+90, "a message is its text and about 90 bytes")
	assert.LessOrEqual(t, len(rows[1].doc), 80+160, "an entry is its copy of the last message and about 80 bytes more")
	assert.LessOrEqual(t, rows[5].size, 60, "a conversation's read state")
}
