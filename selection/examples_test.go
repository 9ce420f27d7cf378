package selection_test

import (
	"context"
	"fmt"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// exampleGrid is three clusters: madrid; lisbon, with faster machines,
// close to it but behind a 20 Mbit/s uplink; and tokyo, many slow
// machines 5 Mbit/s away.
const exampleGrid = `clusters:
  - {name: madrid, machines: 8, cores: 4, memory_mib: 8192, perf: 2e9, lan_mbps: 1000, uplink_mbps: 100}
  - {name: lisbon, machines: 4, cores: 8, memory_mib: 16384, perf: 4e9, lan_mbps: 1000, uplink_mbps: 20}
  - {name: tokyo, machines: 16, cores: 2, memory_mib: 4096, perf: 1e9, lan_mbps: 100, uplink_mbps: 10}
links:
  - {between: [madrid, lisbon], mbps: 1000}
  - {between: [madrid, tokyo], mbps: 5}
`

// exampleJob is 1000 tasks of 200 Gop each, each exchanging 50 MB with
// the master.
const exampleJob = `name: render-1
type: render
tasks: 1000
task_ops: 2.0e11
task_bytes: 5.0e7
efficiency: 0.8
vm: {vcpus: 2, memory_mib: 2048}
`

// examplePlanner plans exampleJob on exampleGrid with free machines free
// (nil: all).
func examplePlanner(free []int) (*selection.Planner, error) {
	grid, err := graph.ParseGrid("grid.yaml", []byte(exampleGrid))
	if err != nil {
		return nil, err
	}
	g, err := graph.New(grid)
	if err != nil {
		return nil, err
	}
	job, err := selection.ParseJob("job.yaml", []byte(exampleJob))
	if err != nil {
		return nil, err
	}
	return selection.NewPlanner(selection.Problem{Graph: g, Job: job, Free: free})
}

// printPlan prints a plan: its master, each cluster's workers and what
// limited them, the clusters left out, the rate and the run time.
func printPlan(p selection.Plan) {
	if !p.Feasible {
		fmt.Println("infeasible:", p.Reason)
		return
	}
	fmt.Printf("master %s, %d machines\n", p.Master, p.Machines)
	for _, c := range p.Clusters {
		fmt.Printf("  %-7s workers %2d, %.4g Mbit/s, limit %s\n", c.Name, c.Machines, c.BandwidthMbps, c.Limit)
	}
	for _, e := range p.Excluded {
		fmt.Printf("  %-7s left out: %s\n", e.Name, e.Reason)
	}
	fmt.Printf("%.4g tasks/s, %.0f s\n", p.Rate, p.Runtime)
}

// Hill climbing sizes and places the job: the master's cluster works over
// its LAN, every other cluster gets as many workers as its bandwidth to
// the master keeps efficient.
func ExamplePlanner_HillClimb() {
	pl, err := examplePlanner(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pl.HillClimb(context.Background(), selection.Options{Master: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	printPlan(p)
	// Output:
	// master madrid, 14 machines
	//   madrid  workers  7, 1000 Mbit/s, limit free
	//   lisbon  workers  3, 20 Mbit/s, limit uplink
	//   tokyo   workers  3, 5 Mbit/s, limit path
	// 0.1325 tasks/s, 7660 s
}

// The exhaustive search tries every plan (here with the master's cluster
// forced to tokyo, and only 2 machines of madrid free).
func ExamplePlanner_Exhaustive() {
	pl, err := examplePlanner([]int{2, 4, 16})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pl.Exhaustive(context.Background(), selection.Options{Master: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	printPlan(p)
	// Output:
	// master tokyo, 17 machines
	//   tokyo   workers 15, 100 Mbit/s, limit free
	//   madrid  workers  1, 5 Mbit/s, limit path
	//   lisbon  left out: adding it gives it no worker: the widest path to tokyo (5 Mbit/s) is worth less than one machine at efficiency 0.8
	// 0.085 tasks/s, 12048 s
}

// The single-cluster baselines of Braun et al.: where the job alone runs
// fastest (MET), and where it ends first given when each cluster is ready
// (MCT).
func ExamplePlanner_Baseline() {
	pl, err := examplePlanner(nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ready := []float64{0, 0, 3600} // tokyo is busy for an hour
	for _, alg := range []selection.Algorithm{selection.MET, selection.MCT} {
		p, err := pl.Baseline(alg, ready)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s, start %.0f s, run %.0f s, done at %.0f s\n", alg, p.Master, p.Start, p.Runtime, p.Completion())
	}
	// Output:
	// met: tokyo, start 3600 s, run 13640 s, done at 17240 s
	// mct: madrid, start 0 s, run 14402 s, done at 14402 s
}
