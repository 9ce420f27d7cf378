package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/switching"
	"github.com/metasched/metasched/switching/experiment"
	"github.com/metasched/metasched/switching/sim"
)

func newSimulateCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "simulate",
		Short: "Simulate switching policies and reproduce the papers' experiments",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSimulatePoliciesCmd(e), newSimulateExperimentCmd(e), newSimulateSelectionCmd(e))
	return cmd
}

// simFlags are the flags shared by simulate policies and experiment.
type simFlags struct {
	completions int64
	warmup      float64
	seed        uint64
	maxStates   int
	maxSweeps   int
	workers     int
	output      string
}

func (f *simFlags) register(cmd *cobra.Command, maxSweeps int, sweepsHelp string) {
	fl := cmd.Flags()
	fl.Int64Var(&f.completions, "completions", 200_000, "job completions measured per simulation (the papers: 200,000)")
	fl.Float64Var(&f.warmup, "warmup", 0.1, "simulate this fraction of --completions first and discard it")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed: the same seed gives the same numbers")
	fl.IntVar(&f.maxStates, "max-states", 100_000_000, "refuse optimal policies with more states")
	fl.IntVar(&f.maxSweeps, "max-sweeps", maxSweeps, sweepsHelp)
	fl.IntVar(&f.workers, "workers", 0, "solve goroutines (0: one per CPU); a simulation runs on one")
	fl.StringVar(&f.output, "output", "table", "table or json")
}

func (f *simFlags) check() error {
	switch {
	case f.completions < sim.Batches:
		return usagef("--completions: must be at least %d (one per batch of the confidence interval), got %d", sim.Batches, f.completions)
	case !(f.warmup >= 0) || math.IsInf(f.warmup, 1):
		return usagef("--warmup: must be a fraction >= 0, got %g", f.warmup)
	}
	if err := checkSolveLimits(f.maxSweeps, f.maxStates, f.workers); err != nil {
		return err
	}
	return checkOutput(f.output)
}

func (f *simFlags) solveOptions() experiment.SolveOptions {
	return experiment.SolveOptions{MaxStates: f.maxStates, MaxSweeps: f.maxSweeps, Workers: f.workers, Now: time.Now}
}

type policiesFlags struct {
	simFlags
	namedPolicy
	phases string
}

// namedPolicy is the flags that name one policy of a model, shared by
// simulate policies and policy evaluate.
type namedPolicy struct {
	model     string
	policy    string
	k         float64
	criterion string
	table     string
}

func (f *namedPolicy) addFlags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model file (YAML or JSON), required")
	fl.StringVar(&f.policy, "policy", "", "optimal, heuristic, static, best-static or cmu, required")
	fl.Float64Var(&f.k, "K", 5, "constant K of the heuristic")
	fl.StringVar(&f.criterion, "criterion", "average", "criterion the optimal policy is solved for: average or discounted")
	fl.StringVar(&f.table, "table", "", "optimal policy table saved by policy solve --save, instead of solving")
}

func newSimulatePoliciesCmd(e *env) *cobra.Command {
	var f policiesFlags
	cmd := &cobra.Command{
		Use:   "policies --model FILE --policy NAME",
		Short: "Simulate one switching policy on a model and measure its mean holding cost",
		Long: `Simulate the M-pool system of a model file exactly (Poisson arrivals, exponential
service and switching, preempt-resume; queues are not truncated) under one policy,
and report the time-average holding cost Σ c_i j_i with a 95% batch-means interval.

Policies: optimal (solved here on the model, --criterion average by default, or
loaded with --table), heuristic (Fisher et al.'s rule with constant --K), static
(the papers' proportional rounding), best-static (the fixed allocation with the
lowest exact M/M/k cost: the best a policy that never switches can do) and cmu.
Flags that do not apply to a policy are accepted and ignored.

--phases high=X,low=Y,mean=Z runs demand phases: in phase p (cycling from pool
1) pool p arrives at rate X and the others at Y, phases last an exponential time
of mean Z. The heuristic, static and best-static policies use the phase's rates;
the optimal policy is one table per phase.`,
		Example: `  metasched simulate policies --model examples/fisher-fig4-load3.4.yaml --policy heuristic --K 5
  metasched simulate policies --model examples/fisher-fig4-load3.4.yaml --policy optimal --output json
  metasched simulate policies --model examples/palmer-fig2-n4.yaml --policy static --phases high=2.97,low=0.0297,mean=100`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return simulatePolicies(cmd.Context(), e, f) },
	}
	f.register(cmd, 100_000, "give up solving the optimal policy after this many sweeps (it is then simulated anyway, and reported as not converged)")
	f.addFlags(cmd)
	cmd.Flags().StringVar(&f.phases, "phases", "", "demand phases high=X,low=Y,mean=Z")
	return cmd
}

