package switching

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// growModel is two pools of unequal load on three servers: pool a carries
// most of it, so its queue needs a longer truncation than b's.
func growModel() *Model {
	m := policyModel(3, []float64{0.9, 0.2}, []float64{0.5, 0.5}, []float64{1, 2}, 0.5)
	m.QueueLimit = 4
	m.BlockingAuto = true
	return m
}

// A growth ends settled: every pool's boundary mass under the tolerance,
// the optimum within the gap when every J grew last, the loaded pool's J
// longer than the other's; and the warm-started solve at the truncation it
// chose has the cold solve's optimum and policy.
func TestGrowTruncation(t *testing.T) {
	m := growModel()
	var seen []TruncationStep
	tr, err := GrowTruncation(context.Background(), m, SolveOptions{}, GrowOptions{BoundaryTolerance: 1e-5,
		Step: func(s TruncationStep) { seen = append(seen, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Settled || tr.Stopped != "" {
		t.Fatalf("not settled (%q) after %d steps", tr.Stopped, len(tr.Steps))
	}
	if diff := cmp.Diff(tr.Steps, seen); diff != "" {
		t.Errorf("the steps reported differ from those returned:\n%s", diff)
	}
	if m.QueueLimit != 4 || m.Pools[0].QueueLimit != 0 {
		t.Errorf("the model given was changed: J = %s", FormatLimits(m.Limits()))
	}
	js := tr.Limits()
	t.Logf("%d steps to J = %s", len(tr.Steps), FormatLimits(js))
	for k, s := range tr.Steps {
		t.Logf("J = %-6s %6d states, cost %.9g in [%.9g, %.9g], boundary %.3g", FormatLimits(s.Limits), s.States, s.AverageCost, s.Lower, s.Upper, s.Boundary)
		if k > 0 {
			p := tr.Steps[k-1]
			for i := range s.Limits {
				if s.Limits[i] < p.Limits[i] || s.Limits[i] > p.Limits[i] && s.Limits[i] != GrowStep(p.Limits[i]) {
					t.Errorf("step %d: J%d went from %d to %d, not by a step", k, i+1, p.Limits[i], s.Limits[i])
				}
			}
		}
	}
	last, prev := tr.Steps[len(tr.Steps)-1], tr.Steps[len(tr.Steps)-2]
	for i, b := range last.Boundary {
		if b >= 1e-5 || prev.Boundary[i] >= 1e-5 {
			t.Errorf("pool %d: boundary mass %.3g, before the last step %.3g: want both under 1e-5", i, b, prev.Boundary[i])
		}
		if last.Limits[i] != GrowStep(prev.Limits[i]) {
			t.Errorf("pool %d: the last step grew J from %d to %d, want every pool grown by a step", i, prev.Limits[i], last.Limits[i])
		}
	}
	if d, gap := math.Abs(last.AverageCost-prev.AverageCost), max(last.Upper-last.Lower, prev.Upper-prev.Lower); d > gap {
		t.Errorf("the optimum moved by %.3g in the last step, more than the gap %.3g", d, gap)
	}
	if js[0] <= js[1] {
		t.Errorf("J = %s: the loaded pool a should need the longer truncation", FormatLimits(js))
	}
	// The first steps grow only the pools over the tolerance.
	if first, second := tr.Steps[0].Limits, tr.Steps[1].Limits; first[1] == second[1] && first[0] == second[0] {
		t.Errorf("the first step grew nothing: %v, %v", first, second)
	}

	cold := *m
	cold.Pools = append([]Pool(nil), m.Pools...)
	cold.SetLimits(js)
	want, err := Solve(context.Background(), &cold, SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := tr.Solution
	if math.Abs(got.AverageCost-want.AverageCost) > max(got.AverageCostUpper-got.AverageCostLower, 1e-9*want.AverageCost) {
		t.Errorf("warm optimum %.12g, cold %.12g", got.AverageCost, want.AverageCost)
	}
	differ := 0
	for i := range want.Table.Actions {
		if want.Table.Actions[i] != got.Table.Actions[i] {
			differ++
		}
	}
	// Ties may be broken either way; the two must be the same policy
	// nearly everywhere.
	if differ > len(want.Table.Actions)/1000 {
		t.Errorf("the warm and cold policies differ in %d of %d states", differ, len(want.Table.Actions))
	}
}

// A warm start from a smaller truncation gives the cold solve's optimum,
// for each method.
func TestWarmStart(t *testing.T) {
	small := growModel()
	small.SetLimits([]int{5, 4})
	big := growModel()
	big.SetLimits([]int{9, 6})
	for _, method := range []Method{Krylov, PolicyIteration, ValueIteration} {
		o := SolveOptions{Method: method, Tolerance: 1e-9}
		from, err := Solve(context.Background(), small, o)
		if err != nil {
			t.Fatal(err)
		}
		cold, err := Solve(context.Background(), big, o)
		if err != nil {
			t.Fatal(err)
		}
		o.Warm = from
		warm, err := Solve(context.Background(), big, o)
		if err != nil {
			t.Fatal(err)
		}
		if !warm.Converged || math.Abs(warm.AverageCost-cold.AverageCost) > 1e-6*cold.AverageCost {
			t.Errorf("%s: warm %.12g (converged %v), cold %.12g", method, warm.AverageCost, warm.Converged, cold.AverageCost)
		}
		t.Logf("%s: %d sweeps cold, %d warm", method, cold.Sweeps, warm.Sweeps)
	}
	// A solution of another model is refused.
	other := growModel()
	other.Servers = 2
	from, err := Solve(context.Background(), other, SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Solve(context.Background(), big, SolveOptions{Warm: from}); err == nil || !strings.Contains(err.Error(), "warm start") {
		t.Errorf("a warm start from another model: %v", err)
	}
}

// The growth stops at the states it is given, with the largest truncation
// it reached, and says so; a first truncation already over them is
// ErrTooLarge.
func TestGrowTruncationLimits(t *testing.T) {
	m := growModel()
	tr, err := GrowTruncation(context.Background(), m, SolveOptions{}, GrowOptions{BoundaryTolerance: 1e-9, MaxStates: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Settled || !strings.Contains(tr.Stopped, "more states than the 2000 given") {
		t.Errorf("settled %v, stopped %q", tr.Settled, tr.Stopped)
	}
	if n := tr.Steps[len(tr.Steps)-1].States; n > 2000 || tr.Solution.Table.Space.States != n {
		t.Errorf("the last solve has %d states", n)
	}
	if _, err := GrowTruncation(context.Background(), m, SolveOptions{}, GrowOptions{MaxStates: 10}); err == nil || !strings.Contains(err.Error(), "state space too large") {
		t.Errorf("a first truncation over the limit: %v", err)
	}
	for _, g := range []GrowOptions{{BoundaryTolerance: 2}, {BoundaryTolerance: -1}, {MaxStates: -1}, {MaxSeconds: 5}} {
		if _, err := GrowTruncation(context.Background(), m, SolveOptions{}, g); err == nil {
			t.Errorf("%+v: no error", g)
		}
	}
	if _, err := GrowTruncation(context.Background(), m, SolveOptions{Criterion: Discounted}, GrowOptions{}); err == nil {
		t.Error("the discounted criterion: no error")
	}
}

// The time limit stops a growth when it is spent, and before a solve that
// would spend it: at the last solve's time per state after one solve, and
// with the time grown as the last two solves' grew after two.
func TestGrowTruncationTime(t *testing.T) {
	m := growModel() // J = 4: 20 configurations × 16 queue vectors
	last := TruncationStep{Limits: []int{4, 4}, States: 320, Seconds: 10}
	quadratic := &TruncationStep{Limits: []int{3, 3}, States: 160, Seconds: 2.5} // twice the states, four times the time
	sublinear := &TruncationStep{Limits: []int{3, 3}, States: 160, Seconds: 9}
	for _, tc := range []struct {
		prev          *TruncationStep
		next          []int
		seconds, give float64
		want          string
	}{
		{nil, []int{6, 6}, 10, 100, ""},                             // 720 states: about 22.5 s more, 32.5 in all
		{nil, []int{6, 6}, 80, 100, "would take about 22.5 s more"}, // 102.5 > 100
		{nil, []int{6, 4}, 80, 100, ""},                             // 480 states: 15 s more, 95 in all
		{nil, []int{6, 6}, 100, 100, "the solves took 100 s, the time given was 100 s"},
		{quadratic, []int{6, 6}, 40, 100, ""},                                                                        // 10·2.25² = 50.6 s more, 90.6 in all
		{quadratic, []int{6, 6}, 60, 100, "would take about 50.6 s more"},                                            // 110.6 > 100
		{sublinear, []int{6, 6}, 80, 100, "would take about 22.5 s more (the last one's time grown as states^1.00)"}, // never under the time per state
	} {
		got := overTime(tc.prev, last, tc.next, m, false, tc.seconds, tc.give)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("J = %s after %g of %g s: %q, want %q", FormatLimits(tc.next), tc.seconds, tc.give, got, tc.want)
		}
	}
}
