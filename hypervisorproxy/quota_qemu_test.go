package hypervisorproxy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// busyLoop counts rounds of a shell loop for the given seconds of the
// guest's clock and prints the count: the progress a vCPU makes.
const busyLoop = `end=$(( $(date +%%s) + %d )); n=0
while [ "$(date +%%s)" -lt "$end" ]; do
	i=0; while [ $i -lt 200 ]; do i=$((i+1)); done
	n=$((n+1))
done
echo $n`

// A site file's cpu_quota reaches the VMs of its QEMU hosts: a booted VM
// created with a quota of 0.25 has it in the inventory, and a busy loop
// in it makes at most about a quarter of the progress of the same loop
// run at the same time in a VM of the same host without a quota (the
// sanity bound is a factor of 2; the figures are logged). The host's two
// cores are shared with the rest of the machine, so the VM without a
// quota gets up to one core, less on a loaded machine.
func TestCPUQuotaBootedGuest(t *testing.T) {
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	d := libvirtdtest.StartT(t, libvirtdtest.Options{Root: true})
	if !d.CPUControl() {
		t.Fatal("the root daemon has no cpu cgroup controller (no cgroup v1 cpu and cpuacct hierarchies on this host): a CPU quota cannot hold")
	}
	res, err := image.Build(context.Background(), image.Options{Out: filepath.Join(d.Dir(), "images", "render"), TaskFarm: taskfarmtest.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Two agents of the one host: one site with a quota, one without.
	quota := bootAgent(t, d, filepath.Join(d.Dir(), "agent-quota"), "render", res.Dir, goodBootTimeout, "cpu_quota: 0.25\n")
	free := bootAgent(t, d, filepath.Join(d.Dir(), "agent-free"), "render", res.Dir, goodBootTimeout)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, a := range []struct {
		c    *client.Client
		name string
	}{{quota, "capped"}, {free, "uncapped"}} {
		wg.Go(func() {
			_, errs[i] = a.c.Create(ctx, hp.VMSpec{Name: a.name, Host: "qa", VCPUs: 1, MemoryMiB: 128, Image: "render"})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = quota.Destroy(ctx, "capped")  // best effort: gone already when the test got through
		_ = free.Destroy(ctx, "uncapped") // likewise
	})
	inv, err := quota.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Hosts[0].VCPUUnplug {
		t.Errorf("QEMU host %s: vcpu_unplug true, want false (QEMU cannot unplug its guests' vCPUs)", inv.Hosts[0].Name)
	}
	for _, c := range []struct {
		c    *client.Client
		vm   string
		want float64
	}{{quota, "capped", 0.25}, {free, "uncapped", 0}} {
		vm, err := c.c.VM(ctx, c.vm)
		if err != nil {
			t.Fatal(err)
		}
		if vm.CPUQuota != c.want {
			t.Errorf("vm %s: cpu_quota %g in the inventory, want %g", c.vm, vm.CPUQuota, c.want)
		}
	}

	const seconds = 12
	pids, err := d.GuestPIDs()
	if err != nil {
		t.Fatal(err)
	}
	cpu0 := map[string]float64{}
	for vm, pid := range pids {
		cpu0[vm] = cpuSeconds(t, pid)
	}
	start := time.Now()
	counts := make([]int, 2)
	for i, a := range []struct {
		c  *client.Client
		vm string
	}{{quota, "capped"}, {free, "uncapped"}} {
		wg.Go(func() {
			out, err := guestOutput(a.c, a.vm, fmt.Sprintf(busyLoop, seconds))
			if err == nil {
				counts[i], err = strconv.Atoi(strings.TrimSpace(out))
			}
			errs[i] = err
		})
	}
	wg.Wait()
	wall := time.Since(start).Seconds()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	share := map[string]float64{}
	for vm, pid := range pids {
		share[vm] = (cpuSeconds(t, pid) - cpu0[vm]) / wall
	}
	t.Logf("busy loop for %d s of guest time (%.1f s of the host's): %d rounds with cpu_quota 0.25, %d without (%.2f×); "+
		"the QEMU processes used %.2f and %.2f of a core", seconds, wall, counts[0], counts[1],
		float64(counts[1])/float64(max(counts[0], 1)), share["capped"], share["uncapped"])
	if counts[0]*2 > counts[1] {
		t.Errorf("the VM with a quota of a quarter core made %d rounds, the one without %d: want at most half", counts[0], counts[1])
	}
}

// guestOutput runs a shell command in vm and returns its standard output;
// a failure is an error, so that it can run in a goroutine.
func guestOutput(c *client.Client, vm, script string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), guestWait)
	defer cancel()
	p, err := c.GuestExec(ctx, vm, hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", script}, CaptureOutput: true})
	if err != nil {
		return "", fmt.Errorf("guest exec in %s: %w", vm, err)
	}
	for {
		st, err := c.GuestExecStatus(ctx, vm, p.PID)
		if err != nil {
			return "", fmt.Errorf("guest exec status in %s: %w", vm, err)
		}
		if st.Exited {
			if st.ExitCode != 0 {
				return "", fmt.Errorf("%s: exit %d: %s", vm, st.ExitCode, st.Stderr)
			}
			return string(st.Stdout), nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// cpuSeconds is the CPU time process pid has used (user and system).
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// Fields 14 and 15 of stat, utime and stime, in clock ticks (100 a
	// second on Linux).
	ut, err := strconv.ParseFloat(f[11], 64)
	if err != nil {
		t.Fatal(err)
	}
	st, err := strconv.ParseFloat(f[12], 64)
	if err != nil {
		t.Fatal(err)
	}
	return (ut + st) / 100
}
