package switching

import (
	"context"
	"testing"
)

// fig4N is Fisher et al.'s Figure 4 rates scaled to N servers: M = 3, µ = 1,
// ζ = 0.1, c = (2, 1, 1), equal λ, total load 0.8·N, J = 15.
func fig4N(n int) *Model {
	l := 0.8 * float64(n) / 3
	m := policyModel(n, []float64{l, l, l}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	m.QueueLimit = 15
	m.BlockingAuto = true
	return m
}

// BenchmarkSweep times one value-iteration sweep (both passes) at N = 5:
// 850,500 states.
func BenchmarkSweep(b *testing.B) {
	m := fig4N(5)
	s, err := NewSpace(m, 0)
	if err != nil {
		b.Fatal(err)
	}
	e := newEngine(m, s, m.Discount, 0)
	V := make([]float64, s.States)
	U := make([]float64, s.States)
	scratch := make([][]float64, e.workers)
	for w := range scratch {
		scratch[w] = make([]float64, s.B)
	}
	b.ResetTimer()
	for b.Loop() {
		e.expect(U, V)
		e.improve(V, U, 0, scratch)
	}
	b.ReportMetric(float64(s.States)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mstates/s")
}

// BenchmarkSolveTable2 times a whole discounted solve of Palmer–Mitrani's
// Table 2 model (9,000 states).
func BenchmarkSolveTable2(b *testing.B) {
	m := policyModel(2, []float64{0.047, 0.047}, []float64{0.113, 0.113}, []float64{1, 2}, 0.113)
	m.QueueLimit = 30
	m.UniformizationMode, m.Uniformization = UniformizationFixed, 1
	for b.Loop() {
		if _, err := Solve(context.Background(), m, SolveOptions{Criterion: Discounted}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSolveAverage times whole average-cost solves by the krylov
// method on Fisher et al.'s Figure 4 rates at N = 5 and 6 and their Figure 3
// rates at N = 3 to 6 (-bench SolveAverage/fig3-n3 picks one), with a
// tolerance of 1e-7 per step: a certified gap below 1e-6 relative on all of
// them. It reports the BiCGSTAB iterations, the policies, the certified
// relative gap, and the memory the method states.
func BenchmarkSolveAverage(b *testing.B) {
	cases := []struct {
		name string
		m    *Model
	}{
		{"fig4-n5", fig4N(5)}, {"fig4-n6", fig4N(6)},
		{"fig3-n3", fig3N(3, 15)}, {"fig3-n4", fig3N(4, 15)}, {"fig3-n5", fig3N(5, 15)}, {"fig3-n6", fig3N(6, 15)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var sol *Solution
			for b.Loop() {
				var err error
				if sol, err = Solve(context.Background(), c.m, SolveOptions{Tolerance: 1e-7}); err != nil {
					b.Fatal(err)
				}
				if !sol.Converged {
					b.Fatalf("not converged after %d iterations", sol.Sweeps)
				}
			}
			_, states, _ := CountStates(c.m)
			b.ReportMetric(float64(sol.Sweeps), "iterations")
			b.ReportMetric(float64(sol.Improvements), "policies")
			b.ReportMetric((sol.AverageCostUpper-sol.AverageCostLower)/sol.AverageCostUpper, "relgap")
			b.ReportMetric(float64(states*StateBytes(c.m, Krylov))/(1<<20), "MiB")
		})
	}
}

// BenchmarkPrecondition times one application of the krylov method's
// preconditioner (ILU(0)'s forward and back substitutions over the
// diagonal blocks) at N = 5 of Figure 4, 850,500 states, on the
// solve's first policy; BiCGSTAB applies it twice an iteration.
func BenchmarkPrecondition(b *testing.B) {
	m := fig4N(5)
	s, err := NewSpace(m, 0)
	if err != nil {
		b.Fatal(err)
	}
	e := newEngine(m, s, 1, 0)
	pol := make([]int8, s.States)
	if err := startPolicy(m, s, SolveOptions{}, pol); err != nil {
		b.Fatal(err)
	}
	y := newEvalSystem(e, referenceState(m, s), make([]float64, s.States))
	y.build(pol)
	r, z := make([]float64, y.n), make([]float64, y.n)
	for i := range r {
		r[i] = float64(i%7) - 3
	}
	b.ResetTimer()
	for b.Loop() {
		y.precondition(z, r)
	}
	b.ReportMetric(float64(s.States)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mstates/s")
}
