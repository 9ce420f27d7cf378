package selection

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/metasched/metasched/graph"
)

func benchProblem(b *testing.B, n int, seed uint64) Problem {
	b.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	p := randomProblem(rng, n)
	p.Free = nil
	return p
}

// BenchmarkHillClimb1000: a plan on a random grid of 1,000 clusters with 3
// restarts (target: at most 50 ms), for a compute-bound and a
// communication-bound job.
func BenchmarkHillClimb1000(b *testing.B) {
	for _, tc := range []struct {
		name      string
		taskBytes float64
	}{{"compute-bound", 1e5}, {"balanced", 5e7}, {"communication-bound", 1e9}} {
		b.Run(tc.name, func(b *testing.B) {
			p := benchProblem(b, 1000, 7)
			p.Job.TaskOps, p.Job.TaskBytes, p.Job.Efficiency = 2e12, tc.taskBytes, 0.8
			p.Job.VM = VM{VCPUs: 1, MemoryMiB: 1024}
			var plan Plan
			for b.Loop() {
				pl, err := NewPlanner(p)
				if err != nil {
					b.Fatal(err)
				}
				plan, err = pl.HillClimb(context.Background(), Options{Master: -1, Restarts: 3})
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(plan.Evaluations), "evals")
			b.ReportMetric(float64(len(plan.Clusters)), "clusters")
		})
	}
}

// BenchmarkExhaustive16: exhaustive search on 16 clusters (target: at most
// 2 s).
func BenchmarkExhaustive16(b *testing.B) {
	p := benchProblem(b, 16, 3)
	p.Job.VM = VM{VCPUs: 1, MemoryMiB: 1024}
	for b.Loop() {
		pl, err := NewPlanner(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := pl.Exhaustive(context.Background(), Options{Master: -1}); err != nil {
			b.Fatal(err)
		}
	}
}

// scaleGrid is the grid of the scale experiment (metasched/lab.ScaleGrid):
// clusters of 20 to 50 machines of 8 cores, of 1 to 4 Gops/s, uplinks of
// 100 to 160 Mbit/s, along a chain of links of 200 to 240 Mbit/s with a
// 20 Mbit/s link every tenth.
func scaleGrid(b testing.TB, hosts int) *graph.Graph {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 0x5ca1e))
	var grid graph.Grid
	for left, c := hosts, 0; left > 0; c++ {
		n := min(20+rng.IntN(31), left)
		if left-n < 20 && left-n > 0 {
			n = left
		}
		left -= n
		grid.Clusters = append(grid.Clusters, graph.Cluster{Name: fmt.Sprintf("c%d", c), Machines: n, Cores: 8, MemoryMiB: 16384,
			Perf: float64(1+c%4) * 1e9, LANMbps: 1000, UplinkMbps: float64(100 + 10*(c%7))})
		if c > 0 {
			mbps := float64(200 + 5*(c%9))
			if c%10 == 0 {
				mbps = 20
			}
			grid.Links = append(grid.Links, graph.Link{Between: [2]string{fmt.Sprintf("c%d", c-1), fmt.Sprintf("c%d", c)}, Mbps: mbps})
		}
	}
	g, err := graph.New(&grid)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

// BenchmarkHillClimbScale: the plans of the scale experiment's jobs (1 to
// 8 tasks of 1 Gop and 1 MB, one vCPU) on its grid of 5,000 hosts (147
// clusters), every machine free: one search per task count.
// With scratch, the planners share one Scratch, as a dispatch round's do;
// with reasons=8 a plan explains its first 8 clusters left out, as the
// dispatch asks (Options.ExcludedReasons), not all 146.
func BenchmarkHillClimbScale(b *testing.B) {
	g := scaleGrid(b, 5000)
	for _, c := range []struct {
		scratch bool
		reasons int
	}{{false, 0}, {true, 0}, {true, 8}} {
		scratch := c.scratch
		b.Run(fmt.Sprintf("scratch=%t/reasons=%d", scratch, c.reasons), func(b *testing.B) {
			var sc *Scratch
			if scratch {
				sc = &Scratch{}
			}
			var evals int
			for b.Loop() {
				evals = 0
				for tasks := 1; tasks <= 8; tasks++ {
					job := &Job{Name: "j", Type: "a", Tasks: tasks, TaskOps: 1e9, TaskBytes: 1e6, Efficiency: DefaultEfficiency, VM: VM{VCPUs: 1, MemoryMiB: 1024}}
					pl, err := NewPlanner(Problem{Graph: g, Job: job, Scratch: sc})
					if err != nil {
						b.Fatal(err)
					}
					p, err := pl.HillClimb(context.Background(), Options{Master: -1, ExcludedReasons: c.reasons})
					if err != nil {
						b.Fatal(err)
					}
					evals += p.Evaluations
				}
			}
			b.ReportMetric(float64(evals)/8, "evals/plan")
		})
	}
}
