package httpserver_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"regexp"
	"testing"

	"herald/server/internal/servertest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatic_PagesAssetsAndCaching(t *testing.T) {
	srv := servertest.New(t, nil)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path string, header http.Header) (*http.Response, string) {
		t.Helper()
		resp, b := fetch(t, client, method, srv.URL+path, header)
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

// Clients that accept gzip get the web build compressed, with an ETag of
// its own that still revalidates; others get it as it is.
func TestStatic_Gzip(t *testing.T) {
	srv := servertest.New(t, nil)
	// A transport that leaves Content-Encoding to the test.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	get := func(path string, header http.Header) (*http.Response, []byte) {
		t.Helper()
		return fetch(t, client, http.MethodGet, srv.URL+path, header)
	}

	_, page := get("/", nil)
	m := regexp.MustCompile(`src="(/assets/[^"]+\.js)"`).FindSubmatch(page)
	require.NotNil(t, m)
	asset := string(m[1])

	plain, raw := get(asset, nil)
	require.Equal(t, http.StatusOK, plain.StatusCode)
	assert.Empty(t, plain.Header.Get("Content-Encoding"))

	zipped, body := get(asset, http.Header{"Accept-Encoding": {"gzip"}})
	require.Equal(t, http.StatusOK, zipped.StatusCode)
	assert.Equal(t, "gzip", zipped.Header.Get("Content-Encoding"))
	assert.Contains(t, zipped.Header.Values("Vary"), "Accept-Encoding")
	assert.Less(t, len(body), len(raw)/2, "script compresses to well under half")
	zr, err := gzip.NewReader(bytes.NewReader(body))
	require.NoError(t, err)
	unzipped, err := io.ReadAll(zr)
	require.NoError(t, err)
	assert.Equal(t, raw, unzipped)

	etag := zipped.Header.Get("ETag")
	assert.NotEqual(t, plain.Header.Get("ETag"), etag, "a compressed file has its own ETag")
	resp, _ := get(asset, http.Header{"Accept-Encoding": {"gzip"}, "If-None-Match": {etag}})
	assert.Equal(t, http.StatusNotModified, resp.StatusCode, "and it revalidates")
}

// fetch sends a request with header and returns the response and its body.
func fetch(t *testing.T, client *http.Client, method, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}
