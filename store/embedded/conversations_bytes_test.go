package embedded_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
	"herald/store/embedded"
)

// TestBytes_Conversations measures the keys and values a conversation
// stores on Pebble (docs/design.md#conversations): one direct message of
// 80 characters between two users.
func TestBytes_Conversations(t *testing.T) {
	ctx := context.Background()
	s, err := embedded.Open(t.TempDir(), embedded.Options{})
	require.NoError(t, err)
	defer s.Close()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b := store.NewID(at), store.NewID(at)
	m := &store.ConversationMessage{ID: store.NewID(at), ConversationID: store.DirectConversationID(a, b), AuthorID: a, Text: strings.Repeat("x", 80), CreatedAt: at}
	_, err = s.AppendConversationMessage(ctx, m)
	require.NoError(t, err)
	dump, err := s.Dump()
	require.NoError(t, err)
	sizes := map[byte]int{}
	counts := map[byte]int{}
	for k, v := range dump {
		sizes[k[0]] += len(k) + len(v)
		counts[k[0]]++
	}
	for _, p := range []struct {
		prefix byte
		what   string
	}{{'C', "conversation"}, {'M', "message"}, {'U', "list entry"}, {'V', "list place"}, {'W', "read state"}} {
		require.NotZero(t, counts[p.prefix], p.what)
		t.Logf("%-14s %c: %4d bytes each (key and value)", p.what, p.prefix, sizes[p.prefix]/counts[p.prefix])
	}
	assert.Equal(t, 1, counts['M'], "one message")
	assert.Equal(t, 2, counts['U'], "one entry in each user's list")
	assert.LessOrEqual(t, sizes['M'], 80+90, "a message is its text and about 90 bytes, key included")
}
