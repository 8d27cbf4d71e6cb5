package graph

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"herald/store"
)

// Fuzz targets for the decoders of client-supplied opaque strings: cursors and
// global ids. Run one with, for example,
//
//	go test -run '^$' -fuzz '^FuzzDecodeCursor$' -fuzztime 10s ./graph
//
// Besides "nothing panics" they check that a decoder accepts exactly the
// strings its encoder makes (a decoded value re-encodes to the input, so no two
// strings name the same cursor or object) and refuses everything else with the
// documented BAD_USER_INPUT error.

var allCursorKinds = []cursorKind{cursorInbox, cursorMessages, cursorFollowers, cursorFollowing, cursorAttribute}

// requireBadInput fails unless err is exactly a *store.Error with code
// BAD_USER_INPUT and message msg.
func requireBadInput(t *testing.T, err error, msg, input string) {
	t.Helper()
	var e *store.Error
	if !errors.As(err, &e) {
		t.Fatalf("%q: error %v (%T) is not a *store.Error", input, err, err)
	}
	if e.Code != store.EINVALID || e.Message != msg {
		t.Fatalf("%q: got %s %q, want %s %q", input, e.Code, e.Message, store.EINVALID, msg)
	}
}

func FuzzDecodeCursor(f *testing.F) {
	id := store.NewID(time.Unix(1700000000, 0))
	for _, k := range allCursorKinds {
		f.Add(encodeIDCursor(k, id), uint8(len(id)))
		f.Add(encodeIDCursor(k, store.NilID), uint8(len(id)))
		f.Add(encodeCursor(k, nil), uint8(0))
		f.Add(encodeIDCursor(k, id)[:5], uint8(len(id)))
		f.Add(encodeIDCursor(k, id)+"A", uint8(len(id)))
	}
	f.Add("", uint8(0))
	f.Add("abc", uint8(1))
	f.Add("!!!!", uint8(2))
	f.Add(base64.StdEncoding.EncodeToString(append([]byte{'m'}, id[:]...)), uint8(len(id)))
	f.Add(globalID(typeMessage, id), uint8(len(id)))
	f.Add(globalID(typeUser, id), uint8(len(id)))
	f.Add("YX", uint8(0)) // "YQ" with a nonzero unused bit: another spelling of the same cursor
	if c := encodeIDCursor(cursorInbox, id); true {
		f.Add(c[:8]+"\n"+c[8:]+"\r\n", uint8(len(id))) // the decoder skips newlines
	}

	f.Fuzz(func(t *testing.T, s string, size uint8) {
		accepted := 0
		for _, kind := range allCursorKinds {
			// decodeCursor, any payload size.
			p, err := decodeCursor(kind, int(size), s)
			if err != nil {
				requireBadInput(t, err, "invalid cursor", s)
				if p != nil {
					t.Fatalf("%q: payload %x with an error", s, p)
				}
			} else {
				if len(p) != int(size) {
					t.Fatalf("%q: kind %c size %d: payload of %d bytes", s, kind, size, len(p))
				}
				if got := encodeCursor(kind, p); got != s {
					t.Fatalf("%q: kind %c: decodes to %x which re-encodes to %q", s, kind, p, got)
				}
			}

			// decodeIDCursor, the form connections use.
			after := s
			id, err := decodeIDCursor(kind, &after)
			if err != nil {
				requireBadInput(t, err, "invalid cursor", s)
				if !id.IsZero() {
					t.Fatalf("%q: id %s with an error", s, id)
				}
				continue
			}
			accepted++
			if id.IsZero() {
				t.Fatalf("%q: kind %c: decodes to the nil id", s, kind)
			}
			if got := encodeIDCursor(kind, id); got != s {
				t.Fatalf("%q: kind %c: decodes to %s which re-encodes to %q", s, kind, id, got)
			}
		}
		if accepted > 1 {
			t.Fatalf("%q: accepted as a cursor of %d kinds", s, accepted)
		}
	})
}

func FuzzParseGlobalID(f *testing.F) {
	id := store.NewID(time.Unix(1700000000, 0))
	enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	f.Add(globalID(typeUser, id))
	f.Add(globalID(typeMessage, id))
	f.Add(globalID(typeUser, store.NilID))
	f.Add(enc("Post:" + id.String()))
	f.Add(enc(id.String()))
	f.Add(enc("User:zz"))
	f.Add(enc("User:" + id.String() + ":x"))
	f.Add(enc("User:" + id.String()[:23]))
	f.Add(id.String())
	f.Add("")
	f.Add("User:abc")
	f.Add(encodeIDCursor(cursorMessages, id))
	f.Add(globalID(typeUser, id) + "=")
	f.Add(enc("User:" + strings.ToUpper(id.String())))
	if g := globalID(typeMessage, id); true {
		f.Add(g[:10] + "\n" + g[10:])
		f.Add(g[:len(g)-1] + "B") // unused bits of the last character set
	}

	f.Fuzz(func(t *testing.T, s string) {
		typ, id, err := parseGlobalID(s)
		uid, uerr := parseUserID(s)
		mid, merr := parseMessageID(s)
		if err != nil {
			requireBadInput(t, err, "malformed id", s)
			requireBadInput(t, uerr, "malformed id", s)
			requireBadInput(t, merr, "malformed id", s)
			if typ != "" || !id.IsZero() || !uid.IsZero() || !mid.IsZero() {
				t.Fatalf("%q: %q %s %s %s with an error", s, typ, id, uid, mid)
			}
			return
		}
		if typ != typeUser && typ != typeMessage {
			t.Fatalf("%q: unknown type %q", s, typ)
		}
		if id.IsZero() {
			t.Fatalf("%q: decodes to the nil id", s)
		}
		if got := globalID(typ, id); got != s {
			t.Fatalf("%q: decodes to %s %s which re-encodes to %q", s, typ, id, got)
		}
		// parseIDOf accepts it for its own type only.
		want, wantErr, other, otherErr, otherTyp := uid, uerr, mid, merr, typeMessage
		if typ == typeMessage {
			want, wantErr, other, otherErr, otherTyp = mid, merr, uid, uerr, typeUser
		}
		if wantErr != nil || want != id {
			t.Fatalf("%q: parseIDOf(%s) = %s, %v; want %s", s, typ, want, wantErr, id)
		}
		requireBadInput(t, otherErr, "id is not a "+otherTyp+" id", s)
		if !other.IsZero() {
			t.Fatalf("%q: id %s with an error", s, other)
		}
	})
}
