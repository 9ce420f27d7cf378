package experiment

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/switching"
	"github.com/metasched/metasched/switching/sim"
)

// Experiment is one of the papers' figures: policies compared by
// simulation over an x-axis (a number of servers or a total load).
type Experiment struct {
	Name   string // "fisher-fig4"
	Title  string
	Source string // the paper and figure
	XLabel string
	X      []float64
	// Model returns the model at x; Phases the demand phases at x (nil
	// when the figure has none).
	Model    func(x float64) *switching.Model
	Phases   func(x float64) *sim.Phases
	Policies []Spec
	// MaxSweeps caps the solves of optimal policies unless the caller sets
	// a cap.
	MaxSweeps int
	// Claim is what the paper says the figure shows.
	Claim string
}

// fisherPapers is the papers' discounted policy with Fisher et al.'s Λ.
var fisherPapers = Spec{Kind: Optimal, Criterion: switching.Discounted, Papers: true}

// palmerPapers is the papers' discounted policy with Palmer–Mitrani's Λ.
var palmerPapers = Spec{Kind: Optimal, Criterion: switching.Discounted, Papers: true, Uniformization: PalmerLambda}

// poolModel builds a model with the same ζ between every pair, no switch
// costs, blocking priced automatically and the papers' α.
func poolModel(n, j int, names []string, lambda, mu, c []float64, zeta float64) *switching.Model {
	m := &switching.Model{
		Servers: n, QueueLimit: j, Discount: 0.95,
		UniformizationMode: switching.UniformizationAuto, BlockingAuto: true,
	}
	for i, name := range names {
		m.Pools = append(m.Pools, switching.Pool{Name: name, ArrivalRate: lambda[i], ServiceRate: mu[i], HoldingCost: c[i]})
	}
	m.SwitchRates = switching.PairMatrix(len(names), zeta)
	m.SwitchCosts = switching.PairMatrix(len(names), 0)
	return m
}

var types3 = []string{"type1", "type2", "type3"}
var types2 = []string{"type1", "type2"}

