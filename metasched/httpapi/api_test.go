package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/httpapi"
	"github.com/metasched/metasched/metasched/store"
)

// The API as a user sees it: real HTTP against a daemon with in-process
// agents on the libvirt test driver.

// apiAnswer is what the daemon answered to one request.
type apiAnswer struct {
	status int
	header http.Header
	body   []byte
}

// apiErr decodes the answer as the API's error body.
func (a apiAnswer) apiErr(t *testing.T) api.APIError {
	t.Helper()
	var e api.APIError
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("answer %d is not an APIError: %v\n%s", a.status, err, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error answer Content-Type %q, want application/json", ct)
	}
	return e
}

// apiRequest sends one request: auth is the whole Authorization header
// (empty: none), ctype the Content-Type (empty: none); each mark changes
// the request (offDoc).
func apiRequest(t *testing.T, td *testDaemon, method, path, auth, ctype string, body []byte, marks ...func(*http.Request)) apiAnswer {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, td.addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for _, m := range marks {
		m(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read the answer: %v", method, path, err)
	}
	return apiAnswer{status: resp.StatusCode, header: resp.Header, body: data}
}

// apiAuthed sends a request with the daemon's token.
func apiAuthed(t *testing.T, td *testDaemon, method, path, ctype string, body []byte, marks ...func(*http.Request)) apiAnswer {
	t.Helper()
	return apiRequest(t, td, method, path, "Bearer "+td.d.Token(), ctype, body, marks...)
}

// apiGet GETs path with the token, wants 200 and decodes the answer into
// a T, refusing unknown fields.
func apiGet[T any](t *testing.T, td *testDaemon, path string) T {
	t.Helper()
	a := apiAuthed(t, td, http.MethodGet, path, "", nil)
	var out T
	if a.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q, want application/json", path, ct)
	}
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("GET %s: %v\n%s", path, err, a.body)
	}
	return out
}

func apiClient(td *testDaemon) *client.Client { return client.New(td.addr, td.d.Token()) }

// apiRemoteErr wants err to be the daemon's answer with that status and code.
func apiRemoteErr(t *testing.T, what string, err error, status int, code string) *client.RemoteError {
	t.Helper()
	var re *client.RemoteError
	if !errors.As(err, &re) {
		t.Fatalf("%s: error %v, want the daemon's %d %s", what, err, status, code)
	}
	if re.Status != status || re.Code != code {
		t.Errorf("%s: %d %s (%s), want %d %s", what, re.Status, re.Code, re.Message, status, code)
	}
	return re
}

