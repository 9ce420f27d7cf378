package slurm_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/slurm"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
)

// sbatch submits a job of Slurm's own users (not metasched's) and returns
// its ID.
func sbatch(t *testing.T, c *slurmtest.Cluster, args ...string) int {
	t.Helper()
	cmd := exec.Command(c.Client("sbatch"), append([]string{"--parsable"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SLURM_CONF=" + c.Conf}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch %v: %v\n%s", args, err, out)
	}
	id, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("sbatch printed %q", out)
	}
	return id
}

func members(t *testing.T, c *slurmtest.Cluster) map[string][]string {
	t.Helper()
	nodes, err := c.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, n := range nodes {
		for _, p := range n.Partitions {
			out[p] = append(out[p], n.Name)
		}
	}
	return out
}

// checkMembers fails the test for each partition of want whose nodes
// differ from want's.
func checkMembers(t *testing.T, c *slurmtest.Cluster, want map[string][]string, when string) {
	t.Helper()
	got := members(t, c)
	for p, w := range want {
		if !slices.Equal(slices.Sorted(slices.Values(got[p])), w) {
			t.Errorf("%s: partition %s has %v, want %v", when, p, got[p], w)
		}
	}
}

func jobByID(t *testing.T, c *slurmtest.Cluster, id int) (slurm.Job, bool) {
	t.Helper()
	jobs, err := c.Jobs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(jobs, func(j slurm.Job) bool { return j.ID == id })
	if i < 0 {
		return slurm.Job{}, false
	}
	return jobs[i], true
}

// waitFor polls cond until it holds; what it last said is the failure.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	for range 600 {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not after 60 s: %s", what, last)
}

