package metasched_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
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
	heavy, err := d.Submit(ctx, []byte(heavyJob))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the heavy job running", 20*time.Second, func() bool {
		j, _ := d.Job(ctx, heavy.ID)
		return j.State == store.Running
	})
	if _, err := d.Submit(ctx, []byte(freshJob)); err != nil {
		t.Fatal(err)
	}
	var recs []api.TuningRecord
	waitFor(t, "a tuning decision", 20*time.Second, func() bool {
		recs = d.Tuning()
		return len(recs) > 0
	})
	return d, heavy, recs
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
	heavy, err := d.Submit(ctx, []byte("name: heavy\ntype: render\ntasks: 1000\ntask_ops: 4.0e9\ntask_bytes: 8.0e5\nvm: {vcpus: 4, memory_mib: 4096}\n"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the heavy job running", time.Minute, func() bool {
		j, _ := d.Job(ctx, heavy.ID)
		return j.State == store.Running
	})
	fresh, err := d.Submit(ctx, []byte("name: fresh\ntype: render\ntasks: 1200\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\nvm: {vcpus: 2, memory_mib: 2048}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var chosen api.TuningRecord
	waitFor(t, "a shrink carried out through the remote agent", time.Minute, func() bool {
		for _, r := range d.Tuning() {
			if r.NewJob == "fresh" && r.Action == "shrink" && r.Outcome == "carried out" {
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
