package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
)

// twoDaemons starts two private libvirtd daemons (stopped by PID at the
// end of the test, also when it fails).
func twoDaemons(t *testing.T) (a, b *libvirtdtest.Daemon) {
	t.Helper()
	return twoDaemonsWith(t, libvirtdtest.Options{}, libvirtdtest.Options{})
}

// twoDaemonsWith is twoDaemons with the options of each daemon.
func twoDaemonsWith(t *testing.T, oa, ob libvirtdtest.Options) (a, b *libvirtdtest.Daemon) {
	t.Helper()
	libvirtdtest.SkipShort(t)
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	ds := make([]*libvirtdtest.Daemon, 2)
	errs := make([]error, 2)
	for i, o := range []libvirtdtest.Options{oa, ob} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds[i], errs[i] = libvirtdtest.Start(context.Background(), o)
		}()
	}
	wg.Wait()
	for i, d := range ds {
		if d != nil {
			t.Cleanup(func() {
				if err := d.Stop(); err != nil {
					t.Errorf("stop daemon %d: %v", i, err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ds[0], ds[1]
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

// A QEMU (TCG) guest through the agent API on two real libvirtd daemons:
// created, vCPU hot-plugged, memory hot-plugged as a DIMM, refused where
// QEMU cannot (vCPU unplug, a balloon without a guest driver), live-migrated
// to the other daemon, and destroyed.
func TestAgentQEMULiveMigration(t *testing.T) {
	ctx := context.Background()
	da, db := twoDaemons(t)
	c, _ := migrationAgent(t, da, db, false)

	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range inv.Hosts {
		if h.State != hp.HostReady || h.CPUs < 1 || len(h.VMs) != 0 {
			t.Fatalf("host before = %+v", h)
		}
	}
	vm, err := c.Create(ctx, hp.VMSpec{Name: "guest-1", Host: "qa", Job: "job-1", VCPUs: 1, MaxVCPUs: 4, MemoryMiB: 128, MaxMemoryMiB: 256})
	if err != nil {
		t.Fatal(err)
	}
	if vm.State != hp.StateRunning || vm.Host != "qa" {
		t.Fatalf("created %+v", vm)
	}
	pids, err := da.GuestPIDs()
	if err != nil || !alive(pids["guest-1"]) {
		t.Fatalf("guest pids on daemon a = %v, %v: no running qemu for guest-1", pids, err)
	}
	srcPID := pids["guest-1"]

	// vCPU hot-plug works; unplug does not (qemu64), and changes nothing.
	if vm, err = c.Resize(ctx, "guest-1", hp.Resize{VCPUs: 2}); err != nil || vm.VCPUs != 2 {
		t.Fatalf("hot-plug a vcpu: %+v, %v", vm, err)
	}
	if _, err = c.Resize(ctx, "guest-1", hp.Resize{VCPUs: 1}); !errors.Is(err, hp.ErrUnsupported) {
		t.Errorf("vcpu unplug: err = %v, want ErrUnsupported", err)
	}
	// The balloon without a guest driver does not take: ErrUnsupported.
	if _, err = c.Resize(ctx, "guest-1", hp.Resize{MemoryMiB: 100}); !errors.Is(err, hp.ErrUnsupported) || !strings.Contains(err.Error(), "balloon") {
		t.Errorf("balloon shrink: err = %v, want ErrUnsupported about the balloon", err)
	}
	// Growing memory is a DIMM hot-plug.
	if vm, err = c.Resize(ctx, "guest-1", hp.Resize{MemoryMiB: 192}); err != nil || vm.MemoryMiB != 192 {
		t.Errorf("dimm hot-plug to 192 MiB: %+v, %v", vm, err)
	}
	if vm, err = c.VM(ctx, "guest-1"); err != nil || vm.VCPUs != 2 || vm.MemoryMiB != 192 {
		t.Errorf("after the resizes: %+v, %v; want 2 vcpus and 192 MiB", vm, err)
	}

	// Live migration to the other daemon.
	m, err := c.Migrate(ctx, "guest-1", "qb")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("live migration: %.2f s, downtime %.0f ms, %.1f MiB over %s", m.Seconds, m.DowntimeMs, m.DataMiB, m.URI)
	if !m.Live || m.From != "qa" || m.To != "qb" || !strings.HasPrefix(m.URI, "tcp://127.0.0.1:") {
		t.Errorf("migration = %+v", m)
	}
	if m.VM.Host != "qb" || m.VM.State != hp.StateRunning || m.VM.VCPUs != 2 || m.VM.MemoryMiB != 192 {
		t.Errorf("vm after the migration = %+v", m.VM)
	}
	inv, err = c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(inv.Hosts[0].VMs); n != 0 {
		t.Errorf("source host still lists %d vms: %+v", n, inv.Hosts[0].VMs)
	}
	if len(inv.Hosts[1].VMs) != 1 || inv.Hosts[1].VMs[0].State != hp.StateRunning {
		t.Errorf("destination host vms = %+v", inv.Hosts[1].VMs)
	}
	if alive(srcPID) {
		t.Errorf("the source qemu (pid %d) still runs", srcPID)
	}
	pids, err = db.GuestPIDs()
	if err != nil {
		t.Fatal(err)
	}
	dstPID := pids["guest-1"]
	if !alive(dstPID) {
		t.Errorf("no qemu for guest-1 on daemon b: %v", pids)
	}
	pa, err := da.GuestPIDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(pa) != 0 {
		t.Errorf("daemon a still has guests %v", pa)
	}

	if err := c.Destroy(ctx, "guest-1"); err != nil {
		t.Fatal(err)
	}
	if alive(dstPID) {
		t.Errorf("qemu pid %d still runs after destroy", dstPID)
	}
	inv, err = c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range inv.Hosts {
		if len(h.VMs) != 0 {
			t.Errorf("host %s still lists %+v", h.Name, h.VMs)
		}
	}
}