// A real three-node cluster: its inventory; an allocation of metasched's
// with a command run on each of its nodes and only the variables given;
// a node moved between partitions while a job of Slurm's own runs on
// another, untouched; a move of that busy node cancelled at its timeout;
// the partitions put back after a reconfigure and after restarts of the
// controller with and without -R; and nothing left running at the end.
func TestCluster(t *testing.T) {
	t.Parallel()
	if err := slurmtest.Check(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	c := slurmtest.StartT(t, slurmtest.Spec{
		Nodes: []slurmtest.NodeSpec{{Name: "n1"}, {Name: "n2"}, {Name: "n3", CPUs: 1, MemoryMiB: 500}},
		Partitions: []slurmtest.PartitionSpec{{Name: "batch", Nodes: []string{"n1", "n2"}, Default: true},
			{Name: "interactive", Nodes: []string{"n3"}}},
	})
	t.Logf("three idle nodes in %s", time.Since(start).Round(time.Millisecond))
	ctx := t.Context()

	nodes, err := c.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 3 {
		t.Fatalf("%d nodes: %+v", len(nodes), nodes)
	}
	for _, n := range nodes {
		wantCPUs, wantMem, wantPart := 2, 1000, "batch"
		if n.Name == "n3" {
			wantCPUs, wantMem, wantPart = 1, 500, "interactive"
		}
		if n.CPUs != wantCPUs || n.MemoryMiB != wantMem || !slices.Equal(n.Partitions, []string{wantPart}) ||
			n.State != "idle" || n.Busy() || n.Drain() || n.Down() || n.Address != "127.0.0.1" {
			t.Errorf("node %+v: want %d CPUs, %d MiB, in %s, idle at 127.0.0.1", n, wantCPUs, wantMem, wantPart)
		}
	}

	// metasched's allocation: two whole nodes, a command on each.
	start = time.Now()
	alloc, err := c.Allocate(ctx, slurm.AllocSpec{Job: "j1", Partition: "batch", Nodes: []string{"n1", "n2"}, TimeLimit: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("allocation %d of n1, n2 in %s", alloc.ID, time.Since(start).Round(time.Millisecond))
	if own, ok := alloc.Own(); !ok || own != "j1" || !slices.Equal(alloc.Nodes, []string{"n1", "n2"}) ||
		alloc.Partition != "batch" || alloc.TimeLimitMinutes != 5 {
		t.Errorf("allocation %+v: want metasched's j1 on n1, n2 in batch for 5 minutes", alloc)
	}
	os.Setenv("METASCHED_AGENT_SECRET", "must not pass")
	defer os.Unsetenv("METASCHED_AGENT_SECRET")
	for rank, node := range alloc.Nodes {
		var out, errOut bytes.Buffer
		code, err := c.Run(ctx, alloc.ID, slurm.Command{Node: node, Env: []string{"METASCHED_RANK=" + strconv.Itoa(rank)},
			Argv:   []string{"/bin/sh", "-c", `echo "$SLURMD_NODENAME rank=$METASCHED_RANK secret=$METASCHED_AGENT_SECRET"; exit 3`},
			Stdout: &out, Stderr: &errOut})
		if err != nil || code != 3 {
			t.Fatalf("run on %s: exit %d, %v: %s", node, code, err, errOut.String())
		}
		if got, want := strings.TrimSpace(out.String()), node+" rank="+strconv.Itoa(rank)+" secret="; got != want {
			t.Errorf("run on %s printed %q, want %q", node, got, want)
		}
	}
	if err := c.Release(ctx, alloc.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the allocation released", func() (bool, string) {
		j, ok := jobByID(t, c, alloc.ID)
		return !ok || !j.Active(), j.State
	})
	// A step in it now: srun's own error, the allocation gone, not an
	// exit status of the program's.
	var errOut bytes.Buffer
	if code, err := c.Run(ctx, alloc.ID, slurm.Command{Node: "n1", Argv: []string{"/bin/true"}, Stderr: &errOut}); !errors.Is(err, slurm.ErrNoAllocation) {
		t.Errorf("a step in a released allocation: exit %d, %v (stderr %q), want ErrNoAllocation", code, err, errOut.String())
	}

	// Slurm's own job on n1, writing its PID; n2 moves to interactive.
	// Its sleep has a length of its own, to find it among the processes.
	sleep := strconv.Itoa(600 + os.Getpid()%1000)
	user := sbatch(t, c, "--partition=batch", "--nodelist=n1", "--job-name=users-own", "--output=/dev/null",
		"--wrap", "exec sleep "+sleep)
	waitFor(t, "Slurm's own job running", func() (bool, string) {
		j, _ := jobByID(t, c, user)
		return j.State == "RUNNING" && len(slurmtest.Running(sleep)) == 1, j.State
	})
	want := map[string][]string{"batch": {"n1", "n2"}, "interactive": {"n3"}}
	start = time.Now()
	if err := c.MoveNode(ctx, slurm.Move{Node: "n2", From: "batch", To: "interactive", Timeout: 30 * time.Second}, want); err != nil {
		t.Fatal(err)
	}
	t.Logf("n2 moved from batch to interactive in %s", time.Since(start).Round(time.Millisecond))
	wantAfter := map[string][]string{"batch": {"n1"}, "interactive": {"n2", "n3"}}
	check := func(when string) { t.Helper(); checkMembers(t, c, wantAfter, when) }
	check("after the move")
	for p, w := range wantAfter {
		if !slices.Equal(slices.Sorted(slices.Values(want[p])), w) {
			t.Errorf("the membership held for %s is %v after the move, want %v", p, want[p], w)
		}
	}
	if j, _ := jobByID(t, c, user); j.State != "RUNNING" || !slices.Equal(j.Nodes, []string{"n1"}) {
		t.Errorf("Slurm's own job after the move: %+v", j)
	}
	nodes, _ = c.Nodes(ctx)
	for _, n := range nodes {
		if n.Name == "n2" && (n.Drain() || n.State != "idle") {
			t.Errorf("n2 after the move: %+v, want idle, resumed", n)
		}
	}

	// n1 is busy with Slurm's own job: the move is cancelled at its
	// timeout, the job untouched and n1 back in service in batch.
	err = c.MoveNode(ctx, slurm.Move{Node: "n1", From: "batch", To: "interactive", Timeout: time.Second}, want)
	if !errors.Is(err, slurm.ErrStillBusy) {
		t.Fatalf("moving busy n1: %v, want ErrStillBusy", err)
	}
	check("after the cancelled move")
	if j, _ := jobByID(t, c, user); j.State != "RUNNING" {
		t.Errorf("Slurm's own job after the cancelled move: %+v", j)
	}
	nodes, _ = c.Nodes(ctx)
	for _, n := range nodes {
		if n.Name == "n1" && n.Drain() {
			t.Errorf("n1 still drained after the cancelled move: %+v", n)
		}
	}

	// Slurm forgets run-time partition changes at a reconfigure and at a
	// plain restart; -R keeps them; Reconcile puts them back.
	reconcile := func(when string, wantChanged bool) {
		t.Helper()
		changed, err := c.Reconcile(ctx, want)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if wantChanged != (len(changed) > 0) {
			t.Errorf("%s: reconcile changed %v", when, changed)
		}
		check(when)
	}
	reconcile("nothing lost", false)
	cmd := exec.Command(c.Client("scontrol"), "reconfigure")
	cmd.Env = []string{"SLURM_CONF=" + c.Conf}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scontrol reconfigure: %v\n%s", err, out)
	}
	waitFor(t, "the reconfigure to drop the move", func() (bool, string) {
		got := members(t, c)
		return slices.Contains(got["batch"], "n2"), "n2 not back in batch"
	})
	reconcile("after scontrol reconfigure", true)
	if err := c.RestartController(ctx, true); err != nil {
		t.Fatal(err)
	}
	reconcile("after a restart with -R", false)
	if err := c.RestartController(ctx, false); err != nil {
		t.Fatal(err)
	}
	reconcile("after a plain restart", true)
	if j, _ := jobByID(t, c, user); j.State != "RUNNING" {
		t.Errorf("Slurm's own job after the restarts: %+v", j)
	}

	// Nothing left: the daemons and the user job's process.
	pids := c.PIDs()
	if len(pids) != 5 {
		t.Errorf("%d daemons running before the stop, want munged, slurmctld and 3 slurmds", len(pids))
	}
	c.Stop()
	if left := slurmtest.Running(sleep); len(left) > 0 {
		t.Errorf("Slurm's own job's process (PIDs %v) still runs after Stop", left)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil || !errors.Is(err, syscall.ESRCH) {
			if b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); !strings.Contains(string(b), ") Z ") {
				t.Errorf("PID %d still runs after Stop: %s", pid, b)
			}
		}
	}
}

