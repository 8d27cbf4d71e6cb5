package auth_test

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/store"
)

var secret = []byte("test-secret-0123456789")

// sign makes a token with arbitrary claims and method, to forge the tokens a
// Signer would never issue.
func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	require.NoError(t, err)
	return tok
}

func TestSigner_Issue(t *testing.T) {
	s := auth.NewSigner(secret, time.Hour)
	id := store.NewID(time.Now())
	before := time.Now()
	tok, sess, err := s.Issue(&store.User{ID: id, TokenVersion: 3})
	require.NoError(t, err)
	assert.WithinDuration(t, before.Add(time.Hour), sess.ExpiresAt, 2*time.Second)
	assert.Equal(t, id, sess.UserID)
	assert.Equal(t, 3, sess.Version)
	assert.Len(t, sess.TokenID, 22)

	got, err := s.Verify(tok)
	require.NoError(t, err)
	assert.Equal(t, sess, got)

	// Every token has its own id, so that logOut ends one alone.
	_, other, err := s.Issue(&store.User{ID: id, TokenVersion: 3})
	require.NoError(t, err)
	assert.NotEqual(t, sess.TokenID, other.TokenID)
}

func TestSigner_Verify(t *testing.T) {
	s := auth.NewSigner(secret, time.Hour)
	id := store.NewID(time.Now())
	good, _, err := s.IssueFor(id, 0)
	require.NoError(t, err)
	otherSigner, _, err := auth.NewSigner([]byte("another-secret"), time.Hour).IssueFor(id, 0)
	require.NoError(t, err)

	now := time.Now()
	claims := func(mod func(*jwt.RegisteredClaims)) jwt.RegisteredClaims {
		c := jwt.RegisteredClaims{
			Issuer:    auth.Issuer,
			ID:        "token-1",
			Subject:   id.String(),
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Hour)),
		}
		if mod != nil {
			mod(&c)
		}
		return c
	}

	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"OK", good, true},
		{"OKHandMade", sign(t, jwt.SigningMethodHS256, secret, claims(nil)), true},
		{"Expired", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(-2 * time.Hour))
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Hour))
		})), false},
		{"NoExpiry", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.ExpiresAt = nil
		})), false},
		// A token from the future was not issued by a Herald with a sane
		// clock; a little skew between instances is allowed.
		{"IssuedInTheFuture", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(time.Hour))
			c.ExpiresAt = jwt.NewNumericDate(now.Add(2 * time.Hour))
		})), false},
		{"IssuedWithinSkew", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(auth.MaxClockSkew / 2))
		})), true},
		{"NoIssuedAt", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.IssuedAt = nil
		})), false},
		// Without an id a token could not be logged out alone.
		{"NoTokenID", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.ID = ""
		})), false},
		{"WrongSecret", otherSigner, false},
		{"AlgNone", sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil)), false},
		{"AlgHS512", sign(t, jwt.SigningMethodHS512, secret, claims(nil)), false},
		{"WrongIssuer", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.Issuer = "someone-else"
		})), false},
		{"BadSubject", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.Subject = "not-an-id"
		})), false},
		{"NilSubject", sign(t, jwt.SigningMethodHS256, secret, claims(func(c *jwt.RegisteredClaims) {
			c.Subject = store.NilID.String()
		})), false},
		{"Malformed", "not.a.token", false},
		{"Empty", "", false},
		{"Tampered", tamper(good), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Verify(tt.token)
			if tt.ok {
				require.NoError(t, err)
				assert.Equal(t, id, got.UserID)
				return
			}
			require.Error(t, err)
			assert.Equal(t, store.EUNAUTHENTICATED, store.ErrorCode(err))
			assert.Equal(t, "invalid or expired token", store.ErrorMessage(err))
			assert.Equal(t, store.Session{}, got)
		})
	}
}

func TestNewSigner_Panics(t *testing.T) {
	assert.Panics(t, func() { auth.NewSigner(nil, time.Hour) })
	assert.Panics(t, func() { auth.NewSigner(secret, 0) })
}

func TestFromHeader(t *testing.T) {
	tests := []struct {
		value string
		token string
		ok    bool
	}{
		{"Bearer abc.def.ghi", "abc.def.ghi", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"  Bearer   abc  ", "abc", true},
		{"Basic dXNlcjpwYXNz", "", false},
		{"Bearer", "", false},
		{"Bearer ", "", false},
		{"abc", "", false},
		{"", "", false},
		{"Bearer a b", "", false},
		{"Bearerabc", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			tok, ok := auth.FromHeader(tt.value)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.token, tok)
		})
	}
}

// tamper changes the first character of a token's signature, whose six bits
// all count (the last character's low bits may be unused, so changing it
// may leave the signature as it was).
func tamper(token string) string {
	i := strings.LastIndexByte(token, '.') + 1
	c := byte('A')
	if token[i] == c {
		c = 'B'
	}
	return token[:i] + string(c) + token[i+1:]
}
