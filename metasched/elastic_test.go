package metasched_test

import (
	"context"
	"fmt"
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
	"github.com/metasched/metasched/metasched/guesttest"
	"github.com/metasched/metasched/metasched/jobfile"
)

// elasticGrid is one cluster of 10 two-core machines: the demo's job types
// split it, render (VMs of 2 vCPUs: one per host) has 5 hosts, and the
// farm job fills them all (a master and 4 workers).
var elasticGrid = &graph.Grid{Clusters: []graph.Cluster{
	{Name: "solo", Machines: 10, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
}}

// farmJob is a long task farm on the render pool.
func farmJob(elastic bool) []byte {
	return fmt.Appendf(nil, "name: farm\ntype: render\ntasks: 400\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\nelastic: %v\n", elastic)
}

// downHosts is a site's agent whose inventory reports some hosts
// unreachable (with their VMs still listed), as an agent reports a host
// whose hypervisor it lost, leaves out the VMs hidden, as if they were
// gone, and reports the VMs missing as missing from their hosts, as an
// agent does for a VM of its record whose domain was destroyed through
// libvirt.
type downHosts struct {
	metasched.SiteAgent
	mu      sync.Mutex
	down    map[string]bool
	hidden  map[string]bool
	missing map[string]bool
}

func (a *downHosts) miss(vm string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.missing = map[string]bool{vm: true}
}

func (a *downHosts) hide(vms ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hidden = map[string]bool{}
	for _, v := range vms {
		a.hidden[v] = true
	}
}

func (a *downHosts) set(hosts ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.down = map[string]bool{}
	for _, h := range hosts {
		a.down[h] = true
	}
}

func (a *downHosts) Inventory(ctx context.Context) (hp.Inventory, error) {
	inv, err := a.SiteAgent.Inventory(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range inv.Hosts {
		h := &inv.Hosts[i]
		if a.down[h.Name] {
			h.State, h.Error = hp.HostUnreachable, "test: host down"
		}
		h.VMs = slices.DeleteFunc(h.VMs, func(v hp.VM) bool { return a.hidden[v.Name] })
		for i := range h.VMs {
			if a.missing[h.VMs[i].Name] {
				h.VMs[i].State = hp.StateMissing
			}
		}
	}
	return inv, err
}

// elasticDaemon starts a daemon on elasticGrid with emulated runs of the
// predicted time (time_scale 1), no policy, and the solo site's agent
// wrapped by downHosts (hiding the VMs named).
func elasticDaemon(t *testing.T, dataDir string, edit func(*metasched.Config), hidden ...string) (*testDaemon, *downHosts) {
	t.Helper()
	var agent *downHosts
	td := startDaemonGrid(t, elasticGrid, metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
		agent = &downHosts{SiteAgent: a}
		agent.hide(hidden...)
		return agent
	}}, func(c *metasched.Config) {
		if dataDir != "" {
			c.DataDir = dataDir
		}
		c.JobTypes = []api.JobType{
			{Name: "render", VCPUs: 2, MemoryMiB: 1024, HoldingCost: 1},
			{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1},
		}
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 1
		c.MinPoolHosts = 0
		if edit != nil {
			edit(c)
		}
	})
	return td, agent
}

// runningFarm submits the farm job and waits until it runs on every host
// of the render pool (none idle, so that a switch from render must take one
// of its hosts).
func runningFarm(t *testing.T, d *metasched.Daemon, elastic bool) api.Job {
	t.Helper()
	ctx := context.Background()
	j, err := d.Submit(ctx, jobfile.Decode(farmJob(elastic)))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job running", time.Minute, func() bool {
		j, err = d.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == api.Running
	})
	for _, p := range d.Pools() {
		if p.Name == "render" && len(j.VMs) != len(p.Hosts) {
			t.Fatalf("the job runs %d VMs on a render pool of %d hosts %v: want it on every host", len(j.VMs), len(p.Hosts), p.Hosts)
		}
	}
	if len(j.VMs) < 3 {
		t.Fatalf("the job runs on %d VMs, want a master and at least 2 workers", len(j.VMs))
	}
	return j
}