// apiWait polls cond every 50 ms until it holds, failing the test after
// timeout with cond's last description of what it saw.
func apiWait(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, still not %s: %s", timeout, what, saw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// apiWaitState polls the job until it is in state want.
func apiWaitState(t *testing.T, c *client.Client, id string, want api.State, timeout time.Duration) api.Job {
	t.Helper()
	var j api.Job
	apiWait(t, timeout, fmt.Sprintf("job %s %s", id, want), func() (bool, string) {
		var err error
		if j, err = c.Job(context.Background(), id); err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		if j.State.Terminal() && j.State != want {
			t.Fatalf("job %s ended %s (%s), want %s", id, j.State, j.Reason, want)
		}
		return j.State == want, fmt.Sprintf("%s (%s)", j.State, j.Reason)
	})
	return j
}

func apiJobIDs(js []api.Job) []string {
	out := make([]string, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// A job as a user writes it: 20 tasks of the sim type, a fraction of a
// second with the demo's time scale.
const apiSimJob = "name: api-sim\ntype: sim\ntasks: 20\ntask_ops: 1.0e10\ntask_bytes: 1.0e5\n"

// A job that runs for hours: long enough to be cancelled while it runs.
const apiLongJob = "name: api-long\ntype: sim\ntasks: 1000000\ntask_ops: 1.0e11\ntask_bytes: 0\n"

// Every route but the public ones (health, metrics, the OpenAPI document,
// the dashboard's page and its login) wants the bearer token or a session.
func TestAPIAuth(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	type route struct{ method, path string }
	var routes []route
	for _, rt := range httpapi.Routes {
		if rt.Access == httpapi.Public {
			continue
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = strings.NewReplacer("{id}", "j-000000000001", "{name}", "spain-0").Replace(path)
		routes = append(routes, route{method, path})
	}
	if len(routes) < 17 {
		t.Fatalf("only %d routes need a token: %v", len(routes), routes)
	}
	routes = append(routes, route{"GET", "/v1/no-such-route"}, route{"DELETE", "/v1/jobs"})
	token := td.d.Token()
	for _, rt := range routes {
		for _, auth := range []string{"", "Bearer not-the-token", "Bearer " + token + "x", token, "Basic " + token, "Bearer"} {
			name := fmt.Sprintf("%s %s auth %q", rt.method, rt.path, auth)
			var body []byte
			if rt.method == "POST" {
				body = []byte(apiSimJob) // would submit a job if the token were not checked
			}
			a := apiRequest(t, td, rt.method, rt.path, auth, "application/yaml", body)
			if a.status != http.StatusUnauthorized {
				t.Errorf("%s: %d, want 401: %s", name, a.status, a.body)
				continue
			}
			if e := a.apiErr(t); e.Code != api.CodeUnauthorized || e.Error == "" {
				t.Errorf("%s: %+v, want code %s and a message", name, e, api.CodeUnauthorized)
			}
			if strings.Contains(string(a.body), token) {
				t.Errorf("%s: the answer shows the token: %s", name, a.body)
			}
		}
	}
	a := apiRequest(t, td, "GET", "/healthz", "", "", nil)
	var h api.Health
	if err := json.Unmarshal(a.body, &h); a.status != http.StatusOK || err != nil || h.Status != "ok" || h.Since.IsZero() {
		t.Errorf("/healthz without a token: %d %s (%v)", a.status, a.body, err)
	}
	if js, err := td.d.Store().Jobs(context.Background(), store.JobFilter{}); err != nil || len(js) != 0 {
		t.Errorf("store after unauthorized requests: %d jobs, %v; want none", len(js), err)
	}
	// The token works.
	if _, err := apiClient(td).Pools(context.Background()); err != nil {
		t.Errorf("with the token: %v", err)
	}
}

// A job file the daemon refuses comes back as 4xx with its code and every
// field's problem, and changes nothing.
// apiRejectedBase is a valid job file that the cases of apiRejectedJobs
// change.
const apiRejectedBase = "name: bad\ntype: sim\ntasks: 20\ntask_ops: 1.0e10\ntask_bytes: 1.0e5\n"

// apiRejectedJobs are job files the daemon refuses, with the answer
// (TestAPISubmitRejected), and seeds of FuzzSubmitJob.
var apiRejectedJobs = []struct {
	name   string
	ctype  string
	body   string
	status int
	code   string
	fields []string // the fields named, in order; "" for a problem of the whole body
	// problem is a text the problem of the first field must contain.
	problem string
}{
	{"yaml syntax", "application/yaml", "name: bad\ntype: [sim\ntasks: 20\n", 400, api.CodeInvalid, []string{""}, "line "},
	{"unknown field", "application/yaml", apiRejectedBase + "colour: red\n", 400, api.CodeInvalid, []string{"colour"}, "unknown field"},
	{"tasks 0", "application/yaml", strings.Replace(apiRejectedBase, "tasks: 20", "tasks: 0", 1), 400, api.CodeInvalid, []string{"tasks"}, ">= 1"},
	{"negative task_ops", "application/yaml", strings.Replace(apiRejectedBase, "task_ops: 1.0e10", "task_ops: -5", 1), 400, api.CodeInvalid, []string{"task_ops"}, "> 0"},
	{"efficiency 2", "application/yaml", apiRejectedBase + "efficiency: 2\n", 400, api.CodeInvalid, []string{"efficiency"}, "<= 1"},
	{"missing field", "application/yaml", "name: bad\ntype: sim\ntasks: 20\ntask_bytes: 0\n", 400, api.CodeInvalid, []string{"task_ops"}, "missing"},
	{"several problems", "application/yaml", "name: bad\ntype: sim\ntasks: 0\ntask_ops: 1.0e10\ntask_bytes: 0\nefficiency: 2\nvm: {vcpus: 0, memory_mib: 1024}\n",
		400, api.CodeInvalid, []string{"tasks", "efficiency", "vm.vcpus"}, ">= 1"},
	{"unknown type", "application/yaml", strings.Replace(apiRejectedBase, "type: sim", "type: gpu", 1), 400, api.CodeInvalid, []string{"type"}, "render, sim, etl"},
	{"vm too big for every cluster", "application/yaml", apiRejectedBase + "vm: {vcpus: 8, memory_mib: 1024}\n", 400, api.CodeInvalid, []string{"vm"}, "8 vCPUs"},
	{"vm memory too big", "application/yaml", apiRejectedBase + "vm: {vcpus: 1, memory_mib: 65536}\n", 400, api.CodeInvalid, []string{"vm"}, "65536 MiB"},
	{"json unknown field", "application/json", `{"name":"bad","type":"sim","tasks":20,"task_ops":1e10,"task_bytes":0,"colour":"red"}`,
		400, api.CodeInvalid, []string{"colour"}, "unknown field"},
	{"json wrong type", "application/json", `{"name":"bad","type":"sim","tasks":"many","task_ops":1e10,"task_bytes":0}`,
		400, api.CodeInvalid, []string{"tasks"}, ""},
	{"json syntax", "application/json", `{"name":"bad","type":"sim",`, 400, api.CodeInvalid, []string{""}, ""},
	// A key is a field's name as it is, whatever it holds.
	{"unknown key with a colon", "application/json", `{"name":"bad","type":"sim","tasks":20,"task_ops":1e10,"task_bytes":0,"a: b":1}`,
		400, api.CodeInvalid, []string{"a: b"}, "unknown field"},
	{"unknown key with a line break", "application/json", `{"name":"bad","type":"sim","tasks":20,"task_ops":1e10,"task_bytes":0,"a\nb: c":1}`,
		400, api.CodeInvalid, []string{"a\nb: c"}, "unknown field"},
	{"unknown vm key with a space", "application/yaml", apiRejectedBase + "vm: {vcpus: 1, 'a b': 2}\n", 400, api.CodeInvalid, []string{"vm.a b"}, "unknown field"},
	{"not a mapping", "application/yaml", "- a\n- b\n", 400, api.CodeInvalid, []string{""}, "mapping"},
	{"two documents", "application/yaml", apiRejectedBase + "---\n" + apiRejectedBase, 400, api.CodeInvalid, []string{""}, "one document"},
	{"empty body", "application/yaml", "", 400, api.CodeInvalid, []string{""}, "empty"},
	{"blank body", "", " \n\t\n", 400, api.CodeInvalid, []string{""}, "empty"},
	{"wrong content type", "text/html", apiRejectedBase, 415, api.CodeUnsupported, nil, ""},
	{"form content type", "application/x-www-form-urlencoded", apiRejectedBase, 415, api.CodeUnsupported, nil, ""},
	// Numbers beyond what the model can hold, and a job that no plan
	// on the whole grid could run: refused, never planned.
	{"poison job", "application/json", `{"name":"x","type":"sim","tasks":100000000000,"task_ops":1e308,"task_bytes":0}`,
		400, api.CodeInvalid, []string{"tasks", "task_ops"}, "at most 10000000"},
	{"tiny numbers", "application/json", `{"name":"x","type":"sim","tasks":9223372036854775807,"task_ops":5e-324,"task_bytes":0,"efficiency":5e-324}`,
		400, api.CodeInvalid, []string{"tasks", "task_ops", "efficiency"}, "at most 10000000"},
	{"dot-dot name", "application/yaml", strings.Replace(apiRejectedBase, "name: bad", "name: '..'", 1), 400, api.CodeInvalid, []string{"name"}, "begin with a letter or a digit"},
	{"never runs", "application/yaml", strings.Replace(strings.Replace(apiRejectedBase, "tasks: 20", "tasks: 10000000", 1), "task_ops: 1.0e10", "task_ops: 1.0e18", 1),
		400, api.CodeInvalid, []string{""}, "can never run on this grid, even with every host free: the best plan's predicted run time"},
	// The placement's fields: a master the grid lacks or whose machines
	// can never hold the job's VM, a placement that is none.
	{"unknown master", "application/yaml", apiRejectedBase + "master: mars\n", 400, api.CodeInvalid, []string{"master"},
		`no cluster "mars" in the grid: the clusters are latam-a, latam-b, spain`},
	{"master too small for the vm", "application/yaml", apiRejectedBase + "master: latam-a\nvm: {vcpus: 4, memory_mib: 1024}\n", 400, api.CodeInvalid,
		[]string{"master"}, "cluster latam-a's machines (2 cores, 4096 MiB) can never hold the job's VM (4 vCPUs, 1024 MiB)"},
	{"unknown placement", "application/json", `{"name":"bad","type":"sim","tasks":20,"task_ops":1e10,"task_bytes":0,"placement":"fastest"}`,
		400, api.CodeInvalid, []string{"placement"}, `must be one of gramvm, met, mct, olb, got "fastest"`},
	{"master with a baseline", "application/yaml", apiRejectedBase + "master: spain\nplacement: met\n", 400, api.CodeInvalid,
		[]string{"master"}, "a baseline placement (met) places the whole job on the one cluster it chooses"},
	{"too large", "application/yaml", apiRejectedBase + "# " + strings.Repeat("x", api.MaxBodyBytes+1-len(apiRejectedBase)-3) + "\n",
		413, api.CodeTooLarge, nil, ""},
}

func TestAPISubmitRejected(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	for _, path := range []string{"/v1/jobs", "/v1/plan"} {
		for _, tc := range apiRejectedJobs {
			t.Run(strings.TrimPrefix(path, "/v1/")+"/"+tc.name, func(t *testing.T) {
				if tc.name == "too large" && len(tc.body) != api.MaxBodyBytes+1 {
					t.Fatalf("body of %d bytes, want %d", len(tc.body), api.MaxBodyBytes+1)
				}
				a := apiAuthed(t, td, "POST", path, tc.ctype, []byte(tc.body), offDoc)
				if a.status != tc.status {
					t.Fatalf("%d, want %d: %s", a.status, tc.status, a.body)
				}
				e := a.apiErr(t)
				if e.Code != tc.code || e.Error == "" {
					t.Errorf("code %q message %q, want code %q and a message", e.Code, e.Error, tc.code)
				}
				var got []string
				for _, f := range e.Fields {
					got = append(got, f.Field)
					if f.Problem == "" {
						t.Errorf("field %q without a problem", f.Field)
					}
					// The message sums up; the fields carry the details
					// (clients print them under it, indented).
					if strings.Contains(e.Error, f.Problem) {
						t.Errorf("message %q repeats the problem of field %q", e.Error, f.Field)
					}
				}
				if diff := cmp.Diff(tc.fields, got); diff != "" {
					t.Errorf("fields (-want +got):\n%s\nanswer: %s", diff, a.body)
				}
				if len(e.Fields) > 0 && !strings.Contains(e.Fields[0].Problem, tc.problem) {
					t.Errorf("problem %q, want it to contain %q", e.Fields[0].Problem, tc.problem)
				}
			})
		}
	}
	// Nothing changed: no job listed, none in the store.
	if l := apiGet[api.JobList](t, td, "/v1/jobs"); len(l.Jobs) != 0 || l.Next != "" {
		t.Errorf("GET /v1/jobs after rejected submissions: %+v", l)
	}
	if js, err := td.d.Store().Jobs(context.Background(), store.JobFilter{}); err != nil || len(js) != 0 {
		t.Errorf("store after rejected submissions: %d jobs, %v; want none", len(js), err)
	}
	for _, p := range td.d.Pools() {
		if p.Jobs != 0 || p.Rates.Samples != 0 {
			t.Errorf("pool %s after rejected submissions: %d jobs, %d rate samples", p.Name, p.Jobs, p.Rates.Samples)
		}
	}
}

// A job goes through its lifecycle as the API shows it; cancel and
// unknown jobs answer as documented. No switch interrupts it (the policy
// none; TestAPILoneJobRunsOnce has the demo's policy).
func TestAPIJobLifecycle(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.Policy = metasched.PolicyConfig{Name: "none"} })
	ctx := context.Background()
	c := apiClient(td)

	a := apiAuthed(t, td, "POST", "/v1/jobs", "application/yaml", []byte(apiSimJob))
	if a.status != http.StatusCreated {
		t.Fatalf("submit: %d %s", a.status, a.body)
	}
	var sub api.Job
	if err := json.Unmarshal(a.body, &sub); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sub.ID, "j-") || sub.State != api.Queued || sub.Name != "api-sim" || sub.Type != "sim" ||
		sub.Spec.Tasks != 20 || sub.Spec.VM.VCPUs != 1 || sub.Spec.VM.MemoryMiB != 1024 || sub.Submitted.IsZero() {
		t.Errorf("submitted job: %+v", sub)
	}
	l, err := c.Jobs(ctx, client.JobsQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{sub.ID}, apiJobIDs(l.Jobs)); diff != "" {
		t.Errorf("GET /v1/jobs (-want +got):\n%s", diff)
	}
	got := apiGet[api.Job](t, td, "/v1/jobs/"+sub.ID)
	if got.ID != sub.ID || got.Name != "api-sim" || len(got.Transitions) == 0 {
		t.Errorf("GET /v1/jobs/%s: %+v", sub.ID, got)
	}

	done := apiWaitState(t, c, sub.ID, api.Done, time.Minute)
	type step struct{ From, To api.State }
	var steps []step
	for i, tr := range done.Transitions {
		steps = append(steps, step{tr.From, tr.To})
		if tr.At.IsZero() || tr.Reason == "" {
			t.Errorf("transition %d %s→%s: time %v, reason %q", i, tr.From, tr.To, tr.At, tr.Reason)
		}
		if i > 0 && tr.At.Before(done.Transitions[i-1].At) {
			t.Errorf("transition %d at %v, before the previous one at %v", i, tr.At, done.Transitions[i-1].At)
		}
	}
	want := []step{{"", api.Queued}, {api.Queued, api.Planned}, {api.Planned, api.Provisioning},
		{api.Provisioning, api.Running}, {api.Running, api.Done}}
	if diff := cmp.Diff(want, steps); diff != "" {
		var b strings.Builder
		for _, tr := range done.Transitions {
			fmt.Fprintf(&b, "  %s %s→%s: %s\n", tr.At.Format("15:04:05.000"), tr.From, tr.To, tr.Reason)
		}
		t.Errorf("transitions (-want +got):\n%s%s", diff, b.String())
	}
	if done.Placement == nil || !done.Placement.Plan.Feasible || len(done.VMs) == 0 || done.PredictedS <= 0 ||
		done.MeasuredS <= 0 || done.Attempts != 1 || done.Reason != done.Transitions[len(done.Transitions)-1].Reason {
		t.Errorf("done job: placement %v, %d VMs, predicted %g, actual %g, attempts %d, reason %q",
			done.Placement != nil, len(done.VMs), done.PredictedS, done.MeasuredS, done.Attempts, done.Reason)
	}

	logs := apiAuthed(t, td, "GET", "/v1/jobs/"+sub.ID+"/logs", "", nil)
	if logs.status != http.StatusOK || !strings.HasPrefix(logs.header.Get("Content-Type"), "text/plain") {
		t.Errorf("logs: %d %s", logs.status, logs.header.Get("Content-Type"))
	}
	for _, line := range []string{"emulating job api-sim (id " + sub.ID + "): master VM ", "workers: ", "predicted run time ", "emulated run finished\n"} {
		if !strings.Contains(string(logs.body), line) {
			t.Errorf("logs lack %q:\n%s", line, logs.body)
		}
	}

	_, err = c.Cancel(ctx, sub.ID)
	apiRemoteErr(t, "cancel of a done job", err, http.StatusConflict, api.CodeConflict)
	j, err := c.Job(ctx, sub.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != api.Done || len(j.Transitions) != 5 {
		t.Errorf("after a refused cancel: %s with %d transitions", j.State, len(j.Transitions))
	}

	for _, rq := range []struct{ method, path string }{
		{"GET", "/v1/jobs/j-000000009999"}, {"POST", "/v1/jobs/j-000000009999/cancel"},
		{"GET", "/v1/jobs/j-000000009999/logs"}, {"GET", "/v1/jobs/nonsense"},
	} {
		a := apiAuthed(t, td, rq.method, rq.path, "", nil)
		if a.status != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404: %s", rq.method, rq.path, a.status, a.body)
			continue
		}
		if e := a.apiErr(t); e.Code != api.CodeNotFound {
			t.Errorf("%s %s: code %q, want %q", rq.method, rq.path, e.Code, api.CodeNotFound)
		}
	}
}

// A running job cancelled through the API ends cancelled and its VMs are
// destroyed; a queued one ends cancelled without running.
func TestAPICancel(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
		c.Policy = metasched.PolicyConfig{Name: "none"} // the sim pool keeps its hosts
	})
	ctx := context.Background()
	c := apiClient(td)

	// Long jobs until one waits: the first ones fill the sim pool.
	var running []api.Job
	var queued api.Job
	for i := 0; queued.ID == "" && i < 20; i++ {
		j, err := c.Submit(ctx, []byte(strings.Replace(apiLongJob, "api-long", fmt.Sprintf("api-long-%d", i), 1)))
		if err != nil {
			t.Fatal(err)
		}
		apiWait(t, 30*time.Second, "running or waiting", func() (bool, string) {
			if j, err = c.Job(ctx, j.ID); err != nil {
				t.Fatal(err)
			}
			return j.State == api.Running || strings.HasPrefix(j.Reason, "waiting: "), fmt.Sprintf("%s (%s)", j.State, j.Reason)
		})
		if j.State == api.Running {
			running = append(running, j)
		} else {
			queued = j
		}
	}
	if len(running) == 0 || queued.ID == "" {
		t.Fatalf("%d jobs running, waiting job %q: want the sim pool full", len(running), queued.ID)
	}
	t.Logf("%d long jobs fill the sim pool; %s waits: %s", len(running), queued.ID, queued.Reason)

	// With the pool full, a dry run says the job would wait.
	p, err := c.Plan(ctx, []byte(apiSimJob))
	if err != nil {
		t.Fatal(err)
	}
	if !p.Waits || p.Placement.Plan.Feasible || len(p.FreeHosts) != 0 || !strings.Contains(p.Explanation, "job api-sim waits: ") {
		t.Errorf("dry run on a full pool: waits %v, feasible %v, free %v:\n%s", p.Waits, p.Placement.Plan.Feasible, p.FreeHosts, p.Explanation)
	}

	// The waiting job: cancelled from the queue.
	j, err := c.Cancel(ctx, queued.ID)
	if err != nil {
		t.Fatalf("cancel of a queued job: %v", err)
	}
	last := j.Transitions[len(j.Transitions)-1]
	if j.State != api.Cancelled || last.From != api.Queued || last.To != api.Cancelled || last.Reason == "" || len(j.VMs) != 0 {
		t.Errorf("cancelled queued job: %s, last transition %+v, %d VMs", j.State, last, len(j.VMs))
	}

	// A running job: its VMs exist, then are gone.
	victim := running[0]
	vmsOf := func(id string) []string {
		vms, err := c.VMs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range vms {
			if v.Job == id {
				out = append(out, v.Name)
			}
		}
		return out
	}
	var names []string
	for _, v := range victim.VMs {
		names = append(names, v.Name)
	}
	slices.Sort(names)
	apiWait(t, 10*time.Second, "the job's VMs listed", func() (bool, string) {
		got := vmsOf(victim.ID)
		slices.Sort(got)
		return slices.Equal(got, names), fmt.Sprintf("%v, want %v", got, names)
	})
	j, err = c.Cancel(ctx, victim.ID)
	if err != nil {
		t.Fatalf("cancel of a running job: %v", err)
	}
	last = j.Transitions[len(j.Transitions)-1]
	if j.State != api.Cancelled || last.From != api.Running || last.To != api.Cancelled || last.Reason == "" {
		t.Errorf("cancelled running job: %s, last transition %+v", j.State, last)
	}
	apiWait(t, 10*time.Second, "the cancelled job's VMs gone", func() (bool, string) {
		got := vmsOf(victim.ID)
		return len(got) == 0, fmt.Sprint(got)
	})
	// Cancelled is final: a second cancel conflicts, the other jobs run on.
	_, err = c.Cancel(ctx, victim.ID)
	apiRemoteErr(t, "second cancel", err, http.StatusConflict, api.CodeConflict)
	for _, r := range running[1:] {
		if j, err := c.Job(ctx, r.ID); err != nil || j.State != api.Running {
			t.Errorf("job %s: %s, %v; want running on", r.ID, j.State, err)
		}
	}
	cancelled, err := c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Cancelled}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{queued.ID, victim.ID}, apiJobIDs(cancelled.Jobs), cmp.Transformer("sort", func(s []string) []string {
		s = slices.Clone(s)
		slices.Sort(s)
		return s
	})); diff != "" {
		t.Errorf("cancelled jobs (-want +got):\n%s", diff)
	}
}

