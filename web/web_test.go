package web

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const rebuild = "rebuild with: npm --prefix web ci && npm --prefix web run build, and commit web/static"

// buildInputs are the files the build is made from, as vite.config.ts lists
// them (a directory stands for every file under it but hidden ones).
var buildInputs = []string{"index.html", "app/index.html", "package.json", "package-lock.json", "vite.config.ts", "tsconfig.json", "src"}

// inputManifest returns what the build writes to build-hash.txt for the
// sources as they are now: "<sha256>  <path>\n" per input file, sorted by
// path.
func inputManifest(t *testing.T) string {
	t.Helper()
	var files []string
	for _, in := range buildInputs {
		err := fs.WalkDir(os.DirFS("."), in, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(d.Name(), ".") && p != in {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
			if !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("reading build input %s: %v", in, err)
		}
	}
	slices.Sort(files)
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), f)
	}
	return b.String()
}

// TestWebBuildIsCurrent fails when a build input changed after the
// committed build was made, naming the files that differ.
func TestWebBuildIsCurrent(t *testing.T) {
	built, err := fs.ReadFile(Assets, "build-hash.txt")
	if err != nil {
		t.Fatalf("static/build-hash.txt is missing (%v); %s", err, rebuild)
	}
	want := inputManifest(t)
	if string(built) == want {
		return
	}
	parse := func(s string) map[string]string {
		m := map[string]string{}
		for line := range strings.Lines(s) {
			sum, file, _ := strings.Cut(strings.TrimSuffix(line, "\n"), "  ")
			m[file] = sum
		}
		return m
	}
	was, now := parse(string(built)), parse(want)
	var changed []string
	for f, sum := range now {
		if was[f] != sum {
			changed = append(changed, f)
		}
	}
	for f := range was {
		if _, ok := now[f]; !ok {
			changed = append(changed, f+" (removed)")
		}
	}
	slices.Sort(changed)
	t.Errorf("web/static was built from other sources; changed since: %s\n%s", strings.Join(changed, ", "), rebuild)
}

// TestWebPagesAndAssets checks that both pages are built and that every
// asset a page or stylesheet names is in the build.
func TestWebPagesAndAssets(t *testing.T) {
	ref := regexp.MustCompile(`(?:src|href)="(/[^"]*)"|url\((/assets/[^)]*)\)`)
	for _, page := range []string{"index.html", "app/index.html"} {
		html, err := fs.ReadFile(Assets, page)
		if err != nil {
			t.Errorf("%s is not in the build: %v; %s", page, err, rebuild)
			continue
		}
		scripts := 0
		for _, m := range ref.FindAllStringSubmatch(string(html), -1) {
			p := m[1] + m[2]
			if p == "/app/" {
				continue
			}
			if _, err := fs.Stat(Assets, strings.TrimPrefix(p, "/")); err != nil {
				t.Errorf("%s refers to %s, which is not in the build", page, p)
			}
			if strings.HasSuffix(p, ".js") {
				scripts++
			}
		}
		if scripts == 0 {
			t.Errorf("%s loads no script from /assets/", page)
		}
	}
}

