package gramvm_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/selection"
)

// hosts are n hosts of a site, all ready in pool, with room.
func hosts(site, pool string, n int) []gramvm.Host {
	var out []gramvm.Host
	for i := range n {
		out = append(out, gramvm.Host{Site: site, Name: fmt.Sprintf("%s-%d", site, i), Pool: pool, Ready: true,
			CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4, FreeMemoryMiB: 8192})
	}
	return out
}

func TestFreeHosts(t *testing.T) {
	a := hosts("a", "render", 4)
	a[1].Pool = "batch"
	a[2].Ready = false // being switched
	a[3].FreeVCPUs = 1
	b := hosts("b", "render", 2)
	b[0].FreeMemoryMiB = 100
	got := gramvm.FreeHosts(slices.Concat(a, b), "render", selection.VM{VCPUs: 2, MemoryMiB: 1024})
	want := map[string][]string{"a": {"a-0"}, "b": {"b-1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHostCapacitiesAndJobVMs(t *testing.T) {
	hs := hosts("far", "render", 2)
	hs[1].VMs = []gramvm.HostVM{{Name: "a", Job: "j1", VCPUs: 2, MemoryMiB: 512}, {Name: "b", Job: "j2", VCPUs: 1, MemoryMiB: 256}}
	hs[1].FreeVCPUs, hs[1].FreeMemoryMiB = 1, 7424
	want := []gramvm.HostCapacity{
		{Site: "far", Host: "far-0", CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 4, FreeMemoryMiB: 8192},
		{Site: "far", Host: "far-1", CPUs: 4, MemoryMiB: 8192, FreeVCPUs: 1, FreeMemoryMiB: 7424},
	}
	if diff := cmp.Diff(want, gramvm.HostCapacities(hs)); diff != "" {
		t.Errorf("capacities (-want +got):\n%s", diff)
	}
	wantVMs := []gramvm.TunableVM{{Name: "a", Site: "far", Host: "far-1", VCPUs: 2, MemoryMiB: 512}}
	if diff := cmp.Diff(wantVMs, gramvm.JobVMs(hs, "j1")); diff != "" {
		t.Errorf("VMs (-want +got):\n%s", diff)
	}
}
