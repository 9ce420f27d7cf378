package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/metasched/metasched/internal/cli"

	"github.com/metasched/metasched/metasched/api"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// golden compares got with testdata/NAME.golden, or rewrites the file with
// -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", path, diff)
	}
}

const daemonToken = "t0ken-for-tests"

// daemonRoute is one request the fake daemon expects and its answer.
type daemonRoute struct {
	Method, Path string     // "GET", "/v1/jobs/j-000000000007" (as escaped on the wire)
	Query        url.Values // the query wanted; nil: none
	Body         *string    // the body wanted, byte for byte; nil: none
	Status       int        // 0: 200
	Answer       any        // sent as JSON, or as is (text/plain) when a string
}

// daemonRequest is what the fake daemon recorded of a request.
type daemonRequest struct {
	Method, Path, Query, Auth, Body string
	Key                             []string // the Idempotency-Key headers
}

// fakeDaemon is a stand-in for the metasched daemon that tests the client
// side of the wire: it answers the routes it is given with their canned
// answers, after checking each request's method, path, query and body
// (the test fails on any difference, and on a request no route expects),
// and it answers 401 as the daemon does to a request without the right
// bearer token (every route but /healthz). It records every request.
type fakeDaemon struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []daemonRequest
}

func newFakeDaemon(t *testing.T, token string, routes ...daemonRoute) *fakeDaemon {
	t.Helper()
	f := &fakeDaemon{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("fake daemon: %s %s: read the body: %v", r.Method, r.URL, err)
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, daemonRequest{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), Body: string(body), Key: r.Header.Values(api.IdempotencyHeader)})
		f.mu.Unlock()
		if r.URL.Path != "/healthz" && r.Header.Get("Authorization") != "Bearer "+token {
			answerJSON(t, w, http.StatusUnauthorized, api.APIError{Error: "unauthorized: missing or wrong bearer token",
				Code: api.CodeUnauthorized})
			return
		}
		for _, rt := range routes {
			if rt.Method != r.Method || rt.Path != r.URL.EscapedPath() {
				continue
			}
			q := r.URL.Query()
			if len(q) == 0 {
				q = nil
			}
			if diff := cmp.Diff(rt.Query, q); diff != "" {
				t.Errorf("fake daemon: %s %s: query (-want +got):\n%s", r.Method, r.URL.Path, diff)
			}
			want := ""
			if rt.Body != nil {
				want = *rt.Body
			}
			if string(body) != want {
				t.Errorf("fake daemon: %s %s: body %q, want %q", r.Method, r.URL.Path, body, want)
			}
			status := rt.Status
			if status == 0 {
				status = http.StatusOK
			}
			if s, ok := rt.Answer.(string); ok {
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				w.WriteHeader(status)
				io.WriteString(w, s)
				return
			}
			answerJSON(t, w, status, rt.Answer)
			return
		}
		t.Errorf("fake daemon: unexpected request %s %s", r.Method, r.URL)
		answerJSON(t, w, http.StatusNotFound, api.APIError{Error: "no route " + r.URL.Path, Code: api.CodeUnknownRoute})
	}))
	t.Cleanup(f.Close)
	return f
}

func answerJSON(t *testing.T, w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		t.Errorf("fake daemon: %v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}

// requests returns the requests the fake daemon got.
func (f *fakeDaemon) requests() []daemonRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]daemonRequest(nil), f.reqs...)
}

// runDaemonCmd runs a command line against the daemon at server with
// token, given as flags; the environment variables are cleared so that the
// test does not depend on the shell's.
func runDaemonCmd(t *testing.T, server, token string, args ...string) (int, string, string) {
	t.Helper()
	clearDaemonEnv(t)
	return runCmd(t, append(args, "--server", server, "--token-file", tokenFile(t, token))...)
}

// clearDaemonEnv clears the variables of the daemon's address, token and
// CA for the test.
func clearDaemonEnv(t *testing.T) {
	for _, v := range []string{envServer, envToken, envTokenFile, envCAFile} {
		t.Setenv(v, "")
	}
}

// tokenFile writes token to a file private to its owner.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// closedServer returns the address of a server that is gone.
func closedServer() string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

func ptr[T any](v T) *T { return &v }

// daemonCase is a command run against the fake daemon: its standard output
// is compared with testdata/NAME.golden and, when want is set, decoded
// back into want's type and compared with it (--output json is the API's
// answer).
type daemonCase struct {
	name   string
	args   []string
	routes []daemonRoute
	want   any
	stderr string // what it says on stderr (a note beside its output)
}

