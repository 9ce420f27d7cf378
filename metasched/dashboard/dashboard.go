// Package dashboard holds the operator dashboard's page, script and
// styles, embedded in the binary: the daemon serves them at / and
// /assets/, and the page draws everything itself (no CDN, no build step,
// no outside request).
//
// The design is described in docs/design.md of the repository, section
// "The dashboard and metrics".
package dashboard

import (
	"embed"
	"mime"
	"path"
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
