package embedded_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
	"herald/store/storage"
)

// TestStore_ScansStopWithTheirRequest checks that the reads whose work
// grows with the data (a count by attribute value, fan-out on read over
// many followees) stop when their request's context ends instead of
// finishing work nobody will read.
func TestStore_ScansStopWithTheirRequest(t *testing.T) {
	st, err := embedded.Open(t.TempDir(), embedded.Options{Logger: slog.New(slog.DiscardHandler), CacheBytes: 8 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Millisecond)
	const n = 3000
	bk := &storage.Bulk{}
	authors := make([]store.ID, n)
	for i := range n {
		u := &store.User{ID: store.NewID(now), Handle: fmt.Sprintf("u%d", i), PasswordHash: []byte("x"), CreatedAt: now, LastSeenAt: now,
			Attributes: []store.Attribute{{Name: "plan", Value: "pro"}}}
		bk.Users = append(bk.Users, u)
		authors[i] = u.ID
	}
	require.NoError(t, st.LoadBulk(ctx, bk))
	count, err := st.CountUsersByAttribute(ctx, "plan", "pro")
	require.NoError(t, err)
	require.Equal(t, n, count)

	gone, cancel := context.WithCancel(ctx)
	cancel()
	_, err = st.CountUsersByAttribute(gone, "plan", "pro")
	assert.ErrorIs(t, err, context.Canceled)
	_, err = st.FindOutbox(gone, storage.OutboxFilter{Authors: authors, Range: store.Forward(store.NilID, 50)})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = st.CountOutbox(gone, storage.OutboxFilter{Authors: authors})
	assert.ErrorIs(t, err, context.Canceled)
}
