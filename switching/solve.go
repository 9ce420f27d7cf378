package switching

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// Criterion is what an optimal policy minimizes.
type Criterion string

const (
	// Average minimizes the long-run average cost per unit time: what a
	// running system and the simulator measure. The default.
	Average Criterion = "average"
	// Discounted minimizes the expected total cost discounted by α per
	// uniformized step: the papers' criterion. It is myopic when switches
	// are slow relative to the event rate (see the package doc).
	Discounted Criterion = "discounted"
)

// Method is how the optimal policy is computed.
type Method string

const (
	// ValueIteration repeats V ← T V (relative to a reference state for the
	// average criterion) until the change is below the tolerance.
	ValueIteration Method = "value"
	// PolicyIteration is Howard's algorithm: evaluate a policy by the
	// iterative scheme of the papers' eq. (7), improve it, repeat until no
	// state changes its action.
	PolicyIteration Method = "policy"
	// Krylov is policy iteration whose evaluations solve the policy's
	// linear system by BiCGSTAB preconditioned with an incomplete LU
	// factorization (average criterion only). It converges on stiff models
	// where relative value iteration barely moves, at KrylovBytesPerState
	// more memory.
	Krylov Method = "krylov"
)

// DefaultMethod is the method a solve uses when none is given: Krylov for
// the average criterion, ValueIteration for the discounted one (its sweeps
// contract by α: it needs no linear solver) and for finite horizons.
func DefaultMethod(c Criterion, horizon int) Method {
	if (c == Average || c == "") && horizon == 0 {
		return Krylov
	}
	return ValueIteration
}

// StateBytes is the memory a solve by method needs per state of model m.
func StateBytes(m *Model, method Method) uint64 {
	if method == Krylov {
		return BytesPerState + KrylovBytesPerState(m)
	}
	return BytesPerState
}

// ErrCanceled is returned (wrapped, with ctx's error) when a solve stops
// because its context ended.
var ErrCanceled = errors.New("solve canceled")

// SolveOptions tune a solve. The zero value solves the average criterion by
// value iteration to a tolerance of 1e-6 with at most 100,000 sweeps.
type SolveOptions struct {
	Criterion Criterion // default Average
	Method    Method    // default DefaultMethod(Criterion, Horizon)
	// Horizon > 0 runs that many sweeps of the finite-horizon recurrence
	// from V_0 = 0 with the model's discount (criterion discounted, method
	// value) and returns the decisions with Horizon steps to go.
	Horizon   int
	Tolerance float64 // default 1e-6: sup-norm (discounted) or span (average) of V_n − V_{n−1}
	MaxSweeps int     // default 100,000; an unconverged solve returns Converged false
	MaxStates int     // refuse larger spaces (ErrTooLarge); 0: no limit
	Workers   int     // sweeps run on this many goroutines; 0: GOMAXPROCS
	// Start is the first policy of policy iteration: "heuristic" (Fisher's
	// rule with K = 5, the default) or "cmu".
	Start string
	// Boundary computes the stationary distribution of the solved policy
	// from the empty system at the static allocation, and from it the
	// fraction of time some queue sits at the truncation J−1 and the mean
	// holding cost.
	Boundary bool
	// Warm, when set, is a solution of the same model with other
	// truncations (the same servers, pools, rates and lanes; J_i may
	// differ): the solve starts from its policy and values, each state
	// taking those of the state whose queues are clamped to Warm's J_i−1.
	// Value iteration starts from those values, policy iteration from
	// that policy, the krylov method from both.
	Warm *Solution
	// Unlumped solves on the space without the exchangeable pools lumped
	// (NewSpace instead of NewSymmetricSpace): the same optimum, on up to
	// M! times the states.
	Unlumped bool
	// BoundarySweeps caps the power iteration of the Boundary analysis;
	// 0: DefaultBoundarySweeps of the solve. An analysis that reaches the
	// cap returns Stationary.Converged false.
	BoundarySweeps int
	// Now, when set, times the sweeps (Solution.Seconds). The core keeps no
	// clock of its own.
	Now func() time.Time
	// Progress, when set, is called after every sweep from the solving
	// goroutine.
	Progress func(Progress)
}

