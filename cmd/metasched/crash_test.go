package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/demo"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/wire"
)

// crashConfig is the daemon's configuration for TestCrashSafety: the
// paper's grid, the demo's three job types, in-process agents on the
// libvirt test driver, jobs of a few seconds and a reconfiguration of 2 s,
// so that a kill can land in the middle of a switch.
const crashConfig = `listen: 127.0.0.1:%d
insecure_http: true
data_dir: data
grid: grid.yaml
` + demoJobTypes + `policy: {name: heuristic, K: 2}
executor: {name: emulated, time_scale: 0.005}
switch_delay: 2s
`

// demoJobTypes are the demo's three job types in a serve configuration.
const demoJobTypes = `job_types:
  - {name: render, vm: {vcpus: 2, memory_mib: 2048}, holding_cost: 2}
  - {name: sim, vm: {vcpus: 1, memory_mib: 1024}, holding_cost: 1}
  - {name: etl, vm: {vcpus: 1, memory_mib: 1024}, holding_cost: 1}
`

// writePaperGrid writes the paper's grid (examples/grid-paper.yaml) to
// dir/grid.yaml and returns it.
func writePaperGrid(t testing.TB, dir string) *graph.Grid {
	t.Helper()
	data, err := os.ReadFile(example + "grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	grid, err := graph.ParseGrid("grid-paper.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "grid.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return grid
}

// TestCrashSafety kills the real daemon with SIGKILL three times while a
// stream of jobs with a demand shift goes through it: (a) with submissions
// in flight, (b) while jobs run, (c) while a switch reconfigures its host.
// After each kill the daemon restarts on the same data directory and the
// stream goes on. In the end every acknowledged job ran to done exactly
// once along the lifecycle, no job appears that no submission made, every
// host is in one pool (or stranded) and no switch is left open, no VM is
// left, the switch killed mid-way ended in a final phase, and SIGINT stops
// the daemon with exit code 0.
func TestCrashSafety(t *testing.T) {
	// Parallel: the package's longest tests run two at a time once its
	// other tests are done (the QEMU one beside one that boots no guest),
	// each with processes, directories and ports of its own.
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	grid := writePaperGrid(t, dir)
	cfg := filepath.Join(dir, "metasched.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(crashConfig, freePort(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	types := []string{"render", "sim", "etl"}
	h := &crashHarness{t: t, bin: bin, cfg: cfg, dataDir: filepath.Join(dir, "data"), logDir: dir,
		acked: map[string]string{}, lost: map[string]bool{}}
	t.Cleanup(h.dumpLogsOnFailure)

	const n, gap = 40, 150 * time.Millisecond
	stream := demo.Stream(n, gap, 7) // 40% mostly render, then mostly sim
	start := time.Now()
	next := 0

	// Run 1, kill (a): after eight acknowledged submissions, five more at
	// once; SIGKILL as soon as the first of them is answered, so that the
	// others are in flight.
	d := h.start()
	for ; next < 8; next++ {
		h.submit(d, stream[next])
		time.Sleep(gap)
	}
	h.killWithSubmissionsInFlight(d, stream[next:next+5])
	next += 5

	// Run 2, kill (b): while jobs run.
	d = h.start()
	for ; next < 20; next++ {
		h.submit(d, stream[next])
		time.Sleep(gap)
	}
	running := h.waitFor(30*time.Second, "a running job", func(ctx context.Context) (string, bool, error) {
		l, err := d.c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Running}})
		if err != nil || len(l.Jobs) == 0 {
			return "", false, err
		}
		ids := make([]string, len(l.Jobs))
		for i, j := range l.Jobs {
			ids[i] = j.ID
		}
		return strings.Join(ids, " "), true, nil
	})
	h.kill(d, "(b) jobs running: "+running)

	// Run 3, kill (c): the stream goes on; as soon as a switch this run
	// started is seen reconfiguring its host, SIGKILL. (Should none come,
	// 15 s after the stream any switch before its end does, a resumed one
	// too.)
	d = h.start()
	resumed := map[string]bool{}
	for _, sw := range h.switchList(d.c, true) {
		resumed[sw.ID] = true
	}
	var killed api.SwitchView
	var lastSubmit time.Time
	deadline := time.Now().Add(60 * time.Second)
	for killed.ID == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no switch seen in flight in 60 s (%d of %d jobs submitted)", next, n)
		}
		if next < n && time.Since(lastSubmit) >= gap {
			h.submit(d, stream[next])
			next++
			lastSubmit = time.Now()
		}
		late := next == n && time.Since(lastSubmit) > 15*time.Second
		for _, sw := range h.switchList(d.c, true) {
			if !sw.Final && (sw.Phase == "reconfiguring" && !resumed[sw.ID] || late) {
				killed = sw
				break
			}
		}
		if killed.ID == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	h.kill(d, fmt.Sprintf("(c) switch %s of %s from %s to %s in phase %s", killed.ID, killed.Host, killed.From, killed.To, killed.Phase))

	// Run 4: the rest of the stream, then everything settles.
	d = h.start()
	for ; next < n; next++ {
		h.submit(d, stream[next])
		time.Sleep(gap)
	}
	h.waitFor(90*time.Second, "every job finished", func(ctx context.Context) (string, bool, error) {
		l, err := d.c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Queued, api.Planned, api.Provisioning, api.Running}})
		return "", err == nil && len(l.Jobs) == 0, err
	})
	h.waitQuiet(d.c, 60*time.Second)

	jobs := h.allJobs(d.c)
	h.checkJobs(jobs, stream)
	h.checkHosts(d.c, grid, types)
	final := h.checkSwitches(d.c, killed)
	h.waitFor(10*time.Second, "no VM left", func(ctx context.Context) (string, bool, error) {
		vms, err := d.c.VMs(ctx)
		return "", err == nil && len(vms) == 0, err
	})

	attempts, runMin, runMax := 0, 0.0, 0.0
	for i, j := range jobs {
		attempts += j.Attempts
		if i == 0 || j.MeasuredS < runMin {
			runMin = j.MeasuredS
		}
		runMax = max(runMax, j.MeasuredS)
	}
	t.Logf("%d jobs submitted, %d acknowledged, %d answers lost in a kill (%d of those jobs exist), %d runs in all; "+
		"jobs ran %.1f to %.1f s; %d kills: %s; switch %s (%s→%s) killed in %s ended %s; %d switches in all; %.1f s",
		n, len(h.acked), len(h.lost), len(jobs)-len(h.acked), attempts, runMin, runMax, len(h.kills), strings.Join(h.kills, "; "),
		killed.ID, killed.From, killed.To, killed.Phase, final.Phase, h.switches, time.Since(start).Seconds())
	h.interrupt(d)
}

