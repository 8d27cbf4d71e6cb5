package store

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// Fuzz targets for the validation of client input. Run one with, for example,
//
//	go test -run '^$' -fuzz '^FuzzSignUpInput$' -fuzztime 10s ./store
//
// Each checks the function against its documented rule: accepted input is
// within the limits and normalizes to a value that validates to itself, and
// anything refused is refused with a BAD_USER_INPUT *Error whose message is
// valid text. Nothing may panic.

// requireInvalid fails unless err is a *Error with code BAD_USER_INPUT and a
// non-empty, valid UTF-8 message (it is shown to clients).
func requireInvalid(t *testing.T, err error, input any) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%#v: error %v (%T) is not a *store.Error", input, err, err)
	}
	if e.Code != EINVALID {
		t.Fatalf("%#v: code %s, want %s", input, e.Code, EINVALID)
	}
	if e.Message == "" || !utf8.ValidString(e.Message) {
		t.Fatalf("%#v: message %q is not valid text", input, e.Message)
	}
}

func FuzzParseID(f *testing.F) {
	id := NewID(time.Unix(1700000000, 0))
	f.Add(id.String())
	f.Add(NilID.String())
	f.Add(strings.ToUpper(id.String()))
	f.Add(id.String()[:23])
	f.Add(id.String() + "0")
	f.Add("zzzzzzzzzzzzzzzzzzzzzzzz")
	f.Add("")
	f.Add("0x" + id.String()[2:])

	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseID(s)
		if err != nil {
			requireInvalid(t, err, s)
			if msg := ErrorMessage(err); msg != "malformed id" {
				t.Fatalf("%q: message %q, want %q", s, msg, "malformed id")
			}
			if !got.IsZero() {
				t.Fatalf("%q: id %s with an error", s, got)
			}
			return
		}
		// Only the form ID.String makes is accepted.
		if got.String() != s {
			t.Fatalf("%q: parses to %s", s, got)
		}
	})
}

// FuzzSignUpInput checks the validation of SignUp's input: the handle, the
// password and the display name.
func FuzzSignUpInput(f *testing.F) {
	handles := []string{"alice", "Bob_99", "ab", "abc", strings.Repeat("x", 30), strings.Repeat("x", 31),
		"al ice", "al-ice", "ålice", "", "\u212Aelvin", "\u0130stanbul", "a\x00b", "\xff\xfeab"}
	passwords := []string{"correct-horse", "short", "", strings.Repeat("p", 8), strings.Repeat("p", 72),
		strings.Repeat("p", 73), "\xff\xfe\xfd\xfc\xfb\xfa\xf9\xf8", "日本語のパスワード"}
	names := []string{"Alice", "  Alice  ", "", "   ", "\t\n", strings.Repeat("é", 64), strings.Repeat("é", 65),
		"\xff", " \xff ", "Al\u00a0", "\u3000", "a\x00b", "👩‍👩‍👧‍👦", "\u202eevil", "ali\u2066ce", "\u200b", "\x00\x00", "\u3164\u3164"}
	for i := 0; i < len(handles) || i < len(passwords) || i < len(names); i++ {
		f.Add(handles[i%len(handles)], passwords[i%len(passwords)], names[i%len(names)])
	}

	f.Fuzz(func(t *testing.T, handle, password, name string) {
		h, ok := checkHandle(t, handle)
		checkPassword(t, password)
		if !ok {
			h = "alice" // SignUp checks the handle first; still check the name
		}
		checkDisplayName(t, name, h)
	})
}

func checkHandle(t *testing.T, s string) (string, bool) {
	t.Helper()
	h, err := NormalizeHandle(s)
	if err != nil {
		requireInvalid(t, err, s)
		if h != "" {
			t.Fatalf("%q: handle %q with an error", s, h)
		}
		// Refused input really breaks the rule.
		if l := strings.ToLower(s); len(l) >= HandleMinLen && len(l) <= HandleMaxLen && strings.Trim(l, "abcdefghijklmnopqrstuvwxyz0123456789_") == "" {
			t.Fatalf("%q: refused though it lowercases to %q", s, l)
		}
		return "", false
	}
	if len(h) < HandleMinLen || len(h) > HandleMaxLen {
		t.Fatalf("%q: handle %q of %d bytes", s, h, len(h))
	}
	for i := 0; i < len(h); i++ {
		if c := h[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			t.Fatalf("%q: handle %q has byte %q", s, h, c)
		}
	}
	if h != strings.ToLower(s) {
		t.Fatalf("%q: handle %q is not its lowercase form", s, h)
	}
	if again, err := NormalizeHandle(h); err != nil || again != h {
		t.Fatalf("%q: handle %q normalizes to %q, %v", s, h, again, err)
	}
	return h, true
}

