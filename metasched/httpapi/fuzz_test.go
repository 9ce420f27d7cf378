package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/jobfile"
	"github.com/metasched/metasched/selection"
)

// The fuzz targets of the daemon's request bodies drive the real handler
// (httpapi.New on a daemon of the demo's configuration, with in-process
// agents on the libvirt test driver) in the process, through httptest. Each
// fuzzing process runs its own daemon, started once. Every answer is a 2xx
// or a 4xx with the API's JSON error; never a 5xx, and a refused request
// stores nothing.

// fuzzServer is a daemon and its handler.
type fuzzServer struct {
	d *metasched.Daemon
	h http.Handler
}

// startFuzzServer starts a daemon for a fuzz target: no switching policy
// (an accepted job waits only for hosts), and emulated runs a million
// times faster than predicted, so that the jobs the fuzzer gets accepted
// finish at once.
func startFuzzServer(f *testing.F) *fuzzServer {
	td := daemontest.Start(f, nil, metasched.Options{}, func(c *metasched.Config) {
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 1e-6
	})
	return &fuzzServer{d: td.D, h: httpapi.New(httpapi.All(td.D), zerolog.Nop())}
}

// serve sends one request with the token (auth true) and returns the
// answer, which is held to the OpenAPI document (httpapi.CheckOpenAPI; the
// request is anything the fuzzer makes: off the document).
func (s *fuzzServer) serve(t testing.TB, method, target string, header http.Header, body []byte, auth bool) apiAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, "http://metasched"+target, bytes.NewReader(body))
	if err != nil {
		t.Fatalf("request %s %s: %v", method, target, err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if auth {
		req.Header.Set("Authorization", "Bearer "+s.d.Token())
	}
	offDoc(req)
	rec := httptest.NewRecorder()
	httpapi.CheckOpenAPI(t, s.h).ServeHTTP(rec, req)
	return apiAnswer{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// jobCount is the number of jobs in the store.
func (s *fuzzServer) jobCount() int {
	n := 0
	for _, c := range s.d.Store().Counts() {
		n += c
	}
	return n
}

// types are the names of the daemon's job types.
func (s *fuzzServer) types() []string {
	var out []string
	for _, jt := range s.d.Types() {
		out = append(out, jt.Name)
	}
	return out
}

// checkRefusal fails the test unless the answer is a 4xx among allowed
// with the API's JSON error: a code, a message and a problem for each field
// named. It returns the error.
func checkRefusal(t *testing.T, what string, a apiAnswer, allowed ...int) api.APIError {
	t.Helper()
	if a.status >= 500 || a.status < 400 || !slices.Contains(allowed, a.status) {
		t.Fatalf("%s: status %d (want one of %v): %s", what, a.status, allowed, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: error answer %d with Content-Type %q: %s", what, a.status, ct, a.body)
	}
	var e api.APIError
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == "" || e.Code == "" {
		t.Fatalf("%s: error answer %d is not the API's error (%v): %s", what, a.status, err, a.body)
	}
	for _, fe := range e.Fields {
		if fe.Problem == "" {
			t.Fatalf("%s: field %q without a problem: %s", what, fe.Field, a.body)
		}
	}
	if len(a.header.Values("Set-Cookie")) != 0 {
		t.Fatalf("%s: a refusal sets a cookie: %v", what, a.header.Values("Set-Cookie"))
	}
	return e
}

// decodeAnswer decodes a 2xx answer strictly into out.
func decodeAnswer(t *testing.T, what string, a apiAnswer, out any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		t.Fatalf("%s: answer %d does not decode as %T: %v\n%s", what, a.status, out, err, a.body)
	}
}

// jobField matches the fields of a job file.
var jobField = regexp.MustCompile(`^(name|type|tasks|task_ops|task_bytes|efficiency|vm|vm\.vcpus|vm\.memory_mib|command|command\[[0-9]+\]|walltime|` +
	`inputs|inputs\[[0-9]+\](\.(path|content|data|from))?|outputs|outputs\[[0-9]+\]|master|placement)$`)

// FuzzSubmitJob posts job files to POST /v1/jobs (plan false) or POST
// /v1/plan. A job is accepted (201, or 200 for a plan) only when the job
// stored (none for a plan) passes the job's rules and has a type of the
// daemon; a refused job stores nothing and names, for each problem, a
// field of the job file, the unknown key, or none (a problem of the whole
// body).
func FuzzSubmitJob(f *testing.F) {
	for _, plan := range []bool{false, true} {
		for _, tc := range apiRejectedJobs {
			f.Add(tc.ctype, []byte(tc.body), plan)
		}
		f.Add("application/yaml", []byte(apiSimJob), plan)
		f.Add("", []byte(apiLongJob), plan)
		f.Add("application/json", []byte(`{"name":"j","type":"etl","tasks":3,"task_ops":1e9,"task_bytes":0,"command":["true"]}`), plan)
		f.Add("application/yaml", []byte(apiSimJob+"master: latam-b\n"), plan)
		f.Add("application/yaml", []byte(apiSimJob+"placement: mct\n"), plan)
		for _, j := range demo.Stream(3, time.Second, 1) {
			f.Add("text/plain", j.Body, plan)
		}
	}
	s := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, ctype string, body []byte, plan bool) {
		path, want := "/v1/jobs", http.StatusCreated
		if plan {
			path, want = "/v1/plan", http.StatusOK
		}
		h := http.Header{}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		before := s.jobCount()
		a := s.serve(t, "POST", path, h, body, true)
		after := s.jobCount()
		what := "POST " + path
		if a.status != want {
			e := checkRefusal(t, what, a, 400, 413, 415)
			for _, fe := range e.Fields {
				if fe.Field != "" && !jobField.MatchString(fe.Field) && fe.Problem != "unknown field" && fe.Problem != "duplicate field" {
					t.Fatalf("%s: problem %q names %q, not a field of a job file: %s", what, fe.Problem, fe.Field, a.body)
				}
			}
			if after != before {
				t.Fatalf("%s: refused with %d, but the store went from %d to %d jobs", what, a.status, before, after)
			}
			return
		}
		if plan {
			var p api.PlanResult
			decodeAnswer(t, what, a, &p)
			if after != before {
				t.Fatalf("%s: a dry run stored a job (%d → %d)", what, before, after)
			}
			return
		}
		var j api.Job
		decodeAnswer(t, what, a, &j)
		if after != before+1 {
			t.Fatalf("%s: accepted, but the store went from %d to %d jobs", what, before, after)
		}
		sj, err := s.d.Store().Job(context.Background(), j.ID)
		if err != nil {
			t.Fatalf("%s: the job accepted, %s, is not in the store: %v", what, j.ID, err)
		}
		var spec selection.Job
		if err := json.Unmarshal(sj.Spec, &spec); err != nil {
			t.Fatalf("%s: the stored spec of %s does not decode: %v\n%s", what, j.ID, err, sj.Spec)
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("%s: job %s stored with a spec that breaks the job's rules: %v\n%s", what, j.ID, err, sj.Spec)
		}
		if spec.Type != sj.Type || !slices.Contains(s.types(), sj.Type) {
			t.Fatalf("%s: job %s stored with type %q (spec %q), not one of %v", what, j.ID, sj.Type, spec.Type, s.types())
		}
	})
}

// FuzzLogin posts login bodies (JSON or a form; "{token}" stands for the
// daemon's token) to POST /login: a session is given only for a body whose
// token is the daemon's; anything else is a 4xx that sets no cookie.
func FuzzLogin(f *testing.F) {
	for _, c := range loginRefused {
		f.Add(c.ctype, c.body)
	}
	f.Add("application/json", `{"tokn": "x"}`)
	f.Add("text/csv", "x")
	f.Add("application/json", `{"token": "{token}"}`)
	f.Add("", ` {"token": " {token} "}`)
	f.Add("application/x-www-form-urlencoded", "token={token}")
	f.Add("application/x-www-form-urlencoded; charset=utf-8", "a=1&token={token}&token=x")
	s := startFuzzServer(f)
	token := s.d.Token()
	f.Fuzz(func(t *testing.T, ctype, body string) {
		body = strings.ReplaceAll(body, "{token}", token)
		h := http.Header{}
		if ctype != "" {
			h.Set("Content-Type", ctype)
		}
		a := s.serve(t, "POST", "/login", h, []byte(body), false)
		if a.status != http.StatusOK && a.status != http.StatusSeeOther {
			checkRefusal(t, "login", a, 400, 401, 413, 415)
			return
		}
		// The token the body carried, read independently of the server.
		var sent string
		if a.status == http.StatusSeeOther {
			q, err := url.ParseQuery(body)
			if err != nil {
				t.Fatalf("login: a form that does not parse (%v) gave a session: %q", err, body)
			}
			sent = q.Get("token")
		} else {
			var lr struct{ Token string }
			if err := json.Unmarshal([]byte(body), &lr); err != nil {
				t.Fatalf("login: a body that does not decode (%v) gave a session: %q", err, body)
			}
			sent = lr.Token
		}
		if strings.TrimSpace(sent) != token {
			t.Fatalf("login: a body with the token %q gave a session", sent)
		}
		cookies := (&http.Response{Header: a.header}).Cookies()
		if len(cookies) != 1 || cookies[0].Name != httpapi.SessionCookie || cookies[0].Value == "" {
			t.Fatalf("login: %d without one session cookie: %v", a.status, a.header.Values("Set-Cookie"))
		}
	})
}

// FuzzSessionCookie sends GET /v1/pools with a fuzzed Cookie header (no
// token). "{exp}", "{id}" and "{mac}" stand for the parts of a session the
// daemon gave, "{revoked}" for one logged out, and the other templates of
// expandCookie for forged cookies. The request is served only when the
// session cookie, as a client's request carries it, is one the daemon gave
// (or forged with its token) and not logged out: byte for byte.
func FuzzSessionCookie(f *testing.F) {
	for _, c := range sessionCookies {
		f.Add(httpapi.SessionCookie + "=" + c.cookie)
	}
	f.Add(httpapi.SessionCookie + "={exp}.{id}.{mac}")
	f.Add(httpapi.SessionCookie + `="{exp}.{id}.{mac}"`)
	f.Add("a=b; " + httpapi.SessionCookie + "={exp}.{id}.{mac}; c=d")
	f.Add(httpapi.SessionCookie + "={revoked}")
	f.Add(httpapi.SessionCookie + "=; " + httpapi.SessionCookie + "={exp}.{id}.{mac}")
	s := startFuzzServer(f)
	token := s.d.Token()
	login := func() string {
		b, err := json.Marshal(api.LoginRequest{Token: token})
		if err != nil {
			f.Fatal(err)
		}
		a := s.serve(f, "POST", "/login", http.Header{"Content-Type": {"application/json"}}, b, false)
		for _, c := range (&http.Response{Header: a.header}).Cookies() {
			if c.Name == httpapi.SessionCookie {
				return c.Value
			}
		}
		f.Fatalf("login: %d %s", a.status, a.body)
		return ""
	}
	session, revoked := login(), login()
	req := httptest.NewRequest("POST", "/logout", nil)
	req.AddCookie(&http.Cookie{Name: httpapi.SessionCookie, Value: revoked})
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNoContent {
		f.Fatalf("logout: %d %s", rec.Code, rec.Body)
	}
	f.Fuzz(func(t *testing.T, cookie string) {
		cookie = strings.ReplaceAll(expandCookie(cookie, session, token), "{revoked}", revoked)
		h := http.Header{"Cookie": {cookie}}
		a := s.serve(t, "GET", "/v1/pools", h, nil, false)
		// The session cookie the daemon's handler reads from that header.
		var sent string
		if c, err := (&http.Request{Header: h}).Cookie(httpapi.SessionCookie); err == nil {
			sent = c.Value
		}
		good := sent == session || sent != "" && sent == expandCookie("{forged}", session, token)
		if a.status == http.StatusOK {
			if !good {
				t.Fatalf("GET /v1/pools served with the session cookie %q, which the daemon did not give (it gave %q)", sent, session)
			}
			var pools []api.Pool
			decodeAnswer(t, "GET /v1/pools", a, &pools)
			return
		}
		e := checkRefusal(t, "GET /v1/pools", a, 401)
		if good {
			t.Fatalf("the daemon's own session %q refused: %s", sent, e.Error)
		}
	})
}

// FuzzClearHost posts bodies to POST /v1/hosts/{name}/clear: a host that
// is not stranded is never touched, and every host stays in a pool of the
// daemon.
func FuzzClearHost(f *testing.F) {
	f.Add("spain-0", []byte(""))
	f.Add("spain-0", []byte(`{"pool": "render"}`))
	f.Add("spain-0", []byte(`{"pool": "gpu"}`))
	f.Add("mars-1", []byte(`{}`))
	f.Add("spain-0", []byte(`{"pool": 3}`))
	f.Add("spain-0", []byte(`{"pool": "render", "force": true}`))
	f.Add("", []byte(`{"pool": "render"}`))
	s := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		if p := url.PathEscape(name); p == "" || p == "." || p == ".." {
			return // not a path of a host: the router redirects to the clean path
		}
		what := fmt.Sprintf("POST /v1/hosts/%q/clear", name)
		a := s.serve(t, "POST", "/v1/hosts/"+url.PathEscape(name)+"/clear", http.Header{"Content-Type": {"application/json"}}, body, true)
		if a.status == http.StatusOK {
			t.Fatalf("%s: a host that is not stranded was cleared: %s", what, a.body)
		}
		checkRefusal(t, what, a, 400, 404, 405, 409, 413)
		for _, h := range s.d.Hosts() {
			if !slices.Contains(s.types(), h.Pool) {
				t.Fatalf("%s: host %s is in pool %q, not one of %v", what, h.Name, h.Pool, s.types())
			}
		}
	})
}

