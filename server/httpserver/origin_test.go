package httpserver

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOriginPolicy(t *testing.T) {
	p, err := newOriginPolicy([]string{"https://a.example", " http://b.example:8080 "})
	require.NoError(t, err)
	tests := []struct {
		origin, host string
		want         bool
	}{
		{"", "herald.local", true},
		{"http://herald.local", "herald.local", true},
		{"https://HERALD.local:8443", "herald.local:8443", true},
		{"https://a.example", "herald.local", true},
		{"https://a.example/", "herald.local", true},
		{"http://b.example:8080", "herald.local", true},
		{"http://b.example", "herald.local", false},
		{"https://a.example.evil", "herald.local", false},
		{"null", "herald.local", false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodGet, "http://"+tt.host+"/graphql", nil)
		if tt.origin != "" {
			r.Header.Set("Origin", tt.origin)
		}
		assert.Equal(t, tt.want, p.allowed(r), "origin %q host %q", tt.origin, tt.host)
	}

	all, err := newOriginPolicy([]string{"*"})
	require.NoError(t, err)
	r, _ := http.NewRequest(http.MethodGet, "http://herald.local/graphql", nil)
	r.Header.Set("Origin", "https://anything.example")
	assert.True(t, all.allowed(r))

	_, err = newOriginPolicy([]string{"https://a.example/path"})
	assert.Error(t, err)
}
