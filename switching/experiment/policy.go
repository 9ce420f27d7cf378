// Package experiment runs switching policies through the simulator the way
// the papers compare them: the policies a user can name (optimal, heuristic,
// static, best-static, cµ) built for every demand phase, and the papers'
// figures as experiments over an x-axis, with their results as rows, CSV
// and plots.
//
// The design is described in docs/research/simulation.md of the
// repository, "The simulator" and "Figures", and in
// docs/research/switching.md, "Why average cost is the default".
package experiment

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/switching"
	"github.com/metasched/metasched/switching/sim"
)

// Kinds of policy: the policy names of package switching.
const (
	Optimal    = switching.PolicyOptimal
	Heuristic  = switching.PolicyHeuristic
	Static     = switching.PolicyStatic
	BestStatic = switching.PolicyBestStatic
	CMu        = switching.PolicyCMu
)

// Kinds lists the policy kinds a user can name: every name of
// switching.PolicyNames but none, in that order.
var Kinds = slices.DeleteFunc(slices.Clone(switching.PolicyNames), func(n string) bool { return n == switching.PolicyNone })

// Spec names a policy and its parameters.
type Spec struct {
	Kind string
	K    float64 // heuristic constant
	// Criterion of an optimal policy: average (the default) or discounted.
	Criterion switching.Criterion
	// Papers: solve the discounted policy on the papers' model instead of
	// the given one: no blocking price, and the uniformization constant of
	// the papers (Uniformization, or the model's Λ if 0).
	Papers bool
	// Uniformization is the papers' Λ as a function of the phase model;
	// nil uses the "paper" mode (Fisher et al.'s eq. 1).
	Uniformization func(m *switching.Model) float64
	// Label names the policy in tables and plots; empty: Name().
	Label string
}

// Name is the policy's label: "heuristic K=5", "optimal (average)",
// "optimal (papers' discounted)", …; it has no comma, so a list of names
// can be given comma-separated.
func (s Spec) Name() string {
	if s.Label != "" {
		return s.Label
	}
	switch s.Kind {
	case Heuristic:
		return fmt.Sprintf("heuristic K=%g", s.K)
	case Optimal:
		c := s.Criterion
		if c == "" {
			c = switching.Average
		}
		if s.Papers {
			return fmt.Sprintf("optimal (papers' %s)", c)
		}
		return fmt.Sprintf("optimal (%s)", c)
	}
	return s.Kind
}

// SolveOptions bound the solves of optimal policies.
type SolveOptions struct {
	MaxStates int // refuse larger state spaces; 0: no limit
	MaxSweeps int // 0: the engine's default
	Workers   int
	Tolerance float64
	Progress  func(switching.Progress)
	Now       func() time.Time // times the sweeps
	// Grow, when set, grows the truncation of an optimal policy of the
	// average criterion (not the papers' discounted one, which is theirs
	// at their J) with switching.GrowTruncation, from the model's J;
	// its MaxStates, when 0, is MaxStates.
	Grow *switching.GrowOptions
}

// Built is a policy ready to simulate: one switching.Policy per phase, and
// what building it found out.
type Built struct {
	Policies []switching.Policy
	// Models are the phase models the policies were built from.
	Models []*switching.Model
	// Targets are the allocations of static and best-static, per phase.
	Targets [][]int
	// Solves are the solves of an optimal policy, per phase.
	Solves []*switching.Solution
	// QueueLimits are the pools' J_i of the tables of an optimal policy
	// (nil otherwise), the smallest of the phases' tables: the simulator
	// reports how long a queue sat at J_i−1 and beyond J_i.
	QueueLimits []int
	// PhaseLimits are the J_i of each phase's table (nil unless the
	// policy is a table).
	PhaseLimits [][]int
	// Truncations are the growths of an optimal policy's truncation, per
	// phase (nil unless SolveOptions.Grow was set and applied).
	Truncations []*switching.Truncation
}

