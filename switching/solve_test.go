package switching

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// reference is a deliberately naive Bellman operator, written from the
// papers' equations state by state (decode the state, list the actions,
// apply one, list the transitions of the post-action state): the engine's
// block kernels must agree with it.
type reference struct {
	m     *Model
	s     *Space
	alpha float64
}

// post returns the state after action d, or false when d is not available.
func (r reference) post(st State, d Action) (State, bool) {
	if d == NoAction {
		return st, true
	}
	p := d.Pair(r.m.NumPools())
	if st.Servers[p.From] == 0 || !r.m.CanSwitch(p.From, p.To) {
		return State{}, false
	}
	n := State{Jobs: append([]int(nil), st.Jobs...), Servers: append([]int(nil), st.Servers...), Transit: make([][]int, len(st.Transit))}
	for a := range st.Transit {
		n.Transit[a] = append([]int(nil), st.Transit[a]...)
	}
	n.Servers[p.From]--
	if r.m.InstantSwitches {
		n.Servers[p.To]++
	} else {
		n.Transit[p.From][p.To]++
	}
	return n, true
}

// expect returns Σ q(S,S') V(S') from post-action state st.
func (r reference) expect(st State, V []float64) float64 {
	m, lam := r.m, r.m.Lambda()
	idx := func(s State) int {
		i, ok := r.s.Index(s)
		if !ok {
			panic("state outside the space")
		}
		return i
	}
	self := idx(st)
	total, sum := 0.0, 0.0
	move := func(rate float64, change func(*State)) {
		if rate == 0 {
			return
		}
		n := State{Jobs: append([]int(nil), st.Jobs...), Servers: append([]int(nil), st.Servers...), Transit: make([][]int, len(st.Transit))}
		for a := range st.Transit {
			n.Transit[a] = append([]int(nil), st.Transit[a]...)
		}
		change(&n)
		total += rate
		sum += rate / lam * V[idx(n)]
	}
	for i, p := range m.Pools {
		if st.Jobs[i] < m.Limit(i)-1 {
			move(p.ArrivalRate, func(n *State) { n.Jobs[i]++ })
		}
		move(p.ServiceRate*float64(min(st.Jobs[i], st.Servers[i])), func(n *State) { n.Jobs[i]-- })
	}
	for a := range st.Transit {
		for b, k := range st.Transit[a] {
			if k > 0 {
				move(m.SwitchRates[a][b]*float64(k), func(n *State) { n.Transit[a][b]--; n.Servers[b]++ })
			}
		}
	}
	return sum + (1-total/lam)*V[self]
}

// cost returns h(S)/Λ.
func (r reference) cost(st State) float64 {
	h := 0.0
	for i, p := range r.m.Pools {
		h += p.HoldingCost * float64(st.Jobs[i])
		if st.Jobs[i] == r.m.Limit(i)-1 {
			h += p.ArrivalRate * r.m.BlockingCost(i)
		}
	}
	return h / r.m.Lambda()
}

// sweep returns T V and the tie-rule decisions.
func (r reference) sweep(V []float64) ([]float64, []int8) {
	out := make([]float64, len(V))
	pol := make([]int8, len(V))
	M := r.m.NumPools()
	for idx := range V {
		st := r.s.State(idx)
		q := []float64{}
		acts := []Action{}
		for d := Action(0); int(d) <= M*(M-1); d++ {
			n, ok := r.post(st, d)
			if !ok {
				continue
			}
			c := 0.0
			if d != NoAction {
				p := d.Pair(M)
				c = r.m.SwitchCosts[p.From][p.To]
			}
			q = append(q, c+r.alpha*r.expect(n, V))
			acts = append(acts, d)
		}
		best := math.Inf(1)
		for _, v := range q {
			best = min(best, v)
		}
		for i, v := range q {
			if v <= best+1e-9*max(1, math.Abs(best)) {
				pol[idx] = int8(acts[i])
				break
			}
		}
		out[idx] = r.cost(st) + best
	}
	return out, pol
}

