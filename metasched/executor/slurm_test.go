package executor_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/slurm/slurmtest"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/selection"
)

// The guest executor runs a job on allocations of a Slurm site's nodes
// as it does in VMs: a master and a worker, each on its node, with their
// roles, ranks and hostfile, the output of both in the log and the
// master's exit status the result; its files in each allocation's own
// directory on the node, the node's own (/etc/hosts) untouched; and a job
// cancelled stops its command on the nodes.
func TestGuestOnSlurmNodes(t *testing.T) {
	c := slurmtest.StartT(t, slurmtest.Spec{Nodes: []slurmtest.NodeSpec{{Name: "n1"}, {Name: "n2"}},
		Partitions: []slurmtest.PartitionSpec{{Name: "batch", Nodes: []string{"n1", "n2"}, Default: true}}})
	a := c.StartAgent(t, slurmtest.AgentOptions{Site: "hpc", Partitions: map[string]string{"farm": "batch"}})
	ctx := t.Context()
	hostsBefore, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	g, err := executor.NewGuest(testLogger(t), executor.GuestOptions{Poll: 100 * time.Millisecond,
		Agents: func(site string) (executor.GuestAgent, error) { return a, nil }})
	if err != nil {
		t.Fatal(err)
	}
	// run creates the job's allocations, as the daemon does, and runs
	// command in them.
	run := func(ctx context.Context, job string, command string, out *watchWriter) (executor.Result, error) {
		t.Helper()
		var vms []executor.VM
		for i, host := range []string{"n1", "n2"} {
			name := job + "-a1-w1"
			if i == 0 {
				name = job + "-a1-m"
			}
			vm, err := a.CreateVM(ctx, hp.VMSpec{Name: name, Host: host, Job: job, VCPUs: 1, MemoryMiB: 100})
			if err != nil {
				t.Fatal(err)
			}
			if vm.Kind != hp.KindSlurm || vm.Address == "" {
				t.Fatalf("vm %+v: want a Slurm allocation with an address", vm)
			}
			vms = append(vms, executor.VM{Name: name, Site: "hpc", Host: host, Master: i == 0, Address: vm.Address,
				VCPUs: vm.VCPUs, MemoryMiB: vm.MemoryMiB, Kind: vm.Kind})
		}
		t.Cleanup(func() {
			for _, vm := range vms {
				_ = a.DestroyVM(context.Background(), vm.Name)
			}
		})
		return g.Run(ctx, executor.Run{JobID: job, Job: &selection.Job{Name: "hello", Tasks: 2,
			Command: []string{"sh", "-c", command}}, VMs: vms, Dir: t.TempDir(), Attempt: 1, Output: out})
	}

	// An earlier daemon's job of the same VM name left its directory,
	// started and ended: the attempt starts afresh.
	stale := filepath.Join(executor.GuestNodeDir, "j1-a1-w1", "run")
	if err := os.MkdirAll(filepath.Join(stale, "started"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "exit"), []byte("143\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := newWatchWriter("")
	res, err := run(ctx, "j1", `echo "role=$METASCHED_ROLE rank=$METASCHED_RANK node=$SLURMD_NODENAME master=$METASCHED_MASTER"; `+
		`echo "hostfile=$METASCHED_HOSTFILE"; cat "$METASCHED_HOSTFILE"; pwd; [ "$METASCHED_ROLE" = master ] && exit 3; exit 0`, out)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 {
		t.Errorf("result %+v, want the master's exit status 3; log:\n%s", res, out.String())
	}
	log := out.String()
	hostfile := "127.0.0.1 slots=1 # name=j1-a1-m site=hpc role=master\n127.0.0.1 slots=1 # name=j1-a1-w1 site=hpc role=worker\n"
	for _, want := range []string{
		"j1-a1-m| role=master rank=0 node=n1 master=j1-a1-m\n",
		"j1-a1-w1| role=worker rank=1 node=n2 master=j1-a1-m\n",
		"j1-a1-m| hostfile=" + executor.GuestNodeDir + "/j1-a1-m/hostfile\n",
		"j1-a1-w1| " + strings.Split(hostfile, "\n")[1] + "\n",
		"j1-a1-m| " + executor.GuestNodeDir + "/j1-a1-m/work\n",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
	for _, vm := range []string{"j1-a1-m", "j1-a1-w1"} {
		if _, err := os.Stat(filepath.Join(executor.GuestNodeDir, vm)); !os.IsNotExist(err) {
			t.Errorf("%s's directory is left on its node: %v", vm, err)
		}
	}
	if after, _ := os.ReadFile("/etc/hosts"); !slices.Equal(after, hostsBefore) {
		t.Errorf("/etc/hosts changed:\n%s", after)
	}

	// Cancelled: the command on both nodes is stopped.
	long := newWatchWriter("j2-a1-w1| started")
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := run(cctx, "j2", `echo started; exec sleep 777`, long)
		done <- err
	}()
	select {
	case <-long.seen:
	case err := <-done:
		t.Fatalf("the long job ended: %v\n%s", err, long.String())
	}
	waitSleeps := func(want int) {
		t.Helper()
		var n int
		for range 600 {
			if n = len(slurmtest.Running("777")); n == want {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("%d processes of the job's sleep, want %d", n, want)
	}
	waitSleeps(2)
	cancel()
	if err := <-done; err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("the cancelled run: %v, want stopped", err)
	}
	waitSleeps(0)
	for _, vm := range []string{"j2-a1-m", "j2-a1-w1"} {
		if _, err := os.Stat(filepath.Join(executor.GuestNodeDir, vm)); !os.IsNotExist(err) {
			t.Errorf("%s's directory is left on its node after the cancel: %v", vm, err)
		}
	}
}
