package store

import "time"

// Session is a signed-in session: the claims of a verified bearer token.
type Session struct {
	UserID ID
	// TokenID names the token (its jti), so that it alone can be ended.
	TokenID string
	// Version is the user's TokenVersion when the token was issued.
	Version   int
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// RevokedToken is a token ended before its expiry (logOut). It is kept on
// its user until it expires, when it would be refused anyway.
type RevokedToken struct {
	ID      string
	Expires time.Time
}

// TokenRevocation is what RevokeTokens changes: one token (TokenID, kept
// until Expires), or every token of the user (All: the token version goes
// up and the revoked list empties). Entries expired at Now are dropped.
type TokenRevocation struct {
	TokenID string
	Expires time.Time
	All     bool
	Now     time.Time
}

// MaxRevokedTokens bounds a user's list of revoked tokens. A logOut that
// would pass it ends every token instead (as logOutEverywhere): a user who
// logs out that many times within a token's lifetime loses nothing but
// their other sessions, and the user document stays small.
const MaxRevokedTokens = 100

// Apply returns the token version and revoked list of u after r, under the
// rule RevokeTokens documents. Backends that read, change and write the
// user call it, so that both apply one rule.
func (r TokenRevocation) Apply(version int, revoked []RevokedToken) (int, []RevokedToken) {
	if r.All {
		return version + 1, nil
	}
	kept := make([]RevokedToken, 0, len(revoked)+1)
	for _, t := range revoked {
		if t.Expires.After(r.Now) && t.ID != r.TokenID {
			kept = append(kept, t)
		}
	}
	if !r.Expires.After(r.Now) {
		// Already expired: nothing to remember.
		return version, kept
	}
	if len(kept) >= MaxRevokedTokens {
		return version + 1, nil
	}
	return version, append(kept, RevokedToken{ID: r.TokenID, Expires: r.Expires})
}

// SessionsTopic is the Events topic of EventSessionsRevoked: not an inbox
// but a channel every process listens on. No stored object has this ID.
var SessionsTopic = ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
