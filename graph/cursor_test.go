package graph

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/store"
)

// encodeCursor is the cursor format written plainly: the reference the
// tests hold the encoders and the decoder to.
func encodeCursor(kind cursorKind, payload []byte) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{byte(kind)}, payload...))
}

func ptr[T any](v T) *T { return &v }

func TestCursor_ID(t *testing.T) {
	id := store.NewID(time.Now())
	tests := []struct {
		name  string
		kind  cursorKind
		after *string
		want  store.ID
		ok    bool
	}{
		{"Nil", cursorMessages, nil, store.NilID, true},
		{"Messages", cursorMessages, ptr(encodeIDCursor(cursorMessages, id)), id, true},
		{"Followers", cursorFollowers, ptr(encodeIDCursor(cursorFollowers, id)), id, true},
		{"Following", cursorFollowing, ptr(encodeIDCursor(cursorFollowing, id)), id, true},
		{"FollowersOnFollowing", cursorFollowing, ptr(encodeIDCursor(cursorFollowers, id)), store.NilID, false},
		{"MessagesOnFollowers", cursorFollowers, ptr(encodeIDCursor(cursorMessages, id)), store.NilID, false},
		{"Inbox", cursorInbox, ptr(encodeIDCursor(cursorInbox, id)), id, true},
		{"InboxOnMessages", cursorMessages, ptr(encodeIDCursor(cursorInbox, id)), store.NilID, false},
		{"MessagesOnInbox", cursorInbox, ptr(encodeIDCursor(cursorMessages, id)), store.NilID, false},
		{"Truncated", cursorInbox, ptr(encodeIDCursor(cursorInbox, id)[:5]), store.NilID, false},
		{"NilID", cursorMessages, ptr(encodeIDCursor(cursorMessages, store.NilID)), store.NilID, false},
		{"Garbage", cursorMessages, ptr("abc"), store.NilID, false},
		{"GlobalID", cursorMessages, ptr(globalID(typeMessage, id)), store.NilID, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeIDCursor(tt.kind, tt.after)
			if !tt.ok {
				require.Error(t, err)
				assert.Equal(t, store.EINVALID, store.ErrorCode(err))
				assert.Equal(t, "invalid cursor", store.ErrorMessage(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestGlobalID(t *testing.T) {
	id := store.NewID(time.Now())
	user, msg := globalID(typeUser, id), globalID(typeMessage, id)
	assert.NotEqual(t, user, msg, "the same store id must give different global ids per type")

	tests := []struct {
		name string
		want string // the type parseIDOf is asked for
		in   string
		ok   bool
	}{
		{"User", typeUser, user, true},
		{"Message", typeMessage, msg, true},
		{"WrongType", typeUser, msg, false},
		{"UnknownType", typeUser, base64.RawURLEncoding.EncodeToString([]byte("Post:" + id.String())), false},
		{"NoType", typeUser, base64.RawURLEncoding.EncodeToString([]byte(id.String())), false},
		{"BadHex", typeUser, base64.RawURLEncoding.EncodeToString([]byte("User:zz")), false},
		{"NilID", typeUser, globalID(typeUser, store.NilID), false},
		{"RawHex", typeUser, id.String(), false},
		{"Empty", typeUser, "", false},
		{"NotBase64", typeUser, "User:abc", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseIDOf(tt.want, tt.in)
			if !tt.ok {
				require.Error(t, err)
				assert.Equal(t, store.EINVALID, store.ErrorCode(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, id, got)
		})
	}
}

// TestEncodings checks that the allocation-free encoders write the formats
// that parseGlobalID and decodeCursor read, as documented.
func TestEncodings(t *testing.T) {
	for _, id := range []store.ID{store.NilID, store.NewID(time.Now()), {0xff, 0xfe, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}} {
		for _, typ := range []string{typeUser, typeMessage} {
			assert.Equal(t, base64.RawURLEncoding.EncodeToString([]byte(typ+":"+id.String())), globalID(typ, id))
		}
		for _, typ := range []string{typeUser, typeMessage} {
			assert.Equal(t, `x"`+globalID(typ, id)+`"`, string(append(appendGlobalID([]byte(`x"`), typ, id), '"')))
		}
		for _, kind := range []cursorKind{cursorInbox, cursorMessages, cursorFollowers, cursorFollowing, cursorAttribute} {
			assert.Equal(t, encodeCursor(kind, id[:]), encodeIDCursor(kind, id))
		}
	}
	ids := []store.ID{store.NewID(time.Now()), store.NilID, {0xff, 0xfe, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}
	for n := range len(ids) + 1 {
		got := encodeIDCursors(cursorInbox, n, func(i int) store.ID { return ids[i] })
		require.Len(t, got, n)
		for i := range n {
			assert.Equal(t, encodeCursor(cursorInbox, ids[i][:]), got[i])
		}
	}
}

func TestCursor_Event(t *testing.T) {
	p := store.EventPosition{Batch: store.NewID(time.Now()), Index: 1<<40 + 7}
	c := encodeEventCursor(p)
	assert.Equal(t, encodeCursor(cursorEvent, append(p.Batch[:], 0, 0, 1, 0, 0, 0, 0, 7)), c)
	got, err := decodeEventCursor(&c)
	require.NoError(t, err)
	assert.Equal(t, p, got)
	got, err = decodeEventCursor(nil)
	require.NoError(t, err)
	assert.True(t, got.IsZero(), "no cursor: from now")

	for name, bad := range map[string]string{
		"Truncated": c[:len(c)-1],
		"Zero":      encodeEventCursor(store.EventPosition{}),
		"Inbox":     encodeIDCursor(cursorInbox, p.Batch),
		"Garbage":   "nope",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeEventCursor(&bad)
			assert.Equal(t, store.EINVALID, store.ErrorCode(err))
		})
	}
}
