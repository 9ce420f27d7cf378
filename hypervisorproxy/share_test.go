package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

// A host's share in the site file (cpus, memory_mib) is all the agent's
// VMs may take of it: the inventory reports the share, a VM beyond it is
// refused for capacity, and a share larger than the host makes the host
// unreachable with an error that names the field.
func TestHostShare(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	node, err := domxml.Node{CPUs: 8, MemoryMiB: 4096}.XML()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"part", "whole", "over"} {
		if err := os.WriteFile(filepath.Join(dir, h+".xml"), []byte(node), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(fmt.Sprintf(`site: lab
token_file: token
insecure_http: true
hosts:
  - {name: part, uri: "test://%[1]s/part.xml", pool: render, cpus: 2, memory_mib: 512}
  - {name: whole, uri: "test://%[1]s/whole.xml", pool: render}
  - {name: over, uri: "test://%[1]s/over.xml", pool: render, cpus: 1000}
`, dir)))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	ctx := context.Background()
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]hp.Host{}
	for _, h := range inv.Hosts {
		byName[h.Name] = h
	}
	if h := byName["part"]; h.CPUs != 2 || h.MemoryMiB != 512 || h.FreeVCPUs != 2 || h.FreeMemoryMiB != 512 || h.State != hp.HostReady {
		t.Errorf("part: %+v, want 2 CPUs and 512 MiB, all free", h)
	}
	if h := byName["whole"]; h.CPUs != 8 || h.MemoryMiB != 4096 || h.State != hp.HostReady {
		t.Errorf("whole: %+v, want all of the host: 8 CPUs, 4096 MiB", h)
	}
	over := byName["over"]
	if over.State != hp.HostUnreachable || !strings.Contains(over.Error, "cpus: the site file gives the VMs 1000 CPUs of host over, which has 8") {
		t.Errorf("over: %s %q, want unreachable for its cpus", over.State, over.Error)
	}
	for _, name := range []string{"v-1", "v-2"} {
		if _, err := c.Create(ctx, hp.VMSpec{Name: name, Host: "part", VCPUs: 1, MemoryMiB: 128}); err != nil {
			t.Fatalf("create %s within the share: %v", name, err)
		}
	}
	if _, err := c.Create(ctx, hp.VMSpec{Name: "v-3", Host: "part", VCPUs: 1, MemoryMiB: 128}); !errors.Is(err, hp.ErrCapacity) {
		t.Errorf("a third vCPU on a share of 2: %v, want ErrCapacity", err)
	}
	if _, err := c.Create(ctx, hp.VMSpec{Name: "v-4", Host: "whole", VCPUs: 1, MemoryMiB: 1024}); err != nil {
		t.Errorf("create on the whole host: %v", err)
	}
}
