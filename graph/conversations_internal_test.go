package graph

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

// TestConversationGlobalIDs: conversation and message ids round-trip, and
// any other spelling, type or shape is BAD_USER_INPUT, so that an object
// has one id.
func TestConversationGlobalIDs(t *testing.T) {
	now := time.Now()
	a, b := store.NewID(now), store.NewID(now)
	direct, group := store.DirectConversationID(a, b), store.GroupConversationID(a)
	for _, c := range []store.ConversationID{direct, group} {
		got, err := parseConversationID(conversationGlobalID(c))
		require.NoError(t, err)
		assert.Equal(t, c, got)
		conv, seq, err := parseConversationMessageID(conversationMessageGlobalID(c, 42))
		require.NoError(t, err)
		assert.Equal(t, c, conv)
		assert.Equal(t, uint64(42), seq)
	}
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []string{
		conversationMessageGlobalID(group, 1), // a message id is no conversation id
		globalID(typeUser, a),
		enc("Conversation:" + group.String() + "00"),
		enc("Conversation:" + string(direct[12:]) + string(direct[:12])),
		enc("Conversation:ABCDEF0123456789ABCDEF01"), // upper case: another spelling
		"!!",
	} {
		_, err := parseConversationID(bad)
		assert.Equal(t, store.EINVALID, store.ErrorCode(err), bad)
	}
	for _, bad := range []string{
		conversationGlobalID(group),
		enc("ConversationMessage:" + group.String() + ":0"),
		enc("ConversationMessage:" + group.String() + ":01"),
		enc("ConversationMessage:" + group.String() + ":+1"),
		enc("ConversationMessage:" + group.String()),
		enc("ConversationMessage:" + group.String() + ":1:2"),
	} {
		_, _, err := parseConversationMessageID(bad)
		assert.Equal(t, store.EINVALID, store.ErrorCode(err), bad)
	}
}

// TestSeqCursor: a message cursor round-trips; another connection's, or
// seq 0, is refused.
func TestSeqCursor(t *testing.T) {
	c := seqCursor(7)
	r, _, err := seqPaging(nil, &c, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, store.SeqRange{From: 7, Limit: store.DefaultPageSize}, r)
	r, _, err = seqPaging(nil, nil, nil, &c)
	require.NoError(t, err)
	assert.Equal(t, store.SeqRange{From: 7, Limit: store.DefaultPageSize, Reverse: true}, r)
	for _, bad := range []string{seqCursor(0), encodeIDCursor(cursorConversations, store.NewID(time.Now()))} {
		_, _, err := seqPaging(nil, &bad, nil, nil)
		assert.Equal(t, store.EINVALID, store.ErrorCode(err))
	}
}
