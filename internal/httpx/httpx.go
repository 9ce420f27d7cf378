// Package httpx holds the HTTP plumbing the site agent's API and the
// daemon's API share: the bearer-token check, request logging and JSON
// answers. Each API keeps its own error bodies and routes.
//
// The design is described in docs/reference/http.md of the
// repository.
package httpx

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/internal/httpsrv"
)

// Bearer serves next only for requests with "Authorization: Bearer
// token", compared in constant time, and marks their connection proven
// (httpsrv.Prove); refuse writes the 401 answer with a message saying
// whether the token was missing or wrong.
func Bearer(token string, refuse func(w http.ResponseWriter, msg string), next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		switch {
		case got == "":
			refuse(w, "missing bearer token (Authorization: Bearer TOKEN)")
			return
		case subtle.ConstantTimeCompare([]byte(got), want) != 1:
			refuse(w, "wrong bearer token")
			return
		}
		httpsrv.Prove(r.Context())
		next.ServeHTTP(w, r)
	})
}

// StatusWriter records the status code of the answer written through
// it. It unwraps to the writer it wraps and flushes through it, so that
// http.ResponseController and server-sent events work behind it.
type StatusWriter struct {
	http.ResponseWriter
	code int
}

// Status is the final status written, http.StatusOK if none was (yet).
func (w *StatusWriter) Status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // 1xx answers are not the final status
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *StatusWriter) Flush() { _ = w.FlushError() }

// FlushError flushes through the wrapped writer and reports whether it
// could (http.ResponseController.Flush calls it).
func (w *StatusWriter) FlushError() error {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap returns the wrapped writer (for http.ResponseController).
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// LogRequests logs every request with its method, path, status and
// duration: at debug level, or info for an error answer.
func LogRequests(log zerolog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &StatusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		ev := log.Debug()
		if sw.Status() >= 400 {
			ev = log.Info()
		}
		ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.Status()).
			Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Msg("request")
	})
}

// WriteJSON answers with status and v as indented JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// ReadTokenFile reads a bearer token from a file of one line. A file
// that its group or others may read is refused (a token is a password),
// as is an empty one.
func ReadTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s: the token file may be read by its group or others (mode %04o): make it private (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", err
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s: the token file is empty", path)
	}
	return tok, nil
}
