package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// testDocReads checks that every write that changes a user or a message
// shows in every read of it as soon as the write returns, though the
// reads were made before it too (a backend may keep decoded documents in
// memory: the embedded store does), and that a value read can be changed
// by its caller without changing the next read.
func testDocReads(t *testing.T, open OpenFunc) {
	t.Run("Users", func(t *testing.T) { testDocReadsUsers(t, open) })
	t.Run("Messages", func(t *testing.T) { testDocReadsMessages(t, open) })
	t.Run("Bulk", func(t *testing.T) { testDocReadsBulk(t, open) })
	t.Run("CallerCopies", func(t *testing.T) { testDocReadsCopies(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testDocReadsConcurrent(t, open) })
}

// readUser reads user id through every read of users, checks they agree,
// and returns it (nil if none finds it).
func readUser(t *testing.T, b storage.Backend, u *store.User) *store.User {
	t.Helper()
	byID, err := b.FindUserByID(ctx, u.ID)
	if store.ErrorCode(err) == store.ENOTFOUND {
		byID = nil
	} else {
		require.NoError(t, err)
	}
	byIDs, err := b.FindUsersByIDs(ctx, []store.ID{u.ID, u.ID})
	require.NoError(t, err)
	byHandle, err := b.FindUsersByHandles(ctx, []string{u.Handle})
	require.NoError(t, err)
	for _, other := range []*store.User{byIDs[0], byIDs[1], byHandle[0]} {
		assert.Equal(t, byID, other, "every read of users agrees")
	}
	return byID
}

// readMessage reads m through every read of messages, checks they agree,
// and returns it (nil if none finds it).
func readMessage(t *testing.T, b storage.Backend, m *store.Message) *store.Message {
	t.Helper()
	byID, err := b.FindMessageByID(ctx, m.ID)
	if store.ErrorCode(err) == store.ENOTFOUND {
		byID = nil
	} else {
		require.NoError(t, err)
	}
	byKeys, err := b.FindMessagesByKeys(ctx, []store.MessageKey{m.Key(), m.Key()})
	require.NoError(t, err)
	outbox, err := b.FindMessages(ctx, storage.MessageFilter{AuthorID: m.AuthorID, Range: store.Forward(store.NilID, 100)})
	require.NoError(t, err)
	var inOutbox *store.Message
	for _, o := range outbox {
		if o.ID == m.ID {
			inOutbox = o
		}
	}
	for _, other := range []*store.Message{byKeys[0], byKeys[1], inOutbox} {
		assert.Equal(t, byID, other, "every read of messages agrees")
	}
	return byID
}

func testDocReadsUsers(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	u, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	readUser(t, b, u)
	readUser(t, b, other)

	name, bio, private := "Renamed", "a bio", true
	_, err := b.UpdateUser(ctx, u.ID, storage.UserUpdate{DisplayName: &name, Bio: &bio, Private: &private})
	require.NoError(t, err)
	got := readUser(t, b, u)
	assert.Equal(t, "Renamed", got.DisplayName, "profile update")
	assert.Equal(t, "a bio", got.Bio)
	assert.True(t, got.Private, "private switch")

	_, err = b.RevokeTokens(ctx, u.ID, store.TokenRevocation{All: true, Now: c.Now(), PasswordHash: []byte("new hash")})
	require.NoError(t, err)
	got = readUser(t, b, u)
	assert.Equal(t, []byte("new hash"), got.PasswordHash, "password change")
	assert.Equal(t, 1, got.TokenVersion, "tokens ended")

	v := "blue"
	_, err = b.SetAttributes(ctx, u.ID, []store.AttributeChange{{Name: "color", Value: &v}})
	require.NoError(t, err)
	assert.Equal(t, []store.Attribute{{Name: "color", Value: "blue"}}, readUser(t, b, u).Attributes, "attributes")

	mustFollow(t, b, c, u.ID, other.ID)
	assert.Equal(t, 1, readUser(t, b, u).FollowingCount, "follow")
	assert.Equal(t, 1, readUser(t, b, other).FollowerCount)
	_, err = b.Unfollow(ctx, u.ID, other.ID)
	require.NoError(t, err)
	assert.Equal(t, 0, readUser(t, b, u).FollowingCount, "unfollow")
	assert.Equal(t, 0, readUser(t, b, other).FollowerCount)

	m := storeMessage(t, b, c, u.ID)
	assert.Equal(t, 1, readUser(t, b, u).MessageCount, "post")
	require.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
	assert.Equal(t, 0, readUser(t, b, u).MessageCount, "deletion")

	seen := c.Now().Add(time.Hour)
	_, err = b.MarkSeen(ctx, u.ID, seen, time.Time{}, nil)
	require.NoError(t, err)
	assert.True(t, seen.Equal(readUser(t, b, u).LastSeenAt), "last seen")

	require.NoError(t, b.DeleteUser(ctx, u.ID, c.Now()))
	assert.Nil(t, readUser(t, b, u), "a deleted account is not found")
	require.NoError(t, b.PurgeUser(ctx, u.ID))
	assert.Nil(t, readUser(t, b, u), "nor a purged one")
}

func testDocReadsMessages(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author, fan := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, author.ID)
	readMessage(t, b, m)

	text, at, mentions := "edited", c.Now(), []store.ID{fan.ID}
	_, err := b.UpdateMessage(ctx, m.ID, storage.MessageUpdate{Text: &text, EditedAt: &at, Mentions: &mentions})
	require.NoError(t, err)
	got := readMessage(t, b, m)
	assert.Equal(t, "edited", got.Text, "edit")
	require.NotNil(t, got.EditedAt)
	assert.True(t, at.Equal(*got.EditedAt))
	assert.Equal(t, mentions, got.Mentions)

	_, err = b.Like(ctx, fan.ID, m.Key(), c.Now())
	require.NoError(t, err)
	assert.Equal(t, 1, readMessage(t, b, m).LikeCount, "like")
	_, err = b.Unlike(ctx, fan.ID, m.Key())
	require.NoError(t, err)
	assert.Equal(t, 0, readMessage(t, b, m).LikeCount, "unlike")

	reply := newMessage(c, fan.ID, "a reply")
	reply.Kind, reply.ReplyToID, reply.ReplyToAuthorID = store.KindReply, m.ID, m.AuthorID
	reply.RootID, reply.RootAuthorID = m.ID, m.AuthorID
	require.NoError(t, b.CreateMessage(ctx, reply, nil))
	assert.Equal(t, 1, readMessage(t, b, m).ReplyCount, "reply")
	require.NoError(t, b.DeleteMessage(ctx, reply.ID, nil))
	assert.Equal(t, 0, readMessage(t, b, m).ReplyCount, "reply deleted")

	repost := newMessage(c, fan.ID, "")
	repost.Kind, repost.RepostOfID, repost.RepostOfAuthorID = store.KindRepost, m.ID, m.AuthorID
	require.NoError(t, b.CreateMessage(ctx, repost, nil))
	assert.Equal(t, 1, readMessage(t, b, m).RepostCount, "repost")
	require.NoError(t, b.DeleteMessage(ctx, repost.ID, nil))
	assert.Equal(t, 0, readMessage(t, b, m).RepostCount, "repost deleted")

	require.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
	assert.Nil(t, readMessage(t, b, m), "a deleted message is not found")
}