// crashHarness runs the daemon's binary again and again on one data
// directory and keeps what the test learned across runs.
type crashHarness struct {
	t                 testing.TB
	bin, cfg, dataDir string
	logDir            string
	runs              int
	logs              []string
	acked             map[string]string // job ID → name of the submission
	lost              map[string]bool   // names of the submissions whose answer a kill lost
	kills             []string
	switches          int
}

// crashDaemon is one run of the daemon.
type crashDaemon struct {
	*servedDaemon
	c *client.Client
}

// start runs the daemon and waits for its address on stdout; the token is
// in DATA_DIR/token by then.
func (h *crashHarness) start() *crashDaemon {
	t := h.t
	t.Helper()
	h.runs++
	logPath := filepath.Join(h.logDir, fmt.Sprintf("daemon-%d.log", h.runs))
	h.logs = append(h.logs, logPath)
	d := &crashDaemon{servedDaemon: startServe(t, h.bin, filepath.Dir(h.cfg), logPath, "--config", h.cfg, "--log-format", "json")}
	tok, err := os.ReadFile(filepath.Join(h.dataDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	// No keep-alive: a connection to a killed daemon is never reused.
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	d.c = client.New(d.base, strings.TrimSpace(string(tok))).WithHTTPClient(hc)
	return d
}

// submit submits one job of the stream, which must be acknowledged.
func (h *crashHarness) submit(d *crashDaemon, j demo.Job) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := d.c.Submit(ctx, j.Body)
	if err != nil {
		h.t.Fatalf("submit %s: %v", jobName(j), err)
	}
	h.acked[got.ID] = jobName(j)
}

// killWithSubmissionsInFlight submits the jobs at once, a millisecond
// apart, and kills the daemon as soon as one is acknowledged. The answers
// that do not come are lost: their jobs may or may not exist after the
// restart.
func (h *crashHarness) killWithSubmissionsInFlight(d *crashDaemon, js []demo.Job) {
	type answer struct {
		name, id string
		err      error
	}
	answers := make(chan answer, len(js))
	for i, j := range js {
		go func() {
			time.Sleep(time.Duration(i) * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := d.c.Submit(ctx, j.Body)
			answers <- answer{jobName(j), got.ID, err}
		}()
	}
	got := []answer{<-answers}
	h.kill(d, fmt.Sprintf("(a) %d submissions at once", len(js)))
	for len(got) < len(js) {
		got = append(got, <-answers)
	}
	for _, a := range got {
		var re *client.RemoteError
		switch {
		case a.err == nil:
			h.acked[a.id] = a.name
		case errors.As(a.err, &re):
			h.t.Fatalf("submit %s: refused: %v", a.name, a.err)
		default:
			h.lost[a.name] = true
			h.t.Logf("submission of %s in flight at the kill: %v", a.name, a.err)
		}
	}
}

// kill sends SIGKILL and waits for the process to end.
func (h *crashHarness) kill(d *crashDaemon, what string) {
	h.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		h.t.Fatalf("kill %s: %v", what, err)
	}
	<-d.done
	h.kills = append(h.kills, what)
	h.t.Logf("SIGKILL %s", what)
}

// interrupt stops the daemon with SIGINT: it must exit 0.
func (h *crashHarness) interrupt(d *crashDaemon) {
	h.t.Helper()
	if code := d.interrupt(h.t, 20*time.Second); code != 0 {
		h.t.Errorf("exit code after SIGINT %d, want 0 (%v)", code, d.cmd.ProcessState)
	}
}

// waitFor polls cond until it holds, and returns its note. A request error
// is fatal: the daemon must be serving.
func (h *crashHarness) waitFor(limit time.Duration, what string, cond func(context.Context) (string, bool, error)) string {
	t := h.t
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		note, ok, err := cond(ctx)
		cancel()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return note
		}
		if time.Now().After(deadline) {
			if note != "" {
				t.Fatalf("no %s after %s; the last look: %s", what, limit, note)
			}
			t.Fatalf("no %s after %s", what, limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitQuiet waits, once every job has finished, for the grid to settle: no
// switch in flight and every host idle or stranded, in one look and in
// every look for three seconds after it. One look is not enough: with every
// queue empty the heuristic still weighs the pools' arrival rates, and is
// asked again when a switch completes, so it may move hosts one after the
// other (until a pool is down to min_pool_hosts), each switch starting a
// moment after the last one ended.
func (h *crashHarness) waitQuiet(c *client.Client, limit time.Duration) {
	h.t.Helper()
	var since time.Time
	h.waitFor(limit, "no switch in flight and every host idle or stranded for 3 s", func(ctx context.Context) (string, bool, error) {
		l, err := c.Switches(ctx, client.SwitchesQuery{Active: true})
		if err != nil {
			return "", false, err
		}
		hosts, err := c.Hosts(ctx)
		if err != nil {
			return "", false, err
		}
		// What is not quiet, for the failure's message.
		var busy []string
		for _, s := range l.Switches {
			if !s.Final {
				busy = append(busy, fmt.Sprintf("switch %s of %s %s → %s in phase %s", s.ID, s.Host, s.From, s.To, s.Phase))
			}
		}
		for _, hv := range hosts {
			if hv.State != api.HostIdle && hv.State != api.HostStranded {
				busy = append(busy, fmt.Sprintf("host %s %s in pool %s", hv.Name, hv.State, hv.Pool))
			}
		}
		quiet := len(busy) == 0
		switch {
		case !quiet:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		}
		return strings.Join(busy, "; "), quiet && time.Since(since) >= 3*time.Second, nil
	})
}

// switchList lists the switches (active: those in flight), page by page.
func (h *crashHarness) switchList(c *client.Client, active bool) []api.SwitchView {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []api.SwitchView
	q := client.SwitchesQuery{Active: active}
	for {
		l, err := c.Switches(ctx, q)
		if err != nil {
			h.t.Fatalf("switches: %v", err)
		}
		out = append(out, l.Switches...)
		if l.Next == "" {
			return out
		}
		q.Before = l.Next
	}
}

// allJobs lists every job, page by page.
func (h *crashHarness) allJobs(c *client.Client) []api.Job {
	h.t.Helper()
	var out []api.Job
	q := client.JobsQuery{Limit: 25}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := c.Jobs(ctx, q)
		cancel()
		if err != nil {
			h.t.Fatalf("jobs: %v", err)
		}
		out = append(out, l.Jobs...)
		if l.Next == "" {
			return out
		}
		q.After = l.Next
	}
}

// checkJobs: every acknowledged job exists and is done, every job went
// along the lifecycle and reached a terminal state once, and a job that
// no acknowledgement names comes from a submission whose answer was lost.
func (h *crashHarness) checkJobs(jobs []api.Job, stream []demo.Job) {
	t := h.t
	t.Helper()
	byID := map[string]api.Job{}
	names := map[string]string{} // name → ID
	for _, j := range jobs {
		if _, dup := byID[j.ID]; dup {
			t.Errorf("job %s listed twice", j.ID)
		}
		byID[j.ID] = j
		if other, dup := names[j.Name]; dup {
			t.Errorf("submission %s made two jobs: %s and %s", j.Name, other, j.ID)
		}
		names[j.Name] = j.ID
		if want, ok := h.acked[j.ID]; ok {
			if j.Name != want {
				t.Errorf("job %s is named %q, the submission acknowledged with its ID was %q", j.ID, j.Name, want)
			}
		} else if !h.lost[j.Name] {
			t.Errorf("job %s (%s) was never acknowledged and no submission of it was in flight at a kill", j.ID, j.Name)
		}
		if j.State != api.Done {
			t.Errorf("job %s (%s) is %s (%s), want done", j.ID, j.Name, j.State, j.Reason)
		}
		checkLifecycle(t, j)
	}
	for id, name := range h.acked {
		if _, ok := byID[id]; !ok {
			t.Errorf("acknowledged job %s (%s) is gone", id, name)
		}
	}
	if len(h.acked)+len(h.lost) != len(stream) {
		t.Errorf("%d submissions acknowledged and %d lost, want %d in all", len(h.acked), len(h.lost), len(stream))
	}
}

// checkLifecycle checks a job's transitions: from "" to queued first, each
// from the state the last one left, each allowed, and exactly one into a
// terminal state, the last.
func checkLifecycle(t testing.TB, j api.Job) {
	t.Helper()
	var trail []string
	for _, tr := range j.Transitions {
		trail = append(trail, fmt.Sprintf("%s→%s (%s)", tr.From, tr.To, tr.Reason))
	}
	fail := func(format string, args ...any) {
		t.Errorf("job %s (%s): %s; transitions:\n  %s", j.ID, j.Name, fmt.Sprintf(format, args...), strings.Join(trail, "\n  "))
	}
	if len(j.Transitions) == 0 || j.Transitions[0].From != "" || j.Transitions[0].To != api.Queued {
		fail("the first transition is not from nothing to queued")
		return
	}
	terminal := 0
	for i, tr := range j.Transitions {
		if tr.To.Terminal() {
			terminal++
		}
		if i == 0 {
			continue
		}
		if prev := j.Transitions[i-1].To; tr.From != prev {
			fail("transition %d leaves %s, the job was %s", i, tr.From, prev)
		}
		if !lifecycle.CanTransition(wire.DomainState(tr.From), wire.DomainState(tr.To)) {
			fail("transition %d, %s→%s, is not allowed by the lifecycle", i, tr.From, tr.To)
		}
	}
	if terminal != 1 {
		fail("%d transitions into a terminal state, want 1", terminal)
	}
	if last := j.Transitions[len(j.Transitions)-1]; last.To != j.State {
		fail("the last transition goes to %s, the job is %s", last.To, j.State)
	}
}

// checkHosts: every host of the grid is listed once, in a pool of the job
// types, not switching; the pools' host lists agree with the hosts' pools;
// a stranded host is in no pool's list.
func (h *crashHarness) checkHosts(c *client.Client, grid *graph.Grid, types []string) {
	t := h.t
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	hosts, err := c.Hosts(ctx)
	if err != nil {
		t.Fatalf("hosts: %v", err)
	}
	pools, err := c.Pools(ctx)
	if err != nil {
		t.Fatalf("pools: %v", err)
	}
	var want, got []string
	for _, c := range grid.Clusters {
		for i := range c.Machines {
			want = append(want, c.Name+"-"+strconv.Itoa(i))
		}
	}
	inPool := map[string][]string{} // host → pools that list it
	for _, p := range pools {
		for _, name := range p.Hosts {
			inPool[name] = append(inPool[name], p.Name)
		}
	}
	for _, hv := range hosts {
		got = append(got, hv.Name)
		if !slices.Contains(types, hv.Pool) {
			t.Errorf("host %s is in pool %q, not one of %v", hv.Name, hv.Pool, types)
		}
		switch hv.State {
		case api.HostIdle:
			if lists := inPool[hv.Name]; len(lists) != 1 || lists[0] != hv.Pool {
				t.Errorf("host %s of pool %s is in the host lists of the pools %v", hv.Name, hv.Pool, lists)
			}
		case api.HostStranded:
			if lists := inPool[hv.Name]; len(lists) != 0 {
				t.Errorf("stranded host %s is in the host lists of the pools %v", hv.Name, lists)
			}
			t.Logf("host %s stranded by %s: %s", hv.Name, hv.Switch, hv.Reason)
		default:
			t.Errorf("host %s is %s (%s) with every job finished and no switch in flight, want idle or stranded",
				hv.Name, hv.State, hv.Reason)
		}
	}
	for name := range inPool {
		if !slices.Contains(got, name) {
			t.Errorf("pools list host %s, which /v1/hosts does not", name)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(want, got) {
		t.Errorf("hosts %v, want each of the grid's once: %v", got, want)
	}
}

// checkSwitches: every switch is final, and the one killed mid-way ended.
func (h *crashHarness) checkSwitches(c *client.Client, killed api.SwitchView) api.SwitchView {
	t := h.t
	t.Helper()
	sws := h.switchList(c, false)
	h.switches = len(sws)
	var final api.SwitchView
	for _, sw := range sws {
		if !sw.Final {
			t.Errorf("switch %s (%s→%s, host %s) is %s, not final", sw.ID, sw.From, sw.To, sw.Host, sw.Phase)
		}
		if sw.ID == killed.ID {
			final = sw
		}
	}
	switch {
	case final.ID == "":
		t.Errorf("switch %s, killed in %s, is gone from the journal", killed.ID, killed.Phase)
	case !slices.Contains([]string{"done", "cancelled", "rolled_back", "stranded"}, final.Phase):
		t.Errorf("switch %s, killed in %s, is %s after the restart, want done, cancelled, rolled_back or stranded",
			killed.ID, killed.Phase, final.Phase)
	case final.Host != killed.Host && killed.Host != "":
		t.Errorf("switch %s switched host %s after the restart, %s before", killed.ID, final.Host, killed.Host)
	}
	return final
}

// dumpLogsOnFailure shows the end of each run's log when the test failed.
func (h *crashHarness) dumpLogsOnFailure() {
	if !h.t.Failed() {
		return
	}
	for _, p := range h.logs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		h.t.Logf("the end of %s:\n%s", filepath.Base(p), strings.Join(lines, "\n"))
	}
}

// jobName is the name in a job file of the demo's stream.
func jobName(j demo.Job) string {
	first, _, _ := strings.Cut(string(j.Body), "\n")
	return strings.TrimPrefix(first, "name: ")
}

// freePort returns a TCP port of 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
