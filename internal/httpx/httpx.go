// Package httpx holds the HTTP plumbing the site agent's API and the
// daemon's API share: the bearer-token check, request logging and JSON
// answers. Each API keeps its own error bodies and routes.
package httpx

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// Bearer serves next only for requests with "Authorization: Bearer
// token", compared in constant time; refuse writes the 401 answer with a
// message saying whether the token was missing or wrong.
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
		next.ServeHTTP(w, r)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the server's writer (to flush
// a stream of server-sent events, say).
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// LogRequests logs every request with its method, path, status and
// duration: at debug level, or info for an error answer.
func LogRequests(log zerolog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		ev := log.Debug()
		if sw.status >= 400 {
			ev = log.Info()
		}
		ev.Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.status).
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
