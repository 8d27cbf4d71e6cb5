package store

// Range selects up to Limit items of a list ordered by ID, next to the
// cursor From, which is exclusive. A list is in its own order: newest first
// (highest ID first) for inboxes and outboxes, oldest first for the others.
// Without Reverse the items are those that follow From in that order (NilID:
// from the list's start); with Reverse, those that precede it (NilID: from
// the list's end), nearest to From first, so against the list's order. A
// client paging backward (last/before) reads a Reverse range.
type Range struct {
	From    ID
	Limit   int
	Reverse bool
}

// Forward returns the Range of up to limit items following from.
func Forward(from ID, limit int) Range { return Range{From: from, Limit: limit} }

// Backward returns the Range of up to limit items preceding from.
func Backward(from ID, limit int) Range { return Range{From: from, Limit: limit, Reverse: true} }

// Ascending reports whether the range reads IDs upward, given whether its
// list is newest first.
func (r Range) Ascending(newestFirst bool) bool { return r.Reverse == newestFirst }

// Admits reports whether id lies within the range's side of From (the limit
// aside), given whether its list is newest first.
func (r Range) Admits(id ID, newestFirst bool) bool {
	if r.From.IsZero() {
		return true
	}
	if r.Ascending(newestFirst) {
		return id.Compare(r.From) > 0
	}
	return id.Compare(r.From) < 0
}
