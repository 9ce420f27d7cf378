package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/demo"
)

var failoverKills = flag.Int("failover-kills", 3, "leader kills of TestFailover (make soak: 20)")

// failoverAgent is the configuration of a site's agent in TestFailover: a
// process of its own on libvirt's test driver, one host per machine of its
// cluster in the paper's grid, and a reconfiguration of 2 s, so that a
// kill can land in the middle of a switch.
const failoverAgent = `site: %s
listen: 127.0.0.1:%d
insecure_http: true
token_file: agent.token
grid: grid.yaml
switch_delay: 2s
`

// failoverServe is the configuration of each of TestFailover's daemons:
// the three agents, the demo's job types, and the store in etcd.
const failoverServe = `listen: 127.0.0.1:%d
insecure_http: true
data_dir: %s
grid: grid.yaml
` + demoJobTypes + `policy: {name: heuristic, K: 2}
executor: {name: emulated, time_scale: 0.005}
agents:
%sstore: {etcd: {endpoints: [%s], prefix: /failover/}}
`

// TestFailover runs a grid's control plane on three machines' worth of
// processes: a three-member etcd cluster, three agents (one per cluster
// of the paper's grid) and three daemons on one store in etcd. Jobs go to
// any daemon (a standby forwards them to the leader). The leader is
// killed with SIGKILL -failover-kills times, in turn (a) with
// submissions in flight and (b) while a switch reconfigures its host, and
// restarted as a standby. A submission whose answer a kill lost is sent
// again, with the same idempotency key, to another daemon. In the end
// every submission made exactly one job, done once along the lifecycle;
// every host is in one pool or stranded, no switch is open, the switches
// killed mid-way ended, and no VM is left. Then an etcd member is lost
// (the quorum kept; etcd's own leader): jobs go on under the same leader. It reports the
// failover time: from the kill to the first job the new leader planned.
func TestFailover(t *testing.T) {
	// Parallel: the package's longest tests run two at a time once its
	// other tests are done (the QEMU one beside one that boots no guest),
	// each with processes, directories and ports of its own.
	t.Parallel()
	f := startFailover(t)
	const perCycle, gap = 12, 150 * time.Millisecond
	var stream []demo.Job
	var killedSwitches []api.SwitchView
	for cycle := range *failoverKills {
		jobs := demo.Stream(perCycle, gap, uint64(cycle+1))
		for i := range jobs {
			jobs[i].Body = []byte(strings.Replace(string(jobs[i].Body), "name: ", fmt.Sprintf("name: c%02d-", cycle), 1))
		}
		stream = append(stream, jobs...)
		leader := f.leader(time.Minute)
		next := 0
		if cycle%2 == 0 {
			// (a) Half the cycle's jobs one by one, then the rest at once:
			// the leader dies as soon as the first of those is answered.
			for ; next < perCycle/2; next++ {
				f.submit(jobs[next])
				time.Sleep(gap)
			}
			f.killWithSubmissionsInFlight(leader, jobs[next:])
			next = perCycle
		} else {
			sw := f.untilSwitch(leader, jobs, &next, gap)
			f.killLeader(leader, fmt.Sprintf("(b) switch %s of %s from %s to %s in phase %s", sw.ID, sw.Host, sw.From, sw.To, sw.Phase))
			killedSwitches = append(killedSwitches, sw)
		}
		for ; next < perCycle; next++ {
			f.submit(jobs[next])
		}
	}

	// An etcd member lost, the quorum kept: the grid goes on, under the
	// same leader. The member is etcd's own leader: etcd elects another,
	// which takes seconds on a loaded machine, and the daemon's leader
	// rides that out.
	leader := f.leader(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	lost, err := f.etcd.Leader(ctx)
	cancel()
	if err != nil {
		t.Fatalf("etcd's leader: %v", err)
	}
	f.etcd.Members[lost].Kill()
	more := demo.Stream(6, gap, 99)
	for i := range more {
		more[i].Body = []byte(strings.Replace(string(more[i].Body), "name: ", "name: member-lost-", 1))
		f.submit(more[i])
		time.Sleep(gap)
	}
	stream = append(stream, more...)
	if now := f.leader(time.Minute); now != leader {
		t.Errorf("the leadership moved from %s to %s when an etcd member was lost", leader.name, now.name)
	}
	if err := f.etcd.Members[lost].Start(); err != nil {
		t.Fatal(err)
	}

	c := f.current(f.leader(time.Minute)).c
	f.waitFor(3*time.Minute, "every job finished", func(ctx context.Context) (string, bool, error) {
		l, err := c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Queued, api.Planned, api.Provisioning, api.Running}})
		if err != nil {
			return "", false, err
		}
		return unfinished(l.Jobs), len(l.Jobs) == 0, nil
	})
	f.waitQuiet(c, time.Minute)
	jobs := f.allJobs(c)
	f.checkJobs(jobs, stream)
	requeues := checkRunsKept(t, jobs)
	f.checkHosts(c, f.grid, []string{"render", "sim", "etl"})
	var ends []string
	for _, sw := range killedSwitches {
		ends = append(ends, sw.ID+" "+f.checkSwitches(c, sw).Phase)
	}
	f.waitFor(30*time.Second, "no VM left", func(ctx context.Context) (string, bool, error) {
		vms, err := c.VMs(ctx)
		return "", err == nil && len(vms) == 0, err
	})
	// The CLI, given every daemon's address, the first of them gone.
	servers := []string{fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	for _, h := range f.daemons {
		servers = append(servers, h.base)
	}
	env := serveEnv(envServer+"="+strings.Join(servers, ","), envToken+"="+f.token)
	listed, after := 0, ""
	for {
		args := []string{"jobs", "--output", "json"}
		if after != "" {
			args = append(args, "--after", after)
		}
		code, out, errOut := runBin(t, f.bin, env, time.Minute, args...)
		var list api.JobList
		if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
			t.Fatalf("metasched jobs with the daemons %s: exit %d (%v): %s", strings.Join(servers, ","), code, err, errOut)
		}
		listed += len(list.Jobs)
		if after = list.Next; after == "" {
			break
		}
	}
	if listed != len(jobs) {
		t.Errorf("metasched jobs with the daemons %s: %d jobs, want %d", strings.Join(servers, ","), listed, len(jobs))
	}

	times := f.failoverTimes(jobs)
	t.Logf("%d jobs submitted, %d attempts in all (requeues: %s); %d kills: %s; switches killed mid-way ended: %s; %d switches in all",
		len(stream), runsOf(jobs), strings.Join(requeues, "; "), len(f.kills), strings.Join(f.kills, "; "), strings.Join(ends, ", "), f.switches)
	if len(times) > 0 {
		t.Logf("failover (the leader killed to the first job the new leader planned) over %d kills: median %.1f s, max %.1f s; each: %s",
			len(times), median(times), slices.Max(times), strings.Join(secondsList(times), " "))
	}
}