// engineModels are small models that exercise every transition kind.
func engineModels() map[string]*Model {
	twoPool := policyModel(2, []float64{0.3, 0.4}, []float64{0.5, 0.7}, []float64{1, 2}, 0.2)
	twoPool.QueueLimit = 6
	twoPool.BlockingAuto = true

	three := policyModel(3, []float64{0.5, 0.2, 0.3}, []float64{1, 0.6, 0.8}, []float64{2, 1, 1.5}, 0.3)
	three.QueueLimit = 4
	three.SwitchRates[2][0] = 0 // a pair that cannot switch
	three.SwitchRates[0][1] = 0.7
	three.SwitchCosts[1][2] = 0.5
	three.BlockingCosts = []float64{1, 0, 3}

	instant := policyModel(3, []float64{0.2, 0.3}, []float64{0.4, 0.5}, []float64{1, 3}, 1)
	instant.QueueLimit = 7
	instant.InstantSwitches = true
	instant.SwitchCosts = [][]float64{{0, 2}, {1, 0}}
	instant.UniformizationMode = UniformizationFixed
	instant.Uniformization = 2.5

	paper := policyModel(2, []float64{0.5, 0.1, 0.2}, []float64{0.9, 0.4, 0.5}, []float64{1, 1, 2}, 0.25)
	paper.QueueLimit = 3
	paper.UniformizationMode = UniformizationPaper

	// A truncation per pool: the first pool's own, the others the model's
	// (or their own, on three pools).
	perPool := policyModel(3, []float64{0.6, 0.3}, []float64{0.5, 0.7}, []float64{2, 1}, 0.4)
	perPool.QueueLimit = 5
	perPool.Pools[0].QueueLimit = 9
	perPool.BlockingAuto = true
	perPool3 := policyModel(3, []float64{0.5, 0.2, 0.3}, []float64{1, 0.6, 0.8}, []float64{2, 1, 1.5}, 0.3)
	perPool3.SetLimits([]int{3, 6, 4})
	perPool3.SwitchCosts[0][2] = 0.25
	perPool3.BlockingCosts = []float64{2, 0.5, 1}
	return map[string]*Model{"two pools": twoPool, "three pools": three, "instant": instant, "paper Λ": paper,
		"J per pool": perPool, "J per pool, three pools": perPool3}
}