// TestWebEmbedsEveryFile checks that the embedded files are exactly those
// in static/ on disk, so none is left out of the binary by its name.
func TestWebEmbedsEveryFile(t *testing.T) {
	list := func(fsys fs.FS) []string {
		var files []string
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	embedded, onDisk := list(Assets), list(os.DirFS("static"))
	if !slices.Equal(embedded, onDisk) {
		t.Errorf("embedded files differ from static/:\nembedded: %v\non disk:  %v", embedded, onDisk)
	}
}

// remoteLoad matches the ways a page, stylesheet or script makes the
// browser load something by itself, when what it loads is on another host
// (http://, https://, ws://, wss:// or protocol-relative //). Links a person
// may follow (<a href> in text, documentation URLs in strings) are not
// matched: they are not requests.
// Each alternative ends at the "//" that starts the host, so the scan
// below tries it only where a "//" follows a scheme's colon, a quote, a
// parenthesis, "=" or a space (not inside base64 data), on the text just
// before.
var remoteLoad = regexp.MustCompile(`(?i)(?:` + strings.Join([]string{
	`<(?:script|img|iframe|source|audio|video|embed|input|track)\b[^>]*\bsrc\s*=\s*["']?\s*(?:https?:)?//`,
	`<link\b[^>]*\bhref\s*=\s*["']?\s*(?:https?:)?//`,
	`\.src\s*=\s*["'` + "`" + `]\s*(?:https?:)?//`,
	`url\(\s*["']?\s*(?:https?:)?//`,
	`@import\s+(?:url\()?\s*["']?\s*(?:https?:)?//`,
	`\bimport\s*\(\s*["'` + "`" + `]\s*(?:https?:)?//`,
	`\b(?:import|from)\s*["'` + "`" + `]\s*(?:https?:)?//`,
	`\bnew\s+(?:Shared)?Worker\s*\(\s*["'` + "`" + `]?\s*(?:https?:)?//`,
	`\bimportScripts\s*\(\s*["'` + "`" + `]\s*(?:https?:)?//`,
	`\bfetch\s*\(\s*["'` + "`" + `]\s*(?:https?:)?//`,
	`\bnew\s+(?:WebSocket|EventSource)\s*\(\s*["'` + "`" + `]\s*(?:wss?:|https?:)?//`,
}, "|") + `)$`)

// remoteLoads returns each place in data where remoteLoad matches, with
// some text around it.
func remoteLoads(data []byte) []string {
	var found []string
	for i := 0; i < len(data); {
		j := bytes.Index(data[i:], []byte("//"))
		if j < 0 {
			break
		}
		at := i + j
		i = at + 2
		if at == 0 || !strings.ContainsRune(":\"'`(= \t\n", rune(data[at-1])) {
			continue
		}
		from := max(at-300, 0)
		if loc := remoteLoad.FindIndex(data[from : at+2]); loc != nil {
			found = append(found, string(data[from+loc[0]:min(at+60, len(data))]))
		}
	}
	return found
}

func TestWebRemoteLoadPattern(t *testing.T) {
	for _, s := range []string{
		`<script src="https://cdn.example/x.js">`,
		`<link rel="stylesheet" href="//fonts.example/css">`,
		`@import url("https://fonts.example/css2?family=Fira+Code");`,
		`@font-face{src:url(https://fonts.example/f.woff2)}`,
		`const m = import("https://esm.example/monaco")`,
		`import"https://esm.example/x.js";`,
		`new Worker("https://cdn.example/worker.js")`,
		`importScripts('https://cdn.example/w.js')`,
		`fetch("https://api.example/graphql")`,
		`new WebSocket("wss://api.example/graphql")`,
		`img.src="http://tracker.example/p.gif"`,
	} {
		if len(remoteLoads([]byte(s))) != 1 {
			t.Errorf("not caught: %s", s)
		}
	}
	for _, s := range []string{
		`<script type="module" crossorigin src="/assets/playground-1.js"></script>`,
		`<link rel="stylesheet" href="/assets/a.css">`,
		`src:url(data:font/woff2;base64,d09GMgABAAAAAA2QAA4AAAAA)`,
		`url(/assets/codicon-DCmgc-ay.ttf)`,
		`new Worker(new URL("/assets/json.worker-1.js", import.meta.url), {type: "module"})`,
		`createElementNS("http://www.w3.org/2000/svg", "svg")`,
		`{href:"https://code.visualstudio.com/shortcuts/keyboard-shortcuts-macos.pdf"}`,
		`// see https://github.com/microsoft/monaco-editor#faq`,
		`fetch(new URL('/graphql', location.href).href`,
	} {
		if remoteLoads([]byte(s)) != nil {
			t.Errorf("wrongly caught: %s", s)
		}
	}
}

// TestWebLoadsNothingRemote checks every built file for a reference that
// would make the browser load from another host: the playground must work
// offline, served by Herald alone.
func TestWebLoadsNothingRemote(t *testing.T) {
	checked := 0
	err := fs.WalkDir(Assets, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch path.Ext(p) {
		case ".html", ".js", ".css", ".txt":
		default:
			return nil // fonts and images: binary, they reference nothing
		}
		data, err := fs.ReadFile(Assets, p)
		if err != nil {
			return err
		}
		checked++
		for _, f := range remoteLoads(data) {
			t.Errorf("%s loads from another host: %s…", p, f)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 3 {
		t.Errorf("only %d text files in the build", checked)
	}
}