// GET /v1/jobs checks its query and pages.
func TestAPIJobList(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	ctx := context.Background()
	c := apiClient(td)
	for _, tc := range []struct {
		query  string
		fields []string
	}{
		{"state=bogus", []string{"state"}},
		{"state=queued,lost", []string{"state"}},
		{"limit=x", []string{"limit"}},
		{"limit=-1", []string{"limit"}},
		{"state=bogus&limit=x", []string{"state", "limit"}},
	} {
		a := apiAuthed(t, td, "GET", "/v1/jobs?"+tc.query, "", nil, offDoc)
		if a.status != http.StatusBadRequest {
			t.Errorf("?%s: %d, want 400: %s", tc.query, a.status, a.body)
			continue
		}
		e := a.apiErr(t)
		var got []string
		for _, f := range e.Fields {
			got = append(got, f.Field)
		}
		if e.Code != api.CodeInvalid || !slices.Equal(got, tc.fields) {
			t.Errorf("?%s: code %q fields %v, want %q %v", tc.query, e.Code, got, api.CodeInvalid, tc.fields)
		}
	}

	var ids []string
	for i := range 5 {
		typ := "sim"
		if i%2 == 1 {
			typ = "etl"
		}
		j, err := c.Submit(ctx, []byte(fmt.Sprintf("name: page-%d\ntype: %s\ntasks: 10\ntask_ops: 1.0e10\ntask_bytes: 0\n", i, typ)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if !slices.IsSorted(ids) {
		t.Errorf("IDs not in submission order: %v", ids)
	}
	// Pages of 2: 2, 2, 1, the last without next.
	var paged []string
	after := ""
	for page := 0; ; page++ {
		l, err := c.Jobs(ctx, client.JobsQuery{Limit: 2, After: after})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, apiJobIDs(l.Jobs)...)
		if l.Next == "" {
			if len(l.Jobs) != 1 {
				t.Errorf("last page: %v", apiJobIDs(l.Jobs))
			}
			break
		}
		if len(l.Jobs) != 2 || l.Next != l.Jobs[1].ID || page > 3 {
			t.Fatalf("page %d: %v next %q", page, apiJobIDs(l.Jobs), l.Next)
		}
		after = l.Next
	}
	if diff := cmp.Diff(ids, paged); diff != "" {
		t.Errorf("paged IDs (-want +got):\n%s", diff)
	}
	// An exact page: no next when nothing follows.
	if l, err := c.Jobs(ctx, client.JobsQuery{Limit: 5}); err != nil || len(l.Jobs) != 5 || l.Next != "" {
		t.Errorf("limit 5 of 5: %v next %q, %v", apiJobIDs(l.Jobs), l.Next, err)
	}
	if l, err := c.Jobs(ctx, client.JobsQuery{Type: "etl"}); err != nil || !slices.Equal(apiJobIDs(l.Jobs), []string{ids[1], ids[3]}) {
		t.Errorf("type etl: %v, %v; want %v", apiJobIDs(l.Jobs), err, []string{ids[1], ids[3]})
	}
	if l, err := c.Jobs(ctx, client.JobsQuery{Type: "render"}); err != nil || len(l.Jobs) != 0 {
		t.Errorf("type render: %v, %v; want none", apiJobIDs(l.Jobs), err)
	}
	for _, id := range ids {
		apiWaitState(t, c, id, api.Done, time.Minute)
	}
	l, err := c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Done}, Limit: 3, After: ids[0]})
	if err != nil || !slices.Equal(apiJobIDs(l.Jobs), ids[1:4]) || l.Next != ids[3] {
		t.Errorf("done after %s limit 3: %v next %q, %v; want %v next %s", ids[0], apiJobIDs(l.Jobs), l.Next, err, ids[1:4], ids[3])
	}
	if l, err := c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Queued, api.Running}}); err != nil || len(l.Jobs) != 0 {
		t.Errorf("queued or running once all are done: %v, %v", apiJobIDs(l.Jobs), err)
	}
}

