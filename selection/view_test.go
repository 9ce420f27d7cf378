package selection

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestFastEvaluationMatchesSizing checks the climb's fast evaluation (alone
// parts, thresholds, suffix sums) against the plain sizing of every cluster,
// on random plans and moves of random problems.
func TestFastEvaluationMatchesSizing(t *testing.T) {
	for i := range 2000 {
		rng := rand.New(rand.NewPCG(9, uint64(i)))
		pl, err := NewPlanner(randomProblem(rng, 2+rng.IntN(14)))
		if err != nil {
			t.Fatal(err)
		}
		if len(pl.cand) < 2 {
			continue
		}
		m := pl.cand[rng.IntN(len(pl.cand))]
		var others, outside []int
		for _, c := range pl.cand {
			switch {
			case c == m:
			case rng.IntN(2) == 0:
				others = append(others, c)
			default:
				outside = append(outside, c)
			}
		}
		h := newClimb(pl, m, others, false)
		check := func(skip, add int) {
			t.Helper()
			got := h.evalSame(skip, add)
			set := slices.DeleteFunc(slices.Clone(others), func(c int) bool { return c == skip })
			if add >= 0 {
				set = append(set, add)
			}
			slices.Sort(set)
			want := capped(pl, m, set)
			if got.machines != want.machines || math.Abs(got.r-want.r) > 1e-12*want.r+1e-15 || math.Abs(got.cost-want.cost) > 1e-9*(1+want.cost) {
				t.Fatalf("problem %d, master %d, workers %v, skip %d, add %d: fast %+v, sizing %+v", i, m, others, skip, add, got, want)
			}
		}
		check(-1, -1)
		for _, a := range others {
			check(a, -1)
		}
		for _, b := range outside {
			check(-1, b)
			for _, a := range others {
				check(a, b)
			}
		}
	}
}

// capped returns the fluid value of the capped plan (m, set) by the plain
// sizing: every machine the caps allow.
func capped(pl *Planner, m int, set []int) fluid {
	var f fluid
	for _, p := range pl.parts(m, set) {
		f = pl.plus(f, p)
	}
	f.machines++
	f.cost += pl.cost[m]
	return f
}
