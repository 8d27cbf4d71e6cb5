package httpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"herald/server/internal/servertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// corsDo sends a request to /graphql with the given headers and returns
// the response, its body read.
func corsDo(t *testing.T, base, method string, header map[string]string, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+"/graphql", strings.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

// preflight sends the OPTIONS request a browser sends before a
// cross-origin POST with a JSON body and a bearer token.
func preflight(t *testing.T, base, origin, method, headers string) *http.Response {
	t.Helper()
	resp, _ := corsDo(t, base, http.MethodOptions, map[string]string{
		"Origin":                         origin,
		"Access-Control-Request-Method":  method,
		"Access-Control-Request-Headers": headers,
	}, "")
	return resp
}

// corsHeaders lists the CORS response headers a response carries.
func corsHeaders(resp *http.Response) []string {
	var got []string
	for k := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			got = append(got, k)
		}
	}
	return got
}

const appOrigin = "https://app.example"

// A preflight from an allowed origin is answered 204 with the origin, the
// method and the headers asked for (bearer token, JSON, Apollo Client's),
// a max age and Vary; gqlgen is not reached. Credentials are never
// allowed: Herald uses bearer tokens, not cookies.
func TestCORS_PreflightAllowed(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.AllowedOrigins = []string{appOrigin} })
	for _, headers := range []string{
		"authorization,content-type",
		"accept,authorization,content-type",
		"apollo-require-preflight,apollographql-client-name,apollographql-client-version,content-type,x-apollo-operation-name",
		"",
	} {
		for _, method := range []string{http.MethodPost, http.MethodGet} {
			resp := preflight(t, srv.URL, appOrigin, method, headers)
			assert.Equal(t, http.StatusNoContent, resp.StatusCode)
			assert.Equal(t, appOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
			assert.Equal(t, method, resp.Header.Get("Access-Control-Allow-Methods"))
			assert.Equal(t, headers, resp.Header.Get("Access-Control-Allow-Headers"))
			assert.Equal(t, "7200", resp.Header.Get("Access-Control-Max-Age"))
			assert.Contains(t, resp.Header.Get("Vary"), "Origin")
			assert.Empty(t, resp.Header.Get("Access-Control-Allow-Credentials"))
			assert.Empty(t, resp.Header.Get("Allow"), "answered before gqlgen's OPTIONS transport")
		}
	}
}

// A preflight from an origin not allowed, or asking for a method or a
// header Herald does not allow, gets no CORS headers, so the browser
// sends nothing more.
func TestCORS_PreflightRefused(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.AllowedOrigins = []string{appOrigin} })
	for _, tt := range []struct{ name, origin, method, headers string }{
		{"OtherOrigin", "https://evil.example", http.MethodPost, "content-type"},
		{"OtherScheme", "http://app.example", http.MethodPost, "content-type"},
		{"OtherPort", "https://app.example:8443", http.MethodPost, "content-type"},
		{"Method", appOrigin, http.MethodPut, "content-type"},
		{"Header", appOrigin, http.MethodPost, "content-type,x-custom"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp := preflight(t, srv.URL, tt.origin, tt.method, tt.headers)
			assert.Empty(t, corsHeaders(resp))
			assert.Contains(t, resp.Header.Get("Vary"), "Origin")
		})
	}
}