// Progress reports a solve's advance.
type Progress struct {
	Phase     string // "value", "evaluate", "improve", "horizon", "stationary"
	Sweep     int    // sweeps so far in this phase
	Residual  float64
	Tolerance float64
	Horizon   int // > 0 for the finite-horizon phase: the number of sweeps to run
	MaxSweeps int // the phase's sweep cap, when it has one of its own ("stationary")
	// Start is the residual the phase started from, when it is known (an
	// evaluation of the krylov method): the phase is then as far along as
	// the residual went from Start toward Tolerance, on a log scale.
	Start float64
	// Policy is the policy being evaluated (the krylov method: 1, 2, …)
	// and Span the last Bellman sweep's span, which the solve brings
	// below its tolerance (0 before the first evaluation ends).
	Policy int
	Span   float64
}

// Solution is a solved policy with the figures of its solve.
type Solution struct {
	Table     *Table
	Criterion Criterion
	Method    Method
	Horizon   int

	Sweeps       int     // value-iteration or policy-evaluation sweeps
	Improvements int     // policy-iteration improvement steps
	Seconds      float64 // time spent in sweeps (needs SolveOptions.Now)
	Converged    bool
	// Fallback, when set, says why the solve left its method for relative
	// value iteration (Method then says ValueIteration).
	Fallback string
	Residual float64 // the last sup-norm or span of V_n − V_{n−1}
	// AverageCost is the long-run average cost per unit time (gain·Λ) of
	// the average criterion, the middle of its certified bounds; NaN
	// otherwise.
	AverageCost float64
	// AverageCostLower and AverageCostUpper bound the optimal average cost
	// (average criterion; NaN otherwise): Λ times the least and the
	// greatest change of one Bellman sweep applied to the final values
	// (Odoni's bounds, valid for any values since every configuration can
	// reach every other by actions, so the optimal average cost is the
	// same from every state). The table's policy, greedy for those values,
	// costs no more than the upper bound in the long run.
	AverageCostLower, AverageCostUpper float64
	// Values are V at the end (relative to the reference state for the
	// average criterion), indexed like the space.
	Values []float64

	Stationary *Stationary // with SolveOptions.Boundary
}

func (o *SolveOptions) defaults() error {
	if o.Criterion == "" {
		o.Criterion = Average
	}
	if o.Method == "" {
		o.Method = DefaultMethod(o.Criterion, o.Horizon)
	}
	if o.Tolerance == 0 {
		o.Tolerance = 1e-6
	}
	if o.MaxSweeps == 0 {
		o.MaxSweeps = 100_000
	}
	if o.Start == "" {
		o.Start = "heuristic"
	}
	switch {
	case o.Criterion != Average && o.Criterion != Discounted:
		return fmt.Errorf("criterion %q: must be %q or %q", o.Criterion, Average, Discounted)
	case o.Method != ValueIteration && o.Method != PolicyIteration && o.Method != Krylov:
		return fmt.Errorf("method %q: must be %q, %q or %q", o.Method, ValueIteration, PolicyIteration, Krylov)
	case o.Method == Krylov && o.Criterion != Average:
		return fmt.Errorf("method %q: solves the %q criterion only", o.Method, Average)
	case !(o.Tolerance > 0) || math.IsInf(o.Tolerance, 0):
		return fmt.Errorf("tolerance %g: must be > 0", o.Tolerance)
	case o.MaxSweeps < 0:
		return fmt.Errorf("max sweeps %d: must be > 0", o.MaxSweeps)
	case o.BoundarySweeps < 0:
		return fmt.Errorf("boundary sweeps %d: must be > 0 (or 0 for the default)", o.BoundarySweeps)
	case o.Horizon < 0:
		return fmt.Errorf("horizon %d: must be > 0", o.Horizon)
	case o.Horizon > 0 && o.Method != ValueIteration:
		return errors.New("horizon: finite horizons are solved by value iteration only")
	case o.Horizon > 0 && o.Criterion != Discounted:
		return errors.New("horizon: the finite-horizon recurrence uses the discounted criterion")
	case o.Start != "heuristic" && o.Start != "cmu":
		return fmt.Errorf("start %q: must be heuristic or cmu", o.Start)
	}
	return nil
}

// MaxPools is the largest number of pools a policy table can hold (action
// numbers are stored in one byte).
const MaxPools = 11

