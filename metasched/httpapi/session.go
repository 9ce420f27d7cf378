package httpapi

import (
	"context"
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
	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/metasched/api"
)

// The dashboard's session: a browser cannot send a bearer header with a
// page load or an EventSource, so a user or operator logs in once with a
// token (POST /login) and gets a cookie. The cookie is "EXPIRY.ID.NAME.MAC":
// a random session ID, the name of the token, and an HMAC-SHA256 of the
// expiry, the ID, the name and the token's key (Daemon.SessionKey: the
// hash the store keeps of it, which the cookie does not carry) keyed by
// the operator token. A session outlives a restart of the daemon (same
// data directory) and ends when it expires, when its token is revoked
// (for ever: a token made later under the same name has another key, so
// the MAC no longer holds, whatever its role), when the operator token
// changes, or at logout: the daemon keeps the IDs of the sessions logged
// out (in its store) until they would have expired, and refuses them.
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

func (s *Server) sessionMAC(exp int64, id, name, key string) string {
	m := hmac.New(sha256.New, []byte(s.token))
	fmt.Fprintf(m, "metasched session %s of %s (%s) until %d", id, name, key, exp)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// newSession returns a cookie value of a new session of the token name,
// whose key is key, valid until exp.
func (s *Server) newSession(exp time.Time, name, key string) string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand)
	id := base64.RawURLEncoding.EncodeToString(b)
	return strconv.FormatInt(exp.Unix(), 10) + "." + id + "." + name + "." + s.sessionMAC(exp.Unix(), id, name, key)
}

// session reads the request's session cookie: its ID, the principal of
// the token it was opened with and its expiry, when it is ours, byte for
// byte as newSession wrote it for the token that has its name now, and
// has not expired (one logged out still reads: see authenticate).
func (s *Server) session(r *http.Request) (id string, p api.Principal, exp time.Time, ok bool) {
	none := func() (string, api.Principal, time.Time, bool) { return "", api.Principal{}, time.Time{}, false }
	c, err := r.Cookie(SessionCookie)
	if err != nil {
		return none()
	}
	// EXPIRY.ID.NAME.MAC: the ID and the MAC are base64url (no dot); a
	// token's name may hold dots.
	parts := strings.SplitN(c.Value, ".", 3)
	if len(parts) != 3 {
		return none()
	}
	cut := strings.LastIndexByte(parts[2], '.')
	if cut < 0 {
		return none()
	}
	parts = append(parts[:2], parts[2][:cut], parts[2][cut+1:])
	if parts[1] == "" || parts[2] == "" {
		return none()
	}
	// The expiry as newSession writes it: ParseInt alone also reads "+E"
	// and "0E", which would make other cookies of the same session.
	e, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil || strconv.FormatInt(e, 10) != parts[0] || time.Now().Unix() >= e {
		return none()
	}
	// The token that has the name now: its key must be the one the
	// session was opened with (none when the name has no token).
	p, key, ok := s.p.Auth.Principal(parts[2])
	if !ok || subtle.ConstantTimeCompare([]byte(parts[3]), []byte(s.sessionMAC(e, parts[1], parts[2], key))) != 1 {
		return none()
	}
	return parts[1], p, time.Unix(e, 0), true
}

// authenticate serves next for a request that proves who it comes from,
// and whose role access allows (403 otherwise): a bearer token, else a
// client certificate of the grid's CA (over TLS), else a valid session
// cookie (and CSRFHeader unless it only reads). The principal goes into
// the request's context (api.WithPrincipal).
func (s *Server) authenticate(access Access, next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p api.Principal
		var caller string
		var still func() bool // nil: a certificate's, which nothing revokes
		if auth := r.Header.Get("Authorization"); auth != "" {
			token, ok := strings.CutPrefix(auth, "Bearer ")
			if !ok {
				writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized, Error: "missing bearer token (Authorization: Bearer TOKEN)"})
				return
			}
			if p, ok = s.p.Auth.Authenticate(token); !ok {
				writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized, Error: "wrong bearer token"})
				return
			}
			caller = bearerCaller(token)
			still = func() bool { q, ok := s.p.Auth.Authenticate(token); return ok && q == p }
		} else if id, ok := forwardedClient(r); ok {
			p, caller = api.Principal{Name: api.CertOwnerPrefix + id.Name, Role: id.Role}, "cert:"+id.Name
		} else if id, ok := tlsx.PeerIdentity(r.TLS); ok && id.Kind == tlsx.KindClient {
			p, caller = api.Principal{Name: api.CertOwnerPrefix + id.Name, Role: id.Role}, "cert:"+id.Name
		} else {
			sid, sp, _, valid := s.session(r)
			valid = valid && !s.p.Auth.SessionRevoked(sid)
			p = sp
			switch {
			case !valid:
				writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized,
					Error: "missing bearer token (Authorization: Bearer TOKEN) or session (log in at /)"})
				return
			case r.Method != http.MethodGet && r.Method != http.MethodHead && r.Header.Get(CSRFHeader) != csrfValue:
				writeError(w, http.StatusForbidden, api.APIError{Code: api.CodeForbidden,
					Error: fmt.Sprintf("a request the session cookie authenticates must send %s: %s", CSRFHeader, csrfValue)})
				return
			}
			caller = "session:" + sid
			still = func() bool {
				id, q, _, ok := s.session(r)
				return ok && id == sid && !s.p.Auth.SessionRevoked(sid) && q == p
			}
		}
		httpsrv.Prove(r.Context()) // the request proves the connection
		if access == Operator && !p.Operator() {
			writeError(w, http.StatusForbidden, api.APIError{Code: api.CodeForbidden,
				Error: fmt.Sprintf("%s %s is an operator's: %s has the role %s", r.Method, r.URL.Path, p.Name, p.Role)})
			return
		}
		ctx := context.WithValue(api.WithPrincipal(r.Context(), p), stillKey{}, still)
		next(w, withCaller(r.WithContext(ctx), caller))
	})
}