func TestEngineMatchesReference(t *testing.T) {
	for name, m := range engineModels() {
		for _, alpha := range []float64{0.9, 1} {
			s, err := NewSpace(m, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, workers := range []int{1, 2} {
				e := newEngine(m, s, alpha, workers)
				ref := reference{m, s, alpha}
				V := make([]float64, s.States)
				want := make([]float64, s.States)
				U := make([]float64, s.States)
				scratch := [][]float64{make([]float64, s.B), make([]float64, s.B)}
				pol := make([]int8, s.States)
				var wantPol []int8
				for sweep := range 25 {
					want, wantPol = ref.sweep(want)
					e.expect(U, V)
					e.decide(pol, U, nil)
					e.improve(V, U, 0, scratch)
					if diff := cmp.Diff(want, V, cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
						t.Fatalf("%s α=%g workers=%d sweep %d: values differ (-reference +engine):\n%s", name, alpha, workers, sweep, diff)
					}
					if diff := cmp.Diff(wantPol, pol); diff != "" {
						t.Fatalf("%s α=%g workers=%d sweep %d: decisions differ (-reference +engine):\n%s", name, alpha, workers, sweep, diff)
					}
				}
			}
		}
	}
}

func TestSpaceIndexing(t *testing.T) {
	for name, m := range engineModels() {
		s, err := NewSpace(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		configs, states, ok := CountStates(m)
		if !ok || int(configs) != s.Configs || int(states) != s.States {
			t.Errorf("%s: CountStates = %d, %d; space has %d, %d", name, configs, states, s.Configs, s.States)
		}
		for c := range s.Configs {
			if r := s.rank(s.config(c)); r != c {
				t.Fatalf("%s: rank of configuration %d is %d", name, c, r)
			}
		}
		for idx := range s.States {
			got, ok := s.Index(s.State(idx))
			if !ok || got != idx {
				t.Fatalf("%s: Index(State(%d)) = %d, %v", name, idx, got, ok)
			}
		}
	}
	// The papers' count, servers in transit by pair: C(N + M² − 1, M² − 1)·J^M
	// when every pair can switch; by lane, one rate for every pair (M lanes):
	// C(N + 2M − 1, 2M − 1)·J^M.
	m := policyModel(6, []float64{1, 1, 1}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	m.QueueLimit = 15
	if configs, states, _ := countStates(m, true, false); configs != 3003 || states != 3003*3375 {
		t.Errorf("M=3 N=6 J=15 by pair: %d configurations, %d states; want 3003 and 10135125", configs, states)
	}
	if configs, states, _ := CountStates(m); configs != 462 || states != 462*3375 {
		t.Errorf("M=3 N=6 J=15 by lane: %d configurations, %d states; want 462 and 1559250", configs, states)
	}
}

// TestLumpingIsExact compares each model's space (servers in transit by
// lane) with the chain before lumping (by pair): states that differ only
// in where a lane's travelling servers came from must have the same value
// and the same decision after every sweep, discounted and not.
func TestLumpingIsExact(t *testing.T) {
	for name, m := range engineModels() {
		lanes, err := NewSpace(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		pairs, err := newSpace(m, 0, true, false)
		if err != nil {
			t.Fatal(err)
		}
		if name == "three pools" && lanes.Configs >= pairs.Configs {
			t.Fatalf("%s: %d configurations by lane, %d by pair: no two pairs share a lane", name, lanes.Configs, pairs.Configs)
		}
		// to[idx] is the lumped state of pair-space state idx.
		to := make([]int, pairs.States)
		for idx := range pairs.States {
			var ok bool
			if to[idx], ok = lanes.Index(pairs.State(idx)); !ok {
				t.Fatalf("%s: pair-space state %v has no lumped state", name, pairs.State(idx))
			}
		}
		for _, alpha := range []float64{0.9, 1} {
			_, lv, _, lp := thirtySweeps(m, lanes, alpha)
			_, pv, _, pp := thirtySweeps(m, pairs, alpha)
			for idx := range pairs.States {
				if math.Abs(pv[idx]-lv[to[idx]]) > 1e-9*max(1, math.Abs(pv[idx])) || pp[idx] != lp[to[idx]] {
					t.Fatalf("%s α=%g: state %v: by pair value %g, action %d; by lane %g, %d",
						name, alpha, pairs.State(idx), pv[idx], pp[idx], lv[to[idx]], lp[to[idx]])
				}
			}
		}
	}
}

// thirtySweeps runs thirty sweeps of value iteration (α = 1: relative)
// on space s of m from V = 0, and returns the engine, the values, their
// expectations and the policy they decide.
func thirtySweeps(m *Model, s *Space, alpha float64) (*engine, []float64, []float64, []int8) {
	e := newEngine(m, s, alpha, 2)
	V, U := make([]float64, s.States), make([]float64, s.States)
	scratch := [][]float64{make([]float64, s.B), make([]float64, s.B)}
	pol := make([]int8, s.States)
	for range 30 {
		e.expect(U, V)
		e.improve(V, U, 0, scratch)
	}
	e.expect(U, V)
	e.decide(pol, U, nil)
	return e, V, U, pol
}

func TestSpaceTooLarge(t *testing.T) {
	m := policyModel(6, []float64{1, 1, 1}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	m.QueueLimit = 15
	_, err := NewSpace(m, 1_000_000)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
	for _, want := range []string{"1559250 states", "462 configurations", "25.3 MiB", "limit of 1000000 states"} {
		if !bytes.Contains([]byte(err.Error()), []byte(want)) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	huge := policyModel(120, make([]float64, 10), []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, make([]float64, 10), 0.1)
	huge.QueueLimit = 1000
	if _, err := NewSpace(huge, 0); !errors.Is(err, ErrTooLarge) {
		t.Errorf("overflowing space: err = %v, want ErrTooLarge", err)
	}
}

// smallModels are models on which value and policy iteration must agree.
func smallModels() map[string]*Model {
	ms := engineModels()
	t2 := policyModel(2, []float64{0.047, 0.047}, []float64{0.113, 0.113}, []float64{1, 2}, 0.113)
	t2.QueueLimit = 12
	t2.UniformizationMode, t2.Uniformization = UniformizationFixed, 1
	ms["table 2, J=12"] = t2
	return ms
}

func TestValueAndPolicyIterationAgree(t *testing.T) {
	ctx := context.Background()
	for name, m := range smallModels() {
		for _, crit := range []Criterion{Discounted, Average} {
			for _, start := range []string{"heuristic", "cmu"} {
				vi, err := Solve(ctx, m, SolveOptions{Criterion: crit, Method: ValueIteration, Tolerance: 1e-11})
				if err != nil {
					t.Fatal(err)
				}
				pi, err := Solve(ctx, m, SolveOptions{Criterion: crit, Method: PolicyIteration, Tolerance: 1e-11, Start: start})
				if err != nil {
					t.Fatal(err)
				}
				if !vi.Converged || !pi.Converged {
					t.Fatalf("%s %s: converged vi=%v pi=%v", name, crit, vi.Converged, pi.Converged)
				}
				if diff := cmp.Diff(vi.Table.Actions, pi.Table.Actions); diff != "" {
					t.Errorf("%s %s start %s: value and policy iteration differ (-value +policy):\n%s", name, crit, start, diff)
				}
				if crit == Average && math.Abs(vi.AverageCost-pi.AverageCost) > 1e-8*max(1, vi.AverageCost) {
					t.Errorf("%s: average cost %g by value iteration, %g by policy iteration", name, vi.AverageCost, pi.AverageCost)
				}
				if pi.Improvements < 1 {
					t.Errorf("%s: policy iteration made no improvement step", name)
				}
			}
		}
	}
}

// The krylov method and relative value iteration find the same policy, and
// the same optimal average cost within each other's certified bounds, from
// either first policy.
func TestKrylovAndValueIterationAgree(t *testing.T) {
	ctx := context.Background()
	models := smallModels()
	maps.Copy(models, engineModels())
	for name, m := range models {
		vi, err := Solve(ctx, m, SolveOptions{Method: ValueIteration, Tolerance: 1e-11})
		if err != nil {
			t.Fatal(err)
		}
		for _, start := range []string{"heuristic", "cmu"} {
			kr, err := Solve(ctx, m, SolveOptions{Method: Krylov, Tolerance: 1e-11, Start: start})
			if err != nil {
				t.Fatal(err)
			}
			if !vi.Converged || !kr.Converged || kr.Method != Krylov || kr.Fallback != "" {
				t.Fatalf("%s: converged value %v krylov %v, krylov method %s (%s)", name, vi.Converged, kr.Converged, kr.Method, kr.Fallback)
			}
			if diff := cmp.Diff(vi.Table.Actions, kr.Table.Actions); diff != "" {
				t.Errorf("%s start %s: value iteration and krylov differ (-value +krylov):\n%s", name, start, diff)
			}
			eps := 1e-9 * max(1, vi.AverageCost)
			if kr.AverageCostLower > vi.AverageCostUpper+eps || vi.AverageCostLower > kr.AverageCostUpper+eps {
				t.Errorf("%s: certified bounds disjoint: value [%.12g, %.12g], krylov [%.12g, %.12g]", name,
					vi.AverageCostLower, vi.AverageCostUpper, kr.AverageCostLower, kr.AverageCostUpper)
			}
			if kr.AverageCostUpper-kr.AverageCostLower > 1e-9*max(1, kr.AverageCost) {
				t.Errorf("%s: krylov's certified gap [%.12g, %.12g] is wider than the tolerance allows", name, kr.AverageCostLower, kr.AverageCostUpper)
			}
		}
	}
}

// The long-run cost of the average-optimal policy, measured on its
// stationary distribution, is the gain relative value iteration reports.
func TestAverageCostMatchesStationary(t *testing.T) {
	for name, m := range engineModels() {
		sol, err := Solve(context.Background(), m, SolveOptions{Tolerance: 1e-12, Boundary: true})
		if err != nil {
			t.Fatal(err)
		}
		st := sol.Stationary
		if !st.Converged {
			t.Fatalf("%s: stationary distribution did not converge", name)
		}
		if math.Abs(st.Cost-sol.AverageCost) > 1e-6*max(1, sol.AverageCost) {
			t.Errorf("%s: gain·Λ = %.9g, stationary cost = %.9g", name, sol.AverageCost, st.Cost)
		}
		if eps := 1e-9 * max(1, st.Cost); st.Cost < sol.AverageCostLower-eps || st.Cost > sol.AverageCostUpper+eps {
			t.Errorf("%s: the policy's stationary cost %.12g is outside the certified bounds [%.12g, %.12g]", name, st.Cost, sol.AverageCostLower, sol.AverageCostUpper)
		}
		if st.BoundaryFraction <= 0 || st.BoundaryFraction >= 1 {
			t.Errorf("%s: boundary fraction %g", name, st.BoundaryFraction)
		}
	}
}

func TestSolveDeterministicAcrossWorkers(t *testing.T) {
	m := engineModels()["three pools"]
	one, err := Solve(context.Background(), m, SolveOptions{Workers: 1, Boundary: true})
	if err != nil {
		t.Fatal(err)
	}
	two, err := Solve(context.Background(), m, SolveOptions{Workers: 2, Boundary: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(one, two, cmpopts.IgnoreFields(Solution{}, "Table")); diff != "" {
		t.Errorf("1 and 2 workers differ:\n%s", diff)
	}
	if diff := cmp.Diff(one.Table.Actions, two.Table.Actions); diff != "" {
		t.Errorf("1 and 2 workers decide differently:\n%s", diff)
	}
}

func TestFiniteHorizon(t *testing.T) {
	m := engineModels()["two pools"]
	s, err := NewSpace(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := reference{m, s, m.Discount}
	V := make([]float64, s.States)
	var pol []int8
	for range 7 {
		V, pol = ref.sweep(V)
	}
	sol, err := Solve(context.Background(), m, SolveOptions{Criterion: Discounted, Horizon: 7})
	if err != nil {
		t.Fatal(err)
	}
	if sol.Sweeps != 7 || !sol.Converged {
		t.Errorf("sweeps %d converged %v, want 7 true", sol.Sweeps, sol.Converged)
	}
	if diff := cmp.Diff(V, sol.Values, cmpopts.EquateApprox(1e-12, 1e-12)); diff != "" {
		t.Errorf("V_7 differs (-reference +solve):\n%s", diff)
	}
	if diff := cmp.Diff(pol, sol.Table.Actions); diff != "" {
		t.Errorf("decisions with 7 steps to go differ (-reference +solve):\n%s", diff)
	}
}

func TestSolveOptionsErrors(t *testing.T) {
	m := engineModels()["two pools"]
	for _, tc := range []struct {
		opts SolveOptions
		want string
	}{
		{SolveOptions{Criterion: "fast"}, `criterion "fast": must be "average" or "discounted"`},
		{SolveOptions{Method: "magic"}, `method "magic": must be "value", "policy" or "krylov"`},
		{SolveOptions{Method: Krylov, Criterion: Discounted}, `method "krylov": solves the "average" criterion only`},
		{SolveOptions{Tolerance: -1}, "tolerance -1: must be > 0"},
		{SolveOptions{Horizon: 3}, "horizon: the finite-horizon recurrence uses the discounted criterion"},
		{SolveOptions{Horizon: 3, Criterion: Discounted, Method: PolicyIteration}, "horizon: finite horizons are solved by value iteration only"},
		{SolveOptions{Method: PolicyIteration, Start: "random"}, `start "random": must be heuristic or cmu`},
	} {
		_, err := Solve(context.Background(), m, tc.opts)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: err = %v, want %q", tc.opts, err, tc.want)
		}
	}
	bad := *m
	bad.Servers = 0
	if _, err := Solve(context.Background(), &bad, SolveOptions{}); err == nil {
		t.Error("invalid model solved")
	}
}

func TestSolveCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := engineModels()["two pools"]
	calls := 0
	_, err := Solve(ctx, m, SolveOptions{Tolerance: 1e-300, Progress: func(Progress) {
		if calls++; calls == 3 {
			cancel()
		}
	}})
	if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want ErrCanceled wrapping context.Canceled", err)
	}
	if calls != 3 {
		t.Errorf("%d sweeps ran, want 3 (the cancel is seen before the next sweep)", calls)
	}
}

func TestUnconvergedIsReported(t *testing.T) {
	m := engineModels()["two pools"]
	sol, err := Solve(context.Background(), m, SolveOptions{Criterion: Discounted, MaxSweeps: 5})
	if err != nil {
		t.Fatal(err)
	}
	if sol.Converged || sol.Sweeps != 5 || sol.Residual < 1e-6 {
		t.Errorf("converged %v after %d sweeps, residual %g; want false, 5, > tolerance", sol.Converged, sol.Sweeps, sol.Residual)
	}
}

// On the truncated chain the average-optimal policy costs no more than any
// other policy, and the simple policies are worse on models that reward
// switching.
func TestOptimalBeatsOtherPolicies(t *testing.T) {
	ctx := context.Background()
	for name, m := range engineModels() {
		sol, err := Solve(ctx, m, SolveOptions{Tolerance: 1e-12, Boundary: true})
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHeuristic(m, 5)
		if err != nil {
			t.Fatal(err)
		}
		h1, err := NewHeuristic(m, 1)
		if err != nil {
			t.Fatal(err)
		}
		for pname, p := range map[string]Policy{"heuristic K=5": h, "heuristic K=1": h1, "static": NewStatic(m), "cmu": NewCMu(m)} {
			st, err := EvaluatePolicy(ctx, m, p, SolveOptions{Tolerance: 1e-12})
			if err != nil {
				t.Fatalf("%s %s: %v", name, pname, err)
			}
			if st.Cost < sol.Stationary.Cost-1e-9 {
				t.Errorf("%s: %s costs %.9g, less than the optimum %.9g", name, pname, st.Cost, sol.Stationary.Cost)
			}
		}
	}
}

// fig4 is Fisher et al.'s Figure 4 setting at total load 3.4: N = 4, M = 3,
// µ = 1, ζ = 0.1, c = (2, 1, 1), J = 15, Λ auto = 7.4, blocking auto.
func fig4() *Model {
	l := 3.4 / 3
	m := policyModel(4, []float64{l, l, l}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	m.QueueLimit = 15
	m.BlockingAuto = true
	return m
}

// The discounted criterion is myopic: in the Figure 4 setting of the papers'
// model (blocked arrivals free) its optimal policy starts no switch from the
// static allocation (2,1,1), whatever the queues, so a system started there
// never switches: it is the static policy. (With blocking_cost auto it
// switches only when a queue is at the truncation, in 29 of the 3375 states.)
func TestDiscountedPolicyNeverSwitchesInFig4(t *testing.T) {
	if testing.Short() {
		t.Skip("425,250 states")
	}
	m := fig4()
	m.BlockingAuto = false
	if diff := cmp.Diff([]int{2, 1, 1}, StaticAllocation(m)); diff != "" {
		t.Fatalf("static allocation (-want +got):\n%s", diff)
	}
	sol, err := Solve(context.Background(), m, SolveOptions{Criterion: Discounted, Boundary: true})
	if err != nil {
		t.Fatal(err)
	}
	if !sol.Converged {
		t.Fatal("not converged")
	}
	s := sol.Table.Space
	base, _ := s.Index(State{Jobs: []int{0, 0, 0}, Servers: []int{2, 1, 1}})
	for idx := base; idx < base+s.B; idx++ {
		if a := sol.Table.Actions[idx]; a != 0 {
			t.Fatalf("state %v: the discounted policy switches (action %d)", s.State(idx), a)
		}
	}
	static, err := EvaluatePolicy(context.Background(), m, NewStatic(m), SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(static.Cost-sol.Stationary.Cost) > 1e-9*static.Cost {
		t.Errorf("discounted policy costs %g in the long run, the static policy %g: want equal", sol.Stationary.Cost, static.Cost)
	}
	// The average-cost policy of the same model does switch.
	avg, err := Solve(context.Background(), fig4(), SolveOptions{MaxSweeps: 200})
	if err != nil {
		t.Fatal(err)
	}
	switches := 0
	for _, a := range avg.Table.Actions {
		if a != 0 {
			switches++
		}
	}
	if switches == 0 {
		t.Error("the average-cost policy never switches either")
	}
}

func TestTooManyServers(t *testing.T) {
	m := policyModel(200, []float64{1, 1}, []float64{1, 1}, []float64{1, 1}, 1)
	m.QueueLimit = 3
	if _, err := NewSpace(m, 0); err == nil || err.Error() != "servers: 200 servers, a policy table holds at most 127" {
		t.Errorf("err = %v", err)
	}
	s, err := NewSpace(engineModels()["two pools"], 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Index(policyState([]int{0, 0}, []int{300, -298})); ok {
		t.Error("a state with 300 servers at a pool was indexed")
	}
}

// The long-run analysis after a solve has a budget of its own: by default
// ten times the solve's work (at least 10^8 state updates, at most
// 100,000 sweeps). When it stops at the budget it says so, with the
// residual; otherwise it converges as before.
func TestBoundaryBudget(t *testing.T) {
	for _, tc := range []struct {
		sweeps, states, want int
	}{
		{20, 850_500, 200},            // policy solve --horizon 20 at N = 5: not the 100,000 of the solve's cap
		{303, 1_559_250, 3030},        // the N = 6 discounted solve: its analysis needs 2,730
		{5, 9000, 11111},              // a small model: the floor of 10^8 state updates
		{50_000, 10_000_000, 100_000}, // never more than the ceiling
		{0, 1 << 40, 1},
	} {
		if got := DefaultBoundarySweeps(tc.sweeps, tc.states); got != tc.want {
			t.Errorf("DefaultBoundarySweeps(%d, %d) = %d, want %d", tc.sweeps, tc.states, got, tc.want)
		}
	}
	m := engineModels()["two pools"]
	var last Progress
	sol, err := Solve(context.Background(), m, SolveOptions{Criterion: Discounted, Horizon: 3, Boundary: true, BoundarySweeps: 4,
		Progress: func(p Progress) { last = p }})
	if err != nil {
		t.Fatal(err)
	}
	st := sol.Stationary
	if st.Converged || st.Sweeps != 4 || st.MaxSweeps != 4 || !(st.Residual > 1e-6) {
		t.Errorf("analysis capped at 4 sweeps: %+v; want not converged after 4 sweeps, residual above the tolerance", st)
	}
	if last.Phase != "stationary" || last.Sweep != 4 || last.MaxSweeps != 4 {
		t.Errorf("last progress %+v, want the analysis's 4th sweep of 4", last)
	}
	sol, err = Solve(context.Background(), m, SolveOptions{Criterion: Discounted, Horizon: 3, Boundary: true})
	if err != nil {
		t.Fatal(err)
	}
	if st := sol.Stationary; !st.Converged || st.MaxSweeps != DefaultBoundarySweeps(3, sol.Table.Space.States) || st.Sweeps >= st.MaxSweeps {
		t.Errorf("default budget on a small model: %+v, want converged within DefaultBoundarySweeps", st)
	}
	if _, err := Solve(context.Background(), m, SolveOptions{Boundary: true, BoundarySweeps: -1}); err == nil {
		t.Error("negative BoundarySweeps accepted")
	}
	// A krylov iteration is about four sweeps of work: the budget counts
	// it so (fisher-fig4-load3.4's analysis needs 1,387 sweeps after a
	// solve of 117 iterations and 12 improvements).
	sol, err = Solve(context.Background(), m, SolveOptions{Method: Krylov, Boundary: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := sol.Work(); sol.Improvements == 0 || w != KrylovSweepWork*sol.Sweeps+sol.Improvements {
		t.Errorf("work of a krylov solve of %d iterations and %d improvements: %d", sol.Sweeps, sol.Improvements, w)
	}
	if got := DefaultBoundarySweeps(KrylovSweepWork*117+12, 425_250); got != 4800 {
		t.Errorf("the budget after fisher-fig4-load3.4's solve: %d sweeps, want 4,800", got)
	}
}

// A model whose optimal chain is two states, solved by hand: one server,
// pool a with λ = 1, µ = 2, c = 1 and J = 2 (its queue is 0 or 1, an
// arrival at 1 blocked at the price c·J/µ = 1); pool b gets no jobs, and a
// server there moves to a at once. In the long run the queue of a is 1 a
// third of the time (λ/(λ+µ)), at the rate c + λ·1 = 2: the optimal
// average cost is 2/3.
func TestTwoStateChainByHand(t *testing.T) {
	m := policyModel(1, []float64{1, 0}, []float64{2, 2}, []float64{1, 1}, 1)
	m.QueueLimit = 2
	m.BlockingAuto = true
	m.InstantSwitches = true
	const want = 2.0 / 3
	for _, method := range []Method{ValueIteration, PolicyIteration, Krylov} {
		sol, err := Solve(context.Background(), m, SolveOptions{Method: method, Tolerance: 1e-12})
		if err != nil {
			t.Fatal(err)
		}
		if !sol.Converged {
			t.Fatalf("%s: not converged", method)
		}
		if !(sol.AverageCostLower <= want+1e-12 && want-1e-12 <= sol.AverageCostUpper) || sol.AverageCostUpper-sol.AverageCostLower > 1e-9 {
			t.Errorf("%s: certified bounds [%.15g, %.15g], want them around %.15g", method, sol.AverageCostLower, sol.AverageCostUpper, want)
		}
		if math.Abs(sol.AverageCost-want) > 1e-9 {
			t.Errorf("%s: average cost %.15g, want %.15g", method, sol.AverageCost, want)
		}
		// The server at b moves to a job waiting at a (with none, moving
		// now or later costs the same: a tie, where doing nothing wins).
		idx, ok := sol.Table.Space.Index(State{Jobs: []int{1, 0}, Servers: []int{0, 1}})
		if !ok {
			t.Fatal("no state with the server at b")
		}
		if d := sol.Table.Actions[idx]; d == int8(NoAction) {
			t.Errorf("%s: the server at b stays there with a job waiting at a", method)
		}
	}
}

// fig3N is Fisher et al.'s Figure 3 rates at n servers and queue limit j:
// type 1 a thousand times slower and rarer (µ = (0.001, 1, 1),
// λ_1 = λ_2/1000), load 4n/5 split equally, c = (2, 1, 1), ζ = 0.1.
func fig3N(n, j int) *Model {
	rho := 0.8 * float64(n) / 3
	m := policyModel(n, []float64{rho / 1000, rho, rho}, []float64{0.001, 1, 1}, []float64{2, 1, 1}, 0.1)
	m.QueueLimit = j
	m.BlockingAuto = true
	return m
}

// On a stiff model (Figure 3's rates at N = 2, J = 8: type 1's events are
// a thousand times rarer than the others') relative value iteration is far
// from converged after 2,000 sweeps, and the krylov method certifies the
// optimum to 1e-8 relative, inside value iteration's wide bounds.
func TestKrylovConvergesOnStiffModel(t *testing.T) {
	ctx := context.Background()
	m := fig3N(2, 8)
	vi, err := Solve(ctx, m, SolveOptions{Method: ValueIteration, MaxSweeps: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if vi.Converged {
		t.Fatalf("relative value iteration converged in %d sweeps: the model is not stiff", vi.Sweeps)
	}
	kr, err := Solve(ctx, m, SolveOptions{Tolerance: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if kr.Method != Krylov || !kr.Converged || kr.Fallback != "" {
		t.Fatalf("krylov: method %s converged %v (%s)", kr.Method, kr.Converged, kr.Fallback)
	}
	if gap := (kr.AverageCostUpper - kr.AverageCostLower) / kr.AverageCostUpper; gap > 1e-8 {
		t.Errorf("krylov certified [%.12g, %.12g], a relative gap of %.3g", kr.AverageCostLower, kr.AverageCostUpper, gap)
	}
	if kr.AverageCostLower < vi.AverageCostLower-1e-9 || kr.AverageCostUpper > vi.AverageCostUpper+1e-9 {
		t.Errorf("krylov's bounds [%.12g, %.12g] are not within value iteration's [%.12g, %.12g]",
			kr.AverageCostLower, kr.AverageCostUpper, vi.AverageCostLower, vi.AverageCostUpper)
	}
}
