package selection

import (
	"fmt"
	"math"
	"slices"

	"github.com/metasched/metasched/graph"
)

// bytesPerMbps converts Mbit/s to bytes/s.
const bytesPerMbps = 1e6 / 8

// floorSlack is added before rounding a machine count down, so that a
// bandwidth worth exactly n machines gives n despite rounding
// (docs/research/selection.md, "Sizing").
const floorSlack = 1e-9

// Problem is one planning question: a job on a grid whose clusters have
// some machines free.
type Problem struct {
	Graph *graph.Graph
	Job   *Job
	// Free is the number of free machines of each cluster, in grid order;
	// nil means every machine is free.
	Free []int
	// Scratch, when set, is memory the Planner reuses from the Planners
	// made with it before (see Scratch).
	Scratch *Scratch
}

// Scratch is what Planners made one after another can share instead of
// allocating it again for each job: the views of their masters (O(n) each,
// about 25 per plan on a grid of 150 clusters) and the widest-path rows of
// their graph. Give it to one Planner at a time: a Planner made with it
// must not be used once another is made with it. A Plan never refers to
// it. The zero value is ready.
type Scratch struct {
	views []*view // made so far; the Planner in use takes them in order
	used  int
	graph *graph.Graph
	rows  [][]float64 // graph's rows in bytes/s, as Planners computed them
}

// view returns a view to fill for n clusters, from the scratch when there
// is one.
func (pl *Planner) newView() *view {
	sc := pl.scratch
	if sc == nil {
		return &view{alone: make([]part, pl.n), T: make([]float64, pl.n)}
	}
	if sc.used == len(sc.views) {
		sc.views = append(sc.views, &view{})
	}
	v := sc.views[sc.used]
	sc.used++
	*v = view{alone: slices.Grow(v.alone[:0], pl.n)[:pl.n], T: slices.Grow(v.T[:0], pl.n)[:pl.n], order: v.order[:0]}
	clear(v.alone)
	clear(v.T)
	return v
}

// Planner answers a Problem. It keeps the per-cluster constants and the
// widest-path rows it has needed, so one Planner serves many plans of the
// same problem. It is not safe for concurrent use.
type Planner struct {
	g    *graph.Graph
	job  Job
	n    int
	free []int
	// why[c] says why cluster c cannot take part ("" when it can).
	why []string
	// excludedReasons is the Options.ExcludedReasons of the plan being
	// written (0: every cluster left out explained).
	excludedReasons int
	// cand lists the clusters that can take part, in grid order.
	cand []int
	// Per cluster: perf, weight w = free·perf, uplink and LAN in bytes/s,
	// k = Oper/(θ·Comm·perf), machines per byte/s at efficiency θ (+Inf
	// when the job exchanges no data), cost per machine-hour.
	perf, w, up, lan, k, cost []float64
	// rows[m] is B(·, m) in bytes/s, computed when m is first a master.
	rows [][]float64
	// rank[c] is c's position in name order, for the last tie-break.
	rank []int
	// fluidBound[m] is an upper bound on the capped fluid rate of plans
	// with master m, and masterOrder the candidates by decreasing fluid
	// bound (masterBounds); bound[m] is an upper bound on T/t* of those
	// plans, no more than fluidBound[m], once computed (masterBound).
	fluidBound, bound []float64
	masterOrder       []int
	// views[m] and fixedBest[m]: the view of master m and the local
	// optimum of a climb with m fixed, once computed.
	views     []*view
	scratch   *Scratch // nil: none
	fixedBest []*candidate
	// sigma[c] = s·Oper/perf_c, the time one slot of a VM of c takes for
	// a task (s the VM's vCPUs, each running a task-farm process).
	sigma []float64
	// Scratch of score and sizeWhole.
	scratchParts []part
	scratchN     []int
	scratchTasks []int
	scratchItems []item
	scratchSteps []stepper
	rankA, rankB []int // order's
	// evals counts plan evaluations since the last reset.
	evals int
}

// NewPlanner checks the problem and prepares its constants. O(n).
func NewPlanner(p Problem) (*Planner, error) {
	if p.Graph == nil {
		return nil, fmt.Errorf("problem: no grid")
	}
	if p.Job == nil {
		return nil, fmt.Errorf("problem: no job")
	}
	if err := p.Job.Validate(); err != nil {
		return nil, fmt.Errorf("job: %w", err)
	}
	n := p.Graph.Len()
	free := p.Free
	if free == nil {
		free = make([]int, n)
		for c := range free {
			free[c] = p.Graph.Cluster(c).Machines
		}
	}
	if len(free) != n {
		return nil, fmt.Errorf("problem: free machines given for %d clusters, the grid has %d", len(free), n)
	}
	pl := &Planner{
		g: p.Graph, job: *p.Job, n: n, free: slices.Clone(free),
		why: make([]string, n), perf: make([]float64, n), w: make([]float64, n),
		up: make([]float64, n), lan: make([]float64, n), k: make([]float64, n),
		cost: make([]float64, n), sigma: make([]float64, n), rows: make([][]float64, n), rank: make([]int, n),
		views: make([]*view, n), fixedBest: make([]*candidate, n), scratch: p.Scratch,
	}
	if sc := p.Scratch; sc != nil {
		sc.used = 0
		if sc.graph != p.Graph {
			sc.graph, sc.rows = p.Graph, make([][]float64, n)
		}
		pl.rows = sc.rows // a row depends on the graph alone
	}
	j := p.Job
	for c := range n {
		cl := p.Graph.Cluster(c)
		f := free[c]
		if f < 0 || f > cl.Machines {
			return nil, fmt.Errorf("problem: free machines of cluster %s must be in [0, %d], got %d", cl.Name, cl.Machines, f)
		}
		pl.perf[c] = cl.Perf
		pl.w[c] = float64(f) * cl.Perf
		pl.up[c] = cl.UplinkMbps * bytesPerMbps
		pl.lan[c] = cl.LANMbps * bytesPerMbps
		pl.cost[c] = cl.CostPerHour
		pl.sigma[c] = float64(j.VM.VCPUs) * j.TaskOps / cl.Perf
		if j.TaskBytes > 0 {
			pl.k[c] = j.TaskOps / (j.Efficiency * j.TaskBytes * cl.Perf)
		} else {
			pl.k[c] = math.Inf(1)
		}
		switch {
		case j.VM.VCPUs > cl.Cores || j.VM.MemoryMiB > cl.MemoryMiB:
			pl.why[c] = fmt.Sprintf("its machines cannot hold the job's VM (%d vCPUs, %d MiB; a machine has %d cores, %d MiB)",
				j.VM.VCPUs, j.VM.MemoryMiB, cl.Cores, cl.MemoryMiB)
		case f == 0:
			pl.why[c] = fmt.Sprintf("no free machines (0 of %d)", cl.Machines)
		default:
			pl.cand = append(pl.cand, c)
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmpString(p.Graph.Cluster(a).Name, p.Graph.Cluster(b).Name)
	})
	for r, c := range order {
		pl.rank[c] = r
	}
	return pl, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// row returns B(·, m) in bytes/s.
func (pl *Planner) row(m int) []float64 {
	if pl.rows[m] == nil {
		r := pl.g.WidestFrom(m)
		for c := range r {
			r[c] *= bytesPerMbps
		}
		pl.rows[m] = r
	}
	return pl.rows[m]
}

// Graph returns the grid's graph.
func (pl *Planner) Graph() *graph.Graph { return pl.g }

// Job returns the job.
func (pl *Planner) Job() Job { return pl.job }
