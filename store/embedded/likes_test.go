package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/storage"
)

// TestLikesRaceEditsAndDeletes races likes with edits of the message (both
// rewrite its record: neither may lose the other's change) and with its
// deletion (a like must not bring the record back).
func TestLikesRaceEditsAndDeletes(t *testing.T) {
	ctx, st, t0, newUser := openRaceStore(t)
	author := newUser(0)
	var fans []store.ID
	for i := range 6 {
		fans = append(fans, newUser(i+1))
	}
	post := func() *store.Message {
		m := &store.Message{ID: store.NewID(t0), AuthorID: author, Text: "hi", Kind: store.KindPost, CreatedAt: t0}
		require.NoError(t, st.CreateMessage(ctx, m, nil))
		return m
	}

	m := post()
	var wg sync.WaitGroup
	for _, f := range fans {
		wg.Go(func() {
			_, err := st.Like(ctx, f, m.Key(), t0)
			assert.NoError(t, err)
		})
	}
	for i := range 20 {
		wg.Go(func() {
			text := fmt.Sprint("edit ", i)
			_, err := st.UpdateMessage(ctx, m.ID, storage.MessageUpdate{Text: &text})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	got, err := st.FindMessageByID(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, len(fans), got.LikeCount, "no edit wrote back an older count")

	m = post()
	for _, f := range fans {
		wg.Go(func() {
			_, err := st.Like(ctx, f, m.Key(), t0)
			if err != nil {
				assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
			}
		})
	}
	wg.Go(func() { assert.NoError(t, st.DeleteMessage(ctx, m.ID, nil)) })
	wg.Wait()
	_, err = st.FindMessageByID(ctx, m.ID)
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err), "no like revived the deleted message")
	_, err = st.Unlike(ctx, fans[0], m.Key())
	assert.Equal(t, store.ENOTFOUND, store.ErrorCode(err))
}

// openRaceStore opens a store for a race test, with its time and a maker of
// users u<i>.
func openRaceStore(t *testing.T) (context.Context, *embedded.Store, time.Time, func(i int) store.ID) {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return ctx, st, t0, func(i int) store.ID {
		u := &store.User{ID: store.NewID(t0), Handle: fmt.Sprintf("u%d", i), CreatedAt: t0, LastSeenAt: t0}
		require.NoError(t, st.CreateUser(ctx, u))
		return u.ID
	}
}