// stillKey is the context key of a request's check that its credential
// still proves the principal it did (authenticate).
type stillKey struct{}

// endWithCredential cancels a stream (cancel) as soon as the credential
// that opened it (r's) no longer proves the principal it did, with the
// role it had: its token revoked (also when a token of its name is made
// again, of another role), its session logged out. It waits for the
// daemon's credentials to change, checks, and waits again until ctx ends.
func (s *Server) endWithCredential(ctx context.Context, cancel context.CancelFunc, r *http.Request) {
	still, _ := r.Context().Value(stillKey{}).(func() bool)
	if still == nil {
		return // a client certificate: it holds until it expires
	}
	for {
		changed := s.p.Auth.CredentialsChanged()
		if !still() {
			cancel()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// forwardedClient is the client certificate's identity a standby daemon
// forwarded r for (api.ForwardedClientHeader): taken only from a peer
// whose certificate names the daemon.
func forwardedClient(r *http.Request) (tlsx.Identity, bool) {
	v := r.Header.Get(api.ForwardedClientHeader)
	if v == "" {
		return tlsx.Identity{}, false
	}
	if peer, ok := tlsx.PeerIdentity(r.TLS); !ok || peer.Kind != tlsx.KindDaemon {
		return tlsx.Identity{}, false
	}
	id, err := tlsx.ParseIdentity(v)
	if err != nil || id.Kind != tlsx.KindClient {
		return tlsx.Identity{}, false
	}
	return id, true
}

// principalOf is the principal authenticate found for r.
func principalOf(r *http.Request) api.Principal {
	p, _ := api.PrincipalFrom(r.Context())
	return p
}

// owned serves next for an operator, or a user that submitted the job of
// the route's {id}; another user's job, like no job, is 404.
func (s *Server) owned(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := principalOf(r)
		if !p.Operator() {
			// Another's job and no job answer alike, by the same work: one
			// seek in the index of the owners' jobs, then the same 404.
			id := r.PathValue("id")
			owns, err := s.p.Auth.OwnsJob(r.Context(), p.Name, id)
			if err == nil && !owns {
				err = &api.RequestError{Status: http.StatusNotFound, Code: api.CodeNotFound, Msg: fmt.Sprintf("no job %q", id)}
			}
			if err != nil {
				replyErr(w, err)
				return
			}
		}
		next(w, r)
	}
}

// serveLogin checks the token of a JSON body ({"token": ...}) or of a form
// (token=...) and sets the session cookie: the JSON answer is api.LoginResult,
// the form's a redirect to the dashboard. A login a browser sends from a
// page of another site is refused (crossSite): a foreign page's form would
// otherwise log the browser in as the attacker's account (login CSRF).
func (s *Server) serveLogin(w http.ResponseWriter, r *http.Request) {
	if why := crossSite(r); why != "" {
		writeError(w, http.StatusForbidden, api.APIError{Code: api.CodeForbidden,
			Error: "a login from a page of another site is refused: " + why})
		return
	}
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
	}
	p, ok := s.p.Auth.Authenticate(strings.TrimSpace(lr.Token))
	if !ok {
		writeError(w, http.StatusUnauthorized, api.APIError{Code: api.CodeUnauthorized, Error: "wrong token",
			Fields: []api.FieldError{{Field: "token", Problem: "is not a token of this daemon"}}})
		return
	}
	httpsrv.Prove(r.Context()) // the right token: the connection is no slow stranger
	exp := time.Now().Add(SessionTTL).Truncate(time.Second)
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: s.newSession(exp, p.Name, s.p.Auth.SessionKey(strings.TrimSpace(lr.Token))), Path: "/", Expires: exp,
		MaxAge: int(SessionTTL / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	if form {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, api.LoginResult{Expires: exp})
}

// crossSite says why r comes from a page of another site, or "": a
// browser marks a request a page made with Sec-Fetch-Site and, for a POST,
// with Origin. Sec-Fetch-Site cross-site (or same-site: another host of the
// same site) is refused, same-origin taken (also behind a proxy that
// changes the Host); without it (an older browser), an Origin whose host is
// not the one the request was sent to is refused. A request with neither
// (curl, the Go client) is no page's.
func crossSite(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "cross-site", "same-site":
		return "Sec-Fetch-Site: " + site
	case "same-origin", "none":
		return ""
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
		return fmt.Sprintf("Origin %q is not %s", origin, r.Host)
	}
	return ""
}

// serveLogout ends the request's session, if it has one (its cookie, and
// any copy of it, authenticates nothing from now on), and removes the
// cookie from the browser.
func (s *Server) serveLogout(w http.ResponseWriter, r *http.Request) {
	if id, _, exp, ok := s.session(r); ok {
		if err := s.p.Auth.RevokeSession(r.Context(), id, exp); err != nil {
			replyErr(w, err)
			return
		}
	}
	http.SetCookie(w, &http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	w.WriteHeader(http.StatusNoContent)
}
