package hypervisorproxy_test

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
)

// A booted guest resized live gets its new vCPU and memory online: its
// programs see two processors and 128 MiB more, without udev in the guest
// (the agent brings them online through the guest agent).
func TestResizeBootedGuest(t *testing.T) {
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, res := imageDaemon(t)
	c := bootAgent(t, d, filepath.Join(d.Dir(), "agent"), "render", res.Dir, goodBootTimeout)
	if _, err := c.Create(ctx, hp.VMSpec{Name: "grows", Host: "qa", VCPUs: 1, MaxVCPUs: 2, MemoryMiB: 256, MaxMemoryMiB: 384, Image: "render"}); err != nil {
		t.Fatal(err)
	}
	seen := func() (cpus, memKiB int) {
		st := guestRun(t, c, "grows", hp.GuestExec{Path: "/bin/sh", CaptureOutput: true,
			Args: []string{"-c", "grep -c ^processor /proc/cpuinfo; sed -n 's/^MemTotal: *\\([0-9]*\\) kB/\\1/p' /proc/meminfo"}})
		f := strings.Fields(string(st.Stdout))
		if len(f) != 2 {
			t.Fatalf("guest answered %q", st.Stdout)
		}
		var err error
		cpus, err = strconv.Atoi(f[0])
		if err != nil {
			t.Fatal(err)
		}
		memKiB, err = strconv.Atoi(f[1])
		if err != nil {
			t.Fatal(err)
		}
		return cpus, memKiB
	}
	cpus0, mem0 := seen()
	vm, err := c.Resize(ctx, "grows", hp.Resize{VCPUs: 2, MemoryMiB: 384})
	if err != nil {
		t.Fatal(err)
	}
	if vm.VCPUs != 2 || vm.MemoryMiB != 384 {
		t.Errorf("after the resize the vm is %+v", vm)
	}
	cpus1, mem1 := seen()
	t.Logf("the guest saw %d CPUs and %d KiB before, %d and %d after", cpus0, mem0, cpus1, mem1)
	if cpus0 != 1 || cpus1 != 2 {
		t.Errorf("online CPUs in the guest: %d before, %d after; want 1 and 2", cpus0, cpus1)
	}
	if grew := mem1 - mem0; grew < 120<<10 || grew > 136<<10 {
		t.Errorf("the guest's memory grew by %d KiB, want about 128 MiB", grew)
	}
	if err := c.Destroy(ctx, "grows"); err != nil {
		t.Fatal(err)
	}
	noDomains(t, d, c)
}
