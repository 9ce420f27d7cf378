package sim_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/sim"
)

// badURIs are URIs ParseURI refuses, with what the error says.
var badURIs = []struct{ uri, want string }{
	{"test:///default", "is not a simulated host's URI"},
	{"sim:///h1", "cpus: required"},
	{"sim:///h1?cpus=8", "memory_mib: required"},
	{"sim:///?cpus=8&memory_mib=1024", "with a name and no host"},
	{"sim://host/h1?cpus=8&memory_mib=1024", "with a name and no host"},
	{"sim:///a/b?cpus=8&memory_mib=1024", "with a name and no host"},
	{"sim:///h1?cpus=0&memory_mib=1024", `cpus: must be a whole number from 1 to 65536, not "0"`},
	{"sim:///h1?cpus=x&memory_mib=1024", `cpus: must be a whole number from 1 to 65536, not "x"`},
	{"sim:///h1?cpus=8&memory_mib=-1", "memory_mib: must be a whole number"},
	{"sim:///h1?cpus=8&memory_mib=1024&create=soon", `create: must be a duration from 0s to 1h0m0s, like 2s, not "soon"`},
	{"sim:///h1?cpus=8&memory_mib=1024&migrate=-1s", "migrate: must be a duration"},
	{"sim:///h1?cpus=8&memory_mib=1024&migrate=2h", "migrate: must be a duration"},
	{"sim:///h1?cpus=8&memory_mib=1024&speed=2", `unknown parameter "speed"`},
	{"sim:///h1?cpus=8&memory_mib=1024&mhz=0", "mhz: must be a whole number"},
	{"%", "is not a simulated host's URI"},
}

func TestParseURI(t *testing.T) {
	s := sim.Spec{Name: "spain-3", CPUs: 8, MemoryMiB: 16384, MHz: 2400,
		Delays: sim.Delays{Create: 2 * time.Second, Destroy: time.Second, Resize: 10 * time.Millisecond, Migrate: 5 * time.Second}}
	got, err := sim.ParseURI(s.URI())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("round trip of %s (-want +got):\n%s", s.URI(), diff)
	}
	got, err = sim.ParseURI(hp.SimURI("c1-0", 4, 2048))
	if err != nil || got != (sim.Spec{Name: "c1-0", CPUs: 4, MemoryMiB: 2048, MHz: 2000}) {
		t.Errorf("SimURI: %+v, %v", got, err)
	}
	for _, b := range badURIs {
		if _, err := sim.ParseURI(b.uri); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: %v, want the error %q", b.uri, err, b.want)
		}
	}
}

func FuzzParseURI(f *testing.F) {
	f.Add("sim:///h1?cpus=8&memory_mib=1024&create=1s")
	for _, b := range badURIs {
		f.Add(b.uri)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		s, err := sim.ParseURI(uri)
		if err != nil {
			return
		}
		if s.Name == "" || s.CPUs < 1 || s.MemoryMiB < 1 || s.MHz < 1 {
			t.Fatalf("%q accepted as %+v", uri, s)
		}
		back, err := sim.ParseURI(s.URI())
		if err != nil || back != s {
			t.Fatalf("%q: %+v does not round-trip through %s: %+v, %v", uri, s, s.URI(), back, err)
		}
	})
}

