package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/slurm"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/lab"
)

// spanJob is a job of pool farm whose master is in site a: every machine
// prints its host and role; each worker listens on TCP port 7000 (python3
// on a Slurm node, busybox's nc in a VM) and prints what it receives; the
// master reaches every worker of the hostfile at its address.
const spanJob = `name: span
type: farm
tasks: 4000
task_ops: 1.0e10
task_bytes: 1000
walltime: 10m
master: a
command:
  - /bin/sh
  - -c
  - |
    host=${SLURMD_NODENAME:-$(hostname)}
    echo "host=$host role=$METASCHED_ROLE rank=$METASCHED_RANK"
    if [ "$METASCHED_ROLE" = worker ]; then
      if [ -n "$SLURMD_NODENAME" ]; then
        exec python3 -c 'import socket, time
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("", 7000)); s.listen(4)
    c, _ = s.accept(); print("received:", c.recv(100).decode().strip(), flush=True); c.close(); time.sleep(900)'
      fi
      (sleep 900 | nc -l -p 7000 >/tmp/hello 2>/dev/null) </dev/null >/dev/null 2>&1 &
      until [ -s /tmp/hello ]; do sleep 0.1; done
      echo "received: $(cat /tmp/hello)"
      sleep 900
    fi
    for w in $(sed -n 's/^\([0-9.]*\) .*role=worker$/\1/p' "$METASCHED_HOSTFILE"); do
      until echo "hello from $host" | nc "$w" 7000 2>/dev/null; do sleep 0.2; done
      echo "reached $w"
    done
`