// parsePhases reads "high=X,low=Y,mean=Z".
func parsePhases(s string) (*sim.Phases, error) {
	if s == "" {
		return nil, nil
	}
	ph := &sim.Phases{}
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, usagef("--phases: %q: want key=value (high, low, mean)", part)
		}
		x, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return nil, usagef("--phases: %s: %q is not a number", key, val)
		}
		switch key {
		case "high":
			ph.High = x
		case "low":
			ph.Low = x
		case "mean":
			ph.Mean = x
		default:
			return nil, usagef("--phases: unknown key %q: want high, low and mean", key)
		}
		if seen[key] {
			return nil, usagef("--phases: %s given twice", key)
		}
		seen[key] = true
	}
	for _, k := range []string{"high", "low", "mean"} {
		if !seen[k] {
			return nil, usagef("--phases: %s missing: want high=X,low=Y,mean=Z", k)
		}
	}
	if err := ph.Validate(); err != nil {
		return nil, usagef("--%w", err)
	}
	return ph, nil
}

// policyReport is the JSON output of simulate policies.
type policyReport struct {
	Policy            string             `json:"policy"`
	K                 *float64           `json:"K,omitempty"`
	Criterion         string             `json:"criterion,omitempty"`
	Model             string             `json:"model"`
	Seed              uint64             `json:"seed"`
	Phases            *phasesReport      `json:"phases,omitempty"`
	MeanCost          float64            `json:"mean_cost"`
	CI95              [2]float64         `json:"ci95"`
	Completions       int64              `json:"completions"`
	WarmupCompletions int64              `json:"warmup_completions"`
	Events            int64              `json:"events"`
	Switches          int64              `json:"switches"`
	PhaseChanges      int64              `json:"phase_changes,omitempty"`
	Time              float64            `json:"time"`
	MeanJobs          map[string]float64 `json:"mean_jobs"`
	MeanServers       map[string]float64 `json:"mean_servers"`
	TransitFraction   float64            `json:"transit_fraction"`
	SwitchCostRate    float64            `json:"switch_cost_rate"`
	BoundaryFraction  *float64           `json:"boundary_fraction,omitempty"`
	BeyondFraction    *float64           `json:"beyond_fraction,omitempty"`
	QueueLimit        int                `json:"queue_limit,omitempty"`  // the largest J_i
	QueueLimits       map[string]int     `json:"queue_limits,omitempty"` // J_i per pool
	Allocation        [][]int            `json:"allocation,omitempty"`
	Solves            []solveSummary     `json:"solves,omitempty"`
	Seconds           float64            `json:"seconds"`
	EventsPerSecond   float64            `json:"events_per_second"`
	pools             []string
}

type phasesReport struct {
	High float64 `json:"high"`
	Low  float64 `json:"low"`
	Mean float64 `json:"mean"`
}

type solveSummary struct {
	Criterion   switching.Criterion `json:"criterion"`
	States      int                 `json:"states"`
	Sweeps      int                 `json:"sweeps"`
	Converged   bool                `json:"converged"`
	Residual    float64             `json:"residual"`
	Seconds     float64             `json:"seconds"`
	AverageCost *float64            `json:"average_cost,omitempty"`
}

