package selection

import (
	"context"
	"fmt"
	"math"
	"slices"
)

// MaxExhaustive is the largest number of candidate clusters the exhaustive
// search takes on: it evaluates n·2^(n−1) plans of up to n clusters each.
const MaxExhaustive = 20

// Options tune a search.
type Options struct {
	// Master forces the master cluster (an index into the grid); -1 lets
	// the search choose.
	Master int
	// Restarts is the number of Kruskal zones, hence of hill-climbing
	// restarts; 0 means 3.
	Restarts int
	// ExcludedReasons, when above 0, lists at most that many of the
	// clusters a plan leaves out, the first in grid order, with their
	// reasons, and counts the others in ExcludedMore, as TrimExcluded
	// does, without working out their reasons: each costs an evaluation
	// of the plan with the cluster added, 146 of them on a grid of 147
	// clusters (a quarter of a search's time). 0 explains every one.
	ExcludedReasons int
}

// DefaultRestarts is the number of hill-climbing restarts when none is
// given: the paper found three zones enough in its tests (004, §3.1).
const DefaultRestarts = 3

func (pl *Planner) checkMaster(o Options) error {
	switch {
	case o.Master == -1:
		return nil
	case o.Master < 0 || o.Master >= pl.n:
		return fmt.Errorf("master: no cluster %d in a grid of %d", o.Master, pl.n)
	case pl.why[o.Master] != "":
		return fmt.Errorf("master: cluster %s cannot be the master: %s", pl.g.Cluster(o.Master).Name, pl.why[o.Master])
	}
	return nil
}

// Exhaustive evaluates every plan (m, S) over the candidate clusters (with m
// fixed when o.Master is set) and returns the best. It refuses more than
// MaxExhaustive candidates. O(n²·2^n) time for the fluid bounds, and the
// bisection of t* for the plans whose bound T/R can still win; O(n)
// memory.
func (pl *Planner) Exhaustive(ctx context.Context, o Options) (Plan, error) {
	if err := pl.checkMaster(o); err != nil {
		return Plan{}, err
	}
	if len(pl.cand) > MaxExhaustive {
		return Plan{}, fmt.Errorf("exhaustive search: %d candidate clusters, at most %d (%d plans would take too long): use hill climbing",
			len(pl.cand), MaxExhaustive, len(pl.cand)<<(len(pl.cand)-1))
	}
	pl.evals = 0
	masters := pl.cand
	if o.Master >= 0 {
		masters = []int{o.Master}
	}
	var best *candidate
	T := float64(pl.job.Tasks)
	rest := make([]int, 0, len(pl.cand))
	others := make([]int, 0, len(pl.cand))
	for _, m := range masters {
		rest = rest[:0]
		for _, c := range pl.cand {
			if c != m {
				rest = append(rest, c)
			}
		}
		for mask := 0; mask < 1<<len(rest); mask++ {
			if mask&0xfff == 0 {
				if err := ctx.Err(); err != nil {
					return Plan{}, fmt.Errorf("exhaustive search: %w", err)
				}
			}
			others = others[:0]
			for i, c := range rest {
				if mask&(1<<i) != 0 {
					others = append(others, c)
				}
			}
			// A plan whose fluid bound T/R is later than the best t* so far
			// cannot beat it: t* ≥ T/R.
			pl.evals++
			pl.scratchParts = pl.partsInto(pl.scratchParts[:0], m, others)
			if R := pl.fluidRate(pl.scratchParts); best != nil && cmpTime(T/R, best.s.t) < 0 {
				continue
			}
			by := math.Inf(1)
			if best != nil {
				by = best.s.t
			}
			c := &candidate{m: m, others: others, s: pl.valueBy(pl.scratchParts, by)}
			if best == nil || pl.better(c, best) {
				c.others = slices.Clone(others)
				best = c
			}
		}
	}
	var p Plan
	if best == nil {
		p = pl.infeasible(Exhaustive, pl.noWorkerReason())
	} else {
		p = pl.plan(Exhaustive, best)
	}
	p.MasterForced = o.Master >= 0
	return p, nil
}
