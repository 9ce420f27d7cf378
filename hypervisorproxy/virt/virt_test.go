package virt_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"
	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

// testHost writes a file-based test-driver host and returns its URI.
func testHost(t *testing.T, name string, cpus, mib int) string {
	t.Helper()
	x, err := domxml.Node{CPUs: cpus, MemoryMiB: mib}.XML()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name+".xml")
	if err := os.WriteFile(p, []byte(x), 0o644); err != nil {
		t.Fatal(err)
	}
	return "test://" + p
}

func open(t *testing.T, uri string, opt virt.Options) *virt.Host {
	t.Helper()
	h, err := virt.Open(context.Background(), uri, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() }) // the connection to the host: nothing the test checks is lost
	return h
}

func names(t *testing.T, h *virt.Host) []string {
	t.Helper()
	doms, err := h.Domains(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, d := range doms {
		out = append(out, d.Name)
	}
	return out
}

// The whole lifecycle on libvirt's shared fake host.
func TestDefaultHostLifecycle(t *testing.T) {
	ctx := context.Background()
	h := open(t, "test:///default", virt.Options{})
	node, err := h.Node(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if node.CPUs != 16 || node.MemoryMiB < 1024 {
		t.Errorf("node = %+v, want libvirt's 16-CPU fake host", node)
	}
	before := names(t, h)
	spec := hp.VMSpec{Name: "lifecycle-1", Job: "job-7", Pool: "render", VCPUs: 2, MaxVCPUs: 4, MemoryMiB: 256, MaxMemoryMiB: 512}
	d, err := h.Create(ctx, spec, hp.VMLimits{})
	if err != nil {
		t.Fatal(err)
	}
	want := hp.Domain{Name: "lifecycle-1", State: hp.StateRunning, VCPUs: 2, MaxVCPUs: 4, MemoryMiB: 256, MaxMemoryMiB: 512, Job: "job-7", Pool: "render"}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("Create (-want +got):\n%s", diff)
	}
	if _, err := h.Create(ctx, spec, hp.VMLimits{}); !errors.Is(err, hp.ErrExists) {
		t.Errorf("second Create: err = %v, want ErrExists", err)
	}
	if got := names(t, h); len(got) != len(before)+1 {
		t.Errorf("domains after create = %v, before %v", got, before)
	}

	// Resize within the limits, read back.
	if d, err = h.SetVCPUs(ctx, "lifecycle-1", 4); err != nil || d.VCPUs != 4 {
		t.Errorf("SetVCPUs(4) = %+v, %v", d, err)
	}
	if d, err = h.SetVCPUs(ctx, "lifecycle-1", 1); err != nil || d.VCPUs != 1 {
		t.Errorf("SetVCPUs(1) = %+v, %v (the test driver unplugs)", d, err)
	}
	if d, err = h.SetMemory(ctx, "lifecycle-1", 512); err != nil || d.MemoryMiB != 512 {
		t.Errorf("SetMemory(512) = %+v, %v", d, err)
	}
	if d, err = h.SetMemory(ctx, "lifecycle-1", 200); err != nil || d.MemoryMiB != 200 {
		t.Errorf("SetMemory(200) = %+v, %v", d, err)
	}
	// Beyond the limits: ErrLimit, nothing changes.
	for _, tc := range []struct {
		name string
		f    func() (hp.Domain, error)
	}{
		{"5 vcpus", func() (hp.Domain, error) { return h.SetVCPUs(ctx, "lifecycle-1", 5) }},
		{"0 vcpus", func() (hp.Domain, error) { return h.SetVCPUs(ctx, "lifecycle-1", 0) }},
		{"513 MiB", func() (hp.Domain, error) { return h.SetMemory(ctx, "lifecycle-1", 513) }},
		{"0 MiB", func() (hp.Domain, error) { return h.SetMemory(ctx, "lifecycle-1", 0) }},
	} {
		if _, err := tc.f(); !errors.Is(err, hp.ErrLimit) {
			t.Errorf("%s: err = %v, want ErrLimit", tc.name, err)
		}
	}
	doms, err := h.Domains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		if d.Name == "lifecycle-1" && (d.VCPUs != 1 || d.MemoryMiB != 200) {
			t.Errorf("after refused resizes: %+v, want 1 vcpu and 200 MiB", d)
		}
	}
	if _, err := h.SetVCPUs(ctx, "nope", 1); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("SetVCPUs of an unknown vm: err = %v, want ErrNotFound", err)
	}
	if err := h.Destroy(ctx, "lifecycle-1"); err != nil {
		t.Fatal(err)
	}
	if err := h.Destroy(ctx, "lifecycle-1"); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("second Destroy: err = %v, want ErrNotFound", err)
	}
	if diff := cmp.Diff(before, names(t, h)); diff != "" {
		t.Errorf("domains after destroy (-before +after):\n%s", diff)
	}
	// The libvirt error stays inspectable.
	_, err = h.SetMemory(ctx, "nope", 1)
	var lv libvirt.Error
	if !errors.As(err, &lv) || lv.Code != libvirt.ERR_NO_DOMAIN {
		t.Errorf("errors.As(libvirt.Error) = %v, %v", lv, err)
	}
}

