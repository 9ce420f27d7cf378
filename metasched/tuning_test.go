package metasched_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// TestBandwidthTuning: a communication-heavy job runs on a cluster behind a
// slow uplink and holds its hosts; a new job of the same type waits for
// hosts. The daemon evaluates consolidating the running job's VMs, shows
// every candidate with its numbers in the API, and carries out an accepted
// one through the agents (two of the running job's VMs then share a host).
func TestBandwidthTuning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{
			Clusters: []graph.Cluster{
				{Name: "home", Machines: 2, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
				{Name: "far", Machines: 6, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 10},
			},
			Links: []graph.Link{{Between: [2]string{"home", "far"}, Mbps: 1000}},
		}
		d, heavy, recs := tuningStart(t, grid, 4096,
			"name: heavy\ntype: render\ntasks: 1000\ntask_ops: 4.0e9\ntask_bytes: 8.0e5\nvm: {vcpus: 2, memory_mib: 4096}\n",
			"name: fresh\ntype: render\ntasks: 1200\ntask_ops: 1.0e9\ntask_bytes: 5.0e4\nvm: {vcpus: 2, memory_mib: 2048}\n")
		for _, r := range recs {
			t.Logf("%s %s on %s: gain %.1fs loss %.1fs migration %.1fs accepted %v: %s (%s)", r.Action, r.Target, r.Cluster,
				r.GainSeconds, r.LossSeconds, r.MigrationSeconds, r.Accepted, r.Outcome, r.Reason)
			if r.Target != heavy.ID || r.Reason == "" || r.NewJobSecondsBefore <= 0 {
				t.Errorf("record %+v: want the heavy job as target, a reason and the new job's times", r)
			}
			if r.Accepted != (r.GainSeconds > r.LossSeconds+r.MigrationSeconds) {
				t.Errorf("accepted %v with gain %g, loss %g, migration %g", r.Accepted, r.GainSeconds, r.LossSeconds, r.MigrationSeconds)
			}
		}
		if !recs[len(recs)-1].Accepted && !recs[0].Accepted {
			return // nothing worth doing: shown, not done
		}
		waitFor(t, "the chosen decision carried out", 20*time.Second, func() bool {
			for _, r := range d.Tuning() {
				if r.Outcome == "carried out" {
					return true
				}
			}
			return false
		})
		// Two of the heavy job's VMs now share a host.
		perHost := map[string]int{}
		for _, vm := range d.VMs() {
			if vm.Job == heavy.ID {
				perHost[vm.Host]++
			}
		}
		shared := false
		for _, n := range perHost {
			shared = shared || n >= 2
		}
		if !shared {
			t.Errorf("after consolidation the heavy job's VMs are %v: want two on one host", perHost)
		}
	})
}

// TestBandwidthTuningShrink: a communication-heavy job with VMs as large as
// their hosts runs on a cluster behind a slow uplink; a new job fits only
// a small side cluster. Halving the running job's vCPUs costs it almost
// nothing (its rate is bound by the uplink) and lets the new job's VMs onto
// its hosts: the daemon carries the shrink out through the agent (the test
// driver can unplug vCPUs), and the VMs are smaller afterwards.
func TestBandwidthTuningShrink(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{
			Clusters: []graph.Cluster{
				{Name: "home", Machines: 2, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
				{Name: "far", Machines: 6, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 10},
				{Name: "side", Machines: 2, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
			},
			Links: []graph.Link{{Between: [2]string{"home", "far"}, Mbps: 1000}, {Between: [2]string{"home", "side"}, Mbps: 1000}},
		}
		d, heavy, recs := tuningStart(t, grid, 2048,
			"name: heavy\ntype: render\ntasks: 1000\ntask_ops: 4.0e9\ntask_bytes: 8.0e5\nvm: {vcpus: 4, memory_mib: 4096}\n",
			"name: fresh\ntype: render\ntasks: 1200\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\nvm: {vcpus: 2, memory_mib: 2048}\n")
		var chosen api.TuningRecord
		for _, r := range recs {
			t.Logf("%s %s on %s: gain %.1fs loss %.1fs migration %.1fs accepted %v: %s (%s)", r.Action, r.Target, r.Cluster,
				r.GainSeconds, r.LossSeconds, r.MigrationSeconds, r.Accepted, r.Outcome, r.Reason)
			if r.Accepted != (r.GainSeconds > r.LossSeconds+r.MigrationSeconds) {
				t.Errorf("accepted %v with gain %g, loss %g, migration %g", r.Accepted, r.GainSeconds, r.LossSeconds, r.MigrationSeconds)
			}
			if r.Outcome == "carrying out" || r.Outcome == "carried out" {
				chosen = r
			}
		}
		if chosen.Action != "shrink" || len(chosen.Shrinks) == 0 {
			t.Fatalf("no shrink chosen: %+v", chosen)
		}
		waitFor(t, "the shrink carried out and seen by the inventory", 20*time.Second, func() bool {
			done := false
			for _, r := range d.Tuning() {
				done = done || (r.Seq == chosen.Seq && r.Outcome == "carried out")
			}
			if !done {
				return false
			}
			small := 0
			for _, vm := range d.VMs() {
				for _, sh := range chosen.Shrinks {
					if vm.Name == sh.VM && vm.VCPUs == sh.VCPUs {
						small++
					}
				}
			}
			return small == len(chosen.Shrinks)
		})
		// The new job now runs, with VMs on the hosts the shrink made room on.
		waitFor(t, "the new job running on a freed host", 20*time.Second, func() bool {
			for _, vm := range d.VMs() {
				for _, sh := range chosen.Shrinks {
					if vm.Job != heavy.ID && vm.Host == sh.Host {
						return true
					}
				}
			}
			return false
		})
	})
}

