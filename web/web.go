// Package web holds the static files Herald serves at "/". They are embedded
// in the binary so a single file runs anywhere, offline, with no CDN.
package web

import (
	"embed"
	"io/fs"
)

// static is Vite's build of the playground (index.html) and the demo client
// (app/index.html); see package.json. "all:" embeds files whose names start
// with "_" or ".", which a bundler may produce, instead of silently leaving
// them out.
//
//go:embed all:static
var static embed.FS

// Assets is the content of the static directory, rooted so that "index.html"
// is at the top. It lives here rather than in server because an embed
// pattern cannot reach a parent directory.
var Assets fs.FS = mustSub(static, "static")

func mustSub(fsys fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		// fs.Sub fails only for an invalid path, a programming error.
		panic(err)
	}
	return sub
}
