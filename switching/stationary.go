package switching

import (
	"context"
	"math"
	"time"
)

// Stationary describes the long-run behaviour of the truncated chain under
// a policy table, started from the empty system at the static allocation.
type Stationary struct {
	// BoundaryFraction is the fraction of time some queue sits at its
	// truncation J_i−1, where arrivals are blocked. A large value means the
	// truncation shapes the policy: raise queue_limit.
	BoundaryFraction float64 `json:"boundary_fraction"`
	// PoolBoundary is the same per pool.
	PoolBoundary []float64 `json:"pool_boundary_fraction"`
	// HoldingCost is the long-run mean of Σ c_i j_i, comparable with a
	// simulation's mean cost.
	HoldingCost float64 `json:"holding_cost"`
	// Cost is the long-run cost per unit time the solver minimizes: the
	// holding cost, the price of blocked arrivals and the switching costs. For an average-cost
	// optimal policy it equals the solve's average cost.
	Cost float64 `json:"cost"`
	// Method is how the figures were computed: "power", a power iteration
	// of the distribution from the empty system at the static allocation,
	// or "krylov", the gains of the policy's evaluation system for each
	// figure's reward (see longrun.go), after a krylov solve.
	Method Method `json:"method"`
	// Sweeps, Converged and Residual describe the computation, and
	// MaxSweeps is the cap it had, in sweeps of work (a BiCGSTAB iteration
	// counts KrylovSweepWork; Iterations counts them). Residual is the L1
	// change of the distribution in the power iteration's last sweep, or
	// the largest residual of the krylov solves relative to their reward.
	// When the power iteration stops at the cap (Converged false) the
	// figures above are those of the chain after Sweeps steps from the
	// empty system, not its long run; when the krylov solves do, the last
	// solve's gain is the figure.
	Sweeps     int     `json:"sweeps"`
	Iterations int     `json:"iterations,omitempty"`
	MaxSweeps  int     `json:"max_sweeps"`
	Converged  bool    `json:"converged"`
	Residual   float64 `json:"residual"`
	// Fallback, when set, says why a krylov analysis left for the power
	// iteration.
	Fallback string `json:"fallback,omitempty"`
	// Seconds is the time the power iteration took (with
	// SolveOptions.Now; 0 without).
	Seconds float64 `json:"seconds"`
}

// stationary runs the power iteration π ← π P_f on the uniformized chain of
// policy pol from the reference state, until the L1 change of π is below
// the tolerance or for at most maxSweeps sweeps. Each sweep pulls: first the mass that
// each post-action state receives (the state itself if it does nothing, and
// the configurations whose action leads to it), then the mass each state
// receives by one transition from the post-action states.
func stationary(ctx context.Context, m *Model, e *engine, pol []int8, opts SolveOptions, maxSweeps int) (*Stationary, error) {
	s := e.s
	pi := make([]float64, s.States)
	rho := make([]float64, s.States)
	pi[referenceState(m, s)] = 1
	diffs := make([]float64, s.Configs)
	scratch := make([][]float64, e.workers)
	for w := range scratch {
		scratch[w] = make([]float64, s.B)
	}
	out := &Stationary{Method: Power, MaxSweeps: maxSweeps}
	var start time.Time
	if opts.Now != nil {
		start = opts.Now()
	}
	for n := 1; n <= maxSweeps; n++ {
		if err := canceled(ctx); err != nil {
			return nil, err
		}
		e.powerStep(pi, rho, pol, scratch, diffs)
		diff := 0.0 // summed in configuration order: the same for any number of workers
		for _, d := range diffs {
			diff += d
		}
		out.Sweeps, out.Residual = n, diff
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: "stationary", Sweep: n, Residual: diff, Tolerance: opts.Tolerance, MaxSweeps: maxSweeps})
		}
		if diff < opts.Tolerance {
			out.Converged = true
			break
		}
	}
	if opts.Now != nil {
		out.Seconds = opts.Now().Sub(start).Seconds()
	}
	out.PoolBoundary = make([]float64, s.M)
	total := 0.0
	for idx, p := range pi {
		j := idx % s.B
		total += p
		out.HoldingCost += p * e.hold[j]
		out.Cost += p * (e.h[j] + actionCost(s, idx/s.B, Action(pol[idx]))) * e.lam
		if e.edge[j] {
			out.BoundaryFraction += p
			for i := range s.M {
				if s.queue(j, i) == s.Js[i]-1 {
					out.PoolBoundary[i] += p
				}
			}
		}
	}
	if total > 0 && math.Abs(total-1) > 1e-12 {
		out.HoldingCost /= total
		out.Cost /= total
		out.BoundaryFraction /= total
		for i := range out.PoolBoundary {
			out.PoolBoundary[i] /= total
		}
	}
	s.symmetrize(out.PoolBoundary)
	return out, nil
}

