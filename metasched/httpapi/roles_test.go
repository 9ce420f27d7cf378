package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/tlsx"
	"github.com/metasched/metasched/internal/tlsx/tlsxtest"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/store"
)

// roleCase is one route's request and the status each caller gets:
// alice (a user, who submitted the job {id}), bob (another user) and an
// operator.
type roleCase struct {
	route            string // the pattern of httpapi.Routes
	path             string // {id}: alice's job
	body             string
	alice, bob, oper int
	off              bool // a body the OpenAPI document refuses
}

// TestRoles holds every route of the API against each role: a user
// reaches its own jobs and the grid's shared views, another user's job is
// 404 (as no job), the operator's routes are 403; an operator reaches
// everything. A revoked token and its session authenticate nothing.
func TestRoles(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	ctx := context.Background()
	tokens := map[string]string{"operator": td.d.Token()}
	for _, tr := range []api.TokenRequest{{Name: "alice", Role: api.RoleUser}, {Name: "bob", Role: api.RoleUser}, {Name: "ops", Role: api.RoleOperator},
		{Name: "carol.b", Role: api.RoleUser}} {
		tc, err := td.d.CreateToken(ctx, tr)
		if err != nil {
			t.Fatal(err)
		}
		tokens[tr.Name] = tc.Secret
	}
	// alice's job, run to its end.
	a := apiRequest(t, td, "POST", "/v1/jobs", "Bearer "+tokens["alice"], "application/yaml", []byte(apiSimJob))
	var job api.Job
	if err := json.Unmarshal(a.body, &job); a.status != 201 || err != nil || job.Owner != "alice" {
		t.Fatalf("alice's submission: %d %s (%v)", a.status, a.body, err)
	}
	apiWaitState(t, apiClient(td), job.ID, api.Done, time.Minute)

	cases := []roleCase{
		{route: "POST /v1/jobs", body: apiSimJob, alice: 201, bob: 201, oper: 201},
		{route: "GET /v1/jobs", alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/jobs/{id}", alice: 200, bob: 404, oper: 200},
		{route: "POST /v1/jobs/{id}/cancel", alice: 409, bob: 404, oper: 409}, // done: past the check, nothing to cancel
		{route: "GET /v1/jobs/{id}/logs", alice: 200, bob: 404, oper: 200},
		{route: "POST /v1/jobs/{id}/vms/{vm}/resize", path: "/v1/jobs/{id}/vms/none/resize", body: `{"vcpus": "x"}`, alice: 400, bob: 404, oper: 400, off: true},
		{route: "GET /v1/jobs/{id}/outputs", alice: 404, bob: 404, oper: 404}, // an emulated job has no run directory
		{route: "GET /v1/jobs/{id}/outputs/{name...}", path: "/v1/jobs/{id}/outputs/none", alice: 404, bob: 404, oper: 404},
		{route: "POST /v1/plan", body: apiSimJob, alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/pools", alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/policy", alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/links", alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/calibration", alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/dashboard", alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/events", alice: 200, bob: 200, oper: 200},
		{route: "GET /v1/hosts", alice: 403, bob: 403, oper: 200},
		{route: "POST /v1/hosts/{name}/clear", path: "/v1/hosts/no-such-host/clear", alice: 403, bob: 403, oper: 404},
		{route: "POST /v1/hosts/{name}/drain", path: "/v1/hosts/no-such-host/drain", alice: 403, bob: 403, oper: 404},
		{route: "POST /v1/hosts/{name}/undrain", path: "/v1/hosts/no-such-host/undrain", alice: 403, bob: 403, oper: 404},
		{route: "GET /v1/vms", alice: 403, bob: 403, oper: 200},
		{route: "GET /v1/switches", alice: 403, bob: 403, oper: 200},
		{route: "POST /v1/switches", body: `{"from": "render", "to": "render"}`, alice: 403, bob: 403, oper: 400},
		{route: "GET /v1/tuning", alice: 403, bob: 403, oper: 200},
		{route: "POST /v1/calibrate", body: `{"site": "nowhere"}`, alice: 403, bob: 403, oper: 400},
		{route: "GET /v1/tokens", alice: 403, bob: 403, oper: 200},
		{route: "POST /v1/tokens", body: `{"name": "carol", "role": "user"}`, alice: 403, bob: 403, oper: 201},
		{route: "DELETE /v1/tokens/{name}", path: "/v1/tokens/carol", alice: 403, bob: 403, oper: 204},
		{route: "GET /v1/backup", alice: 403, bob: 403, oper: 200},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.route] = true
	}
	for _, rt := range httpapi.Routes {
		if rt.Access != httpapi.Public && !covered[rt.Pattern] {
			t.Errorf("route %s (%s) has no case", rt.Pattern, rt.Access)
		}
	}
	for _, c := range cases {
		method, path, _ := strings.Cut(c.route, " ")
		if c.path != "" {
			path = c.path
		}
		path = strings.ReplaceAll(path, "{id}", job.ID)
		for _, who := range []struct {
			name, token string
			want        int
		}{{"bob", tokens["bob"], c.bob}, {"alice", tokens["alice"], c.alice}, {"operator", tokens["operator"], c.oper}, {"ops", tokens["ops"], c.oper}} {
			if who.name == "ops" && c.oper == 201 && method == "POST" && path == "/v1/tokens" {
				continue // carol exists now
			}
			if who.name == "ops" && method == "DELETE" {
				continue // carol is gone
			}
			got, body := roleRequest(t, td, method, path, who.token, c.body, offDocIf(c.off)...)
			if got != who.want {
				t.Errorf("%s as %s: %d, want %d: %s", c.route, who.name, got, who.want, body)
			}
			if got == 403 && !strings.Contains(body, "is an operator's: "+who.name+" has the role user") {
				t.Errorf("%s as %s: the 403 does not say why: %s", c.route, who.name, body)
			}
			// bob's 404 on alice's job is the answer for no job; the
			// others' 404s are past the check (no outputs, no file).
			if noJob := strings.Contains(body, "no job "); got == 404 && rt(c.route).Owned() && noJob != (who.name == "bob") {
				t.Errorf("%s as %s: 404 %s", c.route, who.name, body)
			}
		}
	}

	// What each lists: a user its own jobs, an operator all.
	list := func(who string) []string {
		_, body := roleRequest(t, td, "GET", "/v1/jobs", tokens[who], "")
		var l api.JobList
		if err := json.Unmarshal([]byte(body), &l); err != nil {
			t.Fatal(err)
		}
		var owners []string
		for _, j := range l.Jobs {
			owners = append(owners, j.Owner)
		}
		return owners
	}
	if got := list("alice"); len(got) != 2 || got[0] != "alice" || got[1] != "alice" {
		t.Errorf("alice lists the jobs of %v, want her two", got)
	}
	if got := list("bob"); len(got) != 1 || got[0] != "bob" {
		t.Errorf("bob lists the jobs of %v, want his one", got)
	}
	if got := list("operator"); len(got) != 5 {
		t.Errorf("the operator lists the jobs of %v, want all five", got)
	}
	// The dashboard shows a user its own jobs and no hosts or switches.
	_, body := roleRequest(t, td, "GET", "/v1/dashboard", tokens["bob"], "")
	var db api.Dashboard
	if err := json.Unmarshal([]byte(body), &db); err != nil {
		t.Fatal(err)
	}
	if db.Viewer != (api.Principal{Name: "bob", Role: api.RoleUser}) || len(db.Hosts) != 0 || len(db.Switches) != 0 {
		t.Errorf("bob's dashboard: viewer %+v, %d hosts, %d switches", db.Viewer, len(db.Hosts), len(db.Switches))
	}
	for _, j := range db.Jobs.Recent {
		if j.Owner != "bob" {
			t.Errorf("bob's dashboard shows %s's job %s", j.Owner, j.ID)
		}
	}

	// A session of a token whose name has a dot.
	login := apiRequest(t, td, "POST", "/login", "", "application/json", []byte(`{"token": "`+tokens["carol.b"]+`"}`))
	if a := cookieRequest(t, td, "GET", "/v1/jobs", sessionCookie(t, login).Value, false, "", ""); a.status != 200 {
		t.Errorf("carol.b's session: %d, want 200", a.status)
	}

	// A session of alice's, then her token revoked: both refused.
	login = apiRequest(t, td, "POST", "/login", "", "application/json", []byte(`{"token": "`+tokens["alice"]+`"}`))
	cookie := sessionCookie(t, login)
	if a := cookieRequest(t, td, "GET", "/v1/hosts", cookie.Value, false, "", ""); a.status != 403 {
		t.Errorf("alice's session on /v1/hosts: %d, want 403", a.status)
	}
	if a := cookieRequest(t, td, "GET", "/v1/jobs/"+job.ID, cookie.Value, false, "", ""); a.status != 200 {
		t.Errorf("alice's session on her job: %d, want 200", a.status)
	}
	if err := td.d.RevokeToken(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if got, body := roleRequest(t, td, "GET", "/v1/pools", tokens["alice"], ""); got != 401 {
		t.Errorf("alice's revoked token: %d, want 401: %s", got, body)
	}
	if a := cookieRequest(t, td, "GET", "/v1/pools", cookie.Value, false, "", ""); a.status != 401 {
		t.Errorf("alice's session after her token's revocation: %d, want 401", a.status)
	}
	// A new token of the name, an operator's: alice's old session stays
	// dead (it was bound to the revoked token, not to the name), and a
	// session forged for the name with the old token's key too; the new
	// token's own session is an operator's.
	oldKey := store.HashToken(tokens["alice"])
	made, err := td.d.CreateToken(ctx, api.TokenRequest{Name: "alice", Role: api.RoleOperator})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{cookie.Value, forgeAs(td.d.Token(), time.Now().Add(time.Hour), "alice", oldKey)} {
		for _, path := range []string{"/v1/hosts", "/v1/pools", "/v1/jobs"} {
			if a := cookieRequest(t, td, "GET", path, c, false, "", ""); a.status != 401 {
				t.Errorf("a session of alice's revoked token, with a new operator token named alice: GET %s %d, want 401", path, a.status)
			}
		}
	}
	login = apiRequest(t, td, "POST", "/login", "", "application/json", []byte(`{"token": "`+made.Secret+`"}`))
	if a := cookieRequest(t, td, "GET", "/v1/hosts", sessionCookie(t, login).Value, false, "", ""); a.status != 200 {
		t.Errorf("the new operator token alice's session on /v1/hosts: %d, want 200", a.status)
	}
	if a := cookieRequest(t, td, "GET", "/v1/hosts", forgeAs(td.d.Token(), time.Now().Add(time.Hour), "alice", store.HashToken(made.Secret)), false, "", ""); a.status != 200 {
		t.Errorf("a session forged with the new token's key (the scheme): %d, want 200", a.status)
	}
}

// rt is the route of a pattern.
func rt(pattern string) httpapi.Route {
	for _, r := range httpapi.Routes {
		if r.Pattern == pattern {
			return r
		}
	}
	panic("no route " + pattern)
}

// roleRequest sends a request with a bearer token and a body (JSON, or
// else a YAML job file) and returns the status and body (the first bytes
// of a stream); each mark changes the request (offDoc).
func roleRequest(t *testing.T, td *testDaemon, method, path, token, body string, marks ...func(*http.Request)) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, td.addr+path, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	switch {
	case strings.HasPrefix(body, "{"):
		req.Header.Set("Content-Type", "application/json")
	case body != "":
		req.Header.Set("Content-Type", "application/yaml")
	}
	for _, m := range marks {
		m(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if path == "/v1/events" && resp.StatusCode == http.StatusOK {
		return resp.StatusCode, "" // a stream: its status is the answer
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// A client certificate of the grid's CA authenticates a client to a
// daemon serving TLS, with the role it names; a daemon serving TLS with
// no certificate and no token is 401.
func TestClientCertificates(t *testing.T) {
	p := tlsxtest.New(t)
	files := p.Issue(t, "daemon", tlsx.Request{Identity: tlsx.Daemon(), Hosts: []string{"127.0.0.1"}})
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.TLS = &files })
	pool, err := tlsx.CAPool(p.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string, id *tlsx.Identity) int {
		t.Helper()
		cfg := &tls.Config{RootCAs: pool}
		if id != nil {
			f := p.Issue(t, "client-"+id.Name, tlsx.Request{Identity: *id})
			pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: time.Minute}
		resp, err := hc.Get(td.addr + path)
		if err != nil {
			t.Fatalf("GET %s as %v: %v", path, id, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	alice, ops := tlsx.Client("alice", tlsx.RoleUser), tlsx.Client("ops", tlsx.RoleOperator)
	for _, c := range []struct {
		path string
		id   *tlsx.Identity
		want int
	}{
		{"/v1/pools", nil, 401}, {"/v1/pools", &alice, 200}, {"/v1/hosts", &alice, 403}, {"/v1/hosts", &ops, 200},
	} {
		if got := get(c.path, c.id); got != c.want {
			t.Errorf("GET %s as %v: %d, want %d", c.path, c.id, got, c.want)
		}
	}
	if !strings.HasPrefix(td.addr, "https://") {
		t.Errorf("the daemon serves %s, want https", td.addr)
	}

	// A user's certificate named operator is not the operator token: it
	// neither lists, reads nor cancels the operator token's jobs, and its
	// own job's owner names its kind.
	// do sends a request with the certificate of id, or with the operator
	// token when id has no name.
	do := func(method, path, body string, id tlsx.Identity) (int, []byte) {
		t.Helper()
		cfg := &tls.Config{RootCAs: pool}
		if id.Name != "" {
			f := p.Issue(t, "client-"+id.Name+"-"+id.Role, tlsx.Request{Identity: id})
			pair, err := tls.LoadX509KeyPair(f.Cert, f.Key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: time.Minute}
		req, err := http.NewRequest(method, td.addr+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/yaml")
		}
		if id.Name == "" {
			req.Header.Set("Authorization", "Bearer "+td.d.Token())
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %v: %v", method, path, id, err)
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, data
	}
	code, body := do("POST", "/v1/jobs", apiSimJob, tlsx.Identity{})
	var opsJob api.Job
	if err := json.Unmarshal(body, &opsJob); code != 201 || err != nil || opsJob.Owner != api.OperatorName {
		t.Fatalf("the operator token's submission: %d %s (%v)", code, body, err)
	}
	fake := tlsx.Client(api.OperatorName, tlsx.RoleUser)
	if code, body := do("GET", "/v1/jobs", "", fake); code != 200 || strings.Contains(string(body), opsJob.ID) {
		t.Errorf("a user's certificate named operator lists the operator token's job: %d %s", code, body)
	}
	for _, r := range []struct{ method, path string }{{"GET", "/v1/jobs/" + opsJob.ID}, {"POST", "/v1/jobs/" + opsJob.ID + "/cancel"}, {"GET", "/v1/jobs/" + opsJob.ID + "/logs"}} {
		if code, body := do(r.method, r.path, "", fake); code != 404 {
			t.Errorf("%s %s with a user's certificate named operator: %d %s, want 404", r.method, r.path, code, body)
		}
	}
	code, body = do("POST", "/v1/jobs", apiSimJob, fake)
	var own api.Job
	if err := json.Unmarshal(body, &own); code != 201 || err != nil || own.Owner != api.CertOwnerPrefix+api.OperatorName {
		t.Errorf("the certificate's own job: %d, owner %q (%v), want %s", code, own.Owner, err, api.CertOwnerPrefix+api.OperatorName)
	}
	if code, body := do("GET", "/v1/jobs/"+own.ID, "", fake); code != 200 {
		t.Errorf("the certificate's own job: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/jobs/"+opsJob.ID, "", tlsx.Identity{}); code != 200 || strings.Contains(string(body), `"state":"cancelled"`) {
		t.Errorf("the operator token's job after the certificate's cancel: %d %s", code, body)
	}
}

// The host-command executor runs jobs' commands on the daemon's own
// machine: a user's submission is refused (403, saying why) unless the
// configuration's executor.allow_users lets users; an operator's goes.
func TestHostCommandForUsers(t *testing.T) {
	for _, allow := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow_users %v", allow), func(t *testing.T) {
			td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
				c.Executor = metasched.ExecutorConfig{Name: metasched.HostCommand, RunAs: "nobody", AllowUsers: allow}
			})
			tc, err := td.d.CreateToken(context.Background(), api.TokenRequest{Name: "alice", Role: api.RoleUser})
			if err != nil {
				t.Fatal(err)
			}
			job := "name: hello\ntype: sim\ntasks: 1\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\ncommand: [\"true\"]\n"
			want := 403
			if allow {
				want = 201
			}
			if got, body := roleRequest(t, td, "POST", "/v1/jobs", tc.Secret, job); got != want ||
				!allow && !strings.Contains(body, "runs jobs' commands on its own machine") {
				t.Errorf("alice's job: %d, want %d: %s", got, want, body)
			}
			if got, body := roleRequest(t, td, "POST", "/v1/jobs", td.d.Token(), job); got != 201 {
				t.Errorf("the operator's job: %d, want 201: %s", got, body)
			}
		})
	}
}

// An event stream ends as soon as the credential that opened it no longer
// proves who it did: its bearer token revoked, its session logged out, the
// token of its session revoked and made again under its name as an
// operator's; a stream of another credential goes on. (A minute bounds
// each wait only to catch a stream that never ends.)
func TestStreamsEndWithTheirCredential(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	ctx := context.Background()
	made := func(name, role string) string {
		tc, err := td.d.CreateToken(ctx, api.TokenRequest{Name: name, Role: role})
		if err != nil {
			t.Fatal(err)
		}
		return tc.Secret
	}
	// open starts a stream with mark's credential, reads its first event
	// and returns a channel that says when the stream ended.
	open := func(name string, mark func(*http.Request)) <-chan struct{} {
		t.Helper()
		rctx, cancel := context.WithCancel(ctx) // ended by the test's end only
		t.Cleanup(cancel)
		req, err := http.NewRequestWithContext(rctx, "GET", td.addr+"/v1/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		mark(req)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%s: events %d", name, resp.StatusCode)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() && !strings.HasPrefix(sc.Text(), "data: ") {
		}
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			defer resp.Body.Close()
			for sc.Scan() {
			}
		}()
		return ended
	}
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	cookie := func(v string) func(*http.Request) {
		return func(r *http.Request) { r.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: v}) }
	}
	login := func(tok string) string {
		a := apiRequest(t, td, "POST", "/login", "", "application/json", []byte(`{"token": "`+tok+`"}`))
		return sessionCookie(t, a).Value
	}
	waitEnd := func(what string, ended <-chan struct{}) {
		t.Helper()
		select {
		case <-ended:
		case <-time.After(time.Minute):
			t.Errorf("%s: the stream goes on", what)
		}
	}
	goesOn := func(what string, ended <-chan struct{}) {
		t.Helper()
		select {
		case <-ended:
			t.Errorf("%s: the stream ended", what)
		default:
		}
	}

	erin, frank := made("erin", api.RoleUser), made("frank", api.RoleUser)
	byErin, byFrank := open("erin's token", bearer(erin)), open("frank's token", bearer(frank))
	erinSession := login(erin)
	byErinSession := open("erin's session", cookie(erinSession))
	if err := td.d.RevokeToken(ctx, "erin"); err != nil {
		t.Fatal(err)
	}
	waitEnd("erin's token revoked", byErin)
	waitEnd("erin's token revoked, her session's stream", byErinSession)
	goesOn("erin's token revoked, frank's", byFrank)

	// A session logged out.
	frankSession := login(frank)
	byFrankSession := open("frank's session", cookie(frankSession))
	if a := cookieRequest(t, td, "POST", "/logout", frankSession, true, "", ""); a.status != http.StatusNoContent {
		t.Fatalf("logout: %d %s", a.status, a.body)
	}
	waitEnd("frank's session logged out", byFrankSession)
	goesOn("frank's session logged out, his token's", byFrank)

	// A session whose token is revoked and made again, an operator's.
	gina := made("gina", api.RoleUser)
	byGina := open("gina's session", cookie(login(gina)))
	if err := td.d.RevokeToken(ctx, "gina"); err != nil {
		t.Fatal(err)
	}
	made("gina", api.RoleOperator)
	waitEnd("gina's token made again as an operator's", byGina)
}
