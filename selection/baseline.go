package selection

import (
	"fmt"
	"math"
)

// Alone returns the plan of the job on cluster c alone: c is the master's
// cluster and the only one (S = {c}). It is how the single-cluster
// baselines see a cluster.
func (pl *Planner) Alone(c int) Plan {
	if pl.why[c] != "" {
		return pl.infeasible(Algorithm(""), pl.why[c])
	}
	return pl.plan(Algorithm(""), &candidate{m: c, s: pl.score(c, nil)})
}

// Baseline places the whole job on one cluster, as the single-cluster
// heuristics of Braun et al. (2001) do, given ready[c], the time from now
// at which cluster c is free (nil: all free now):
//   - MET, minimum execution time: the cluster where the job runs fastest,
//     whether or not it is free;
//   - MCT, minimum completion time: the cluster where it ends first, ready
//     time plus run time;
//   - OLB, opportunistic load balancing: the cluster free first, whatever
//     the run time.
//
// The run time on cluster c is that of the plan S = {c} (Alone). Ties go to
// the cluster first in grid order. Plan.Start is the chosen cluster's ready
// time. O(n).
func (pl *Planner) Baseline(alg Algorithm, ready []float64) (Plan, error) {
	if alg != MET && alg != MCT && alg != OLB {
		return Plan{}, fmt.Errorf("baseline: unknown algorithm %q (want met, mct or olb)", alg)
	}
	if ready == nil {
		ready = make([]float64, pl.n)
	}
	if len(ready) != pl.n {
		return Plan{}, fmt.Errorf("baseline: ready times given for %d clusters, the grid has %d", len(ready), pl.n)
	}
	key := func(c int, p Plan) float64 {
		switch alg {
		case MET:
			return p.Runtime
		case MCT:
			return ready[c] + p.Runtime
		}
		return ready[c]
	}
	alone := make([]Plan, pl.n)
	best := -1
	for c := range pl.n {
		alone[c] = pl.Alone(c)
		if !alone[c].Feasible {
			continue
		}
		if best < 0 || key(c, alone[c]) < key(best, alone[best])*(1-relTie) {
			best = c
		}
	}
	if best < 0 {
		return pl.infeasible(alg, "no cluster can run the job alone: each needs a free machine for the master and one for a worker, with the job's VM"), nil
	}
	p := alone[best]
	// One plan per cluster (the explanations evaluate more, not counted).
	p.Algorithm, p.Start, p.Evaluations = alg, ready[best], len(pl.cand)
	p.Excluded = p.Excluded[:0]
	name := alone[best].Master
	for c := range pl.n {
		if c == best {
			continue
		}
		a := alone[c]
		var reason string
		switch {
		case pl.why[c] != "":
			reason = pl.why[c]
		case !a.Feasible:
			reason = fmt.Sprintf("alone it cannot run the job: %s", pl.aloneReason(c))
		case alg == MET:
			reason = fmt.Sprintf("alone it would run %s, not less than %s's %s", secs(a.Runtime), name, secs(p.Runtime))
		case alg == MCT:
			reason = fmt.Sprintf("alone it would finish at %s (ready %s + run %s), not before %s's %s",
				secs(ready[c]+a.Runtime), secs(ready[c]), secs(a.Runtime), name, secs(p.Completion()))
		default:
			reason = fmt.Sprintf("it is ready at %s, not before %s at %s", secs(ready[c]), name, secs(ready[best]))
		}
		p.Excluded = append(p.Excluded, Excluded{Name: pl.g.Cluster(c).Name, Index: c, Reason: reason})
	}
	return p, nil
}

// aloneReason explains why a candidate cluster cannot run the job alone.
func (pl *Planner) aloneReason(c int) string {
	if pl.free[c] < 2 {
		return fmt.Sprintf("%d free machine, and the master takes one", pl.free[c])
	}
	return fmt.Sprintf("its %s LAN is worth less than one worker at efficiency %g", mbps(pl.lan[c]/bytesPerMbps), pl.job.Efficiency)
}

// secs formats a duration in seconds.
func secs(x float64) string {
	if math.IsInf(x, 0) {
		return "never"
	}
	if x >= 1000 {
		return fmt.Sprintf("%.0f s", x)
	}
	return fmt.Sprintf("%.4g s", x)
}