// failover is TestFailover's grid of processes.
type failover struct {
	*crashHarness
	dir     string
	grid    *graph.Grid
	etcd    *etcdtest.Cluster
	daemons []*haDaemon
	token   string

	mu       sync.Mutex // acked, rr, the daemons' runs (concurrent submissions)
	rr       int        // the daemon the next submission goes to first
	killedAt []time.Time
}

// haDaemon is one of the daemons: its configuration and its current run
// (under failover.mu).
type haDaemon struct {
	name, cfg, data, base string
	run                   *crashDaemon
	runs                  int
}

// current is the daemon's current run.
func (f *failover) current(h *haDaemon) *crashDaemon {
	f.mu.Lock()
	defer f.mu.Unlock()
	return h.run
}

// startFailover starts etcd, the agents and the daemons, and waits for a
// leader.
func startFailover(t *testing.T) *failover {
	bin := buildBinary(t)
	dir := t.TempDir()
	grid := writePaperGrid(t, dir)
	write := func(name, text string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("agent.token", "failover-agent-token\n", 0o600)
	f := &failover{dir: dir, grid: grid, etcd: etcdtest.Start(t, 3),
		crashHarness: &crashHarness{t: t, bin: bin, logDir: dir, acked: map[string]string{}, lost: map[string]bool{}}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("etcd:\n%s", f.etcd.Logs())
		}
	})
	t.Cleanup(f.dumpLogsOnFailure)

	var agents strings.Builder
	for _, cl := range grid.Clusters {
		port := freePort(t)
		cfg := write("agent-"+cl.Name+".yaml", fmt.Sprintf(failoverAgent, cl.Name, port), 0o644)
		a, _, _ := startProcess(t, bin, dir, filepath.Join(dir, "agent-"+cl.Name+".log"), "agent", "--config", cfg, "--log-format", "json")
		base := fmt.Sprintf("http://127.0.0.1:%d", port)
		f.untilAnswers(a, base, "agent "+cl.Name)
		fmt.Fprintf(&agents, "  - {site: %s, address: %s, token_file: agent.token}\n", cl.Name, base)
	}
	for i := range 3 {
		port := freePort(t)
		name := fmt.Sprintf("d%d", i)
		h := &haDaemon{name: name, data: filepath.Join(dir, name), base: fmt.Sprintf("http://127.0.0.1:%d", port)}
		h.cfg = write(name+".yaml", fmt.Sprintf(failoverServe, port, h.data, agents.String(), strings.Join(f.etcd.Endpoints(), ", ")), 0o644)
		f.daemons = append(f.daemons, h)
		f.start(h)
	}
	leader := f.leader(time.Minute)
	tok, err := os.ReadFile(filepath.Join(leader.data, "token"))
	if err != nil {
		t.Fatal(err)
	}
	f.token = strings.TrimSpace(string(tok))
	for _, h := range f.daemons {
		f.current(h).c = f.client(h)
	}
	return f
}