// A step that leaves a process behind (an orphan of its shell, killed
// when the step ends) does not drain its node: the namespace's first
// process reaps it, as a node's init does.
func TestStepOrphansReaped(t *testing.T) {
	t.Parallel()
	c := slurmtest.StartT(t, slurmtest.Spec{Nodes: []slurmtest.NodeSpec{{Name: "n1"}},
		Partitions: []slurmtest.PartitionSpec{{Name: "batch", Nodes: []string{"n1"}, Default: true}}})
	ctx := t.Context()
	alloc, err := c.Allocate(ctx, slurm.AllocSpec{Job: "j", Partition: "batch", Nodes: []string{"n1"}, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if code, err := c.Run(ctx, alloc.ID, slurm.Command{Node: "n1", Argv: []string{"/bin/sh", "-c", "(sleep 30) </dev/null >/dev/null 2>&1 & exit 0"}}); err != nil || code != 0 {
			t.Fatalf("run: exit %d, %v", code, err)
		}
	}
	if err := c.Release(ctx, alloc.ID); err != nil {
		t.Fatal(err)
	}
	// The test cluster's UnkillableStepTimeout is 5 s: a node whose step
	// left a process Slurm cannot see gone is drained by then.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		nodes, err := c.Nodes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if nodes[0].Drain() {
			t.Fatalf("n1 drained: %s", nodes[0].Reason)
		}
		time.Sleep(time.Second)
	}
}
