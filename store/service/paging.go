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

// readPage reads the page r selects with read, one item more to tell
// whether more follow, and returns it in its list's order.
func readPage[T any](r store.Range, read func(store.Range) ([]T, error)) ([]T, bool, error) {
	items, err := read(plusOne(r))
	if err != nil {
		return nil, false, err
	}
	items, more := trimPage(items, r)
	return items, more, nil
}
