package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/slurm"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
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
		Serve: "calibration: {auto: false}\n",
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
