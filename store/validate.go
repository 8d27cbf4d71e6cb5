package store

import (
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"
)

// Input limits.
const (
	HandleMinLen      = 3
	HandleMaxLen      = 30
	PasswordMinLen    = 8
	PasswordMaxLen    = 72 // bcrypt reads at most 72 bytes
	DisplayNameMaxLen = 64
	BioMaxLen         = 300  // characters
	URLMaxLen         = 512  // bytes
	MessageMaxLen     = 5000 // characters
	MaxPageSize       = 100
	DefaultPageSize   = 20
	AttrNameMaxLen    = 64   // characters
	AttrValueMaxLen   = 1024 // bytes
	MaxAttributes     = 100  // per user, and per change
	MaxMentions       = 10   // distinct @handles per message
)

// NormalizeHandle lowercases a handle and checks it is 3–30 of [a-z0-9_].
// Handles are unique case-insensitively because they are stored lowercase.
func NormalizeHandle(handle string) (string, error) {
	h := strings.ToLower(handle)
	if len(h) < HandleMinLen || len(h) > HandleMaxLen {
		return "", Errorf(EINVALID, "handle must be %d to %d characters", HandleMinLen, HandleMaxLen)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return "", Errorf(EINVALID, "handle may contain only letters, digits and underscores")
		}
	}
	return h, nil
}

// HashPassword returns the hash SignUp stores for password p, at bcrypt
// cost (0: bcrypt.DefaultCost). An invalid password is BAD_USER_INPUT.
func HashPassword(p string, cost int) ([]byte, error) {
	if err := ValidatePassword(p); err != nil {
		return nil, err
	}
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	return bcrypt.GenerateFromPassword([]byte(p), cost)
}

func ValidatePassword(p string) error {
	if len(p) < PasswordMinLen || len(p) > PasswordMaxLen {
		return Errorf(EINVALID, "password must be %d to %d bytes", PasswordMinLen, PasswordMaxLen)
	}
	return nil
}

// NormalizeDisplayName checks a display name and returns it trimmed, or
// handle for a name that is blank (nothing visible). A name must be valid
// text without control or bidirectional formatting characters: a
// right-to-left override (U+202E) in a name reverses what follows it
// wherever the name is shown, and is how names impersonate others.
func NormalizeDisplayName(name, handle string) (string, error) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) {
		return "", Errorf(EINVALID, "display name must be valid UTF-8")
	}
	if Blank(name) {
		return handle, nil
	}
	if err := checkText("display name", name, DisplayNameMaxLen, false); err != nil {
		return "", err
	}
	return name, nil
}

// checkText checks profile text shown beside a user's name: at most max
// characters, no control characters (but line breaks where breaks allows
// them) and no bidirectional formatting characters, for the reason
// NormalizeDisplayName gives.
func checkText(what, s string, max int, breaks bool) error {
	if utf8.RuneCountInString(s) > max {
		return Errorf(EINVALID, "%s must be at most %d characters", what, max)
	}
	for _, r := range s {
		switch {
		case breaks && (r == '\n' || r == '\r'):
		case unicode.IsControl(r):
			return Errorf(EINVALID, "%s must not contain control characters (found U+%04X)", what, r)
		case unicode.Is(unicode.Bidi_Control, r):
			return Errorf(EINVALID, "%s must not contain bidirectional formatting characters (found U+%04X)", what, r)
		}
	}
	return nil
}

// NormalizeBio checks a bio and returns it trimmed: valid UTF-8, at most
// BioMaxLen characters, line breaks allowed but no other control or
// bidirectional formatting characters. A blank bio is "" (cleared).
func NormalizeBio(bio string) (string, error) {
	if !utf8.ValidString(bio) {
		return "", Errorf(EINVALID, "bio must be valid UTF-8")
	}
	if Blank(bio) {
		return "", nil
	}
	bio = strings.TrimSpace(bio)
	if err := checkText("bio", bio, BioMaxLen, true); err != nil {
		return "", err
	}
	return bio, nil
}

// NormalizeProfileURL checks a website or avatar URL (what names the
// field in errors) and returns it trimmed; "" (cleared) for a blank one.
// Only an absolute http or https URL with a host is accepted, so a link on
// a profile never runs script (javascript:) or reads local files, and one
// with a user name or password is refused: it is how links disguise their
// real host (https://bank.example@evil.example).
func NormalizeProfileURL(what, raw string) (string, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", nil
	}
	if !utf8.ValidString(raw) || len(raw) > URLMaxLen {
		return "", Errorf(EINVALID, "%s must be valid text of at most %d bytes", what, URLMaxLen)
	}
	for _, r := range raw {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return "", Errorf(EINVALID, "%s must not contain spaces, control or bidirectional formatting characters (found U+%04X)", what, r)
		}
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() {
		return "", Errorf(EINVALID, "%s must be an absolute http or https URL", what)
	}
	if s := strings.ToLower(u.Scheme); s != "http" && s != "https" {
		return "", Errorf(EINVALID, "%s must be an http or https URL", what)
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return "", Errorf(EINVALID, "%s must name a host", what)
	}
	if u.User != nil {
		return "", Errorf(EINVALID, "%s must not contain a user name or password", what)
	}
	return raw, nil
}

