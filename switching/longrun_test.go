package switching

import (
	"context"
	"math"
	"testing"
)

// The krylov analysis (the gains of the evaluation system) gives the
// power iteration's long-run figures, on every model of the engine's
// tests: the same policy, two computations.
func TestLongRunKrylovMatchesPower(t *testing.T) {
	for name, m := range engineModels() {
		sol, err := Solve(context.Background(), m, SolveOptions{Method: Krylov, Boundary: true})
		if err != nil {
			t.Fatal(err)
		}
		kr := sol.Stationary
		if kr.Method != Krylov || !kr.Converged || kr.Fallback != "" || kr.Iterations == 0 || kr.Sweeps != KrylovSweepWork*kr.Iterations {
			t.Fatalf("%s: the analysis after a krylov solve: %+v", name, kr)
		}
		e := newEngine(m, sol.Table.Space, 1, 2)
		pw, err := stationary(context.Background(), m, e, sol.Table.Actions, SolveOptions{Tolerance: 1e-13}, 1_000_000)
		if err != nil {
			t.Fatal(err)
		}
		if !pw.Converged || pw.Method != Power {
			t.Fatalf("%s: the power iteration did not converge: %+v", name, pw)
		}
		near := func(what string, a, b float64) {
			if math.Abs(a-b) > 1e-9*max(1, math.Abs(b)) {
				t.Errorf("%s: %s %.12g by krylov, %.12g by power", name, what, a, b)
			}
		}
		near("boundary", kr.BoundaryFraction, pw.BoundaryFraction)
		for i := range kr.PoolBoundary {
			near("pool boundary", kr.PoolBoundary[i], pw.PoolBoundary[i])
		}
		near("holding cost", kr.HoldingCost, pw.HoldingCost)
		near("cost", kr.Cost, pw.Cost)
		// The policy's long-run cost is the solve's optimum.
		if math.Abs(kr.Cost-sol.AverageCost) > sol.AverageCostUpper-sol.AverageCostLower+1e-9*sol.AverageCost {
			t.Errorf("%s: long-run cost %.12g, the optimum certified in [%.12g, %.12g]", name, kr.Cost, sol.AverageCostLower, sol.AverageCostUpper)
		}
	}
}

// On Figure 3's stiff rates the power iteration is far from its long run
// after its default budget, and the krylov analysis converges within it.
func TestLongRunKrylovOnStiffModel(t *testing.T) {
	m := fig3N(2, 8)
	sol, err := Solve(context.Background(), m, SolveOptions{Boundary: true})
	if err != nil {
		t.Fatal(err)
	}
	kr := sol.Stationary
	if !kr.Converged || kr.Method != Krylov || kr.Sweeps > DefaultBoundarySweeps(sol.Work(), sol.Table.Space.States) {
		t.Fatalf("the krylov analysis on a stiff model: %+v", kr)
	}
	e := newEngine(m, sol.Table.Space, 1, 2)
	pw, err := stationary(context.Background(), m, e, sol.Table.Actions, SolveOptions{Tolerance: 1e-6}, kr.MaxSweeps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("krylov: %d iterations, boundary %.6g; power after %d sweeps: converged %v, residual %.3g, boundary %.6g",
		kr.Iterations, kr.BoundaryFraction, pw.Sweeps, pw.Converged, pw.Residual, pw.BoundaryFraction)
	if pw.Converged {
		t.Errorf("the power iteration converged within %d sweeps: the model is not stiff enough to show the difference", kr.MaxSweeps)
	}
	if math.Abs(kr.Cost-sol.AverageCost) > sol.AverageCostUpper-sol.AverageCostLower+1e-9*sol.AverageCost {
		t.Errorf("long-run cost %.12g, the optimum certified in [%.12g, %.12g]", kr.Cost, sol.AverageCostLower, sol.AverageCostUpper)
	}
}
