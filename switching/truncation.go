package switching

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
)

// Truncations that stop mattering. A solve's optimum is that of the
// truncated chain, whose queue i is cut at J_i−1. GrowTruncation grows the
// J_i until the truncation no longer shows in the answer:
//
//   - under the solved policy, the long-run probability that pool i's
//     queue sits at J_i−1 is below a tolerance, for every pool;
//   - and the certified optimum moves by no more than the solve's own gap
//     (the width of its bounds) when every J_i grows by a step.
//
// A step grows a J_i by a quarter, at least 2; the pools whose boundary
// mass is over the tolerance grow first, and every pool grows once they
// are all under it, to check the optimum. Each solve starts from the one
// before it (SolveOptions.Warm).

// DefaultBoundaryTolerance is GrowOptions.BoundaryTolerance's default.
const DefaultBoundaryTolerance = 1e-6

// GrowOptions tune GrowTruncation.
type GrowOptions struct {
	// BoundaryTolerance: a pool's long-run probability of sitting at its
	// J_i−1 must be below it; 0: DefaultBoundaryTolerance.
	BoundaryTolerance float64
	// MaxStates: the growth stops before a space of more states (the
	// memory it is given, in states); 0: no limit.
	MaxStates int
	// MaxSeconds: the growth stops once its solves took that long, or
	// before a solve that would take it past that, by the last solve's
	// time grown with the states as the last two solves' grew (see
	// overTime; SolveOptions.Now must be set); 0: no limit.
	MaxSeconds float64
	// Step, when set, is called after each solve with its figures.
	Step func(TruncationStep)
}

// TruncationStep is one solve of a growth.
type TruncationStep struct {
	Limits      []int     `json:"queue_limits"`
	States      int       `json:"states"`
	AverageCost float64   `json:"average_cost"`
	Lower       float64   `json:"average_cost_lower"`
	Upper       float64   `json:"average_cost_upper"`
	Boundary    []float64 `json:"pool_boundary_fraction"` // per pool, under the solved policy
	Sweeps      int       `json:"sweeps"`
	Seconds     float64   `json:"seconds"` // the solve's and its long-run analysis's
}

// Truncation is the outcome of a growth.
type Truncation struct {
	// Solution is the last solve's: the largest truncation reached.
	Solution *Solution
	Steps    []TruncationStep
	// Settled says both conditions hold at Solution's truncation; Stopped
	// says why the growth ended before (the memory or the time it was
	// given, a solve or an analysis that did not converge).
	Settled bool
	Stopped string
}

// Limits returns the truncations the growth ended at.
func (t *Truncation) Limits() []int { return t.Steps[len(t.Steps)-1].Limits }

// GrowStep returns J grown by one step: a quarter, at least 2.
func GrowStep(j int) int { return min(j+max(2, j/4), MaxQueueLimit) }

