package hypervisorproxy_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/sim"
)

// TestSimulatedSite runs the agent over simulated hosts, as a site file
// declares them (sim:///NAME URIs, one with delays): the agent's own code
// path, with no libvirt. A VM is created, resized, live-migrated (the test
// driver cannot), the host switched to another pool once empty, and the
// VM destroyed; the inventory follows every step. A second agent on the
// same data directory, with the simulated hosts lost (a new process),
// gives the hosts back the VMs of its record, as it does on the test
// driver.
func TestSimulatedSite(t *testing.T) {
	dir := t.TempDir()
	site := `site: lab
token_file: token
insecure_http: true
hosts:
  - {name: s1, uri: "sim:///s1?cpus=8&memory_mib=16384", pool: render}
  - {name: s2, uri: "sim:///s2?cpus=8&memory_mib=16384&migrate=10ms", pool: render}
  - {name: s3, uri: "sim:///s3?cpus=4&memory_mib=8192", pool: sim}
`
	for name, data := range map[string]string{"token": testToken + "\n", "site.yaml": site} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	st, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(site))
	if err != nil {
		t.Fatal(err)
	}
	st.DataDir = filepath.Join(dir, "data")
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	h := serveAgent(t, hp.Config{Site: st, Token: testToken, Connect: sim.Connector(nil), Logger: log})
	c, ctx := h.client, context.Background()

	vm, err := c.Create(ctx, hp.VMSpec{Name: "j-1-m", Host: "s1", Job: "j-1", VCPUs: 2, MemoryMiB: 2048, MaxVCPUs: 4, MaxMemoryMiB: 4096})
	if err != nil || vm.Host != "s1" || vm.Pool != "render" || vm.State != hp.StateRunning {
		t.Fatalf("create: %+v, %v", vm, err)
	}
	if vm, err = c.Resize(ctx, "j-1-m", hp.Resize{VCPUs: 4, MemoryMiB: 4096}); err != nil || vm.VCPUs != 4 || vm.MemoryMiB != 4096 {
		t.Fatalf("resize: %+v, %v", vm, err)
	}
	m, err := c.Migrate(ctx, "j-1-m", "s2")
	if err != nil || !m.Live || m.From != "s1" || m.To != "s2" || m.VM.Host != "s2" {
		t.Fatalf("migrate: %+v, %v", m, err)
	}
	if diff := cmp.Diff([]hostView{
		{Name: "s1", Pool: "render", State: hp.HostReady, FreeVCPUs: 8, FreeMiB: 16384, VMs: []string{}},
		{Name: "s2", Pool: "render", State: hp.HostReady, FreeVCPUs: 4, FreeMiB: 12288, VMs: []string{"j-1-m"}},
		{Name: "s3", Pool: "sim", State: hp.HostReady, FreeVCPUs: 4, FreeMiB: 8192, VMs: []string{}},
	}, view(t, c)); diff != "" {
		t.Errorf("inventory after the move (-want +got):\n%s", diff)
	}
	if r, err := c.Reconfigure(ctx, "s1", hp.Reconfigure{Pool: "sim", ExpectPool: "render"}); err != nil || r.Host.Pool != "sim" {
		t.Fatalf("reconfigure s1: %+v, %v", r, err)
	}

	// The agent restarts: the simulated hosts are new and empty, and the
	// record gives s2 its VM back.
	h.stop()
	h = serveAgent(t, hp.Config{Site: st, Token: testToken, Connect: sim.Connector(nil), Logger: log})
	c = h.client
	if diff := cmp.Diff([]hostView{
		{Name: "s1", Pool: "sim", State: hp.HostReady, FreeVCPUs: 8, FreeMiB: 16384, VMs: []string{}},
		{Name: "s2", Pool: "render", State: hp.HostReady, FreeVCPUs: 4, FreeMiB: 12288, VMs: []string{"j-1-m"}},
		{Name: "s3", Pool: "sim", State: hp.HostReady, FreeVCPUs: 4, FreeMiB: 8192, VMs: []string{}},
	}, view(t, c)); diff != "" {
		t.Errorf("inventory after a restart (-want +got):\n%s", diff)
	}
	if err := c.Destroy(ctx, "j-1-m"); err != nil {
		t.Fatal(err)
	}
	if vms := view(t, c)[1].VMs; len(vms) != 0 {
		t.Errorf("s2 after the destroy: %v", vms)
	}
}
