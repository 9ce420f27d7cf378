package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/gramvm/taskfarm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/lab"
)

// The lab of BenchmarkTaskFarmVMs: a slow site (two hosts, VMs at 1/8 of
// a core, a 2 Mbit/s uplink) and a fast one (one host, VMs at 1/4 of a
// core, 8 Mbit/s), as the real grid's (metasched experiment realgrid).
var benchSites = []lab.Site{
	{Name: "slow", Hosts: 2, UplinkMbit: 2, CPUQuota: 0.125, Perf: 3e7, LANMbps: 50, Cores: 1, MemoryMiB: 1024},
	{Name: "fast", Hosts: 1, UplinkMbit: 8, CPUQuota: 0.25, Perf: 6e7, LANMbps: 100, Cores: 1, MemoryMiB: 1024},
}

// BenchmarkTaskFarmVMs is the task farm's throughput in booted guests
// against the prediction the daemon's calibration makes of it: the daemon
// calibrates the lab (the kernel's rate in a VM of each site under its
// quota, the slow site's LAN and the link, VM to VM), then the task farm
// runs its master in one VM and one worker VM elsewhere:
//
//   - vm/SITE: a compute-bound run (64 bytes a task, 2 s of the site's
//     calibrated rate), one worker VM of one vCPU on SITE; the model's
//     rate is perf/task_ops tasks/s;
//   - link/lan-slow and link/slow-fast: a link-bound run (a task's
//     operations take a few milliseconds), 512 KiB a task on the slow
//     site's LAN, 128 KiB a task across the link; the model's rate is
//     the calibrated Mbit/s over the task's bits.
//
// It reports tasks/s (the master's own wall time), the model's
// predicted-tasks/s and their ratio measured/predicted (1: the plan's
// prediction holds).
func BenchmarkTaskFarmVMs(b *testing.B) {
	l := startGuestLab(b, lab.Spec{
		Sites: benchSites,
		Pools: []lab.Pool{{Name: "farm", VCPUs: 1, MemoryMiB: 128, Image: "guest"}},
		Serve: "calibration: {bench_seconds: 5, probe_bytes: 1048576}\n",
	}, nil)
	ctx := context.Background()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	cal, err := l.WaitCalibrated(wctx, b.Logf)
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	figure := func(key string) float64 {
		for _, f := range cal.Figures {
			if f.Key == key {
				return f.Value
			}
		}
		b.Fatalf("the calibration has no %s: %+v", key, cal.Figures)
		return 0
	}
	// One VM per host, made by the agents alone: the daemon leaves VMs of
	// no job alone, and calibrates again only after max_age (an hour).
	vms := map[string]benchVM{}
	for _, s := range benchSites {
		for i := 1; i <= s.Hosts; i++ {
			host := fmt.Sprintf("%s-%d", s.Name, i)
			v := benchVM{name: "bench-" + host, agent: l.Agents[s.Name]}
			vm, err := v.agent.Client.Create(ctx, hp.VMSpec{Name: v.name, Host: host, VCPUs: 1, MemoryMiB: 128, Image: "guest"})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = v.agent.Client.Destroy(context.Background(), v.name) }) // best effort: the lab's own cleanup removes what is left
			a, err := netip.ParsePrefix(vm.Address)
			if err != nil {
				b.Fatalf("VM %s: address %q: %v", v.name, vm.Address, err)
			}
			v.address = a.Addr().String()
			vms[host] = v
		}
	}

	slowPerf, fastPerf := figure("perf/slow/guest"), figure("perf/fast/guest")
	for _, c := range []struct {
		name, master, worker string
		tasks                int
		ops, bytes           float64
		predicted            float64 // tasks/s
	}{
		{"vm/slow", "slow-2", "slow-1", 10, 2 * slowPerf, 64, 0.5},
		{"vm/fast", "slow-2", "fast-1", 10, 2 * fastPerf, 64, 0.5},
		{"link/lan-slow", "slow-2", "slow-1", 40, 1e5, 512 << 10, figure("lan/slow") * 1e6 / 8 / (512 << 10)},
		{"link/slow-fast", "fast-1", "slow-1", 20, 1e5, 128 << 10, figure("link/slow/fast") * 1e6 / 8 / (128 << 10)},
	} {
		b.Run(c.name, func(b *testing.B) {
			var tasks int
			var wall float64
			for b.Loop() {
				s := benchFarm(b, vms[c.master], vms[c.worker], c.tasks, c.ops, c.bytes)
				tasks += s.Done
				wall += s.WallSeconds
			}
			got := float64(tasks) / wall
			b.ReportMetric(got, "tasks/s")
			b.ReportMetric(c.predicted, "predicted-tasks/s")
			b.ReportMetric(got/c.predicted, "measured/predicted")
		})
	}
}

// benchVM is a VM of BenchmarkTaskFarmVMs.
type benchVM struct {
	name, address string
	agent         *lab.Agent
}

// benchFarm runs one task farm, its master in one VM and its worker in
// another, and returns the master's summary once every task is done.
func benchFarm(b *testing.B, master, worker benchVM, tasks int, ops, bytes float64) *taskfarm.Summary {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	common := []string{"run", "--task-ops", strconv.FormatFloat(ops, 'f', 0, 64), "--task-bytes", strconv.FormatFloat(bytes, 'f', 0, 64)}
	out := make(chan result, 1)
	go func() {
		o, err := guestProgram(ctx, master, slices.Concat(common, []string{"--role", "master", "--tasks", strconv.Itoa(tasks), "--hostfile", "/dev/null"})...)
		out <- result{o, err}
	}()
	if _, err := guestProgram(ctx, worker, slices.Concat(common, []string{"--role", "worker", "--master", master.address})...); err != nil {
		b.Fatalf("worker: %v", err)
	}
	r := <-out
	if r.err != nil {
		b.Fatalf("master: %v", r.err)
	}
	for line := range strings.SplitSeq(string(r.out), "\n") {
		if js, ok := strings.CutPrefix(line, taskfarm.SummaryLinePrefix); ok {
			s, err := taskfarm.ParseSummary([]byte(js))
			if err != nil {
				b.Fatal(err)
			}
			if s.Done != tasks || s.Duplicates != 0 {
				b.Fatalf("the master's summary: %d of %d tasks done, %d twice", s.Done, tasks, s.Duplicates)
			}
			return s
		}
	}
	b.Fatalf("the master printed no summary: %q", r.out)
	return nil
}

type result struct {
	out []byte
	err error
}

// guestProgram runs the task farm in a VM through its site's agent and
// returns its standard output once it exited 0.
func guestProgram(ctx context.Context, v benchVM, args ...string) ([]byte, error) {
	out, err := executor.RunProgram(ctx, v.agent.Client, v.name, executor.Program{Path: image.TaskFarmPath, Args: args, Poll: 500 * time.Millisecond})
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", strings.Join(args, " "), v.name, err)
	}
	return out, nil
}
