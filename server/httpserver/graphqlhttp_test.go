package httpserver_test

// GraphQL over HTTP (graphql/graphql-over-http, spec/GraphQLOverHTTP.md)
// through the whole middleware stack of /graphql; graph/httpspec_test.go
// covers each rule of the transport itself.

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"herald/server/internal/servertest"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type specResponse struct {
	Status      int
	ContentType string
	Allow       string
	Body        map[string]json.RawMessage
}

func specDo(t *testing.T, method, u, contentType, accept, token, body string) specResponse {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := specResponse{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Allow: resp.Header.Get("Allow")}
	require.NoError(t, json.Unmarshal(b, &r.Body), "body %q", b)
	return r
}

// The spec's status code rules hold behind authentication, the body limit
// and the origin policy: §application/graphql-response+json (200 once
// executed, 400 and no data for a validation failure), §application/json
// (200 for a validation failure), §Body (406), §POST (415), §GET (405 for a
// mutation), §Request (405 for other methods).
func TestGraphQLHTTP_Stack(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	u := srv.URL + "/graphql"
	const gqlType = "application/graphql-response+json"

	r := specDo(t, http.MethodPost, u, "application/json", gqlType, alice.Token, `{"query":"{ viewer { handle } }"}`)
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, gqlType+"; charset=utf-8", r.ContentType)
	assert.JSONEq(t, `{"viewer":{"handle":"alice"}}`, string(r.Body["data"]))

	r = specDo(t, http.MethodPost, u, "application/json", gqlType, alice.Token, `{"query":"{ viewer { nope } }"}`)
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.NotContains(t, r.Body, "data")
	assert.Contains(t, string(r.Body["errors"]), "GRAPHQL_VALIDATION_FAILED")

	r = specDo(t, http.MethodPost, u, "application/json", "", alice.Token, `{"query":"{ viewer { nope } }"}`)
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "application/json; charset=utf-8", r.ContentType)
	assert.NotContains(t, r.Body, "data")

	r = specDo(t, http.MethodPost, u, "application/json", "text/html", alice.Token, `{"query":"{ viewer { handle } }"}`)
	assert.Equal(t, http.StatusNotAcceptable, r.Status)

	r = specDo(t, http.MethodPost, u, "text/plain", gqlType, alice.Token, `{"query":"{ viewer { handle } }"}`)
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status)

	q := url.Values{"query": {`mutation { markInboxRead }`}}.Encode()
	r = specDo(t, http.MethodGet, u+"?"+q, "", gqlType, alice.Token, "")
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
	assert.Equal(t, "POST", r.Allow)

	r = specDo(t, http.MethodDelete, u, "", gqlType, alice.Token, "")
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
	assert.Equal(t, "GET, POST, OPTIONS", r.Allow)
}

// The authentication middleware's request errors choose their media type
// by the same Accept rules (spec §Body: the highest priority supported type,
// with q-values), so a 401 reaches a client that prefers
// application/graphql-response+json.
func TestGraphQLHTTP_AuthErrorNegotiation(t *testing.T) {
	srv := servertest.New(t, nil)
	for _, tt := range []struct {
		accept     string
		wantStatus int
		wantType   string
	}{
		{"application/json;q=0.5, application/graphql-response+json", http.StatusUnauthorized, "application/graphql-response+json"},
		{"application/graphql-response+json;q=0.5, application/json", http.StatusOK, "application/json"},
		{"", http.StatusOK, "application/json"},
	} {
		r := specDo(t, http.MethodPost, srv.URL+"/graphql", "application/json", tt.accept, "forged", `{"query":"{ viewer { id } }"}`)
		assert.Equal(t, tt.wantStatus, r.Status, tt.accept)
		assert.Equal(t, tt.wantType+"; charset=utf-8", r.ContentType, tt.accept)
		assert.Contains(t, string(r.Body["errors"]), "UNAUTHENTICATED")
		assert.NotContains(t, r.Body, "data")
	}
}

// The websocket upgrade still shares /graphql with the HTTP transport
// (spec §URL: the URL "MAY also be used for other purposes").
func TestGraphQLHTTP_WebsocketSameURL(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")
	d := websocket.Dialer{Subprotocols: []string{"graphql-transport-ws"}, HandshakeTimeout: 5 * time.Second}
	c, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/graphql", nil)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.NoError(t, c.WriteJSON(map[string]any{"type": "connection_init", "payload": map[string]any{"authorization": "Bearer " + alice.Token}}))
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	var msg struct{ Type string }
	require.NoError(t, c.ReadJSON(&msg))
	assert.Equal(t, "connection_ack", msg.Type)
}