// vmNames lists the names of the VMs the agents report.
func vmNames(d *metasched.Daemon) []string {
	var out []string
	for _, v := range d.VMs() {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

func names(vms []api.JobVM) []string {
	var out []string
	for _, v := range vms {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

// TestElasticSwitchTakesAWorker: a switch from a pool whose every host
// runs the task farm takes the host of one worker. An elastic job loses
// that worker and goes on: its other VMs untouched (none destroyed, none
// moved), its attempt the same, the loss in its record, its transitions,
// the switch's view and the log; then it is done. A job that is not
// elastic is requeued and runs again, as before. (Before, the elastic job
// was requeued too: the switch destroyed all its VMs.)
func TestElasticSwitchTakesAWorker(t *testing.T) {
	skipShortLong(t)
	for _, elastic := range []bool{true, false} {
		t.Run(fmt.Sprintf("elastic=%v", elastic), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				td, _ := elasticDaemon(t, "", nil)
				d, ctx := td.d, context.Background()
				before := runningFarm(t, d, elastic)
				sw := switchAndWait(t, d, "render", "sim")
				if sw.Phase != "done" {
					t.Fatalf("switch %s ended %s: %s", sw.ID, sw.Phase, sw.Reason)
				}
				j, err := d.Job(ctx, before.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !elastic {
					if !slices.Equal(sw.Requeued, []string{j.ID}) || len(sw.LostWorkers) != 0 {
						t.Errorf("switch requeued %v and took workers %v, want the job requeued", sw.Requeued, sw.LostWorkers)
					}
					waitFor(t, "the job done", 4*time.Hour, func() bool {
						var err error
						j, err = d.Job(ctx, j.ID)
						if err != nil {
							t.Fatal(err)
						}
						return j.State.Terminal()
					})
					if j.State != api.Done || j.Attempts != 2 {
						t.Errorf("job %s after %d attempts (%s), want done at its second", j.State, j.Attempts, j.Reason)
					}
					return
				}
				if len(sw.Requeued) != 0 || len(sw.LostWorkers) != 1 {
					t.Fatalf("switch requeued %v and took workers %v, want one worker and no job requeued", sw.Requeued, sw.LostWorkers)
				}
				lost := sw.LostWorkers[0]
				if j.State != api.Running || j.Attempts != 1 {
					t.Fatalf("job %s at attempt %d (%s), want it running its first attempt", j.State, j.Attempts, j.Reason)
				}
				var want []api.JobVM
				for _, v := range before.VMs {
					if v.Name == lost {
						if v.Master || v.Host != sw.Host {
							t.Errorf("the switch took %s (%+v) from host %s, want a worker on it", lost, v, sw.Host)
						}
						continue
					}
					want = append(want, v)
				}
				if !slices.Equal(j.VMs, want) {
					t.Errorf("the job's VMs after the switch: %v, want %v (the others untouched)", j.VMs, want)
				}
				if len(j.LostWorkers) != 1 || j.LostWorkers[0].Name != lost || j.LostWorkers[0].Host != sw.Host ||
					!strings.Contains(j.LostWorkers[0].Reason, "switched from pool render by "+sw.ID) || j.LostWorkers[0].At.IsZero() {
					t.Errorf("lost workers %+v, want %s on %s with the switch", j.LostWorkers, lost, sw.Host)
				}
				if j.Placement == nil || j.Placement.Plan.Machines != len(before.VMs) {
					t.Errorf("the placement changed: %+v, want what was planned", j.Placement)
				}
				tr := j.Transitions[len(j.Transitions)-1]
				if tr.From != api.Running || tr.To != api.Running || !strings.Contains(tr.Reason, "worker VM "+lost) || !strings.Contains(tr.Reason, sw.ID) {
					t.Errorf("last transition %+v, want running to running naming the VM and the switch", tr)
				}
				waitFor(t, "the inventory without the lost VM", time.Minute, func() bool { return !slices.Contains(vmNames(d), lost) })
				if got := vmNames(d); !slices.Equal(got, names(want)) {
					t.Errorf("VMs on the hosts: %v, want the job's others %v", got, names(want))
				}
				if !strings.Contains(td.log.String(), "released a host of elastic jobs' workers: the jobs go on without them") {
					t.Errorf("the log does not say the switch took workers:\n%s", td.log)
				}
				waitFor(t, "the job done", 4*time.Hour, func() bool {
					var err error
					j, err = d.Job(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					return j.State.Terminal()
				})
				if j.State != api.Done || j.Attempts != 1 || len(j.LostWorkers) != 1 {
					t.Errorf("job %s after %d attempts (%s), lost %v: want done at its first, one worker lost", j.State, j.Attempts, j.Reason, j.LostWorkers)
				}
				waitFor(t, "no VM left", time.Minute, func() bool { return len(d.VMs()) == 0 })
			})
		})
	}
}

// master is the master VM of a job's view.
func master(j api.Job) api.JobVM {
	for _, v := range j.VMs {
		if v.Master {
			return v
		}
	}
	return api.JobVM{}
}

// TestElasticSwitchTakesTheMaster: a switch that takes the host of an
// elastic job's master requeues the job, as it would any job (every other
// host of the pool is made unavailable to the switch: its agent reports it
// unreachable, within the agent-loss grace); the job runs again and is
// done.
func TestElasticSwitchTakesTheMaster(t *testing.T) {
	skipShortLong(t)
	synctest.Test(t, func(t *testing.T) {
		td, agent := elasticDaemon(t, "", func(c *metasched.Config) { c.AgentLossGrace = time.Hour })
		d, ctx := td.d, context.Background()
		j := runningFarm(t, d, true)
		m := master(j)
		var others []string
		for _, v := range j.VMs {
			if v.Host != m.Host {
				others = append(others, v.Host)
			}
		}
		agent.set(others...)
		waitFor(t, "the workers' hosts unreachable", time.Minute, func() bool {
			for _, h := range d.Hosts() {
				if slices.Contains(others, h.Name) && h.State != api.HostUnreachable {
					return false
				}
			}
			return true
		})
		sw := switchAndWait(t, d, "render", "sim")
		if sw.Phase != "done" || sw.Host != m.Host || !slices.Equal(sw.Requeued, []string{j.ID}) || len(sw.LostWorkers) != 0 {
			t.Fatalf("switch %+v, want done on the master's host %s with the job requeued", sw, m.Host)
		}
		var err error
		j, err = d.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		requeued := false
		for _, tr := range j.Transitions {
			requeued = requeued || tr.From == api.Running && tr.To == api.Queued && strings.Contains(tr.Reason, "host "+m.Host+" switched from pool render by "+sw.ID+": requeued")
		}
		if !requeued {
			t.Errorf("no requeue by the switch in the transitions %+v", j.Transitions)
		}
		agent.set()
		waitFor(t, "the job done", time.Hour, func() bool {
			var err error
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		if j.State != api.Done || j.Attempts != 2 || len(j.LostWorkers) != 0 {
			t.Errorf("job %s after %d attempts (%s), lost %v: want done at its second attempt", j.State, j.Attempts, j.Reason, j.LostWorkers)
		}
	})
}

// TestElasticWorkerHostLost: a worker's host unreachable for the
// agent-loss grace costs an elastic job that worker (it goes on, its VM
// destroyed when the host answers again); the master's host lost requeues
// it; a job that is not elastic is requeued.
func TestElasticWorkerHostLost(t *testing.T) {
	skipShortLong(t)
	for _, tc := range []struct {
		name    string
		elastic bool
		master  bool
	}{{"elastic worker", true, false}, {"elastic master", true, true}, {"not elastic", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				td, agent := elasticDaemon(t, "", func(c *metasched.Config) { c.AgentLossGrace = 5 * time.Second })
				d, ctx := td.d, context.Background()
				j := runningFarm(t, d, tc.elastic)
				vm := j.VMs[len(j.VMs)-1]
				if tc.master {
					vm = master(j)
				}
				agent.set(vm.Host)
				waitFor(t, "the job to lose "+vm.Host, time.Minute, func() bool {
					var err error
					j, err = d.Job(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					return j.State != api.Running || j.Attempts > 1 || len(j.LostWorkers) > 0
				})
				if !tc.elastic || tc.master {
					requeued := false
					for _, tr := range j.Transitions {
						requeued = requeued || tr.From == api.Running && tr.To == api.Queued && strings.Contains(tr.Reason, "a host of the job became unreachable: "+vm.Host)
					}
					if !requeued || len(j.LostWorkers) != 0 {
						t.Errorf("job %s (%s) at attempt %d, lost %v: want requeued for the lost host: %+v", j.State, j.Reason, j.Attempts, j.LostWorkers, j.Transitions)
					}
					agent.set()
					waitFor(t, "the job done", time.Hour, func() bool {
						var err error
						j, err = d.Job(ctx, j.ID)
						if err != nil {
							t.Fatal(err)
						}
						return j.State.Terminal()
					})
					if j.State != api.Done || j.Attempts != 2 {
						t.Errorf("job %s after %d attempts, want done at its second", j.State, j.Attempts)
					}
					return
				}
				if j.State != api.Running || j.Attempts != 1 || len(j.LostWorkers) != 1 || j.LostWorkers[0].Name != vm.Name ||
					j.LostWorkers[0].Reason != "host "+vm.Host+" unreachable for 5s or more" || slices.ContainsFunc(j.VMs, func(v api.JobVM) bool { return v.Name == vm.Name }) {
					t.Fatalf("job %s (%s) at attempt %d, VMs %v, lost %+v: want it running without %s", j.State, j.Reason, j.Attempts, j.VMs, j.LostWorkers, vm.Name)
				}
				// The host answers again: the VM left there is no job's
				// any more and goes; the job is done at its first attempt.
				agent.set()
				waitFor(t, "the lost VM destroyed", time.Minute, func() bool { return !slices.Contains(vmNames(d), vm.Name) })
				waitFor(t, "the job done", time.Hour, func() bool {
					var err error
					j, err = d.Job(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					return j.State.Terminal()
				})
				if j.State != api.Done || j.Attempts != 1 {
					t.Errorf("job %s after %d attempts (%s), want done at its first", j.State, j.Attempts, j.Reason)
				}
			})
		})
	}
}

// TestElasticWorkerDestroyedOutside: a worker VM destroyed outside the
// daemon (through its agent, or through libvirt: its agent then reports it
// missing from its host) costs an elastic job that worker: it goes on and
// is done at its first attempt. The master VM destroyed requeues it; a job
// that is not elastic is requeued. (Before, nothing noticed: the job went
// on with a VM that no longer existed.)
func TestElasticWorkerDestroyedOutside(t *testing.T) {
	skipShortLong(t)
	for _, tc := range []struct {
		name    string
		elastic bool
		master  bool
		libvirt bool
	}{{"elastic worker", true, false, false}, {"elastic worker through libvirt", true, false, true},
		{"elastic master", true, true, false}, {"not elastic", false, false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				td, agent := elasticDaemon(t, "", nil)
				d, ctx := td.d, context.Background()
				j := runningFarm(t, d, tc.elastic)
				vm := j.VMs[1]
				if tc.master {
					vm = master(j)
				}
				if tc.libvirt {
					agent.miss(vm.Name)
				} else if err := agent.SiteAgent.DestroyVM(ctx, vm.Name); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the job to notice", time.Minute, func() bool {
					var err error
					j, err = d.Job(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					return j.State != api.Running || j.Attempts > 1 || len(j.LostWorkers) > 0
				})
				gone := "gone from its host " + vm.Host + ": its agent no longer has it there (destroyed outside the daemon)"
				if !tc.elastic || tc.master {
					requeued := false
					for _, tr := range j.Transitions {
						requeued = requeued || tr.From == api.Running && tr.To == api.Queued && strings.Contains(tr.Reason, vm.Name) && strings.Contains(tr.Reason, gone)
					}
					if !requeued {
						t.Errorf("job %s (%s): want requeued for its VM gone, transitions %+v", j.State, j.Reason, j.Transitions)
					}
				} else if j.State != api.Running || len(j.LostWorkers) != 1 || j.LostWorkers[0].Name != vm.Name || j.LostWorkers[0].Reason != gone {
					t.Fatalf("job %s (%s), lost %+v: want it running without %s", j.State, j.Reason, j.LostWorkers, vm.Name)
				}
				waitFor(t, "the job done", time.Hour, func() bool {
					var err error
					j, err = d.Job(ctx, j.ID)
					if err != nil {
						t.Fatal(err)
					}
					return j.State.Terminal()
				})
				want := 1
				if !tc.elastic || tc.master {
					want = 2
				}
				if j.State != api.Done || j.Attempts != want {
					t.Errorf("job %s after %d attempts (%s), want done at attempt %d", j.State, j.Attempts, j.Reason, want)
				}
			})
		})
	}
}