// client is a client of one daemon, with the grid's token; no keep-alive,
// so that a connection to a killed daemon is never reused.
func (f *failover) client(h *haDaemon) *client.Client {
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return client.New(h.base, f.token).WithHTTPClient(hc)
}

// start runs the daemon (again) and waits until it answers, as the leader
// or as a standby.
func (f *failover) start(h *haDaemon) {
	f.t.Helper()
	h.runs++
	logPath := filepath.Join(f.dir, fmt.Sprintf("%s-run%d.log", h.name, h.runs))
	f.logs = append(f.logs, logPath)
	p, _, _ := startProcess(f.t, f.bin, f.dir, logPath, "serve", "--config", h.cfg, "--log-format", "json")
	p.base = h.base
	run := &crashDaemon{servedDaemon: p}
	if f.token != "" {
		run.c = f.client(h)
	}
	f.untilAnswers(p, h.base, "daemon "+h.name)
	f.mu.Lock()
	h.run = run
	f.mu.Unlock()
}

// untilAnswers waits until the process answers GET /healthz.
func (f *failover) untilAnswers(p *servedDaemon, base, what string) {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := health(base); err == nil {
			return
		}
		select {
		case <-p.done:
			f.t.Fatalf("%s exited before it answered (%v)", what, p.cmd.ProcessState)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s does not answer after a minute", what)
		}
	}
}

