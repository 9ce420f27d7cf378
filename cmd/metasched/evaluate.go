package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/switching"
	"github.com/metasched/metasched/switching/experiment"
)

type evaluateFlags struct {
	namedPolicy
	tolerance float64
	maxSweeps int
	maxStates int
	workers   int
	output    string
}

func newPolicyEvaluateCmd(e *env) *cobra.Command {
	var f evaluateFlags
	cmd := &cobra.Command{
		Use:   "evaluate --model FILE --policy NAME",
		Short: "Compute the exact long-run cost of one switching policy on a model",
		Long: `Compute the long-run average cost per unit time (holding and blocking) of one
policy on the model's truncated chain, exactly: the policy's evaluation system
is solved (BiCGSTAB with an ILU(0) preconditioner, as in the krylov solve) until
one application of the policy's step moves the values by a span below
--tolerance, and the answer comes with certified bounds. Beside the optimum of
policy solve, it gives a policy's exact gap to it; simulate policies measures
the same policy in the real system, whose queues are not truncated.

Policies: optimal (solved here, or loaded with --table), heuristic (constant
--K), static, best-static and cmu. A policy that strands servers (static when a
surplus cannot reach a deficit) has one cost per closed class of its chain and
is refused.`,
		Example: `  metasched policy evaluate --model examples/fisher-fig3-n3.yaml --policy heuristic
  metasched policy evaluate --model examples/fisher-fig4-n5.yaml --policy cmu --output json
  metasched policy evaluate --model examples/fisher-fig3-n3.yaml --policy optimal --table fig3.policy`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return policyEvaluate(cmd.Context(), e, f) },
	}
	f.addFlags(cmd)
	fl := cmd.Flags()
	fl.Float64Var(&f.tolerance, "tolerance", 1e-6, "stop when the span of the policy's step applied to the values is below this (the bounds' width over Λ)")
	fl.IntVar(&f.maxSweeps, "max-sweeps", 100_000, "give up (converged: false, wider bounds) after this many BiCGSTAB iterations")
	fl.IntVar(&f.maxStates, "max-states", 100_000_000, "refuse models with more states")
	fl.IntVar(&f.workers, "workers", 0, "solve goroutines (0: one per CPU)")
	fl.StringVar(&f.output, "output", "table", "table or json")
	return cmd
}

// evaluateReport is the JSON output of policy evaluate.
type evaluateReport struct {
	Model        string  `json:"model"`
	Policy       string  `json:"policy"`
	States       int     `json:"states"`
	MemoryBytes  int     `json:"memory_bytes"`
	AverageCost  float64 `json:"average_cost"`
	AverageLower float64 `json:"average_cost_lower"`
	AverageUpper float64 `json:"average_cost_upper"`
	Iterations   int     `json:"iterations"`
	Converged    bool    `json:"converged"`
	Tolerance    float64 `json:"tolerance"`
	Seconds      float64 `json:"seconds"`
}

func policyEvaluate(ctx context.Context, e *env, f evaluateFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	if err := checkSolveLimits(f.maxSweeps, f.maxStates, f.workers); err != nil {
		return err
	}
	if !(f.tolerance > 0) || math.IsInf(f.tolerance, 0) {
		return usagef("--tolerance: must be a positive number, got %g", f.tolerance)
	}
	m, err := loadModel(f.model)
	if err != nil {
		return err
	}
	spec, table, err := f.spec(m, f.maxStates)
	if err != nil {
		return err
	}
	_, states, _ := switching.CountStates(m)
	var bar *progressBar
	if e.tty {
		bar = &progressBar{w: e.stderr}
	}
	so := experiment.SolveOptions{MaxStates: f.maxStates, MaxSweeps: f.maxSweeps, Workers: f.workers, Tolerance: f.tolerance, Now: time.Now}
	if bar != nil {
		so.Progress = bar.update
	}
	b, err := experiment.Build(ctx, spec, m, nil, table, so)
	var g *switching.Gain
	if err == nil {
		g, err = switching.PolicyGain(ctx, m, b.Policies[0], switching.SolveOptions{
			Tolerance: f.tolerance, MaxSweeps: f.maxSweeps, MaxStates: f.maxStates, Workers: f.workers,
			Progress: so.Progress, Now: time.Now,
		})
	}
	if bar != nil {
		bar.done()
	}
	switch {
	case errors.Is(err, switching.ErrCanceled):
		return fmt.Errorf("interrupted: %w", context.Canceled)
	case errors.Is(err, switching.ErrTooLarge):
		return usagef("%s: %w (raise --max-states if the machine has the memory)", f.model, err)
	case errors.Is(err, experiment.ErrNotConverged):
		return usageError{Err: fmt.Errorf("--policy optimal: %w (raise --max-sweeps)", err)}
	case err != nil:
		return usageError{Err: fmt.Errorf("--policy %s: %w", f.policy, err)}
	}
	rep := evaluateReport{
		Model: f.model, Policy: spec.Name(), States: int(states),
		MemoryBytes: int(states * switching.StateBytes(m, switching.Krylov)),
		AverageCost: g.Cost, AverageLower: g.Lower, AverageUpper: g.Upper,
		Iterations: g.Iterations, Converged: g.Converged, Tolerance: f.tolerance, Seconds: g.Seconds,
	}
	if f.output == "json" {
		return writeJSON(e.stdout, rep)
	}
	rep.print(e.stdout, m)
	return nil
}

func (r evaluateReport) print(w io.Writer, m *switching.Model) {
	fmt.Fprintf(w, "policy:    %s\n", r.Policy)
	fmt.Fprintf(w, "model:     %s, %d states (queues truncated at J = %s), %s\n", r.Model, r.States, switching.FormatLimits(m.Limits()), switching.FormatBytes(uint64(r.MemoryBytes)))
	fmt.Fprintf(w, "cost:      %.9g per time unit in the long run (holding and blocking)\n", r.AverageCost)
	gap := (r.AverageUpper - r.AverageLower) / max(r.AverageUpper, 1e-300)
	fmt.Fprintf(w, "           certified in [%.9g, %.9g] (gap %.2g relative)\n", r.AverageLower, r.AverageUpper, gap)
	state := "converged"
	if !r.Converged {
		state = "NOT converged: the bounds are wider than --tolerance asks (raise --max-sweeps)"
	}
	fmt.Fprintf(w, "solve:     %d BiCGSTAB iterations, %.1f s, %s\n", r.Iterations, r.Seconds, state)
}
