package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metasched/metasched/gramvm/taskfarm"
)

// runCmd runs the command line in process, with the given environment
// variables only, and returns its exit code and output.
func runCmd(ctx context.Context, t *testing.T, dir string, vars map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(ctx, &env{args: args, getenv: func(k string) string { return vars[k] }, stdout: &out, stderr: &errOut, dir: dir})
	return code, out.String(), errOut.String()
}

// freePort is a TCP port of the system that was free when asked.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Bad flags and bad variables are refused, named, with exit code 2.
func TestBadUsage(t *testing.T) {
	hf := filepath.Join(t.TempDir(), "hostfile")
	if err := os.WriteFile(hf, []byte("10.0.0.1 slots=1\nj-1-w1 slots=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	master := map[string]string{"METASCHED_ROLE": "master", "METASCHED_TASKS": "10", "METASCHED_TASK_OPS": "1e6", "METASCHED_TASK_BYTES": "4096"}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for a, b := range master {
			m[a] = b
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		vars map[string]string
		args []string
		want string
	}{
		{nil, []string{"run"}, "--role or METASCHED_ROLE: required: master or worker"},
		{map[string]string{"METASCHED_ROLE": "boss"}, []string{"run"}, `METASCHED_ROLE: must be master or worker, not "boss"`},
		{master, []string{"run", "--role", "chief"}, `--role: must be master or worker, not "chief"`},
		{with("METASCHED_TASKS", ""), []string{"run"}, "--tasks or METASCHED_TASKS: required"},
		{with("METASCHED_TASKS", "0"), []string{"run"}, `METASCHED_TASKS: must be a whole number from 1 to 2147483647, not "0"`},
		{master, []string{"run", "--tasks", "1.5"}, `--tasks: must be a whole number from 1 to 2147483647, not "1.5"`},
		{with("METASCHED_TASK_OPS", "lots"), []string{"run"}, `METASCHED_TASK_OPS: must be a number from 1 to 1e+18, not "lots"`},
		{with("METASCHED_TASK_OPS", "NaN"), []string{"run"}, `METASCHED_TASK_OPS: must be a number`},
		{master, []string{"run", "--task-ops", "0.2"}, `--task-ops: must be a number from 1 to 1e+18, not "0.2"`},
		{with("METASCHED_TASK_BYTES", "-1"), []string{"run"}, `METASCHED_TASK_BYTES: must be a number from 0 to 2.68435456e+08, not "-1"`},
		{with("METASCHED_TASK_BYTES", "1e9"), []string{"run"}, `METASCHED_TASK_BYTES: must be a number from 0 to`},
		{with("METASCHED_TASK_BYTES", ""), []string{"run"}, "--task-bytes or METASCHED_TASK_BYTES: required"},
		{master, []string{"run", "--port", "0"}, "--port: must be from 1 to 65535, not 0"},
		{master, []string{"run", "--worker-timeout", "1ms"}, "--worker-timeout: must be from 10ms to 24h, not 1ms"},
		{master, []string{"run", "--worker-timeout", "soon"}, `invalid argument "soon" for "--worker-timeout" flag`},
		{with("METASCHED_HOSTFILE", "/no/such/hostfile"), []string{"run"}, "METASCHED_HOSTFILE: open /no/such/hostfile: no such file or directory"},
		{master, []string{"run", "--hostfile", hf}, `--hostfile: invalid hostfile: ` + hf + `:2: address: "j-1-w1" is not an IP address`},
		{map[string]string{"METASCHED_ROLE": "worker"}, []string{"run"}, "--master or METASCHED_MASTER_ADDRESS: required: the master's address"},
		{map[string]string{"METASCHED_ROLE": "worker", "METASCHED_MASTER_ADDRESS": "10.0.0.1:7420"}, []string{"run"},
			`METASCHED_MASTER_ADDRESS: "10.0.0.1:7420" has a port or is no address: give the address alone, the port with --port`},
		{map[string]string{"METASCHED_ROLE": "worker"}, []string{"run", "--master", "no_such host"}, `--master: "no_such host" is neither an IP address nor a host name`},
		{map[string]string{"METASCHED_ROLE": "worker"}, []string{"run", "--master", "m", "--procs", "0"}, "--procs: must be from 1 to 65535, not 0"},
		{map[string]string{"METASCHED_ROLE": "worker"}, []string{"run", "--master", "m", "--retry-for", "0s"}, "--retry-for: must be more than 0, not 0s"},
		{map[string]string{"METASCHED_ROLE": "worker"}, []string{"run", "--master", "m", "--prefetch", "0"}, "--prefetch: must be from 1 to 16, not 0"},
		{map[string]string{"METASCHED_ROLE": "worker"}, []string{"run", "--master", "m", "--prefetch", "17"}, "--prefetch: must be from 1 to 16, not 17"},
		{map[string]string{"METASCHED_ROLE": "worker"}, []string{"run", "--master", "m", "--prefetch", "two"}, `invalid argument "two" for "--prefetch" flag`},
		{nil, []string{"run", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{nil, []string{"run", "extra"}, `taskfarm run: unexpected argument "extra"`},
		{nil, []string{"bench", "--seconds", "0"}, "--seconds: must be more than 0 and at most 3600, not 0"},
		{nil, []string{"bench", "--seconds", "1", "--procs", "-2"}, "--procs: must be from 1 to 4096, not -2"},
		{nil, []string{"bench", "--seconds", "x"}, `invalid argument "x" for "--seconds" flag`},
		{nil, []string{"sink", "--port", "70000"}, "--port: must be from 1 to 65535, not 70000"},
		{nil, []string{"sink", "--count", "-1"}, "--count: must be 0 (no end) or more, not -1"},
		{nil, []string{"probe", "--bytes", "10"}, "--to: required: the sink's ADDR:PORT"},
		{nil, []string{"probe", "--to", "10.0.0.1", "--bytes", "10"}, `--to: "10.0.0.1": address 10.0.0.1: missing port in address`},
		{nil, []string{"probe", "--to", ":7421", "--bytes", "10"}, `--to: ":7421" has no address`},
		{nil, []string{"probe", "--to", "10.0.0.1:0", "--bytes", "10"}, `--to: "10.0.0.1:0": the port must be from 1 to 65535`},
		{nil, []string{"probe", "--to", "10.0.0.1:7421"}, "--bytes: must be from 1 to 1099511627776, not 0"},
		{nil, []string{"probe", "--to", "10.0.0.1:7421", "--bytes", "9", "--timeout", "0s"}, "--timeout: must be more than 0, not 0s"},
		{nil, []string{"nothing"}, `taskfarm: unexpected argument "nothing"`},
	} {
		code, out, stderr := runCmd(t.Context(), t, t.TempDir(), c.vars, c.args...)
		if code != exitUsage || out != "" || !strings.HasPrefix(stderr, "taskfarm: ") || !strings.Contains(stderr, c.want) {
			t.Errorf("%v with %v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, c.vars, code, out, stderr, c.want)
		}
	}
}

// Every subcommand has its help.
func TestHelp(t *testing.T) {
	for _, c := range [][]string{{"--help"}, {"run", "--help"}, {"bench", "--help"}, {"sink", "--help"}, {"probe", "--help"}} {
		code, out, stderr := runCmd(t.Context(), t, t.TempDir(), nil, c...)
		if code != 0 || !strings.Contains(out, "Usage:") || stderr != "" {
			t.Errorf("%v: exit %d, %q, %q", c, code, out, stderr)
		}
	}
}

// A master and two worker VMs' processes, in process, on loopback (one
// with the default prefetch, the other one task at a time): the master
// writes the summary file and prints its line, which agree and add up;
// non-integral task_ops and task_bytes are rounded.
func TestRunLoopback(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "hostfile")
	// A hostfile with an address twice is refused, naming the line.
	if err := os.WriteFile(hf, []byte("127.0.0.1 slots=1 # name=m site=a role=master\n127.0.0.1 slots=2 # name=w site=b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t.Context(), t, dir, map[string]string{"METASCHED_ROLE": "master", "METASCHED_TASKS": "1",
		"METASCHED_TASK_OPS": "1", "METASCHED_TASK_BYTES": "1", "METASCHED_HOSTFILE": hf}, "run")
	if code != exitUsage || !strings.Contains(stderr, "METASCHED_HOSTFILE: invalid hostfile: "+hf+":2: address: 127.0.0.1 is already on line 1") {
		t.Errorf("hostfile with an address twice: %d %q", code, stderr)
	}
	if err := os.WriteFile(hf, []byte("127.0.0.1 slots=1 # name=j-m site=a role=master\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(freePort(t))
	vars := map[string]string{"METASCHED_ROLE": "master", "METASCHED_TASKS": "40", "METASCHED_TASK_OPS": "20000.4",
		"METASCHED_TASK_BYTES": "1000.6", "METASCHED_HOSTFILE": hf, "METASCHED_JOB_ID": "j-1"}
	var mwg, wg sync.WaitGroup
	var mcode int
	var mout, merr string
	mdone := make(chan struct{})
	mwg.Go(func() {
		defer close(mdone)
		mcode, mout, merr = runCmd(t.Context(), t, dir, vars, "run", "--port", port)
	})
	// A connection that says nothing keeps the master up, lingering,
	// until both worker VMs are done: one that came after the last task
	// is told the run is over rather than finding no master.
	var hold net.Conn
	for {
		var err error
		if hold, err = net.Dial("tcp", "127.0.0.1:"+port); err == nil {
			break
		}
		select {
		case <-mdone:
			t.Fatalf("the master ended before it listened: exit %d:\n%s", mcode, merr)
		case <-time.After(10 * time.Millisecond):
		}
	}
	wvars := map[string]string{"METASCHED_ROLE": "worker", "METASCHED_MASTER_ADDRESS": "127.0.0.1"}
	codes := make([]int, 2)
	errs := make([]string, 2)
	for i, prefetch := range []string{"2", "1"} {
		wg.Go(func() {
			codes[i], _, errs[i] = runCmd(t.Context(), t, t.TempDir(), wvars, "run", "--port", port, "--procs", "2", "--prefetch", prefetch)
		})
	}
	wg.Wait()
	hold.Close()
	mwg.Wait()
	if mcode != 0 || codes[0] != 0 || codes[1] != 0 {
		t.Fatalf("exit codes: master %d (%s), workers %v %v", mcode, merr, codes, errs)
	}
	line, ok := strings.CutPrefix(strings.TrimSpace(mout), taskfarm.SummaryLinePrefix)
	if !ok || strings.Count(mout, "\n") != 1 {
		t.Fatalf("master's stdout %q: want one line %q...", mout, taskfarm.SummaryLinePrefix)
	}
	file, err := os.ReadFile(filepath.Join(dir, taskfarm.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(file)) != line {
		t.Errorf("summary file %s differs from the line %s", file, line)
	}
	s, err := taskfarm.ParseSummary(file)
	if err != nil {
		t.Fatal(err)
	}
	if s.Tasks != 40 || s.Done != 40 || s.TaskOps != 20000 || s.TaskBytes != 1001 || s.InputBytes != 969 || s.ResultBytes != 32 {
		t.Errorf("summary %+v", s)
	}
	// Both worker groups come from 127.0.0.1, the master's address: one
	// VM to the master, named by the hostfile.
	if len(s.Workers) != 1 || s.Workers[0].Name != "j-m" || s.Workers[0].Procs != 2 || s.Workers[0].Tasks != 40 {
		t.Errorf("workers %+v", s.Workers)
	}
	if !strings.Contains(merr, "job=j-1") {
		t.Errorf("the master's log does not name the job:\n%s", merr)
	}
}

// buildStatic builds the program as the Makefile does, without cgo.
func buildStatic(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "taskfarm")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// The program builds as one static binary (no interpreter, no shared
// library), and as such runs its bench and a probe through a sink,
// printing their JSON lines; a worker whose master never answers exits
// non-zero saying so.
func TestStaticBinary(t *testing.T) {
	bin := buildStatic(t)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %v segment: it is not static", p.Type)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) != 0 {
		t.Errorf("the binary needs %v", libs)
	}

	out, err := exec.Command(bin, "bench", "--seconds", "0.2", "--procs", "2").Output()
	if err != nil {
		t.Fatalf("bench: %v", err)
	}
	var b taskfarm.BenchResult
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("bench printed %q: %v", out, err)
	}
	if b.Procs != 2 || b.Seconds < 0.2 || b.Ops == 0 || b.OpsPerSecondPerProc*2 > b.OpsPerSecond*1.000001 {
		t.Errorf("bench %+v", b)
	}
	t.Logf("bench: %s", strings.TrimSpace(string(out)))

	port := strconv.Itoa(freePort(t))
	sink := exec.Command(bin, "sink", "--port", port, "--count", "1")
	if err := sink.Start(); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "probe", "--to", "127.0.0.1:"+port, "--bytes", strconv.Itoa(4<<20)).Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	var p taskfarm.ProbeResult
	if err := json.Unmarshal(out, &p); err != nil || p.Bytes != 4<<20 || p.Seconds <= 0 || p.Mbps <= 0 {
		t.Errorf("probe printed %q: %v", out, err)
	}
	if err := sink.Wait(); err != nil {
		t.Errorf("the sink after its one probe: %v", err)
	}

	w := exec.Command(bin, "run", "--port", strconv.Itoa(freePort(t)), "--retry-for", "300ms", "--procs", "1")
	w.Env = append(os.Environ(), "METASCHED_ROLE=worker", "METASCHED_MASTER_ADDRESS=127.0.0.1")
	var stderr bytes.Buffer
	w.Stderr = &stderr
	err = w.Run()
	if code := w.ProcessState.ExitCode(); code != exitFailure || !strings.Contains(stderr.String(), "the task-farm master cannot be reached: no answer from 127.0.0.1:") {
		t.Errorf("a worker without a master: %v, exit %d:\n%s", err, code, stderr.String())
	}
	// Its log says once that it waits for the master, without the debug
	// lines of each try.
	if log := stderr.String(); strings.Count(log, "no answer from the master (yet): trying again") != 1 || strings.Contains(log, " DBG ") {
		t.Errorf("the worker's log:\n%s", log)
	}
}