func testDocReadsBulk(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	u := mustCreateUser(t, b, c)
	m := storeMessage(t, b, c, u.ID)
	readUser(t, b, u)
	readMessage(t, b, m)

	lu, lm := *u, *m
	lu.DisplayName, lu.MessageCount = "Loaded", 1
	lm.Text, lm.LikeCount = "loaded", 7
	bl, ok := b.(storage.BulkLoader)
	require.True(t, ok, "the backend loads in bulk")
	require.NoError(t, bl.LoadBulk(ctx, &storage.Bulk{Users: []*store.User{&lu}, Messages: []*store.Message{&lm}}))
	assert.Equal(t, "Loaded", readUser(t, b, u).DisplayName, "a bulk load replaces the user")
	got := readMessage(t, b, m)
	assert.Equal(t, "loaded", got.Text, "and the message")
	assert.Equal(t, 7, got.LikeCount)
}

func testDocReadsCopies(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	u := mustCreateUser(t, b, c)
	v := "blue"
	_, err := b.SetAttributes(ctx, u.ID, []store.AttributeChange{{Name: "color", Value: &v}})
	require.NoError(t, err)
	m := storeMessage(t, b, c, u.ID)
	mentions, at := []store.ID{u.ID}, c.Now()
	_, err = b.UpdateMessage(ctx, m.ID, storage.MessageUpdate{EditedAt: &at, Mentions: &mentions})
	require.NoError(t, err)
	want, wantMsg := readUser(t, b, u), readMessage(t, b, m)

	// Each read's values are the caller's own.
	for range 2 {
		got, err := b.FindUsersByIDs(ctx, []store.ID{u.ID})
		require.NoError(t, err)
		got[0].DisplayName, got[0].FollowerCount = "changed", 99
		got[0].Attributes[0].Value = "changed"
		byID, err := b.FindUserByID(ctx, u.ID)
		require.NoError(t, err)
		byID.Handle = "changed"
		msgs, err := b.FindMessagesByKeys(ctx, []store.MessageKey{m.Key()})
		require.NoError(t, err)
		msgs[0].Text, msgs[0].LikeCount = "changed", 99
		msgs[0].Mentions[0] = store.NilID
		*msgs[0].EditedAt = time.Time{}
		one, err := b.FindMessageByID(ctx, m.ID)
		require.NoError(t, err)
		one.Text = "changed"
	}
	assert.Equal(t, want, readUser(t, b, u))
	assert.Equal(t, wantMsg, readMessage(t, b, m))
}

