package graph

import (
	"encoding/base64"
	"encoding/binary"

	"herald/store"
)

// cursorKind tags a cursor with the connection that made it, so a cursor
// from one connection is refused by another instead of being misread.
type cursorKind byte

// Cursor kinds, one per connection.
const (
	cursorInbox         cursorKind = 'i' // payload: the inbox item's message store.ID
	cursorMessages      cursorKind = 'm' // payload: the message's store.ID
	cursorFollowers     cursorKind = 'f' // payload: the follower's store.ID
	cursorFollowing     cursorKind = 'g' // payload: the followee's store.ID
	cursorAttribute     cursorKind = 'a' // payload: the user's store.ID (usersByAttribute)
	cursorLikers        cursorKind = 'l' // payload: the like's store.ID (Message.likedBy)
	cursorLikes         cursorKind = 'k' // payload: the like's store.ID (User.likes)
	cursorReplies       cursorKind = 'r' // payload: the reply's store.ID (Message.replies)
	cursorNotifs        cursorKind = 'n' // payload: the group's LatestID (Query.notifications)
	cursorActors        cursorKind = 'y' // payload: the actor's activity store.ID (NotificationGroup.actors)
	cursorEvent         cursorKind = 'e' // payload: the event's store.EventPosition (subscriptions)
	cursorSearch        cursorKind = 's' // payload: the user's store.SearchPosition (searchUsers)
	cursorBlocked       cursorKind = 'b' // payload: the block's store.ID (User.blocked)
	cursorMuted         cursorKind = 'u' // payload: the mute's store.ID (User.muted)
	cursorRequests      cursorKind = 'q' // payload: the follow request's store.ID (User.followRequests)
	cursorConversations cursorKind = 'c' // payload: the conversation's LastActivity store.ID (Query.conversations)
	cursorConvMessages  cursorKind = 'd' // payload: the message's seq, 8 bytes big-endian (Conversation.messages)
)

// Cursors are base64url(kind byte + payload). They are opaque to clients and
// carry only what the store needs to continue after the edge.

// decodeCursor returns the payload of a cursor of the given kind and size.
// Anything else is BAD_USER_INPUT "invalid cursor", including another spelling
// of a cursor (the decoder ignores newlines and the unused bits of the last
// character), so one position has one cursor.
func decodeCursor(kind cursorKind, size int, s string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) != 1+size || cursorKind(raw[0]) != kind || base64.RawURLEncoding.EncodeToString(raw) != s {
		return nil, errInvalidCursor()
	}
	return raw[1:], nil
}

func errInvalidCursor() error { return store.Errorf(store.EINVALID, "invalid cursor") }

// encodeIDCursor returns a cursor of the given kind positioned at id, with
// the string as its only allocation.
func encodeIDCursor(kind cursorKind, id store.ID) string {
	var out [32]byte
	return string(appendIDCursor(out[:0], kind, id))
}

// idCursorLen is the length of every cursor encodeIDCursor returns.
var idCursorLen = base64.RawURLEncoding.EncodedLen(1 + len(store.ID{}))

// appendIDCursor appends the cursor encodeIDCursor returns to dst.
func appendIDCursor(dst []byte, kind cursorKind, id store.ID) []byte {
	var raw [1 + len(store.ID{})]byte
	raw[0] = byte(kind)
	copy(raw[1:], id[:])
	return base64.RawURLEncoding.AppendEncode(dst, raw[:])
}

// encodeIDCursors returns encodeIDCursor(kind, id(i)) for i in [0, n), as
// substrings of one string: a page makes one per edge, and one allocation
// instead of n is a good part of what the page's cursors cost.
func encodeIDCursors(kind cursorKind, n int, id func(i int) store.ID) []string {
	buf := make([]byte, 0, n*idCursorLen)
	for i := range n {
		buf = appendIDCursor(buf, kind, id(i))
	}
	all := string(buf)
	out := make([]string, n)
	for i := range out {
		out[i] = all[i*idCursorLen : (i+1)*idCursorLen]
	}
	return out
}

// decodeIDCursor returns the store id in an `after` argument of a connection
// of the given kind; nil means from the start (store.NilID).
func decodeIDCursor(kind cursorKind, after *string) (store.ID, error) {
	if after == nil {
		return store.NilID, nil
	}
	p, err := decodeCursor(kind, len(store.ID{}), *after)
	if err != nil {
		return store.NilID, err
	}
	id := store.ID(p)
	if id.IsZero() {
		return store.NilID, errInvalidCursor()
	}
	return id, nil
}

// eventCursorSize is the payload of an event cursor: the position's batch
// id, then its index, big-endian.
const eventCursorSize = len(store.ID{}) + 8

// encodeEventCursor returns the cursor of the event at p.
func encodeEventCursor(p store.EventPosition) string {
	var raw [1 + eventCursorSize]byte
	raw[0] = byte(cursorEvent)
	copy(raw[1:], p.Batch[:])
	binary.BigEndian.PutUint64(raw[1+len(p.Batch):], p.Index)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// decodeEventCursor returns the position in a subscription's `after`
// argument; nil means from now (the zero position).
func decodeEventCursor(after *string) (store.EventPosition, error) {
	if after == nil {
		return store.EventPosition{}, nil
	}
	b, err := decodeCursor(cursorEvent, eventCursorSize, *after)
	if err != nil {
		return store.EventPosition{}, err
	}
	p := store.EventPosition{Batch: store.ID(b[:len(store.ID{})]), Index: binary.BigEndian.Uint64(b[len(store.ID{}):])}
	if p.IsZero() {
		return store.EventPosition{}, errInvalidCursor()
	}
	return p, nil
}

// searchCursorSize is a search cursor's payload: exact (1 byte), followers
// (8), the user's ID.
const searchCursorSize = 1 + 8 + len(store.ID{})

func encodeSearchCursor(p store.SearchPosition) string {
	raw := make([]byte, 1, 1+searchCursorSize)
	raw[0] = byte(cursorSearch)
	exact := byte(0)
	if p.Exact {
		exact = 1
	}
	raw = append(raw, exact)
	raw = binary.BigEndian.AppendUint64(raw, uint64(p.Followers))
	raw = append(raw, p.ID[:]...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

// decodeSearchCursor returns the position of a searchUsers cursor; nil for
// no cursor.
func decodeSearchCursor(after *string) (*store.SearchPosition, error) {
	if after == nil {
		return nil, nil
	}
	b, err := decodeCursor(cursorSearch, searchCursorSize, *after)
	if err != nil || b[0] > 1 || int64(binary.BigEndian.Uint64(b[1:9])) < 0 {
		return nil, errInvalidCursor()
	}
	p := &store.SearchPosition{Exact: b[0] == 1, Followers: int(binary.BigEndian.Uint64(b[1:9]))}
	copy(p.ID[:], b[9:])
	return p, nil
}