// POST /v1/plan is a dry run; POST /v1/hosts/NAME/clear refuses what it
// cannot do.
func TestAPIPlanAndClear(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	ctx := context.Background()
	c := apiClient(td)

	for _, ctype := range []string{"application/yaml", "application/json", "text/plain", ""} {
		body := []byte(apiSimJob)
		if ctype == "application/json" {
			body = []byte(`{"name":"api-sim","type":"sim","tasks":20,"task_ops":1e10,"task_bytes":1e5}`)
		}
		// A job file without a Content-Type is beyond the document.
		a := apiAuthed(t, td, "POST", "/v1/plan", ctype, body, offDocIf(ctype == "")...)
		if a.status != http.StatusOK {
			t.Fatalf("plan (%q): %d %s", ctype, a.status, a.body)
		}
		var p api.PlanResult
		if err := json.Unmarshal(a.body, &p); err != nil {
			t.Fatal(err)
		}
		free := 0
		for _, n := range p.FreeHosts {
			free += n
		}
		pl := p.Placement
		if !pl.Plan.Feasible || p.Waits || pl.Master.Host == "" || pl.Plan.Machines < 1 || len(pl.Workers) != pl.Plan.Machines-1 ||
			free != 5 || !strings.Contains(p.Explanation, "job api-sim: master ") {
			t.Errorf("plan (%q): feasible %v waits %v master %+v machines %d workers %d free %v explanation %q",
				ctype, pl.Plan.Feasible, p.Waits, pl.Master, pl.Plan.Machines, len(pl.Workers), p.FreeHosts, p.Explanation)
		}
	}
	// A job of 4-vCPU VMs fits only spain's machines: the plan leaves the
	// latam clusters out and says why.
	p, err := c.Plan(ctx, []byte("name: big\ntype: render\ntasks: 10\ntask_ops: 1.0e10\ntask_bytes: 0\nvm: {vcpus: 4, memory_mib: 8192}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, x := range p.Placement.Plan.Excluded {
		left = append(left, x.Name)
	}
	if diff := cmp.Diff(map[string]int{"spain": 3}, p.FreeHosts); diff != "" {
		t.Errorf("free hosts of a 4-vCPU render job (-want +got):\n%s", diff)
	}
	if p.Waits || p.Placement.Master.Site != "spain" || !slices.Equal(left, []string{"latam-a", "latam-b"}) ||
		!strings.Contains(p.Explanation, "latam-a left out: its machines cannot hold the job's VM") {
		t.Errorf("plan of a 4-vCPU render job: waits %v, master %+v, left out %v:\n%s", p.Waits, p.Placement.Master, left, p.Explanation)
	}
	if l, err := c.Jobs(ctx, client.JobsQuery{}); err != nil || len(l.Jobs) != 0 {
		t.Errorf("jobs after dry runs: %v, %v; want none", apiJobIDs(l.Jobs), err)
	}
	if vms, err := c.VMs(ctx); err != nil || len(vms) != 0 {
		t.Errorf("VMs after dry runs: %v, %v; want none", vms, err)
	}

	for _, tc := range []struct {
		name, host, body string
		status           int
		code             string
		fields           []string
		off              bool // a body the OpenAPI document refuses
	}{
		{"not stranded", "spain-0", "", 409, api.CodeConflict, nil, false},
		{"not stranded, with a pool", "spain-0", `{"pool":"sim"}`, 409, api.CodeConflict, nil, false},
		{"unknown host", "nowhere-9", "", 404, api.CodeNotFound, nil, false},
		{"unknown field", "spain-0", `{"pool":"sim","colour":"red"}`, 400, api.CodeInvalid, []string{"colour"}, true},
		{"wrong type", "spain-0", `{"pool":3}`, 400, api.CodeInvalid, []string{"pool"}, true},
		{"not json", "spain-0", `pool: sim`, 400, api.CodeInvalid, nil, true},
		{"two values", "spain-0", `{"pool":"sim"} {"pool":"etl"}`, 400, api.CodeInvalid, nil, true},
		{"too large", "spain-0", `{"pool":"` + strings.Repeat("x", api.MaxBodyBytes) + `"}`, 413, api.CodeTooLarge, nil, true},
	} {
		a := apiAuthed(t, td, "POST", "/v1/hosts/"+tc.host+"/clear", "application/json", []byte(tc.body), offDocIf(tc.off)...)
		if a.status != tc.status {
			t.Errorf("%s: %d, want %d: %s", tc.name, a.status, tc.status, a.body)
			continue
		}
		e := a.apiErr(t)
		var got []string
		for _, f := range e.Fields {
			got = append(got, f.Field)
		}
		if e.Code != tc.code || !slices.Equal(got, tc.fields) || e.Error == "" {
			t.Errorf("%s: %+v, want code %q fields %v", tc.name, e, tc.code, tc.fields)
		}
	}
	// A drain and an undrain, and the drains refused.
	for _, tc := range []struct {
		name, body string
		status     int
		off        bool
	}{
		{"two values", `{"move":false} {"move":true}`, 400, true},
		{"wrong type", `{"move":"yes"}`, 400, true},
		{"unknown field", `{"move":true,"force":true}`, 400, true},
		{"drain", `{}`, 200, false},
	} {
		a := apiAuthed(t, td, "POST", "/v1/hosts/spain-0/drain", "application/json", []byte(tc.body), offDocIf(tc.off)...)
		if a.status != tc.status {
			t.Errorf("drain, %s: %d, want %d: %s", tc.name, a.status, tc.status, a.body)
		}
	}
	if a := apiAuthed(t, td, "POST", "/v1/hosts/spain-0/undrain", "", nil); a.status != 200 {
		t.Errorf("undrain: %d %s", a.status, a.body)
	}
	hosts, err := c.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		if h.State != api.HostIdle {
			t.Errorf("host %s %s after refused clears and a drain undone", h.Name, h.State)
		}
	}
}

