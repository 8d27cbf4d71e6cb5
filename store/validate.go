package store

import (
	"strings"
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
	MessageMaxLen     = 5000 // characters
	MaxPageSize       = 100
	DefaultPageSize   = 20
	AttrNameMaxLen    = 64   // characters
	AttrValueMaxLen   = 1024 // bytes
	MaxAttributes     = 100  // per user, and per change
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
	if err := validatePassword(p); err != nil {
		return nil, err
	}
	if cost == 0 {
		cost = bcrypt.DefaultCost
	}
	return bcrypt.GenerateFromPassword([]byte(p), cost)
}

func validatePassword(p string) error {
	if len(p) < PasswordMinLen || len(p) > PasswordMaxLen {
		return Errorf(EINVALID, "password must be %d to %d bytes", PasswordMinLen, PasswordMaxLen)
	}
	return nil
}

func normalizeDisplayName(name, handle string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return handle, nil
	}
	if !utf8.ValidString(name) || utf8.RuneCountInString(name) > DisplayNameMaxLen {
		return "", Errorf(EINVALID, "display name must be valid text of at most %d characters", DisplayNameMaxLen)
	}
	return name, nil
}

// ValidateMessageText checks a message's text: valid UTF-8, not blank, at
// most MessageMaxLen characters.
func ValidateMessageText(text string) error {
	if !utf8.ValidString(text) {
		return Errorf(EINVALID, "message text must be valid UTF-8")
	}
	if strings.TrimSpace(text) == "" {
		return Errorf(EINVALID, "message text must not be empty")
	}
	if utf8.RuneCountInString(text) > MessageMaxLen {
		return Errorf(EINVALID, "message text must be at most %d characters", MessageMaxLen)
	}
	return nil
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

func validateAttribute(name string, value *string) error {
	if !utf8.ValidString(name) || name == "" || utf8.RuneCountInString(name) > AttrNameMaxLen {
		return Errorf(EINVALID, "attribute names must be 1 to %d characters of valid text", AttrNameMaxLen)
	}
	if value != nil && (!utf8.ValidString(*value) || len(*value) > AttrValueMaxLen) {
		return Errorf(EINVALID, "attribute %q: values must be valid text of at most %d bytes", name, AttrValueMaxLen)
	}
	return nil
}

func validateAttributeChanges(changes []AttributeChange) error {
	if len(changes) > MaxAttributes {
		return Errorf(EINVALID, "at most %d attributes per call", MaxAttributes)
	}
	seen := make(map[string]bool, len(changes))
	for _, c := range changes {
		if err := validateAttribute(c.Name, c.Value); err != nil {
			return err
		}
		if seen[c.Name] {
			return Errorf(EINVALID, "attribute %q is given twice", c.Name)
		}
		seen[c.Name] = true
	}
	return nil
}