// FisherFig4 is Fisher et al.'s Figure 4 model at total load x: N = 4,
// M = 3, µ = 1, ζ = 0.1, c = (2, 1, 1), equal arrival rates, J = 15.
func FisherFig4(load float64) *switching.Model {
	l := load / 3
	return poolModel(4, 15, types3, []float64{l, l, l}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
}

// FisherFig3 is Fisher et al.'s Figure 3 model at N servers: M = 3, type 1
// a thousand times slower and rarer (µ = (0.001, 1, 1), λ_1 = λ_2/1000),
// total load 4N/5 split equally, c = (2, 1, 1), ζ = µ_2/10, J = 15.
func FisherFig3(n float64) *switching.Model {
	rho := 0.8 * n / 3
	return poolModel(int(n), 15, types3, []float64{rho / 1000, rho, rho}, []float64{0.001, 1, 1}, []float64{2, 1, 1}, 0.1)
}

// PalmerModel is Palmer–Mitrani's Figures 2–3 model at N servers and total
// load: M = 2, µ = 1, ζ = 0.1, c = (1, 2), J = 40; the arrival rates here
// are the average over the phases (each phase sets its own).
func PalmerModel(n int, load float64) *switching.Model {
	return poolModel(n, 40, types2, []float64{load / 2, load / 2}, []float64{1, 1}, []float64{1, 2}, 0.1)
}

// PalmerPhases are Palmer–Mitrani's demand phases at total load: the
// rates in the ratio 100:1 and 1:100, mean phase length 100.
func PalmerPhases(load float64) *sim.Phases {
	return &sim.Phases{High: load * 100 / 101, Low: load / 101, Mean: 100}
}

func steps(from, to, by float64) []float64 {
	var xs []float64
	for i := 0; ; i++ {
		x := math.Round((from+float64(i)*by)*1e9) / 1e9
		if x > to+1e-9 {
			return xs
		}
		xs = append(xs, x)
	}
}

// Experiments are the papers' figures, by name.
var Experiments = []*Experiment{
	{
		Name: "fisher-fig4", Title: "Policy comparisons: M = 3, N = 4, increasing load",
		Source: "Fisher et al., Figure 4", XLabel: "total offered load",
		X:     steps(2.6, 3.6, 0.2),
		Model: FisherFig4,
		Policies: []Spec{
			{Kind: Optimal}, fisherPapers,
			{Kind: Heuristic, K: 5}, {Kind: Heuristic, K: 1},
			{Kind: Static}, {Kind: BestStatic}, {Kind: CMu},
		},
		MaxSweeps: 20_000,
		Claim: "The static policy collapses beyond load 3.2; the heuristic (K = 5) is almost " +
			"indistinguishable from the optimal policy over the whole range.",
	},
	{
		Name: "fisher-fig3", Title: "Policy comparisons: M = 3, increasing N",
		Source: "Fisher et al., Figure 3", XLabel: "servers N",
		X:     []float64{3, 4, 5, 6},
		Model: FisherFig3,
		Policies: []Spec{
			{Kind: Optimal}, fisherPapers,
			{Kind: Heuristic, K: 5}, {Kind: Heuristic, K: 1},
			{Kind: Static}, {Kind: BestStatic}, {Kind: CMu},
		},
		MaxSweeps: 20_000,
		Claim: "Dynamic reallocation pays off: at N = 6 the static policy is almost ten times " +
			"worse than the heuristic, which performs almost as well as the optimal policy.",
	},
	{
		Name: "palmer-fig2", Title: "Policy comparisons with demand phases: M = 2, increasing N",
		Source: "Palmer and Mitrani, Figure 2", XLabel: "servers N",
		X:      steps(2, 8, 1),
		Model:  func(n float64) *switching.Model { return PalmerModel(int(n), 0.75*n) },
		Phases: func(n float64) *sim.Phases { return PalmerPhases(0.75 * n) },
		Policies: []Spec{
			{Kind: Optimal}, palmerPapers,
			{Kind: Heuristic, K: 1}, {Kind: Heuristic, K: 5},
			{Kind: Static}, {Kind: BestStatic}, {Kind: CMu},
		},
		MaxSweeps: 20_000,
		Claim: "The heuristic is almost as good as the optimal policy for all N; the static " +
			"policy (recomputed in each phase) is considerably more expensive and worse as N grows.",
	},
	{
		Name: "palmer-fig3", Title: "Policy comparisons with demand phases: M = 2, N = 4, increasing load",
		Source: "Palmer and Mitrani, Figure 3", XLabel: "total offered load",
		X:      steps(2, 3.8, 0.3),
		Model:  func(l float64) *switching.Model { return PalmerModel(4, l) },
		Phases: PalmerPhases,
		Policies: []Spec{
			{Kind: Optimal}, palmerPapers,
			{Kind: Heuristic, K: 1}, {Kind: Heuristic, K: 5},
			{Kind: Static}, {Kind: BestStatic}, {Kind: CMu},
		},
		MaxSweeps: 20_000,
		Claim: "Dynamic reconfiguration is even more advantageous near saturation: the static " +
			"policy's cost increases very fast, while the heuristic stays almost optimal.",
	},
}

// Names lists the experiments.
func Names() []string {
	var n []string
	for _, e := range Experiments {
		n = append(n, e.Name)
	}
	return n
}

// Lookup returns the experiment called name.
func Lookup(name string) (*Experiment, error) {
	for _, e := range Experiments {
		if e.Name == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("experiment %q: unknown; choose one of %s", name, strings.Join(Names(), ", "))
}

// Options tune a run of an experiment.
type Options struct {
	Completions int64   // per simulation; default 200,000 (the papers')
	Warmup      float64 // fraction of Completions discarded first
	Seed        uint64
	X           []float64 // a subset of the x-axis; nil: all of it
	// Policies selects policies by Spec.Name; nil: all of them.
	Policies []string
	// QueueLimit > 0 replaces the experiment's J, the truncation the
	// optimal policies are solved on, or their growth starts from with
	// Solve.Grow (the simulated queues are never truncated).
	QueueLimit int
	Solve      SolveOptions
	Now        func() time.Time
	// Progress is called when a step (one policy at one x) starts and as
	// its solve or simulation advances.
	Progress func(Progress)
}

// Progress reports an experiment's advance.
type Progress struct {
	Step, Steps int // the step running, 1-based, of all
	X           float64
	Policy      string
	Stage       string  // "solve" or "simulate"
	Fraction    float64 // of the simulation, or of the solve's residual on a log scale
}

// Row is the result of one policy at one x.
type Row struct {
	X      float64
	Policy string
	// MeanCost and CI95 are NaN when the policy was not simulated (see
	// Note).
	MeanCost         float64
	CI95             [2]float64
	Completions      int64
	Events           int64
	Switches         int64
	TransitFraction  float64
	BoundaryFraction float64 // NaN unless the policy is a table
	BeyondFraction   float64 // time some queue was beyond its table's J_i (NaN unless the policy is a table)
	QueueLimits      []int   // J_i of the policy's table, the smallest of its phases' (nil unless the policy is a table)
	PhaseLimits      [][]int // J_i of each phase's table where they differ (grown truncations), nil otherwise
	// Truncation says how the table's truncation was grown (Built.Truncation),
	// "" when it was not: the experiment's J, or Options.QueueLimit.
	Truncation   string
	Seconds      float64 // simulation loop
	SolveSeconds float64
	SolveSweeps  int
	Converged    bool // the optimal policy's solve (true for other policies)
	Note         string
}

// Selected returns the policies of e that opts selects, or an error naming
// an unknown one.
func (e *Experiment) Selected(names []string) ([]Spec, error) {
	if names == nil {
		return e.Policies, nil
	}
	var out []Spec
	var all []string
	for _, p := range e.Policies {
		all = append(all, p.Name())
	}
	for _, n := range names {
		i := slices.Index(all, n)
		if i < 0 {
			return nil, fmt.Errorf("policy %q: not in %s; choose from %q", n, e.Name, all)
		}
		out = append(out, e.Policies[i])
	}
	return out, nil
}

// Points returns the points of the x-axis to run: xs, if each is on it, or
// the whole axis for nil.
func (e *Experiment) Points(xs []float64) ([]float64, error) {
	if xs == nil {
		return e.X, nil
	}
	for _, x := range xs {
		if !slices.Contains(e.X, x) {
			return nil, fmt.Errorf("x = %g: not on the x-axis of %s, %v", x, e.Name, e.X)
		}
	}
	return xs, nil
}

// Run simulates every selected policy at every selected x. Rows come in
// x order, then in the experiment's policy order. A policy that cannot be
// built at some x (no stable static allocation, an average-cost solve that
// did not converge) gets a row with NaN cost and a note; any other error
// stops the run.
func (e *Experiment) Run(ctx context.Context, opts Options) ([]Row, error) {
	specs, err := e.Selected(opts.Policies)
	if err != nil {
		return nil, err
	}
	xs, err := e.Points(opts.X)
	if err != nil {
		return nil, err
	}
	if opts.Completions == 0 {
		opts.Completions = 200_000
	}
	if opts.Solve.MaxSweeps == 0 {
		opts.Solve.MaxSweeps = e.MaxSweeps
	}
	if opts.Solve.Now == nil {
		opts.Solve.Now = opts.Now
	}
	var rows []Row
	steps, step := len(xs)*len(specs), 0
	for _, x := range xs {
		m := e.Model(x)
		if opts.QueueLimit > 0 {
			m.QueueLimit = opts.QueueLimit
		}
		var ph *sim.Phases
		if e.Phases != nil {
			ph = e.Phases(x)
		}
		for _, spec := range specs {
			step++
			row, err := e.runOne(ctx, x, m, ph, spec, opts, step, steps)
			if err != nil {
				return rows, fmt.Errorf("%s at %s = %g: %w", spec.Name(), e.XLabel, x, err)
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func (e *Experiment) runOne(ctx context.Context, x float64, m *switching.Model, ph *sim.Phases, spec Spec, opts Options, step, steps int) (Row, error) {
	row := Row{X: x, Policy: spec.Name(), MeanCost: math.NaN(), CI95: [2]float64{math.NaN(), math.NaN()},
		BoundaryFraction: math.NaN(), BeyondFraction: math.NaN(), Converged: true}
	report := func(stage string, f float64) {
		if opts.Progress != nil {
			opts.Progress(Progress{Step: step, Steps: steps, X: x, Policy: row.Policy, Stage: stage, Fraction: f})
		}
	}
	report("solve", 0)
	so := opts.Solve
	so.Progress = func(p switching.Progress) {
		if p.Residual > 0 && p.Tolerance > 0 {
			report("solve", min(max(math.Log(p.Residual)/math.Log(p.Tolerance), 0), 1))
		}
	}
	var began time.Time
	if opts.Now != nil {
		began = opts.Now()
	}
	b, err := Build(ctx, spec, m, ph, nil, so)
	if opts.Now != nil {
		row.SolveSeconds = opts.Now().Sub(began).Seconds()
	}
	if b != nil {
		for _, s := range b.Solves {
			row.SolveSweeps += s.Sweeps
		}
		row.Converged = b.Converged()
		row.QueueLimits, row.PhaseLimits = b.QueueLimits, phaseLimits(b)
		if len(b.Truncations) > 0 {
			tol := opts.Solve.Grow.BoundaryTolerance
			if tol == 0 {
				tol = switching.DefaultBoundaryTolerance
			}
			row.Truncation = b.Truncation(tol)
		}
	}
	switch {
	case unstable(err):
		row.Note = "no stable fixed allocation: " + err.Error()
		return row, nil
	case errors.Is(err, ErrNotConverged):
		row.Note = "not simulated: the " + err.Error()
		return row, nil
	case err != nil:
		return row, err
	}
	if spec.Kind == Static || spec.Kind == BestStatic {
		row.Note = allocationNote(b.Models, b.Targets)
	}
	res, err := sim.Run(ctx, sim.Config{
		Model: m, Policies: b.Policies, Phases: ph,
		Completions: opts.Completions, Warmup: opts.Warmup, Seed: opts.Seed,
		QueueLimits: b.QueueLimits, PhaseQueueLimits: row.PhaseLimits, Now: opts.Now,
		Progress: func(p sim.Progress) { report("simulate", float64(p.Completions)/float64(p.Target)) },
	})
	if err != nil {
		return row, err
	}
	row.MeanCost, row.CI95 = res.MeanCost, res.CI95
	row.Completions, row.Events, row.Switches = res.Completions, res.Events, res.Switches
	row.TransitFraction, row.BoundaryFraction, row.BeyondFraction, row.Seconds = res.TransitFraction, res.BoundaryFraction, res.BeyondFraction, res.Seconds
	return row, nil
}

// phaseLimits are the tables' J_i per phase when the phases' tables differ
// in them (grown truncations), nil otherwise.
func phaseLimits(b *Built) [][]int {
	for _, js := range b.PhaseLimits {
		if !slices.Equal(js, b.PhaseLimits[0]) {
			return b.PhaseLimits
		}
	}
	return nil
}

// allocationNote describes the static targets, flagging unstable ones.
func allocationNote(models []*switching.Model, targets [][]int) string {
	var parts []string
	for p, t := range targets {
		s := fmt.Sprint(t)
		s = "(" + strings.ReplaceAll(s[1:len(s)-1], " ", ",") + ")"
		m := models[p]
		for i, k := range t {
			pool := m.Pools[i]
			if pool.ArrivalRate > 0 && float64(k) <= pool.ArrivalRate/pool.ServiceRate {
				s += fmt.Sprintf(" unstable: pool %d has ρ = %.3g on %d servers", i+1, pool.ArrivalRate/pool.ServiceRate, k)
				break
			}
		}
		parts = append(parts, s)
	}
	return "allocation " + strings.Join(parts, "; ")
}