func simulatePolicies(ctx context.Context, e *env, f policiesFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	m, err := loadModel(f.model)
	if err != nil {
		return err
	}
	ph, err := parsePhases(f.phases)
	if err != nil {
		return err
	}
	spec, table, err := f.spec(m, f.maxStates)
	if err != nil {
		return err
	}

	var bar *progressBar
	if e.tty {
		bar = &progressBar{w: e.stderr}
	}
	so := f.solveOptions()
	if bar != nil {
		so.Progress = bar.update
	}
	b, err := experiment.Build(ctx, spec, m, ph, table, so)
	if bar != nil {
		bar.done()
	}
	switch {
	case errors.Is(err, switching.ErrCanceled):
		return fmt.Errorf("interrupted: %w", context.Canceled)
	case errors.Is(err, experiment.ErrNotConverged):
		fmt.Fprintf(e.stderr, "metasched: warning: %v; simulating the policy of the last sweep (raise --max-sweeps)\n", err)
	case errors.Is(err, switching.ErrTooLarge):
		return usagef("%s: %w (raise --max-states if the machine has the memory)", f.model, err)
	case err != nil:
		return usageError{Err: fmt.Errorf("--policy %s: %w", f.policy, err)}
	}

	cfg := sim.Config{
		Model: m, Policies: b.Policies, Phases: ph, Completions: f.completions, Warmup: f.warmup,
		Seed: f.seed, QueueLimits: b.QueueLimits, Now: time.Now,
	}
	if bar != nil {
		cfg.Progress = func(p sim.Progress) {
			bar.show(float64(p.Completions)/float64(p.Target), fmt.Sprintf("simulate %s: %d/%d completions", spec.Name(), p.Completions, p.Target))
		}
	}
	res, err := sim.Run(ctx, cfg)
	if bar != nil {
		bar.done()
	}
	if err != nil {
		if errors.Is(err, sim.ErrCanceled) {
			return fmt.Errorf("interrupted: %w", context.Canceled)
		}
		return err
	}
	rep := newPolicyReport(f, spec, m, ph, b, res)
	if f.output == "json" {
		return writeJSON(e.stdout, rep)
	}
	rep.print(e.stdout)
	return nil
}

// spec checks the flags that name the policy (--policy, --K, --criterion,
// --table) and loads the table if one is given.
func (f *namedPolicy) spec(m *switching.Model, maxStates int) (experiment.Spec, *switching.Table, error) {
	policy, k, criterion, tablePath := f.policy, f.k, f.criterion, f.table
	spec := experiment.Spec{Kind: policy, K: k, Criterion: switching.Criterion(criterion)}
	switch policy {
	case "":
		return spec, nil, usagef("--policy: required: one of %s", strings.Join(experiment.Kinds, ", "))
	case experiment.Heuristic:
		if !(k > 0) || math.IsInf(k, 0) {
			return spec, nil, usagef("--K: must be a positive number, got %g", k)
		}
	case experiment.Optimal:
		if spec.Criterion != switching.Average && spec.Criterion != switching.Discounted {
			return spec, nil, usagef("--criterion: must be average or discounted, got %q", criterion)
		}
	case experiment.Static, experiment.BestStatic, experiment.CMu:
	default:
		return spec, nil, usagef("--policy: %q: must be one of %s", policy, strings.Join(experiment.Kinds, ", "))
	}
	if tablePath == "" {
		return spec, nil, nil
	}
	if policy != experiment.Optimal {
		return spec, nil, usagef("--table: a policy table is the optimal policy; use it with --policy optimal")
	}
	table, err := loadTable(tablePath, m, maxStates)
	if err != nil {
		return spec, nil, err
	}
	spec.Criterion = table.Criterion
	return spec, table, nil
}

