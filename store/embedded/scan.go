package embedded

import (
	"bytes"

	"github.com/cockroachdb/pebble/v2"

	"herald/store"
)

// span is the part of a list, stored as the keys prefix+ID(+more), that a
// store.Range selects, and the way to read it.
type span struct {
	lower, upper []byte
	up           bool // read upward (ascending IDs)
}

// spanOf returns the span of r over the keys of prefix p, for a list that
// is newest first (highest ID first) or not.
func spanOf(p []byte, r store.Range, newestFirst bool) span {
	sp := span{lower: p, upper: prefixEnd(p), up: r.Ascending(newestFirst)}
	if !r.From.IsZero() {
		at := append(bytes.Clone(p), r.From[:]...)
		if sp.up {
			sp.lower = prefixEnd(at) // past From and any key under it
		} else {
			sp.upper = at
		}
	}
	return sp
}

func (sp span) iterOptions() *pebble.IterOptions {
	return &pebble.IterOptions{LowerBound: sp.lower, UpperBound: sp.upper}
}

// first positions it at the span's first key in reading order.
func (sp span) first(it *pebble.Iterator) bool {
	if sp.up {
		return it.First()
	}
	return it.Last()
}

// next moves it to the following key in reading order.
func (sp span) next(it *pebble.Iterator) bool { return step(it, sp.up) }

// step moves it to the next key upward, or the previous one.
func step(it *pebble.Iterator, up bool) bool {
	if up {
		return it.Next()
	}
	return it.Prev()
}

// idAfter returns the ID that follows prefix p in k.
func idAfter(p, k []byte) store.ID {
	var id store.ID
	copy(id[:], k[len(p):])
	return id
}
