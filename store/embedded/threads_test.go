package embedded_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/storage"
)

// TestRepliesRaceParentWriters races replies to a message (created and
// deleted, some replying to each other, so a deletion holds three stripes)
// with edits and likes of the message, which rewrite its record too: no
// writer may lose another's change to ReplyCount or LikeCount. Then it
// races replies with the parent's deletion: no reply may bring it back.
func TestRepliesRaceParentWriters(t *testing.T) {
	ctx, st, t0, newUser := openRaceStore(t)
	newMessage := func(author store.ID, parent *store.Message) *store.Message {
		m := &store.Message{ID: store.NewID(t0), AuthorID: author, Text: "hi", Kind: store.KindPost, CreatedAt: t0}
		if parent != nil {
			m.Kind, m.ReplyToID, m.ReplyToAuthorID = store.KindReply, parent.ID, parent.AuthorID
			m.RootID, m.RootAuthorID = parent.ID, parent.AuthorID
		}
		return m
	}
	author := newUser(0)
	var users []store.ID
	for i := range 6 {
		users = append(users, newUser(i+1))
	}

	post := newMessage(author, nil)
	require.NoError(t, st.CreateMessage(ctx, post, nil))
	const each = 8
	var wg sync.WaitGroup
	for _, u := range append(users, author) {
		wg.Go(func() {
			for i := range each {
				r := newMessage(u, post)
				if !assert.NoError(t, st.CreateMessage(ctx, r, nil)) {
					return
				}
				// A reply to the reply, deleted with it: its deletion
				// locks its author, itself and its parent.
				rr := newMessage(u, r)
				assert.NoError(t, st.CreateMessage(ctx, rr, nil))
				if i%2 == 1 {
					assert.NoError(t, st.DeleteMessage(ctx, rr.ID, nil))
					assert.NoError(t, st.DeleteMessage(ctx, r.ID, nil))
				}
			}
		})
		wg.Go(func() {
			_, err := st.Like(ctx, u, post.Key(), t0)
			assert.NoError(t, err)
		})
	}
	for i := range 20 {
		wg.Go(func() {
			text := fmt.Sprint("edit ", i)
			_, err := st.UpdateMessage(ctx, post.ID, storage.MessageUpdate{Text: &text})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	got, err := st.FindMessageByID(ctx, post.ID)
	require.NoError(t, err)
	live := (len(users) + 1) * each / 2
	assert.Equal(t, live, got.ReplyCount, "no writer lost a reply's count")
	assert.Equal(t, len(users)+1, got.LikeCount, "no reply wrote back an older like count")
	list, err := st.ListReplies(ctx, post.ID, store.Forward(store.NilID, 1000))
	require.NoError(t, err)
	assert.Len(t, list, live)
	for _, r := range list {
		assert.Equal(t, 1, r.ReplyCount, "each live reply has its own live reply")
	}

	post = newMessage(author, nil)
	require.NoError(t, st.CreateMessage(ctx, post, nil))
	for _, u := range users {
		wg.Go(func() {
			r := newMessage(u, post)
			assert.NoError(t, st.CreateMessage(ctx, r, nil))
			assert.NoError(t, st.DeleteMessage(ctx, r.ID, nil))
		})
	}
	wg.Go(func() { assert.NoError(t, st.DeleteMessage(ctx, post.ID, nil)) })
	wg.Wait()
	_, err = st.FindMessageByID(ctx, post.ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "no reply revived the deleted message")
	list, err = st.ListReplies(ctx, post.ID, store.Forward(store.NilID, 100))
	require.NoError(t, err)
	assert.Empty(t, list, "every deleted reply left the index")
}