func loadTable(path string, m *switching.Model, maxStates int) (*switching.Table, error) {
	in, err := os.Open(path)
	if err != nil {
		return nil, usageError{Err: fmt.Errorf("--table: %w", err)}
	}
	defer in.Close()
	t, err := switching.ReadTable(in, maxStates)
	if err != nil {
		return nil, usageError{Err: fmt.Errorf("--table %s: %w", path, err)}
	}
	if t.Model.NumPools() != m.NumPools() || t.Model.Servers != m.Servers {
		return nil, usagef("--table %s: solved for %d servers and %d pools, the model has %d and %d",
			path, t.Model.Servers, t.Model.NumPools(), m.Servers, m.NumPools())
	}
	for i := range m.Pools {
		if t.Model.Pools[i].Name != m.Pools[i].Name {
			return nil, usagef("--table %s: pool %d is %q in the table, %q in the model", path, i+1, t.Model.Pools[i].Name, m.Pools[i].Name)
		}
	}
	return t, nil
}

func newPolicyReport(f policiesFlags, spec experiment.Spec, m *switching.Model, ph *sim.Phases, b *experiment.Built, r *sim.Result) *policyReport {
	rep := &policyReport{
		Policy: f.policy, Model: f.model, Seed: f.seed,
		MeanCost: r.MeanCost, CI95: r.CI95, Completions: r.Completions, WarmupCompletions: r.WarmupCompletions,
		Events: r.Events, Switches: r.Switches, PhaseChanges: r.PhaseChanges, Time: r.Time,
		MeanJobs: map[string]float64{}, MeanServers: map[string]float64{},
		TransitFraction: r.TransitFraction, SwitchCostRate: r.SwitchCostRate,
		Allocation: b.Targets, Seconds: r.Seconds,
	}
	if r.Seconds > 0 {
		rep.EventsPerSecond = float64(r.Events) / r.Seconds
	}
	if spec.Kind == experiment.Heuristic {
		rep.K = &spec.K
	}
	if spec.Kind == experiment.Optimal {
		rep.Criterion = string(spec.Criterion)
	}
	if ph != nil {
		rep.Phases = &phasesReport{ph.High, ph.Low, ph.Mean}
	}
	for i, p := range m.Pools {
		rep.pools = append(rep.pools, p.Name)
		rep.MeanJobs[p.Name] = r.MeanJobs[i]
		rep.MeanServers[p.Name] = r.MeanServers[i]
	}
	if b.QueueLimits != nil {
		rep.QueueLimit, rep.QueueLimits = slices.Max(b.QueueLimits), map[string]int{}
		for i, p := range m.Pools {
			rep.QueueLimits[p.Name] = b.QueueLimits[i]
		}
	}
	if !math.IsNaN(r.BoundaryFraction) {
		rep.BoundaryFraction, rep.BeyondFraction = &r.BoundaryFraction, &r.BeyondFraction
	}
	for _, s := range b.Solves {
		sum := solveSummary{Criterion: s.Criterion, States: s.Table.Space.States, Sweeps: s.Sweeps,
			Converged: s.Converged, Residual: s.Residual, Seconds: s.Seconds}
		if !math.IsNaN(s.AverageCost) {
			sum.AverageCost = &s.AverageCost
		}
		rep.Solves = append(rep.Solves, sum)
	}
	return rep
}