// tuningStart runs a daemon with one render pool (VMs of 2 vCPUs and
// memMiB) on grid, submits the heavy job and, once it runs, the fresh one
// its traffic holds back, and waits for the tuning evaluated for the fresh
// one.
func tuningStart(t *testing.T, grid *graph.Grid, memMiB int, heavyJob, freshJob string) (*metasched.Daemon, api.Job, []api.TuningRecord) {
	t.Helper()
	td := startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
		c.JobTypes = []api.JobType{{Name: "render", VCPUs: 2, MemoryMiB: memMiB, HoldingCost: 1}}
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 0.05
		c.MinPoolHosts = 0
	})
	d, ctx := td.d, context.Background()
	heavy, err := d.Submit(ctx, jobfile.Decode([]byte(heavyJob)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the heavy job running", 20*time.Second, func() bool {
		j, err := d.Job(ctx, heavy.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == api.Running
	})
	if _, err := d.Submit(ctx, jobfile.Decode([]byte(freshJob))); err != nil {
		t.Fatal(err)
	}
	var recs []api.TuningRecord
	waitFor(t, "a tuning decision", 20*time.Second, func() bool {
		recs = d.Tuning()
		return len(recs) > 0
	})
	return d, heavy, recs
}

// tuningRecorder notes, in order, what the agents are asked while a
// tuning is carried out: each migration's start and end and each VM
// created, and the migrations in flight per host and per site. Its
// migrations take pause (of the bubble's fake time) before they are
// carried out, like a live migration of a booted guest. Hosts in hidden
// are left out of the inventories (they join the grid when they are
// taken out of it), and the inventories say that no host can unplug
// vCPUs, as a QEMU site's do.
type tuningRecorder struct {
	mu       sync.Mutex
	pause    time.Duration
	hidden   []string
	events   []string
	inFlight map[string]int
	most     map[string]int
}

func newTuningRecorder(pause time.Duration, hidden ...string) *tuningRecorder {
	return &tuningRecorder{pause: pause, hidden: hidden, inFlight: map[string]int{}, most: map[string]int{}}
}

func (r *tuningRecorder) note(e string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *tuningRecorder) add(keys []string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		r.inFlight[k] += n
		r.most[k] = max(r.most[k], r.inFlight[k])
	}
}

func (r *tuningRecorder) show() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hidden = nil
}

func (r *tuningRecorder) snapshot() ([]string, map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events), maps.Clone(r.most)
}

// startRecorded runs a daemon on grid whose agents rec records, with one
// render pool (VMs of 2 vCPUs and memMiB), no switching policy and the
// emulated executor at time scale.
func startRecorded(t *testing.T, grid *graph.Grid, rec *tuningRecorder, memMiB int, scale float64) *testDaemon {
	t.Helper()
	return startDaemonGrid(t, grid, metasched.Options{WrapAgent: func(site string, a metasched.SiteAgent) metasched.SiteAgent {
		return recordingAgent{SiteAgent: a, site: site, r: rec}
	}}, func(c *metasched.Config) {
		c.JobTypes = []api.JobType{{Name: "render", VCPUs: 2, MemoryMiB: memMiB, HoldingCost: 1}}
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = scale
		c.MinPoolHosts = 0
	})
}

type recordingAgent struct {
	metasched.SiteAgent
	site string
	r    *tuningRecorder
}

