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

// readOn reads a page within r with read and keeps what keep keeps of each
// read, reading on past the rest so that the page stays full: for pages
// whose stored items may stand for something since gone. id gives an
// item's position, where the next read starts.
func readOn[T, K any](r store.Range, read func(store.Range) ([]T, error), keep func([]T) ([]K, error), id func(T) store.ID) ([]K, error) {
	var out []K
	for {
		items, err := read(r)
		if err != nil || len(items) == 0 {
			return out, err
		}
		// Taken before keep, which may clear what it drops.
		next, n := id(items[len(items)-1]), len(items)
		kept, err := keep(items)
		if err != nil {
			return nil, err
		}
		out = append(out, kept...)
		if n < r.Limit || len(kept) == n {
			return out, nil
		}
		r.From, r.Limit = next, r.Limit-len(kept)
	}
}