// GrowTruncation solves m (the average criterion) on truncations grown
// from m's own until they stop mattering (see above), or until the
// limits of g. m is not changed. Errors are those of Solve; a space over
// g.MaxStates ends the growth (Stopped) instead.
func GrowTruncation(ctx context.Context, m *Model, opts SolveOptions, g GrowOptions) (*Truncation, error) {
	if opts.Criterion != "" && opts.Criterion != Average || opts.Horizon != 0 {
		return nil, errors.New("truncation: grown for the average criterion only (no horizon)")
	}
	tol := g.BoundaryTolerance
	if tol == 0 {
		tol = DefaultBoundaryTolerance
	}
	if !(tol > 0 && tol < 1) {
		return nil, fmt.Errorf("boundary tolerance %g: must be > 0 and < 1", tol)
	}
	if g.MaxStates < 0 || g.MaxSeconds < 0 || math.IsNaN(g.MaxSeconds) {
		return nil, errors.New("truncation: the state and time limits must be >= 0")
	}
	if g.MaxSeconds > 0 && opts.Now == nil {
		return nil, errors.New("truncation: a time limit needs SolveOptions.Now")
	}
	js := m.Limits()
	opts.Boundary = true
	out := &Truncation{}
	seconds := 0.0
	// grewAll says the last step grew every pool from the one before it,
	// whose boundary was then under the tolerance: the optimum's move
	// between the two decides.
	grewAll := false
	for {
		mm := *m // each solve's table keeps its own model
		mm.Pools = slices.Clone(m.Pools)
		mm.SetLimits(js)
		if _, states, ok := countStates(&mm, false, !opts.Unlumped); g.MaxStates > 0 && (!ok || states > uint64(g.MaxStates)) {
			if out.Solution == nil {
				return nil, fmt.Errorf("%w: J = %s has more than the %d states given", ErrTooLarge, FormatLimits(js), g.MaxStates)
			}
			out.Stopped = fmt.Sprintf("the next truncation, J = %s, has more states than the %d given", FormatLimits(js), g.MaxStates)
			return out, nil
		}
		o := opts
		o.Warm = out.Solution
		sol, err := Solve(ctx, &mm, o)
		if err != nil {
			return nil, err
		}
		st := sol.Stationary
		step := TruncationStep{Limits: slices.Clone(js), States: sol.Table.Space.States, AverageCost: sol.AverageCost,
			Lower: sol.AverageCostLower, Upper: sol.AverageCostUpper, Boundary: st.PoolBoundary,
			Sweeps: sol.Sweeps, Seconds: sol.Seconds + st.Seconds}
		seconds += step.Seconds
		var prev *TruncationStep
		if len(out.Steps) > 0 {
			prev = &out.Steps[len(out.Steps)-1]
		}
		out.Steps = append(out.Steps, step)
		out.Solution = sol
		if g.Step != nil {
			g.Step(step)
		}
		switch {
		case !sol.Converged:
			out.Stopped = fmt.Sprintf("the solve at J = %s did not converge (residual %.3g after %d sweeps)", FormatLimits(js), sol.Residual, sol.Sweeps)
			return out, nil
		case !st.Converged:
			out.Stopped = fmt.Sprintf("the long-run analysis at J = %s did not converge (residual %.3g after %d sweeps)", FormatLimits(js), st.Residual, st.Sweeps)
			return out, nil
		}
		var over []int
		for i, b := range st.PoolBoundary {
			if b >= tol {
				over = append(over, i)
			}
		}
		if len(over) == 0 && grewAll && prev != nil {
			gap := max(step.Upper-step.Lower, prev.Upper-prev.Lower)
			if math.Abs(step.AverageCost-prev.AverageCost) <= gap {
				out.Settled = true
				return out, nil
			}
		}
		next := slices.Clone(js)
		grewAll = len(over) == 0
		if grewAll {
			over = make([]int, len(js))
			for i := range over {
				over[i] = i
			}
		}
		for _, i := range over {
			next[i] = GrowStep(js[i])
		}
		if slices.Equal(next, js) {
			out.Stopped = fmt.Sprintf("J = %s is the largest truncation a pool may have", FormatLimits(js))
			return out, nil
		}
		if g.MaxSeconds > 0 {
			if stop := overTime(prev, step, next, &mm, !opts.Unlumped, seconds, g.MaxSeconds); stop != "" {
				out.Stopped = stop
				return out, nil
			}
		}
		js = next
	}
}

// overTime says why the growth stops before the solve at truncation next
// (its space lumped or not) when the solves so far took seconds of the
// limit: the limit is reached, or the next solve would pass it. Its time is
// estimated from the last solve's, grown with the states as the last two
// solves' times grew (as states^p, p between 1 and 2; prev may be nil, and
// p is then 1): a solve's iterations grow with J, so its time grows faster
// than its states (Figure 3 at N = 6 priced lower: 99.8 s at 1.79 M states,
// 211 s at 2.69 M, 546 s at 4.82 M, where the time per state said 378 s
// and p = 1.83 says 614 s). It returns "" when the growth may go on.
func overTime(prev *TruncationStep, last TruncationStep, next []int, m *Model, lumped bool, seconds, limit float64) string {
	if seconds >= limit {
		return fmt.Sprintf("the solves took %.3g s, the time given was %.3g s", seconds, limit)
	}
	nm := *m
	nm.Pools = slices.Clone(m.Pools)
	nm.SetLimits(next)
	_, states, ok := countStates(&nm, false, lumped)
	est, p := math.Inf(1), 1.0
	if prev != nil && prev.States > 0 && last.States > prev.States && prev.Seconds > 0 && last.Seconds > 0 {
		p = math.Log(last.Seconds/prev.Seconds) / math.Log(float64(last.States)/float64(prev.States))
		p = min(max(p, 1), 2)
	}
	if ok && last.States > 0 {
		est = last.Seconds * math.Pow(float64(states)/float64(last.States), p)
	}
	if seconds+est > limit {
		return fmt.Sprintf("the solves took %.3g s, and the next, J = %s (%d states), would take about %.3g s more "+
			"(the last one's time grown as states^%.2f), past the %.3g s given", seconds, FormatLimits(next), states, est, p, limit)
	}
	return ""
}
