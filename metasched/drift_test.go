package metasched_test

import (
	"context"
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

// driftingAgent is a site's agent whose host is reconfigured directly on
// the agent (as an operator would, with POST /v1/hosts/NAME/reconfigure)
// just before the daemon's first VM of pool From lands on a host of it.
type driftingAgent struct {
	metasched.SiteAgent
	from, to string
	mu       sync.Mutex
	moved    string
}

func (a *driftingAgent) CreateVM(ctx context.Context, s hp.VMSpec) (hp.VM, error) {
	a.mu.Lock()
	first := a.moved == "" && s.Pool == a.from && s.Host != ""
	if first {
		a.moved = s.Host
	}
	a.mu.Unlock()
	if first {
		if _, err := a.SiteAgent.ReconfigureHost(ctx, s.Host, hp.Reconfigure{Pool: a.to}); err != nil {
			return hp.VM{}, err
		}
	}
	return a.SiteAgent.CreateVM(ctx, s)
}

// TestPoolDrift reconfigures hosts on their agent behind the daemon's back:
// a placement the agent then refuses (the host is in another pool) sends
// the job back to the queue, and it runs elsewhere; the daemon follows the
// agent's pool for the host; and a host reconfigured while idle moves pool
// in the daemon too. (Before, the job failed for good, "host solo-0 is in
// pool "sim", not "render"", and the daemon kept the host in its old
// pool.)
func TestPoolDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{Clusters: []graph.Cluster{
			{Name: "solo", Machines: 6, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
		}}
		var agent *driftingAgent
		opt := metasched.Options{WrapAgent: func(_ string, a metasched.SiteAgent) metasched.SiteAgent {
			agent = &driftingAgent{SiteAgent: a, from: "render", to: "sim"}
			return agent
		}}
		td := startDaemonGrid(t, grid, opt, func(c *metasched.Config) {
			c.JobTypes = []api.JobType{
				{Name: "render", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1},
				{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1},
			}
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Executor.TimeScale = 0.01
			c.MinPoolHosts = 0
		})
		d, ctx := td.d, context.Background()
		j, err := d.Submit(ctx, jobfile.Decode([]byte("name: drift\ntype: render\ntasks: 4\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\n")))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				j, err := d.Job(ctx, j.ID)
				if err != nil {
					t.Fatal(err)
				}
				t.Log(j.State, j.Reason, td.log.String())
			}
		})
		waitFor(t, "the job finished", 5*time.Minute, func() bool {
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !j.State.Terminal() {
				return false
			}
			return true
		})
		if j.State != api.Done {
			t.Fatalf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
		requeued := false
		for _, tr := range j.Transitions {
			requeued = requeued || (tr.To == api.Queued && strings.Contains(tr.Reason, `is in pool "sim", not "render"`))
		}
		agent.mu.Lock()
		moved := agent.moved
		agent.mu.Unlock()
		if moved == "" || !requeued {
			t.Fatalf("moved %q; the job's transitions show no requeue for the refused placement: %+v", moved, j.Transitions)
		}
		waitFor(t, "the daemon following the agent's pool", time.Minute, func() bool {
			pool, _ := poolOf(d, moved)
			return pool == "sim"
		})

		// An idle host reconfigured on its agent. The job is done before
		// its VMs are destroyed: wait for them to go, or the agent refuses
		// a host still running the job's VMs.
		waitFor(t, "the job's VMs destroyed", time.Minute, func() bool { return d.VMsInHand() == 0 })
		var idle string
		for _, h := range d.Hosts() {
			if h.Pool == "render" {
				idle = h.Name
			}
		}
		if idle == "" {
			t.Fatal("no render host left")
		}
		if _, err := agent.SiteAgent.ReconfigureHost(ctx, idle, hp.Reconfigure{Pool: "sim"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the daemon following the agent's pool", time.Minute, func() bool {
			pool, _ := poolOf(d, idle)
			return pool == "sim"
		})
		if !strings.Contains(td.log.String(), "reconfigured outside the daemon") {
			t.Errorf("the daemon did not say why the host moved:\n%s", td.log.String())
		}
	})
}
