package sim

import (
	"context"
	"testing"

	"github.com/metasched/metasched/switching"
)

// fig4 is Fisher et al.'s Figure 4 setting at total load: N = 4, M = 3,
// µ = 1, ζ = 0.1, c = (2, 1, 1), equal arrival rates.
func fig4(load float64) *switching.Model {
	l := load / 3
	m := &switching.Model{
		Servers: 4, QueueLimit: 15, Discount: 0.95, UniformizationMode: switching.UniformizationAuto,
		Pools: []switching.Pool{
			{Name: "type1", ArrivalRate: l, ServiceRate: 1, HoldingCost: 2},
			{Name: "type2", ArrivalRate: l, ServiceRate: 1, HoldingCost: 1},
			{Name: "type3", ArrivalRate: l, ServiceRate: 1, HoldingCost: 1},
		},
		BlockingAuto: true,
	}
	m.SwitchRates = switching.PairMatrix(3, 0.1)
	m.SwitchCosts = switching.PairMatrix(3, 0)
	return m
}

// BenchmarkHeuristicFig4 runs the heuristic (K = 5) in the Figure 4
// setting at load 3.4 and reports events per second on one goroutine.
func BenchmarkHeuristicFig4(b *testing.B) {
	m := fig4(3.4)
	h, err := switching.NewHeuristic(m, 5)
	if err != nil {
		b.Fatal(err)
	}
	var events int64
	for b.Loop() {
		r, err := Run(context.Background(), Config{Model: m, Policies: []switching.Policy{h}, Completions: 200_000, Warmup: 0.1, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds()/1e6, "Mevents/s")
}