// testDocReadsConcurrent has writers change users and messages while
// readers read them: each writer must read its own write back at once,
// whatever the readers read (and a backend may have kept) meanwhile.
func testDocReadsConcurrent(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	const writers, rounds = 4, 40
	users := make([]*store.User, writers)
	msgs := make([]*store.Message, writers)
	fans := make([]*store.User, rounds)
	for i := range users {
		users[i] = mustCreateUser(t, b, c)
		msgs[i] = storeMessage(t, b, c, users[i].ID)
	}
	for i := range fans {
		fans[i] = mustCreateUser(t, b, c)
	}
	ids := make([]store.ID, writers)
	keys := make([]store.MessageKey, writers)
	for i := range users {
		ids[i], keys[i] = users[i].ID, msgs[i].Key()
	}

	done := make(chan struct{})
	var readers sync.WaitGroup
	for range 4 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				_, err := b.FindUsersByIDs(ctx, ids)
				assert.NoError(t, err)
				_, err = b.FindMessagesByKeys(ctx, keys)
				assert.NoError(t, err)
				for i := range ids {
					_, err = b.FindUserByID(ctx, ids[i])
					assert.NoError(t, err)
					_, err = b.FindMessageByID(ctx, keys[i].ID)
					assert.NoError(t, err)
				}
			}
		})
	}
	var ws sync.WaitGroup
	for w := range writers {
		ws.Go(func() {
			for r := range rounds {
				name := fmt.Sprintf("name %d", r)
				if _, err := b.UpdateUser(ctx, ids[w], storage.UserUpdate{DisplayName: &name}); !assert.NoError(t, err) {
					return
				}
				got, err := b.FindUsersByIDs(ctx, ids[w:w+1])
				if !assert.NoError(t, err) || !assert.Equal(t, name, got[0].DisplayName, "writer %d round %d", w, r) {
					return
				}
				if _, err := b.Like(ctx, fans[r].ID, keys[w], c.Now()); !assert.NoError(t, err) {
					return
				}
				m, err := b.FindMessagesByKeys(ctx, keys[w:w+1])
				if !assert.NoError(t, err) || !assert.Equal(t, r+1, m[0].LikeCount, "writer %d round %d", w, r) {
					return
				}
			}
		})
	}
	ws.Wait()
	close(done)
	readers.Wait()
	for w := range writers {
		assert.Equal(t, fmt.Sprintf("name %d", rounds-1), readUser(t, b, users[w]).DisplayName)
		assert.Equal(t, rounds, readMessage(t, b, msgs[w]).LikeCount)
	}
}
