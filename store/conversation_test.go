package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

func TestConversationID(t *testing.T) {
	a, b := store.NewID(time.Now()), store.NewID(time.Now())
	direct := store.DirectConversationID(b, a)
	assert.Equal(t, direct, store.DirectConversationID(a, b), "either user's order names it")
	assert.Len(t, direct, 24)
	assert.False(t, direct.IsGroup())
	first, second := direct.Users()
	assert.Equal(t, [2]store.ID{a, b}, [2]store.ID{first, second}, "the smaller first")
	assert.Equal(t, b, direct.Other(a))
	assert.Equal(t, a, direct.Other(b))
	group := store.GroupConversationID(a)
	assert.Len(t, group, 12)
	assert.True(t, group.IsGroup())
	assert.Equal(t, a, group.Group())

	for _, c := range []store.ConversationID{direct, group} {
		s := c.String()
		assert.Len(t, s, 2*len(c))
		back, err := store.ParseConversationID(s)
		require.NoError(t, err)
		assert.Equal(t, c, back)
	}
	reversed := store.ConversationID(string(b[:]) + string(a[:]))
	for _, bad := range []string{"", "zz", a.String()[:10], reversed.String(), string(direct) + "00", store.ConversationID(string(a[:]) + string(a[:])).String()} {
		_, err := store.ParseConversationID(bad)
		assert.Equal(t, store.EINVALID, store.ErrorCode(err), "%q", bad)
	}
}

func TestUnreadConversations(t *testing.T) {
	u := store.UnreadConversations{
		"a": {LastSeq: 5, ReadSeq: 2},
		"b": {LastSeq: 3, ReadSeq: 3},
		"c": {LastSeq: 1, ReadSeq: 4},
	}
	assert.Equal(t, 3, u["a"].Unread())
	assert.Equal(t, 0, u["c"].Unread(), "a read past the last told is none unread")
	assert.Equal(t, 3, u.Total())
}
