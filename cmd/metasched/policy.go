package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/internal/plotx"
	"github.com/metasched/metasched/switching"
)

func newPolicyCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Compute and inspect pool-switching policies",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newPolicySolveCmd(e), newPolicyEvaluateCmd(e), newPolicyPapersCmd(e))
	return cmd
}

type solveFlags struct {
	model     string
	criterion string
	method    string
	horizon   int
	tolerance float64
	maxSweeps int
	maxStates int
	workers   int
	start     string
	view      string
	save      string
	output    string
	boundary  bool
	// boundarySweeps caps the long-run analysis; 0: the default budget.
	boundarySweeps int
	// truncation is fixed (the model's J) or auto (grown until it no
	// longer matters), with its tolerance and time limit.
	truncation        string
	lump              bool
	boundaryTolerance float64
	timeLimit         time.Duration
}

func newPolicySolveCmd(e *env) *cobra.Command {
	var f solveFlags
	cmd := &cobra.Command{
		Use:   "solve --model FILE",
		Short: "Compute the optimal switching policy of a model",
		Long: `Compute the optimal switching policy of a model file (see
docs/reference/model-files.md, "The switching model") and print a 2-D view of
it like the papers' tables.

The average criterion (the default) minimizes the long-run average cost per unit
time: what a running system measures. The discounted criterion is the papers'
(α = the model's discount per uniformized step); it is myopic when switches are
slow relative to the event rate, and then may never switch at all.

A view picks the slice to print, e.g. --view "k=1,1,1 m=0 j1=0 rows=j2 cols=j3
size=10": k servers per pool (summing to N), m=0 (no switches in flight), fixed
queue lengths for the other pools (default 0), the queues on the rows and
columns, and how many lengths to show (at most J). Without --view the slice
shown is chosen to show where the policy acts: among the server
configurations near the even split, every pair of queues on the axes and the
other queues at 0 or half the size, the one whose action changes most often.`,
		Example: `  metasched policy solve --model examples/palmer-table2.yaml --criterion discounted
  metasched policy solve --model examples/fisher-fig4-n5.yaml --output json
  metasched policy solve --model examples/fisher-table1.yaml --criterion discounted \
      --view "k=1,1,1 m=0 j1=0 rows=j2 cols=j3 size=10" --save table.policy`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.horizon > 0 && !cmd.Flags().Changed("criterion") {
				f.criterion = string(switching.Discounted) // a horizon runs the papers' recurrence
			}
			return policySolve(cmd.Context(), e, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.model, "model", "", "model file (YAML or JSON), required")
	fl.StringVar(&f.criterion, "criterion", "average", "average or discounted")
	fl.StringVar(&f.method, "method", "", "krylov (policy iteration with BiCGSTAB evaluations preconditioned by ILU(0), and by a coarse level when one queue is ten times slower than another; the default for the average criterion), value (value iteration, the default for the discounted one) or policy (policy iteration with iterative evaluations)")
	fl.IntVar(&f.horizon, "horizon", 0, "run this many sweeps of the finite-horizon recurrence instead (discounted)")
	fl.Float64Var(&f.tolerance, "tolerance", 1e-6, "stop when the sup-norm (discounted) or span (average) of V_n − V_{n−1} is below this")
	fl.IntVar(&f.maxSweeps, "max-sweeps", 100_000, "give up (converged: false) after this many sweeps")
	fl.IntVar(&f.maxStates, "max-states", 100_000_000, fmt.Sprintf("refuse models with more states (%d bytes each by value iteration; krylov adds 8 bytes per entry of a state's row, one per transition and one each for the state and the gain, and 95 more; a coarse level adds 24 more and its share of 1 KiB per aggregate)", switching.BytesPerState))
	fl.IntVar(&f.workers, "workers", 0, "sweep goroutines (0: one per CPU)")
	fl.StringVar(&f.start, "start", "heuristic", "first policy of policy improvement: heuristic (K=5) or cmu")
	fl.StringVar(&f.view, "view", "", `2-D slice to print, e.g. "k=1,1 m=0 rows=j1 cols=j2 size=11"`)
	fl.StringVar(&f.save, "save", "", "save the policy table to this file")
	fl.StringVar(&f.output, "output", "table", "table or json")
	fl.BoolVar(&f.lump, "lump", true, "solve on the space with exchangeable pools (the same rates, costs, J and switch rates) lumped: the same optimum on fewer states; false keeps every permutation")
	fl.BoolVar(&f.boundary, "boundary", true, "compute the long-run fraction of time at the truncation and the mean holding cost of the policy")
	fl.StringVar(&f.truncation, "truncation", "fixed", "fixed: the model's queue_limit; auto: grow each pool's J until its long-run boundary mass is under --boundary-tolerance and the optimum moves by no more than the solve's gap when every J grows by a step (average criterion)")
	fl.Float64Var(&f.boundaryTolerance, "boundary-tolerance", switching.DefaultBoundaryTolerance, "with --truncation auto: the long-run probability of a queue at its J−1 each pool must be under")
	fl.DurationVar(&f.timeLimit, "time-limit", 0, "with --truncation auto: stop growing once the solves took this long (0: no limit); --max-states bounds the memory")
	fl.IntVar(&f.boundarySweeps, "boundary-sweeps", 0, fmt.Sprintf("cap the long-run analysis at this many sweeps (0: %d× the solve's work in sweeps, a BiCGSTAB iteration counting %d, at least %d M state updates, at most %s sweeps)",
		switching.BoundaryFactor, switching.KrylovSweepWork, switching.BoundaryFloor/1_000_000, plotx.Plain(switching.BoundaryCeiling)))
	return cmd
}

func loadModel(path string) (*switching.Model, error) {
	return parseFlagFile("--model", path, switching.ParseModel)
}

func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return usagef("--output: must be table or json, got %q", o)
	}
	return nil
}

