package virt_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

// qemuPair starts two private libvirtd daemons and opens a Host on each.
func qemuPair(tb testing.TB) (a, b *virt.Host) {
	tb.Helper()
	libvirtdtest.SkipShort(tb)
	if err := libvirtdtest.Check(); err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	ds := make([]*libvirtdtest.Daemon, 2)
	for i := range ds {
		wg.Add(1)
		go func() { defer wg.Done(); ds[i] = libvirtdtest.StartT(tb, libvirtdtest.Options{}) }()
	}
	wg.Wait()
	if tb.Failed() {
		tb.FailNow()
	}
	hs := make([]*virt.Host, 2)
	for i, d := range ds {
		h, err := virt.Open(context.Background(), d.URI(), virt.Options{Logger: zerolog.Nop()})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { _ = h.Close() }) // the connection to libvirtd: nothing the test checks is lost
		hs[i] = h
	}
	return hs[0], hs[1]
}

func domainNames(tb testing.TB, h *virt.Host) []string {
	tb.Helper()
	doms, err := h.Domains(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, d := range doms {
		out = append(out, fmt.Sprintf("%s:%s", d.Name, d.State))
	}
	return out
}

// A live migration cancelled half-way is aborted: the guest keeps running
// on the source and the destination has nothing.
func TestLiveMigrationAbort(t *testing.T) {
	a, b := qemuPair(t)
	ctx := context.Background()
	// The guest's memory is all zero pages, which cost QEMU about 9 bytes
	// each on the wire: 2 GiB is about 5 MiB, 5 s at 1 MiB/s, and the host
	// allocates none of it.
	if _, err := a.Create(ctx, hp.VMSpec{Name: "slow", VCPUs: 1, MemoryMiB: 2048}, hp.VMLimits{}); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := a.Migrate(mctx, "slow", b, hp.MigrateOptions{URI: freeURI(t), BandwidthMiBps: 1})
	t.Logf("aborted after %v", time.Since(start))
	if !errors.Is(err, hp.ErrAborted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("cancelled migration: err = %v, want ErrAborted and the deadline", err)
	}
	if got := domainNames(t, a); len(got) != 1 || got[0] != "slow:running" {
		t.Errorf("source after the abort: %v, want slow running", got)
	}
	if got := domainNames(t, b); len(got) != 0 {
		t.Errorf("destination after the abort: %v, want nothing", got)
	}
	// A migration without a URI, and one to a test host, are refused.
	if _, err := a.Migrate(ctx, "slow", b, hp.MigrateOptions{}); !errors.Is(err, hp.ErrInvalid) {
		t.Errorf("no uri: err = %v, want ErrInvalid", err)
	}
	th, err := virt.Open(ctx, "test:///default", virt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer th.Close() // the connection to libvirtd: nothing the test checks is lost
	if _, err := a.Migrate(ctx, "slow", th, hp.MigrateOptions{URI: freeURI(t)}); !errors.Is(err, hp.ErrUnsupported) {
		t.Errorf("qemu to test: err = %v, want ErrUnsupported", err)
	}
	// Afterwards the same guest migrates normally.
	st, err := a.Migrate(ctx, "slow", b, hp.MigrateOptions{URI: freeURI(t)})
	if err != nil || !st.Live {
		t.Fatalf("migration after an abort: %+v, %v", st, err)
	}
	if got := domainNames(t, b); len(got) != 1 || got[0] != "slow:running" {
		t.Errorf("destination: %v", got)
	}
	if err := b.Destroy(ctx, "slow"); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkCreateDestroy is one VM created, started and destroyed on a
// file-based test-driver host.
func BenchmarkCreateDestroy(b *testing.B) {
	ctx := context.Background()
	h, err := virt.Open(ctx, benchHost(b), virt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close() // the connection to libvirtd: nothing the test checks is lost
	spec := hp.VMSpec{Name: "bench", VCPUs: 2, MaxVCPUs: 4, MemoryMiB: 1024, MaxMemoryMiB: 2048, Job: "j", Pool: "p"}
	var create, destroy time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := h.Create(ctx, spec, hp.VMLimits{}); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := h.Destroy(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
		create += t1.Sub(t0)
		destroy += time.Since(t1)
	}
	b.ReportMetric(float64(create.Microseconds())/float64(b.N), "create-µs/op")
	b.ReportMetric(float64(destroy.Microseconds())/float64(b.N), "destroy-µs/op")
}

// BenchmarkLiveMigration128MiB is one live migration of a 128 MiB QEMU
// guest between two libvirtd daemons on this machine (back and forth).
func BenchmarkLiveMigration128MiB(b *testing.B) {
	x, y := qemuPair(b)
	ctx := context.Background()
	if _, err := x.Create(ctx, hp.VMSpec{Name: "mig", VCPUs: 1, MemoryMiB: 128}, hp.VMLimits{}); err != nil {
		b.Fatal(err)
	}
	var downtime time.Duration
	for b.Loop() {
		st, err := x.Migrate(ctx, "mig", y, hp.MigrateOptions{URI: freeURI(b)})
		if err != nil {
			b.Fatal(err)
		}
		downtime += st.Downtime
		x, y = y, x
	}
	b.ReportMetric(float64(downtime.Milliseconds())/float64(b.N), "downtime-ms/op")
	b.StopTimer()
	if err := x.Destroy(ctx, "mig"); err != nil {
		b.Fatal(err)
	}
}

// freeURI is a migration URI on a port the system had free.
func freeURI(tb testing.TB) string {
	return fmt.Sprintf("tcp://127.0.0.1:%d", libvirtdtest.FreePort(tb))
}
