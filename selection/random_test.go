package selection

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/metasched/metasched/graph"
)

// logUniform draws from [lo, hi] uniformly on a log scale.
func logUniform(rng *rand.Rand, lo, hi float64) float64 {
	return math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
}

// randomGrid draws a connected grid of n clusters in 1 to 4 regions (about
// n/25 for a big grid), with about two links per cluster: links
// inside a region are fast (100–1000 Mbit/s), links between regions slow
// (1–50 Mbit/s), so the grid has the geographical zones of the paper, and
// clusters differ widely in size, speed and uplink.
func randomGrid(rng *rand.Rand, n int) *graph.Grid {
	g := &graph.Grid{}
	regions := 1 + rng.IntN(min(4, n))
	if n > 100 {
		regions = n / 25 // a big grid: regions of about 25 clusters
	}
	region := make([]int, n)
	sizes := []int{1, 2, 3, 4, 5, 6, 8, 10, 12, 16}
	for i := range n {
		region[i] = rng.IntN(regions)
		g.Clusters = append(g.Clusters, graph.Cluster{
			Name:       fmt.Sprintf("c%d", i),
			Machines:   sizes[rng.IntN(len(sizes))],
			Cores:      []int{1, 2, 4, 8}[rng.IntN(4)],
			MemoryMiB:  []int{2048, 4096, 8192, 16384}[rng.IntN(4)],
			Perf:       logUniform(rng, 5e8, 8e9),
			LANMbps:    logUniform(rng, 100, 10000),
			UplinkMbps: logUniform(rng, 1, 1000),
			Hypervisor: graph.HypervisorTest,
		})
	}
	linked := map[[2]int]bool{}
	link := func(a, b int) {
		if a > b {
			a, b = b, a
		}
		if a == b || linked[[2]int{a, b}] {
			return
		}
		linked[[2]int{a, b}] = true
		mbps := logUniform(rng, 100, 1000)
		if region[a] != region[b] {
			mbps = logUniform(rng, 1, 50)
		}
		g.Links = append(g.Links, graph.Link{
			Between: [2]string{g.Clusters[a].Name, g.Clusters[b].Name},
			Mbps:    math.Round(mbps),
		})
	}
	for i := 1; i < n; i++ {
		link(i, rng.IntN(i))
	}
	for a := range n {
		for b := a + 1; b < n; b++ {
			if rng.Float64() < min(0.25, 2/float64(n)) {
				link(a, b)
			}
		}
	}
	return g
}

// randomJob draws a job from compute-bound to communication-bound.
func randomJob(rng *rand.Rand) *Job {
	j := &Job{
		Name: "random", Type: "batch", Tasks: 300,
		TaskOps:    logUniform(rng, 1e10, 1e13),
		TaskBytes:  logUniform(rng, 1e5, 1e9),
		Efficiency: 0.5 + 0.45*rng.Float64(),
		VM:         VM{VCPUs: 1 + rng.IntN(2), MemoryMiB: 1024 * (1 + rng.IntN(2))},
	}
	if rng.IntN(20) == 0 {
		j.TaskBytes = 0
	}
	return j
}

// randomProblem draws a grid, a job and the free machines (all free in
// 70% of the problems, a random number per cluster otherwise).
func randomProblem(rng *rand.Rand, n int) Problem {
	grid := randomGrid(rng, n)
	g, err := graph.New(grid)
	if err != nil {
		panic(err)
	}
	var free []int
	if rng.Float64() < 0.3 {
		free = make([]int, n)
		for c := range free {
			free[c] = rng.IntN(grid.Clusters[c].Machines + 1)
		}
	}
	return Problem{Graph: g, Job: randomJob(rng), Free: free}
}
