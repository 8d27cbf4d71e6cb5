package main

import (
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatic_PagesAssetsAndCaching(t *testing.T) {
	srv := newTestServer(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, header http.Header) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, nil)
		require.NoError(t, err)
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, string(b)
	}

	// The pages: revalidated on each load.
	resp, playground := do(http.MethodGet, "/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	assert.Contains(t, playground, `<div id="graphiql">`)
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	resp, _ = do(http.MethodGet, "/", http.Header{"If-None-Match": {etag}})
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)

	resp, app := do(http.MethodGet, "/app/", nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	assert.Equal(t, "no-cache", resp.Header.Get("Cache-Control"))
	assert.Contains(t, app, `data-testid="auth-form"`)
	assert.NotEqual(t, etag, resp.Header.Get("ETag"))

	// The pages' hashed assets: cached for good.
	asset := regexp.MustCompile(`src="(/assets/[^"]+\.js)"`)
	for _, page := range []string{playground, app} {
		m := asset.FindStringSubmatch(page)
		require.NotNil(t, m, "no script under /assets/ in %s", page)
		resp, body := do(http.MethodGet, m[1], nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, m[1])
		assert.Contains(t, resp.Header.Get("Content-Type"), "javascript")
		assert.Equal(t, "public, max-age=31536000, immutable", resp.Header.Get("Cache-Control"))
		assert.NotEmpty(t, body)
		resp, _ = do(http.MethodHead, m[1], nil)
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}

	// A missing asset is a 404 that no cache keeps.
	resp, _ = do(http.MethodGet, "/assets/missing-0000.js", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Empty(t, resp.Header.Get("Cache-Control"))

	// /app is /app/, with its query.
	resp, _ = do(http.MethodGet, "/app", nil)
	assert.Equal(t, http.StatusMovedPermanently, resp.StatusCode)
	assert.Equal(t, "/app/", resp.Header.Get("Location"))
	resp, _ = do(http.MethodGet, "/app?handle=ann", nil)
	assert.Equal(t, "/app/?handle=ann", resp.Header.Get("Location"))

	// Static files are read-only.
	resp, _ = do(http.MethodPost, "/app/", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}
