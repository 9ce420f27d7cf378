package gramvm

import (
	"context"
	"fmt"
	"testing"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// BenchmarkPreparedPlanReused: a job planned on a prepared grid of 5,000
// free hosts (147 clusters) whose shape was searched on the same counts:
// what a plan costs beside the search, which the reuse spares.
func BenchmarkPreparedPlanReused(b *testing.B) {
	var grid graph.Grid
	free := map[string][]string{}
	for c := range 147 {
		name := fmt.Sprintf("c%d", c)
		n := 34
		grid.Clusters = append(grid.Clusters, graph.Cluster{Name: name, Machines: n, Cores: 8, MemoryMiB: 16384,
			Perf: float64(1+c%4) * 1e9, LANMbps: 1000, UplinkMbps: float64(100 + 10*(c%7))})
		if c > 0 {
			grid.Links = append(grid.Links, graph.Link{Between: [2]string{fmt.Sprintf("c%d", c-1), name}, Mbps: float64(200 + 5*(c%9))})
		}
		for h := range n {
			free[name] = append(free[name], fmt.Sprintf("%s-%d", name, h))
		}
	}
	s, err := New(&grid, 0)
	if err != nil {
		b.Fatal(err)
	}
	p, err := s.Prepare(nil)
	if err != nil {
		b.Fatal(err)
	}
	job := &selection.Job{Name: "j", Type: "a", Tasks: 4, TaskOps: 1e9, TaskBytes: 1e6, Efficiency: selection.DefaultEfficiency,
		VM: selection.VM{VCPUs: 1, MemoryMiB: 1024}}
	ctx := context.Background()
	if _, err := p.Plan(ctx, job, free, selection.Options{Master: -1}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Plan(ctx, job, free, selection.Options{Master: -1}); err != nil {
			b.Fatal(err)
		}
	}
	if p.Reused == 0 {
		b.Fatal("no plan was reused")
	}
}