// A grid of a Slurm site (three nodes, each slurmd in a network namespace
// of its own on site b's bridge) and a QEMU site (a, two hosts), joined by the lab's
// shaped links, with the real binaries: a job spans both, its master in a
// VM reaching every worker on the Slurm nodes; a pool switch moves an idle
// Slurm node to another partition while a job of Slurm's own runs on
// another node, untouched; the controller restarted without -R forgets
// the move, and the agent puts it back; nothing is left at the end.
func TestSlurmGrid(t *testing.T) {
	spec := lab.Spec{
		// The Slurm site first: in grid order its nodes come before a-1,
		// so that the switch below takes one of them.
		Sites: []lab.Site{
			{Name: "b", Hosts: 3, UplinkMbit: 20, Perf: 1e9, LANMbps: 1000, Cores: 1, MemoryMiB: 1024, Slurm: true},
			{Name: "a", Hosts: 2, UplinkMbit: 20, Perf: 1e9, LANMbps: 1000, Cores: 1, MemoryMiB: 1024},
		},
		Pools: []lab.Pool{{Name: "farm", VCPUs: 1, MemoryMiB: 128, Image: "guest"},
			{Name: "render", VCPUs: 1, MemoryMiB: 128, Image: "guest"}},
		Serve: "calibration: {auto: false, bench_seconds: 2, probe_bytes: 4194304}\nagent_loss_grace: 10s\n",
	}
	l := startGuestLab(t, spec, nil)
	g := &guestGrid{t: t, lab: l, dir: l.Dir(), c: l.Client}
	sc := l.Slurm["b"]

	start := time.Now()
	j := g.submit(spanJob)
	running := g.waitState(j.ID, 5*time.Minute, api.Running, api.Done, api.Failed)
	provisioned := time.Since(start)
	j = g.waitState(j.ID, 5*time.Minute, api.Done, api.Failed)
	log := g.jobLog(j.ID)
	if j.State != api.Done {
		t.Fatalf("job %s: %s (%s)\n%s", j.ID, j.State, j.Reason, log)
	}
	t.Logf("the job spanning both sites: running after %s, done after %s", provisioned.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	_ = running
	var workers []string
	for _, vm := range j.VMs {
		if !vm.Master {
			workers = append(workers, vm.Host)
		}
	}
	slices.Sort(workers)
	if !slices.Contains(workers, "b-1") || !slices.Contains(workers, "b-2") || !slices.Contains(workers, "b-3") {
		t.Fatalf("the job's workers are on %v, want every Slurm node:\n%s", workers, log)
	}
	master := j.VMs[slices.IndexFunc(j.VMs, func(vm api.JobVM) bool { return vm.Master })]
	for k, node := range []string{"b-1", "b-2", "b-3"} {
		addr := fmt.Sprintf("10.77.1.%d", 201+k)
		for _, want := range []string{"host=" + node + " role=worker", "received: hello from " + master.Name, "reached " + addr} {
			if !strings.Contains(log, want) {
				t.Errorf("the log has no %q:\n%s", want, log)
			}
		}
	}
	if !strings.Contains(log, "role=master rank=0") {
		t.Errorf("the log has no master:\n%s", log)
	}

	g.nothingLeft() // the job's allocations released

	// The same small job (a master and a worker) on Slurm nodes and in
	// VMs: the time to its share, and to its end.
	for _, site := range []string{"b", "a"} {
		start := time.Now()
		one := g.submit(fmt.Sprintf("name: one-%s\ntype: farm\ntasks: 1\ntask_ops: 1.0e9\ntask_bytes: 1000\nmaster: %s\nwalltime: 5m\ncommand: [/bin/sh, -c, 'echo \"on $(hostname)\"']\n", site, site))
		at := g.waitState(one.ID, 5*time.Minute, api.Running, api.Done, api.Failed)
		running := time.Since(start)
		one = g.waitState(one.ID, 5*time.Minute, api.Done, api.Failed)
		if one.State != api.Done || len(at.VMs) == 0 || slices.ContainsFunc(at.VMs, func(vm api.JobVM) bool { return vm.Site != site }) {
			t.Fatalf("the one-machine job in site %s: %+v, its VMs running %+v\n%s", site, one, at.VMs, g.jobLog(one.ID))
		}
		t.Logf("a small job on site %s (%s): running after %s, done after %s", site, map[string]string{"a": "in VMs", "b": "on Slurm nodes"}[site],
			running.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		g.nothingLeft()
	}

	// The calibration on the Slurm nodes, with the task farm beside the
	// daemon's program copied into allocations (after the small jobs: its
	// figures change their plans): the nodes' speed, their
	// LAN, a job's start and end, and the link to site a's VMs.
	start = time.Now()
	g.calibrateSlurm()
	t.Logf("site b calibrated in %s", time.Since(start).Round(time.Millisecond))
	g.nothingLeft()

	// Slurm's own job on b-1; a switch from farm to render takes b-2.
	cmd := exec.Command(sc.Client("sbatch"), "--parsable", "--partition=farm", "--nodelist=b-1", "--job-name=users-own",
		"--output=/dev/null", "--wrap", "exec sleep 613")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SLURM_CONF=" + sc.Conf}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	own, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	ownJob := func() slurm.Job {
		jobs, err := sc.Jobs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.ID == own {
				return j
			}
		}
		return slurm.Job{}
	}
	g.eventually(time.Minute, "Slurm's own job running", func(context.Context) (string, bool) {
		j := ownJob()
		jobs, _ := sc.Jobs(context.Background())
		nodes, _ := sc.Nodes(context.Background())
		return fmt.Sprintf("%s %s; Slurm's jobs %+v; nodes %+v", j.State, j.Reason, jobs, nodes), j.State == "RUNNING"
	})
	g.eventually(time.Minute, "the daemon to see Slurm's own job on b-1", func(ctx context.Context) (string, bool) {
		hs, err := g.c.Hosts(ctx)
		if err != nil {
			return err.Error(), false
		}
		for _, h := range hs {
			if h.Name == "b-1" {
				return fmt.Sprint(h), h.FreeVCPUs == 0
			}
		}
		return "no b-1", false
	})
	start = time.Now()
	g.switchHost("farm", "render")
	t.Logf("a Slurm node switched from farm to render in %s", time.Since(start).Round(time.Millisecond))
	l2, err := g.c.Switches(context.Background(), client.SwitchesQuery{})
	if err != nil || len(l2.Switches) == 0 {
		t.Fatalf("switches: %v", err)
	}
	if sw := l2.Switches[0]; sw.Host != "b-2" || sw.FailedIn != "" {
		t.Fatalf("the switch %+v: want b-2 moved (b-1 runs Slurm's own job)", sw)
	}
	partOf := func(node string) []string {
		nodes, err := sc.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if n.Name == node {
				return n.Partitions
			}
		}
		return nil
	}
	if p := partOf("b-2"); !slices.Equal(p, []string{"render"}) {
		t.Errorf("b-2 is in %v after the switch, want render", p)
	}
	if j := ownJob(); j.State != "RUNNING" || !slices.Equal(j.Nodes, []string{"b-1"}) {
		t.Errorf("Slurm's own job after the switch: %+v", j)
	}

	// A plain restart of slurmctld forgets the move; the agent puts it back.
	if err := sc.RestartController(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	g.eventually(2*time.Minute, "b-2 back in render", func(context.Context) (string, bool) {
		p := partOf("b-2")
		return fmt.Sprint(p), slices.Equal(p, []string{"render"})
	})
	if j := ownJob(); j.State != "RUNNING" {
		t.Errorf("Slurm's own job after the restart: %+v", j)
	}
	if err := sc.Release(context.Background(), own); err != nil {
		t.Fatal(err)
	}
	g.nothingLeft()

	// A Slurm node goes down under an elastic job: the job loses the
	// worker there and goes on; its master (on the other Slurm node, which
	// shares this machine's files) ends when the test says so.
	g.nodeBack(sc, g.nodeDown(sc, true))
	if *slurmRequeue {
		g.nodeBack(sc, g.nodeDown(sc, false))
	}
	pids, netns := sc.PIDs(), sc.Namespaces()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && !strings.Contains(string(b), ") Z ") {
			t.Errorf("PID %d of the Slurm site still runs: %s", pid, b)
		}
	}
	list, _ := exec.Command("/usr/sbin/ip", "netns", "list").Output()
	for _, ns := range netns {
		if strings.Contains(string(list), ns) {
			t.Errorf("network namespace %s left", ns)
		}
	}
	if left := slurmtest.Running("613"); len(left) > 0 {
		t.Errorf("Slurm's own job's process (PIDs %v) still runs after the lab's end", left)
	}
}

