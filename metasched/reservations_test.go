package metasched_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// laggingAgent answers each inventory request with what the previous one
// found: the inventory a daemon reads may predate the VMs it just created.
type laggingAgent struct {
	metasched.SiteAgent
	mu   sync.Mutex
	last *hp.Inventory
}

func (a *laggingAgent) Inventory(ctx context.Context) (hp.Inventory, error) {
	now, err := a.SiteAgent.Inventory(ctx)
	if err != nil {
		return now, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	prev := a.last
	a.last = &now
	if prev == nil {
		return now, nil
	}
	return *prev, nil
}

// TestReservationsUntilInventory runs jobs that each fill the whole pool
// with agents whose inventory lags one request behind: a job's capacity
// stays promised until an inventory lists its VMs, so no job is planned
// onto a host that is full, and none is refused by the agent and
// requeued. (When the promise ended as the VMs were created, the next
// round read the old inventory, saw the hosts free and planned the next
// job onto them: the agent refused it for want of capacity.)
func TestReservationsUntilInventory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{Clusters: []graph.Cluster{
			{Name: "solo", Machines: 2, Cores: 2, MemoryMiB: 2048, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
		}}
		opt := metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
			return &laggingAgent{SiteAgent: a}
		}}
		td := startDaemonGrid(t, grid, opt, func(c *metasched.Config) {
			c.JobTypes = []api.JobType{{Name: "render", VCPUs: 2, MemoryMiB: 2048, HoldingCost: 1}}
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Executor.TimeScale = 0.01
			c.MinPoolHosts = 0
		})
		d, ctx := td.d, context.Background()
		var ids []string
		for i := range 8 {
			j, err := d.Submit(ctx, jobfile.Decode([]byte(fmt.Sprintf("name: fill-%d\ntype: render\ntasks: 400\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\n", i))))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		waitFor(t, "every job finished", 10*time.Minute, func() bool {
			for _, id := range ids {
				j, err := d.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if !j.State.Terminal() {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			j, err := d.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != api.Done {
				t.Errorf("job %s: %s (%s)", id, j.State, j.Reason)
			}
			for _, tr := range j.Transitions {
				if strings.Contains(tr.Reason, "provisioning failed") {
					t.Errorf("job %s was planned onto a full host: %s", id, tr.Reason)
				}
			}
		}
	})
}
