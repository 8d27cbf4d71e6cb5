package embedded

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

func newTestID(i int) store.ID {
	return store.NewID(time.UnixMilli(int64(1_700_000_000_000 + i)))
}

// TestDocCache_RacedReadNotKept checks the guard against a read that raced
// a write: a value read before a drop in its shard is not cached.
func TestDocCache_RacedReadNotKept(t *testing.T) {
	c := newDocCache(64, copyMessage)
	id := newTestID(1)
	var m store.Message
	drops, ok := c.get(id, &m)
	require.False(t, ok)
	// A write commits and drops id while the read is in Pebble...
	c.drop(id)
	// ...and the read, which may have read the old value, puts it.
	c.put(id, &store.Message{ID: id, Text: "old"}, drops)
	_, ok = c.get(id, &m)
	assert.False(t, ok, "a value read before a drop is not cached")

	drops, _ = c.get(id, &m)
	c.put(id, &store.Message{ID: id, Text: "new"}, drops)
	_, ok = c.get(id, &m)
	require.True(t, ok, "a value read after the drop is")
	assert.Equal(t, "new", m.Text)
}

// TestDocCache_Bounded checks that a shard holds no more than its share,
// and that the clock keeps documents read since it last passed.
func TestDocCache_Bounded(t *testing.T) {
	c := newDocCache(docShards*4, copyMessage) // 4 per shard
	var hot []store.ID
	for i := range 10_000 {
		id := newTestID(i)
		var m store.Message
		drops, _ := c.get(id, &m)
		c.put(id, &store.Message{ID: id}, drops)
		if i < 64 {
			hot = append(hot, id)
		}
		for _, h := range hot {
			c.get(h, &m) // the hot documents are read all along
		}
	}
	total := 0
	for i := range c.shards {
		sh := &c.shards[i]
		assert.LessOrEqual(t, len(sh.index), 4)
		assert.LessOrEqual(t, len(sh.slots), 4)
		total += len(sh.index)
	}
	assert.LessOrEqual(t, total, docShards*4)
	kept := 0
	for _, h := range hot {
		var m store.Message
		if _, ok := c.get(h, &m); ok {
			kept++
		}
	}
	// Every shard the hot documents fall in has room for them unless
	// more than four hash to it; most stay.
	assert.Greater(t, kept, len(hot)/2, "documents in use are kept")

	c.dropAll()
	for _, h := range hot {
		var m store.Message
		_, ok := c.get(h, &m)
		assert.False(t, ok)
	}
}

// TestWrittenDocs checks which documents a batch is seen to write.
func TestWrittenDocs(t *testing.T) {
	u, m, other := newTestID(1), newTestID(2), newTestID(3)
	db, err := pebble.Open("db", &pebble.Options{FS: vfs.NewMem()})
	require.NoError(t, err)
	defer db.Close()

	b := db.NewBatch()
	_ = b.Set(key(pUser, u), []byte("doc"), nil)
	_ = b.Delete(key(pMessage, m), nil)
	_ = b.Set(key(pOutbox, other, m), nil, nil)
	_ = b.Set(key(pHandle, "abc"), other[:], nil)
	p := key(pInbox, other)
	_ = b.DeleteRange(p, prefixEnd(p), nil)
	users, messages, ranges := writtenDocs(b)
	assert.Equal(t, []store.ID{u}, users)
	assert.Equal(t, []store.ID{m}, messages)
	assert.False(t, ranges, "an inbox's range holds no documents")
	b.Close()

	for _, r := range [][2][]byte{{{pUser}, {pUser + 1}}, {{pHandle}, {pOutbox}}, {key(pMessage, m), prefixEnd(key(pMessage, m))}} {
		b := db.NewBatch()
		_ = b.DeleteRange(r[0], r[1], nil)
		_, _, ranges := writtenDocs(b)
		assert.True(t, ranges, "%q–%q holds documents", r[0], r[1])
		b.Close()
	}
}