func (r *policyReport) print(w io.Writer) {
	name := r.Policy
	if r.K != nil {
		name += fmt.Sprintf(" (K = %g)", *r.K)
	}
	if r.Criterion != "" {
		name += fmt.Sprintf(" (%s criterion)", r.Criterion)
	}
	fmt.Fprintf(w, "policy        %s\n", name)
	fmt.Fprintf(w, "model         %s\n", r.Model)
	if r.Phases != nil {
		fmt.Fprintf(w, "phases        high %.5g, low %.5g, mean length %.5g (%d changes measured)\n", r.Phases.High, r.Phases.Low, r.Phases.Mean, r.PhaseChanges)
	}
	for i, s := range r.Solves {
		conv := "converged"
		if !s.Converged {
			conv = fmt.Sprintf("NOT converged (residual %.3g)", s.Residual)
		}
		label := "solve"
		if len(r.Solves) > 1 {
			label = fmt.Sprintf("solve ph. %d", i+1)
		}
		fmt.Fprintf(w, "%-13s %s criterion, %d states, %d sweeps, %s\n", label, s.Criterion, s.States, s.Sweeps, conv)
	}
	for i, a := range r.Allocation {
		label := "allocation"
		if len(r.Allocation) > 1 {
			label = fmt.Sprintf("alloc. ph. %d", i+1)
		}
		fmt.Fprintf(w, "%-13s %v\n", label, a)
	}
	half := (r.CI95[1] - r.CI95[0]) / 2
	fmt.Fprintf(w, "mean cost     %.6g ± %.3g  (95%% interval %.6g to %.6g)\n", r.MeanCost, half, r.CI95[0], r.CI95[1])
	fmt.Fprintf(w, "mean jobs    ")
	for _, p := range r.pools {
		fmt.Fprintf(w, " %s %.4g", p, r.MeanJobs[p])
	}
	fmt.Fprintf(w, "\nmean servers ")
	for _, p := range r.pools {
		fmt.Fprintf(w, " %s %.3g", p, r.MeanServers[p])
	}
	fmt.Fprintf(w, "\nswitches      %d started; servers in transit %.1f%% of the time\n", r.Switches, 100*r.TransitFraction)
	if r.SwitchCostRate > 0 {
		fmt.Fprintf(w, "switch costs  %.4g per unit time (not in the mean cost)\n", r.SwitchCostRate)
	}
	if r.BoundaryFraction != nil {
		js := make([]int, len(r.pools))
		for i, p := range r.pools {
			js[i] = r.QueueLimits[p]
		}
		fmt.Fprintf(w, "boundary      a queue sat at its table's limit J−1 (J = %s) for %.2f%% of the time, beyond it (where the table answers as at J−1) for %.2f%%\n",
			switching.FormatLimits(js), 100**r.BoundaryFraction, 100**r.BeyondFraction)
	}
	fmt.Fprintf(w, "run           %d completions measured after %d warm-up, %d events, %.4g time units\n",
		r.Completions, r.WarmupCompletions, r.Events, r.Time)
	fmt.Fprintf(w, "speed         %.3f s, %.1f M events/s\n", r.Seconds, r.EventsPerSecond/1e6)
}

type experimentFlags struct {
	simFlags
	out        string
	policies   string
	x          string
	queueLimit int
	// truncation of the optimal (average) column: auto grows it at each
	// point (switching.GrowTruncation), fixed keeps the experiment's J.
	truncation        string
	boundaryTolerance float64
	timeLimit         time.Duration
}

