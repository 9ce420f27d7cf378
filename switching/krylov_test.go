package switching

import (
	"math"
	"math/rand/v2"
	"testing"
)

// randomPolicy picks one of each state's available actions at random.
func randomPolicy(s *Space, rng *rand.Rand) []int8 {
	pol := make([]int8, s.States)
	for c := range s.Configs {
		acts := s.acts(c)
		for j := range s.B {
			if k := rng.IntN(len(acts) + 1); k < len(acts) {
				pol[c*s.B+j] = int8(acts[k].d)
			}
		}
	}
	return pol
}

// The evaluation system, whose products come from the engine's sweep and
// are never stored as a matrix, is the one the papers' equations give
// state by state (the naive reference operator): row perm(S) of A·x is
// V(S) + G − Σ_S' P_f(S,S')·V(S') with V(ref) = 0, and its right-hand side
// is h(S) + c(f(S)).
func TestKrylovSystemMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for name, m := range engineModels() {
		s, err := NewSpace(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		r := reference{m, s, 1}
		for _, workers := range []int{1, 2} {
			e := newEngine(m, s, 1, workers)
			ref := referenceState(m, s)
			y := newEvalSystem(e, ref, make([]float64, s.States))
			pol := randomPolicy(s, rng)
			y.build(pol)
			x := make([]float64, y.n)
			for i := range x {
				x[i] = rng.Float64()*20 - 10
			}
			V := make([]float64, s.States)
			for st := range V {
				if st != ref {
					V[st] = x[y.perm(st)]
				}
			}
			G := x[y.n-1]
			out := make([]float64, y.n)
			y.mul(out, x)
			for st := range s.States {
				state := s.State(st)
				d := Action(pol[st])
				post, ok := r.post(state, d)
				if !ok {
					t.Fatalf("%s: state %d has action %d, which it does not allow", name, st, d)
				}
				c := 0.0
				if d != NoAction {
					p := d.Pair(m.NumPools())
					c = m.SwitchCosts[p.From][p.To]
				}
				want := V[st] + G - r.expect(post, V)
				if got := out[y.perm(st)]; math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) {
					t.Fatalf("%s workers %d: row of state %d is %.15g, the reference gives %.15g", name, workers, st, got, want)
				}
				if got, want := y.rhs[y.perm(st)], r.cost(state)+c; math.Abs(got-want) > 1e-12*max(1, want) {
					t.Fatalf("%s workers %d: right-hand side of state %d is %.15g, the reference gives %.15g", name, workers, st, got, want)
				}
				// The row the preconditioner factors is the same row.
				row, rhs := y.row(nil, y.perm(st), 0, y.n)
				got := 0.0
				for k, en := range row {
					if k > 0 && en.col <= row[k-1].col {
						t.Fatalf("%s: the assembled row of state %d is not in increasing column order: %v", name, st, row)
					}
					got += en.val * x[en.col]
				}
				if math.Abs(got-want) > 1e-12*max(1, math.Abs(want)) || rhs != y.rhs[y.perm(st)] {
					t.Fatalf("%s workers %d: the assembled row of state %d gives %.15g (right-hand side %g), the product %.15g (%g)", name, workers, st, got, rhs, want, y.rhs[y.perm(st)])
				}
			}
		}
	}
}

