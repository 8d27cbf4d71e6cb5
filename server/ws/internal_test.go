package ws

import (
	"context"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"herald/store"

	"github.com/stretchr/testify/assert"
)

func TestTruncateUTF8(t *testing.T) {
	assert.Equal(t, "abc", truncateUTF8("abc", 5))
	assert.Equal(t, "ab", truncateUTF8("abc", 2))
	assert.Equal(t, "a", truncateUTF8("aé", 2), "never splits a character")
	assert.Equal(t, "aé", truncateUTF8("aéb", 3))
}

// TestWS_AddressKey checks the per-address count's keys: an IPv6 client is
// counted by its /64, an IPv4 one (mapped or not) by its address.
func TestWS_AddressKey(t *testing.T) {
	a := NewAdapter(func(*http.Request) bool { return true }, time.Second)
	a.limits.PerAddress = 2
	admit := func(s string) string {
		reason, _ := a.admitLocked(&wsConn{}, netip.MustParseAddr(s), true)
		return reason
	}
	assert.Empty(t, admit("2001:db8:1:2::1"))
	assert.Empty(t, admit("2001:db8:1:2:ffff::9"))
	assert.NotEmpty(t, admit("2001:db8:1:2:abcd::1"), "the same /64")
	assert.Empty(t, admit("2001:db8:1:3::1"), "another /64")
	assert.Empty(t, admit("192.0.2.1"))
	assert.Empty(t, admit("::ffff:192.0.2.1"))
	assert.NotEmpty(t, admit("192.0.2.1"))
	assert.Empty(t, admit("192.0.2.2"))
}

// authFunc is an authenticator made of a function.
type authFunc func(context.Context, store.Session) error

func (f authFunc) Authenticate(ctx context.Context, s store.Session) error { return f(ctx, s) }

// TestCloseAll_WaitsForSessionChecks: a session check started by a
// revocation (or a sweep) reads the store, so CloseAll, after which the
// server closes the store, must not return while one runs. A check that
// outlived it read a closed store, and Pebble panics on that.
func TestCloseAll_WaitsForSessionChecks(t *testing.T) {
	a := NewAdapter(func(*http.Request) bool { return true }, time.Second)
	var storeClosed, lateRead atomic.Bool
	started, finished := make(chan struct{}), make(chan struct{})
	a.sessions = authFunc(func(context.Context, store.Session) error {
		close(started)
		time.Sleep(50 * time.Millisecond)
		lateRead.Store(storeClosed.Load())
		close(finished)
		return nil
	})
	user := store.NewID(time.Now())
	a.byUser = map[store.ID][]*wsConn{user: {{adapter: a, sess: store.Session{UserID: user}}}}
	a.sessionsRevoked(user)
	<-started
	a.CloseAll()
	storeClosed.Store(true)
	<-finished
	assert.False(t, lateRead.Load(), "a session check ran after CloseAll returned")
}