func TestBadSpecs(t *testing.T) {
	h := open(t, testHost(t, "bad", 4, 4096), virt.Options{})
	for _, s := range []hp.VMSpec{
		{Name: "", VCPUs: 1, MemoryMiB: 64},
		{Name: "x", VCPUs: 0, MemoryMiB: 64},
		{Name: "x", VCPUs: 2, MaxVCPUs: 1, MemoryMiB: 64},
		{Name: "x y", VCPUs: 1, MemoryMiB: 64},
	} {
		if _, err := h.Create(context.Background(), s, hp.VMLimits{}); !errors.Is(err, hp.ErrInvalid) {
			t.Errorf("Create(%+v): err = %v, want ErrInvalid", s, err)
		}
	}
	if got := names(t, h); len(got) != 0 {
		t.Errorf("domains after bad creates: %v", got)
	}
}

// File-based hosts: private capacities; a move between them is define on
// the destination and destroy on the source, not live; a reconnect loses
// the host's state and says so.
func TestFileHostsMoveAndReconnect(t *testing.T) {
	ctx := context.Background()
	var reconnected atomic.Int32
	a := open(t, testHost(t, "a", 8, 16384), virt.Options{Logger: zerolog.Nop()})
	b := open(t, testHost(t, "b", 4, 8192), virt.Options{OnReconnect: func() { reconnected.Add(1) }})
	if n, err := b.Node(ctx); err != nil || n.CPUs != 4 || n.MemoryMiB != 8192 {
		t.Fatalf("Node(b) = %+v, %v", n, err)
	}
	if got := names(t, a); len(got) != 0 {
		t.Fatalf("a new file host has domains: %v", got)
	}
	if _, err := a.Create(ctx, hp.VMSpec{Name: "mover", VCPUs: 2, MaxVCPUs: 3, MemoryMiB: 512, MaxMemoryMiB: 1024, Job: "j1"}, hp.VMLimits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.SetVCPUs(ctx, "mover", 3); err != nil {
		t.Fatal(err)
	}
	st, err := a.Migrate(ctx, "mover", b, hp.MigrateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Live {
		t.Error("a move between test hosts says it was live")
	}
	if got := names(t, a); len(got) != 0 {
		t.Errorf("source still has %v", got)
	}
	doms, err := b.Domains(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []hp.Domain{{Name: "mover", State: hp.StateRunning, VCPUs: 3, MaxVCPUs: 3, MemoryMiB: 512, MaxMemoryMiB: 1024, Job: "j1"}}
	if diff := cmp.Diff(want, doms); diff != "" {
		t.Errorf("destination (-want +got):\n%s", diff)
	}
	if _, err := b.Migrate(ctx, "mover", b, hp.MigrateOptions{}); !errors.Is(err, hp.ErrInvalid) {
		t.Errorf("migrate to itself: err = %v, want ErrInvalid", err)
	}
	if _, err := a.Migrate(ctx, "nope", b, hp.MigrateOptions{}); !errors.Is(err, hp.ErrNotFound) {
		t.Errorf("migrate an unknown vm: err = %v, want ErrNotFound", err)
	}
	if err := b.Reconnect(ctx); err != nil {
		t.Fatal(err)
	}
	if reconnected.Load() != 1 || b.Reconnects() != 1 {
		t.Errorf("OnReconnect ran %d times, Reconnects() = %d; want 1", reconnected.Load(), b.Reconnects())
	}
	if got := names(t, b); len(got) != 0 {
		t.Errorf("a file host kept %v across a reconnect", got)
	}
}

func TestOpenErrors(t *testing.T) {
	_, err := virt.Open(context.Background(), "test:///no/such/host.xml", virt.Options{})
	if err == nil {
		t.Fatal("Open of a missing host file succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := virt.Open(ctx, "test:///default", virt.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled ctx: %v", err)
	}
}

func benchHost(b *testing.B) string {
	x, err := domxml.Node{CPUs: 64, MemoryMiB: 1 << 18}.XML()
	if err != nil {
		b.Fatal(err)
	}
	p := filepath.Join(b.TempDir(), "bench.xml")
	if err := os.WriteFile(p, []byte(x), 0o644); err != nil {
		b.Fatal(err)
	}
	return "test://" + p
}