// ValidateMessageText checks a message's text: valid UTF-8, not blank (see
// Blank), no control characters but tab and line breaks, at most
// MessageMaxLen characters.
func ValidateMessageText(text string) error {
	if !utf8.ValidString(text) {
		return Errorf(EINVALID, "message text must be valid UTF-8")
	}
	if Blank(text) {
		return Errorf(EINVALID, "message text must not be empty")
	}
	if utf8.RuneCountInString(text) > MessageMaxLen {
		return Errorf(EINVALID, "message text must be at most %d characters", MessageMaxLen)
	}
	for _, r := range text {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return Errorf(EINVALID, "message text must not contain control characters (found U+%04X)", r)
		}
	}
	return nil
}

// Blank reports whether s shows nothing: every character is white space,
// a control or format character (zero-width spaces and joiners, the byte
// order mark, bidirectional marks), a default-ignorable code point (Hangul
// fillers), a variation selector, or the blank braille pattern. Text made
// only of those passes a plain TrimSpace yet reads as empty.
func Blank(s string) bool {
	for _, r := range s {
		if !invisible(r) {
			return false
		}
	}
	return true
}

func invisible(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) ||
		unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
		unicode.Is(unicode.Variation_Selector, r) || r == '\u2800' || r == '\u034F'
}

// PageSize resolves a client's page size argument, named arg (`first` or
// `last`): nil means DefaultPageSize, and values outside 0..MaxPageSize are
// BAD_USER_INPUT.
func PageSize(arg string, n *int) (int, error) {
	if n == nil {
		return DefaultPageSize, nil
	}
	if *n < 0 || *n > MaxPageSize {
		return 0, Errorf(EINVALID, "%s must be between 0 and %d", arg, MaxPageSize)
	}
	return *n, nil
}

func ValidateAttribute(name string, value *string) error {
	if !utf8.ValidString(name) || name == "" || utf8.RuneCountInString(name) > AttrNameMaxLen {
		return Errorf(EINVALID, "attribute names must be 1 to %d characters of valid text", AttrNameMaxLen)
	}
	if value != nil && (!utf8.ValidString(*value) || len(*value) > AttrValueMaxLen) {
		return Errorf(EINVALID, "attribute %q: values must be valid text of at most %d bytes", name, AttrValueMaxLen)
	}
	return nil
}

func ValidateAttributeChanges(changes []AttributeChange) error {
	if len(changes) > MaxAttributes {
		return Errorf(EINVALID, "at most %d attributes per call", MaxAttributes)
	}
	seen := make(map[string]bool, len(changes))
	for _, c := range changes {
		if err := ValidateAttribute(c.Name, c.Value); err != nil {
			return err
		}
		if seen[c.Name] {
			return Errorf(EINVALID, "attribute %q is given twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}

// ParseMentions returns the handles @mentioned in text, lowercased, each
// once, in the order first mentioned. A mention is "@" and a handle (3 to
// 30 of A-Z, a-z, 0-9 and _) that is neither preceded nor followed by a
// handle character, so an e-mail address or a longer word mentions no one.
func ParseMentions(text string) []string {
	var out []string
	for i := 0; i < len(text); i++ {
		if text[i] != '@' || i > 0 && handleByte(text[i-1]) {
			continue
		}
		j := i + 1
		for j < len(text) && handleByte(text[j]) {
			j++
		}
		if n := j - i - 1; n >= HandleMinLen && n <= HandleMaxLen {
			h := strings.ToLower(text[i+1 : j])
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
		i = j - 1
	}
	return out
}

func handleByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// NormalizeConversationName checks a group's name and returns it trimmed:
// valid UTF-8, not blank, at most ConversationNameMaxLen characters, no
// line breaks, control or bidirectional formatting characters.
func NormalizeConversationName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", Errorf(EINVALID, "group name must be valid UTF-8")
	}
	name = strings.TrimSpace(name)
	if Blank(name) {
		return "", Errorf(EINVALID, "group name must not be empty")
	}
	if err := checkText("group name", name, ConversationNameMaxLen, false); err != nil {
		return "", err
	}
	return name, nil
}
