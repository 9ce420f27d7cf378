package selection

import (
	"cmp"
	"math"
	"slices"
)

// view holds what plans with one master m share: the widest-path row, the
// master cluster's own part and, for every other candidate c, its part
// when its share of m's uplink does not bind ("alone") and the weight T[c]
// up to which it does not: while Σ free·perf of the plan's workers is at
// most T[c], c's machines and rate are those of alone[c].
type view struct {
	m     int
	row   []float64
	mp    part   // the master cluster's part
	ms    fluid  // mp as a fluid value
	alone []part // indexed by cluster
	T     []float64
	order []int // candidates other than m, by alone rate (largest first), then index
}

// thresholdSlack keeps T on the safe side of rounding.
const thresholdSlack = 1e-9

// view returns the view of master m, computing it on first use. O(n log n).
func (pl *Planner) view(m int) *view {
	if v := pl.views[m]; v != nil {
		return v
	}
	row := pl.row(m)
	v := pl.newView()
	v.m, v.row = m, row
	v.mp = pl.size(m, m, 1, row)
	v.ms = fluid{r: v.mp.rate, machines: 1 + v.mp.n, cost: pl.cost[m] * float64(1+v.mp.n)}
	j := pl.job
	for _, c := range pl.cand {
		if c == m {
			continue
		}
		a := pl.size(c, m, 0, row) // W = 0: an infinite share
		v.alone[c] = a
		v.order = append(v.order, c)
		// The share s = up_m·w_c/W leaves machines and rate as alone while
		// s ≥ max(rate·Comm, (n − slack)/k): then ⌊s·k + slack⌋ ≥ n and
		// s/Comm ≥ rate (see the package doc).
		sMin := 0.0
		if j.TaskBytes > 0 {
			sMin = max(a.rate*j.TaskBytes, (float64(a.n)-floorSlack)/pl.k[c])
		}
		if sMin <= 0 {
			v.T[c] = math.Inf(1)
		} else {
			v.T[c] = pl.up[m] * pl.w[c] / sMin * (1 - thresholdSlack)
		}
	}
	slices.SortStableFunc(v.order, func(a, b int) int { return cmp.Compare(v.alone[b].rate, v.alone[a].rate) })
	pl.views[m] = v
	return v
}

// partAt returns c's part in a plan of master v.m whose workers weigh W.
func (pl *Planner) partAt(v *view, c int, W float64) part {
	if W <= v.T[c] {
		return v.alone[c]
	}
	return pl.size(c, v.m, W, v.row)
}

// plus adds a part to a fluid value.
func (pl *Planner) plus(s fluid, p part) fluid {
	return fluid{r: s.r + p.rate, machines: s.machines + p.n, cost: s.cost + pl.cost[p.c]*float64(p.n)}
}