// TestElasticRestartAfterLostWorker: the daemon restarts after an elastic
// job lost a worker to a switch: the job resumes with its remaining VMs
// (not requeued), keeps the record of the loss, and is done at its first
// attempt. A worker destroyed while the daemon was down does not stop the
// job from resuming either: it is lost once the daemon misses it.
func TestElasticRestartAfterLostWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		td, _ := elasticDaemon(t, dir, nil)
		d, ctx := td.d, context.Background()
		j := runningFarm(t, d, true)
		sw := switchAndWait(t, d, "render", "sim")
		if len(sw.LostWorkers) != 1 {
			t.Fatalf("switch %+v, want one worker taken", sw)
		}
		var err error
		j, err = d.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		td.stop()
		// While the daemon is down, one more worker goes: the agents no
		// longer list it when it starts again.
		var gone api.JobVM
		for _, v := range j.VMs {
			if !v.Master {
				gone = v
				break
			}
		}
		time.Sleep(time.Second)

		td, _ = elasticDaemon(t, dir, nil, gone.Name)
		d = td.d
		waitFor(t, "the job to lose "+gone.Name, time.Minute, func() bool {
			var err error
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State != api.Running || len(j.LostWorkers) == 2
		})
		if j.State != api.Running || j.Attempts != 1 || len(j.LostWorkers) != 2 || j.LostWorkers[0].Name != sw.LostWorkers[0] || j.LostWorkers[1].Name != gone.Name {
			t.Fatalf("job after the restart: %s (%s), attempt %d, lost %+v", j.State, j.Reason, j.Attempts, j.LostWorkers)
		}
		for _, tr := range j.Transitions {
			if tr.To == api.Queued && tr.From != "" {
				t.Errorf("the job was requeued: %+v", tr)
			}
		}
		if !strings.Contains(td.log.String(), "resuming a running job after a restart") {
			t.Errorf("the job was not resumed:\n%s", td.log)
		}
		waitFor(t, "the job done", time.Hour, func() bool {
			var err error
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		if j.State != api.Done || j.Attempts != 1 {
			t.Errorf("job %s after %d attempts (%s), want done at its first", j.State, j.Attempts, j.Reason)
		}
	})
}