// A cross-origin request from an allowed origin gets the origin back, with
// Retry-After exposed to the page; every answer does, the authentication
// middleware's 401 too. One from another origin is answered without CORS
// headers (the browser keeps it from the page), and a request without
// Origin (not a browser) gets none either.
func TestCORS_ActualRequest(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.AllowedOrigins = []string{appOrigin} })
	post := func(origin, token string) (*http.Response, string) {
		h := map[string]string{"Content-Type": "application/json", "Accept": "application/graphql-response+json"}
		if origin != "" {
			h["Origin"] = origin
		}
		if token != "" {
			h["Authorization"] = "Bearer " + token
		}
		return corsDo(t, srv.URL, http.MethodPost, h, `{"query":"{ __typename }"}`)
	}

	resp, body := post(appOrigin, "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"data":{"__typename":"Query"}}`, body)
	assert.Equal(t, appOrigin, resp.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "Retry-After", resp.Header.Get("Access-Control-Expose-Headers"))
	assert.Contains(t, resp.Header.Values("Vary"), "Origin")

	resp, _ = post(appOrigin, "forged")
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Equal(t, appOrigin, resp.Header.Get("Access-Control-Allow-Origin"), "the page can read why it was refused")

	resp, _ = corsDo(t, srv.URL, http.MethodGet, map[string]string{"Origin": appOrigin}, "")
	assert.Equal(t, appOrigin, resp.Header.Get("Access-Control-Allow-Origin"), "GET too")

	resp, body = post("https://evil.example", "")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, "__typename")
	assert.Empty(t, corsHeaders(resp))
	assert.Contains(t, resp.Header.Values("Vary"), "Origin", "a cache must not serve this answer to the allowed origin")

	resp, _ = post("", "")
	assert.Empty(t, corsHeaders(resp))
}

// The allowed origins are the websocket's: by default only the server's own
// origin, with the list the listed ones too, and with "*" any. A
// preflight and a websocket handshake from the same origin agree.
func TestCORS_SameListAsWebsocket(t *testing.T) {
	for _, tt := range []struct {
		name    string
		list    []string
		allowed map[string]bool // origin → allowed; "self" is the server's own
	}{
		{"Default", nil, map[string]bool{"self": true, appOrigin: false, "https://evil.example": false}},
		{"List", []string{appOrigin}, map[string]bool{"self": true, appOrigin: true, "https://evil.example": false}},
		{"Any", []string{"*"}, map[string]bool{"self": true, appOrigin: true, "https://evil.example": true, "http://localhost:3000": true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := servertest.New(t, func(c *servertest.Config) { c.AllowedOrigins = tt.list })
			for origin, want := range tt.allowed {
				if origin == "self" {
					origin = srv.URL
				}
				resp := preflight(t, srv.URL, origin, http.MethodPost, "authorization,content-type")
				if want {
					assert.Equal(t, origin, resp.Header.Get("Access-Control-Allow-Origin"), origin)
				} else {
					assert.Empty(t, corsHeaders(resp), origin)
				}
				_, wsResp, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", http.Header{"Origin": {origin}})
				require.NotNil(t, wsResp, origin)
				if want {
					assert.NoError(t, err, origin)
				} else {
					assert.Equal(t, http.StatusForbidden, wsResp.StatusCode, origin)
				}
			}
		})
	}
}

// An OPTIONS request that is not a preflight still reaches gqlgen's OPTIONS
// transport, which lists the methods of /graphql.
func TestCORS_OptionsWithoutPreflight(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.AllowedOrigins = []string{appOrigin} })
	for _, h := range []map[string]string{nil, {"Origin": appOrigin}} {
		resp, _ := corsDo(t, srv.URL, http.MethodOptions, h, "")
		assert.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Equal(t, "GET, POST, OPTIONS", resp.Header.Get("Allow"))
	}
}

func TestWebsocket_Origin(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.AllowedOrigins = []string{"https://app.example.com"} })

	tests := []struct {
		name   string
		origin string
		want   int // 101 accepted, else the refusal status
	}{
		{"OKNoOrigin", "", http.StatusSwitchingProtocols},
		{"OKSameOrigin", srv.URL, http.StatusSwitchingProtocols},
		{"OKAllowed", "https://app.example.com", http.StatusSwitchingProtocols},
		{"OKAllowedCase", "HTTPS://App.Example.com", http.StatusSwitchingProtocols},
		{"ErrForeign", "https://evil.example.com", http.StatusForbidden},
		{"ErrSchemeDiffers", "http://app.example.com", http.StatusForbidden},
		{"ErrMalformed", "::not a url", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.origin != "" {
				h.Set("Origin", tt.origin)
			}
			c, resp, err := servertest.DialWS(t, srv.URL, "graphql-transport-ws", h)
			require.NotNil(t, resp)
			assert.Equal(t, tt.want, resp.StatusCode)
			if tt.want == http.StatusSwitchingProtocols {
				require.NoError(t, err)
				c.CloseNormally()
			} else {
				require.Error(t, err)
			}
		})
	}
}
