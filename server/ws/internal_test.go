package ws

import (
	"net/http"
	"net/netip"
	"testing"
	"time"

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
