package embedded

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

// TestOutboxValue checks the outbox index value's flags: a repost's mark of
// not being at its author's home reads back beside pulled, and a flag the
// value's form cannot hold is refused rather than read as something else.
func TestOutboxValue(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Millisecond)
	author := store.NewID(now)
	for _, m := range []*store.Message{
		{ID: store.NewID(now), AuthorID: author, Kind: store.KindRepost, CreatedAt: now, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now), HomeHidden: true},
		{ID: store.NewID(now), AuthorID: author, Kind: store.KindRepost, CreatedAt: now, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now), HomeHidden: true, Pulled: true},
		{ID: store.NewID(now), AuthorID: author, Kind: store.KindRepost, CreatedAt: now, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now)},
		{ID: store.NewID(now), AuthorID: author, Kind: store.KindPost, CreatedAt: now, Pulled: true},
	} {
		row, err := decodeOutbox(author, m.ID, encodeOutbox(m))
		require.NoError(t, err)
		assert.Equal(t, m.HomeHidden, row.homeHidden)
		assert.Equal(t, m.Pulled, row.pulled)
		assert.Equal(t, m.RepostOfAuthorID, row.repostOf.AuthorID)
	}

	post := encodeOutbox(&store.Message{ID: store.NewID(now), AuthorID: author, Kind: store.KindPost, CreatedAt: now})
	post[8] |= outboxHomeHidden
	_, err := decodeOutbox(author, store.NewID(now), post)
	assert.Error(t, err, "only a repost is marked hidden")
	repost := encodeOutbox(&store.Message{ID: store.NewID(now), AuthorID: author, Kind: store.KindRepost, CreatedAt: now, RepostOfID: store.NewID(now), RepostOfAuthorID: store.NewID(now)})
	repost[8] |= 1 << 7
	_, err = decodeOutbox(author, store.NewID(now), repost)
	assert.Error(t, err, "an unknown flag")
}
