package selection

import (
	"cmp"
	"math"
	"slices"
)

// Limit says what bound the number of machines a plan uses in a cluster.
type Limit string

// The limits of docs/research/selection.md ("Sizing"). For a worker cluster
// (not the master's) whose count is below its free machines, the limit names
// the smallest of the three bandwidths that feed it; for the master's own
// cluster it is the LAN, reported as "efficiency".
const (
	// LimitFree: every free machine is used (the master's cluster keeps
	// one for the master).
	LimitFree Limit = "free"
	// LimitUplink: the cluster's own WAN uplink, at efficiency θ, feeds no
	// more machines.
	LimitUplink Limit = "uplink"
	// LimitPath: the widest path to the master's cluster is narrower than
	// both uplinks.
	LimitPath Limit = "path"
	// LimitMasterShare: the cluster's share of the master cluster's uplink
	// (in proportion to its free·perf) is the narrowest.
	LimitMasterShare Limit = "master-share"
	// LimitEfficiency: the master's cluster, where more workers on the LAN
	// would drop their efficiency below θ.
	LimitEfficiency Limit = "efficiency"
	// LimitTasks: the caps allow more machines than the job's tasks need:
	// more would not finish them sooner (docs/research/selection.md, "Whole
	// tasks").
	LimitTasks Limit = "tasks"
)

// relTie is the relative difference under which two plan rates tie.
const relTie = 1e-12

// part is one cluster's part of a plan.
type part struct {
	c     int
	n     int     // workers
	b     float64 // bandwidth to the master, bytes/s
	rate  float64 // tasks/s
	limit Limit
}

// size computes cluster c's part in a plan with master m, where W is the
// sum of free·perf over the plan's clusters other than m and row is
// B(·, m) in bytes/s (docs/research/selection.md, "Sizing"). O(1).
func (pl *Planner) size(c, m int, W float64, row []float64) part {
	var (
		b     float64
		free  int
		bound Limit
	)
	if c == m {
		b, free, bound = pl.lan[m], pl.free[m]-1, LimitEfficiency
	} else {
		b, free, bound = pl.up[c], pl.free[c], LimitUplink
		if row[c] < b {
			b, bound = row[c], LimitPath
		}
		if share := pl.up[m] * pl.w[c] / W; share < b {
			b, bound = share, LimitMasterShare
		}
	}
	p := part{c: c, n: free, b: b, limit: LimitFree}
	if eff := math.Floor(b*pl.k[c] + floorSlack); eff < float64(free) {
		p.n, p.limit = int(eff), bound
	}
	p.rate = float64(p.n) * pl.perf[c] / pl.job.TaskOps
	if pl.job.TaskBytes > 0 {
		p.rate = min(p.rate, b/pl.job.TaskBytes)
	}
	return p
}

// fluid is the capped plan's fluid value: its rate, machines and cost as
// the caps of size allow them (the search's bounds and its way across
// plateaus of t*).
type fluid struct {
	r        float64 // tasks/s
	machines int     // workers and the master
	cost     float64 // per hour
}

// score is the value of a plan: t*, the time its sized machines finish the
// job's tasks whole (docs/research/selection.md, "Whole tasks"), its sized
// machines and cost, and near, the tasks its machines finish by the step
// before t*, which the hill climbing follows where t* is flat.
type score struct {
	t        float64 // s; +Inf when the plan has no worker
	near     float64 // tasks finished just before t*
	machines int     // sized workers and the master
	cost     float64 // per hour, of the sized machines
}

// weight returns Σ free·perf over set.
func (pl *Planner) weight(set []int) float64 {
	W := 0.0
	for _, c := range set {
		W += pl.w[c]
	}
	return W
}

// score evaluates the plan with master m and other clusters others (m not
// among them): O(|others|) per step of the bisection of t*.
func (pl *Planner) score(m int, others []int) score {
	pl.evals++
	return pl.scoreBy(m, others, math.Inf(1))
}

