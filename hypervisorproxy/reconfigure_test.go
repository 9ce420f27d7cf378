package hypervisorproxy_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// Reconfiguring a host for another pool: refused while a job holds it,
// then the old pool's VMs go, the label changes, and switch_delay passes;
// the host takes no VM meanwhile.
func TestAgentReconfigure(t *testing.T) {
	ctx := context.Background()
	h := startAgent(t, "", "switch_delay: 300ms\n")
	c := h.client
	for _, s := range []hp.VMSpec{
		{Name: "idle", Host: "lab-0", VCPUs: 1, MemoryMiB: 256},
		{Name: "busy", Host: "lab-0", Job: "job-9", VCPUs: 1, MemoryMiB: 256},
		{Name: "other", Host: "lab-1", Job: "job-8", VCPUs: 1, MemoryMiB: 256},
	} {
		if _, err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Reconfigure(ctx, "lab-0", hp.Reconfigure{Pool: "batch", Released: []string{"job-8"}}); !errors.Is(err, hp.ErrBusy) {
		t.Fatalf("reconfigure with job-9 not released: err = %v, want ErrBusy", err)
	}
	var wg sync.WaitGroup
	var during error
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(100 * time.Millisecond)
		_, during = c.Create(ctx, hp.VMSpec{Name: "late", Host: "lab-0", VCPUs: 1, MemoryMiB: 64})
	}()
	r, err := c.Reconfigure(ctx, "lab-0", hp.Reconfigure{Pool: "batch", ExpectPool: "render", Released: []string{"job-9"}})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(during, hp.ErrBusy) {
		t.Errorf("create during the switch: err = %v, want ErrBusy", during)
	}
	if r.From != "render" || r.Host.Pool != "batch" || r.Host.State != hp.HostReady || r.Seconds < 0.3 ||
		!cmp.Equal(r.Destroyed, []string{"busy", "idle"}) || len(r.Host.VMs) != 0 {
		t.Errorf("reconfigured = %+v", r)
	}
	want := []hostView{
		{Name: "lab-0", Pool: "batch", State: hp.HostReady, FreeVCPUs: 4, FreeMiB: 8192, VMs: []string{}},
		{Name: "lab-1", Pool: "render", State: hp.HostReady, FreeVCPUs: 3, FreeMiB: 7936, VMs: []string{"other"}},
	}
	if diff := cmp.Diff(want, view(t, c)); diff != "" {
		t.Errorf("inventory (-want +got):\n%s", diff)
	}
	// A render VM cannot move to the batch host.
	if _, err := c.Migrate(ctx, "other", "lab-0"); !errors.Is(err, hp.ErrWrongPool) {
		t.Errorf("migrate across pools: err = %v, want ErrWrongPool", err)
	}
}
