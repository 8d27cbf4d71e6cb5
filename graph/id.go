package graph

import (
	"encoding/base64"
	"encoding/hex"
	"strings"

	"herald/store"
)

// Global ids are base64url("<Type>:<24 hex>"): opaque to clients, unique
// across types (so Query.node can tell a user from a message), and free of
// characters that need escaping in URLs.
const (
	typeUser              = "User"
	typeMessage           = "Message"
	typeNotificationGroup = "NotificationGroup"
)

// globalID returns the opaque GraphQL id of the object of type typ with id.
// It builds the id in a stack buffer, so that the string is its only
// allocation.
func globalID(typ string, id store.ID) string {
	var out [60]byte // base64 of the longest, "NotificationGroup:" and 24 hex digits
	return string(appendGlobalID(out[:0], typ, id))
}

// appendGlobalID appends the id globalID returns to dst; the timeline's fast
// path writes a page's ids with it straight into the response, without a
// string per edge. The id is base64url, so it needs no JSON escaping.
func appendGlobalID(dst []byte, typ string, id store.ID) []byte {
	var raw [42]byte // "NotificationGroup:" and 24 hex digits
	b := append(append(raw[:0], typ...), ':')
	b = hex.AppendEncode(b, id[:])
	return base64.RawURLEncoding.AppendEncode(dst, b)
}

// parseGlobalID splits a global id into its type name and store id. Anything
// that is not a global id made by globalID is BAD_USER_INPUT, including another
// spelling of one (the decoder ignores newlines and the unused bits of the last
// character), so an object has one id.
func parseGlobalID(s string) (typ string, id store.ID, err error) {
	bad := store.Errorf(store.EINVALID, "malformed id")
	typ, hexID, ok := splitGlobalID(s)
	if !ok || (typ != typeUser && typ != typeMessage && typ != typeNotificationGroup) {
		return "", store.NilID, bad
	}
	id, err = store.ParseID(hexID)
	if err != nil || id.IsZero() {
		return "", store.NilID, bad
	}
	return typ, id, nil
}

// parseIDOf decodes a global id that must name an object of type want; a
// malformed id or one of another type is BAD_USER_INPUT.
func parseIDOf(want, s string) (store.ID, error) {
	typ, id, err := parseGlobalID(s)
	if err != nil {
		return store.NilID, err
	}
	if typ != want {
		return store.NilID, store.Errorf(store.EINVALID, "id is not a %s id", want)
	}
	return id, nil
}

// splitGlobalID returns the type name of the global id s and what follows
// it, if s is spelled as the id functions spell it (another spelling of
// the same bytes is refused, so an object has one id).
func splitGlobalID(s string) (typ, rest string, ok bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != s {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// parseUserID and parseMessageID are parseIDOf for the two node types.
func parseUserID(s string) (store.ID, error)    { return parseIDOf(typeUser, s) }
func parseMessageID(s string) (store.ID, error) { return parseIDOf(typeMessage, s) }