// calibrateSlurm asks for site b's figures (a Slurm site's) and checks
// them once measured: each on Slurm nodes, the link's with a VM of site a,
// each in the bounds this machine gives; nothing is left on the nodes.
func (g *guestGrid) calibrateSlurm() {
	t := g.t
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := g.c.Calibrate(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	var figs []api.CalibrationFigure
	g.eventually(5*time.Minute, "site b's figures measured", func(ctx context.Context) (string, bool) {
		cal, err := g.c.Calibration(ctx)
		if err != nil {
			return err.Error(), false
		}
		figs = nil
		for _, f := range cal.Figures {
			if f.Site != "b" && f.Peer != "b" {
				continue
			}
			if f.State == api.CalibrationFailed {
				t.Fatalf("%s failed: %s", f.Key, f.Error)
			}
			if f.State != api.CalibrationMeasured {
				return f.Key + " " + f.State + " " + f.Waiting, false
			}
			figs = append(figs, f)
		}
		return fmt.Sprint(cal.Sites), len(figs) > 0
	})
	kinds := map[string]int{}
	for _, f := range figs {
		t.Logf("%s: %.4g %s (grid file: %.4g %s) on %v", f.Key, f.Value, f.Unit, f.Configured, f.ConfiguredUnit, f.Hosts)
		kinds[f.Kind]++
		for _, h := range f.Hosts {
			if site := h[:1]; site != "b" && !(f.Kind == api.CalibrationLink && site == "a") {
				t.Errorf("%s measured on %v: want site b's Slurm nodes", f.Key, f.Hosts)
			}
		}
		checkFigure(t, f)
		if f.Kind == api.CalibrationStart && len(f.Hosts) != 2 {
			t.Errorf("%s measured on %v, want two nodes", f.Key, f.Hosts)
		}
	}
	if kinds[api.CalibrationPerf] != 1 || kinds[api.CalibrationLAN] != 1 || kinds[api.CalibrationLink] != 1 || kinds[api.CalibrationStart] != 1 {
		t.Errorf("site b's figures by kind %v: want its perf, LAN, start, and the link to a", kinds)
	}
	// The nodes share this machine's file system: a calibration VM's
	// directory would be left here.
	ents, err := os.ReadDir(executor.GuestNodeDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "cal-") {
			t.Errorf("a calibration's directory is left on the nodes: %s", filepath.Join(executor.GuestNodeDir, e.Name()))
		}
	}
}

// nodeBack starts the node's slurmd again (Slurm returns it to service
// when it registers) and waits until the daemon has it reachable and
// nothing is left: the allocation of the job on it, which Slurm ended,
// is gone from the agent's record once the node answers.
func (g *guestGrid) nodeBack(sc *slurmtest.Cluster, node string) {
	t := g.t
	start := time.Now()
	if err := sc.StartNode(node); err != nil {
		t.Fatal(err)
	}
	g.slurmNodesIdle()
	g.nothingLeft()
	t.Logf("node %s back, nothing of the job left, after %s", node, time.Since(start).Round(time.Millisecond))
}

// slurmNodesIdle waits until the daemon has every node of site b
// reachable and idle (after a restart of Slurm's controller, or a node's
// slurmd, the agent has them unreachable for a while).
func (g *guestGrid) slurmNodesIdle() {
	g.eventually(2*time.Minute, "every Slurm node reachable and idle", func(ctx context.Context) (string, bool) {
		hs, err := g.c.Hosts(ctx)
		if err != nil {
			return err.Error(), false
		}
		n := 0
		for _, h := range hs {
			if h.Site == "b" && h.State == api.HostIdle {
				n++
			}
		}
		return fmt.Sprint(hs), n == 3
	})
}