func checkPassword(t *testing.T, s string) {
	t.Helper()
	err := ValidatePassword(s)
	want := len(s) >= PasswordMinLen && len(s) <= PasswordMaxLen
	if err != nil {
		requireInvalid(t, err, s)
	}
	if (err == nil) != want {
		t.Fatalf("password %q (%d bytes): error %v", s, len(s), err)
	}
}

func checkDisplayName(t *testing.T, name, handle string) {
	t.Helper()
	got, err := NormalizeDisplayName(name, handle)
	if err != nil {
		requireInvalid(t, err, name)
		if got != "" {
			t.Fatalf("%q: name %q with an error", name, got)
		}
		if trimmed := strings.TrimSpace(name); utf8.ValidString(trimmed) && utf8.RuneCountInString(trimmed) <= DisplayNameMaxLen &&
			!strings.ContainsFunc(trimmed, forbiddenInName) {
			t.Fatalf("%q: refused though it is valid text of %d characters", name, utf8.RuneCountInString(trimmed))
		}
		return
	}
	if strings.ContainsFunc(got, forbiddenInName) && got != handle {
		t.Fatalf("%q: name %q holds a control or bidirectional formatting character", name, got)
	}
	if onlyInvisible(name) {
		if got != handle {
			t.Fatalf("%q: blank name gives %q, want the handle %q", name, got, handle)
		}
		return
	}
	if got == "" || !utf8.ValidString(got) || utf8.RuneCountInString(got) > DisplayNameMaxLen {
		t.Fatalf("%q: name %q is empty, invalid or too long", name, got)
	}
	if got != strings.TrimSpace(got) || !strings.Contains(name, got) {
		t.Fatalf("%q: name %q is not the input trimmed", name, got)
	}
	if again, err := NormalizeDisplayName(got, handle); err != nil || again != got {
		t.Fatalf("%q: name %q normalizes to %q, %v", name, got, again, err)
	}
}

