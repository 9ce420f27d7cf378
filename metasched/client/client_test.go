package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/metasched/api"
)

const testToken = "s3cret-token"

// request is what the fake daemon recorded of one request.
type request struct {
	Method, Path, Query string
	Auth, ContentType   string
	Body                string
}

// fakeDaemon is a recording stand-in for the metasched daemon: it keeps
// every request it gets and answers each with the status and body last set
// by answer. It tests the client's side of the wire only.
type fakeDaemon struct {
	*httptest.Server
	mu       sync.Mutex
	requests []request
	status   int
	body     []byte
	ctype    string
}

// newFakeDaemon starts a fake daemon that answers 200 and "{}" until told
// otherwise; it stops with the test.
func newFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{status: http.StatusOK, body: []byte("{}"), ctype: "application/json"}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("fake daemon: read the body: %v", err)
		}
		f.mu.Lock()
		f.requests = append(f.requests, request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Body: string(body)})
		status, answer, ctype := f.status, f.body, f.ctype
		f.mu.Unlock()
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write(answer)
	}))
	t.Cleanup(f.Close)
	return f
}

// answer sets the next answers: v as JSON, or as is when it is a string or
// []byte (then as text/plain).
func (f *fakeDaemon) answer(t *testing.T, status int, v any) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.ctype = status, "application/json"
	switch b := v.(type) {
	case string:
		f.body, f.ctype = []byte(b), "text/plain; charset=utf-8"
	case []byte:
		f.body, f.ctype = b, "text/plain; charset=utf-8"
	default:
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		f.body = data
	}
}

// last returns the last request, failing the test when there was none.
func (f *fakeDaemon) last(t *testing.T) request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("the fake daemon got no request")
	}
	return f.requests[len(f.requests)-1]
}

var (
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	testJob = api.Job{
		JobHead: api.JobHead{ID: "j-000000000007", Name: "render-42", Type: "render", State: api.Running, Reason: "started",
			Submitted: t0, Updated: t0.Add(3 * time.Second)},
		Spec: api.JobSpec{Name: "render-42", Type: "render", Tasks: 300, TaskOps: 2e11, TaskBytes: 5e7, Efficiency: 0.8,
			VM: api.VMSize{VCPUs: 2, MemoryMiB: 2048}},
		Transitions: []api.Transition{
			{To: api.Queued, At: t0, Reason: "submitted"},
			{From: api.Queued, To: api.Running, At: t0.Add(3 * time.Second), Reason: "started"},
		},
		Placement: &api.Placement{Plan: api.Plan{Algorithm: "hillclimb", Job: "render-42", Tasks: 300,
			Feasible: true, Master: "spain", Machines: 3, Clusters: []api.ClusterPlan{{Name: "spain", Master: true, Machines: 2}}},
			Master: api.HostRef{Site: "spain", Host: "es-1"}},
		VMs:      []api.JobVM{{Name: "j-7-0", Site: "spain", Host: "es-1", Master: true}},
		RunTimes: api.RunTimes{PredictedS: 2.5},
	}
	jobYAML = "name: render-42\ntype: render\ntasks: 300\ntask_ops: 2.0e11\ntask_bytes: 5.0e7\n"
	jobJSON = "\n  {\"name\": \"render-42\", \"type\": \"render\", \"tasks\": 300, \"task_ops\": 2e11, \"task_bytes\": 5e7}"
)

