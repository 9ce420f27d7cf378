package slurm_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/slurm"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
)

// hostsOf is the inventory's hosts by name.
func hostsOf(t *testing.T, a *hp.Agent) map[string]hp.Host {
	t.Helper()
	inv, err := a.Inventory(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]hp.Host{}
	for _, h := range inv.Hosts {
		out[h.Name] = h
	}
	return out
}

// An agent serving a Slurm site: the nodes are its hosts, in the pools
// of their partitions; a VM is an allocation of its CPUs on the node,
// reached at the node's address; what Slurm's own users run is counted
// as taken and never touched; a pool switch moves the node between
// partitions, and is refused (the node left where it was) while Slurm's
// own job runs there; the agent puts back a move Slurm forgot at a
// reconfigure; and a controller out of reach makes the hosts unreachable.
func TestSlurmSite(t *testing.T) {
	t.Parallel()
	c := slurmtest.StartT(t, slurmtest.Spec{
		Nodes: []slurmtest.NodeSpec{{Name: "n1", CPUs: 2}, {Name: "n2", CPUs: 2}, {Name: "n3", CPUs: 2}},
		Partitions: []slurmtest.PartitionSpec{{Name: "batch", Nodes: []string{"n1", "n2"}, Default: true},
			{Name: "gfx", Nodes: []string{"n3"}}},
	})
	a := c.StartAgent(t, slurmtest.AgentOptions{Site: "hpc", Partitions: map[string]string{"farm": "batch", "render": "gfx"},
		SwitchTimeout: 2 * time.Second})
	ctx := t.Context()

	hosts := hostsOf(t, a)
	for name, want := range map[string]string{"n1": "farm", "n2": "farm", "n3": "render"} {
		h := hosts[name]
		if h.Pool != want || h.State != hp.HostReady || h.CPUs != 2 || h.FreeVCPUs != 2 || len(h.VMs) != 0 {
			t.Errorf("host %s: %+v, want ready in pool %s with 2 CPUs free", name, h, want)
		}
	}

	// A VM of one CPU on n1: an allocation of metasched's.
	vm, err := a.CreateVM(ctx, hp.VMSpec{Name: "j1-a1-m", Host: "n1", Job: "j1", VCPUs: 1, MemoryMiB: 200, WalltimeSeconds: 90})
	if err != nil {
		t.Fatal(err)
	}
	if vm.Address != "127.0.0.1/32" || vm.Pool != "farm" || vm.Job != "j1" || vm.VCPUs != 1 {
		t.Errorf("vm %+v: want j1's, in farm, 1 vCPU, at 127.0.0.1/32", vm)
	}
	jobs, err := c.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 || jobs[0].Name != slurm.AllocName("j1-a1-m") || !slices.Equal(jobs[0].Nodes, []string{"n1"}) || jobs[0].CPUs != 1 ||
		jobs[0].TimeLimitMinutes != 3 {
		t.Errorf("Slurm's jobs: %+v, want metasched's allocation of 1 CPU on n1 for 3 minutes (the walltime of 90 s and a minute)", jobs)
	}
	if h := hostsOf(t, a)["n1"]; h.FreeVCPUs != 1 || len(h.VMs) != 1 || !h.VMs[0].Managed || h.VMs[0].State != hp.StateRunning {
		t.Errorf("n1 with the vm: %+v", h)
	}

	// Slurm's own job on n2 takes its CPUs: counted, not metasched's.
	user := sbatch(t, c, "--partition=batch", "--nodelist=n2", "--cpus-per-task=2", "--job-name=users-own", "--output=/dev/null",
		"--wrap", "exec sleep 600")
	waitFor(t, "Slurm's own job running", func() (bool, string) {
		j, _ := jobByID(t, c, user)
		return j.State == "RUNNING", j.State
	})
	time.Sleep(1100 * time.Millisecond) // past the agent's last look at the cluster
	h2 := hostsOf(t, a)["n2"]
	if h2.FreeVCPUs != 0 || len(h2.VMs) != 1 || h2.VMs[0].Name != slurm.OwnJobs || h2.VMs[0].Managed || h2.VMs[0].VCPUs != 2 {
		t.Errorf("n2 running Slurm's own job: %+v, want its 2 CPUs taken by %s, not managed", h2, slurm.OwnJobs)
	}
	if err := a.DestroyVM(ctx, slurm.OwnJobs); err == nil {
		t.Errorf("destroying %s: no error", slurm.OwnJobs)
	}

	// A switch of n2, busy with Slurm's own job: refused at the
	// timeout, n2 left in farm and its job running.
	_, err = a.ReconfigureHost(ctx, "n2", hp.Reconfigure{Pool: "render"})
	if !errors.Is(err, hp.ErrBusy) {
		t.Fatalf("switching busy n2: %v, want ErrBusy", err)
	}
	if j, _ := jobByID(t, c, user); j.State != "RUNNING" {
		t.Errorf("Slurm's own job after the refused switch: %+v", j)
	}
	if got := members(t, c); !slices.Contains(got["batch"], "n2") || slices.Contains(got["gfx"], "n2") {
		t.Errorf("partitions after the refused switch: %v", got)
	}
	if h := hostsOf(t, a)["n2"]; h.Pool != "farm" || h.State != hp.HostReady {
		t.Errorf("n2 after the refused switch: %+v", h)
	}

	// n1's switch, its VM released: n1 moves to gfx.
	start := time.Now()
	r, err := a.ReconfigureHost(ctx, "n1", hp.Reconfigure{Pool: "render", Released: []string{"j1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("n1 switched from farm to render in %s", time.Since(start).Round(time.Millisecond))
	if r.From != "farm" || r.Host.Pool != "render" || !slices.Equal(r.Destroyed, []string{"j1-a1-m"}) {
		t.Errorf("reconfigured %+v", r)
	}
	want := map[string][]string{"batch": {"n2"}, "gfx": {"n1", "n3"}}
	check := func(when string) { t.Helper(); checkMembers(t, c, want, when) }
	check("after the switch")
	waitFor(t, "the vm's allocation released", func() (bool, string) {
		jobs, _ := c.Jobs(ctx)
		return !slices.ContainsFunc(jobs, func(j slurm.Job) bool { _, own := j.Own(); return own && j.Active() }), fmt.Sprint(jobs)
	})

	// Slurm forgets the move at a reconfigure; the agent's next look at
	// its hosts puts it back.
	cmd := exec.Command(c.Client("scontrol"), "reconfigure")
	cmd.Env = []string{"SLURM_CONF=" + c.Conf}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scontrol reconfigure: %v\n%s", err, out)
	}
	waitFor(t, "the reconfigure to drop the move", func() (bool, string) {
		return slices.Contains(members(t, c)["batch"], "n1"), "n1 not back in batch"
	})
	waitFor(t, "the agent to put n1 back", func() (bool, string) {
		hostsOf(t, a)
		got := members(t, c)
		return slices.Contains(got["gfx"], "n1") && !slices.Contains(got["batch"], "n1"), fmt.Sprint(got)
	})
	check("after the agent put it back")
	if h := hostsOf(t, a)["n1"]; h.Pool != "render" {
		t.Errorf("n1 after the reconfigure: %+v", h)
	}

	// The controller out of reach: every host unreachable; back: ready.
	c.StopController()
	time.Sleep(1100 * time.Millisecond)
	for name, h := range hostsOf(t, a) {
		if h.State != hp.HostUnreachable || !strings.Contains(h.Error, "slurm") {
			t.Errorf("host %s with the controller down: %+v", name, h)
		}
	}
	if err := c.RestartController(ctx, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the hosts back", func() (bool, string) {
		for _, h := range hostsOf(t, a) {
			if h.State != hp.HostReady {
				return false, fmt.Sprintf("%s %s %s", h.Name, h.State, h.Error)
			}
		}
		return true, ""
	})
	if j, _ := jobByID(t, c, user); j.State != "RUNNING" {
		t.Errorf("Slurm's own job at the end: %+v", j)
	}
}

// The agent's start reads the cluster once: a munge socket that refuses,
// a controller that is down and a partition Slurm does not have are each
// an error that says so.
func TestCheck(t *testing.T) {
	t.Parallel()
	c := slurmtest.StartT(t, slurmtest.Spec{Nodes: []slurmtest.NodeSpec{{Name: "n1"}},
		Partitions: []slurmtest.PartitionSpec{{Name: "batch", Nodes: []string{"n1"}, Default: true}}})
	ctx := t.Context()
	site := func(conf string, parts map[string]string) *hp.SlurmSite {
		return &hp.SlurmSite{Conf: conf, Bin: c.Cluster.Bin, Partitions: parts}
	}
	if err := slurm.Check(ctx, site(c.Conf, map[string]string{"farm": "batch"})); err != nil {
		t.Fatalf("a cluster that answers: %v", err)
	}
	err := slurm.Check(ctx, site(c.Conf, map[string]string{"farm": "nope"}))
	if err == nil || !strings.Contains(err.Error(), `partitions.farm: partition "nope"`) {
		t.Errorf("a partition Slurm does not have: %v", err)
	}
	conf, err := os.ReadFile(c.Conf)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "slurm.conf")
	re := regexp.MustCompile(`(?m)^AuthInfo=socket=.*$`)
	if err := os.WriteFile(bad, re.ReplaceAll(conf, []byte("AuthInfo=socket="+filepath.Join(t.TempDir(), "no-munge"))), 0o644); err != nil {
		t.Fatal(err)
	}
	err = slurm.Check(ctx, site(bad, map[string]string{"farm": "batch"}))
	if err == nil || !strings.Contains(err.Error(), "cannot be read") || !strings.Contains(strings.ToLower(err.Error()), "munge") {
		t.Errorf("munge out of reach: %v, want an error naming munge", err)
	}
	c.StopController()
	err = slurm.Check(ctx, site(c.Conf, map[string]string{"farm": "batch"}))
	if err == nil || !strings.Contains(err.Error(), "cannot be read") {
		t.Errorf("the controller down: %v", err)
	}
}
