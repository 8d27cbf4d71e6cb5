package httpserver

import (
	"crypto/sha256"
	"encoding/base64"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/klauspost/compress/gzhttp"
)

// Cache policies of the web build. Files under /assets/ carry a hash of
// their content in their name, so a browser may keep them for good; the
// pages (and anything else) are revalidated on every load, so a new build
// is picked up at once, cheaply thanks to their ETags.
const (
	cacheImmutable   = "public, max-age=31536000, immutable"
	cacheRevalidate  = "no-cache"
	hashedAssetsPath = "/assets/"
)

// gzipETagSuffix marks the ETag of a compressed response: RFC 9110 §8.8.3
// wants it to differ from the uncompressed one's.
const gzipETagSuffix = "-gzip"

// staticHandler serves the embedded web build (the playground at "/", the
// demo client at "/app/") with cache headers and ETags, gzip-compressed for
// clients that accept it (the playground's script is 5.1 MB, 1.4 MB
// compressed), and sends "/app" to "/app/".
func staticHandler(assets fs.FS) http.Handler {
	compress, err := gzhttp.NewWrapper(gzhttp.SuffixETag(gzipETagSuffix))
	if err != nil {
		// NewWrapper fails only for invalid options, a programming error.
		panic(err)
	}
	return compress(staticFiles(assets))
}

// staticFiles is staticHandler without compression.
func staticFiles(assets fs.FS) http.Handler {
	etags := fileETags(assets)
	files := http.FileServerFS(assets)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A browser revalidates a compressed file with the ETag it got,
		// suffixed; the file server knows the file's own.
		if inm := r.Header.Get("If-None-Match"); strings.Contains(inm, gzipETagSuffix+`"`) {
			r.Header.Set("If-None-Match", strings.ReplaceAll(inm, gzipETagSuffix+`"`, `"`))
		}
		p := r.URL.Path
		if p == "/app" {
			target := "/app/"
			if r.URL.RawQuery != "" {
				target += "?" + r.URL.RawQuery
			}
			http.Redirect(w, r, target, http.StatusMovedPermanently)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+p), "/")
		if strings.HasSuffix(p, "/") {
			name = path.Join(name, "index.html")
		}
		// Only files that exist get cache headers: a 404 must not be kept.
		if etag, ok := etags[name]; ok {
			w.Header().Set("ETag", etag)
			if strings.HasPrefix(p, hashedAssetsPath) {
				w.Header().Set("Cache-Control", cacheImmutable)
			} else {
				w.Header().Set("Cache-Control", cacheRevalidate)
			}
		}
		files.ServeHTTP(w, r)
	})
}

// fileETags returns a strong ETag for each file of fsys, from its content.
// The files are embedded, so they are read once, at start.
func fileETags(fsys fs.FS) map[string]string {
	etags := map[string]string{}
	// An unreadable file gets no ETag; the file server reports the error.
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil
		}
		sum := sha256.Sum256(data)
		etags[p] = `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
		return nil
	})
	return etags
}
