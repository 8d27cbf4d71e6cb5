package service

import (
	"slices"

	"herald/store"
)

// plusOne returns r reading one more item, which tells whether more follow.
func plusOne(r store.Range) store.Range {
	r.Limit++
	return r
}

// trimPage cuts items, read by plusOne(r) nearest first, to r.Limit, and
// puts them in their list's order. It reports whether items were cut.
func trimPage[T any](items []T, r store.Range) ([]T, bool) {
	more := len(items) > r.Limit
	if more {
		items = items[:r.Limit]
	}
	if r.Reverse {
		slices.Reverse(items)
	}
	return items, more
}
