package metasched_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// TestSimulatedGrid: a daemon whose grid's clusters say hypervisor: sim
// gets in-process sites of simulated hosts (no libvirt, no host files),
// one per machine of the cluster's size, and runs jobs on them as on the
// test driver.
func TestSimulatedGrid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{Clusters: []graph.Cluster{
			{Name: "a", Machines: 3, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 100, Hypervisor: graph.HypervisorSim},
			{Name: "b", Machines: 2, Cores: 8, MemoryMiB: 16384, Perf: 2e9, LANMbps: 1000, UplinkMbps: 100, Hypervisor: graph.HypervisorSim},
		}, Links: []graph.Link{{Between: [2]string{"a", "b"}, Mbps: 50}}}
		var dataDir string
		td := startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
			dataDir = c.DataDir
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.MinPoolHosts = 0
		})
		d := td.d
		hosts := d.Hosts()
		if len(hosts) != 5 {
			t.Fatalf("%d hosts, want 5", len(hosts))
		}
		for _, h := range hosts {
			if want := map[string]int{"a": 4, "b": 8}[h.Site]; h.CPUs != want {
				t.Errorf("host %s: %d CPUs, want its cluster's %d", h.Name, h.CPUs, want)
			}
		}
		for _, site := range []string{"a", "b"} {
			files, err := os.ReadDir(filepath.Join(dataDir, "agents", site, "hosts"))
			if err != nil || len(files) != 0 {
				t.Errorf("site %s: host files %v, %v; want none (no test-driver host)", site, files, err)
			}
		}
		var ids []string
		for i := range 6 {
			j, err := d.Submit(context.Background(), jobfile.Decode([]byte(fmt.Sprintf("name: j%d\ntype: sim\ntasks: %d\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\n", i, 1+i))))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		for _, id := range ids {
			waitFor(t, "job "+id+" done", time.Hour, func() bool { return stateOf(t, d, id).State == api.Done })
		}
		waitFor(t, "no VM left", time.Minute, func() bool { return len(d.VMs()) == 0 })
	})
}

// TestRecordKeepsFirstExcluded: on a grid of many clusters, a placed
// job's record lists the first clusters its plan left out, with their
// reasons, and counts the others; its explanation says so.
func TestRecordKeepsFirstExcluded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		grid := &graph.Grid{}
		for i := range 12 {
			grid.Clusters = append(grid.Clusters, graph.Cluster{Name: fmt.Sprintf("c%02d", i), Machines: 1, Cores: 4, MemoryMiB: 8192,
				Perf: 1e9, LANMbps: 1000, UplinkMbps: 100, Hypervisor: graph.HypervisorSim})
			if i > 0 {
				grid.Links = append(grid.Links, graph.Link{Between: [2]string{fmt.Sprintf("c%02d", i-1), fmt.Sprintf("c%02d", i)}, Mbps: 50})
			}
		}
		td := startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.MinPoolHosts = 0
		})
		j, err := td.d.Submit(context.Background(), jobfile.Decode([]byte("name: one\ntype: sim\ntasks: 1\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\n")))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "job placed", time.Hour, func() bool { return stateOf(t, td.d, j.ID).Placement != nil })
		v := stateOf(t, td.d, j.ID)
		p := v.Placement.Plan
		if len(p.Excluded) != 8 || len(p.Excluded)+p.ExcludedMore+len(p.Clusters) != 12 || p.Excluded[0].Reason == "" {
			t.Fatalf("record's plan: %d clusters, %d left out listed, %d more; want 8 listed and the rest counted: %+v",
				len(p.Clusters), len(p.Excluded), p.ExcludedMore, p)
		}
		if want := fmt.Sprintf("and %d more clusters left out", p.ExcludedMore); !strings.Contains(v.Explanation, want) {
			t.Errorf("explanation does not say %q:\n%s", want, v.Explanation)
		}
	})
}
