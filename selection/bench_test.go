package selection

import (
	"context"
	"math/rand/v2"
	"testing"
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
