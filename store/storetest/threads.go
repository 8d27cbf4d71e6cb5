package storetest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

func testThreads(t *testing.T, open OpenFunc) {
	t.Run("ReplyCountsAndLists", func(t *testing.T) { testReplyCounts(t, open) })
	t.Run("Concurrent", func(t *testing.T) { testRepliesConcurrent(t, open) })
}

// storeReply stores a reply by author to parent, with its thread's root as
// the service sets it.
func storeReply(t *testing.T, b storage.Backend, c *clock, author store.ID, parent *store.Message) *store.Message {
	t.Helper()
	m := newMessage(c, author, "re")
	m.Kind, m.ReplyToID, m.ReplyToAuthorID = store.KindReply, parent.ID, parent.AuthorID
	m.RootID, m.RootAuthorID = parent.ID, parent.AuthorID
	if !parent.RootID.IsZero() {
		m.RootID, m.RootAuthorID = parent.RootID, parent.RootAuthorID
	}
	require.NoError(t, b.CreateMessage(ctx, m, nil))
	return m
}

// replyCount reads a message's ReplyCount through both single and batch
// reads, and checks they agree.
func replyCount(t *testing.T, b storage.Backend, m *store.Message) int {
	t.Helper()
	byID, err := b.FindMessageByID(ctx, m.ID)
	require.NoError(t, err)
	byKey, err := b.FindMessagesByKeys(ctx, []store.MessageKey{m.Key()})
	require.NoError(t, err)
	require.NotNil(t, byKey[0])
	assert.Equal(t, byID.ReplyCount, byKey[0].ReplyCount, "FindMessagesByKeys agrees with FindMessageByID")
	return byID.ReplyCount
}

func replyIDs(ms []*store.Message) []store.ID {
	out := make([]store.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func testReplyCounts(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	a, other := mustCreateUser(t, b, c), mustCreateUser(t, b, c)
	post := storeMessage(t, b, c, a.ID)
	r1 := storeReply(t, b, c, other.ID, post)
	r2 := storeReply(t, b, c, a.ID, post)
	r3 := storeReply(t, b, c, a.ID, r1)
	assert.Equal(t, 2, replyCount(t, b, post))
	assert.Equal(t, 1, replyCount(t, b, r1))
	assert.Equal(t, 0, replyCount(t, b, r3))

	got, err := b.FindMessageByID(ctx, r3.ID)
	require.NoError(t, err)
	assert.Equal(t, post.ID, got.RootID, "a reply's reply keeps its thread's root")
	assert.Equal(t, a.ID, got.RootAuthorID)
	got, err = b.FindMessageByID(ctx, post.ID)
	require.NoError(t, err)
	assert.True(t, got.RootID.IsZero(), "a post roots its own thread")

	list, err := b.ListReplies(ctx, post.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{r1.ID, r2.ID}, replyIDs(list), "oldest first, direct replies only")
	assert.Equal(t, "re", list[0].Text, "whole messages")
	list, err = b.ListReplies(ctx, post.ID, store.Forward(r1.ID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{r2.ID}, replyIDs(list))
	list, err = b.ListReplies(ctx, post.ID, store.Backward(store.NilID, 1))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{r2.ID}, replyIDs(list), "backward from the end: the newest")

	// A deleted reply leaves the count and the list.
	require.NoError(t, b.DeleteMessage(ctx, r2.ID, nil))
	assert.Equal(t, 1, replyCount(t, b, post))
	list, err = b.ListReplies(ctx, post.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{r1.ID}, replyIDs(list))
	// An edit keeps the count.
	text := "edited"
	edited, err := b.UpdateMessage(ctx, post.ID, storage.MessageUpdate{Text: &text})
	require.NoError(t, err)
	assert.Equal(t, 1, edited.ReplyCount)

	// A deleted parent: its replies stay, and a new reply to it counts nowhere.
	require.NoError(t, b.DeleteMessage(ctx, post.ID, nil))
	late := storeReply(t, b, c, other.ID, post)
	list, err = b.ListReplies(ctx, post.ID, store.Forward(store.NilID, 10))
	require.NoError(t, err)
	assert.Equal(t, []store.ID{r1.ID, late.ID}, replyIDs(list))
	require.NoError(t, b.DeleteMessage(ctx, late.ID, nil), "deleting a reply to a deleted message")
	assert.Equal(t, 1, replyCount(t, b, r1))
}

// testRepliesConcurrent has several users reply to one message at once
// and delete some of their replies: the count ends exact.
func testRepliesConcurrent(t *testing.T, open OpenFunc) {
	b, c := openBackend(t, open), newClock()
	author := mustCreateUser(t, b, c)
	post := storeMessage(t, b, c, author.ID)
	const users, each = 6, 4
	var wg sync.WaitGroup
	for range users {
		u := mustCreateUser(t, b, c)
		wg.Go(func() {
			for i := range each {
				m := newMessage(c, u.ID, "re")
				m.Kind, m.ReplyToID, m.ReplyToAuthorID, m.RootID, m.RootAuthorID = store.KindReply, post.ID, post.AuthorID, post.ID, post.AuthorID
				if !assert.NoError(t, b.CreateMessage(ctx, m, nil)) {
					return
				}
				if i%2 == 1 {
					assert.NoError(t, b.DeleteMessage(ctx, m.ID, nil))
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, users*each/2, replyCount(t, b, post))
	list, err := b.ListReplies(ctx, post.ID, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	assert.Len(t, list, users*each/2)
}
