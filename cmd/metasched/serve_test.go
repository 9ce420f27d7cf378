package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/syncbuf"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

// The real binary: serve runs the demo and exits, serves again on the
// same data directory, and the client commands drive it.

// serveAddr returns a local address nothing listens on (it listened a
// moment ago).
func serveAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// serveEnv is the test's environment without the daemon's variables, plus
// extra.
func serveEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains([]string{envServer, envToken, envTokenFile, envCAFile}, name) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runBin runs the binary to its end (at most limit) and returns its exit
// code and output.
func runBin(t *testing.T, bin string, env []string, limit time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir() // a default ./metasched-data would land here
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("metasched %s: still running after %s\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), limit, out.String(), errOut.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("metasched %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// A job file as a user writes it for the demo grid.
const serveJobFile = "# a small simulation\nname: cli-sim\ntype: sim\ntasks: 20\ntask_ops: 1.0e10\ntask_bytes: 1.0e5\n"

var demoTypeLine = regexp.MustCompile(`(?m)^  (\w+) +(\d+) done, (\d+) failed, (\d+) cancelled; mean wait `)

// checkDemoLog checks the demo's log at info: one line per switch, and a
// few lines of the daemon's own (its start, the plain-HTTP warning); it
// returns the number of lines of each job, which the caller holds against
// the job's changes of state.
func checkDemoLog(t *testing.T, log string) map[string]int {
	t.Helper()
	perJob, perSwitch := map[string]int{}, map[string]int{}
	var other []string
	for line := range strings.Lines(log) {
		var rec struct {
			Level, Message, Job, Switch string
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("a log line that is not JSON: %q", line)
			continue
		}
		switch {
		case rec.Job != "":
			perJob[rec.Job]++
		case rec.Switch != "":
			perSwitch[rec.Switch]++
		default:
			other = append(other, line)
		}
	}
	for id, n := range perSwitch {
		if n > 1 {
			t.Errorf("switch %s: %d lines in the log, want one", id, n)
		}
	}
	if len(other) > 4 {
		t.Errorf("%d lines of neither a job nor a switch:\n%s", len(other), strings.Join(other, ""))
	}
	t.Logf("the demo's log: %d jobs, %d switches, %d other lines", len(perJob), len(perSwitch), len(other))
	return perJob
}

func TestServeDemoThenCLI(t *testing.T) {
	bin := buildBinary(t)
	data := t.TempDir()

	// The demo: address and token first, the summary last, exit 0.
	addr := serveAddr(t)
	code, out, errOut := runBin(t, bin, serveEnv(), 4*time.Minute, "serve", "--listen", addr, "--data-dir", data,
		"--demo-jobs", "12", "--demo-gap", "100ms", "--exit-after-demo", "--log-format", "json")
	if code != 0 {
		t.Fatalf("demo: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	jobLines := checkDemoLog(t, errOut)
	t.Logf("demo:\n%s", out)
	tokenData, err := os.ReadFile(filepath.Join(data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenData))
	lines := strings.Split(out, "\n")
	tokenFile := filepath.Join(data, "token")
	if len(lines) < 3 || lines[0] != fmt.Sprintf("metasched daemon on http://%s (data in %s)", addr, data) || lines[1] != "operator token in "+tokenFile || token == "" ||
		lines[2] != fmt.Sprintf("dashboard: http://%s/ (log in with the operator token: cat %s)", addr, tokenFile) {
		t.Errorf("the first lines are not the address, the token's file and the dashboard:\n%s", out)
	}
	if strings.Contains(out+errOut, token) {
		t.Errorf("the token is printed:\n%s\n%s", out, errOut)
	}
	if !strings.Contains(out, "  export METASCHED_SERVER=http://"+addr+"\n  export METASCHED_TOKEN_FILE="+tokenFile+"\n") {
		t.Errorf("no export line:\n%s", out)
	}
	if strings.Contains(out, "holds an earlier run") {
		t.Errorf("a demo on a fresh data directory says it reuses one:\n%s", out)
	}
	iDemo, iSum := strings.Index(out, "\ndemo: 12 jobs of "), strings.Index(out, "\ndemo summary: 12 jobs in ")
	if iDemo < 0 || iSum < iDemo {
		t.Errorf("want the demo's announcement, then its summary:\n%s", out)
	}
	done := 0
	for _, m := range demoTypeLine.FindAllStringSubmatch(out, -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatal(err)
		}
		done += n
		if m[3] != "0" || m[4] != "0" {
			t.Errorf("type %s: %s failed, %s cancelled", m[1], m[3], m[4])
		}
	}
	if done != 12 {
		t.Errorf("%d jobs done, want 12:\n%s", done, out)
	}
	if m := regexp.MustCompile(`VMs: (\d+) created, (\d+) destroyed \(by every job while the demo ran\), 0 of the demo's jobs left on the hosts\n`).FindStringSubmatch(out); m == nil || m[1] != m[2] || m[1] == "0" {
		t.Errorf("want every VM created destroyed and 0 left on the hosts:\n%s", out)
	}
	if strings.Contains(out, "serving on ") {
		t.Errorf("--exit-after-demo, yet it says it serves on:\n%s", out)
	}

	// Serve again on the same data directory, without the demo.
	addr = serveAddr(t)
	server := "http://" + addr
	srv := exec.Command(bin, "serve", "--listen", addr, "--data-dir", data, "--demo=false", "--log-format", "json")
	srv.Env = serveEnv()
	srv.Dir = t.TempDir()
	srvOut, srvErr := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	srv.Stdout, srv.Stderr = srvOut, srvErr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = srv.Process.Kill() // by PID: this test's own child, which the test did not stop
			<-exited
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(server + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve does not answer /healthz: %v\nstdout:\n%s\nstderr:\n%s", err, srvOut, srvErr)
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("serve exited: %v\nstdout:\n%s\nstderr:\n%s", err, srvOut, srvErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if got := srvOut.String(); !strings.HasPrefix(got, "metasched daemon on "+server+" (data in "+data+")\noperator token in "+tokenFile+"\n") {
		t.Errorf("restart: want the address and the token's file first:\n%s", got)
	}
	if again, err := os.ReadFile(tokenFile); err != nil || strings.TrimSpace(string(again)) != token {
		t.Errorf("restart: the token file holds %q (%v), want the same token", again, err)
	}

	env := serveEnv(envServer+"="+server, envToken+"="+token)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runBin(t, bin, env, time.Minute, args...)
	}
	job := writeFile(t, "job.yaml", serveJobFile)

	// The demo logged at most one line per change of each job's state (its
	// submission is the API's answer, not a line).
	for id, n := range jobLines {
		code, out, errOut := cli("status", id, "--output", "json")
		var j api.Job
		if code != 0 || json.Unmarshal([]byte(out), &j) != nil {
			t.Fatalf("status %s: exit %d: %s", id, code, errOut)
		}
		if n > len(j.Transitions)-1 {
			t.Errorf("job %s: %d lines in the demo's log for %d changes of state", id, n, len(j.Transitions)-1)
		}
	}

	code, out, errOut = cli("submit", job)
	m := regexp.MustCompile(`^(j-\d{12}) queued\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil || errOut != "" {
		t.Fatalf("submit: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	id := m[1]
	if id != "j-000000000013" {
		t.Errorf("the job after the 12 of the demo is %s, want j-000000000013", id)
	}

	// Wait for the job to end, through the API.
	c := client.New(server, token)
	deadline = time.Now().Add(time.Minute)
	for {
		j, err := c.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State == api.Done {
			break
		}
		if j.State.Terminal() || time.Now().After(deadline) {
			t.Fatalf("job %s: %s (%s), want done", id, j.State, j.Reason)
		}
		time.Sleep(100 * time.Millisecond)
	}

	code, out, errOut = cli("jobs")
	rows := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || errOut != "" || len(rows) != 14 || !strings.HasPrefix(rows[0], "ID ") || !strings.HasPrefix(rows[13], id+" ") ||
		strings.Count(out, " done ") != 13 {
		t.Errorf("jobs: exit %d, stderr %q; want a header, 13 done jobs, %s last:\n%s", code, errOut, id, out)
	}
	code, out, errOut = cli("status", id)
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "Job "+id+": cli-sim, type sim\n") || !strings.Contains(out, "Transitions:") {
		t.Errorf("status: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, out, errOut = cli("plan", "--job", job)
	if code != 0 || errOut != "" || !strings.Contains(out, "Master on ") {
		t.Errorf("plan --job: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, out, errOut = cli("pools")
	var pools []string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && (f[0] == "render" || f[0] == "sim" || f[0] == "etl") {
			pools = append(pools, f[0])
		}
	}
	if code != 0 || errOut != "" || strings.Join(pools, " ") != "render sim etl" {
		t.Errorf("pools: exit %d, stderr %q, pools %v:\n%s", code, errOut, pools, out)
	}
	code, out, errOut = cli("hosts")
	rows = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if code != 0 || errOut != "" || len(rows) != 17 || !strings.HasPrefix(rows[0], "HOST ") {
		t.Errorf("hosts: exit %d, stderr %q; want a header and 16 hosts:\n%s", code, errOut, out)
	}
	code, out, errOut = cli("switches", "--all")
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "ID ") {
		t.Errorf("switches --all: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, out, errOut = cli("logs", id)
	if code != 0 || errOut != "" || !strings.HasPrefix(out, "emulating job cli-sim (id "+id+"): master VM ") || !strings.HasSuffix(out, "emulated run finished\n") {
		t.Errorf("logs: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, out, errOut = cli("cancel", id)
	if code != 1 || out != "" || !strings.Contains(errOut, id) || !strings.Contains(errOut, "done") {
		t.Errorf("cancel of a done job: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
	bad := writeFile(t, "bad.yaml", "name: cli-bad\ntype: sim\ntasks: 0\ntask_ops: 1.0e10\ntask_bytes: 0\nefficiency: 2\n")
	code, out, errOut = cli("submit", bad)
	if code != 2 || out != "" || !strings.HasPrefix(errOut, "metasched: "+bad+": ") ||
		!strings.Contains(errOut, "\n  tasks: must be an integer >= 1, got 0\n") || !strings.Contains(errOut, "\n  efficiency: must be > 0 and <= 1, got 2\n") {
		t.Errorf("submit of a bad job file: exit %d, stdout %q, stderr:\n%s", code, out, errOut)
	}
	if l, err := c.Jobs(context.Background(), client.JobsQuery{}); err != nil || len(l.Jobs) != 13 {
		t.Errorf("after the bad job file: %d jobs, %v; want 13", len(l.Jobs), err)
	}

	// Ctrl-C: the daemon stops and exits 0.
	if err := srv.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		stopped = true
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30 s after SIGINT\nstderr:\n%s", srvErr)
	}
	if code := srv.ProcessState.ExitCode(); code != 0 {
		t.Errorf("serve after SIGINT: exit %d, want 0\nstderr:\n%s", code, srvErr)
	}
}

// serve refuses bad usage and a bad configuration before it starts.
func TestServeUsage(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	grid := filepath.Join(dir, "grid.yaml")
	if err := os.WriteFile(grid, []byte(readFile(t, example+"grid-paper.yaml")), 0o644); err != nil {
		t.Fatal(err)
	}
	good := "grid: grid.yaml\ninsecure_http: true\njob_types:\n  - {name: render, vm: {vcpus: 2, memory_mib: 2048}}\n"
	config := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	goodCfg := config("good.yaml", good)
	for _, tc := range []struct {
		name   string
		args   []string
		stderr []string
	}{
		{"demo-jobs 0", []string{"--demo-jobs", "0"}, []string{"--demo-jobs: must be >= 1, not 0"}},
		{"negative gap", []string{"--demo-gap", "-1s"}, []string{"--demo-gap: must be >= 0"}},
		{"exit-after-demo with a config", []string{"--config", goodCfg, "--exit-after-demo"}, []string{"--exit-after-demo: applies to the demo only"}},
		{"exit-after-demo without the demo", []string{"--demo=false", "--exit-after-demo"}, []string{"--exit-after-demo: applies to the demo only"}},
		{"unknown config field", []string{"--config", config("unknown.yaml", good+"colour: red\n")}, []string{"unknown.yaml: colour: unknown field"}},
		{"bad config value", []string{"--config", config("value.yaml", strings.Replace(good, "vcpus: 2", "vcpus: 0", 1)+"policy: {name: fastest}\n")},
			[]string{"value.yaml: job_types[0].vm.vcpus: must be >= 1, not 0", "value.yaml: policy.name: must be one of heuristic, optimal, static, best-static, none"}},
		{"missing config", []string{"--config", filepath.Join(dir, "missing.yaml")}, []string{"--config: open ", "missing.yaml: no such file or directory"}},
		{"missing grid", []string{"--config", config("nogrid.yaml", strings.Replace(good, "grid.yaml", "nogrid-grid.yaml", 1))}, []string{"nogrid-grid.yaml"}},
		{"demo with a config lacking its types", []string{"--config", goodCfg, "--demo"}, []string{`--demo: the demo's jobs need the job type "sim"`}},
		{"argument", []string{"extra"}, []string{`metasched serve: unexpected argument "extra"`}},
		{"plain off loopback", []string{"--config", goodCfg, "--listen", "0.0.0.0:0"},
			[]string{"listen 0.0.0.0:0: plain HTTP is served on a loopback address only (127.0.0.1, ::1, localhost): give the configuration's tls"}},
		{"demo off loopback", []string{"--listen", "0.0.0.0:0"}, []string{"listen 0.0.0.0:0: plain HTTP is served on a loopback address only"}},
		{"no tls", []string{"--config", config("notls.yaml", strings.Replace(good, "insecure_http: true\n", "", 1))}, []string{"notls.yaml: tls: is required"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			args := append([]string{"serve", "--listen", serveAddr(t), "--data-dir", data}, tc.args...)
			code, out, errOut := runBin(t, bin, serveEnv(), 30*time.Second, args...)
			if code != 2 || out != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 2 and nothing on stdout", code, out, errOut)
			}
			for _, want := range tc.stderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr %q lacks %q", errOut, want)
				}
			}
			if entries, err := os.ReadDir(data); err != nil || len(entries) != 0 {
				t.Errorf("data directory after bad usage: %d entries, %v; want it untouched", len(entries), err)
			}
		})
	}
}

// TestSetProcs: serve runs with extraProcs Ps beyond Go's default, and
// with GOMAXPROCS when the environment sets it.
func TestSetProcs(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(base)
	t.Setenv("GOMAXPROCS", "")
	if got := setProcs(); got != base+extraProcs || runtime.GOMAXPROCS(0) != got {
		t.Errorf("setProcs() = %d with GOMAXPROCS %d, want %d", got, runtime.GOMAXPROCS(0), base+extraProcs)
	}
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3) // as the runtime does with the variable at start
	if got := setProcs(); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("setProcs() = %d with GOMAXPROCS=3 set, GOMAXPROCS %d: want 3", got, runtime.GOMAXPROCS(0))
	}
}