// Truncation says how each phase's truncation was grown: "J = 33 (grown
// from 15 in 5 solves, every pool's boundary mass under 1e-06 at most
// 8.2e-06, the optimum settled)", or NOT SETTLED and why; "" without a
// growth.
func (b *Built) Truncation(tolerance float64) string {
	var parts []string
	for p, tr := range b.Truncations {
		first, last := tr.Steps[0], tr.Steps[len(tr.Steps)-1]
		s := fmt.Sprintf("J = %s (grown from %s in %d solves, the largest boundary mass %.2g",
			switching.FormatLimits(last.Limits), switching.FormatLimits(first.Limits), len(tr.Steps), slices.Max(last.Boundary))
		if tr.Settled {
			s += fmt.Sprintf(", under %g, and the optimum settled)", tolerance)
		} else {
			s += "; NOT SETTLED: " + tr.Stopped + ")"
		}
		if len(b.Truncations) > 1 {
			s = fmt.Sprintf("phase %d: %s", p+1, s)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Settled reports whether every growth settled (true without one).
func (b *Built) Settled() bool {
	for _, tr := range b.Truncations {
		if !tr.Settled {
			return false
		}
	}
	return true
}

// Converged reports whether every solve converged (true without solves).
func (b *Built) Converged() bool {
	for _, s := range b.Solves {
		if !s.Converged {
			return false
		}
	}
	return true
}

// ErrNotConverged is returned by Build for an optimal policy whose solve
// did not converge within the sweep limit; the Built is returned with it.
var ErrNotConverged = errors.New("optimal policy: solve did not converge")

// Build makes the policy of spec for model m under the demand phases ph
// (nil: none): one policy per phase, each built from that phase's rates
// (the static targets are recomputed per phase, the optimal policy is one
// table per phase, as the papers do). An optimal policy is solved here; a
// table given instead replaces the solve (table must match the model and
// there must be no phases). Errors: ErrNoStableAllocation from best-static,
// ErrTooLarge from a solve over the state limit, ErrNotConverged (with the
// Built) when a solve stopped at the sweep limit.
func Build(ctx context.Context, spec Spec, m *switching.Model, ph *sim.Phases, table *switching.Table, opts SolveOptions) (*Built, error) {
	models := sim.PhaseModels(m, ph)
	b := &Built{Models: models}
	if table != nil {
		if spec.Kind != Optimal {
			return nil, fmt.Errorf("a policy table is an optimal policy, not %s", spec.Kind)
		}
		if ph != nil {
			return nil, errors.New("a policy table holds one phase's policy: demand phases need one table per phase, solved on the fly")
		}
		b.Policies = []switching.Policy{table}
		b.QueueLimits = table.Space.Limits()
		b.PhaseLimits = [][]int{b.QueueLimits}
		return b, nil
	}
	var notConverged []string
	for p, pm := range models {
		var pol switching.Policy
		switch spec.Kind {
		case Heuristic:
			h, err := switching.NewHeuristic(pm, spec.K)
			if err != nil {
				return nil, err
			}
			pol = h
		case Static:
			st := switching.NewStatic(pm)
			b.Targets = append(b.Targets, st.Target())
			pol = st
		case BestStatic:
			st, err := switching.NewBestStatic(pm)
			if err != nil {
				return nil, phaseErr(ph, p, err)
			}
			b.Targets = append(b.Targets, st.Target())
			pol = st
		case CMu:
			pol = switching.NewCMu(pm)
		case Optimal:
			sm := pm
			if spec.Papers {
				sm = PapersModel(pm, spec.Uniformization)
			}
			crit := spec.Criterion
			if crit == "" {
				crit = switching.Average
			}
			so := switching.SolveOptions{
				Criterion: crit, MaxStates: opts.MaxStates, MaxSweeps: opts.MaxSweeps,
				Workers: opts.Workers, Tolerance: opts.Tolerance, Progress: opts.Progress, Now: opts.Now,
			}
			var sol *switching.Solution
			var err error
			if opts.Grow != nil && crit == switching.Average && !spec.Papers {
				g := *opts.Grow
				if g.MaxStates == 0 {
					g.MaxStates = opts.MaxStates
				}
				var tr *switching.Truncation
				if tr, err = switching.GrowTruncation(ctx, sm, so, g); err == nil {
					sol = tr.Solution
					b.Truncations = append(b.Truncations, tr)
				}
			} else {
				sol, err = switching.Solve(ctx, sm, so)
			}
			if err != nil {
				return nil, phaseErr(ph, p, err)
			}
			if !sol.Converged {
				notConverged = append(notConverged, fmt.Sprintf("%s%d sweeps, residual %.3g",
					phaseName(ph, p), sol.Sweeps, sol.Residual))
			}
			b.Solves = append(b.Solves, sol)
			b.QueueLimits = smallest(b.QueueLimits, sol.Table.Space.Limits())
			b.PhaseLimits = append(b.PhaseLimits, sol.Table.Space.Limits())
			pol = sol.Table
		default:
			return nil, fmt.Errorf("policy %q: must be one of %s", spec.Kind, strings.Join(Kinds, ", "))
		}
		b.Policies = append(b.Policies, pol)
	}
	if len(notConverged) > 0 {
		return b, fmt.Errorf("%w (%s)", ErrNotConverged, strings.Join(notConverged, "; "))
	}
	return b, nil
}

// smallest returns each pool's smaller J of a (nil: none yet) and b.
func smallest(a, b []int) []int {
	if a == nil {
		return b
	}
	out := slices.Clone(a)
	for i, j := range b {
		out[i] = min(out[i], j)
	}
	return out
}

func phaseName(ph *sim.Phases, p int) string {
	if ph == nil {
		return ""
	}
	return fmt.Sprintf("phase %d: ", p+1)
}

func phaseErr(ph *sim.Phases, p int, err error) error {
	if ph == nil {
		return err
	}
	return fmt.Errorf("phase %d: %w", p+1, err)
}

// PapersModel returns the papers' version of m for their discounted
// policy: no price on blocked arrivals, and Λ = uniformization(m) (nil:
// Fisher et al.'s eq. 1, the "paper" mode).
func PapersModel(m *switching.Model, uniformization func(*switching.Model) float64) *switching.Model {
	c := *m
	c.BlockingAuto = false
	c.BlockingCosts = make([]float64, m.NumPools())
	if uniformization == nil {
		c.UniformizationMode = switching.UniformizationPaper
	} else {
		c.UniformizationMode = switching.UniformizationFixed
		c.Uniformization = uniformization(m)
	}
	return &c
}

// PalmerLambda is Palmer–Mitrani's uniformization constant (their eq. 1):
// Λ = Σλ + N(Σµ + Σζ), every rate counted once per server.
func PalmerLambda(m *switching.Model) float64 {
	l := 0.0
	for _, p := range m.Pools {
		l += p.ArrivalRate
	}
	per := 0.0
	for a, p := range m.Pools {
		per += p.ServiceRate
		for b := range m.Pools {
			if a != b && !m.InstantSwitches {
				per += m.SwitchRates[a][b]
			}
		}
	}
	return l + float64(m.Servers)*per
}

// unstable reports whether err says no allocation is stable.
func unstable(err error) bool { return errors.Is(err, switching.ErrNoStableAllocation) }