func (a recordingAgent) Inventory(ctx context.Context) (hp.Inventory, error) {
	inv, err := a.SiteAgent.Inventory(ctx)
	a.r.mu.Lock()
	defer a.r.mu.Unlock()
	inv.Hosts = slices.DeleteFunc(inv.Hosts, func(h hp.Host) bool { return slices.Contains(a.r.hidden, h.Name) })
	for i := range inv.Hosts {
		inv.Hosts[i].VCPUUnplug = false
	}
	return inv, err
}

func (a recordingAgent) CreateVM(ctx context.Context, s hp.VMSpec) (hp.VM, error) {
	a.r.note("create " + s.Name + " on " + s.Host)
	return a.SiteAgent.CreateVM(ctx, s)
}

func (a recordingAgent) MigrateVM(ctx context.Context, name string, m hp.MigrateRequest) (hp.Migration, error) {
	from := ""
	if inv, err := a.SiteAgent.Inventory(ctx); err == nil {
		for _, h := range inv.Hosts {
			for _, v := range h.VMs {
				if v.Name == name {
					from = h.Name
				}
			}
		}
	}
	keys := []string{"host " + from, "host " + m.Host, "lan " + a.site}
	a.r.add(keys, 1)
	a.r.note("migrate start " + name + " " + from + " to " + m.Host)
	time.Sleep(a.r.pause)
	mig, err := a.SiteAgent.MigrateVM(ctx, name, m)
	a.r.note("migrate end " + name)
	a.r.add(keys, -1)
	return mig, err
}

// TestTuningThenPlan: a communication-heavy job runs with its master on
// home and six workers on far, behind far's slow uplink; a new job of its
// type then finds far's uplink loaded and no room for its larger VMs
// beside the running ones. Consolidating two of the running job's workers
// on one host pays (shrinking is not weighed: the site's agent says its
// hosts cannot unplug vCPUs). Its live migration takes eight seconds; the
// new job waits for it, with that reason, and is planned only once it has
// ended, on what it freed: the host it emptied. Before, the job waited one
// dispatch round and was planned on what was free at the next round that
// planned (at the latest the full round every 5 s), while the migration
// still ran, and gained nothing. The migrations never exceed the caps (one per
// host, two per LAN). The migration's measured time, and, once the jobs
// end, their measured run times against the predicted loss and gain, are
// in the tuning's record.
//
// With a shorter running job and a longer new one, two pairs pay better
// than one: both migrations run at once (two on far's LAN, its cap), each
// host in one only.
func TestTuningThenPlan(t *testing.T) {
	skipShortLong(t)
	for _, tc := range []struct {
		name              string
		heavyTasks, tasks int
		moves             int
	}{{"one migration", 1000, 1200, 1}, {"two migrations at once", 150, 2400, 2}} {
		t.Run(tc.name, func(t *testing.T) { tuningThenPlan(t, tc.heavyTasks, tc.tasks, tc.moves) })
	}
}

