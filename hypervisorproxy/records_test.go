package hypervisorproxy_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// The agent keeps a record of its VMs in data_dir; test hosts keep no
// state across restarts, so a restarted agent recreates its VMs.
func TestAgentRestartRestoresVMs(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := startAgent(t, dir, "data_dir: state\n")
	if _, err := h.client.Create(ctx, hp.VMSpec{Name: "keeper", Job: "j", VCPUs: 1, MaxVCPUs: 2, MemoryMiB: 512}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Resize(ctx, "keeper", hp.Resize{VCPUs: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.client.Reconfigure(ctx, "lab-1", hp.Reconfigure{Pool: "batch"}); err != nil {
		t.Fatal(err)
	}
	h.stop()

	h2 := startAgent(t, dir, "data_dir: state\n")
	got, err := h2.client.VM(ctx, "keeper")
	if err != nil {
		t.Fatal(err)
	}
	want := hp.VM{Name: "keeper", Host: "lab-0", Pool: "render", Job: "j", State: hp.StateRunning, VCPUs: 2, MaxVCPUs: 2, MemoryMiB: 512, MaxMemoryMiB: 512, Managed: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after a restart (-want +got):\n%s", diff)
	}
	inv, err := h2.client.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if inv.Hosts[1].Pool != "batch" {
		t.Errorf("pool of lab-1 after a restart = %q, want batch", inv.Hosts[1].Pool)
	}
}