// Solve computes an optimal switching policy of a valid model.
//
// One sweep costs O(S·(M² + M)) for S states; memory is BytesPerState·S.
// Discounted value iteration converges geometrically at rate α per sweep;
// relative value iteration (average) at the rate the uniformized chain mixes,
// which can be very slow when rates differ by orders of magnitude.
func Solve(ctx context.Context, m *Model, opts SolveOptions) (*Solution, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if m.NumPools() > MaxPools {
		return nil, fmt.Errorf("pools: %d pools, a policy table holds at most %d", m.NumPools(), MaxPools)
	}
	newSpace := NewSymmetricSpace
	if opts.Unlumped {
		newSpace = NewSpace
	}
	s, err := newSpace(m, opts.MaxStates)
	if err != nil {
		return nil, err
	}
	alpha := m.Discount
	if opts.Criterion == Average {
		alpha = 1
	}
	e := newEngine(m, s, alpha, opts.Workers)
	sol := &Solution{
		Criterion: opts.Criterion, Method: opts.Method, Horizon: opts.Horizon,
		AverageCost: math.NaN(), AverageCostLower: math.NaN(), AverageCostUpper: math.NaN(),
		Table: &Table{Model: m, Space: s, Criterion: opts.Criterion, Horizon: opts.Horizon, Actions: make([]int8, s.States)},
	}
	var start time.Time
	if opts.Now != nil {
		start = opts.Now()
	}
	V := make([]float64, s.States)
	U := make([]float64, s.States)
	scratch := make([][]float64, e.workers)
	for w := range scratch {
		scratch[w] = make([]float64, s.B)
	}
	ref := referenceState(m, s)
	if opts.Warm != nil {
		if err := warmStart(s, opts.Warm, V, sol.Table.Actions); err != nil {
			return nil, err
		}
	}
	switch {
	case opts.Horizon > 0:
		err = solveHorizon(ctx, e, V, U, scratch, opts, sol)
	case opts.Method == ValueIteration:
		err = solveValue(ctx, e, V, U, scratch, ref, opts, sol)
	case opts.Method == Krylov:
		err = solveKrylov(ctx, m, e, V, U, scratch, ref, opts, sol)
	default:
		err = solvePolicy(ctx, m, e, V, U, ref, opts, sol)
	}
	if err != nil {
		return nil, err
	}
	if opts.Criterion == Average {
		// The certified bounds: one Bellman sweep applied to the final
		// values (U = P·V is current: every method ends by deciding on
		// it).
		st := e.span(V, U, scratch)
		sol.AverageCostLower, sol.AverageCostUpper = st.lo*e.lam, st.hi*e.lam
		sol.AverageCost = (st.lo + st.hi) / 2 * e.lam
	}
	if opts.Now != nil {
		sol.Seconds = opts.Now().Sub(start).Seconds()
	}
	sol.Values = V
	if opts.Boundary {
		budget := opts.BoundarySweeps
		if budget == 0 {
			budget = DefaultBoundarySweeps(sol.Work(), s.States)
		}
		var st *Stationary
		ok := false
		if opts.Method == Krylov {
			// The krylov solve's memory holds its analysis too.
			if st, ok, err = stationaryKrylov(ctx, m, e, sol.Table.Actions, U, opts, budget); err != nil {
				return nil, err
			}
		}
		if !ok {
			if st, err = stationary(ctx, m, e, sol.Table.Actions, opts, budget); err != nil {
				return nil, err
			}
			if opts.Method == Krylov {
				st.Fallback = "a krylov solve of the analysis broke down; the power iteration ran instead"
			}
		}
		sol.Stationary = st
	}
	return sol, nil
}

// The default budget of the long-run analysis after a solve (see
// DefaultBoundarySweeps).
const (
	// BoundaryFactor: the analysis runs at most this many times the
	// solve's work (Solution.Work).
	BoundaryFactor = 10
	// KrylovSweepWork is the work of one BiCGSTAB iteration of the krylov
	// method in sweeps over the states: two products with the chain and
	// two solves with the ILU(0) factors, each about a sweep.
	KrylovSweepWork = 4
	// BoundaryFloor: and at least the sweeps of this many state updates
	// (a second or less), so that a small model's analysis converges
	// however short its solve.
	BoundaryFloor = 100_000_000
	// BoundaryCeiling: and never more than this many sweeps.
	BoundaryCeiling = 100_000
)