// The stored factors are ILU(0) of the matrix's diagonal blocks: L·U
// equals the matrix at every position of the blocks' pattern (but in the
// rows whose pivot was replaced by the row's scale), and the
// preconditioner solves L·U z = r.
func TestKrylovFactorsAreILU0(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for name, m := range engineModels() {
		s, err := NewSpace(m, 0)
		if err != nil {
			t.Fatal(err)
		}
		e := newEngine(m, s, 1, 2)
		y := newEvalSystem(e, referenceState(m, s), make([]float64, s.States))
		// The second build keeps the first one's counts of the rows
		// whose actions are unchanged.
		y.build(randomPolicy(s, rng))
		y.build(randomPolicy(s, rng))
		// The blocks' entries, assembled again.
		a := make([]map[int32]float64, y.n)
		for p := range len(y.bound) - 1 {
			from, to := y.bound[p], y.bound[p+1]
			for i := from; i < to; i++ {
				row, _ := y.row(nil, i, from, to)
				a[i] = map[int32]float64{}
				for _, en := range row {
					a[i][en.col] = en.val
				}
			}
		}
		// u(k, j) is U's entry (k ≤ j) from the stored factors, whose
		// diagonal is stored inverted.
		u := func(k int, j int32) float64 {
			for q := y.diag[k]; q < y.start[k+1]; q++ {
				if y.col[q] == j {
					if q == y.diag[k] {
						return 1 / float64(y.lu[q])
					}
					return float64(y.lu[q])
				}
			}
			return 0
		}
		replaced := 0
		for i := range y.n {
			scale := 0.0
			for _, v := range a[i] {
				scale = max(scale, math.Abs(v))
			}
			if y.lu[y.diag[i]] == float32(1/scale) && math.Abs(a[i][int32(i)]-scale) > 1e-6*scale {
				replaced++
				continue
			}
			for q := y.start[i]; q < y.start[i+1]; q++ {
				j := y.col[q]
				prod := 0.0
				for k := y.start[i]; k < y.diag[i] && int(y.col[k]) <= int(j); k++ {
					prod += float64(y.lu[k]) * u(int(y.col[k]), j)
				}
				if int(j) >= i {
					prod += u(i, j) // U's own entry (L's diagonal is 1)
				}
				// The factors are stored in float32.
				if want := a[i][j]; math.Abs(prod-want) > 1e-6*max(1, scale) {
					t.Fatalf("%s: (LU)[%d][%d] = %.15g, the matrix holds %.15g", name, i, j, prod, want)
				}
			}
		}
		if replaced > 1 {
			t.Errorf("%s: %d pivots replaced by their row's scale", name, replaced)
		}
		r := make([]float64, y.n)
		for i := range r {
			r[i] = rng.Float64() - 0.5
		}
		z := make([]float64, y.n)
		y.precondition(z, r)
		zmax := 0.0
		for _, v := range z {
			zmax = max(zmax, math.Abs(v))
		}
		for i := range y.n {
			// (L·U z)_i: L's row times (U z).
			uz := func(k int) float64 {
				acc := 0.0
				for q := y.diag[k]; q < y.start[k+1]; q++ {
					acc += u(k, y.col[q]) * z[y.col[q]]
				}
				return acc
			}
			got := uz(i)
			for q := y.start[i]; q < y.diag[i]; q++ {
				got += float64(y.lu[q]) * uz(int(y.col[q]))
			}
			if math.Abs(got-r[i]) > 1e-12*max(1, zmax) {
				t.Fatalf("%s: (LU z)[%d] = %.15g, r holds %.15g", name, i, got, r[i])
			}
		}
	}
}

// diagonal is a diagonal system for BiCGSTAB, unpreconditioned.
type diagonal struct{ d, rhs []float64 }

func (d *diagonal) size() int                   { return len(d.rhs) }
func (d *diagonal) rows(fn func(c, lo, hi int)) { fn(0, 0, len(d.rhs)) }
func (d *diagonal) right() []float64            { return d.rhs }
func (d *diagonal) precondition(z, r []float64) { copy(z, r) }
func (d *diagonal) mul(out, x []float64) {
	for i := range out {
		out[i] = d.d[i] * x[i]
	}
}

// A singular system whose right-hand side is out of its range (a split
// chain's) can keep BiCGSTAB's residual where it is for thousands of
// iterations before anything blows up (3,653 here, unchecked): the solve
// calls it a breakdown once the residual has not fallen for stallWindow
// iterations. A consistent system as badly conditioned still converges.
func TestBiCGStabStopsWhenStalled(t *testing.T) {
	const n = 3000
	for _, last := range []float64{0, 1e-3} {
		y := &diagonal{d: make([]float64, n), rhs: make([]float64, n)}
		for i := range n {
			y.d[i], y.rhs[i] = 1+float64(i), 1
		}
		y.d[n-1] = last
		iters := 0
		res, err := newBiCGStab(n).solve(y, 1e-10, 20_000, func(it int, _ float64) error { iters = it; return nil })
		switch {
		case err != nil:
			t.Fatal(err)
		case last == 0 && (!math.IsNaN(res) || iters > stallWindow+1):
			t.Errorf("out of the range: residual %g after %d iterations, want a breakdown after at most %d", res, iters, stallWindow+1)
		case last != 0 && !(res <= 1e-10):
			t.Errorf("consistent: residual %g after %d iterations", res, iters)
		}
	}
}