func runDaemonCases(t *testing.T, cases []daemonCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeDaemon(t, daemonToken, tc.routes...)
			code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, tc.args...)
			if code != 0 || errOut != tc.stderr {
				t.Fatalf("exit %d, stderr %q, want %q", code, errOut, tc.stderr)
			}
			if got := len(f.requests()); got != len(tc.routes) {
				t.Errorf("%d requests, want %d: %+v", got, len(tc.routes), f.requests())
			}
			golden(t, tc.name, out)
			if tc.want == nil {
				return
			}
			got := reflect.New(reflect.TypeOf(tc.want))
			dec := json.NewDecoder(strings.NewReader(out))
			dec.DisallowUnknownFields()
			if err := dec.Decode(got.Interface()); err != nil {
				t.Fatalf("output is not the answer's JSON: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tc.want, got.Elem().Interface()); diff != "" {
				t.Errorf("JSON output (-answer +output):\n%s", diff)
			}
			if !strings.HasPrefix(out, "{\n  \"") && !strings.HasPrefix(out, "[\n  {") {
				t.Errorf("JSON output not indented:\n%s", out)
			}
		})
	}
}

// The fixtures: what a daemon with three sites would answer.
var (
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

	fixturePlan = api.Plan{Algorithm: "hillclimb", Job: "render-42", Tasks: 300, Feasible: true, Master: "spain",
		Rate: 0.035, Runtime: 8600, Machines: 5,
		Clusters: []api.ClusterPlan{
			{Name: "spain", Master: true, Machines: 3, Allowed: 3, Free: 4, Tasks: 258, BandwidthMbps: 1000, Rate: 0.03, Limit: "free",
				Why: "258 tasks by 8600 s: master's cluster: the master takes 1 machine, the other 3 free work over the 1000 Mbit/s LAN, 86 tasks each"},
			{Name: "latam-a", Machines: 1, Allowed: 1, Free: 1, Tasks: 42, BandwidthMbps: 7.5, Rate: 0.005, Limit: "free",
				Why: "42 tasks by 8600 s: all 1 free machines work, fed at 7.5 Mbit/s from spain, 42 tasks each"},
		},
		Excluded:    []api.Excluded{{Name: "latam-b", Reason: "no machine is free"}},
		Zones:       [][]string{{"latam-a"}, {"latam-b"}, {"spain"}},
		Evaluations: 14,
	}
	fixturePlacement = api.Placement{Plan: fixturePlan, Master: api.HostRef{Site: "spain", Host: "es-1"},
		Workers: []api.HostRef{{Site: "spain", Host: "es-1"}, {Site: "spain", Host: "es-2"}, {Site: "spain", Host: "es-3"},
			{Site: "latam-a", Host: "la-1"}},
		Measured:   []string{"spain-latam-a: 7.5 Mbit/s measured (3 samples, the newest 2026-03-01T11:59:00Z agent to agent), 8 configured"},
		Calibrated: []string{"spain perf: 4e+08 ops/s (2e+08 per vCPU × 2 vCPUs, image debian) measured 2026-03-01T11:00:00Z, 2e+09 configured"}}
	renderSpec = api.JobSpec{Name: "render-42", Type: "render", Tasks: 300, TaskOps: 2e11, TaskBytes: 5e7, Efficiency: 0.8,
		VM: api.VMSize{VCPUs: 2, MemoryMiB: 2048}}

	jobRunning = api.Job{JobHead: api.JobHead{ID: "j-000000000007", Name: "render-42", Type: "render", State: api.Running,
		Reason: "started on 5 VMs", Submitted: t0, Updated: t0.Add(3 * time.Second)}, Spec: renderSpec,
		Transitions: []api.Transition{
			{To: api.Queued, At: t0, Reason: "submitted"},
			{From: api.Queued, To: api.Planned, At: t0.Add(time.Second), Reason: "master on spain, 5 machines"},
			{From: api.Planned, To: api.Provisioning, At: t0.Add(time.Second), Reason: "creating 5 VMs"},
			{From: api.Provisioning, To: api.Running, At: t0.Add(3 * time.Second), Reason: "started on 5 VMs"},
		},
		Placement: &fixturePlacement,
		VMs: []api.JobVM{{Name: "j-000000000007-0", Site: "spain", Host: "es-1", Master: true},
			{Name: "j-000000000007-1", Site: "spain", Host: "es-1"}, {Name: "j-000000000007-2", Site: "spain", Host: "es-2"},
			{Name: "j-000000000007-3", Site: "spain", Host: "es-3"}, {Name: "j-000000000007-4", Site: "latam-a", Host: "la-1"}},
		RunTimes: api.RunTimes{PredictedS: 8.6},
		Clusters: []api.ClusterTasks{{Name: "spain", TasksPredicted: 258}, {Name: "latam-a", TasksPredicted: 42}},
		Attempts: 1}
	jobDone = func() api.Job {
		j := jobRunning
		j.ID, j.Name, j.State, j.Reason = "j-000000000006", "render-41", api.Done, "exit code 0"
		j.Spec.Name = j.Name
		j.Updated = t0.Add(12 * time.Second)
		j.Transitions = append(j.Transitions[:4:4], api.Transition{From: api.Running, To: api.Done, At: j.Updated, Reason: "exit code 0"})
		j.MeasuredS, j.Ratio, j.ExitCode = 8.75, 8.75/8.6, ptr(0)
		j.StartEndS, j.ProgramS = 2.5, 6.25
		j.Clusters = []api.ClusterTasks{{Name: "spain", TasksPredicted: 258, TasksDone: ptr(251)},
			{Name: "latam-a", TasksPredicted: 42, TasksDone: ptr(49)}}
		return j
	}()
	jobQueued = api.Job{JobHead: api.JobHead{ID: "j-000000000008", Name: "sim-1", Type: "sim", State: api.Queued, Reason: "submitted",
		Submitted: t0.Add(5 * time.Second), Updated: t0.Add(5 * time.Second)},
		Spec: api.JobSpec{Name: "sim-1", Type: "sim", Tasks: 40, TaskOps: 1e12, TaskBytes: 1e6, Efficiency: 0.9,
			VM: api.VMSize{VCPUs: 4, MemoryMiB: 4096}, Command: []string{"/opt/sim/run", "--fast"}},
		Transitions: []api.Transition{{To: api.Queued, At: t0.Add(5 * time.Second), Reason: "submitted"}}}
	jobFailed = api.Job{JobHead: api.JobHead{ID: "j-000000000005", Name: "render-40", Type: "render", State: api.Failed,
		Reason: "agent latam-b unreachable", Submitted: t0.Add(-time.Hour), Updated: t0.Add(-50 * time.Minute)}, Spec: renderSpec,
		Transitions: []api.Transition{{To: api.Queued, At: t0.Add(-time.Hour), Reason: "submitted"},
			{From: api.Queued, To: api.Failed, At: t0.Add(-50 * time.Minute), Reason: "agent latam-b unreachable"}},
		RunTimes: api.RunTimes{PredictedS: 9000}, Attempts: 2}

	fixturePools = []api.Pool{
		{Name: "render", VCPUs: 2, MemoryMiB: 2048, HoldingCost: 2, Queued: 1, Active: 1, Jobs: 2,
			Hosts: []string{"es-1", "es-2", "es-3", "la-1"}, Busy: 4, SwitchingIn: 1,
			Rates: api.Rates{Arrival: 0.125, Service: 0.03125, Samples: 40}, Completed: 12},
		{Name: "sim", VCPUs: 4, MemoryMiB: 4096, HoldingCost: 1, Queued: 1, Jobs: 1,
			Hosts: []string{"lb-1"}, Idle: 1, SwitchingOut: 1,
			Rates: api.Rates{Arrival: 0.01, Service: 0.02, Samples: 2, Prior: true}},
	}
	vm = func(name, host string, vcpus, mib int) api.VM {
		return api.VM{Name: name, Host: host, Pool: "render", Job: "j-000000000007", State: api.VMRunning, VCPUs: vcpus,
			MaxVCPUs: 4, MemoryMiB: mib, MaxMemoryMiB: 4096, Managed: true}
	}
	fixtureHosts = []api.HostView{
		{Name: "es-1", Site: "spain", Pool: "render", State: api.HostBusy, CPUs: 8, MemoryMiB: 16384, FreeVCPUs: 4,
			FreeMemoryMiB: 12288, VMs: []api.VM{vm("j-000000000007-0", "es-1", 2, 2048), vm("j-000000000007-1", "es-1", 2, 2048)}},
		{Name: "es-2", Site: "spain", Pool: "render", State: api.HostBusy, CPUs: 8, MemoryMiB: 16384, FreeVCPUs: 6,
			FreeMemoryMiB: 14336, VMs: []api.VM{vm("j-000000000007-2", "es-2", 2, 2048)}},
		{Name: "lb-1", Site: "latam-b", Pool: "sim", State: api.HostIdle, CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4,
			FreeMemoryMiB: 8192, VMs: []api.VM{}},
		{Name: "lb-2", Site: "latam-b", Pool: "sim", State: api.HostSwitching, Switch: "s-000003", From: "sim", To: "render",
			CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4, FreeMemoryMiB: 8192, VMs: []api.VM{}},
		{Name: "lb-3", Site: "latam-b", State: api.HostStranded, Switch: "s-000002", From: "sim", To: "render",
			CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4, FreeMemoryMiB: 8192, VMs: []api.VM{},
			Reason: "prepare-add failed: agent latam-b timed out; the revert to sim failed too"},
		{Name: "lb-4", Site: "latam-b", Pool: "sim", State: api.HostUnreachable, Reason: "agent latam-b: connection refused",
			CPUs: 4, MemoryMiB: 8192, VMs: []api.VM{}},
	}
	drainingHost = func() api.HostView {
		h := fixtureHosts[0]
		h.State = api.HostDraining
		return h
	}()
	drainedHost = api.HostView{Name: "es-1", Site: "spain", Pool: "render", State: api.HostDrained, CPUs: 8, MemoryMiB: 16384,
		FreeVCPUs: 8, FreeMemoryMiB: 16384, VMs: []api.VM{}}
	clearedHost = api.HostView{Name: "lb-3", Site: "latam-b", Pool: "render", State: api.HostIdle,
		CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4, FreeMemoryMiB: 8192, VMs: []api.VM{}}

	switchActive = api.SwitchView{ID: "s-000003", From: "sim", To: "render", Host: "lb-2", Phase: "reconfigure",
		Started: t0.Add(10 * time.Second), Updated: t0.Add(11 * time.Second), Seconds: 1.5}
	switchesAll = []api.SwitchView{
		{ID: "s-000001", From: "render", To: "sim", Host: "es-4", Phase: "done", Final: true,
			Started: t0.Add(-time.Hour), Updated: t0.Add(-time.Hour + 4*time.Second), Seconds: 4.25},
		{ID: "s-000002", From: "sim", To: "render", Host: "lb-3", Phase: "stranded", Final: true, Requeued: []string{"j-000000000004"},
			FailedIn: "prepare-add", Reason: "agent latam-b timed out",
			Started: t0.Add(-30 * time.Minute), Updated: t0.Add(-29 * time.Minute), Seconds: 60},
		switchActive,
	}
	fixturePolicy = api.PolicyView{Configured: "optimal", InForce: "heuristic",
		Note: "the rates drifted by 34% from those of the optimal table: it is being solved again",
		Pools: []api.PolicyPool{{Name: "render", Jobs: 2, Servers: 4, Arrival: 0.125, Service: 0.03125, HoldingCost: 2},
			{Name: "sim", Jobs: 1, Servers: 1, Arrival: 0.01, Service: 0.02, HoldingCost: 1}},
		SwitchRate: 0.25, SwitchSamples: 3, Servers: 6, Decisions: 240, Switches: 3, Last: "sim→render", LastAt: t0.Add(10 * time.Second),
		Table: &api.PolicyTable{Source: "solved", States: 9000, SolvedAt: t0.Add(-2 * time.Hour),
			Arrival: []float64{0.08, 0.01}, Service: []float64{0.03, 0.02}, SwitchRate: 0.2, Solving: true}}
	fixturePlanResult = api.PlanResult{Placement: fixturePlacement,
		FreeHosts: map[string]int{"spain": 4, "latam-a": 1, "latam-b": 0}, Explanation: "master on spain: 5 machines process 0.035 tasks/s"}
)

