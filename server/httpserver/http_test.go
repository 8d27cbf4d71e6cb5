package httpserver_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"herald/graph/auth"
	"herald/server/internal/servertest"
	"herald/store"
)

func TestHTTP_Auth(t *testing.T) {
	srv := servertest.New(t, nil)
	alice := servertest.MustSignUp(t, srv.URL, "alice")

	t.Run("OK", func(t *testing.T) {
		d := servertest.MustGQL(t, srv.URL, alice.Token, `{ viewer { handle } }`, nil)
		assert.Equal(t, "alice", d["viewer"].(map[string]any)["handle"])
	})
	t.Run("OKAnonymous", func(t *testing.T) {
		d := servertest.MustGQL(t, srv.URL, "", `{ viewer { handle } }`, nil)
		assert.Nil(t, d["viewer"])
	})
	t.Run("ErrInvalidToken", func(t *testing.T) {
		r := servertest.GQL(t, srv.URL, "forged", `{ viewer { handle } }`, nil)
		assert.Equal(t, http.StatusOK, r.Status, "application/json clients learn from the body")
		assert.Equal(t, "UNAUTHENTICATED", r.Code())
		assert.Nil(t, r.Data)
	})
	t.Run("ErrOtherSecret", func(t *testing.T) {
		tok, _, err := auth.NewSigner([]byte(strings.Repeat("z", 32)), time.Hour).IssueFor(store.NewID(time.Now()), 0)
		require.NoError(t, err)
		r := servertest.GQL(t, srv.URL, tok, `{ viewer { handle } }`, nil)
		assert.Equal(t, "UNAUTHENTICATED", r.Code())
	})
	t.Run("ErrGraphQLResponseJSON", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { id } }"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/graphql-response+json")
		req.Header.Set("Authorization", "Bearer forged")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		assert.Equal(t, "application/graphql-response+json; charset=utf-8", resp.Header.Get("Content-Type"))
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), "Bearer")
		body, _ := io.ReadAll(resp.Body)
		assert.Contains(t, string(body), `"code":"UNAUTHENTICATED"`)
	})
	t.Run("ErrMalformedHeader", func(t *testing.T) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", strings.NewReader(`{"query":"{ viewer { id } }"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", alice.Token) // no "Bearer "
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		assert.Contains(t, string(body), `"code":"UNAUTHENTICATED"`)
	})
}

func TestHTTP_BodyLimit(t *testing.T) {
	srv := servertest.New(t, func(c *servertest.Config) { c.MaxBodyBytes = 64 })
	t.Run("OK", func(t *testing.T) {
		r := servertest.GQL(t, srv.URL, "", `{ __typename }`, nil)
		assert.Empty(t, r.Errors)
	})
	t.Run("ErrTooLarge", func(t *testing.T) {
		body := `{"query":"{ __typename }","variables":{"pad":"` + strings.Repeat("x", 100) + `"}}`
		resp, err := http.Post(srv.URL+"/graphql", "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})
	t.Run("ErrTooLargeChunked", func(t *testing.T) {
		// No Content-Length: the limit must hold while reading.
		body := io.MultiReader(strings.NewReader(`{"query":"{ __typename }","pad":"`), strings.NewReader(strings.Repeat("x", 100)+`"}`))
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", body)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	})
}

func TestHTTP_Routes(t *testing.T) {
	srv := servertest.New(t, nil)
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b), resp.Header
	}

	status, body, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok\n", body)

	status, _, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, status)
	srv.App.Readiness().Store(false)
	status, _, _ = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	srv.App.Readiness().Detail(func() string { return "events: polling" })
	status, body, _ = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Equal(t, "not ready\nevents: polling\n", body, "the detail, ready or not")
	srv.App.Readiness().Store(true)
	status, body, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "ok\nevents: polling\n", body)

	status, body, h := get("/")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, h.Get("Content-Type"), "text/html")
	assert.Contains(t, body, "/graphql")

	status, body, _ = get("/graphql?query=" + "%7B__typename%7D")
	assert.Equal(t, http.StatusOK, status)
	assert.JSONEq(t, `{"data":{"__typename":"Query"}}`, body)

	status, _, _ = get("/nope")
	assert.Equal(t, http.StatusNotFound, status)
}
