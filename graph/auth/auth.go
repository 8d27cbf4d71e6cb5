// Package auth issues and verifies Herald's bearer tokens: HS256 JSON Web
// Tokens whose subject is a user id. A token is the only credential a request
// carries, so verification rejects anything but a well-formed, unexpired
// HS256 token signed with the server's secret and issued by Herald.
package auth

import (
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"herald/store"
)

// Issuer is the "iss" claim of every token Herald issues and accepts.
const Issuer = "herald"

// errInvalid is what Verify reports for every failure, so a client learns
// nothing about why a token was refused.
func errInvalid() error { return store.Errorf(store.EUNAUTHENTICATED, "invalid or expired token") }

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

// Issue returns a token for user id and the time it expires. Expiry is
// truncated to the second because JWT times are whole seconds.
func (s *Signer) Issue(id store.ID) (token string, expires time.Time, err error) {
	now := s.now().UTC().Truncate(time.Second)
	expires = now.Add(s.ttl)
	claims := jwt.RegisteredClaims{
		Issuer:    Issuer,
		Subject:   id.String(),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(expires),
	}
	token, err = jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.secret)
	if err != nil {
		return "", time.Time{}, err
	}
	return token, expires, nil
}

// Verify checks token and returns the user id it was issued for. Any failure
// (malformed, wrong algorithm, wrong signature, wrong issuer, missing or past
// expiry, bad subject) is UNAUTHENTICATED with the message "invalid or
// expired token". Verify does not check that the user still exists.
func (s *Signer) Verify(token string) (store.ID, error) {
	var claims jwt.RegisteredClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) {
		return s.secret, nil
	},
		// Pinning the method rejects "none" and RS/HS confusion.
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(s.now),
	)
	if err != nil {
		return store.NilID, errInvalid()
	}
	id, err := store.ParseID(claims.Subject)
	if err != nil || id.IsZero() {
		return store.NilID, errInvalid()
	}
	return id, nil
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
