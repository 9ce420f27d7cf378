package switching

import (
	"context"
	"errors"
	"math"
	"testing"
)

// A policy's gain by its evaluation system is the long-run cost its
// stationary distribution gives (power iteration, EvaluatePolicy), inside
// certified bounds; the optimal table's gain is the solve's optimum, and no
// policy costs less.
func TestPolicyGainMatchesStationary(t *testing.T) {
	ctx := context.Background()
	for name, m := range engineModels() {
		sol, err := Solve(ctx, m, SolveOptions{Tolerance: 1e-12})
		if err != nil {
			t.Fatal(err)
		}
		h, err := NewHeuristic(m, 5)
		if err != nil {
			t.Fatal(err)
		}
		for pname, p := range map[string]Policy{"heuristic K=5": h, "static": NewStatic(m), "cmu": NewCMu(m), "optimal": sol.Table} {
			g, err := PolicyGain(ctx, m, p, SolveOptions{Tolerance: 1e-11})
			if name == "three pools" && pname == "static" {
				// Pool 3 cannot switch to pool 1 there: a surplus at 3
				// and a deficit at 1 stay for ever, one closed class per
				// such allocation.
				if !errors.Is(err, ErrSplitChain) {
					t.Errorf("%s %s: %v, want ErrSplitChain", name, pname, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s %s: %v", name, pname, err)
			}
			if !g.Converged || !(g.Lower <= g.Cost && g.Cost <= g.Upper) || g.Upper-g.Lower > 1e-10*m.Lambda() {
				t.Fatalf("%s %s: converged %v, bounds [%.12g, %.12g] around %.12g", name, pname, g.Converged, g.Lower, g.Upper, g.Cost)
			}
			st, err := EvaluatePolicy(ctx, m, p, SolveOptions{Tolerance: 1e-13})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(st.Cost-g.Cost) > 1e-7*max(1, g.Cost) {
				t.Errorf("%s %s: gain %.12g, stationary cost %.12g", name, pname, g.Cost, st.Cost)
			}
			if eps := 1e-9 * max(1, g.Cost); g.Upper < sol.AverageCostLower-eps {
				t.Errorf("%s %s: costs at most %.12g, below the certified optimum [%.12g, %.12g]", name, pname, g.Upper, sol.AverageCostLower, sol.AverageCostUpper)
			}
			if pname == "optimal" && (g.Lower > sol.AverageCostUpper+1e-9 || sol.AverageCostLower > g.Upper+1e-9) {
				t.Errorf("%s: the optimal table's gain [%.12g, %.12g] is not the solve's [%.12g, %.12g]", name, g.Lower, g.Upper, sol.AverageCostLower, sol.AverageCostUpper)
			}
		}
	}
}

// The hand-solved two-state chain: the server follows the one job (its
// gain is 2/3, see TestTwoStateChainByHand), and a policy that never moves
// the server strands it at b, where the job waits for ever: the chain
// splits (the job's pool holds the server, or not), and PolicyGain says so
// instead of giving one cost.
func TestPolicyGainByHand(t *testing.T) {
	ctx := context.Background()
	m := policyModel(1, []float64{1, 0}, []float64{2, 2}, []float64{1, 1}, 1)
	m.QueueLimit = 2
	m.BlockingAuto = true
	m.InstantSwitches = true
	sol, err := Solve(ctx, m, SolveOptions{Tolerance: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	g, err := PolicyGain(ctx, m, sol.Table, SolveOptions{Tolerance: 1e-12})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(g.Cost-2.0/3) > 1e-10 || !g.Converged {
		t.Errorf("gain %.15g (converged %v), want 2/3", g.Cost, g.Converged)
	}
	// Its system is singular: the evaluation breaks down (its residual
	// blows up, or stalls) long before its cap of sweeps.
	var sweeps int
	g, err = PolicyGain(ctx, m, Never{}, SolveOptions{Tolerance: 1e-12, Progress: func(p Progress) { sweeps = p.Sweep }})
	if !errors.Is(err, ErrSplitChain) || sweeps > 2*stallWindow {
		t.Errorf("a policy that strands the server: %v after %d sweeps, want ErrSplitChain within %d", err, sweeps, 2*stallWindow)
	}
}

// Bad options are refused by name.
func TestPolicyGainErrors(t *testing.T) {
	m := fig4()
	h, err := NewHeuristic(m, 5)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PolicyGain(context.Background(), m, h, SolveOptions{Tolerance: -1}); err == nil {
		t.Error("a negative tolerance was accepted")
	}
	if _, err := PolicyGain(context.Background(), m, h, SolveOptions{MaxStates: 100}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a model over the state limit: %v, want ErrTooLarge", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := PolicyGain(ctx, m, h, SolveOptions{}); !errors.Is(err, ErrCanceled) {
		t.Errorf("a canceled evaluation: %v, want ErrCanceled", err)
	}
}