// The read-only views answer with what the demo grid has.
func TestAPIViews(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)

	pools := apiGet[[]api.Pool](t, td, "/v1/pools")
	var names []string
	poolOf := map[string]string{}
	for _, p := range pools {
		names = append(names, p.Name)
		if p.VCPUs < 1 || p.MemoryMiB < 1 || p.HoldingCost <= 0 || p.Jobs != 0 || p.Busy != 0 || p.Idle != len(p.Hosts) || len(p.Hosts) < 2 {
			t.Errorf("pool %+v", p)
		}
		for _, h := range p.Hosts {
			if other, ok := poolOf[h]; ok {
				t.Errorf("host %s in pools %s and %s", h, other, p.Name)
			}
			poolOf[h] = p.Name
		}
	}
	if diff := cmp.Diff([]string{"render", "sim", "etl"}, names); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}

	hosts := apiGet[[]api.HostView](t, td, "/v1/hosts")
	if len(hosts) != 16 {
		t.Errorf("%d hosts, want 16", len(hosts))
	}
	perSite := map[string]int{}
	for _, h := range hosts {
		perSite[h.Site]++
		if h.Pool == "" || poolOf[h.Name] != h.Pool {
			t.Errorf("host %s: pool %q, but the pools list it in %q", h.Name, h.Pool, poolOf[h.Name])
		}
		if h.State != api.HostIdle || h.CPUs < 1 || h.MemoryMiB < 1 || h.FreeVCPUs != h.CPUs || h.VMs == nil || len(h.VMs) != 0 {
			t.Errorf("host %+v", h)
		}
	}
	if len(poolOf) != 16 {
		t.Errorf("the pools list %d hosts, want 16", len(poolOf))
	}
	if diff := cmp.Diff(map[string]int{"latam-a": 3, "latam-b": 5, "spain": 8}, perSite); diff != "" {
		t.Errorf("hosts per site (-want +got):\n%s", diff)
	}

	if sw := apiGet[api.SwitchList](t, td, "/v1/switches"); sw.Switches == nil || len(sw.Switches) != 0 || sw.Next != "" {
		t.Errorf("switches of an idle daemon: %+v", sw)
	}
	if sw := apiGet[api.SwitchList](t, td, "/v1/switches?active=true"); sw.Switches == nil || len(sw.Switches) != 0 {
		t.Errorf("active switches of an idle daemon: %+v", sw)
	}
	for q, field := range map[string]string{"active=maybe": "active", "limit=-1": "limit", "limit=5001": "limit", "before=j-000000000001": "before"} {
		a := apiAuthed(t, td, "GET", "/v1/switches?"+q, "", nil, offDoc)
		if e := a.apiErr(t); a.status != 400 || len(e.Fields) != 1 || e.Fields[0].Field != field {
			t.Errorf("?%s: %d %s", q, a.status, a.body)
		}
	}

	pol := apiGet[api.PolicyView](t, td, "/v1/policy")
	var polPools []string
	for _, p := range pol.Pools {
		polPools = append(polPools, p.Name)
	}
	if !strings.HasPrefix(pol.Configured, "heuristic") || !strings.HasPrefix(pol.InForce, "heuristic") || pol.Servers != 16 ||
		!slices.Equal(polPools, names) || pol.Switches != 0 {
		t.Errorf("policy %+v", pol)
	}

	links := apiGet[[]struct {
		Between        [2]string `json:"between"`
		ConfiguredMbps float64   `json:"configured_mbps"`
		MeasuredMbps   float64   `json:"measured_mbps"`
		MeasuredAt     time.Time `json:"measured_at"`
		Samples        int       `json:"samples"`
	}](t, td, "/v1/links")
	gotLinks := map[string]float64{}
	for _, l := range links {
		gotLinks[l.Between[0]+"-"+l.Between[1]] = l.ConfiguredMbps
	}
	if diff := cmp.Diff(map[string]float64{"latam-a-latam-b": 20, "latam-a-spain": 6, "latam-b-spain": 8}, gotLinks); diff != "" {
		t.Errorf("links (-want +got):\n%s", diff)
	}

	a := apiAuthed(t, td, "GET", "/v1/tuning", "", nil)
	var tuning []json.RawMessage
	if err := json.Unmarshal(a.body, &tuning); a.status != 200 || err != nil || tuning == nil {
		t.Errorf("tuning: %d %s (%v)", a.status, a.body, err)
	}
	if vms := apiGet[[]json.RawMessage](t, td, "/v1/vms"); vms == nil || len(vms) != 0 {
		t.Errorf("VMs of an idle daemon: %s", vms)
	}

	// In-process agents on libvirt's test driver boot no guest: no site
	// is calibrated, the view says why, and a calibration is refused.
	cal := apiGet[api.Calibration](t, td, "/v1/calibration")
	if len(cal.Sites) != 3 || len(cal.Figures) != 0 || cal.Figures == nil || !cal.Auto || cal.MaxAgeSeconds != 3600 {
		t.Errorf("calibration of in-process agents: %+v", cal)
	}
	for _, s := range cal.Sites {
		if s.Calibrated || !strings.Contains(s.Note, "libvirt's test driver, which boots no guest: its plans keep the grid file's figures") {
			t.Errorf("site %+v: want not calibrated, and why", s)
		}
	}
	for _, c := range []struct {
		body   string
		status int
		field  string
		text   string
		off    bool // a body the OpenAPI document refuses
	}{
		{"", 409, "", "no site can be calibrated", false},
		{`{"site":"spain"}`, 409, "", "site spain cannot be calibrated: its agent is in process", false},
		{`{"site":"mars"}`, 400, "site", `no site "mars" (the grid's sites: latam-a, latam-b, spain)`, false},
		{`{"sites":"spain"}`, 400, "sites", "unknown field", true},
	} {
		a := apiAuthed(t, td, "POST", "/v1/calibrate", "application/json", []byte(c.body), offDocIf(c.off)...)
		e := a.apiErr(t)
		text := e.Error
		for _, f := range e.Fields {
			text += " " + f.Problem
		}
		if a.status != c.status || !strings.Contains(text, c.text) || (c.field != "" && (len(e.Fields) != 1 || e.Fields[0].Field != c.field)) {
			t.Errorf("POST /v1/calibrate %s: %d %s, want %d naming %q", c.body, a.status, a.body, c.status, c.text)
		}
	}
}

