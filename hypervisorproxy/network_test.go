package hypervisorproxy_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// addresses lists the address of every VM of the agent's inventory, by
// name.
func addresses(t *testing.T, h *harness) map[string]string {
	t.Helper()
	inv, err := h.client.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, host := range inv.Hosts {
		for _, v := range host.VMs {
			out[v.Name] = v.Address
		}
	}
	return out
}

// The agent gives each VM the lowest free address of its site's range,
// keeps it in its record (a restarted agent still knows it), never gives
// it twice and takes it back with the VM, by a destroy or a
// reconfiguration; a full range refuses the VM and records nothing.
func TestNetworkAddresses(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const network = "data_dir: data\nnetwork: {bridge: msbr0, subnet: 10.77.0.0/16, addresses: 10.77.1.10-10.77.1.12}\n"
	h := startAgent(t, dir, network)
	create := func(h *harness, name, host string) (hp.VM, error) {
		return h.client.Create(ctx, hp.VMSpec{Name: name, Host: host, Job: "j", VCPUs: 1, MemoryMiB: 64})
	}
	for i, name := range []string{"a", "b", "c"} {
		v, err := create(h, name, "")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"10.77.1.10/16", "10.77.1.11/16", "10.77.1.12/16"}[i]; v.Address != want {
			t.Errorf("vm %s: address %q, want %q", name, v.Address, want)
		}
	}
	// The range is full: refused, nothing kept.
	_, err := create(h, "d", "")
	if !errors.Is(err, hp.ErrLimit) || !strings.Contains(err.Error(), "no free address in 10.77.1.10-10.77.1.12") {
		t.Fatalf("create in a full range: %v, want ErrLimit naming the range", err)
	}
	if _, err := h.client.VM(ctx, "d"); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("the refused vm is known: %v", err)
	}
	// A destroyed VM's address is given again; the others keep theirs.
	if err := h.client.Destroy(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if v, err := create(h, "e", ""); err != nil || v.Address != "10.77.1.11/16" {
		t.Fatalf("create after a destroy = %+v, %v; want the freed 10.77.1.11/16", v, err)
	}
	// A restarted agent knows the addresses from its record.
	h.stop()
	h = startAgent(t, dir, network)
	want := map[string]string{"a": "10.77.1.10/16", "e": "10.77.1.11/16", "c": "10.77.1.12/16"}
	got := addresses(t, h)
	for name, addr := range want {
		if got[name] != addr {
			t.Errorf("after a restart vm %s has %q, want %q (all: %v)", name, got[name], addr, got)
		}
	}
	if _, err := create(h, "f", ""); !errors.Is(err, hp.ErrLimit) {
		t.Errorf("after a restart the full range gave an address again: %v", err)
	}
	// A reconfiguration that destroys a host's VMs frees their addresses.
	inv, err := h.client.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host, held := "", 0
	for _, hh := range inv.Hosts {
		if len(hh.VMs) > held {
			host, held = hh.Name, len(hh.VMs)
		}
	}
	if _, err := h.client.Reconfigure(ctx, host, hp.Reconfigure{Pool: "batch", Released: []string{"j"}}); err != nil {
		t.Fatal(err)
	}
	freed := 0
	for i := range held {
		if _, err := create(h, "g"+string(rune('0'+i)), ""); err != nil {
			t.Errorf("create after a reconfiguration freed %d addresses: %v", held, err)
		} else {
			freed++
		}
	}
	if freed != held {
		t.Errorf("%d of the %d addresses freed by the reconfiguration were given again", freed, held)
	}
}