func policySolve(ctx context.Context, e *env, f solveFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	m, err := loadModel(f.model)
	if err != nil {
		return err
	}
	var view switching.View
	if f.view != "" {
		if view, err = switching.ParseView(m, f.view); err != nil {
			return usagef("--view: %w", err)
		}
	}
	if err := checkSolveLimits(f.maxSweeps, f.maxStates, f.workers); err != nil {
		return err
	}
	if f.horizon < 0 {
		return usagef("--horizon: must be 0 (infinite) or more, got %d", f.horizon)
	}
	if f.boundarySweeps < 0 {
		return usagef("--boundary-sweeps: must be 0 (the default budget) or more, got %d", f.boundarySweeps)
	}
	if err := checkTruncation(f); err != nil {
		return err
	}
	opts := switching.SolveOptions{
		Criterion: switching.Criterion(f.criterion),
		Method:    switching.Method(f.method),
		Horizon:   f.horizon,
		Tolerance: f.tolerance,
		MaxSweeps: f.maxSweeps,
		MaxStates: f.maxStates,
		Workers:   f.workers,
		Start:     f.start,
		Boundary:  f.boundary,
		Unlumped:  !f.lump,
		Now:       time.Now,

		BoundarySweeps: f.boundarySweeps,
	}
	var bar *progressBar
	if e.tty {
		bar = &progressBar{w: e.stderr}
		opts.Progress = bar.update
	}
	var sol *switching.Solution
	var tr *switching.Truncation
	if f.truncation == "auto" {
		tr, err = growTruncation(ctx, e, m, opts, f, bar)
		if tr != nil {
			sol, m = tr.Solution, tr.Solution.Table.Model
		}
	} else {
		sol, err = switching.Solve(ctx, m, opts)
	}
	if bar != nil {
		bar.done()
	}
	if err != nil {
		switch {
		case errors.Is(err, switching.ErrCanceled):
			return fmt.Errorf("interrupted: %w", context.Canceled)
		case errors.Is(err, switching.ErrTooLarge):
			return usagef("%s: %w (raise --max-states if the machine has the memory)", f.model, err)
		}
		return usageError{Err: err}
	}
	if f.save != "" {
		if err := saveTable(f.save, sol.Table); err != nil {
			return err
		}
	}
	var choice *switching.ViewChoice
	if f.view == "" {
		v, c := switching.ChooseView(m, sol.Table)
		view, choice = v, &c
	}
	rep := newSolveReport(f.model, m, sol, view, f.tolerance)
	if tr != nil {
		rep.Truncation = newTruncationReport(m, tr, f.boundaryTolerance)
	}
	if choice != nil {
		rep.View.Chosen = newViewChoice(m, *choice)
	}
	if st := rep.Stationary; st != nil && !st.Converged {
		st.Note = stationaryNote(st, sol, f.boundarySweeps == 0)
		st.budget = stationaryBudget(st, sol, f.boundarySweeps == 0)
	}
	if f.output == "json" {
		return writeJSON(e.stdout, rep)
	}
	rep.print(e.stdout, m)
	if f.save != "" {
		fmt.Fprintf(e.stdout, "\nsaved the policy table to %s\n", f.save)
	}
	return nil
}

