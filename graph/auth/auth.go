// Package auth issues and verifies Herald's bearer tokens: HS256 JSON Web
// Tokens whose subject is a user id. A token is the only credential a request
// carries, so verification rejects anything but a well-formed, unexpired
// HS256 token signed with the server's secret and issued by Herald.
//
// A token also names itself (jti) and the user's token version at issue
// (tv), so that it can be ended before it expires: service.Service checks
// both against the stored user (logOut revokes one token id,
// logOutEverywhere bumps the version).
package auth

import (
	"crypto/rand"
	"encoding/base64"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"herald/store"
)

// Issuer is the "iss" claim of every token Herald issues and accepts.
const Issuer = "herald"

// MaxClockSkew is how far in the future a token's issue time may lie and
// still be accepted: instances sharing a secret may disagree on the time by
// a little, never by more. A token issued further ahead was not issued by a
// Herald with a sane clock.
const MaxClockSkew = 30 * time.Second

// maxTokenIDLen bounds the jti claim; Herald's own are 22 characters.
const maxTokenIDLen = 64

// errInvalid is what Verify reports for every failure, so a client learns
// nothing about why a token was refused.
func errInvalid() error { return store.Errorf(store.EUNAUTHENTICATED, "invalid or expired token") }

// claims are the JWT claims of a Herald token.
type claims struct {
	jwt.RegisteredClaims
	// Version is the user's token version when the token was issued
	// (store.User.TokenVersion).
	Version int `json:"tv,omitempty"`
}

// Signer issues and verifies tokens with one HMAC secret. It is safe for
// concurrent use.
type Signer struct {
	secret []byte
	ttl    time.Duration
	now    func() time.Time
}

// NewSigner returns a Signer whose tokens are signed with secret and expire
// ttl after they are issued. The caller picks the ttl (Herald's default is
// 24h). An empty secret or a ttl that is not positive is a programming error
// and panics, because either would make every token forgeable or useless.
func NewSigner(secret []byte, ttl time.Duration) *Signer {
	if len(secret) == 0 {
		panic("auth: empty signing secret")
	}
	if ttl <= 0 {
		panic("auth: token ttl must be positive")
	}
	return &Signer{secret: append([]byte(nil), secret...), ttl: ttl, now: time.Now}
}

// TTL returns the lifetime of the tokens s issues.
func (s *Signer) TTL() time.Duration { return s.ttl }

// Issue returns a token for user u, under u's current token version, and
// the session it opens. Times are truncated to the second because JWT
// times are whole seconds.
func (s *Signer) Issue(u *store.User) (string, store.Session, error) {
	return s.IssueFor(u.ID, u.TokenVersion)
}

// IssueFor returns a token for the user id under token version version:
// Issue for a caller that has only the id (herald bench mints tokens for
// seeded users, whose version is 0).
func (s *Signer) IssueFor(id store.ID, version int) (string, store.Session, error) {
	var raw [16]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	now := s.now().UTC().Truncate(time.Second)
	sess := store.Session{
		UserID:    id,
		TokenID:   base64.RawURLEncoding.EncodeToString(raw[:]),
		Version:   version,
		IssuedAt:  now,
		ExpiresAt: now.Add(s.ttl),
	}
	c := claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   id.String(),
			ID:        sess.TokenID,
			IssuedAt:  jwt.NewNumericDate(sess.IssuedAt),
			ExpiresAt: jwt.NewNumericDate(sess.ExpiresAt),
		},
		Version: version,
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.secret)
	if err != nil {
		return "", store.Session{}, err
	}
	return token, sess, nil
}

// Verify checks token and returns the session it carries. Any failure
// (malformed, wrong algorithm, wrong signature, wrong issuer, missing or
// past expiry, missing token id, an issue time more than MaxClockSkew
// ahead, bad subject) is UNAUTHENTICATED with the message "invalid or
// expired token". Verify checks the token alone: whether its user still
// exists and the token was not ended is service.Service.Authenticate's.
func (s *Signer) Verify(token string) (store.Session, error) {
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) {
		return s.secret, nil
	},
		// Pinning the method rejects "none" and RS/HS confusion.
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.now),
	)
	if err != nil || c.IssuedAt == nil || c.ID == "" || len(c.ID) > maxTokenIDLen || c.Version < 0 {
		return store.Session{}, errInvalid()
	}
	if c.IssuedAt.After(s.now().Add(MaxClockSkew)) {
		return store.Session{}, errInvalid()
	}
	id, err := store.ParseID(c.Subject)
	if err != nil || id.IsZero() {
		return store.Session{}, errInvalid()
	}
	return store.Session{
		UserID:    id,
		TokenID:   c.ID,
		Version:   c.Version,
		IssuedAt:  c.IssuedAt.UTC(),
		ExpiresAt: c.ExpiresAt.UTC(),
	}, nil
}

// FromHeader extracts the token from an Authorization header value of the
// form "Bearer <token>". The scheme is case-insensitive (RFC 9110); it
// reports false for any other scheme or an empty token.
func FromHeader(value string) (token string, ok bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(value), " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}