// Each method sends its route's request, with the token and the body as
// given, and decodes the answer.
func TestMethods(t *testing.T) {
	ctx := context.Background()
	f := newFakeDaemon(t)
	c := New(f.URL+"/", testToken)
	auth := "Bearer " + testToken
	exit := 3
	done := testJob
	done.State, done.ExitCode, done.MeasuredS = api.Done, &exit, 2.75
	pools := []api.Pool{{Name: "render", VCPUs: 2, MemoryMiB: 2048, HoldingCost: 2, Queued: 1, Active: 2, Jobs: 3,
		Hosts: []string{"es-1", "es-2"}, Busy: 1, Idle: 1, Rates: api.Rates{Arrival: 0.5, Service: 0.25, Samples: 9}}}
	hosts := []api.HostView{{Name: "es-1", Site: "spain", Pool: "render", State: api.HostBusy, CPUs: 8,
		MemoryMiB: 16384, FreeVCPUs: 6, FreeMemoryMiB: 14336, VMs: []api.VM{{Name: "j-7-0", Host: "es-1", State: api.VMRunning, VCPUs: 2}}}}
	cleared := api.HostView{Name: "es-2", Site: "spain", Pool: "sim", State: api.HostIdle, VMs: []api.VM{}}
	switches := api.SwitchList{Switches: []api.SwitchView{{ID: "s-000002", From: "render", To: "sim", Host: "es-2", Phase: "reconfigure",
		Started: t0, Updated: t0.Add(time.Second), Seconds: 1}}}
	page := api.SwitchList{Switches: switches.Switches, Next: "s-000002"}
	policy := api.PolicyView{Configured: "optimal", InForce: "heuristic", Note: "solving",
		Pools: []api.PolicyPool{{Name: "render", Jobs: 3, Servers: 2}}, Servers: 4, Decisions: 10, Switches: 1,
		LastAt: t0, Table: &api.PolicyTable{Source: "solved", States: 9000, Solving: true}}
	links := []api.Link{{Between: [2]string{"spain", "latam-a"}, ConfiguredMbps: 8, MeasuredMbps: 7.5, MeasuredAt: t0, Samples: 4, Via: api.ViaVMs}}
	calibration := api.Calibration{At: t0, MaxAgeSeconds: 3600, Auto: true, BenchSeconds: 10, ProbeBytes: 8 << 20,
		Sites: []api.CalibrationSite{{Name: "spain", Calibrated: true}},
		Figures: []api.CalibrationFigure{{Key: "perf/spain/debian", Kind: api.CalibrationPerf, Site: "spain", Image: "debian", Value: 2e8,
			Unit: "ops/s per vCPU", Configured: 2e9, ConfiguredUnit: "ops/s per machine", MeasuredAt: t0, AgeSeconds: 60,
			Hosts: []string{"es-1"}, State: api.CalibrationMeasured, Due: t0.Add(time.Hour)}}}
	tuning := []api.TuningRecord{{Seq: 3, TuningDecision: api.TuningDecision{NewJob: "fresh", Target: "j-000000000001",
		Action: api.ActionConsolidate, Cluster: "spain", Moves: []api.TuningMove{{VM: "j-7-0", Site: "spain", From: "es-1", To: "es-2"}},
		GainSeconds: 100, LossSeconds: 40, MigrationSeconds: 1.1, Accepted: true}, NewJobID: "j-000000000002", At: t0,
		Outcome: "carried out", Started: t0, Ended: t0.Add(3 * time.Second), MigrationS: 3,
		Migrations: []api.TuningMigration{{VM: "j-7-0", From: "es-1", To: "es-2", Seconds: 2.9, Live: true, DowntimeMs: 200}},
		Measured:   &api.TuningMeasured{NewJobPredictedS: 200, PredictedGainS: 100, NewJobMeasuredS: 110, NewJobGainS: 90, NewJobState: "done"}}}
	outputs := api.OutputList{Job: "j-000000000007", Attempt: 2, Files: []api.OutputFile{{Name: "frames/a b%.bin", Size: 4}}, Missing: []string{"x"}}
	plan := api.PlanResult{Placement: *testJob.Placement, FreeHosts: map[string]int{"spain": 3, "latam-a": 0},
		Explanation: "master on spain"}

	tests := []struct {
		name   string
		call   func() (any, error)
		answer any
		want   request
		out    any
	}{
		{"healthz", func() (any, error) { return c.Healthz(ctx) },
			api.Health{Status: "ok", Version: "devel", Since: t0},
			request{Method: "GET", Path: "/healthz"}, api.Health{Status: "ok", Version: "devel", Since: t0}},
		{"submit yaml", func() (any, error) { return c.Submit(ctx, []byte(jobYAML)) }, testJob,
			request{Method: "POST", Path: "/v1/jobs", Auth: auth, ContentType: "application/yaml", Body: jobYAML}, testJob},
		{"submit json", func() (any, error) { return c.Submit(ctx, []byte(jobJSON)) }, testJob,
			request{Method: "POST", Path: "/v1/jobs", Auth: auth, ContentType: "application/json", Body: jobJSON}, testJob},
		{"jobs all", func() (any, error) { return c.Jobs(ctx, JobsQuery{}) }, api.JobList{Jobs: []api.Job{testJob}},
			request{Method: "GET", Path: "/v1/jobs", Auth: auth}, api.JobList{Jobs: []api.Job{testJob}}},
		{"jobs query", func() (any, error) {
			return c.Jobs(ctx, JobsQuery{States: []api.State{api.Queued, api.Running}, Type: "render", After: "j-000000000002", Limit: 5})
		}, api.JobList{Jobs: []api.Job{testJob}, Next: "j-000000000007"},
			request{Method: "GET", Path: "/v1/jobs", Query: "after=j-000000000002&limit=5&state=queued%2Crunning&type=render", Auth: auth},
			api.JobList{Jobs: []api.Job{testJob}, Next: "j-000000000007"}},
		{"job", func() (any, error) { return c.Job(ctx, "j-000000000007") }, done,
			request{Method: "GET", Path: "/v1/jobs/j-000000000007", Auth: auth}, done},
		{"job escaped", func() (any, error) { return c.Job(ctx, "a/b c") }, done,
			request{Method: "GET", Path: "/v1/jobs/a%2Fb%20c", Auth: auth}, done},
		{"cancel", func() (any, error) { return c.Cancel(ctx, "j-000000000007") }, done,
			request{Method: "POST", Path: "/v1/jobs/j-000000000007/cancel", Auth: auth}, done},
		{"logs", func() (any, error) { return c.Logs(ctx, "j-000000000007") }, "frame 1\nframe 2\n",
			request{Method: "GET", Path: "/v1/jobs/j-000000000007/logs", Auth: auth}, []byte("frame 1\nframe 2\n")},
		{"outputs", func() (any, error) { return c.Outputs(ctx, "j-000000000007") }, outputs,
			request{Method: "GET", Path: "/v1/jobs/j-000000000007/outputs", Auth: auth}, outputs},
		{"output", func() (any, error) { return c.Output(ctx, "j-000000000007", "frames/a b%.bin") }, "\x00\xff\r\n",
			request{Method: "GET", Path: "/v1/jobs/j-000000000007/outputs/frames/a%20b%25.bin", Auth: auth}, []byte("\x00\xff\r\n")},
		{"plan", func() (any, error) { return c.Plan(ctx, []byte(jobYAML)) }, plan,
			request{Method: "POST", Path: "/v1/plan", Auth: auth, ContentType: "application/yaml", Body: jobYAML}, plan},
		{"pools", func() (any, error) { return c.Pools(ctx) }, pools,
			request{Method: "GET", Path: "/v1/pools", Auth: auth}, pools},
		{"hosts", func() (any, error) { return c.Hosts(ctx) }, hosts,
			request{Method: "GET", Path: "/v1/hosts", Auth: auth}, hosts},
		{"clear to source", func() (any, error) { return c.ClearHost(ctx, "es-2", "") }, cleared,
			request{Method: "POST", Path: "/v1/hosts/es-2/clear", Auth: auth, ContentType: "application/json", Body: "{}"}, cleared},
		{"clear to pool", func() (any, error) { return c.ClearHost(ctx, "es-2", "sim") }, cleared,
			request{Method: "POST", Path: "/v1/hosts/es-2/clear", Auth: auth, ContentType: "application/json", Body: `{"pool":"sim"}`}, cleared},
		{"vms", func() (any, error) { return c.VMs(ctx) }, hosts[0].VMs,
			request{Method: "GET", Path: "/v1/vms", Auth: auth}, hosts[0].VMs},
		{"switches active", func() (any, error) { return c.Switches(ctx, SwitchesQuery{Active: true}) }, switches,
			request{Method: "GET", Path: "/v1/switches", Query: "active=true", Auth: auth}, switches},
		{"switches all", func() (any, error) { return c.Switches(ctx, SwitchesQuery{}) }, switches,
			request{Method: "GET", Path: "/v1/switches", Auth: auth}, switches},
		{"switches page", func() (any, error) { return c.Switches(ctx, SwitchesQuery{Before: "s-000003", Limit: 1}) }, page,
			request{Method: "GET", Path: "/v1/switches", Query: "before=s-000003&limit=1", Auth: auth}, page},
		{"policy", func() (any, error) { return c.Policy(ctx) }, policy,
			request{Method: "GET", Path: "/v1/policy", Auth: auth}, policy},
		{"links", func() (any, error) { return c.Links(ctx) }, links,
			request{Method: "GET", Path: "/v1/links", Auth: auth}, links},
		{"tuning", func() (any, error) { return c.Tuning(ctx) }, tuning,
			request{Method: "GET", Path: "/v1/tuning", Auth: auth}, tuning},
		{"resize", func() (any, error) {
			return c.ResizeVM(ctx, "j-000000000007", "j-000000000007-a1-w1", api.ResizeRequest{VCPUs: 2})
		}, hosts[0].VMs[0],
			request{Method: "POST", Path: "/v1/jobs/j-000000000007/vms/j-000000000007-a1-w1/resize", Auth: auth,
				ContentType: "application/json", Body: `{"vcpus":2}`}, hosts[0].VMs[0]},
		{"calibration", func() (any, error) { return c.Calibration(ctx) }, calibration,
			request{Method: "GET", Path: "/v1/calibration", Auth: auth}, calibration},
		{"calibrate all", func() (any, error) { return c.Calibrate(ctx, "") }, calibration,
			request{Method: "POST", Path: "/v1/calibrate", Auth: auth, ContentType: "application/json", Body: "{}"}, calibration},
		{"calibrate a site", func() (any, error) { return c.Calibrate(ctx, "spain") }, calibration,
			request{Method: "POST", Path: "/v1/calibrate", Auth: auth, ContentType: "application/json", Body: `{"site":"spain"}`}, calibration},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.answer(t, http.StatusOK, tc.answer)
			got, err := tc.call()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, f.last(t)); diff != "" {
				t.Errorf("request (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.out, got); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSubmitCreated(t *testing.T) {
	f := newFakeDaemon(t)
	f.answer(t, http.StatusCreated, testJob)
	got, err := New(f.URL, testToken).Submit(context.Background(), []byte(jobYAML))
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != testJob.ID || got.State != api.Running {
		t.Errorf("got %s %s", got.ID, got.State)
	}
}

// remoteErrors are error answers of the daemon (or of something in
// front of it) and the errors the client makes of them (TestRemoteErrors),
// and seeds of FuzzDecodeError.
var remoteErrors = []struct {
	name   string
	status int
	answer any
	want   RemoteError
	text   string
}{
	{"invalid fields", 400, api.APIError{Error: "job file: invalid", Code: api.CodeInvalid, Fields: []api.FieldError{
		{Field: "tasks", Problem: "must be an integer >= 1, got 0"},
		{Field: "task_bytes", Problem: "missing required field"},
	}}, RemoteError{Status: 400, Code: "invalid", Message: "job file: invalid", Fields: []api.FieldError{
		{Field: "tasks", Problem: "must be an integer >= 1, got 0"},
		{Field: "task_bytes", Problem: "missing required field"},
	}}, "job file: invalid\n  tasks: must be an integer >= 1, got 0\n  task_bytes: missing required field"},
	{"field in the message", 400, api.APIError{Error: "job.yaml: tasks: must be an integer >= 1, got 0", Code: api.CodeInvalid,
		Fields: []api.FieldError{{Field: "tasks", Problem: "must be an integer >= 1, got 0"}, {Problem: "and more"}}},
		RemoteError{Status: 400, Code: "invalid", Message: "job.yaml: tasks: must be an integer >= 1, got 0",
			Fields: []api.FieldError{{Field: "tasks", Problem: "must be an integer >= 1, got 0"}, {Problem: "and more"}}},
		"job.yaml: tasks: must be an integer >= 1, got 0\n  and more"},
	{"unauthorized", 401, api.APIError{Error: "unauthorized: wrong token", Code: api.CodeUnauthorized},
		RemoteError{Status: 401, Code: "unauthorized", Message: "unauthorized: wrong token"}, "unauthorized: wrong token"},
	{"not found", 404, api.APIError{Error: `job "j-9": not found`, Code: api.CodeNotFound},
		RemoteError{Status: 404, Code: "not_found", Message: `job "j-9": not found`}, `job "j-9": not found`},
	{"code only", 409, api.APIError{Code: api.CodeConflict},
		RemoteError{Status: 409, Code: "conflict"}, "http 409: conflict"},
	{"not the API's error", 502, "<html>bad gateway</html>\n",
		RemoteError{Status: 502, Message: "http 502 Bad Gateway: <html>bad gateway</html>"}, "http 502 Bad Gateway: <html>bad gateway</html>"},
	{"empty", 500, "",
		RemoteError{Status: 500}, "http 500 Internal Server Error"},
	{"long, cut before a letter of two bytes", 503, strings.Repeat("x", 199) + "é" + strings.Repeat("y", 100),
		RemoteError{Status: 503, Message: "http 503 Service Unavailable: " + strings.Repeat("x", 199) + "…"},
		"http 503 Service Unavailable: " + strings.Repeat("x", 199) + "…"},
	{"long", 503, strings.Repeat("x", 300),
		RemoteError{Status: 503, Message: "http 503 Service Unavailable: " + strings.Repeat("x", 200) + "…"},
		"http 503 Service Unavailable: " + strings.Repeat("x", 200) + "…"},
}

func TestRemoteErrors(t *testing.T) {
	f := newFakeDaemon(t)
	c := New(f.URL, testToken)
	for _, tc := range remoteErrors {
		t.Run(tc.name, func(t *testing.T) {
			f.answer(t, tc.status, tc.answer)
			_, err := c.Job(context.Background(), "j-9")
			var re *RemoteError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v (%T), want a *RemoteError", err, err)
			}
			if diff := cmp.Diff(tc.want, *re); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if err.Error() != tc.text {
				t.Errorf("Error() = %q, want %q", err.Error(), tc.text)
			}
		})
	}
}

func TestBadAnswer(t *testing.T) {
	f := newFakeDaemon(t)
	f.answer(t, http.StatusOK, "not json")
	_, err := New(f.URL, testToken).Pools(context.Background())
	var re *RemoteError
	if err == nil || errors.As(err, &re) || !strings.HasPrefix(err.Error(), "GET /v1/pools: the answer: ") {
		t.Errorf("err = %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	_, err := New(base, testToken).Jobs(context.Background(), JobsQuery{})
	want := "cannot reach the metasched daemon at " + base + ": GET /v1/jobs: "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want it to begin with %q", err, want)
	}
	var re *RemoteError
	if errors.As(err, &re) {
		t.Errorf("a connection failure is not a *RemoteError: %#v", re)
	}
}

func TestCanceled(t *testing.T) {
	f := newFakeDaemon(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := New(f.URL, testToken).Pools(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestTimeout(t *testing.T) {
	c := New("http://127.0.0.1:1", testToken)
	if c.http.Timeout != DefaultTimeout || DefaultTimeout != 30*time.Second {
		t.Errorf("default timeout %v, want %v", c.http.Timeout, DefaultTimeout)
	}
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	short := New(srv.URL, testToken).WithHTTPClient(&http.Client{Timeout: 50 * time.Millisecond})
	_, err := short.Pools(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach the metasched daemon at "+srv.URL) ||
		!strings.Contains(err.Error(), "Client.Timeout exceeded") {
		t.Errorf("err = %v", err)
	}
	if c.http.Timeout != DefaultTimeout {
		t.Error("WithHTTPClient changed the original client")
	}
	if short.Base() != srv.URL {
		t.Errorf("Base() = %q", short.Base())
	}
}

func TestAnswerTooLarge(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range maxAnswer>>20 + 1 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	_, err := New(srv.URL, testToken).Logs(context.Background(), "j-1")
	if err == nil || err.Error() != "GET /v1/jobs/j-1/logs: the answer is over 64 MiB" {
		t.Errorf("err = %v", err)
	}
}

func TestContentType(t *testing.T) {
	for body, want := range map[string]string{
		"{}": "application/json", " \n\t[1]": "application/json", "\xef\xbb\xbf{\"a\": 1}": "application/json",
		"name: x": "application/yaml", "": "application/yaml", "# {json}\nname: x": "application/yaml",
	} {
		if got := contentType([]byte(body)); got != want {
			t.Errorf("contentType(%q) = %s, want %s", body, got, want)
		}
	}
}

func ExampleRemoteError() {
	err := &RemoteError{Status: 400, Code: api.CodeInvalid, Message: "job.yaml: the job file is invalid",
		Fields: []api.FieldError{{Field: "tasks", Problem: "must be an integer >= 1, got 0"}, {Field: "efficiency", Problem: "must be > 0 and <= 1, got 2"}}}
	fmt.Println(err)
	// Output:
	// job.yaml: the job file is invalid
	//   tasks: must be an integer >= 1, got 0
	//   efficiency: must be > 0 and <= 1, got 2
}
