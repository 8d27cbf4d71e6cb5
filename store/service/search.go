package service

import (
	"context"
	"slices"
	"strings"
	"unicode/utf8"

	"herald/store"
)

// SearchPage is a page of searchUsers: the users in rank order, their
// positions (for cursors), how many users matched among the candidates
// read, and whether more follow the page.
type SearchPage struct {
	Users     []*store.User
	Positions []store.SearchPosition
	Total     int
	HasMore   bool
}

// SearchUsers finds users by a prefix of their handle or of a word of their
// display name, case- and accent-insensitively; a query of several words
// matches users with a term starting with each. Results are ranked by
// store.SearchPosition; a page holds first users after the position after
// (nil: from the top). It reads store.SearchCandidates users at most from
// the index range of the query's longest word, one backend call, however
// many users there are. A blank or too long query, or first outside
// 0..SearchMaxPageSize, is BAD_USER_INPUT.
func (s *Service) SearchUsers(ctx context.Context, query string, first int, after *store.SearchPosition) (*SearchPage, error) {
	if !utf8.ValidString(query) || utf8.RuneCountInString(query) > store.SearchQueryMaxLen {
		return nil, store.Errorf(store.EINVALID, "query must be valid text of at most %d characters", store.SearchQueryMaxLen)
	}
	folded := strings.TrimSpace(store.FoldSearch(query))
	words := store.SearchWords(folded)
	if len(words) == 0 {
		return nil, store.Errorf(store.EINVALID, "query must contain a letter or digit")
	}
	if first < 0 || first > store.SearchMaxPageSize {
		return nil, store.Errorf(store.EINVALID, "first must be between 0 and %d", store.SearchMaxPageSize)
	}
	longest := slices.MaxFunc(words, func(a, b string) int { return len(a) - len(b) })
	found, err := s.backend.SearchUsers(ctx, longest, store.SearchCandidates)
	if err != nil {
		return nil, err
	}
	type ranked struct {
		u   *store.User
		pos store.SearchPosition
	}
	var all []ranked
	for _, u := range found {
		if !matchesAll(store.SearchTerms(u.Handle, u.DisplayName), words) {
			continue
		}
		all = append(all, ranked{u, store.SearchPosition{Exact: u.Handle == folded, Followers: u.FollowerCount, ID: u.ID}})
	}
	slices.SortFunc(all, func(a, b ranked) int {
		switch {
		case a.pos.Before(b.pos):
			return -1
		case b.pos.Before(a.pos):
			return 1
		}
		return 0
	})
	page := &SearchPage{Total: len(all)}
	start := 0
	if after != nil {
		for start < len(all) && !after.Before(all[start].pos) {
			start++
		}
	}
	for _, r := range all[start:] {
		if len(page.Users) == first {
			page.HasMore = true
			break
		}
		page.Users = append(page.Users, r.u)
		page.Positions = append(page.Positions, r.pos)
	}
	return page, nil
}

// matchesAll reports whether every word starts some term.
func matchesAll(terms, words []string) bool {
	for _, w := range words {
		if !slices.ContainsFunc(terms, func(t string) bool { return strings.HasPrefix(t, w) }) {
			return false
		}
	}
	return true
}