func tuningThenPlan(t *testing.T, heavyTasks, tasks, moves int) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{
			Clusters: []graph.Cluster{
				{Name: "home", Machines: 4, Cores: 4, MemoryMiB: 8192, Perf: 8e8, LANMbps: 1000, UplinkMbps: 1000},
				{Name: "far", Machines: 8, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 10},
			},
			Links: []graph.Link{{Between: [2]string{"home", "far"}, Mbps: 1000}},
		}
		// The running job is planned on home-0 and far-0..5; the other
		// hosts join afterwards.
		rec := newTuningRecorder(8*time.Second, "home-1", "home-2", "home-3", "far-6", "far-7")
		td := startRecorded(t, grid, rec, 4096, 0.5)
		d, ctx := td.d, context.Background()
		heavy, err := d.Submit(ctx, jobfile.Decode([]byte(fmt.Sprintf("name: heavy\ntype: render\ntasks: %d\ntask_ops: 4.0e9\ntask_bytes: 8.0e5\nvm: {vcpus: 2, memory_mib: 4096}\n", heavyTasks))))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the heavy job running", 20*time.Second, func() bool {
			j, err := d.Job(ctx, heavy.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == api.Running
		})
		rec.show()
		waitFor(t, "every host in the daemon's view", 20*time.Second, func() bool { return len(d.Hosts()) == 12 })
		fresh, err := d.Submit(ctx, jobfile.Decode([]byte(fmt.Sprintf("name: fresh\ntype: render\ntasks: %d\ntask_ops: 1.0e9\ntask_bytes: 5.0e4\nvm: {vcpus: 4, memory_mib: 4096}\n", tasks))))
		if err != nil {
			t.Fatal(err)
		}
		var chosen api.TuningRecord
		defer func() {
			if t.Failed() {
				for _, r := range d.Tuning() {
					t.Logf("#%d %s %s on %s for %s: accepted %v, %s: %s", r.Seq, r.Action, r.Target, r.Cluster, r.NewJobID, r.Accepted, r.Outcome, r.Reason)
				}
				j, err := d.Job(ctx, fresh.ID)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("fresh: %s: %s", j.State, j.Reason)
			}
		}()
		waitFor(t, "a tuning carried out for the fresh job", 20*time.Second, func() bool {
			for _, r := range d.Tuning() {
				if r.NewJobID == fresh.ID && r.Outcome == "carrying out" {
					chosen = r
					return true
				}
			}
			return false
		})
		if chosen.Action != "consolidate" || len(chosen.Moves) != moves || !strings.Contains(chosen.Reason, "no shrink weighed on far") {
			t.Fatalf("chosen %+v: want a consolidation of %d pair(s), saying that far cannot shrink", chosen, moves)
		}
		t.Logf("carrying out #%d: %s", chosen.Seq, chosen.Reason)
		// While it is carried out, the fresh job waits for it.
		j, err := d.Job(ctx, fresh.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.Queued || !strings.Contains(j.Reason, fmt.Sprintf("waiting for bandwidth tuning #%d", chosen.Seq)) {
			t.Errorf("during the migration the fresh job is %s: %q; want queued, waiting for tuning #%d", j.State, j.Reason, chosen.Seq)
		}
		waitFor(t, "the fresh job running", 60*time.Second, func() bool {
			j, err := d.Job(ctx, fresh.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == api.Running || j.State.Terminal()
		})
		events, most := rec.snapshot()
		t.Logf("agent calls: %s", strings.Join(events, "; "))
		lastEnd, firstCreate := -1, -1
		for i, e := range events {
			if strings.HasPrefix(e, "migrate end ") {
				lastEnd = i
			}
			if strings.HasPrefix(e, "create "+fresh.ID+"-") && firstCreate < 0 {
				firstCreate = i
			}
		}
		if lastEnd < 0 || firstCreate < lastEnd {
			t.Errorf("the fresh job's first VM was created at call %d, the last migration ended at call %d: want the VMs after the migrations", firstCreate, lastEnd)
		}
		// Planned after the tuning ended, on the host it emptied.
		var done api.TuningRecord
		for _, r := range d.Tuning() {
			if r.Seq == chosen.Seq {
				done = r
			}
		}
		if done.Outcome != "carried out" || done.Ended.Sub(done.Started) < 8*time.Second || len(done.Migrations) != len(chosen.Moves) ||
			done.MigrationS < 8 {
			t.Errorf("record after the tuning: outcome %q, %s to %s, migrations %+v, %g s in all; want carried out, the 8 s migration measured",
				done.Outcome, done.Started, done.Ended, done.Migrations, done.MigrationS)
		}
		j, err = d.Job(ctx, fresh.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range j.Transitions {
			if tr.To == api.Planned && tr.At.Before(done.Ended) {
				t.Errorf("the fresh job was planned at %s, before the tuning ended at %s", tr.At, done.Ended)
			}
		}
		onFreed := false
		for _, vm := range j.VMs {
			for _, m := range chosen.Moves {
				onFreed = onFreed || vm.Host == m.From
			}
		}
		if !onFreed {
			t.Errorf("the fresh job runs on %+v: want a VM on a host the migration emptied (%+v)", j.VMs, chosen.Moves)
		}
		for k, n := range most {
			if limit := map[bool]int{true: 1, false: 2}[strings.HasPrefix(k, "host ")]; n > limit {
				t.Errorf("%d migrations at once on %s: the cap is %d", n, k, limit)
			}
		}
		if most["lan far"] != moves {
			t.Errorf("at most %d migrations at once on far's LAN: want the decision's %d all at once", most["lan far"], moves)
		}
		// Once both jobs end, the record holds what they measured.
		waitFor(t, "both jobs done", time.Hour, func() bool {
			a, err := d.Job(ctx, heavy.ID)
			if err != nil {
				t.Fatal(err)
			}
			b, err := d.Job(ctx, fresh.ID)
			if err != nil {
				t.Fatal(err)
			}
			return a.State.Terminal() && b.State.Terminal()
		})
		for _, r := range d.Tuning() {
			if r.Seq != chosen.Seq {
				continue
			}
			m := r.Measured
			if m == nil || m.TargetState != "done" || m.NewJobState != "done" || m.TargetMeasuredS <= 0 || m.NewJobMeasuredS <= 0 {
				t.Fatalf("measured %+v: want both jobs done and measured", m)
			}
			t.Logf("target: predicted %.2fs, measured %.2fs (slowdown %.2fs, predicted loss %.2fs); new job: predicted %.2fs before the tuning, measured %.2fs (gain %.2fs, predicted gain %.2fs)",
				m.TargetPredictedS, m.TargetMeasuredS, m.TargetSlowdownS, m.PredictedLossS, m.NewJobPredictedS, m.NewJobMeasuredS, m.NewJobGainS, m.PredictedGainS)
			if m.NewJobGainS <= 0 {
				t.Errorf("the new job gained %.2fs: want it to end sooner than its plan before the tuning said", m.NewJobGainS)
			}
		}
	})
}