// A path that is no route answers 404 unknown_route.
func TestAPIUnknownRoute(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	for _, rq := range []struct{ method, path string }{
		{"GET", "/v1/nope"}, {"GET", "/v2/jobs"}, {"GET", "/v1"}, {"GET", "/v1/jobs/j-1/nope"}, {"POST", "/v1/hosts/spain-0"},
	} {
		a := apiAuthed(t, td, rq.method, rq.path, "", nil)
		if e := a.apiErr(t); a.status != http.StatusNotFound || e.Code != api.CodeUnknownRoute || !strings.Contains(e.Error, rq.path) {
			t.Errorf("%s %s: %d %s, want 404 %s", rq.method, rq.path, a.status, a.body, api.CodeUnknownRoute)
		}
	}
}

// A route asked with a method it does not have answers 405 bad_method
// (api.go: CodeMethod), and Allow names the methods it has.
func TestAPIWrongMethod(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	for _, rq := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/jobs", "GET POST"}, {"PUT", "/v1/jobs/j-000000000001", "GET"},
		{"GET", "/v1/jobs/j-000000000001/cancel", "POST"}, {"GET", "/v1/plan", "POST"}, {"POST", "/v1/pools", "GET"},
	} {
		a := apiAuthed(t, td, rq.method, rq.path, "", nil)
		if e := a.apiErr(t); a.status != http.StatusMethodNotAllowed || e.Code != api.CodeMethod {
			t.Errorf("%s %s: %d %s, want 405 %s", rq.method, rq.path, a.status, strings.TrimSpace(string(a.body)), api.CodeMethod)
		}
		allow := a.header.Get("Allow")
		for _, m := range strings.Fields(rq.allow) {
			if !strings.Contains(allow, m) {
				t.Errorf("%s %s: Allow %q, want %s in it", rq.method, rq.path, allow, m)
			}
		}
	}
}

