package switching

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The coarse level's aggregated system, assembled from the chain's
// structure by post-decision configuration, is Rᵀ W A R summed entry by
// entry from the system's rows; and its correction r − A z₀ is the
// system's own product with the prolonged z₀. Checked with the
// aggregates over each queue in turn.
func TestCoarseSystemMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for name, m := range engineModels() {
		s, err := NewSpace(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		for pool := range s.M {
			checkCoarse(t, fmt.Sprintf("%s, pool %d", name, pool), m, s, pool, rng)
		}
	}
}

func checkCoarse(t *testing.T, name string, m *Model, s *Space, pool int, rng *rand.Rand) {
	t.Helper()
	e := newEngine(m, s, 1, 2)
	ref := referenceState(m, s)
	y := newEvalSystem(e, ref, make([]float64, s.States))
	y.co = newCoarse(y, pool)
	y.build(randomPolicy(s, rng))
	c := y.co
	want := make([]float64, c.n*c.n)
	for i := range y.n {
		buf, _ := y.row(nil, i, 0, y.n)
		w := c.w[y.unperm(i)] // the gain's row is the reference state's
		for _, en := range buf {
			want[c.unknown(i)*c.n+c.unknown(int(en.col))] += w * en.val
		}
	}
	got := make([]float64, c.n*c.n)
	a := &c.sys
	for i := range c.n {
		for k := a.start[i]; k < a.start[i+1]; k++ {
			got[i*c.n+int(a.col[k])] += a.val[k]
		}
	}
	for k := range got {
		if math.Abs(got[k]-want[k]) > 1e-12*max(1, math.Abs(want[k])) {
			t.Fatalf("%s: aggregated entry (%d, %d) is %.15g, the rows give %.15g", name, k/c.n, k%c.n, got[k], want[k])
		}
	}
	// The correction: with the coarse solution forced to yc, t must be
	// r − A R yc.
	r := make([]float64, y.n)
	for i := range r {
		r[i] = rng.Float64()
	}
	z := make([]float64, y.n)
	c.precondition(z, r)
	az := make([]float64, y.n)
	y.mul(az, c.z0)
	for i := range r {
		if d := r[i] - az[i]; math.Abs(c.t[i]-d) > 1e-12*max(1, math.Abs(d)) {
			t.Fatalf("%s: corrected residual of row %d is %.15g, r − A z₀ is %.15g", name, i, c.t[i], d)
		}
	}
}

// On a stiff model (Figure 3's rates at N = 2, J = 8) the coarse level is
// used, over the slow queue, and an evaluation needs several times fewer
// BiCGSTAB iterations with it than with ILU(0) alone, to the same gain.
// On Figure 4's rates (no slow queue) it is not used.
func TestCoarseLevelCutsIterations(t *testing.T) {
	if got := CoarsePool(fig4N(2)); got != -1 {
		t.Errorf("Figure 4's rates: the coarse level aggregates over queue %d, want none", got+1)
	}
	m := fig3N(2, 8)
	m.Pools[0], m.Pools[1] = m.Pools[1], m.Pools[0] // the slow queue second
	if got := CoarsePool(m); got != 1 {
		t.Fatalf("Figure 3's rates: the coarse level aggregates over queue %d, want 2", got+1)
	}
	s, err := NewSpace(m, 0)
	if err != nil {
		t.Fatal(err)
	}
	pol := make([]int8, s.States)
	if err := startPolicy(m, s, SolveOptions{}, pol); err != nil {
		t.Fatal(err)
	}
	evaluate := func(coarse bool) (int, float64) {
		e := newEngine(m, s, 1, 2)
		if !coarse {
			e.slow = -1
		}
		y := newEvalSystem(e, referenceState(m, s), make([]float64, s.States))
		if (y.co != nil) != coarse {
			t.Fatalf("coarse level %v, want %v", y.co != nil, coarse)
		}
		y.build(pol)
		b := newBiCGStab(y.n)
		its := 0
		res, err := b.solve(y, 1e-8, 5000, func(it int, _ float64) error { its = it; return nil })
		if err != nil || !(res <= 1e-8) {
			t.Fatalf("coarse %v: residual %g after %d iterations (%v)", coarse, res, its, err)
		}
		return its, b.x[y.n-1]
	}
	plain, g1 := evaluate(false)
	two, g2 := evaluate(true)
	t.Logf("BiCGSTAB iterations: %d with ILU(0) alone, %d with the coarse level", plain, two)
	if two*3 > plain {
		t.Errorf("the coarse level takes %d iterations, ILU(0) alone %d: want at least 3 times fewer", two, plain)
	}
	if math.Abs(g1-g2) > 1e-8 {
		t.Errorf("gain per step %.12g with the coarse level, %.12g without", g2, g1)
	}
}
