package switching

import (
	"context"
	"math"
	"testing"
)

func TestLowerBlocking(t *testing.T) {
	for _, c := range []struct {
		c, mu float64
		j, n  int
		want  float64
	}{{2, 0.5, 10, 4, 6}, {1, 1, 5, 4, 0.25}, {1, 1, 4, 4, 0}, {3, 1, 2, 6, 0}} {
		if got := LowerBlocking(c.c, c.mu, c.j, c.n); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("LowerBlocking(c %g, µ %g, J %d, N %d) = %g, want %g", c.c, c.mu, c.j, c.n, got, c.want)
		}
	}
}

// With blocking priced "lower", the truncated optimum is a lower bound on
// the untruncated system's at every J, and closes on it as J grows; the
// default price, c·J/µ, is no such bound: on this model (six servers, one
// pool loaded, blocking at a short queue that six servers would clear
// fast) it overshoots the untruncated optimum at a short J. The
// untruncated optimum is taken at J = 40, where both prices agree.
func TestLowerBlockingBoundsTheUntruncated(t *testing.T) {
	solve := func(j int, lower bool) *Solution {
		t.Helper()
		m := policyModel(6, []float64{3, 0.5}, []float64{1, 1}, []float64{1, 1}, 1)
		m.QueueLimit = j
		m.BlockingAuto, m.BlockingLower = !lower, lower
		s, err := Solve(context.Background(), m, SolveOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	refLower, refAuto := solve(40, true), solve(40, false)
	if d := math.Abs(refLower.AverageCost-refAuto.AverageCost) / refAuto.AverageCost; d > 1e-6 {
		t.Fatalf("at J = 40 the two prices still differ by %.3g (%.9g, %.9g): not the untruncated optimum", d, refLower.AverageCost, refAuto.AverageCost)
	}
	ref := max(refLower.AverageCostUpper, refAuto.AverageCostUpper)
	t.Logf("untruncated optimum %.9g", ref)
	prev := 0.0
	for _, j := range []int{3, 4, 6, 9, 13, 19, 28} {
		lo := solve(j, true)
		t.Logf("J = %2d: lower price %.9g [%.9g, %.9g]", j, lo.AverageCost, lo.AverageCostLower, lo.AverageCostUpper)
		if lo.AverageCostLower > ref {
			t.Errorf("J = %d: the optimum with the lower price, %.9g, is above the untruncated one %.9g", j, lo.AverageCostLower, ref)
		}
		if lo.AverageCost < prev {
			t.Errorf("J = %d: the lower bound fell from %.9g to %.9g", j, prev, lo.AverageCost)
		}
		prev = lo.AverageCost
	}
	if gap := (ref - prev) / ref; gap > 1e-4 {
		t.Errorf("at J = 28 the lower bound %.9g is still %.3g below the untruncated optimum %.9g", prev, gap, ref)
	}
	if auto := solve(3, false); auto.AverageCostLower <= ref {
		t.Errorf("at J = 3 the default price gives %.9g, not above the untruncated optimum %.9g: this model no longer shows why the lower price is needed", auto.AverageCostLower, ref)
	}
}
