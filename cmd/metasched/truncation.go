package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/metasched/metasched/switching"
)

// policy solve --truncation auto: the truncations grown until they stop
// mattering (switching.GrowTruncation), a line per solve on stderr.

// checkGrowth checks the flags of a truncation's growth, which policy
// solve and simulate experiment share.
func checkGrowth(truncation string, tolerance float64, limit time.Duration) error {
	switch {
	case truncation != "fixed" && truncation != "auto":
		return usagef("--truncation: must be fixed or auto, got %q", truncation)
	case !(tolerance > 0 && tolerance < 1):
		return usagef("--boundary-tolerance: must be > 0 and < 1, got %g", tolerance)
	case limit < 0:
		return usagef("--time-limit: must be 0 (none) or more, got %s", limit)
	}
	return nil
}

// checkTruncation checks the flags of the truncation.
func checkTruncation(f solveFlags) error {
	if err := checkGrowth(f.truncation, f.boundaryTolerance, f.timeLimit); err != nil {
		return err
	}
	switch {
	case f.truncation == "fixed":
		return nil
	case f.criterion != string(switching.Average) || f.horizon > 0:
		return usagef("--truncation auto: grows the truncation of the average criterion only (no --criterion discounted, no --horizon)")
	case !f.boundary:
		return usagef("--truncation auto: needs the long-run analysis (--boundary=false leaves it out)")
	}
	return nil
}

// growTruncation runs the growth, printing each solve's line on stderr.
func growTruncation(ctx context.Context, e *env, m *switching.Model, opts switching.SolveOptions, f solveFlags, bar *progressBar) (*switching.Truncation, error) {
	g := switching.GrowOptions{BoundaryTolerance: f.boundaryTolerance, MaxStates: f.maxStates, MaxSeconds: f.timeLimit.Seconds(),
		Step: func(s switching.TruncationStep) {
			if bar != nil {
				bar.done()
			}
			fmt.Fprintf(e.stderr, "truncation: J = %s, %d states: cost %.9g (gap %.3g), at the boundary %s, %.3g s\n",
				switching.FormatLimits(s.Limits), s.States, s.AverageCost, s.Upper-s.Lower, boundaries(m, s.Boundary), s.Seconds)
		}}
	return switching.GrowTruncation(ctx, m, opts, g)
}

// boundaries prints each pool's boundary mass: "a 1.2e-05, b 3e-08".
func boundaries(m *switching.Model, b []float64) string {
	parts := make([]string, len(b))
	for i, x := range b {
		parts[i] = fmt.Sprintf("%s %.2g", m.Pools[i].Name, x)
	}
	return strings.Join(parts, ", ")
}

// truncationReport is the growth in policy solve's report.
type truncationReport struct {
	Mode              string                     `json:"mode"`
	BoundaryTolerance float64                    `json:"boundary_tolerance"`
	Settled           bool                       `json:"settled"`
	Stopped           string                     `json:"stopped,omitempty"`
	Steps             []switching.TruncationStep `json:"steps"`
	Seconds           float64                    `json:"seconds"`

	pools []string
}

func newTruncationReport(m *switching.Model, tr *switching.Truncation, tol float64) *truncationReport {
	r := &truncationReport{Mode: "auto", BoundaryTolerance: tol, Settled: tr.Settled, Stopped: tr.Stopped, Steps: tr.Steps}
	for _, s := range tr.Steps {
		r.Seconds += s.Seconds
	}
	for _, p := range m.Pools {
		r.pools = append(r.pools, p.Name)
	}
	return r
}

func (r *truncationReport) print(w io.Writer) {
	last := r.Steps[len(r.Steps)-1]
	fmt.Fprintf(w, "truncation: grown in %d solves (%.3g s) to J = %s; at the boundary in the long run:",
		len(r.Steps), r.Seconds, switching.FormatLimits(last.Limits))
	for i, b := range last.Boundary {
		fmt.Fprintf(w, " %s %.2g", r.pools[i], b)
	}
	fmt.Fprintln(w)
	if !r.Settled {
		fmt.Fprintf(w, "           NOT SETTLED: %s; the optimum below is that of this truncation\n", r.Stopped)
		return
	}
	prev := r.Steps[len(r.Steps)-2]
	gap := max(last.Upper-last.Lower, prev.Upper-prev.Lower)
	fmt.Fprintf(w, "           every pool under %g, and the optimum moved by %.3g from J = %s, within the solves' gap %.3g\n",
		r.BoundaryTolerance, math.Abs(last.AverageCost-prev.AverageCost), switching.FormatLimits(prev.Limits), gap)
}
