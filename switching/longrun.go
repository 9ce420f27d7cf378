package switching

import (
	"context"
	"math"
	"time"
)

// The long-run analysis by the krylov method. The long-run average of any
// reward r(S) under a policy f is the gain G of f's evaluation system with
// r on its right-hand side: V(S) + G − Σ P_f(S,S')·V(S') = r(S), V(ref) = 0.
// So the fraction of time a pool's queue sits at its J_i−1 is the gain for
// the indicator of that, the mean holding cost the gain for Σ c_i j_i: each
// is one BiCGSTAB solve of the system the krylov method built for the
// policy, with its preconditioner (and its coarse level on stiff models).
// A power iteration needs as many sweeps as the chain needs steps to mix,
// tens of thousands on Figure 3's rates; these solves converge in the
// iterations an evaluation takes.

// longRunTarget is the sup-norm of the residual each solve is taken to,
// relative to its reward's largest value: on stiff models the products'
// rounding keeps the true residual near 1e-11 (the values are large), so
// a lower target is never reached.
const longRunTarget = 1e-10

// Power is the long-run analysis by power iteration (Stationary.Method).
const Power Method = "power"

// stationaryKrylov computes pol's long-run figures as gains (see above),
// within budget sweeps of work (a BiCGSTAB iteration counting
// KrylovSweepWork); ok is false when an iteration broke down (the caller
// then runs the power iteration). u is a state vector the products may
// use.
func stationaryKrylov(ctx context.Context, m *Model, e *engine, pol []int8, u []float64, opts SolveOptions, budget int) (_ *Stationary, ok bool, _ error) {
	s := e.s
	maxIter := max(budget/KrylovSweepWork, 1)
	out := &Stationary{Method: Krylov, MaxSweeps: maxIter * KrylovSweepWork, Converged: true, PoolBoundary: make([]float64, s.M)}
	var start time.Time
	if opts.Now != nil {
		start = opts.Now()
	}
	y := newEvalSystem(e, referenceState(m, s), u)
	y.build(pol)
	b := newBiCGStab(y.n)
	// gain solves the system with reward r per state and returns its gain.
	gain := func(r func(st int) float64) (float64, bool, error) {
		y.rows(func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				y.rhs[i] = r(y.unperm(i))
			}
		})
		top := 0.0 // every state's reward is in rhs once
		for _, v := range y.rhs {
			top = max(top, math.Abs(v))
		}
		if top == 0 {
			return 0, true, nil
		}
		clear(b.x)
		res, err := b.solve(y, longRunTarget*top, maxIter-out.Iterations, func(it int, res float64) error {
			out.Iterations++
			out.Sweeps = out.Iterations * KrylovSweepWork
			if opts.Progress != nil {
				opts.Progress(Progress{Phase: "stationary", Sweep: out.Sweeps, Residual: res, Tolerance: longRunTarget * top,
					MaxSweeps: out.MaxSweeps, Start: b.start})
			}
			return canceled(ctx)
		})
		if err != nil || math.IsNaN(res) {
			return 0, false, err
		}
		out.Residual = max(out.Residual, res/top)
		if res > longRunTarget*top {
			out.Converged = false
		}
		return b.x[y.n-1], true, nil
	}
	queues := func(st int) int { return st % s.B }
	edge := func(st int) float64 {
		if e.edge[queues(st)] {
			return 1
		}
		return 0
	}
	var err error
	if out.BoundaryFraction, ok, err = gain(edge); !ok {
		return nil, false, err
	}
	for i := range s.M {
		at := func(st int) float64 {
			if s.queue(queues(st), i) == s.Js[i]-1 {
				return 1
			}
			return 0
		}
		if out.PoolBoundary[i], ok, err = gain(at); !ok {
			return nil, false, err
		}
	}
	if out.HoldingCost, ok, err = gain(func(st int) float64 { return e.hold[queues(st)] }); !ok {
		return nil, false, err
	}
	var cost float64
	if cost, ok, err = gain(func(st int) float64 {
		return e.h[queues(st)] + actionCost(s, st/s.B, Action(pol[st]))
	}); !ok {
		return nil, false, err
	}
	out.Cost = cost * e.lam
	// Fractions are probabilities: a solve's last digits may fall just
	// outside [0, 1].
	out.BoundaryFraction = min(max(out.BoundaryFraction, 0), 1)
	s.symmetrize(out.PoolBoundary)
	for i, f := range out.PoolBoundary {
		out.PoolBoundary[i] = min(max(f, 0), 1)
	}
	if opts.Now != nil {
		out.Seconds = opts.Now().Sub(start).Seconds()
	}
	return out, true, nil
}