// DefaultBoundarySweeps is the sweep budget of the long-run analysis
// (SolveOptions.Boundary) after a solve of work sweeps over states states
// (Solution.Work): BoundaryFactor times the solve's work, at least
// BoundaryFloor/states, at most BoundaryCeiling. The analysis is a power
// iteration whose sweep costs about what a solve's sweep does, so it
// costs at most about ten times the work of the solve, or a second. It
// converges at the pace the chain mixes, which a short solve (a finite
// horizon) says nothing about: then it stops at the budget, unconverged,
// and says so.
func DefaultBoundarySweeps(work, states int) int {
	floor := BoundaryFloor / max(states, 1)
	return min(max(BoundaryFactor*work, floor, 1), BoundaryCeiling)
}

// Work is the solve's work in sweeps over the states: a sweep of value
// iteration or of a policy's iterative evaluation is one, an improvement
// of policy iteration one more, a krylov iteration KrylovSweepWork (a
// krylov solve that fell back to value iteration counts all its sweeps so).
func (sol *Solution) Work() int {
	if sol.Method == Krylov || sol.Fallback != "" {
		return KrylovSweepWork*sol.Sweeps + sol.Improvements
	}
	return sol.Sweeps + sol.Improvements
}

// referenceState is the state the relative values are taken against: the
// static allocation, nobody in transit, empty queues.
func referenceState(m *Model, s *Space) int {
	st := State{Jobs: make([]int, s.M), Servers: StaticAllocation(m)}
	idx, ok := s.Index(st)
	if !ok {
		return 0
	}
	return idx
}

func canceled(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	return nil
}

func solveHorizon(ctx context.Context, e *engine, V, U []float64, scratch [][]float64, opts SolveOptions, sol *Solution) error {
	for n := 1; n <= opts.Horizon; n++ {
		if err := canceled(ctx); err != nil {
			return err
		}
		e.expect(U, V)
		if n == opts.Horizon {
			e.decide(sol.Table.Actions, U, nil)
		}
		st := e.improve(V, U, 0, scratch)
		sol.Sweeps = n
		sol.Residual = max(math.Abs(st.lo), math.Abs(st.hi))
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: "horizon", Sweep: n, Residual: sol.Residual, Tolerance: opts.Tolerance, Horizon: opts.Horizon})
		}
	}
	sol.Converged = true
	return nil
}

// residual is the stopping measure of a sweep: the sup-norm of the change
// for the discounted criterion, its span for the average one.
func residual(c Criterion, st sweepStats) float64 {
	if c == Average {
		return st.hi - st.lo
	}
	return max(math.Abs(st.lo), math.Abs(st.hi))
}

// iterate runs sweeps until the residual is below the tolerance or the
// sweep cap is reached; step performs one sweep and returns the change.
func iterate(ctx context.Context, e *engine, opts SolveOptions, sol *Solution, phase string, step func() sweepStats) (bool, error) {
	for n := 1; sol.Sweeps < opts.MaxSweeps; n++ {
		if err := canceled(ctx); err != nil {
			return false, err
		}
		st := step()
		sol.Sweeps++
		sol.Residual = residual(opts.Criterion, st)
		if opts.Criterion == Average {
			sol.AverageCost = (st.lo + st.hi) / 2 * e.lam
		}
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: phase, Sweep: n, Residual: sol.Residual, Tolerance: opts.Tolerance})
		}
		if sol.Residual < opts.Tolerance {
			return true, nil
		}
	}
	return false, nil
}

func solveValue(ctx context.Context, e *engine, V, U []float64, scratch [][]float64, ref int, opts SolveOptions, sol *Solution) error {
	converged, err := iterate(ctx, e, opts, sol, "value", func() sweepStats {
		e.expect(U, V)
		offset := 0.0
		if opts.Criterion == Average {
			offset = e.valueAt(U, ref)
		}
		return e.improve(V, U, offset, scratch)
	})
	if err != nil {
		return err
	}
	sol.Converged = converged
	// The policy is greedy with respect to the final values.
	e.expect(U, V)
	e.decide(sol.Table.Actions, U, nil)
	return nil
}

func solvePolicy(ctx context.Context, m *Model, e *engine, V, U []float64, ref int, opts SolveOptions, sol *Solution) error {
	pol := sol.Table.Actions
	if err := startPolicy(m, e.s, opts, pol); err != nil {
		return err
	}
	for {
		// Evaluate the policy: V ← h + c(f) + α P_f V (relative for average).
		converged, err := iterate(ctx, e, opts, sol, "evaluate", func() sweepStats {
			e.expect(U, V)
			offset := 0.0
			if opts.Criterion == Average {
				offset = e.evalAt(U, pol, ref)
			}
			return e.evaluate(V, U, pol, offset)
		})
		if err != nil {
			return err
		}
		e.expect(U, V)
		if !converged {
			e.decide(pol, U, nil)
			return nil
		}
		sol.Improvements++
		changed := e.decide(pol, U, pol)
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: "improve", Sweep: sol.Improvements, Residual: float64(changed)})
		}
		if changed == 0 {
			sol.Converged = true
			// Report the policy by the same tie rule as value iteration.
			e.decide(pol, U, nil)
			return nil
		}
	}
}

