package switching

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"
)

// Gain is a policy's long-run average cost per unit time on the truncated
// model (holding and blocking), with bounds that certify it.
type Gain struct {
	// Cost is the middle of the bounds; every long-run average cost the
	// policy has (one per closed class of its chain: one unless the
	// policy strands servers) lies within [Lower, Upper].
	Cost, Lower, Upper float64
	Iterations         int // BiCGSTAB iterations
	// Converged: the bounds' width is below the tolerance times Λ.
	Converged bool
	Seconds   float64 // time spent solving (needs SolveOptions.Now)
}

// ErrSplitChain is returned by PolicyGain when the policy's evaluation
// breaks down: its chain splits into classes that do not reach each
// other (a policy that never moves servers has one per allocation), so it
// has no single long-run cost.
var ErrSplitChain = errors.New("the policy's chain splits into classes with their own long-run costs")

// PolicyGain computes the long-run average cost of policy p on the
// truncated model m exactly: it solves the policy's evaluation system (the
// krylov method's, for this one policy) until the span of h + c(f) +
// P_f V − V is below opts.Tolerance, and Λ times its least and largest
// value bound the policy's cost (for any V, the cost of each closed class
// is that function's average under the class's stationary law).
// opts.Tolerance, MaxSweeps (BiCGSTAB iterations), MaxStates, Workers,
// Progress and Now apply. Unlike EvaluatePolicy's power iteration it
// converges on stiff models, but gives the cost alone; it needs
// StateBytes(m, Krylov) bytes per state.
func PolicyGain(ctx context.Context, m *Model, p Policy, opts SolveOptions) (*Gain, error) {
	e, pol, err := policyTable(m, p, &opts)
	if err != nil {
		return nil, err
	}
	s := e.s
	var began time.Time
	if opts.Now != nil {
		began = opts.Now()
	}
	V := make([]float64, s.States)
	U := make([]float64, s.States)
	ref := referenceState(m, s)
	y := newEvalSystem(e, ref, U)
	y.build(pol)
	b := newBiCGStab(y.n)
	g := &Gain{}
	// A residual r of the system is h + c(f) + P_f V − V − G, so a
	// sup-norm below a quarter of the tolerance keeps the span below it.
	res, err := b.solve(y, opts.Tolerance/4, opts.MaxSweeps, func(it int, res float64) error {
		g.Iterations = it
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: "evaluate", Sweep: it, Residual: res, Tolerance: opts.Tolerance / 4, Start: b.start, Policy: 1})
		}
		return canceled(ctx)
	})
	if err != nil {
		return nil, err
	}
	if math.IsNaN(res) {
		return nil, fmt.Errorf("%w: its evaluation broke down after %d iterations", ErrSplitChain, g.Iterations)
	}
	y.toStates(V, b.x)
	e.expect(U, V)
	st := e.evaluate(V, U, pol, 0) // V = h + c(f) + P_f V: the change is the function bounded
	g.Lower, g.Upper = st.lo*e.lam, st.hi*e.lam
	g.Cost = (g.Lower + g.Upper) / 2
	g.Converged = st.hi-st.lo < opts.Tolerance
	if opts.Now != nil {
		g.Seconds = opts.Now().Sub(began).Seconds()
	}
	return g, nil
}