// scoreBy is score, not counted, for a plan that must reach run time by to
// matter (see valueBy).
func (pl *Planner) scoreBy(m int, others []int, by float64) score {
	pl.scratchParts = pl.partsInto(pl.scratchParts[:0], m, others)
	return pl.valueBy(pl.scratchParts, by)
}

// parts returns every cluster's part of the plan (m first, then others in
// their order), in a new slice.
func (pl *Planner) parts(m int, others []int) []part {
	return pl.partsInto(nil, m, others)
}

// partsInto appends the plan's parts to ps.
func (pl *Planner) partsInto(ps []part, m int, others []int) []part {
	row := pl.row(m)
	W := pl.weight(others)
	ps = append(ps, pl.size(m, m, W, row))
	for _, c := range others {
		ps = append(ps, pl.size(c, m, W, row))
	}
	return ps
}

// cmpScore orders plan values: an earlier t* (beyond a relative 1e-12),
// then fewer machines, then a lower cost. It returns > 0 when a is better.
func cmpScore(a, b score) int {
	if c := cmpTime(a.t, b.t); c != 0 {
		return c
	}
	if a.machines != b.machines {
		return cmp.Compare(b.machines, a.machines)
	}
	if d := a.cost - b.cost; math.Abs(d) > relTie*max(math.Abs(a.cost), math.Abs(b.cost)) {
		return cmp.Compare(b.cost, a.cost)
	}
	return 0
}

// cmpTime returns > 0 when run time a is earlier than b beyond a relative
// 1e-12 (+Inf ties +Inf).
func cmpTime(a, b float64) int {
	if a == b {
		return 0
	}
	if d := a - b; math.IsInf(a, 1) || math.IsInf(b, 1) || math.Abs(d) > relTie*max(math.Abs(a), math.Abs(b)) {
		return cmp.Compare(b, a)
	}
	return 0
}

// cmpClimb is the order the hill climbing ascends: an earlier t*, then
// more tasks finished just before t* (t* is a step function: on its
// plateaus, the tasks its step before falls short by say how near the next
// step down is), then cmpScore. > 0 when a is better.
func cmpClimb(a, b score) int {
	if c := cmpTime(a.t, b.t); c != 0 {
		return c
	}
	if a.near != b.near {
		return cmp.Compare(a.near, b.near)
	}
	return cmpScore(a, b)
}

// candidate is a plan under consideration: master m, the other clusters
// (sorted by index) and its value.
type candidate struct {
	m      int
	others []int
	s      score
}

// better reports whether a is a better plan than b: by cmpScore, then
// fewer clusters, then by names (the master's, then the others' in name
// order). It is a strict total order on distinct plans.
func (pl *Planner) better(a, b *candidate) bool {
	return pl.order(cmpScore(a.s, b.s), a, b)
}

// ahead reports whether a is ahead of b in the hill climbing's order: by
// cmpClimb, then as better.
func (pl *Planner) ahead(a, b *candidate) bool {
	return pl.order(cmpClimb(a.s, b.s), a, b)
}

// order breaks a tie c == 0 of two plans' values by fewer clusters, then
// names.
func (pl *Planner) order(c int, a, b *candidate) bool {
	if c != 0 {
		return c > 0
	}
	if len(a.others) != len(b.others) {
		return len(a.others) < len(b.others)
	}
	if a.m != b.m {
		return pl.rank[a.m] < pl.rank[b.m]
	}
	pl.rankA = pl.ranksInto(pl.rankA[:0], a.others)
	pl.rankB = pl.ranksInto(pl.rankB[:0], b.others)
	return slices.Compare(pl.rankA, pl.rankB) < 0
}

// ranksInto appends the name ranks of set to r, sorted.
func (pl *Planner) ranksInto(r, set []int) []int {
	for _, c := range set {
		r = append(r, pl.rank[c])
	}
	slices.Sort(r)
	return r
}