// TestBandwidthTuningShrinkRemote is TestBandwidthTuningShrink with every
// site served by a remote agent (over HTTP, as `metasched agent` serves
// one) on the test driver: the agents' inventories say their hosts unplug
// vCPUs, so the daemon weighs and carries out the shrink through them.
// Before, only in-process agents could shrink.
func TestBandwidthTuningShrinkRemote(t *testing.T) {
	dir := t.TempDir()
	grid := &graph.Grid{
		Clusters: []graph.Cluster{
			{Name: "home", Machines: 2, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
			{Name: "far", Machines: 6, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 10},
			{Name: "side", Machines: 2, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
		},
		Links: []graph.Link{{Between: [2]string{"home", "far"}, Mbps: 1000}, {Between: [2]string{"home", "side"}, Mbps: 1000}},
	}
	var acfg []metasched.AgentConfig
	for _, c := range grid.Clusters {
		tok := "token-" + c.Name
		tf := filepath.Join(dir, c.Name+".token")
		if err := os.WriteFile(tf, []byte(tok+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := &remoteAgent{t: t, grid: grid, token: tok, addr: "127.0.0.1:0",
			site: hp.Site{Site: c.Name, Pool: "render", DataDir: filepath.Join(dir, "agent-"+c.Name),
				MigrationPorts: [2]int{49152, 49215}, MigrationProgressTimeout: hp.DefaultProgressTimeout}}
		r.start()
		t.Cleanup(r.stop)
		acfg = append(acfg, metasched.AgentConfig{Site: c.Name, Address: "http://" + r.addr, TokenFile: tf})
	}
	td := startDaemonNet(t, grid, metasched.Options{}, func(c *metasched.Config) {
		c.Agents = acfg
		c.JobTypes = []api.JobType{{Name: "render", VCPUs: 2, MemoryMiB: 2048, HoldingCost: 1}}
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 0.05
		c.MinPoolHosts = 0
	})
	d, ctx := td.d, context.Background()
	heavy, err := d.Submit(ctx, jobfile.Decode([]byte("name: heavy\ntype: render\ntasks: 1000\ntask_ops: 4.0e9\ntask_bytes: 8.0e5\nvm: {vcpus: 4, memory_mib: 4096}\n")))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the heavy job running", time.Minute, func() bool {
		j, err := d.Job(ctx, heavy.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == api.Running
	})
	fresh, err := d.Submit(ctx, jobfile.Decode([]byte("name: fresh\ntype: render\ntasks: 1200\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\nvm: {vcpus: 2, memory_mib: 2048}\n")))
	if err != nil {
		t.Fatal(err)
	}
	var chosen api.TuningRecord
	waitFor(t, "a shrink carried out through the remote agent", time.Minute, func() bool {
		for _, r := range d.Tuning() {
			if r.NewJobID == fresh.ID && r.Action == "shrink" && r.Outcome == "carried out" {
				chosen = r
				return true
			}
		}
		return false
	})
	if !strings.Contains(chosen.Reason, "shrinking is weighed on "+chosen.Cluster) {
		t.Errorf("reason %q does not say that %s can shrink", chosen.Reason, chosen.Cluster)
	}
	for _, sh := range chosen.Shrinks {
		for _, vm := range d.VMs() {
			if vm.Name == sh.VM && vm.VCPUs != sh.VCPUs {
				t.Errorf("vm %s has %d vCPUs after the shrink to %d", vm.Name, vm.VCPUs, sh.VCPUs)
			}
		}
	}
	for _, id := range []string{heavy.ID, fresh.ID} {
		if _, err := d.Cancel(ctx, id); err != nil && !strings.Contains(err.Error(), "cannot be cancelled") {
			t.Error(err)
		}
	}
}
