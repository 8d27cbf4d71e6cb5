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
// up and the revoked list empties) but the one named Keep, if any (a
// password change ends every other session). Entries expired at Now are
// dropped. PasswordHash, if set, becomes the user's password hash in the
// same atomic step, so that a new password and the end of the sessions
// the old one opened are one write.
type TokenRevocation struct {
	TokenID      string
	Expires      time.Time
	All          bool
	Keep         string
	Now          time.Time
	PasswordHash []byte
}

// MaxRevokedTokens bounds a user's list of revoked tokens. A logOut that
// would pass it ends every token instead (as logOutEverywhere): a user who
// logs out that many times within a token's lifetime loses nothing but
// their other sessions, and the user document stays small.
const MaxRevokedTokens = 100

// Apply returns the token version, revoked list and kept token of a user
// after r, under the rule RevokeTokens documents. Backends that read,
// change and write the user call it, so that both apply one rule. The
// kept token (User.KeptToken) survives a change of version: it is valid
// whatever version it was issued under, until a revocation of all that
// keeps another (or none), or its own logOut.
func (r TokenRevocation) Apply(version int, revoked []RevokedToken, kept string) (int, []RevokedToken, string) {
	if r.All {
		return version + 1, nil, r.Keep
	}
	out := make([]RevokedToken, 0, len(revoked)+1)
	for _, t := range revoked {
		if t.Expires.After(r.Now) && t.ID != r.TokenID {
			out = append(out, t)
		}
	}
	if !r.Expires.After(r.Now) {
		// Already expired: nothing to remember.
		return version, out, kept
	}
	if len(out) >= MaxRevokedTokens {
		return version + 1, nil, ""
	}
	return version, append(out, RevokedToken{ID: r.TokenID, Expires: r.Expires}), kept
}

// SessionsTopic is the Events topic of EventSessionsRevoked: not an inbox
// but a channel every process listens on. No stored object has this ID.
var SessionsTopic = ID{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
