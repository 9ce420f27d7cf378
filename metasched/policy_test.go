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

// TestOptimalPolicyLive: with `optimal, solve: true` the daemon refuses a
// state space beyond the limit (the demo grid's 16 hosts and three pools)
// with a message naming the count, and the heuristic decides; on a grid
// small enough, the table is solved in the background from the live rates
// and then decides, with the rates it was solved for in GET /v1/policy.
func TestOptimalPolicyLive(t *testing.T) {
	t.Run("too large", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
				c.Policy = metasched.PolicyConfig{Name: "optimal", Solve: true}
			})
			var v api.PolicyView
			waitFor(t, "the solve refused", 10*time.Second, func() bool {
				v = td.d.Policy()
				return strings.Contains(v.Note, "states")
			})
			if !strings.HasPrefix(v.InForce, "heuristic") || v.Table != nil {
				t.Errorf("policy %+v: want the heuristic in force and no table", v)
			}
			t.Logf("note: %s", v.Note)
		})
	})
	t.Run("solved", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			grid := &graph.Grid{Clusters: []graph.Cluster{
				{Name: "a", Machines: 2, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 100},
				{Name: "b", Machines: 2, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 100},
			}, Links: []graph.Link{{Between: [2]string{"a", "b"}, Mbps: 100}}}
			td := startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
				c.JobTypes = []api.JobType{{Name: "x", VCPUs: 1, MemoryMiB: 512, HoldingCost: 2}, {Name: "y", VCPUs: 1, MemoryMiB: 512, HoldingCost: 1}}
				c.Policy = metasched.PolicyConfig{Name: "optimal", Solve: true}
				c.MinPoolHosts = 1
			})
			if _, err := td.d.Submit(context.Background(), jobfile.Decode([]byte("name: one\ntype: x\ntasks: 4\ntask_ops: 1.0e9\ntask_bytes: 0\n"))); err != nil {
				t.Fatal(err)
			}
			var v api.PolicyView
			waitFor(t, "the table in force", 60*time.Second, func() bool {
				v = td.d.Policy()
				return v.Table != nil && !v.Table.Solving && strings.HasPrefix(v.InForce, "optimal")
			})
			if v.Table.States <= 0 || len(v.Table.Arrival) != 2 || v.Table.SwitchRate <= 0 {
				t.Errorf("table %+v: want its size and the rates it was solved for", v.Table)
			}
			t.Logf("in force: %s, table %+v", v.InForce, *v.Table)
			// The dashboard's view of the table: the two pools on the axes, one
			// action per cell, every action a switch between them.
			tv := v.TableView
			if tv == nil || len(tv.Pools) != 2 || tv.Pools[tv.Rows] != "x" || tv.Pools[tv.Cols] != "y" || len(tv.Actions) == 0 || len(tv.Actions) != len(tv.Actions[0]) {
				t.Fatalf("table view %+v", tv)
			}
			for r, row := range tv.Actions {
				for c, a := range row {
					if a != "" && a != "x→y" && a != "y→x" {
						t.Errorf("j=(%d,%d): action %q", r, c, a)
					}
				}
			}
			t.Logf("table view %s: %v", tv.Spec, tv.Actions)
		})
	})
}