// FuzzResizeVM posts bodies to POST /v1/jobs/{id}/vms/{vm}/resize of a
// running job's VM (VMs of 1 vCPU and 1024 MiB that may grow by 2 vCPUs and
// 512 MiB): a resize the daemon takes leaves the VM within its maxima and
// sized as asked, every other is refused with a 4xx, and the job runs on.
func FuzzResizeVM(f *testing.F) {
	f.Add([]byte(`{"vcpus": 2}`))
	f.Add([]byte(`{"memory_mib": 1536}`))
	f.Add([]byte(`{"vcpus": 1, "memory_mib": 1024}`))
	f.Add([]byte(`{"vcpus": 4}`))
	f.Add([]byte(`{"vcpus": -1}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(``))
	f.Add([]byte(`{"vcpus": "x"}`))
	f.Add([]byte(`{"vcpus": 2, "host": "spain-0"}`))
	f.Add([]byte(`{"vcpus": 1e3}`))
	f.Add([]byte(`{"vcpus": 2} {}`))
	td := daemontest.Start(f, nil, metasched.Options{}, func(c *metasched.Config) {
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 1
		c.VMHeadroom = metasched.VMHeadroom{VCPUs: 2, MemoryMiB: 512}
	})
	s := &fuzzServer{d: td.D, h: httpapi.New(httpapi.All(td.D), zerolog.Nop())}
	ctx := context.Background()
	job, err := td.D.Submit(ctx, jobfile.Decode([]byte(apiLongJob)))
	if err != nil {
		f.Fatal(err)
	}
	var vm string
	daemontest.WaitFor(f, "the job running", time.Minute, func() bool {
		j, err := td.D.Job(ctx, job.ID)
		if err != nil {
			f.Fatal(err)
		}
		if j.State == api.Running && len(j.VMs) > 0 {
			vm = j.VMs[len(j.VMs)-1].Name
		}
		return vm != ""
	})
	path := "/v1/jobs/" + job.ID + "/vms/" + vm + "/resize"
	f.Fuzz(func(t *testing.T, body []byte) {
		a := s.serve(t, "POST", path, http.Header{"Content-Type": {"application/json"}}, body, true)
		what := fmt.Sprintf("POST %s %q", path, body)
		if a.status == http.StatusOK {
			var got api.VM
			if err := json.Unmarshal(a.body, &got); err != nil {
				t.Fatalf("%s: 200 with %s: %v", what, a.body, err)
			}
			var asked api.ResizeRequest
			if err := json.Unmarshal(body, &asked); err != nil {
				t.Fatalf("%s: taken, yet not a resize request: %v", what, err)
			}
			if got.Name != vm || got.VCPUs < 1 || got.VCPUs > got.MaxVCPUs || got.MemoryMiB > got.MaxMemoryMiB ||
				(asked.VCPUs != 0 && got.VCPUs != asked.VCPUs) || (asked.MemoryMiB != 0 && got.MemoryMiB != asked.MemoryMiB) {
				t.Fatalf("%s: 200 with %+v: want the VM as asked, within its maxima", what, got)
			}
		} else {
			checkRefusal(t, what, a, 400, 404, 409, 413)
		}
		j, err := td.D.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.Running {
			t.Fatalf("%s: the job is %s: %s", what, j.State, j.Reason)
		}
	})
}

// FuzzDrainHost posts bodies to POST /v1/hosts/{name}/drain: a body that
// is not a drain request drains nothing (400), one that is drains the host
// (200, draining or drained) and an undrain returns it to its pool; every
// host stays in a pool of the daemon.
func FuzzDrainHost(f *testing.F) {
	f.Add("spain-0", []byte(""))
	f.Add("spain-0", []byte(`{}`))
	f.Add("spain-0", []byte(`{"move": true}`))
	f.Add("spain-0", []byte(`{"move": "yes"}`))
	f.Add("spain-0", []byte(`{"move": true, "force": true}`))
	f.Add("spain-0", []byte(`{"move": false} {}`))
	f.Add("mars-1", []byte(`{}`))
	f.Add("", []byte(`{}`))
	s := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		if p := url.PathEscape(name); p == "" || p == "." || p == ".." {
			return // not a path of a host: the router redirects to the clean path
		}
		what := fmt.Sprintf("POST /v1/hosts/%q/drain", name)
		path := "/v1/hosts/" + url.PathEscape(name)
		a := s.serve(t, "POST", path+"/drain", http.Header{"Content-Type": {"application/json"}}, body, true)
		if a.status == http.StatusOK {
			var h api.HostView
			if err := json.Unmarshal(a.body, &h); err != nil || h.Name != name || (h.State != api.HostDraining && h.State != api.HostDrained) {
				t.Fatalf("%s: 200 with %s (%v): want the host, draining or drained", what, a.body, err)
			}
			var dr api.DrainRequest
			if err := json.Unmarshal(body, &dr); len(bytes.TrimSpace(body)) > 0 && err != nil {
				t.Fatalf("%s %q: taken, yet not one drain request: %v", what, body, err)
			}
			u := s.serve(t, "POST", path+"/undrain", nil, nil, true)
			if u.status != http.StatusOK {
				t.Fatalf("%s: the undrain after it: %d %s", what, u.status, u.body)
			}
		} else {
			checkRefusal(t, what, a, 400, 404, 405, 409, 413)
		}
		for _, h := range s.d.Hosts() {
			if h.State == api.HostDraining || h.State == api.HostDrained {
				t.Fatalf("%s: host %s is left %s", what, h.Name, h.State)
			}
			if !slices.Contains(s.types(), h.Pool) {
				t.Fatalf("%s: host %s is in pool %q, not one of %v", what, h.Name, h.Pool, s.types())
			}
		}
	})
}

// FuzzRequestSwitch posts bodies to POST /v1/switches: a switch starts
// (202) only between two different pools of the daemon, and every switch
// listed is between pools of the daemon.
func FuzzRequestSwitch(f *testing.F) {
	f.Add([]byte(`{"from": "render", "to": "sim"}`))
	f.Add([]byte(`{"from": "render", "to": "render"}`))
	f.Add([]byte(`{"from": "gpu", "to": "sim"}`))
	f.Add([]byte(`{"from": "render"}`))
	f.Add([]byte(`{"from": "render", "to": "sim", "host": "spain-0"}`))
	f.Add([]byte(`{"from": 1, "to": "sim"}`))
	f.Add([]byte(`{"from": "render", "to": "sim"} {}`))
	f.Add([]byte(``))
	s := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := s.serve(t, "POST", "/v1/switches", http.Header{"Content-Type": {"application/json"}}, body, true)
		types := s.types()
		if a.status == http.StatusAccepted {
			var sv api.SwitchView
			decodeAnswer(t, "POST /v1/switches", a, &sv)
			if sv.From == sv.To || !slices.Contains(types, sv.From) || !slices.Contains(types, sv.To) {
				t.Fatalf("POST /v1/switches: a switch from %q to %q started", sv.From, sv.To)
			}
		} else {
			checkRefusal(t, "POST /v1/switches", a, 400, 409, 413)
		}
		l, err := s.d.Switches(context.Background(), api.SwitchFilter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, sv := range l.Switches {
			if sv.From == sv.To || !slices.Contains(types, sv.From) || !slices.Contains(types, sv.To) {
				t.Fatalf("switch %s from %q to %q is listed", sv.ID, sv.From, sv.To)
			}
		}
	})
}

// FuzzCalibrate posts bodies to POST /v1/calibrate on a daemon whose
// sites boot no guest (in-process agents on libvirt's test driver): every
// answer is a refusal, 400 naming the site or the body's problem, 409 for a
// site that cannot be calibrated, 413; never a 5xx, and no figure appears.
func FuzzCalibrate(f *testing.F) {
	for _, b := range []string{``, `{}`, `{"site": "spain"}`, `{"site": "mars"}`, `{"site": ""}`, `{"site": 3}`,
		`{"sites": "spain"}`, `{"site": "spain"} {}`, `[]`, `null`, `{"site": "Spain!"}`} {
		f.Add([]byte(b))
	}
	s := startFuzzServer(f)
	sites := []string{"latam-a", "latam-b", "spain"}
	f.Fuzz(func(t *testing.T, body []byte) {
		a := s.serve(t, "POST", "/v1/calibrate", http.Header{"Content-Type": {"application/json"}}, body, true)
		e := checkRefusal(t, "POST /v1/calibrate", a, 400, 409, 413)
		for _, fe := range e.Fields {
			if fe.Field == "site" && !strings.HasPrefix(fe.Problem, "no site ") && !strings.HasPrefix(fe.Problem, "must be string") {
				t.Fatalf("POST /v1/calibrate %q: field site: %q", body, fe.Problem)
			}
		}
		if a.status == http.StatusConflict && !strings.Contains(e.Error, "cannot be calibrated") && !strings.HasPrefix(e.Error, "no site can be calibrated: ") {
			t.Fatalf("POST /v1/calibrate %q: 409 %q", body, e.Error)
		}
		v := s.d.Calibration()
		if len(v.Figures) != 0 || len(v.Sites) != len(sites) {
			t.Fatalf("POST /v1/calibrate %q: the calibration now has %+v", body, v)
		}
	})
}

// FuzzJobsQuery sends queries to GET /v1/jobs: an answer is a page of at
// most the limit asked (DefaultPageSize without one) of jobs in the states
// asked, in submission order, or a 400 that names the parameter.
func FuzzJobsQuery(f *testing.F) {
	for _, q := range []string{"", "state=queued", "state=done,failed&type=sim", "limit=0", "limit=-1", "limit=5001",
		"limit=x", "state=bogus", "after=j-000000000001&limit=2", "type=gpu", "state=,queued,", "limit=%zz"} {
		f.Add(q)
	}
	s := startFuzzServer(f)
	for range 3 {
		if _, err := s.d.Submit(context.Background(), jobfile.Decode([]byte(apiSimJob))); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, query string) {
		if _, err := url.Parse("/v1/jobs?" + query); err != nil || strings.ContainsAny(query, " #") {
			return // not a query a client can send
		}
		a := s.serve(t, "GET", "/v1/jobs?"+query, nil, nil, true)
		// A query with a malformed part ("%zz") still gives the parts that
		// parse, as the server's own parsing does: those are what to check.
		q, _ := url.ParseQuery(query)
		if a.status != http.StatusOK {
			e := checkRefusal(t, "GET /v1/jobs?"+query, a, 400)
			for _, fe := range e.Fields {
				if fe.Field != "state" && fe.Field != "limit" {
					t.Fatalf("GET /v1/jobs?%s: problem %q names %q", query, fe.Problem, fe.Field)
				}
			}
			return
		}
		var l api.JobList
		decodeAnswer(t, "GET /v1/jobs", a, &l)
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil || limit == 0 {
			limit = api.DefaultPageSize
		}
		states := map[string]bool{}
		for _, st := range strings.Split(q.Get("state"), ",") {
			if st = strings.TrimSpace(st); st != "" {
				states[st] = true
			}
		}
		if len(l.Jobs) > limit {
			t.Fatalf("GET /v1/jobs?%s: %d jobs, over the limit %d", query, len(l.Jobs), limit)
		}
		for i, j := range l.Jobs {
			if i > 0 && j.ID <= l.Jobs[i-1].ID {
				t.Fatalf("GET /v1/jobs?%s: job %s after %s", query, j.ID, l.Jobs[i-1].ID)
			}
			if after := q.Get("after"); after != "" && j.ID <= after {
				t.Fatalf("GET /v1/jobs?%s: job %s is not after %s", query, j.ID, after)
			}
			if len(states) > 0 && !states[string(j.State)] {
				t.Fatalf("GET /v1/jobs?%s: job %s is %s", query, j.ID, j.State)
			}
			if typ := q.Get("type"); typ != "" && j.Type != typ {
				t.Fatalf("GET /v1/jobs?%s: job %s of type %s", query, j.ID, j.Type)
			}
		}
	})
}

// FuzzCreateToken posts bodies to POST /v1/tokens: a token is made (201)
// only for a valid name and role, the answer holds a token that
// authenticates with that role, and nothing else is made.
func FuzzCreateToken(f *testing.F) {
	f.Add([]byte(`{"name": "alice", "role": "user"}`))
	f.Add([]byte(`{"name": "ops", "role": "operator"}`))
	f.Add([]byte(`{"name": "operator", "role": "user"}`))
	f.Add([]byte(`{"name": "Alice", "role": "user"}`))
	f.Add([]byte(`{"name": "alice", "role": "root"}`))
	f.Add([]byte(`{"name": "", "role": ""}`))
	f.Add([]byte(`{"name": "alice"}`))
	f.Add([]byte(`{"name": "a", "role": "user", "token": "mine"}`))
	f.Add([]byte(`{"name": 7, "role": "user"}`))
	f.Add([]byte(`not json`))
	s := startFuzzServer(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		before, err := s.d.Tokens(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		a := s.serve(t, "POST", "/v1/tokens", http.Header{"Content-Type": {"application/json"}}, body, true)
		after, err := s.d.Tokens(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if a.status != http.StatusCreated {
			checkRefusal(t, "POST /v1/tokens", a, 400, 409, 413)
			if len(after) != len(before) {
				t.Fatalf("a refused token request %q made a token", body)
			}
			return
		}
		var tc api.TokenCreated
		if err := json.Unmarshal(a.body, &tc); err != nil {
			t.Fatal(err)
		}
		p, ok := s.d.Authenticate(tc.Secret)
		if !ok || p.Name != tc.Name || p.Role != tc.Role || len(after) != len(before)+1 || tc.Name == api.OperatorName {
			t.Fatalf("token %+v made for %q: authenticates as %+v (%v); %d tokens, then %d", tc.Token, body, p, ok, len(before), len(after))
		}
		if err := s.d.RevokeToken(context.Background(), tc.Name); err != nil {
			t.Fatal(err)
		}
	})
}
