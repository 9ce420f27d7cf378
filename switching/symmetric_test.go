package switching

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// symmetricModels are models with exchangeable pools, small enough to
// compare with their unlumped chains state by state.
func symmetricModels() map[string]*Model {
	fig4 := policyModel(4, []float64{0.9, 0.9, 0.9}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	fig4.QueueLimit, fig4.BlockingAuto = 6, true
	three := policyModel(3, []float64{0.8, 0.8, 0.8}, []float64{1, 1, 1}, []float64{1, 1, 1}, 0.2)
	three.QueueLimit, three.BlockingAuto = 5, true
	two := policyModel(3, []float64{0.5, 0.5, 0.3, 0.3}, []float64{1, 1, 0.5, 0.5}, []float64{1, 1, 3, 3}, 0.3)
	two.QueueLimit, two.BlockingAuto = 4, true
	costs := policyModel(3, []float64{0.4, 0.7, 0.7}, []float64{1, 1, 1}, []float64{3, 1, 1}, 0.5)
	costs.QueueLimit, costs.BlockingAuto = 5, true
	costs.SwitchCosts = [][]float64{{0, 2, 2}, {1, 0, 4}, {1, 4, 0}}
	instant := policyModel(3, []float64{0.6, 0.6, 0.6}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0)
	instant.QueueLimit, instant.BlockingAuto, instant.InstantSwitches = 6, true, true
	instant.SwitchCosts = [][]float64{{0, 1, 1}, {1, 0, 1}, {1, 1, 0}}
	// Figure 3's rates: the krylov method's coarse level aggregates over
	// the slow pool 0, which the lumping of 1 and 2 leaves in place.
	fig3 := policyModel(3, []float64{0.0008, 0.8, 0.8}, []float64{0.001, 1, 1}, []float64{2, 1, 1}, 0.1)
	fig3.QueueLimit, fig3.BlockingAuto = 6, true
	return map[string]*Model{"figure 4": fig4, "three alike": three, "two pairs": two, "switch costs": costs, "instant": instant,
		"figure 3": fig3}
}

// The groups of exchangeable pools: only pools that swapping changes
// nothing of.
func TestSymmetricPools(t *testing.T) {
	want := map[string][][]int{"figure 4": {{1, 2}}, "three alike": {{0, 1, 2}}, "two pairs": {{0, 1}, {2, 3}},
		"switch costs": {{1, 2}}, "instant": {{1, 2}}, "figure 3": {{1, 2}}}
	for name, m := range symmetricModels() {
		if diff := cmp.Diff(want[name], SymmetricPools(m)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	m := symmetricModels()["switch costs"]
	m.SwitchCosts[0][2] = 3 // pool 0 → 2 dearer than 0 → 1
	if g := SymmetricPools(m); g != nil {
		t.Errorf("switch costs from pool 0 differ: groups %v", g)
	}
	m = symmetricModels()["figure 4"]
	m.Pools[2].QueueLimit = 7
	if g := SymmetricPools(m); g != nil {
		t.Errorf("truncations differ: groups %v", g)
	}
	// Figure 3's slow pool would be lumped with nothing; were two pools
	// slow, the coarse level's pool keeps them apart.
	slow := policyModel(3, []float64{0.0008, 0.0008, 0.8}, []float64{0.001, 0.001, 1}, []float64{1, 1, 1}, 0.1)
	if g := SymmetricPools(slow); g != nil {
		t.Errorf("the coarse level's pool %d lumped: groups %v", CoarsePool(slow), g)
	}
}

// TestSymmetricLumpingIsExact compares each model's lumped space with the
// unlumped one: every state of the chain has a canonical state whose
// values, after the same sweeps, are its own (discounted and average), and
// whose action, mapped back to the state's pools, is optimal there. Then
// the solves: the same optimum, the same long-run figures, and the lumped
// table run on the whole chain costs the optimum.
func TestSymmetricLumpingIsExact(t *testing.T) {
	for name, m := range symmetricModels() {
		full, err := NewSpace(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		sym, err := NewSymmetricSpace(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, count, _ := CountSymmetricStates(m)
		t.Logf("%s: %d configurations and %d states unlumped, %d and %d lumped (%.2f×)", name, full.Configs, full.States,
			sym.Configs, sym.States, float64(full.States)/float64(sym.States))
		if sym.States >= full.States || int(count) != sym.States {
			t.Fatalf("%s: %d states lumped (counted %d), %d not", name, sym.States, count, full.States)
		}
		type at struct {
			idx int
			to  [MaxPools]int8
		}
		to := make([]at, full.States)
		for idx := range full.States {
			i, p, ok := sym.lookup(full.State(idx))
			if !ok {
				t.Fatalf("%s: state %v has no canonical state", name, full.State(idx))
			}
			to[idx] = at{i, p}
		}
		for _, alpha := range []float64{0.9, 1} {
			fe, fv, fu, fp := thirtySweeps(m, full, alpha)
			_, sv, _, sp := thirtySweeps(m, sym, alpha)
			for idx := range full.States {
				k := to[idx]
				if math.Abs(fv[idx]-sv[k.idx]) > 1e-9*max(1, math.Abs(fv[idx])) {
					t.Fatalf("%s α=%g: state %v: value %g unlumped, %g lumped", name, alpha, full.State(idx), fv[idx], sv[k.idx])
				}
				c, j := idx/full.B, idx%full.B
				d := sym.unmap(Action(sp[k.idx]), k.to)
				best := fe.actionValue(fu, c, j, Action(fp[idx]))
				if got := fe.actionValue(fu, c, j, d); got > best+tieTolerance(best) {
					t.Fatalf("%s α=%g: state %v: the lumped action %d is worth %g, the best %g (action %d)",
						name, alpha, full.State(idx), d, got, best, fp[idx])
				}
			}
		}
		ctx := context.Background()
		opts := SolveOptions{Tolerance: 1e-9, Boundary: true}
		lumped, err := Solve(ctx, m, opts)
		if err != nil {
			t.Fatal(err)
		}
		opts.Unlumped = true
		whole, err := Solve(ctx, m, opts)
		if err != nil {
			t.Fatal(err)
		}
		if lumped.Table.Space.States != sym.States || whole.Table.Space.States != full.States {
			t.Fatalf("%s: solved on %d and %d states", name, lumped.Table.Space.States, whole.Table.Space.States)
		}
		gap := max(lumped.AverageCostUpper-lumped.AverageCostLower, whole.AverageCostUpper-whole.AverageCostLower)
		if math.Abs(lumped.AverageCost-whole.AverageCost) > gap {
			t.Errorf("%s: optimum %.10g lumped, %.10g not (gap %.2g)", name, lumped.AverageCost, whole.AverageCost, gap)
		}
		// Per pool, the lumped chain gives each group's mean: the unlumped
		// optimum breaks ties between exchangeable pools by their order
		// (Figure 3's pools 1 and 2 sit at J−1 17% and 20% of the time),
		// a policy as optimal as its mirror image.
		ls, ws := lumped.Stationary, whole.Stationary
		sym.symmetrize(ws.PoolBoundary)
		if math.Abs(ls.BoundaryFraction-ws.BoundaryFraction) > 1e-7 || math.Abs(ls.HoldingCost-ws.HoldingCost) > 1e-6*ws.HoldingCost ||
			!slices.EqualFunc(ls.PoolBoundary, ws.PoolBoundary, func(a, b float64) bool { return math.Abs(a-b) <= 1e-7 }) {
			t.Errorf("%s: long run lumped %+v, unlumped %+v", name, ls, ws)
		}
		// The lumped table, looked up at every state of the whole chain,
		// costs the optimum there; where the unlumped table's own chain
		// splits (the instant model's optimum keeps some allocations
		// apart), so does the lumped one's.
		_, split := PolicyGain(ctx, m, whole.Table, SolveOptions{Tolerance: 1e-9})
		g, err := PolicyGain(ctx, m, lumped.Table, SolveOptions{Tolerance: 1e-9})
		switch {
		case split != nil && errors.Is(split, ErrSplitChain) && errors.Is(err, ErrSplitChain):
		case split != nil || err != nil:
			t.Fatalf("%s: the unlumped table on the whole chain: %v; the lumped one: %v", name, split, err)
		case math.Abs(g.Cost-whole.AverageCost) > gap+(g.Upper-g.Lower):
			t.Errorf("%s: the lumped table costs %.10g on the whole chain, the optimum is %.10g", name, g.Cost, whole.AverageCost)
		}
		// A saved table keeps its lumping.
		var buf bytes.Buffer
		if err := WriteTable(&buf, lumped.Table); err != nil {
			t.Fatal(err)
		}
		back, err := ReadTable(&buf, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !cmp.Equal(back.Space.Symmetric, sym.Symmetric) || !slices.Equal(back.Actions, lumped.Table.Actions) {
			t.Errorf("%s: table read back lumps %v", name, back.Space.Symmetric)
		}
		for idx := 0; idx < full.States; idx += 7 {
			if st := full.State(idx); back.Decide(st) != lumped.Table.Decide(st) {
				t.Fatalf("%s: state %v: %d read back, %d solved", name, st, back.Decide(st), lumped.Table.Decide(st))
			}
		}
	}
}

// Figure 4's space: 126 configurations become 70.
func TestSymmetricStateCounts(t *testing.T) {
	m := policyModel(4, []float64{1, 1, 1}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	m.QueueLimit = 15
	c, s, _ := CountStates(m)
	lc, ls, _ := CountSymmetricStates(m)
	if c != 126 || s != 126*3375 || lc != 70 || ls != 70*3375 {
		t.Errorf("configurations and states: %d and %d, lumped %d and %d; want 126 and 425250, 70 and 236250", c, s, lc, ls)
	}
}