// A job file as a user writes it; the daemon gets its bytes unchanged.
const jobFileText = "# the render job\nname: render-42\ntype: render\ntasks: 300\ntask_ops: 2.0e11\ntask_bytes: 5.0e7\nvm: {vcpus: 2, memory_mib: 2048}\n"

func TestDaemonFlagsAndEnv(t *testing.T) {
	f := newFakeDaemon(t, daemonToken, daemonRoute{Method: "GET", Path: "/v1/pools", Answer: fixturePools})
	gone := closedServer()
	bare := strings.TrimPrefix(f.URL, "http://")
	openTokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(openTokenFile, []byte(daemonToken), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name           string
		envServer      string
		envToken       string
		args           []string
		code           int
		auth           string // the Authorization sent, when a request is
		stderr         string
		requestReached bool
	}{
		{"environment", f.URL, daemonToken, nil, 0, "Bearer " + daemonToken, "", true},
		{"flags over environment", gone, "wrong", []string{"--server", f.URL, "--token-file", tokenFile(t, daemonToken)}, 0, "Bearer " + daemonToken, "", true},
		{"token from the environment", f.URL, "wrong", nil, 1, "Bearer wrong", "metasched: unauthorized by the daemon at " + f.URL, true},
		{"server from the environment", gone, daemonToken, nil, 1, "", "metasched: cannot reach the metasched daemon at " + gone + ": GET /v1/pools: ", false},
		{"token file flag, server environment", f.URL, "", []string{"--token-file", tokenFile(t, daemonToken)}, 0, "Bearer " + daemonToken, "", true},
		{"token file readable by others", f.URL, "", []string{"--token-file", openTokenFile}, 2, "", "metasched: --token-file: " + openTokenFile + ": the token file may be read by its group or others (mode 0644): make it private (chmod 600 " + openTokenFile + ")", false},
		{"no token file", f.URL, "", []string{"--token-file", openTokenFile + ".gone"}, 2, "", "metasched: --token-file: open " + openTokenFile + ".gone: no such file or directory", false},
		{"server flag, token environment", gone, daemonToken, []string{"--server", f.URL}, 0, "Bearer " + daemonToken, "", true},
		{"bare host and port", "", daemonToken, []string{"--server", bare}, 0, "Bearer " + daemonToken, "", true},
		{"default server", "", daemonToken, nil, -1, "", "", false},
		{"no token", f.URL, "", nil, 2, "", "metasched: no token for the daemon at " + f.URL + ": give --token-file FILE, or set METASCHED_TOKEN_FILE or METASCHED_TOKEN", false},
		{"bad server flag", "", daemonToken, []string{"--server", "ftp://x"}, 2, "", `metasched: --server: want http://HOST:PORT, got "ftp://x"`, false},
		{"bad server variable", "http://", daemonToken, nil, 2, "", `metasched: METASCHED_SERVER: want http://HOST:PORT, got "http://"`, false},
		{"a grid's daemons, the first gone", gone + ", " + f.URL, daemonToken, nil, 0, "Bearer " + daemonToken, "", true},
		{"a grid's daemons, one bad", f.URL + ",ftp://x", daemonToken, nil, 2, "", `metasched: METASCHED_SERVER: want http://HOST:PORT, got "ftp://x"`, false},
		{"a grid's daemons, https and http", "", daemonToken, []string{"--server", "https://a:1," + f.URL}, 2, "",
			`metasched: --server: the daemons of one grid all serve https, or all plain http: "https://a:1" and "` + f.URL + `"`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clearDaemonEnv(t)
			t.Setenv(envServer, tc.envServer)
			t.Setenv(envToken, tc.envToken)
			before := len(f.requests())
			if tc.code == -1 {
				// Nothing may listen on the default address here: only
				// check that it is the one tried.
				c, err := (&daemonFlags{}).client()
				if err != nil || c.Base() != defaultServer {
					t.Errorf("client: %v, %v; want %s", c, err, defaultServer)
				}
				return
			}
			code, out, errOut := runCmd(t, append([]string{"pools"}, tc.args...)...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, errOut)
			}
			if !strings.Contains(errOut, tc.stderr) || (tc.stderr == "") != (errOut == "") {
				t.Errorf("stderr %q, want %q", errOut, tc.stderr)
			}
			if tc.code != 0 && out != "" {
				t.Errorf("stdout on error: %q", out)
			}
			reqs := f.requests()[before:]
			if tc.requestReached != (len(reqs) == 1) {
				t.Fatalf("requests %+v, want reached %v", reqs, tc.requestReached)
			}
			if tc.requestReached && reqs[0].Auth != tc.auth {
				t.Errorf("Authorization %q, want %q", reqs[0].Auth, tc.auth)
			}
		})
	}
}