// checkSolveLimits checks the flags that bound a solve, shared by policy
// solve and simulate.
func checkSolveLimits(maxSweeps, maxStates, workers int) error {
	switch {
	case maxSweeps < 1:
		return usagef("--max-sweeps: must be at least 1, got %d", maxSweeps)
	case maxStates < 1:
		return usagef("--max-states: must be at least 1, got %d", maxStates)
	case workers < 0:
		return usagef("--workers: must be 0 (one per CPU) or more, got %d", workers)
	}
	return nil
}

func saveTable(path string, t *switching.Table) error {
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--save: %w", err)
	}
	if err := switching.WriteTable(out, t); err != nil {
		out.Close()
		return fmt.Errorf("--save %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("--save %s: %w", path, err)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// solveReport is the JSON output of policy solve.
type solveReport struct {
	Model          string              `json:"model"`
	Criterion      switching.Criterion `json:"criterion"`
	Method         switching.Method    `json:"method"`
	Horizon        int                 `json:"horizon,omitempty"`
	Discount       *float64            `json:"discount,omitempty"`
	Uniformization float64             `json:"uniformization"`
	States         int                 `json:"states"`
	Configurations int                 `json:"configurations"`
	QueueStates    int                 `json:"queue_states"`
	// Lumped: the exchangeable pools the space lumps, by name, and the
	// states the space has without that.
	Lumped         [][]string `json:"lumped_pools,omitempty"`
	UnlumpedStates int        `json:"unlumped_states,omitempty"`
	MemoryBytes    int        `json:"memory_bytes"`
	Sweeps         int        `json:"sweeps"`
	Improvements   int        `json:"improvements,omitempty"`
	Fallback       string     `json:"fallback,omitempty"`
	Seconds        float64    `json:"seconds"`
	SecondsPerSwp  float64    `json:"seconds_per_sweep"`
	Converged      bool       `json:"converged"`
	Residual       float64    `json:"residual"`
	Tolerance      float64    `json:"tolerance"`
	AverageCost    *float64   `json:"average_cost"`
	AverageLower   *float64   `json:"average_cost_lower,omitempty"`
	AverageUpper   *float64   `json:"average_cost_upper,omitempty"`
	// UntruncatedAtLeast: with blocking_cost "lower", the certified lower
	// end of the optimum, which bounds the untruncated system's optimum.
	UntruncatedAtLeast *float64          `json:"untruncated_cost_at_least,omitempty"`
	Stationary         *stationaryReport `json:"stationary,omitempty"`
	QueueLimits        map[string]int    `json:"queue_limits"`
	Truncation         *truncationReport `json:"truncation,omitempty"`
	Actions            []actionLegend    `json:"actions"`
	View               viewReport        `json:"view"`
}

// stationaryReport is the long-run analysis of a solve, with a note when
// it stopped at its budget before converging.
type stationaryReport struct {
	*switching.Stationary
	Note string `json:"note,omitempty"`

	budget string // the budget's origin, for the text output
}

// stationaryNote says that the long-run analysis st stopped at its budget
// before converging, what its figures are then, and how to ask for more.
func stationaryNote(st *stationaryReport, sol *switching.Solution, byDefault bool) string {
	return fmt.Sprintf("the long-run analysis stopped at %s at residual %.3g, before converging: its figures are "+
		"those after %d steps from the empty system, not the long run; %s", stationaryBudget(st, sol, byDefault),
		st.Residual, st.Sweeps, stationaryMore(st))
}

// stationaryBudget names the budget of an analysis.
func stationaryBudget(st *stationaryReport, sol *switching.Solution, byDefault bool) string {
	if !byDefault {
		return fmt.Sprintf("its budget of %d sweeps (--boundary-sweeps)", st.MaxSweeps)
	}
	work := fmt.Sprintf("%d sweeps", sol.Work())
	if sol.Work() != sol.Sweeps {
		work = fmt.Sprintf("work of %d sweeps (%d BiCGSTAB iterations, each about %d sweeps, and %d improvements)",
			sol.Work(), sol.Sweeps, switching.KrylovSweepWork, sol.Improvements)
		if solvedBy(sol) != switching.Krylov {
			work = fmt.Sprintf("work of %d sweeps (%d sweeps and %d improvements)", sol.Work(), sol.Sweeps, sol.Improvements)
		}
	}
	return fmt.Sprintf("its default budget of %d sweeps (%d× the solve's %s; at least %d M state updates, at most %s sweeps)",
		st.MaxSweeps, switching.BoundaryFactor, work, switching.BoundaryFloor/1_000_000, plotx.Plain(switching.BoundaryCeiling))
}

// stationaryMore says how to run an analysis that stopped longer.
func stationaryMore(st *stationaryReport) string {
	return fmt.Sprintf("--boundary-sweeps %d runs it ten times longer, --boundary=false skips it", 10*st.MaxSweeps)
}

type actionLegend struct {
	Action int    `json:"action"`
	From   string `json:"from"`
	To     string `json:"to"`
}

type viewReport struct {
	Spec string `json:"spec"`
	// Chosen says how the view was chosen when none was given.
	Chosen  *viewChoice    `json:"chosen,omitempty"`
	K       []int          `json:"k"`
	Rows    string         `json:"rows"`
	Cols    string         `json:"cols"`
	Fixed   map[string]int `json:"fixed"`
	Size    int            `json:"size"`
	Actions [][]int        `json:"actions"`
}

// solvedBy is the method a solve started with (a krylov solve that fell
// back to value iteration held the krylov method's memory).
func solvedBy(sol *switching.Solution) switching.Method {
	if sol.Fallback != "" {
		return switching.Krylov
	}
	return sol.Method
}

// relGap is the certified bounds' gap relative to the upper bound.
func relGap(lo, hi float64) float64 {
	if hi == 0 {
		return hi - lo
	}
	return (hi - lo) / math.Abs(hi)
}

func newSolveReport(path string, m *switching.Model, sol *switching.Solution, v switching.View, tolerance float64) *solveReport {
	s := sol.Table.Space
	r := &solveReport{
		Model: path, Criterion: sol.Criterion, Method: sol.Method, Horizon: sol.Horizon,
		Uniformization: m.Lambda(),
		States:         s.States, Configurations: s.Configs, QueueStates: s.B,
		MemoryBytes: s.States * int(switching.StateBytes(m, solvedBy(sol))),
		Fallback:    sol.Fallback,
		Sweeps:      sol.Sweeps, Improvements: sol.Improvements, Seconds: sol.Seconds,
		Converged: sol.Converged, Residual: sol.Residual, Tolerance: tolerance,
		View: newViewReport(v, sol.Table),
	}
	for _, g := range s.Symmetric {
		var names []string
		for _, i := range g {
			names = append(names, m.Pools[i].Name)
		}
		r.Lumped = append(r.Lumped, names)
	}
	if r.Lumped != nil {
		_, n, _ := switching.CountStates(m)
		r.UnlumpedStates = int(n)
	}
	if sol.Stationary != nil {
		r.Stationary = &stationaryReport{Stationary: sol.Stationary}
	}
	if sol.Sweeps > 0 {
		r.SecondsPerSwp = sol.Seconds / float64(sol.Sweeps)
	}
	if sol.Criterion == switching.Discounted {
		d := m.Discount
		r.Discount = &d
	}
	if !math.IsNaN(sol.AverageCost) {
		c, lo, hi := sol.AverageCost, sol.AverageCostLower, sol.AverageCostUpper
		r.AverageCost, r.AverageLower, r.AverageUpper = &c, &lo, &hi
		if m.BlockingLower {
			r.UntruncatedAtLeast = &lo
		}
	}
	r.Actions = actionsOf(m)
	r.QueueLimits = map[string]int{}
	for i, p := range m.Pools {
		r.QueueLimits[p.Name] = m.Limit(i)
	}
	return r
}

// actionsOf are the actions of a model's policy tables: 1… a switch of
// one server between two pools (0 is doing nothing).
func actionsOf(m *switching.Model) []actionLegend {
	var out []actionLegend
	for i, p := range switching.Pairs(m.NumPools()) {
		out = append(out, actionLegend{i + 1, m.Pools[p.From].Name, m.Pools[p.To].Name})
	}
	return out
}

// printActions prints the legend of the actions' numbers.
func printActions(w io.Writer, actions []actionLegend) {
	legend := []string{"0 = do nothing"}
	for _, a := range actions {
		legend = append(legend, fmt.Sprintf("%d = %s→%s", a.Action, a.From, a.To))
	}
	for i, line := range breakList(strings.Join(legend, ", "), tableWidth-11) {
		label := "actions:"
		if i > 0 {
			label = ""
		}
		fmt.Fprintf(w, "%-10s %s\n", label, line)
	}
}

// viewChoice is how policy solve chose its view (switching.ChooseView).
type viewChoice struct {
	Candidates int `json:"candidates"`
	// Changes counts the cells whose action differs from a neighbour's,
	// Switching those that start a switch.
	Changes   int  `json:"changes"`
	Switching int  `json:"switching"`
	Unserved  bool `json:"unserved,omitempty"`
	// Default is the spec of the even split's view, for --view.
	Default string `json:"default"`
}

func newViewChoice(m *switching.Model, c switching.ViewChoice) *viewChoice {
	return &viewChoice{Candidates: c.Candidates, Changes: c.Changes, Switching: c.Switching, Unserved: c.Unserved,
		Default: switching.DefaultView(m).String()}
}

// describe says in words how the view of spec (cells × cells) was
// chosen and how to ask for another.
func (c *viewChoice) describe(spec string, cells int) []string {
	var how string
	switch {
	case c.Switching == 0 && c.Changes == 0:
		how = fmt.Sprintf("the policy does nothing in any of the %d slices tried; this is the even split", c.Candidates)
	case c.Unserved:
		how = fmt.Sprintf("chosen among %d slices as the one whose action changes most often (%d of %d cells start a switch);",
			c.Candidates, c.Switching, cells*cells)
		how += "\n           no slice with every pool served has a switch, so this one leaves a pool without servers"
	case c.Candidates == 1:
		how = fmt.Sprintf("the only slice with every pool served (%d of %d cells start a switch)", c.Switching, cells*cells)
	default:
		how = fmt.Sprintf("chosen among %d slices as the one whose action changes most often (%d of %d cells start a switch)",
			c.Candidates, c.Switching, cells*cells)
	}
	ask := fmt.Sprintf("--view %q shows the even split; --view picks any slice (see --help)", c.Default)
	if c.Default == spec {
		ask = "--view picks another slice (see --help)"
	}
	return []string{how, ask}
}

func newViewReport(v switching.View, p switching.Policy) viewReport {
	r := viewReport{Spec: v.String(), K: v.K, Rows: fmt.Sprintf("j%d", v.Rows+1), Cols: fmt.Sprintf("j%d", v.Cols+1),
		Fixed: map[string]int{}, Size: v.Size}
	for i, n := range v.Fixed {
		r.Fixed[fmt.Sprintf("j%d", i+1)] = n
	}
	for _, row := range v.Slice(p) {
		out := make([]int, len(row))
		for c, a := range row {
			out[c] = int(a)
		}
		r.Actions = append(r.Actions, out)
	}
	return r
}

func (r *solveReport) print(w io.Writer, m *switching.Model) {
	names := make([]string, m.NumPools())
	for i, p := range m.Pools {
		names[i] = p.Name
	}
	fmt.Fprintf(w, "model:     %s: %d pools (%s), N = %d servers, J = %s, Λ = %g\n",
		r.Model, m.NumPools(), strings.Join(names, ", "), m.Servers, switching.FormatLimits(m.Limits()), r.Uniformization)
	fmt.Fprintf(w, "states:    %d (%d configurations × %d queue states), %s\n",
		r.States, r.Configurations, r.QueueStates, switching.FormatBytes(uint64(r.MemoryBytes)))
	if r.Lumped != nil {
		var groups []string
		for _, g := range r.Lumped {
			groups = append(groups, strings.Join(g, " and "))
		}
		fmt.Fprintf(w, "           exchangeable pools lumped (%s): %d states without that\n", strings.Join(groups, "; "), r.UnlumpedStates)
	}
	crit := string(r.Criterion)
	if r.Discount != nil {
		crit += fmt.Sprintf(" (α = %g)", *r.Discount)
	}
	krylov := "policy iteration with BiCGSTAB/ILU(0) evaluations (sweeps are BiCGSTAB iterations)"
	if p := switching.CoarsePool(m); p >= 0 {
		krylov = fmt.Sprintf("policy iteration with BiCGSTAB evaluations preconditioned by ILU(0) and a coarse level over %s's queue (sweeps are BiCGSTAB iterations)", m.Pools[p].Name)
	}
	method := map[switching.Method]string{switching.ValueIteration: "value iteration", switching.PolicyIteration: "policy improvement",
		switching.Krylov: krylov}[r.Method]
	switch {
	case r.Horizon > 0:
		fmt.Fprintf(w, "solve:     %s, finite horizon of %d steps, %.3g s\n", crit, r.Horizon, r.Seconds)
	case r.Converged:
		fmt.Fprintf(w, "solve:     %s criterion, %s: converged after %d sweeps", crit, method, r.Sweeps)
		if r.Improvements > 0 {
			fmt.Fprintf(w, " and %d improvements", r.Improvements)
		}
		fmt.Fprintf(w, ", %.3g s (residual %.3g)\n", r.Seconds, r.Residual)
	default:
		fmt.Fprintf(w, "solve:     %s criterion, %s: NOT CONVERGED after %d sweeps, %.3g s (residual %.3g): the policy below is the last iterate\n",
			crit, method, r.Sweeps, r.Seconds, r.Residual)
	}
	if r.Fallback != "" {
		fmt.Fprintf(w, "           %s\n", r.Fallback)
	}
	if r.AverageCost != nil {
		fmt.Fprintf(w, "cost:      %.6g per time unit in the long run (holding and blocking)\n", *r.AverageCost)
		fmt.Fprintf(w, "           the optimum certified in [%.9g, %.9g] (gap %.3g relative)\n", *r.AverageLower, *r.AverageUpper, relGap(*r.AverageLower, *r.AverageUpper))
		if r.UntruncatedAtLeast != nil {
			fmt.Fprintf(w, "           blocking priced at the least it costs the untruncated system: its optimum is at least %.9g\n", *r.UntruncatedAtLeast)
		}
	}
	if t := r.Truncation; t != nil {
		t.print(w)
	}
	if st := r.Stationary; st != nil {
		switch {
		case st.Converged && st.Method == switching.Krylov:
			fmt.Fprintf(w, "long run:  the policy's gains for each figure (%d BiCGSTAB iterations, %.3g s):\n", st.Iterations, st.Seconds)
			fmt.Fprintf(w, "           mean holding cost %.6g, a queue at the truncation %.3g%% of the time\n", st.HoldingCost, 100*st.BoundaryFraction)
		case st.Converged:
			fmt.Fprintf(w, "long run:  from the empty system at the static allocation (%d sweeps, %.3g s):\n", st.Sweeps, st.Seconds)
			fmt.Fprintf(w, "           mean holding cost %.6g, a queue at the truncation %.3g%% of the time\n", st.HoldingCost, 100*st.BoundaryFraction)
		case st.Method == switching.Krylov:
			fmt.Fprintf(w, "long run:  NOT CONVERGED: the analysis's solves stopped after %d BiCGSTAB iterations (%.3g s) at residual %.3g,\n",
				st.Iterations, st.Seconds, st.Residual)
			fmt.Fprintf(w, "           %s.\n", st.budget)
			fmt.Fprintf(w, "           Their figures so far: mean holding cost %.6g, a queue at the truncation %.3g%% of the time.\n", st.HoldingCost, 100*st.BoundaryFraction)
			fmt.Fprintf(w, "           %s.\n", stationaryMore(st))
		default:
			fmt.Fprintf(w, "long run:  NOT CONVERGED: the analysis stopped after %d sweeps (%.3g s) at residual %.3g (tolerance %g),\n",
				st.Sweeps, st.Seconds, st.Residual, r.Tolerance)
			fmt.Fprintf(w, "           %s.\n", st.budget)
			fmt.Fprintf(w, "           After %d steps from the empty system at the static allocation, not in the long run:\n", st.Sweeps)
			fmt.Fprintf(w, "           mean holding cost %.6g, a queue at the truncation %.3g%% of the time.\n", st.HoldingCost, 100*st.BoundaryFraction)
			fmt.Fprintf(w, "           %s.\n", stationaryMore(st))
		}
		if st.Fallback != "" {
			fmt.Fprintf(w, "           %s\n", st.Fallback)
		}
	}
	printActions(w, r.Actions)
	fmt.Fprintf(w, "view:      %s\n", r.View.Spec)
	if c := r.View.Chosen; c != nil {
		for _, l := range c.describe(r.View.Spec, r.View.Size) {
			fmt.Fprintf(w, "           %s\n", l)
		}
	}
	fmt.Fprintln(w)
	printGrid(w, r.View.Rows, r.View.Cols, r.View.Actions, nil)
}

// printGrid prints a policy slice like the papers' tables. With mark
// non-nil, a cell where mark is true is flagged with '*'.
func printGrid(w io.Writer, rows, cols string, actions [][]int, mark [][]bool) {
	width := 2
	for _, row := range actions {
		for _, a := range row {
			width = max(width, len(fmt.Sprint(a))+1)
		}
	}
	pad := ""
	if mark != nil {
		pad = " " // room for the mark after each cell
	}
	line := func(label string, cells []string) {
		fmt.Fprintln(w, strings.TrimRight(label+" "+strings.Join(cells, " "), " "))
	}
	fmt.Fprintf(w, "%6s  %s\n", "", cols)
	head := make([]string, len(actions[0]))
	for c := range head {
		head[c] = fmt.Sprintf("%*d%s", width, c, pad)
	}
	line(fmt.Sprintf("%6s", rows), head)
	for r, row := range actions {
		cells := make([]string, len(row))
		for c, a := range row {
			flag := pad
			if mark != nil && mark[r][c] {
				flag = "*"
			}
			cells[c] = fmt.Sprintf("%*d%s", width, a, flag)
		}
		line(fmt.Sprintf("%6d", r), cells)
	}
}
