package selection

import (
	"cmp"
	"math"
	"slices"
)

// Limit says what bound the number of machines a plan uses in a cluster.
type Limit string

// The limits of docs/design.md ("Sizing"). For a worker cluster (not the
// master's) whose count is below its free machines, the limit names the
// smallest of the three bandwidths that feed it; for the master's own cluster
// it is the LAN, reported as "efficiency".
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
// B(·, m) in bytes/s (docs/design.md, "Sizing"). O(1).
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

// score is the value of a plan and its first tie-breaks.
type score struct {
	r        float64 // tasks/s
	machines int     // workers and the master
	cost     float64 // per hour
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
// among them). O(|others|).
func (pl *Planner) score(m int, others []int) score {
	pl.evals++
	row := pl.row(m)
	W := pl.weight(others)
	p := pl.size(m, m, W, row)
	s := score{r: p.rate, machines: 1 + p.n, cost: pl.cost[m] * float64(1+p.n)}
	for _, c := range others {
		p := pl.size(c, m, W, row)
		s.r += p.rate
		s.machines += p.n
		s.cost += pl.cost[c] * float64(p.n)
	}
	return s
}

// parts returns every cluster's part of the plan (m first).
func (pl *Planner) parts(m int, others []int) []part {
	row := pl.row(m)
	W := pl.weight(others)
	ps := []part{pl.size(m, m, W, row)}
	for _, c := range others {
		ps = append(ps, pl.size(c, m, W, row))
	}
	return ps
}

// cmpScore orders plan values: a larger rate (beyond a relative 1e-12),
// then fewer machines, then a lower cost. It returns > 0 when a is better.
func cmpScore(a, b score) int {
	if d := a.r - b.r; math.Abs(d) > relTie*max(math.Abs(a.r), math.Abs(b.r)) {
		return cmp.Compare(a.r, b.r)
	}
	if a.machines != b.machines {
		return cmp.Compare(b.machines, a.machines)
	}
	if d := a.cost - b.cost; math.Abs(d) > relTie*max(math.Abs(a.cost), math.Abs(b.cost)) {
		return cmp.Compare(b.cost, a.cost)
	}
	return 0
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
	if c := cmpScore(a.s, b.s); c != 0 {
		return c > 0
	}
	if len(a.others) != len(b.others) {
		return len(a.others) < len(b.others)
	}
	if a.m != b.m {
		return pl.rank[a.m] < pl.rank[b.m]
	}
	return slices.Compare(pl.ranks(a.others), pl.ranks(b.others)) < 0
}

func (pl *Planner) ranks(set []int) []int {
	r := make([]int, len(set))
	for i, c := range set {
		r[i] = pl.rank[c]
	}
	slices.Sort(r)
	return r
}
