package httpserver

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestClientAddr covers the choice of the client address, one rule per case.
func TestClientAddr(t *testing.T) {
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 192.0.2.7, fd00::/8")
	require.NoError(t, err)
	for _, tt := range []struct {
		name, remote string
		xff          []string
		trusted      []netip.Prefix
		want         string // "" when no address
	}{
		{"Peer", "198.51.100.1:5000", nil, nil, "198.51.100.1"},
		{"PeerIPv6", "[2001:db8::1]:5000", nil, nil, "2001:db8::1"},
		{"PeerMapped", "[::ffff:198.51.100.1]:5000", nil, nil, "198.51.100.1"},
		{"NoPeer", "@", nil, nil, ""},
		{"HeaderIgnoredWithoutTrust", "198.51.100.1:5000", []string{"203.0.113.5"}, nil, "198.51.100.1"},
		{"HeaderIgnoredFromUntrustedPeer", "198.51.100.1:5000", []string{"203.0.113.5"}, trusted, "198.51.100.1"},
		{"FromTrustedPeer", "10.1.2.3:5000", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"SingleAddressTrusted", "192.0.2.7:5000", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"NeighbourNotTrusted", "192.0.2.8:5000", []string{"203.0.113.5"}, trusted, "192.0.2.8"},
		{"RightmostUntrusted", "10.1.2.3:5000", []string{"203.0.113.9, 203.0.113.5, 10.9.9.9"}, trusted, "203.0.113.5"},
		{"SeveralHeaders", "10.1.2.3:5000", []string{"203.0.113.9", "203.0.113.5", "10.9.9.9"}, trusted, "203.0.113.5"},
		{"WithPorts", "10.1.2.3:5000", []string{"[2001:db8::5]:443, 10.9.9.9:80"}, trusted, "2001:db8::5"},
		{"IPv6Proxy", "[fd00::1]:5000", []string{"203.0.113.5"}, trusted, "203.0.113.5"},
		{"AllTrusted", "10.1.2.3:5000", []string{"10.0.0.1, 10.0.0.2"}, trusted, "10.0.0.1"},
		{"GarbageStopsAtLastTrusted", "10.1.2.3:5000", []string{"203.0.113.5, unknown, 10.0.0.2"}, trusted, "10.0.0.2"},
		{"EmptyHeader", "10.1.2.3:5000", []string{""}, trusted, "10.1.2.3"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/graphql", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, ok := clientAddr(r, tt.trusted)
			if tt.want == "" {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, netip.MustParseAddr(tt.want), got)
		})
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies(" 10.0.0.0/8 ,192.0.2.7,, 2001:db8::/32, 10.1.2.3/16, ::ffff:192.0.2.9")
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("10.1.0.0/16"),
		netip.MustParsePrefix("192.0.2.9/32"),
	}, got)
	empty, err := ParseTrustedProxies("")
	require.NoError(t, err)
	assert.Empty(t, empty)
	for _, bad := range []string{"10.0.0.0/33", "proxy.example", "10.0.0", "::ffff:10.0.0.0/104"} {
		_, err := ParseTrustedProxies(bad)
		assert.Error(t, err, bad)
	}
}

// Behind a trusted proxy the access log names the client the rate limiter
// keys on, beside the proxy that sent the request.
func TestAccessLog_ClientBehindProxy(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	trusted, err := ParseTrustedProxies("10.0.0.0/8")
	require.NoError(t, err)
	h := accessLogMiddleware(log, trusted, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
	req.RemoteAddr = "10.1.2.3:4567"
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	h.ServeHTTP(httptest.NewRecorder(), req)
	var rec struct{ Remote, Client string }
	require.NoError(t, json.Unmarshal(logs.Bytes(), &rec), logs.String())
	assert.Equal(t, "10.1.2.3:4567", rec.Remote)
	assert.Equal(t, "203.0.113.9", rec.Client)
}
