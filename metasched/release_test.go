package metasched_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// TestReleaseSparesAStoppedJob runs one long job across the render pool's
// hosts and asks for switches from render in a row until one is refused.
// The first takes one of the job's hosts and sends it back to the queue;
// the job runs again on the hosts left; the next switches take idle hosts
// while there are some, then find only hosts of a job a switch stopped
// already and fail with that reason instead of stopping it again. (Before,
// every switch took one of its hosts: the job was restarted three times in
// three switches.)
func TestReleaseSparesAStoppedJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{Clusters: []graph.Cluster{
			{Name: "solo", Machines: 10, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
		}}
		td := startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
			c.JobTypes = []api.JobType{
				{Name: "render", VCPUs: 2, MemoryMiB: 1024, HoldingCost: 1},
				{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1},
			}
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Executor.TimeScale = 1
			c.MinPoolHosts = 0
		})
		d, ctx := td.d, context.Background()
		j, err := d.Submit(ctx, jobfile.Decode([]byte("name: long\ntype: render\ntasks: 4000\ntask_ops: 1.0e10\ntask_bytes: 1.0e3\n")))
		if err != nil {
			t.Fatal(err)
		}
		running := func() bool {
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == api.Running
		}
		waitFor(t, "the job running", time.Minute, running)
		if n := len(j.Spec.Name); n == 0 || j.Placement == nil || j.Placement.Plan.Machines < 3 {
			t.Fatalf("the job should span the pool's hosts: %+v", j.Placement)
		}
		var outcomes []api.SwitchView
		refused := func() bool {
			o := outcomes[len(outcomes)-1]
			return o.Phase != "done" && strings.Contains(o.Reason, "a job a switch has stopped before")
		}
		for len(outcomes) < 6 && (len(outcomes) == 0 || !refused()) {
			sv, err := d.RequestSwitch(ctx, "render", "sim")
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the switch to end", time.Minute, func() bool {
				for _, s := range allSwitches(t, d) {
					if s.ID == sv.ID && s.Final {
						outcomes = append(outcomes, s)
						return true
					}
				}
				return false
			})
			waitFor(t, "the job running again", time.Minute, running)
		}
		stops := 0
		for _, tr := range j.Transitions {
			if strings.Contains(tr.Reason, "switched from pool render") {
				stops++
			}
		}
		if stops != 1 {
			t.Errorf("the switches stopped the job %d times, want once: %+v", stops, j.Transitions)
		}
		if outcomes[0].Phase != "done" || len(outcomes[0].Requeued) != 1 {
			t.Errorf("first switch: %+v, want done with the job requeued", outcomes[0])
		}
		for _, o := range outcomes[1:] {
			if o.Phase == "done" && len(o.Requeued) > 0 {
				t.Errorf("switch %s stopped %v again", o.ID, o.Requeued)
			}
		}
		if !refused() {
			t.Errorf("no switch was refused for the job a switch stopped before: %+v", outcomes)
		}
	})
}