// Every command that talks to the daemon has --server and --token, and
// says how to give the token when there is none.
func TestDaemonCommandsNeedToken(t *testing.T) {
	clearDaemonEnv(t)
	job := writeFile(t, "job.yaml", jobFileText)
	for _, args := range [][]string{
		{"submit", job}, {"jobs"}, {"status"}, {"status", "j-1"}, {"cancel", "j-1"}, {"logs", "j-1"},
		{"plan", "--job", job}, {"pools"}, {"switches"}, {"switches", "start", "render", "sim"}, {"hosts"}, {"hosts", "clear", "lb-3"}, {"calibration"}, {"calibrate"}, {"resize", "j-1", "j-1-a1-w1", "--vcpus", "2"},
	} {
		code, out, errOut := runCmd(t, append(args, "--server", "http://127.0.0.1:1")...)
		if code != 2 || out != "" || !strings.Contains(errOut, "give --token-file FILE, or set METASCHED_TOKEN_FILE or METASCHED_TOKEN") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and the flag and variable named", args, code, out, errOut)
		}
	}
}

// What the daemon refuses comes back with the right exit code and its
// message; nothing goes to stdout.
func TestDaemonErrors(t *testing.T) {
	job := writeFile(t, "job.yaml", jobFileText)
	invalid := api.APIError{Error: "the job file is invalid", Code: api.CodeInvalid, Fields: []api.FieldError{
		{Field: "tasks", Problem: "must be an integer >= 1, got 0"},
		{Field: "type", Problem: `no pool "render": want one of sim`},
	}}
	fieldLines := "the job file is invalid\n  tasks: must be an integer >= 1, got 0\n  type: no pool \"render\": want one of sim\n"
	tests := []struct {
		name   string
		args   []string
		route  daemonRoute
		code   int
		stderr string
	}{
		{"submit invalid", []string{"submit", job},
			daemonRoute{Method: "POST", Path: "/v1/jobs", Body: ptr(jobFileText), Status: 400, Answer: invalid},
			2, "metasched: " + job + ": " + fieldLines},
		{"plan invalid", []string{"plan", "--job", job},
			daemonRoute{Method: "POST", Path: "/v1/plan", Body: ptr(jobFileText), Status: 400, Answer: invalid},
			2, "metasched: " + job + ": " + fieldLines},
		{"submit too large", []string{"submit", job},
			daemonRoute{Method: "POST", Path: "/v1/jobs", Body: ptr(jobFileText), Status: 413,
				Answer: api.APIError{Error: "the body is over 1048576 bytes", Code: api.CodeTooLarge}},
			2, "metasched: " + job + ": the body is over 1048576 bytes\n"},
		{"submit unsupported", []string{"submit", job},
			daemonRoute{Method: "POST", Path: "/v1/jobs", Body: ptr(jobFileText), Status: 415,
				Answer: api.APIError{Error: "the body is neither YAML nor JSON", Code: api.CodeUnsupported}},
			2, "metasched: " + job + ": the body is neither YAML nor JSON\n"},
		{"clear invalid", []string{"hosts", "clear", "lb-3", "--pool", "gpu"},
			daemonRoute{Method: "POST", Path: "/v1/hosts/lb-3/clear", Body: ptr(`{"pool":"gpu"}`), Status: 400,
				Answer: api.APIError{Error: "invalid request", Code: api.CodeInvalid,
					Fields: []api.FieldError{{Field: "pool", Problem: `no pool "gpu"`}}}},
			2, "metasched: invalid request\n  pool: no pool \"gpu\"\n"},
		{"unknown job", []string{"status", "j-000000000099"},
			daemonRoute{Method: "GET", Path: "/v1/jobs/j-000000000099", Status: 404,
				Answer: api.APIError{Error: `job "j-000000000099": not found`, Code: api.CodeNotFound}},
			1, "metasched: job \"j-000000000099\": not found\n"},
		{"cancel ended", []string{"cancel", "j-000000000006"},
			daemonRoute{Method: "POST", Path: "/v1/jobs/j-000000000006/cancel", Status: 409,
				Answer: api.APIError{Error: `job "j-000000000006" is done: it cannot be cancelled`, Code: api.CodeConflict}},
			1, "metasched: job \"j-000000000006\" is done: it cannot be cancelled\n"},
		{"resize unsupported", []string{"resize", "j-000000000006", "j-000000000006-a1-w1", "--vcpus", "1"},
			daemonRoute{Method: "POST", Path: "/v1/jobs/j-000000000006/vms/j-000000000006-a1-w1/resize", Body: ptr(`{"vcpus":1}`), Status: 409,
				Answer: api.APIError{Error: "the agent did not resize VM j-000000000006-a1-w1: not supported by the hypervisor: vcpu unplug", Code: api.CodeConflict}},
			1, "metasched: the agent did not resize VM j-000000000006-a1-w1: not supported by the hypervisor: vcpu unplug\n"},
		{"resize beyond the maximum", []string{"resize", "j-000000000006", "j-000000000006-m", "--memory-mib", "9000"},
			daemonRoute{Method: "POST", Path: "/v1/jobs/j-000000000006/vms/j-000000000006-m/resize", Body: ptr(`{"memory_mib":9000}`), Status: 409,
				Answer: api.APIError{Error: "VM j-000000000006-m cannot grow that far", Code: api.CodeConflict,
					Fields: []api.FieldError{{Field: "memory_mib", Problem: "9000 is beyond the VM's maximum of 3072 MiB (its size plus vm_headroom.memory_mib)"}}}},
			1, "metasched: VM j-000000000006-m cannot grow that far\n  memory_mib: 9000 is beyond the VM's maximum of 3072 MiB (its size plus vm_headroom.memory_mib)\n"},
		{"logs unknown", []string{"logs", "j-000000000099"},
			daemonRoute{Method: "GET", Path: "/v1/jobs/j-000000000099/logs", Status: 404,
				Answer: api.APIError{Error: `job "j-000000000099": not found`, Code: api.CodeNotFound}},
			1, "metasched: job \"j-000000000099\": not found\n"},
		{"internal", []string{"jobs"},
			daemonRoute{Method: "GET", Path: "/v1/jobs", Status: 500,
				Answer: api.APIError{Error: "store: disk full", Code: api.CodeInternal}},
			1, "metasched: store: disk full\n"},
		{"unavailable", []string{"hosts"},
			daemonRoute{Method: "GET", Path: "/v1/hosts", Status: 503, Answer: "shutting down\n"},
			1, "metasched: http 503 Service Unavailable: shutting down\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeDaemon(t, daemonToken, tc.route)
			code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, tc.args...)
			if code != tc.code || errOut != tc.stderr {
				t.Errorf("exit %d, stderr:\n%s\nwant %d and:\n%s", code, errOut, tc.code, tc.stderr)
			}
			if out != "" {
				t.Errorf("stdout on error: %q", out)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("%d requests, want 1", n)
			}
		})
	}
}