// forbiddenInName is what a display name may not hold, written from the
// Unicode categories rather than through the code under test: C0 and C1
// controls and the bidirectional formatting characters.
func forbiddenInName(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x061c || r == 0x200e || r == 0x200f ||
		(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// onlyInvisible reports whether s is nothing but white space and
// characters that show nothing, by the same list written out by hand.
func onlyInvisible(s string) bool {
	for _, r := range s {
		switch {
		case unicode.IsSpace(r), r < 0x20, r >= 0x7f && r <= 0x9f, unicode.Is(unicode.Cf, r),
			r == 0x034f, r == 0x115f, r == 0x1160, r == 0x17b4, r == 0x17b5, r == 0x3164, r == 0xffa0, r == 0x2800,
			r >= 0x180b && r <= 0x180f, r >= 0xfe00 && r <= 0xfe0f, r >= 0xe0100 && r <= 0xe01ef,
			unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r):
		default:
			return false
		}
	}
	return true
}

func FuzzValidateMessageText(f *testing.F) {
	for _, s := range []string{"Hello, Herald!", "", " ", "\n\t ", "\u00a0", "\xff", "ok\xff", "a\x00b",
		"\x00\x00", "\u200b\u200c\u200d\ufeff", "\u3164", "\u2800", "a\u200bb", "line\r\nbreak\ttab", "bell\a",
		strings.Repeat("x", MessageMaxLen), strings.Repeat("x", MessageMaxLen+1),
		strings.Repeat("é", MessageMaxLen), strings.Repeat("é", MessageMaxLen+1)} {
		f.Add(s)
	}

	f.Fuzz(func(t *testing.T, s string) {
		err := ValidateMessageText(s)
		want := utf8.ValidString(s) && !onlyInvisible(s) && utf8.RuneCountInString(s) <= MessageMaxLen &&
			!strings.ContainsFunc(s, func(r rune) bool { return forbiddenInName(r) && r < 0x200 && r != '\t' && r != '\n' && r != '\r' })
		if err != nil {
			requireInvalid(t, err, s)
		}
		if (err == nil) != want {
			t.Fatalf("%q: error %v, want accepted=%v", s, err, want)
		}
	})
}

func FuzzPageSize(f *testing.F) {
	for _, n := range []int{0, 1, DefaultPageSize, MaxPageSize, MaxPageSize + 1, -1, 1 << 62, -1 << 63} {
		f.Add(n, false)
	}
	f.Add(0, true)

	f.Fuzz(func(t *testing.T, n int, isNil bool) {
		first := &n
		if isNil {
			first = nil
		}
		got, err := PageSize("first", first)
		switch {
		case isNil:
			if err != nil || got != DefaultPageSize {
				t.Fatalf("nil: %d, %v", got, err)
			}
		case n >= 0 && n <= MaxPageSize:
			if err != nil || got != n {
				t.Fatalf("%d: %d, %v", n, got, err)
			}
		default:
			requireInvalid(t, err, n)
			if got != 0 {
				t.Fatalf("%d: %d with an error", n, got)
			}
		}
	})
}

func FuzzValidateAttributes(f *testing.F) {
	long := strings.Repeat("n", AttrNameMaxLen)
	for _, c := range []struct {
		n1, v1 string
		nil1   bool
		n2, v2 string
		nil2   bool
	}{
		{"city", "Paris", false, "lang", "fr", false},
		{"city", "Paris", false, "city", "Rome", false},
		{"city", "", true, "lang", "", true},
		{"", "x", false, "lang", "fr", false},
		{long, "x", false, long + "n", "x", false},
		{strings.Repeat("é", AttrNameMaxLen), strings.Repeat("v", AttrValueMaxLen), false, "b", strings.Repeat("v", AttrValueMaxLen+1), false},
		{"\xff", "x", false, "ok", "\xfe", false},
		{"na\x00me", "va\x00lue", false, "名前", "値", false},
	} {
		f.Add(c.n1, c.v1, c.nil1, c.n2, c.v2, c.nil2)
	}

	validName := func(s string) bool {
		return utf8.ValidString(s) && s != "" && utf8.RuneCountInString(s) <= AttrNameMaxLen
	}
	validValue := func(v *string) bool { return v == nil || utf8.ValidString(*v) && len(*v) <= AttrValueMaxLen }

	f.Fuzz(func(t *testing.T, n1, v1 string, nil1 bool, n2, v2 string, nil2 bool) {
		changes := []AttributeChange{{Name: n1, Value: &v1}, {Name: n2, Value: &v2}}
		if nil1 {
			changes[0].Value = nil
		}
		if nil2 {
			changes[1].Value = nil
		}
		for _, c := range changes {
			err := ValidateAttribute(c.Name, c.Value)
			if err != nil {
				requireInvalid(t, err, c)
			}
			if want := validName(c.Name) && validValue(c.Value); (err == nil) != want {
				t.Fatalf("%#v: error %v, want accepted=%v", c, err, want)
			}
		}
		err := ValidateAttributeChanges(changes)
		if err != nil {
			requireInvalid(t, err, changes)
		}
		want := validName(n1) && validValue(changes[0].Value) && validName(n2) && validValue(changes[1].Value) && n1 != n2
		if (err == nil) != want {
			t.Fatalf("%#v: error %v, want accepted=%v", changes, err, want)
		}

		// The per-call limit: MaxAttributes distinct valid changes pass, one more does not.
		if validName(n1) && validValue(changes[0].Value) && utf8.RuneCountInString(n1) <= AttrNameMaxLen-3 {
			many := make([]AttributeChange, MaxAttributes+1)
			for i := range many {
				many[i] = AttributeChange{Name: n1 + string(rune('0'+i/100)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10)), Value: changes[0].Value}
			}
			if err := ValidateAttributeChanges(many[:MaxAttributes]); err != nil {
				t.Fatalf("%q: %d changes: %v", n1, MaxAttributes, err)
			}
			requireInvalid(t, ValidateAttributeChanges(many), n1)
		}
	})
}