func newSimulateExperimentCmd(e *env) *cobra.Command {
	var f experimentFlags
	cmd := &cobra.Command{
		Use:   "experiment NAME --out DIR",
		Short: "Reproduce one of the papers' figures: every policy over the figure's x-axis",
		Long: `Run one of the papers' experiments: simulate every policy at every point of the
figure's x-axis, write NAME.csv, NAME.svg and NAME.png to --out, and print the
table. Experiments: ` + strings.Join(experiment.Names(), ", ") + `.

Optimal policies are solved at every point (and per demand phase): the average
criterion on the model with blocking priced, and the papers' discounted policy on
their model (their Λ, no blocking price, their J). With --truncation auto (the
default) the average policy's J is grown at each point from the experiment's (or
--queue-limit) until every pool's long-run boundary mass is under
--boundary-tolerance and the optimum stops moving, as policy solve --truncation
auto does, within --time-limit and --max-states per point; its column is named
"optimal (average, J grown)" and the notes give each point's J, and why where it
did not settle. A solve that does not converge within --max-sweeps is reported,
not simulated. Ctrl-C stops the run and writes the rows finished so far.`,
		Example: `  metasched simulate experiment fisher-fig4 --out results
  metasched simulate experiment palmer-fig2 --out results --completions 50000
  metasched simulate experiment fisher-fig3 --out results --policies "heuristic K=5,static,best-static"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("%s: want one experiment name: %s", cmd.CommandPath(), strings.Join(experiment.Names(), ", "))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return simulateExperiment(cmd.Context(), e, args[0], f, cmd.Flags().Changed("max-sweeps"))
		},
	}
	f.register(cmd, 20_000, "give up an optimal policy's solve after this many sweeps (BiCGSTAB iterations for the average criterion's default method)")
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "directory for NAME.csv, NAME.svg and NAME.png, required")
	fl.StringVar(&f.policies, "policies", "", `comma-separated subset of the policies, by their names in the table (e.g. "heuristic K=5,static")`)
	fl.StringVar(&f.x, "x", "", "comma-separated subset of the x-axis")
	fl.IntVar(&f.queueLimit, "queue-limit", 0, "solve the optimal policies with queues truncated at this J, or start growing it there (default: the experiment's, 15 for Fisher, 40 for Palmer)")
	fl.StringVar(&f.truncation, "truncation", "auto", "the optimal (average) policy's J: auto grows it at each point until it stops mattering, fixed keeps --queue-limit")
	fl.Float64Var(&f.boundaryTolerance, "boundary-tolerance", switching.DefaultBoundaryTolerance, "with --truncation auto: the long-run probability of a queue at its J−1 each pool must be under")
	fl.DurationVar(&f.timeLimit, "time-limit", 10*time.Minute, "with --truncation auto: stop growing a point's J once its solves took this long, or before a solve that would pass it (0: no limit); --max-states bounds the memory")
	return cmd
}

func simulateExperiment(ctx context.Context, e *env, name string, f experimentFlags, sweepsSet bool) error {
	if err := f.check(); err != nil {
		return err
	}
	ex, err := experiment.Lookup(name)
	if err != nil {
		return usageError{Err: err}
	}
	if f.out == "" {
		return usagef("--out: required: the directory for %s.csv, .svg and .png", name)
	}
	if f.queueLimit < 0 || f.queueLimit == 1 {
		return usagef("--queue-limit: must be at least 2, got %d", f.queueLimit)
	}
	if err := checkGrowth(f.truncation, f.boundaryTolerance, f.timeLimit); err != nil {
		return err
	}
	opts := experiment.Options{Completions: f.completions, Warmup: f.warmup, Seed: f.seed, Solve: f.solveOptions(),
		QueueLimit: f.queueLimit, Now: time.Now}
	if f.truncation == "auto" {
		opts.Solve.Grow = &switching.GrowOptions{BoundaryTolerance: f.boundaryTolerance, MaxSeconds: f.timeLimit.Seconds()}
	}
	if !sweepsSet {
		opts.Solve.MaxSweeps = 0 // the experiment's own cap
	}
	if f.policies != "" {
		for p := range strings.SplitSeq(f.policies, ",") {
			opts.Policies = append(opts.Policies, strings.TrimSpace(p))
		}
		if _, err := ex.Selected(opts.Policies); err != nil {
			return usagef("--policies: %w", err)
		}
	}
	if f.x != "" {
		for s := range strings.SplitSeq(f.x, ",") {
			x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil {
				return usagef("--x: %q is not a number", s)
			}
			opts.X = append(opts.X, x)
		}
		if _, err := ex.Points(opts.X); err != nil {
			return usagef("--x: %w", err)
		}
	}
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return usageError{Err: fmt.Errorf("--out: %w", err)}
	}
	var bar *progressBar
	if e.tty {
		bar = &progressBar{w: e.stderr}
		opts.Progress = func(p experiment.Progress) {
			bar.show((float64(p.Step-1)+p.Fraction)/float64(p.Steps),
				fmt.Sprintf("%d/%d  x=%g  %s: %s", p.Step, p.Steps, p.X, p.Policy, p.Stage))
		}
	}
	rows, runErr := ex.Run(ctx, opts)
	if bar != nil {
		bar.done()
	}
	if runErr != nil && len(rows) == 0 {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", context.Canceled)
		}
		return runErr
	}
	files, err := writeExperiment(f.out, ex, rows)
	if err != nil {
		return err
	}
	if f.output == "json" {
		if err := writeJSON(e.stdout, experimentReport(ex, rows, files)); err != nil {
			return err
		}
	} else {
		experiment.WriteTable(e.stdout, ex, rows)
		fmt.Fprintf(e.stdout, "\nwrote %s\n", strings.Join(files, ", "))
	}
	if runErr != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted after %d rows (written): %w", len(rows), context.Canceled)
		}
		return fmt.Errorf("stopped after %d rows (written): %w", len(rows), runErr)
	}
	return nil
}

func writeExperiment(dir string, ex *experiment.Experiment, rows []experiment.Row) ([]string, error) {
	return writeFigure(dir, ex.Name,
		func(w io.Writer) error { return experiment.WriteCSV(w, ex, rows) },
		func(w io.Writer, format string) error { return experiment.WritePlot(w, ex, rows, format) })
}

// writeFigure writes DIR/NAME.csv, .svg and .png and returns their paths.
func writeFigure(dir, name string, csv func(io.Writer) error, plot func(io.Writer, string) error) ([]string, error) {
	var files []string
	write := func(ext string, fn func(io.Writer) error) error {
		path := filepath.Join(dir, name+"."+ext)
		out, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := fn(out); err != nil {
			out.Close()
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := out.Close(); err != nil {
			return err
		}
		files = append(files, path)
		return nil
	}
	if err := write("csv", csv); err != nil {
		return nil, err
	}
	for _, format := range []string{"svg", "png"} {
		if err := write(format, func(w io.Writer) error { return plot(w, format) }); err != nil {
			return nil, err
		}
	}
	return files, nil
}

type experimentRow struct {
	X                float64     `json:"x"`
	Policy           string      `json:"policy"`
	MeanCost         *float64    `json:"mean_cost"`
	CI95             *[2]float64 `json:"ci95"`
	Completions      int64       `json:"completions"`
	Events           int64       `json:"events"`
	Switches         int64       `json:"switches"`
	TransitFraction  float64     `json:"transit_fraction"`
	BoundaryFraction *float64    `json:"boundary_fraction,omitempty"`
	BeyondFraction   *float64    `json:"beyond_fraction,omitempty"`
	QueueLimits      []int       `json:"queue_limits,omitempty"`
	PhaseLimits      [][]int     `json:"phase_queue_limits,omitempty"`
	Truncation       string      `json:"truncation,omitempty"`
	Seconds          float64     `json:"seconds"`
	SolveSeconds     float64     `json:"solve_seconds,omitempty"`
	SolveSweeps      int         `json:"solve_sweeps,omitempty"`
	Converged        bool        `json:"converged"`
	Note             string      `json:"note,omitempty"`
}

func experimentReport(ex *experiment.Experiment, rows []experiment.Row, files []string) any {
	out := struct {
		Experiment string          `json:"experiment"`
		Title      string          `json:"title"`
		Source     string          `json:"source"`
		XLabel     string          `json:"x_label"`
		Claim      string          `json:"claim"`
		Files      []string        `json:"files"`
		Notes      []string        `json:"notes"` // the figure's (experiment.Notes)
		Rows       []experimentRow `json:"rows"`
	}{ex.Name, ex.Title, ex.Source, ex.XLabel, ex.Claim, files, experiment.Notes(ex, rows), nil}
	for _, r := range rows {
		jr := experimentRow{X: r.X, Policy: r.Policy, Completions: r.Completions, Events: r.Events, Switches: r.Switches,
			TransitFraction: r.TransitFraction, Seconds: r.Seconds, SolveSeconds: r.SolveSeconds,
			SolveSweeps: r.SolveSweeps, Converged: r.Converged, Note: r.Note, QueueLimits: r.QueueLimits, PhaseLimits: r.PhaseLimits, Truncation: r.Truncation}
		if !math.IsNaN(r.MeanCost) {
			jr.MeanCost, jr.CI95 = &r.MeanCost, &r.CI95
		}
		if !math.IsNaN(r.BoundaryFraction) {
			jr.BoundaryFraction, jr.BeyondFraction = &r.BoundaryFraction, &r.BeyondFraction
		}
		out.Rows = append(out.Rows, jr)
	}
	return out
}
