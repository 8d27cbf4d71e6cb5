package store

import (
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Search limits.
const (
	// SearchQueryMaxLen bounds a searchUsers query, in characters: longer
	// than any handle or display name, so nothing findable is cut off.
	SearchQueryMaxLen = DisplayNameMaxLen
	// SearchMaxPageSize bounds searchUsers' `first`: a typeahead shows a
	// handful.
	SearchMaxPageSize = 50
	// SearchCandidates is how many index entries a search reads from its
	// prefix's range before ranking them: the ranking by followers is exact
	// among these, and a prefix shared by more users ranks the first
	// SearchCandidates in term order only.
	SearchCandidates = 200
)

// FoldSearch returns s as search compares it: lowercase, with accents and
// other combining marks removed (é and e, Å and a match), in NFC.
func FoldSearch(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return norm.NFC.String(b.String())
}

// SearchWords splits folded text into the words a search matches by
// prefix: runs of letters, digits and underscores.
func SearchWords(folded string) []string {
	return strings.FieldsFunc(folded, func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_'
	})
}

// SearchTerms returns the terms a user is found by, each once: the handle
// and each word of the folded display name. Backends index them.
func SearchTerms(handle, displayName string) []string {
	terms := []string{handle}
	for _, w := range SearchWords(FoldSearch(displayName)) {
		if !slices.Contains(terms, w) {
			terms = append(terms, w)
		}
	}
	return terms
}

// SearchPosition is a user's place in search results, which are ranked: an
// exact handle match first, then by follower count (most first), then by
// ID. A page continues after the position of its last user.
type SearchPosition struct {
	Exact     bool
	Followers int
	ID        ID
}

// Before reports whether p ranks before q.
func (p SearchPosition) Before(q SearchPosition) bool {
	if p.Exact != q.Exact {
		return p.Exact
	}
	if p.Followers != q.Followers {
		return p.Followers > q.Followers
	}
	return p.ID.Compare(q.ID) < 0
}