func TestDaemonUnauthorized(t *testing.T) {
	f := newFakeDaemon(t, daemonToken)
	code, out, errOut := runDaemonCmd(t, f.URL, "not-the-token", "jobs")
	want := "metasched: unauthorized by the daemon at " + f.URL + " (check --token-file, METASCHED_TOKEN_FILE or METASCHED_TOKEN): unauthorized: missing or wrong bearer token\n"
	if code != 1 || out != "" || errOut != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
}

func TestDaemonUnreachable(t *testing.T) {
	gone := closedServer()
	job := writeFile(t, "job.yaml", jobFileText)
	for _, args := range [][]string{{"jobs"}, {"submit", job}, {"status"}, {"plan", "--job", job}, {"hosts", "clear", "lb-3"}} {
		code, out, errOut := runDaemonCmd(t, gone, daemonToken, args...)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "metasched: cannot reach the metasched daemon at "+gone+": ") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 1 and the address", args, code, out, errOut)
		}
	}
}

// Bad usage is caught before any request.
func TestDaemonUsage(t *testing.T) {
	f := newFakeDaemon(t, daemonToken)
	job := writeFile(t, "job.yaml", jobFileText)
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := []struct {
		args   []string
		stderr string
	}{
		{[]string{"submit"}, "metasched submit: want one job file, got 0 arguments"},
		{[]string{"submit", job, job}, "metasched submit: want one job file, got 2 arguments"},
		{[]string{"submit", missing}, "open " + missing + ": no such file or directory"},
		{[]string{"submit", job, "--output", "xml"}, `--output: must be table or json, got "xml"`},
		{[]string{"jobs", "--state", "queued,lost"}, `--state: unknown state "lost": want one or more of queued, planned, provisioning, running, done, failed, cancelled`},
		{[]string{"jobs", "--limit", "-1"}, "--limit: must be 0 (the daemon's page size) or more, got -1"},
		{[]string{"jobs", "extra"}, `metasched jobs: unexpected argument "extra"`},
		{[]string{"status", "a", "b"}, "metasched status: want at most one job ID, got 2 arguments"},
		{[]string{"cancel"}, "metasched cancel: want one job ID, got 0 arguments"},
		{[]string{"logs", "a", "b"}, "metasched logs: want one job ID, got 2 arguments"},
		{[]string{"logs", "j-1", "--output", "json"}, "unknown flag: --output"},
		{[]string{"hosts", "clear"}, "metasched hosts clear: want one host name, got 0 arguments"},
		{[]string{"resize", "j-1"}, "metasched resize: want a job ID and the name of one of its VMs, got 1 argument"},
		{[]string{"resize", "j-1", "vm"}, "give --vcpus, --memory-mib or both"},
		{[]string{"resize", "j-1", "vm", "--vcpus", "0"}, "--vcpus: must be >= 1, not 0"},
		{[]string{"resize", "j-1", "vm", "--memory-mib", "-5"}, "--memory-mib: must be >= 1, not -5"},
		{[]string{"resize", "j-1", "vm", "--vcpus", "two"}, `invalid argument "two" for "--vcpus"`},
		{[]string{"hosts", "lb-3"}, `metasched hosts: unexpected argument "lb-3"`},
		{[]string{"switches", "--all=maybe"}, "invalid argument"},
		{[]string{"plan"}, "--job: required"},
		{[]string{"plan", "--job", missing}, "--job: open " + missing + ": no such file or directory"},
		{[]string{"plan", "--job", job, "--master", "spain"}, "--master: only with --grid: the daemon plans by the job file's placement and master, with its own settings"},
		{[]string{"plan", "--job", job, "--algorithm", "hillclimb"}, "--algorithm: only with --grid"},
		{[]string{"plan", "--job", job, "--restarts", "2"}, "--restarts: only with --grid"},
		{[]string{"plan", "--job", job, "--output", "yaml"}, `--output: must be table or json, got "yaml"`},
	}
	for _, tc := range tests {
		code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.stderr)
		}
	}
	if reqs := f.requests(); len(reqs) != 0 {
		t.Errorf("requests sent on bad usage: %+v", reqs)
	}
}

func TestDaemonURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8080": "http://127.0.0.1:8080", "http://127.0.0.1:8080/": "http://127.0.0.1:8080",
		"127.0.0.1:8080": "http://127.0.0.1:8080", "https://sched.example.org": "https://sched.example.org",
		"ftp://x": "", "http://": "", "http://h:1/?a=b": "", "::": "",
		"http://gw.example.org/metasched/": "http://gw.example.org/metasched",
	} {
		got, err := daemonURL(in)
		if got != want || (err != nil) != (want == "") {
			t.Errorf("daemonURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

func TestSeconds(t *testing.T) {
	for s, want := range map[float64]string{0: "-", -1: "-", 0.25: "0.25 s", 8.571428: "8.57 s", 119: "119 s",
		120: "2.0 min", 3599: "60.0 min", 7200: "2.0 h", 90000: "25.0 h"} {
		if got := seconds(s); got != want {
			t.Errorf("seconds(%g) = %q, want %q", s, got, want)
		}
	}
}

// The logs come out byte for byte.
func TestLogsRaw(t *testing.T) {
	logs := "frame 1 of 300\r\nframe 2 of 300\n\x00\xff no newline at the end"
	f := newFakeDaemon(t, daemonToken, daemonRoute{Method: "GET", Path: "/v1/jobs/j-000000000007/logs", Answer: logs})
	code, out, errOut := runDaemonCmd(t, f.URL, daemonToken, "logs", "j-000000000007")
	if code != 0 || errOut != "" || !bytes.Equal([]byte(out), []byte(logs)) {
		t.Errorf("exit %d, stderr %q, stdout %q; want %q", code, errOut, out, logs)
	}
}

// The adversary's output: a title change (OSC ... BEL), a screen clear
// (CSI 2J), a carriage return, a C1 control, a byte that is not UTF-8.
const hostileLogs = "line 1\tok\n\x1b]0;owned\x07\x1b[2Jback\\slash\rover\u009b31m é\xff\n"

// On a terminal, logs escapes what the terminal would obey; with --raw, or
// on a pipe (TestLogsRaw), it writes the bytes unchanged.
func TestLogsOnATerminal(t *testing.T) {
	f := newFakeDaemon(t, daemonToken, daemonRoute{Method: "GET", Path: "/v1/jobs/j-000000000007/logs", Answer: hostileLogs})
	clearDaemonEnv(t)
	term := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		e := &env{stdout: &out, stderr: &errOut, tty: true}
		args = append(args, "--server", f.URL, "--token-file", tokenFile(t, daemonToken))
		code := cli.Execute(context.Background(), newRoot(e), args, &out, &errOut)
		return code, out.String()
	}
	code, out := term("logs", "j-000000000007")
	want := `line 1` + "\t" + `ok` + "\n" + `\x1b]0;owned\x07\x1b[2Jback\\slash\rover\u009b31m é\xff` + "\n"
	if code != 0 || out != want {
		t.Errorf("on a terminal: exit %d, %q; want %q", code, out, want)
	}
	for i := range len(out) {
		if c := out[i]; c < 0x20 && c != '\n' && c != '\t' || c == 0x7f {
			t.Errorf("a control byte %#x reached the terminal at %d: %q", c, i, out)
		}
	}
	if code, out := term("logs", "--raw", "j-000000000007"); code != 0 || out != hostileLogs {
		t.Errorf("--raw on a terminal: exit %d, %q; want the bytes unchanged", code, out)
	}
	if code, out, _ := runDaemonCmd(t, f.URL, daemonToken, "logs", "j-000000000007"); code != 0 || out != hostileLogs {
		t.Errorf("on a pipe: exit %d, %q; want the bytes unchanged", code, out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