// TestHost drives two simulated hosts through a VM's life: created,
// listed, resized within its maximum, migrated, destroyed; a second
// connection (a reconnect) sees the same VMs; every misuse is refused with
// the agent's sentinel errors.
func TestHost(t *testing.T) {
	ctx := context.Background()
	connect := sim.Connector(nil)
	open := func(uri string) hp.Hypervisor {
		t.Helper()
		hv, err := connect(ctx, uri, nil)
		if err != nil {
			t.Fatal(err)
		}
		return hv
	}
	a, b := open(hp.SimURI("a", 8, 8192)), open(hp.SimURI("b", 8, 8192))
	if n, err := a.Node(ctx); err != nil || n.CPUs != 8 || n.MemoryMiB != 8192 {
		t.Fatalf("node: %+v, %v", n, err)
	}
	spec := hp.VMSpec{Name: "j-1-m", Job: "j-1", Pool: "render", VCPUs: 2, MemoryMiB: 1024, MaxVCPUs: 4, MaxMemoryMiB: 2048}
	d, err := a.Create(ctx, spec, hp.VMLimits{})
	want := hp.Domain{Name: "j-1-m", State: hp.StateRunning, VCPUs: 2, MaxVCPUs: 4, MemoryMiB: 1024, MaxMemoryMiB: 2048, Job: "j-1", Pool: "render"}
	if err != nil || d != want {
		t.Fatalf("create: %+v, %v", d, err)
	}
	if _, err := a.Create(ctx, spec, hp.VMLimits{}); !errors.Is(err, hp.ErrExists) {
		t.Errorf("create twice: %v, want ErrExists", err)
	}
	if _, err := a.Create(ctx, hp.VMSpec{Name: "x"}, hp.VMLimits{}); !errors.Is(err, hp.ErrInvalid) {
		t.Errorf("create with no size: %v, want ErrInvalid", err)
	}
	if d, err = a.SetVCPUs(ctx, "j-1-m", 4); err != nil || d.VCPUs != 4 {
		t.Errorf("resize to 4 vCPUs: %+v, %v", d, err)
	}
	if _, err = a.SetVCPUs(ctx, "j-1-m", 5); !errors.Is(err, hp.ErrLimit) {
		t.Errorf("resize past the maximum: %v, want ErrLimit", err)
	}
	if d, err = a.SetMemory(ctx, "j-1-m", 2048); err != nil || d.MemoryMiB != 2048 {
		t.Errorf("resize to 2048 MiB: %+v, %v", d, err)
	}
	if _, err = a.SetMemory(ctx, "nope", 1); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("resize of no VM: %v, want ErrNotFound", err)
	}
	st, err := a.Migrate(ctx, "j-1-m", b, hp.MigrateOptions{})
	if err != nil || !st.Live || st.DataMiB != 2048 {
		t.Fatalf("migrate: %+v, %v", st, err)
	}
	if _, err := a.Migrate(ctx, "j-1-m", b, hp.MigrateOptions{}); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("migrate a VM the host no longer has: %v, want ErrNotFound", err)
	}
	again := open(hp.SimURI("b", 8, 8192)) // a reconnect: the same host
	doms, err := again.Domains(ctx)
	want.VCPUs, want.MemoryMiB = 4, 2048
	if err != nil || len(doms) != 1 || doms[0] != want {
		t.Fatalf("the VM on its new host, seen again: %+v, %v", doms, err)
	}
	doms, err = a.Domains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(doms) != 0 {
		t.Errorf("the VM is still on its old host: %+v", doms)
	}
	if _, err := connect(ctx, hp.SimURI("b", 16, 8192), nil); !errors.Is(err, hp.ErrInvalid) {
		t.Errorf("host b opened again with another size: %v, want ErrInvalid", err)
	}
	if err := again.Destroy(ctx, "j-1-m"); err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(ctx, "j-1-m"); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("destroy twice: %v, want ErrNotFound", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Domains(ctx); !errors.Is(err, hp.ErrConnLost) {
		t.Errorf("a closed connection: %v, want ErrConnLost", err)
	}
	if _, err := connect(ctx, "test:///default", nil); !errors.Is(err, hp.ErrInvalid) {
		t.Errorf("a libvirt URI with no other connector: %v, want ErrInvalid", err)
	}
}

// TestDelays: an operation takes its host's delay, and a cancel during it
// leaves the host as it was.
func TestDelays(t *testing.T) {
	connect := sim.Connector(nil)
	s := sim.Spec{Name: "slow", CPUs: 4, MemoryMiB: 4096, Delays: sim.Delays{Create: time.Hour}}
	hv, err := connect(context.Background(), s.URI(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := hv.Create(ctx, hp.VMSpec{Name: "v", VCPUs: 1, MemoryMiB: 512}, hp.VMLimits{})
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("create cancelled during its delay: %v", err)
	}
	doms, err := hv.Domains(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(doms) != 0 {
		t.Errorf("a cancelled create left %+v", doms)
	}
}