// slurmRequeue adds to TestSlurmGrid a job that is not elastic whose
// worker's node goes down: it is requeued and runs again (make soak).
var slurmRequeue = flag.Bool("slurm-requeue", false, "TestSlurmGrid: also a job that is not elastic under a node going down (make soak)")

// nodeDown runs a job whose master is on a Slurm node of pool farm and a
// worker on the other, and stops that worker's slurmd (Slurm takes the
// node down): an elastic job loses the worker and ends done; any other is
// requeued (the daemon's on_agent_loss) and, run again on the hosts left,
// ends done. The master (on a node, which shares this machine's files)
// ends when the test says so. It returns the node it stopped.
func (g *guestGrid) nodeDown(sc *slurmtest.Cluster, elastic bool) (downed string) {
	t := g.t
	g.slurmNodesIdle() // a node out of reach would not be planned on
	mark := filepath.Join(t.TempDir(), "end")
	j := g.submit(fmt.Sprintf(`name: node-down
type: farm
tasks: 4000
task_ops: 1.0e10
task_bytes: 1000
master: b
elastic: %v
walltime: 10m
command: [/bin/sh, -c, 'if [ "$METASCHED_ROLE" = master ]; then until [ -e %s ]; do sleep 0.2; done; echo master ends; else echo "worker on $(hostname)"; exec sleep 619; fi']
`, elastic, mark))
	j = g.waitState(j.ID, 5*time.Minute, api.Running, api.Done, api.Failed)
	var down api.JobVM
	for _, vm := range j.VMs {
		if vm.Site == "b" && !vm.Master {
			down = vm
		}
	}
	if j.State != api.Running || down.Name == "" {
		t.Fatalf("job %s: %s, VMs %+v: want it running with a worker on a Slurm node\n%s", j.ID, j.State, j.VMs, g.jobLog(j.ID))
	}
	start := time.Now()
	sc.StopNode(down.Host)
	if elastic {
		g.eventually(3*time.Minute, "the job to lose its worker on "+down.Host, func(ctx context.Context) (string, bool) {
			j, err := g.job(ctx, j.ID)
			if err != nil {
				return err.Error(), false
			}
			if j.State == api.Failed {
				t.Fatalf("job %s failed (%s)\n%s", j.ID, j.Reason, g.jobLog(j.ID))
			}
			return fmt.Sprintf("%s, lost %+v", j.State, j.LostWorkers), len(j.LostWorkers) == 1 && j.LostWorkers[0].Name == down.Name
		})
		t.Logf("node %s down: its worker lost after %s", down.Host, time.Since(start).Round(time.Millisecond))
	} else {
		g.eventually(3*time.Minute, "the job running again without "+down.Host, func(ctx context.Context) (string, bool) {
			j, err := g.job(ctx, j.ID)
			if err != nil {
				return err.Error(), false
			}
			if j.State == api.Failed {
				t.Fatalf("job %s failed (%s)\n%s", j.ID, j.Reason, g.jobLog(j.ID))
			}
			on := slices.ContainsFunc(j.VMs, func(vm api.JobVM) bool { return vm.Host == down.Host })
			return fmt.Sprintf("%s, attempt %d, VMs %+v", j.State, j.Attempts, j.VMs), j.State == api.Running && j.Attempts == 2 && !on
		})
		t.Logf("node %s down: the job requeued and running again after %s", down.Host, time.Since(start).Round(time.Millisecond))
	}
	if err := os.WriteFile(mark, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j = g.waitState(j.ID, 5*time.Minute, api.Done, api.Failed)
	log := g.jobLog(j.ID)
	if j.State != api.Done || !strings.Contains(log, "master ends") {
		t.Fatalf("job %s: %s (%s), want done:\n%s", j.ID, j.State, j.Reason, log)
	}
	if elastic && !strings.Contains(log, "worker VM "+down.Name+" lost") {
		t.Errorf("job %s's log does not say it lost %s:\n%s", j.ID, down.Name, log)
	}
	if !elastic && !slices.ContainsFunc(j.Transitions, func(tr api.Transition) bool {
		return tr.To == api.Queued && strings.Contains(tr.Reason, "a host of the job became unreachable: "+down.Host)
	}) {
		t.Errorf("job %s: no requeue for %s in %+v", j.ID, down.Host, j.Transitions)
	}
	// The node kept the lost VM's directory (nothing could reach it): the
	// nodes here are this machine.
	if err := os.RemoveAll(filepath.Join(executor.GuestNodeDir, down.Name)); err != nil {
		t.Error(err)
	}
	return down.Host
}
