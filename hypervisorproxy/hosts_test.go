package hypervisorproxy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/syncbuf"
)

// A file-based test host keeps no state across a reconnect: the agent
// gives it back its VMs from the record. A host that cannot be reached is
// listed as unreachable, and VMs asked of it are refused with 502.
func TestAgentReconnectAndUnreachable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	x, err := domxml.Node{CPUs: 4, MemoryMiB: 4096}.XML()
	if err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(dir, "h0.xml")
	if err := os.WriteFile(hostFile, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(`
site: lab
token_file: token
insecure_http: true
hosts:
  - {name: h0, uri: "test://`+hostFile+`", pool: render}
  - {name: gone, uri: "test:///no/such/host.xml", pool: render}
`))
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	log := zerolog.New(zerolog.MultiLevelWriter(zerolog.NewTestWriter(t), logs))
	var mu sync.Mutex
	hosts := map[string]*virt.Host{}
	connect := func(ctx context.Context, uri string, onReconnect func()) (hp.Hypervisor, error) {
		h, err := virt.Open(ctx, uri, virt.Options{Logger: log, OnReconnect: onReconnect})
		if err != nil {
			return nil, err
		}
		mu.Lock()
		hosts[uri] = h
		mu.Unlock()
		return h, nil
	}
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: connect, Logger: log}).client

	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g := inv.Hosts[1]; g.State != hp.HostUnreachable || g.Error == "" {
		t.Errorf("host gone = %+v, want unreachable with the reason", g)
	}
	// Asked again and again, the host that stays unreachable for the same
	// reason is logged once.
	for range 5 {
		if _, err := c.Inventory(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), `"message":"host unreachable"`); n != 1 {
		t.Errorf("the unreachable host was logged %d times in 6 inventories, want once:\n%s", n, logs.String())
	}
	if _, err := c.Create(ctx, hp.VMSpec{Name: "x", Host: "gone", VCPUs: 1, MemoryMiB: 64}); !errors.Is(err, hp.ErrConnLost) {
		t.Errorf("create on an unreachable host: err = %v, want ErrConnLost", err)
	}
	// Without a host, the reachable one is chosen.
	if vm, err := c.Create(ctx, hp.VMSpec{Name: "survivor", Job: "j", VCPUs: 2, MaxVCPUs: 3, MemoryMiB: 512}); err != nil || vm.Host != "h0" {
		t.Fatalf("create = %+v, %v", vm, err)
	}
	if _, err := c.Resize(ctx, "survivor", hp.Resize{VCPUs: 3}); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	h := hosts["test://"+hostFile]
	mu.Unlock()
	if err := h.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	doms, err := h.Domains(ctx)
	if err != nil || len(doms) != 1 || doms[0].Name != "survivor" || doms[0].VCPUs != 3 || doms[0].State != hp.StateRunning {
		t.Errorf("after the reconnect the host has %+v, %v; want survivor back with 3 vcpus", doms, err)
	}
	vm, err := c.VM(ctx, "survivor")
	if err != nil || vm.State != hp.StateRunning || vm.VCPUs != 3 || vm.MaxVCPUs != 3 {
		t.Errorf("vm after the reconnect = %+v, %v", vm, err)
	}
}