// TestElasticGuestLosesAWorker runs an elastic job with the guest
// executor: a switch takes a worker's host while the command runs in
// every VM; the executor stops following the lost VM (its guest calls now
// fail: it is destroyed) without stopping it, keeps what it printed, says
// in the job's log that it was lost, and the master's exit decides: the
// job is done at its first attempt.
func TestElasticGuestLosesAWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var site *guesttest.Site
		td := startDaemonGrid(t, elasticGrid, metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
			site = &guesttest.Site{SiteAgent: a, Net: 1}
			return site
		}}, func(c *metasched.Config) {
			c.JobTypes = []api.JobType{
				{Name: "render", VCPUs: 2, MemoryMiB: 1024, HoldingCost: 1},
				{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1},
			}
			c.Executor = metasched.ExecutorConfig{Name: "guest", Poll: 100 * time.Millisecond}
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.MinPoolHosts = 0
		})
		d, ctx := td.d, context.Background()
		j, err := d.Submit(ctx, jobfile.Decode(append(farmJob(true), "command: [taskfarm, run, hold]\n"...)))
		if err != nil {
			t.Fatal(err)
		}
		logs := func() string {
			b, err := d.Store().Logs(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		waitFor(t, "the command running in every VM", time.Minute, func() bool {
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != api.Running {
				return false
			}
			for _, v := range j.VMs {
				if !strings.Contains(logs(), v.Name+"| rank=") {
					return false
				}
			}
			return true
		})
		sw := switchAndWait(t, d, "render", "sim")
		if sw.Phase != "done" || len(sw.LostWorkers) != 1 {
			t.Fatalf("switch %+v, want done, one worker taken", sw)
		}
		lost := sw.LostWorkers[0]
		note := "[metasched: worker VM " + lost + " lost (host " + sw.Host + " switched from pool render by " + sw.ID + "): the job goes on without it]\n"
		waitFor(t, "the loss in the job's log", time.Minute, func() bool { return strings.Contains(logs(), note) })
		m := master(j)
		if !site.Exit(m.Name, 0) {
			t.Fatalf("the master %s runs no command", m.Name)
		}
		waitFor(t, "the job done", time.Minute, func() bool {
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		if j.State != api.Done || j.Attempts != 1 || len(j.LostWorkers) != 1 || j.LostWorkers[0].Name != lost {
			t.Fatalf("job %s (%s) after %d attempts, lost %+v: want done at its first without %s", j.State, j.Reason, j.Attempts, j.LostWorkers, lost)
		}
		log := logs()
		if !strings.Contains(log, lost+"| rank=") || strings.Count(log, note) != 1 {
			t.Errorf("the log should keep the lost VM's output and note its loss once:\n%s", log)
		}
		stopped := map[string]bool{}
		for _, e := range site.Execs() {
			if f := strings.Fields(e); len(f) > 2 && f[2] == "stop" {
				stopped[f[0]] = true
			}
		}
		for _, v := range j.VMs {
			if !v.Master && !stopped[v.Name] {
				t.Errorf("the worker %s still running at the master's end was not stopped: %v", v.Name, stopped)
			}
		}
		if stopped[lost] {
			t.Errorf("the lost VM %s was stopped", lost)
		}
	})
}
