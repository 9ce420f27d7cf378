package switching_test

import (
	"context"
	"fmt"
	"time"

	"github.com/metasched/metasched/switching"
)

// exampleModel is two pools sharing four servers: web jobs arrive five
// times as often as batch jobs and cost twice as much while they wait; a
// server takes 2 time units on average to switch pools.
const exampleModel = `servers: 4
queue_limit: 10
pools:
  - {name: web, arrival_rate: 1.5, service_rate: 1, holding_cost: 2}
  - {name: batch, arrival_rate: 0.3, service_rate: 0.5, holding_cost: 1}
switch_rate: 0.5
`

// A model file is YAML (or JSON), decoded strictly.
func ExampleParseModel() {
	m, err := switching.ParseModel("model.yaml", []byte(exampleModel))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, p := range m.Pools {
		fmt.Printf("%s: λ %g, µ %g, c %g\n", p.Name, p.ArrivalRate, p.ServiceRate, p.HoldingCost)
	}
	fmt.Printf("N %d, J %d, Λ %.4g\n", m.Servers, m.QueueLimit, m.Lambda())
	for d, p := range switching.Pairs(m.NumPools()) {
		fmt.Printf("action %d: %s → %s\n", d+1, m.Pools[p.From].Name, m.Pools[p.To].Name)
	}
	// Output:
	// web: λ 1.5, µ 1, c 2
	// batch: λ 0.3, µ 0.5, c 1
	// N 4, J 10, Λ 5.8
	// action 1: web → batch
	// action 2: batch → web
}

// The heuristic of Fisher et al. decides in a state: with web jobs piling
// up on one server, it moves a server of batch to web; with the servers
// where the load is, it does nothing.
func ExampleHeuristic_Decide() {
	m, err := switching.ParseModel("model.yaml", []byte(exampleModel))
	if err != nil {
		fmt.Println(err)
		return
	}
	h, err := switching.NewHeuristic(m, 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range []switching.State{
		{Jobs: []int{8, 0}, Servers: []int{1, 3}, Transit: [][]int{{0, 0}, {0, 0}}},
		{Jobs: []int{2, 1}, Servers: []int{3, 1}, Transit: [][]int{{0, 0}, {0, 0}}},
	} {
		d := h.Decide(s)
		if d == switching.NoAction {
			fmt.Printf("jobs %v, servers %v: do nothing\n", s.Jobs, s.Servers)
			continue
		}
		p := d.Pair(m.NumPools())
		fmt.Printf("jobs %v, servers %v: action %d, move a server from %s to %s\n", s.Jobs, s.Servers, d, m.Pools[p.From].Name, m.Pools[p.To].Name)
	}
	// Output:
	// jobs [8 0], servers [1 3]: action 2, move a server from batch to web
	// jobs [2 1], servers [3 1]: do nothing
}

// Solve finds the policy of least long-run average cost of a small model
// and decides by table lookup; EvaluatePolicy gives the cost of any other
// policy on the same model, here that of never switching.
func ExampleSolve() {
	m, err := switching.ParseModel("model.yaml", []byte(exampleModel))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	sol, err := switching.Solve(ctx, m, switching.SolveOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("optimal: average cost %.4g (converged %v)\n", sol.AverageCost, sol.Converged)
	s := switching.State{Jobs: []int{8, 0}, Servers: []int{1, 3}, Transit: [][]int{{0, 0}, {0, 0}}}
	fmt.Printf("in state jobs %v, servers %v: action %d\n", s.Jobs, s.Servers, sol.Table.Decide(s))
	// Never keeps the servers where EvaluatePolicy starts them: at the
	// static allocation.
	st, err := switching.EvaluatePolicy(ctx, m, switching.Never{}, switching.SolveOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("never switch: average cost %.4g\n", st.Cost)
	// Output:
	// optimal: average cost 4.661 (converged true)
	// in state jobs [8 0], servers [1 3]: action 2
	// never switch: average cost 4.958
}

// A pool of k servers that never switch is an M/M/k queue: ErlangC is the
// probability that a job waits, MeanInSystem the mean number of jobs in
// the pool (here λ = 0.9, µ = 1).
func ExampleMeanInSystem() {
	for k := 1; k <= 4; k++ {
		fmt.Printf("k=%d: C %.4g, L %.4g\n", k, switching.ErlangC(k, 0.9), switching.MeanInSystem(0.9, 1, k))
	}
	// Output:
	// k=1: C 0.9, L 9
	// k=2: C 0.2793, L 1.129
	// k=3: C 0.07003, L 0.93
	// k=4: C 0.01433, L 0.9042
}

// The best static allocation splits the servers once and for all, at the
// least exact holding cost: the baseline dynamic switching must beat.
func ExampleBestStaticAllocation() {
	m, err := switching.ParseModel("model.yaml", []byte(exampleModel))
	if err != nil {
		fmt.Println(err)
		return
	}
	k, cost, err := switching.BestStaticAllocation(m)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("servers %v, holding cost %.4g\n", k, cost)
	// Output:
	// servers [3 1], holding cost 4.974
}

// ExampleArrivalRate estimates λ from arrivals every 2 seconds, and shows
// the estimate decaying when they stop.
func ExampleArrivalRate() {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	lambda := switching.ArrivalRate{Prior: 1} // DefaultAlpha, DefaultMinSamples gaps
	for i := range 10 {
		lambda.Observe(start.Add(time.Duration(i) * 2 * time.Second))
	}
	last := lambda.Last()
	fmt.Printf("%.2f/s\n", lambda.Rate(last))
	fmt.Printf("%.2f/s after 20 s of silence\n", lambda.Rate(last.Add(20*time.Second)))
	// Output:
	// 0.50/s
	// 0.05/s after 20 s of silence
}