// powerStep sets pi to its image one uniformized step of policy pol later
// (π ← π P_f), with rho and scratch (a block per worker) as scratch, and
// diffs (when not nil) to the L1 change in each configuration.
func (e *engine) powerStep(pi, rho []float64, pol []int8, scratch [][]float64, diffs []float64) {
	e.parallel(func(_, c0, c1 int) {
		for c := c0; c < c1; c++ {
			e.postActionBlock(rho, pi, pol, c)
		}
	})
	e.parallel(func(w, c0, c1 int) {
		for c := c0; c < c1; c++ {
			d := e.transitionBlock(pi, rho, c, scratch[w])
			if diffs != nil {
				diffs[c] = d
			}
		}
	})
}

// postActionBlock sets rho over configuration c: the mass of the states
// that do nothing, plus that of the states of other configurations whose
// action leads here.
func (e *engine) postActionBlock(rho, pi []float64, pol []int8, c int) {
	s := e.s
	B := s.B
	base := c * B
	r, p, f := rho[base:base+B], pi[base:base+B], pol[base:base+B]
	for x := range r {
		if f[x] == 0 {
			r[x] = p[x]
		} else {
			r[x] = 0
		}
	}
	for _, a := range s.invActs[s.invActStart[c]:s.invActStart[c+1]] {
		src := int(a.target) * B
		ps, fs := pi[src:src+B], pol[src:src+B]
		d := int8(a.d)
		if m := s.remap(a.perm); m != nil {
			for x, k := range m {
				if fs[x] == d {
					r[k] += ps[x]
				}
			}
			continue
		}
		for x := range r {
			if fs[x] == d {
				r[x] += ps[x]
			}
		}
	}
}

// transitionBlock sets pi over configuration c to the mass arriving by one
// uniformized step from rho, and returns the L1 change.
func (e *engine) transitionBlock(pi, rho []float64, c int, out []float64) float64 {
	s := e.s
	B := s.B
	base := c * B
	r := rho[base : base+B]
	copy(out, r)
	// Switch completions: out of c, and into c from the configurations
	// whose completion leads here.
	for i := s.compStart[c]; i < s.compStart[c+1]; i++ {
		z := e.comp[i]
		for x := range out {
			out[x] -= z * r[x]
		}
	}
	for _, in := range s.invComps[s.invCompStart[c]:s.invCompStart[c+1]] {
		z := in.rate / e.lam
		src := int(in.target) * B
		rs := rho[src : src+B]
		if m := s.remap(in.perm); m != nil {
			for x, k := range m {
				out[k] += z * rs[x]
			}
			continue
		}
		for x := range out {
			out[x] += z * rs[x]
		}
	}
	x := s.config(c)
	for i := range s.M {
		st, J := s.stride[i], s.Js[i]
		span := J * st
		a := e.arr[i]
		k := int(x[i])
		for hi := 0; hi < B; hi += span {
			n := (J - 1) * st
			if a != 0 {
				// Arrivals leave j_i < J_i−1 and enter j_i ≥ 1.
				lo, up := out[hi:hi+n], out[hi+st:hi+st+n]
				from := r[hi : hi+n]
				for y := range lo {
					lo[y] -= a * from[y]
					up[y] += a * from[y]
				}
			}
			if k == 0 {
				continue
			}
			// Departures leave j_i = q ≥ 1 at µ min(q, k) and enter q−1.
			for q := 1; q < J; q++ {
				d := e.mu[i] * float64(min(q, k))
				lo := hi + q*st
				from, dst, src := r[lo:lo+st], out[lo-st:lo], out[lo:lo+st]
				for y := range from {
					src[y] -= d * from[y]
					dst[y] += d * from[y]
				}
			}
		}
	}
	p := pi[base : base+B]
	diff := 0.0
	for y := range p {
		diff += math.Abs(out[y] - p[y])
		p[y] = out[y]
	}
	return diff
}

// actionCost returns c(d) in configuration c (0 for doing nothing).
func actionCost(s *Space, c int, d Action) float64 {
	a, _ := s.find(c, d)
	return a.cost
}
