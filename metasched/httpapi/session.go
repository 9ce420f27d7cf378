package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/metasched/metasched/internal/httpsrv"
	"github.com/metasched/metasched/internal/httpx"
	"github.com/metasched/metasched/metasched/api"
)

// The dashboard's session: a browser cannot send a bearer header with a
// page load or an EventSource, so the operator logs in once with the token
// (POST /login) and gets a cookie. The cookie is "EXPIRY.ID.MAC": a random
// session ID, and an HMAC-SHA256 of the expiry and the ID keyed by the
// token. A session outlives a restart of the daemon (same data directory,
// same token) and ends when it expires, when the token changes, or at
// logout: the daemon keeps the IDs of the sessions logged out (in its
// store) until they would have expired, and refuses them.
const (
	SessionCookie = "metasched_session"
	// SessionTTL is how long a session lasts.
	SessionTTL = 12 * time.Hour
	// CSRFHeader must be sent, with the value "metasched", by every request
	// other than GET or HEAD that the session cookie authenticates: a page
	// of another site cannot set it without the daemon's consent (no CORS).
	CSRFHeader = "X-Requested-With"
	csrfValue  = "metasched"
)

func (s *Server) sessionMAC(exp int64, id string) string {
	m := hmac.New(sha256.New, []byte(s.token))
	fmt.Fprintf(m, "metasched session %s until %d", id, exp)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns a cookie value of a new session valid until exp.
func (s *Server) newSession(exp time.Time) string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	id := base64.RawURLEncoding.EncodeToString(b)
	return strconv.FormatInt(exp.Unix(), 10) + "." + id + "." + s.sessionMAC(exp.Unix(), id)
}

// session reads the request's session cookie: its ID and expiry, when it
// is ours, byte for byte as newSession wrote it, and has not expired (a
// revoked one still reads: see validSession).
func (s *Server) session(r *http.Request) (id string, exp time.Time, ok bool) {
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return "", time.Time{}, false
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 || parts[1] == "" {
		return "", time.Time{}, false
	}
	// The expiry as newSession writes it: ParseInt alone also reads "+E"
	// and "0E", which would make other cookies of the same session.
	e, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || strconv.FormatInt(e, 10) != parts[0] || time.Now().Unix() >= e {
		return "", time.Time{}, false
	}
	if subtle.ConstantTimeCompare([]byte(parts[2]), []byte(s.sessionMAC(e, parts[1]))) != 1 {
		return "", time.Time{}, false
	}
	return parts[1], time.Unix(e, 0), true
}

// validSession reports whether the request carries a session cookie that
// is ours, not expired and not logged out.
func (s *Server) validSession(r *http.Request) bool {
	id, _, ok := s.session(r)
	return ok && !s.d.SessionRevoked(id)
}

// authenticate serves next for a request with the bearer token or, when it
// sends no Authorization header, a valid session cookie (and CSRFHeader
// unless it only reads).
func (s *Server) authenticate(next http.HandlerFunc) http.Handler {
	bearer := httpx.Bearer(s.token, func(w http.ResponseWriter, msg string) {
		writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized, Error: msg})
	}, next)
	caller := bearerCaller(s.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "":
			bearer.ServeHTTP(w, withCaller(r, caller))
		case !s.validSession(r):
			writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized,
				Error: "missing bearer token (Authorization: Bearer TOKEN) or session (log in at /)"})
		case r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get(CSRFHeader) != csrfValue:
			writeError(w, http.StatusForbidden, api.APIError{Code: api.CodeForbidden,
				Error: fmt.Sprintf("a request the session cookie authenticates must send %s: %s", CSRFHeader, csrfValue)})
		default:
			httpsrv.Prove(r.Context()) // the session authenticates the connection
			id, _, _ := s.session(r)
			next(w, withCaller(r, "session:"+id))
		}
	})
}

// serveLogin checks the token of a JSON body ({"token": ...}) or of a form
// (token=...) and sets the session cookie: the JSON answer is api.LoginResult,
// the form's a redirect to the dashboard.
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(w, r)
	if err != nil {
		replyErr(w, err)
		return
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	form := ct == "application/x-www-form-urlencoded"
	var lr api.LoginRequest
	switch {
	case form:
		q, err := url.ParseQuery(string(body))
		if err != nil {
			replyErr(w, invalidField("token", "the form cannot be read: "+err.Error()))
			return
		}
		lr.Token = q.Get("token")
	case ct == "application/json" || ct == "":
		if err := strictJSON(body, &lr); err != nil {
			replyErr(w, err)
			return
		}
	default:
		writeError(w, http.StatusUnsupportedMediaType, api.APIError{Code: api.CodeUnsupported,
			Error: fmt.Sprintf("Content-Type %q: send application/json or a form", ct)})
		return
	}
	switch {
	case strings.TrimSpace(lr.Token) == "":
		writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized, Error: "log in with the API token",
			Fields: []api.FieldError{{Field: "token", Problem: "is empty: paste the token the daemon printed (DATA_DIR/token)"}}})
		return
	case subtle.ConstantTimeCompare([]byte(strings.TrimSpace(lr.Token)), []byte(s.token)) != 1:
		writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized, Error: "wrong token",
			Fields: []api.FieldError{{Field: "token", Problem: "is not this daemon's token"}}})
		return
	}
	httpsrv.Prove(r.Context()) // the right token: the connection is no slow stranger
	exp := time.Now().Add(SessionTTL).Truncate(time.Second)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: s.newSession(exp), Path: "/", Expires: exp,
		MaxAge: int(SessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	if form {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, api.LoginResult{Expires: exp})
}

// serveLogout ends the request's session, if it has one (its cookie, and
// any copy of it, authenticates nothing from now on), and removes the
// cookie from the browser.
func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	if id, exp, ok := s.session(r); ok {
		if err := s.d.RevokeSession(r.Context(), id, exp); err != nil {
			replyErr(w, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
}