// GET /v1/jobs without a limit answers one page of the daemon's page size,
// with next when more jobs follow (client.JobsQuery and `metasched jobs
// --limit`: "0: the daemon's page size"); the client reads at most 64 MiB
// of an answer, and a done job takes about 5 kB of it.
func TestAPIJobListDefaultPage(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, nil)
	ctx := context.Background()
	const n = 5000
	spec := json.RawMessage(`{"name":"stored","type":"sim","tasks":20,"task_ops":1e10,"task_bytes":0,"efficiency":0.9,"vm":{"vcpus":1,"memory_mib":1024}}`)
	errs := make(chan error, n)
	for range 50 {
		go func() {
			for range n / 50 {
				_, err := td.d.Store().SubmitJob(ctx, "sim", spec, "stored")
				errs <- err
			}
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	a := apiAuthed(t, td, "GET", "/v1/jobs", "", nil)
	took := time.Since(start)
	var l api.JobList
	if err := json.Unmarshal(a.body, &l); a.status != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/jobs: %d, %v", a.status, err)
	}
	if len(l.Jobs) >= n || l.Next == "" {
		t.Errorf("GET /v1/jobs with %d jobs and no limit: %d jobs (%d bytes, %s), next %q; want a page of them and next",
			n, len(l.Jobs), len(a.body), took.Round(time.Millisecond), l.Next)
		return
	}
	seen := len(l.Jobs)
	for l.Next != "" && seen < 2*n {
		l = apiGet[api.JobList](t, td, "/v1/jobs?after="+l.Next)
		seen += len(l.Jobs)
	}
	if seen != n {
		t.Errorf("the pages hold %d jobs, want %d", seen, n)
	}
}

// A lone short job on an idle grid runs once: the policy does not switch
// hosts out of the only pool with work (and so requeue its running job)
// toward pools with no job and no arrival.
func TestAPILoneJobRunsOnce(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) { c.Executor.TimeScale = 0.006 })
	c := apiClient(td)
	ctx := context.Background()
	j, err := c.Submit(ctx, []byte(apiSimJob))
	if err != nil {
		t.Fatal(err)
	}
	j = apiWaitState(t, c, j.ID, api.Done, time.Minute)
	sws, err := td.d.Switches(ctx, api.SwitchFilter{Limit: api.MaxPageSize})
	if err != nil {
		t.Fatal(err)
	}
	for _, sw := range sws.Switches {
		if sw.From == "sim" {
			t.Errorf("switch %s %s→%s of host %s (%s) while the grid's only job ran in pool sim", sw.ID, sw.From, sw.To, sw.Host, sw.Phase)
		}
	}
	if j.Attempts != 1 {
		var b strings.Builder
		for _, tr := range j.Transitions {
			fmt.Fprintf(&b, "  %s→%s: %s\n", tr.From, tr.To, tr.Reason)
		}
		t.Errorf("the job ran %d times:\n%s", j.Attempts, b.String())
	}
}