// health is a daemon's (or an agent's) /healthz status.
func health(base string) (string, error) {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Get(base + "/healthz")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s/healthz: %s", base, resp.Status)
	}
	var h struct {
		Status string `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return "", err
	}
	return h.Status, nil
}

// alive says whether a run of a daemon has not exited.
func alive(d *crashDaemon) bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// leader waits for the daemon that leads (its /healthz says "ok").
func (f *failover) leader(limit time.Duration) *haDaemon {
	f.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		for _, h := range f.daemons {
			if d := f.current(h); !alive(d) {
				f.t.Fatalf("daemon %s exited (%v)", h.name, d.cmd.ProcessState)
			}
			if s, err := health(h.base); err == nil && s == "ok" {
				return h
			}
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("no daemon leads after %s", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submit sends a job of the stream to a daemon, in turn, with its name as
// the idempotency key; an answer lost (the daemon was killed, or no
// daemon led for a while: 502, 503, 504) sends it again to the next one.
// It must be acknowledged within two minutes.
func (f *failover) submit(j demo.Job) {
	name := jobName(j)
	deadline := time.Now().Add(2 * time.Minute)
	for try := 0; ; try++ {
		f.mu.Lock()
		h := f.daemons[f.rr%len(f.daemons)]
		f.rr++
		d := h.run
		f.mu.Unlock()
		if !alive(d) || d.c == nil {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		s, err := d.c.SubmitWith(ctx, j.Body, client.SubmitOptions{IdempotencyKey: name, Attempts: 1})
		cancel()
		var re *client.RemoteError
		switch {
		case err == nil:
			f.mu.Lock()
			if other, ok := f.acked[s.Job.ID]; ok && other != name {
				f.t.Errorf("job %s acknowledged for %s and for %s", s.Job.ID, other, name)
			}
			f.acked[s.Job.ID] = name
			f.mu.Unlock()
			return
		case errors.As(err, &re) && !slices.Contains([]int{http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}, re.Status):
			f.t.Errorf("submit %s to %s: refused: %v", name, h.name, err)
			return
		case time.Now().After(deadline):
			f.t.Errorf("submit %s: not acknowledged in two minutes (%d tries; last, to %s: %v)", name, try+1, h.name, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// killWithSubmissionsInFlight submits the jobs at once, a millisecond
// apart, to the daemons in turn, and kills the leader as soon as one is
// acknowledged; the others find another daemon.
func (f *failover) killWithSubmissionsInFlight(leader *haDaemon, js []demo.Job) {
	var wg sync.WaitGroup
	first := make(chan struct{}, len(js))
	for i, j := range js {
		wg.Go(func() {
			time.Sleep(time.Duration(i) * time.Millisecond)
			f.submit(j)
			first <- struct{}{}
		})
	}
	<-first
	f.killLeader(leader, fmt.Sprintf("(a) %d submissions at once", len(js)))
	wg.Wait()
}

// untilSwitch submits the jobs at their gap until a switch this leader
// started is seen reconfiguring its host (should none come, 15 s after
// the jobs any switch in flight does, and the operator asks for one), and
// returns it.
func (f *failover) untilSwitch(leader *haDaemon, jobs []demo.Job, next *int, gap time.Duration) api.SwitchView {
	resumed := map[string]bool{}
	c := f.current(leader).c
	for _, sw := range f.switchList(c, true) {
		resumed[sw.ID] = true
	}
	var last time.Time
	asked := false
	deadline := time.Now().Add(90 * time.Second)
	for !time.Now().After(deadline) {
		if *next < len(jobs) && time.Since(last) >= gap {
			f.submit(jobs[*next])
			*next++
			last = time.Now()
		}
		late := *next == len(jobs) && time.Since(last) > 15*time.Second
		for _, sw := range f.switchList(c, true) {
			if !sw.Final && (sw.Phase == "reconfiguring" && !resumed[sw.ID] || late) {
				return sw
			}
		}
		if late && !asked {
			// The policy started none (the pools already suit the
			// stream): the operator asks for one.
			asked = true
			f.operatorSwitch(c)
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("no switch seen in flight in 90 s (%d of %d jobs of the cycle submitted)", *next, len(jobs))
	return api.SwitchView{}
}

// operatorSwitch asks the leader to switch a host from its largest pool
// to its smallest.
func (f *failover) operatorSwitch(c *client.Client) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pools, err := c.Pools(ctx)
	if err != nil || len(pools) < 2 {
		f.t.Fatalf("the pools, for an operator's switch: %v, %v", pools, err)
	}
	slices.SortStableFunc(pools, func(a, b api.Pool) int { return len(b.Hosts) - len(a.Hosts) })
	from, to := pools[0].Name, pools[len(pools)-1].Name
	sw, err := c.RequestSwitch(ctx, from, to)
	if err != nil {
		f.t.Fatalf("an operator's switch from %s to %s: %v", from, to, err)
	}
	f.t.Logf("no switch of the policy's in flight: the operator asked for %s from %s to %s", sw.ID, from, to)
}

// killLeader kills the leader with SIGKILL, notes when it was gone, and
// starts it again: it stands by.
func (f *failover) killLeader(h *haDaemon, what string) {
	f.t.Helper()
	d := f.current(h)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	l, err := d.c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Running}})
	cancel()
	if err != nil {
		f.t.Fatalf("the jobs running on %s: %v", h.name, err)
	}
	f.kill(d, fmt.Sprintf("%s %s, %d jobs running", h.name, what, len(l.Jobs)))
	f.mu.Lock()
	f.killedAt = append(f.killedAt, time.Now())
	f.mu.Unlock()
	f.start(h)
}

// failoverTimes are, for each kill, the time from the kill to the first
// job planned after it (by the next leader), in seconds.
func (f *failover) failoverTimes(jobs []api.Job) []float64 {
	var out []float64
	for i, at := range f.killedAt {
		var first time.Time
		for _, j := range jobs {
			for _, tr := range j.Transitions {
				if tr.To == api.Planned && tr.At.After(at) && (first.IsZero() || tr.At.Before(first)) {
					first = tr.At
				}
			}
		}
		if first.IsZero() || i+1 < len(f.killedAt) && first.After(f.killedAt[i+1]) {
			f.t.Logf("kill %d: no job planned before the next kill", i+1)
			continue
		}
		out = append(out, first.Sub(at).Seconds())
	}
	return out
}

var switchedHost = regexp.MustCompile(`host \S+ switched from pool \S+ by \S+:`)

// checkRunsKept: a run under way when the leader died went on under the
// next (it re-attached it): a job left running only by its end or by a
// switch that took a host of its (the policy's preemption, requeued). It
// returns the reasons of the requeues, counted.
func checkRunsKept(t testing.TB, jobs []api.Job) []string {
	t.Helper()
	reasons := map[string]int{}
	for _, j := range jobs {
		for _, tr := range j.Transitions {
			if tr.To == api.Queued && tr.From != "" {
				reasons[switchedHost.ReplaceAllString(tr.Reason, "a host switched by the policy:")]++
			}
			if tr.From == api.Running && tr.To != api.Running && !tr.To.Terminal() && !strings.Contains(tr.Reason, " switched from pool ") {
				t.Errorf("job %s (%s) left running for %s: %q", j.ID, j.Name, tr.To, tr.Reason)
			}
		}
	}
	var out []string
	for r, n := range reasons {
		out = append(out, fmt.Sprintf("%d× %s", n, r))
	}
	slices.Sort(out)
	return out
}

func runsOf(jobs []api.Job) int {
	n := 0
	for _, j := range jobs {
		n += j.Attempts
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func secondsList(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.1f", x)
	}
	return out
}

// unfinished says which jobs have not ended and why, for a failure's
// message.
func unfinished(jobs []api.Job) string {
	var out []string
	for _, j := range jobs {
		out = append(out, fmt.Sprintf("%s (%s) %s: %s", j.ID, j.Type, j.State, j.Reason))
	}
	return strings.Join(out, "; ")
}
