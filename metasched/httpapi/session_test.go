package httpapi_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/store"
)

// cookieRequest sends a request with the session cookie value (and the
// CSRF header when csrf); each mark changes the request (offDoc).
func cookieRequest(t *testing.T, td *testDaemon, method, path, cookie string, csrf bool, ctype string, body string, marks ...func(*http.Request)) apiAnswer {
	t.Helper()
	req, err := http.NewRequest(method, td.addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: cookie})
	}
	if csrf {
		req.Header.Set(httpapi.CSRFHeader, "metasched")
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for _, m := range marks {
		m(req)
	}
	// Do not follow the form login's redirect.
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return apiAnswer{status: resp.StatusCode, header: resp.Header, body: data}
}

func sessionCookie(t *testing.T, a apiAnswer) *http.Cookie {
	t.Helper()
	for _, c := range (&http.Response{Header: a.header}).Cookies() {
		if c.Name == httpapi.SessionCookie {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", httpapi.SessionCookie, a.header)
	return nil
}

// forge builds a session cookie with the documented scheme.
func forge(key string, exp time.Time) string {
	return forgeAs(key, exp, api.OperatorName, "")
}

// forgeAs forges a session of the token name whose token's key (the
// hash the store keeps; "" for the operator token) is tokenKey.
func forgeAs(key string, exp time.Time, name, tokenKey string) string {
	const id = "forged-session-id"
	m := hmac.New(sha256.New, []byte(key))
	_, _ = fmt.Fprintf(m, "metasched session %s of %s (%s) until %d", id, name, tokenKey, exp.Unix()) // a hash: writing to it cannot fail
	return fmt.Sprintf("%d.%s.%s.%s", exp.Unix(), id, name, base64.RawURLEncoding.EncodeToString(m.Sum(nil)))
}

// loginRefused are logins the daemon refuses (TestSession), with the
// problem it names in the token field, and seeds of FuzzLogin. "{token}"
// in a body stands for the daemon's token.
var loginRefused = []struct{ ctype, body, problem string }{
	{"application/json", `{"token": ""}`, "is empty"},
	{"application/json", `{"token": "nope"}`, "is not a token of this daemon"},
	{"application/x-www-form-urlencoded", "token=nope", "is not a token of this daemon"},
	{"application/json", `{"token": "{token}x"}`, "is not a token of this daemon"},
}

// sessionCookies are session cookies and whether the daemon takes them
// (TestSession), and seeds of FuzzSessionCookie. A cookie is a template
// expanded by expandCookie.
var sessionCookies = []struct {
	name, cookie string
	ok           bool
}{
	{"tampered expiry", "{exp}9.{id}.{name}.{mac}", false},
	{"tampered mac", "{exp}.{id}.{name}.{flipmac}", false},
	{"tampered name", "{exp}.{id}.alice.{mac}", false},
	{"no name", "{exp}.{id}.{mac}", false},
	{"no mac", "{exp}", false},
	{"garbage", "hello", false},
	{"expired", "{expired}", false},
	{"another token", "{othertoken}", false},
	{"good until later", "{forged}", true}, // the scheme forge uses is the daemon's
}

// expandCookie expands a template of sessionCookies: {exp}, {id} and {mac}
// are the parts of the cookie session, {flipmac} its MAC changed,
// {expired} a cookie forged with the token that has expired, {othertoken}
// one forged with another key, {forged} a good one forged with the token.
func expandCookie(tmpl, session, token string) string {
	parts := append(strings.SplitN(session, ".", 4), "", "", "", "")
	mac := parts[3]
	if mac == "" {
		mac = "A"
	}
	return strings.NewReplacer(
		"{exp}", parts[0], "{id}", parts[1], "{name}", parts[2], "{mac}", parts[3], "{flipmac}", flipFirst(mac),
		"{expired}", forge(token, time.Now().Add(-time.Minute)),
		"{othertoken}", forge("not-"+token, time.Now().Add(time.Hour)),
		"{forged}", forge(token, time.Now().Add(time.Hour)),
	).Replace(tmpl)
}

// The dashboard's login: the token gives an HttpOnly, SameSite=Strict
// cookie that authenticates like the token (writes only with the CSRF
// header), survives a restart of the daemon, and nothing else does.
func TestSession(t *testing.T) {
	dataDir := t.TempDir()
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.DataDir = dataDir })
	token := td.d.Token()

	// Refused logins say what is wrong with the token field.
	for _, c := range loginRefused {
		c.body = strings.ReplaceAll(c.body, "{token}", token)
		a := cookieRequest(t, td, "POST", "/login", "", false, c.ctype, c.body)
		e := a.apiErr(t)
		if a.status != http.StatusUnauthorized || len(e.Fields) != 1 || e.Fields[0].Field != "token" || !strings.Contains(e.Fields[0].Problem, c.problem) {
			t.Errorf("login %s %q: %d %+v, want 401 with token %q", c.ctype, c.body, a.status, e, c.problem)
		}
		if len(a.header.Values("Set-Cookie")) != 0 {
			t.Errorf("login %q set a cookie", c.body)
		}
	}
	if a := cookieRequest(t, td, "POST", "/login", "", false, "application/json", `{"tokn": "x"}`, offDoc); a.status != 400 || a.apiErr(t).Fields[0].Field != "tokn" {
		t.Errorf("login with an unknown field: %d %s", a.status, a.body)
	}
	if a := cookieRequest(t, td, "POST", "/login", "", false, "text/csv", "x", offDoc); a.status != http.StatusUnsupportedMediaType {
		t.Errorf("login as text/csv: %d %s", a.status, a.body)
	}

	// Login CSRF: a foreign page's form, auto-submitted with the
	// attacker's token, must not log the browser in as the attacker.
	header := func(k, v string) func(*http.Request) { return func(r *http.Request) { r.Header.Set(k, v) } }
	self := strings.TrimPrefix(td.addr, "http://")
	for _, c := range []struct {
		name   string
		mark   func(*http.Request)
		status int
	}{
		{"a form from another site's page (Origin)", header("Origin", "https://evil.example"), http.StatusForbidden},
		{"an Origin of the same host on another port", header("Origin", "http://"+strings.Split(self, ":")[0]+":1"), http.StatusForbidden},
		{"an opaque Origin (a sandboxed page)", header("Origin", "null"), http.StatusForbidden},
		{"Sec-Fetch-Site: cross-site", header("Sec-Fetch-Site", "cross-site"), http.StatusForbidden},
		{"Sec-Fetch-Site: same-site", header("Sec-Fetch-Site", "same-site"), http.StatusForbidden},
		{"the dashboard's own page (Origin)", header("Origin", "http://"+self), http.StatusSeeOther},
		{"the dashboard's own page (Sec-Fetch-Site)", header("Sec-Fetch-Site", "same-origin"), http.StatusSeeOther},
		{"the dashboard's own page behind a proxy that changes the Host", func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Site", "same-origin")
			r.Header.Set("Origin", "https://grid.example")
		}, http.StatusSeeOther},
		{"another site's page, Origin and Sec-Fetch-Site", func(r *http.Request) {
			r.Header.Set("Sec-Fetch-Site", "cross-site")
			r.Header.Set("Origin", "http://"+self)
		}, http.StatusForbidden},
		{"a client without either (curl)", func(*http.Request) {}, http.StatusSeeOther},
	} {
		a := cookieRequest(t, td, "POST", "/login", "", false, "application/x-www-form-urlencoded", "token="+url.QueryEscape(token), c.mark)
		if a.status != c.status {
			t.Errorf("%s: login %d %s, want %d", c.name, a.status, a.body, c.status)
		}
		if set := len((&http.Response{Header: a.header}).Cookies()) > 0; set != (c.status == http.StatusSeeOther) {
			t.Errorf("%s: a cookie set: %v", c.name, set)
		}
		if c.status == http.StatusForbidden && a.apiErr(t).Code != api.CodeForbidden {
			t.Errorf("%s: %s, want code forbidden", c.name, a.body)
		}
	}

	a := cookieRequest(t, td, "POST", "/login", "", false, "application/json", `{"token": "`+token+`"}`)
	if a.status != http.StatusOK {
		t.Fatalf("login: %d %s", a.status, a.body)
	}
	c := sessionCookie(t, a)
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge != int(httpapi.SessionTTL/time.Second) || strings.Contains(c.Value, token) {
		t.Errorf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Max-Age %d, no token inside", c, int(httpapi.SessionTTL/time.Second))
	}
	var lr api.LoginResult
	if err := json.Unmarshal(a.body, &lr); err != nil || time.Until(lr.Expires) < httpapi.SessionTTL-time.Minute {
		t.Errorf("login answer %s (%v)", a.body, err)
	}
	session := c.Value

	// Reads with the cookie; writes need the CSRF header too.
	if a := cookieRequest(t, td, "GET", "/v1/pools", session, false, "", ""); a.status != http.StatusOK {
		t.Errorf("GET /v1/pools with the session: %d %s", a.status, a.body)
	}
	if a := cookieRequest(t, td, "POST", "/v1/jobs", session, false, "application/yaml", apiSimJob); a.status != http.StatusForbidden || a.apiErr(t).Code != api.CodeForbidden {
		t.Errorf("POST /v1/jobs with the session, no CSRF header: %d %s", a.status, a.body)
	}
	js, err := td.d.Store().Jobs(context.Background(), store.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 0 {
		t.Errorf("a refused request stored %d jobs", len(js))
	}
	if a := cookieRequest(t, td, "POST", "/v1/jobs", session, true, "application/yaml", apiSimJob); a.status != http.StatusCreated {
		t.Errorf("POST /v1/jobs with the session and the CSRF header: %d %s", a.status, a.body)
	}
	// A wrong bearer header is refused even with a good cookie.
	req, err := http.NewRequest("GET", td.addr+"/v1/pools", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: session})
	req.Header.Set("Authorization", "Bearer wrong")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a good cookie with a wrong bearer token: %v %v", resp.StatusCode, err)
	} else {
		resp.Body.Close()
	}

	// Forged, tampered, expired and other daemons' cookies are refused.
	for _, c := range sessionCookies {
		a := cookieRequest(t, td, "GET", "/v1/pools", expandCookie(c.cookie, session, token), false, "", "")
		want := http.StatusUnauthorized
		if c.ok {
			want = http.StatusOK
		}
		if a.status != want {
			t.Errorf("%s cookie: %d, want %d: %s", c.name, a.status, want, a.body)
		}
	}

	// The form login redirects to the dashboard.
	a = cookieRequest(t, td, "POST", "/login", "", false, "application/x-www-form-urlencoded", url.Values{"token": {token}}.Encode())
	other := sessionCookie(t, a).Value
	if a.status != http.StatusSeeOther || a.header.Get("Location") != "/" || other == "" || other == session {
		t.Errorf("form login: %d %v", a.status, a.header)
	}
	// Log out: the cookie is removed, and a copy of it taken before
	// authenticates nothing any more; another session goes on.
	a = cookieRequest(t, td, "POST", "/logout", session, false, "", "")
	if c := sessionCookie(t, a); a.status != http.StatusNoContent || c.MaxAge >= 0 || c.Value != "" {
		t.Errorf("logout: %d, cookie %+v", a.status, c)
	}
	if a := cookieRequest(t, td, "GET", "/v1/pools", session, false, "", ""); a.status != http.StatusUnauthorized {
		t.Errorf("a copy of a logged-out cookie: %d, want 401", a.status)
	}
	if a := cookieRequest(t, td, "GET", "/v1/pools", other, false, "", ""); a.status != http.StatusOK {
		t.Errorf("another session after a logout: %d, want 200", a.status)
	}

	// A session outlives a restart on the same data directory; a logged-out
	// one stays out.
	td.stop()
	td2 := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.DataDir = dataDir })
	if td2.d.Token() != token {
		t.Fatal("the restarted daemon has another token")
	}
	if a := cookieRequest(t, td2, "GET", "/v1/dashboard", other, false, "", ""); a.status != http.StatusOK {
		t.Errorf("the session after a restart: %d %s", a.status, a.body)
	}
	if a := cookieRequest(t, td2, "GET", "/v1/dashboard", session, false, "", ""); a.status != http.StatusUnauthorized {
		t.Errorf("the logged-out session after a restart: %d, want 401", a.status)
	}
}

