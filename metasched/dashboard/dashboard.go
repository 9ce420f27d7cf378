// Package dashboard is the operator's dashboard: its page, script and
// styles, embedded in the binary (no CDN, no build step, no outside
// request; the page draws everything itself), and the state the page
// shows, which Board builds from the daemon and serves as JSON (GET
// /v1/dashboard) and as a stream of server-sent events (GET /v1/events).
//
// Board uses only the daemon's exported methods, through the interface
// Daemon that it declares (*metasched.Daemon implements it). The HTTP
// server (package httpapi) mounts the handlers of a Board behind its
// authentication:
//
//	b := dashboard.New(d, replyErr)
//	mux.HandleFunc("GET /v1/dashboard", b.ServeState)
//	mux.HandleFunc("GET /v1/events", b.ServeEvents)
//	mux.HandleFunc("GET /{$}", dashboard.ServeIndex)
//	mux.HandleFunc("GET /assets/{file}", dashboard.ServeAsset)
//
// The event stream builds the state once per api.EventEvery for all the
// pages that watch it, whatever their number.
//
// The design is described in docs/internals/daemon.md of the
// repository, "The dashboard and metrics".
package dashboard

import (
	"embed"
	"fmt"
	"mime"
	"net/http"
	"path"

	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/metasched/api"
)

//go:embed static
var static embed.FS

// File returns the embedded file name (index.html, app.js, app.css, ...)
// and its content type.
func File(name string) (body []byte, contentType string, ok bool) {
	if name == "" || path.Base(name) != name || name[0] == '.' {
		return nil, "", false
	}
	b, err := static.ReadFile("static/" + name)
	if err != nil {
		return nil, "", false
	}
	ct := mime.TypeByExtension(path.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	return b, ct, true
}

// ServeIndex serves the dashboard's page (GET /); it logs in or shows the
// daemon.
func ServeIndex(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, "index.html")
}

// ServeAsset serves the page's scripts, styles and icons (GET
// /assets/{file}).
func ServeAsset(w http.ResponseWriter, r *http.Request) {
	serveStatic(w, r.PathValue("file"))
}

func serveStatic(w http.ResponseWriter, name string) {
	b, ctype, ok := File(name)
	if !ok {
		httpx.WriteJSON(w, http.StatusNotFound, api.APIError{Code: api.CodeNotFound, Error: fmt.Sprintf("no asset %q", name)})
		return
	}
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	// Inline style attributes carry the pools' and the heat map's colours.
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	_, _ = w.Write(b)
}
