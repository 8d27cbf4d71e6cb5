package store

import "time"

// RelationKind is what one user's relation to another does: a block or a
// mute. A user may both block and mute another; each is its own relation.
// Kinds are bits, so that a set of them (what FindBlockers reports for an
// owner) is one RelationKind too.
type RelationKind uint8

// Relation kinds.
const (
	// RelationBlock: the blocked user's items leave the blocker's home
	// timeline and notifications, neither may follow the other, and the
	// blocker's messages are hidden from the blocked user.
	RelationBlock RelationKind = 1 << iota
	// RelationMute: the muted user's items leave the muter's home timeline
	// and notifications, and nothing else changes.
	RelationMute
)

// Valid reports whether k is exactly one kind.
func (k RelationKind) Valid() bool { return k == RelationBlock || k == RelationMute }

// Relation is a user's block or mute of another user. Its ID is made at
// CreatedAt, and orders a user's list of them newest first.
type Relation struct {
	ID        ID
	UserID    ID
	TargetID  ID
	Kind      RelationKind
	CreatedAt time.Time
}

// CheckRelation is what Block refuses before reading anything: a
// relation to oneself, or a kind that is not exactly one kind.
func CheckRelation(user, target ID, kind RelationKind) error {
	switch {
	case user == target:
		return Errorf(EINVALID, "a user cannot block or mute themselves")
	case !kind.Valid():
		return Errorf(EINVALID, "unknown relation kind %d", kind)
	}
	return nil
}