// warmStart writes into V and pol the values and the policy of w, each
// state of s taking those of w's state with the same configuration and
// its queues clamped to w's J_i−1.
func warmStart(s *Space, w *Solution, V []float64, pol []int8) error {
	ws := w.Table.Space
	if ws.M != s.M || ws.N != s.N || ws.Configs != s.Configs || !slices.Equal(ws.transit, s.transit) ||
		!slices.EqualFunc(ws.Symmetric, s.Symmetric, slices.Equal) {
		return errors.New("warm start: a solution of another model (servers, pools or transit lanes differ)")
	}
	if len(w.Values) != ws.States {
		return errors.New("warm start: the solution has no values")
	}
	old := make([]int, s.B) // per queue vector of s: the clamped one of ws
	for j := range old {
		for i := range s.M {
			old[j] += min(s.queue(j, i), ws.Js[i]-1) * ws.stride[i]
		}
	}
	for c := range s.Configs {
		for j, o := range old {
			V[c*s.B+j] = w.Values[c*ws.B+o]
			pol[c*s.B+j] = w.Table.Actions[c*ws.B+o]
		}
	}
	return nil
}

// startPolicy writes the first policy of policy iteration (opts.Start)
// into pol, unless a warm start wrote it already.
func startPolicy(m *Model, s *Space, opts SolveOptions, pol []int8) error {
	if opts.Warm != nil {
		return nil
	}
	var start Policy
	if opts.Start == "cmu" {
		start = NewCMu(m)
	} else {
		h, err := NewHeuristic(m, 5)
		if err != nil {
			return err
		}
		start = h
	}
	return fillPolicy(s, start, pol)
}

// fillPolicy writes p's decision for every state of s, and fails when p
// decides an action that is not available in its state.
func fillPolicy(s *Space, p Policy, pol []int8) error {
	st := State{Jobs: make([]int, s.M), Servers: make([]int, s.M), Transit: make([][]int, s.M)}
	for a := range st.Transit {
		st.Transit[a] = make([]int, s.M)
	}
	for c := range s.Configs {
		x := s.config(c)
		for i := range s.M {
			st.Servers[i] = int(x[i])
		}
		for t, p := range s.transit {
			st.Transit[p.From][p.To] = int(x[s.M+t])
		}
		ok := s.available(c)
		for j := range s.B {
			for i := range s.M {
				st.Jobs[i] = s.queue(j, i)
			}
			d := p.Decide(st)
			if d < 0 || int(d) >= len(ok) || !ok[d] {
				return fmt.Errorf("policy decided action %d, not available in state %v", d, st)
			}
			pol[c*s.B+j] = int8(d)
		}
	}
	return nil
}

// EvaluatePolicy returns the long-run behaviour of any policy on the
// truncated model: its stationary distribution from the empty system at the
// static allocation, by power iteration (SolveOptions.Tolerance,
// MaxSweeps, MaxStates, Workers and Progress apply). The optimal policy of
// the average criterion has the least Cost of all.
func EvaluatePolicy(ctx context.Context, m *Model, p Policy, opts SolveOptions) (*Stationary, error) {
	e, pol, err := policyTable(m, p, &opts)
	if err != nil {
		return nil, err
	}
	return stationary(ctx, m, e, pol, opts, opts.MaxSweeps)
}

// policyTable checks opts (filling in the defaults) and m, and returns the
// average criterion's engine over m's space and p's decision in every state.
func policyTable(m *Model, p Policy, opts *SolveOptions) (*engine, []int8, error) {
	if err := opts.defaults(); err != nil {
		return nil, nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, nil, err
	}
	s, err := NewSpace(m, opts.MaxStates)
	if err != nil {
		return nil, nil, err
	}
	e := newEngine(m, s, 1, opts.Workers)
	pol := make([]int8, s.States)
	if err := fillPolicy(s, p, pol); err != nil {
		return nil, nil, err
	}
	return e, pol, nil
}