// The dashboard's state: GET /v1/dashboard and the event stream.
func TestDashboardState(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	ctx := context.Background()
	c := apiClient(td)
	j, err := c.Submit(ctx, []byte(apiSimJob))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job done", 60*time.Second, func() bool {
		j, err := c.Job(ctx, j.ID)
		return err == nil && j.State == api.Done
	})
	db := apiGet[api.Dashboard](t, td, "/v1/dashboard?history=true")
	if db.Instance == "" || len(db.Pools) != 3 || len(db.Hosts) != 16 || len(db.Types) != 3 {
		t.Fatalf("dashboard: instance %q, %d pools, %d hosts, %d types", db.Instance, len(db.Pools), len(db.Hosts), len(db.Types))
	}
	if db.Jobs.Counts[api.Done] != 1 || len(db.Jobs.Recent) != 1 || db.Jobs.Recent[0].ID != j.ID {
		t.Errorf("jobs: %+v", db.Jobs)
	}
	js := db.Jobs.Recent[0]
	if js.State != api.Done || js.Master == "" || js.Machines < 1 || js.PredictedS <= 0 || js.MeasuredS <= 0 || len(js.Clusters) == 0 {
		t.Errorf("job summary %+v: want the plan and both run times", js)
	}
	if len(db.History) == 0 || db.Sample.At.IsZero() || len(db.Sample.Servers) != 3 {
		t.Errorf("samples: %d in the history, last %+v", len(db.History), db.Sample)
	}
	servers := 0
	for _, n := range db.Sample.Servers {
		servers += n
	}
	if servers != 16 {
		t.Errorf("the sample counts %d servers, want 16", servers)
	}
	if a := apiAuthed(t, td, "GET", "/v1/dashboard?history=maybe", "", nil, offDoc); a.status != 400 || a.apiErr(t).Fields[0].Field != "history" {
		t.Errorf("history=maybe: %d %s", a.status, a.body)
	}
	// The job's explanation.
	full, err := c.Job(ctx, j.ID)
	if err != nil || !strings.Contains(full.Explanation, "master") {
		t.Errorf("the job's explanation: %q (%v)", full.Explanation, err)
	}

	// The stream: a retry hint, then whole states, the first with the
	// history, the next without.
	req, err := http.NewRequest("GET", td.addr+"/v1/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+td.d.Token())
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(rctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("events: %d %s", resp.StatusCode, ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	var events []api.Dashboard
	retry := false
	for len(events) < 3 && sc.Scan() {
		line := sc.Text()
		retry = retry || line == "retry: 500"
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			var e api.Dashboard
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				t.Fatalf("event data: %v", err)
			}
			events = append(events, e)
		}
	}
	if len(events) != 3 || !retry {
		t.Fatalf("%d events, retry hint %v (%v)", len(events), retry, sc.Err())
	}
	if len(events[0].History) == 0 || len(events[1].History) != 0 || events[1].Instance != db.Instance || !events[2].Now.After(events[1].Now) {
		t.Errorf("events: history %d then %d, instance %q, times %v %v", len(events[0].History), len(events[1].History),
			events[1].Instance, events[1].Now, events[2].Now)
	}
}

// flipFirst changes the first character of a base64 text to another
// character of the alphabet, so the text is always different.
func flipFirst(s string) string {
	c := byte('A')
	if s[0] == 'A' {
		c = 'B'
	}
	return string(c) + s[1:]
}
