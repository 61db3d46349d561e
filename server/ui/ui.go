// Package ui is Lakeshore's web dashboard: hand-written HTML, CSS and JavaScript embedded in
// the binary (no build step, nothing loaded from outside the server), served at /ui/ by
// package server, and History, the per-queue rate history behind the overview's charts.
//
// The assets hold no data: every page fetches the JSON API (/v1/…) with the token the user
// typed in, kept in the tab's sessionStorage and sent as the Authorization header, never in
// a URL. Live views read streams with fetch (the token in a header), not EventSource.
package ui

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Prefix is the path the dashboard is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy is the Content-Security-Policy of every /ui/ answer: scripts,
// styles and fetches only from the server itself, images also from blob: URLs (payload
// images, made in the page from their bytes), no inline script or style, no frames, no
// forms posted anywhere, no plugins.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// SetSecurityHeaders sets the headers of every /ui/ answer: ContentSecurityPolicy, no
// sniffing, no referrer, no framing.
func SetSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// Assets returns the handler of the static files under Prefix: index.html for Prefix
// itself, the embedded file of that name otherwise, 404 for anything else. Answers carry
// SetSecurityHeaders and Cache-Control: no-cache (so an upgraded server is picked up at
// once; the files are small).
func Assets() http.Handler {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("ui: " + err.Error()) // the embedded tree is fixed at build time
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SetSecurityHeaders(w.Header())
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		if name != path.Clean(name) || strings.HasPrefix(name, ".") || strings.Contains(name, "/") {
			http.NotFound(w, r)
			return
		}
		b, err := fs.ReadFile(root, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" {
			ct = "application/octet-stream"
		}
		w.Header().Set("Content-Type", ct)
		w.Header().Set("Cache-Control", "no-cache")
		if r.Method == http.MethodHead {
			return
		}
		w.Write(b) //nolint:errcheck // the client went away
	})
}
