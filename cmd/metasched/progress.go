package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/metasched/metasched/switching"
)

// progressBar draws one line on a terminal, at most ten times a second,
// with the time left estimated from the fraction done so far.
type progressBar struct {
	w     io.Writer
	now   func() time.Time // time.Now when nil
	last  time.Time
	drawn bool
	// began is when the task the ETA is estimated for started; phase is
	// the solve's phase it was for (a new phase restarts the estimate).
	began time.Time
	phase string
}

func (p *progressBar) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// restart starts a new estimate of the time left: the fractions shown
// from now on are of a task that starts now.
func (p *progressBar) restart() { p.began = p.clock() }

// show draws the bar at fraction frac ∈ [0, 1] with a label and, once
// there is enough to go by, the time left.
func (p *progressBar) show(frac float64, label string) {
	now := p.clock()
	if p.began.IsZero() {
		p.began = now
	}
	if now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	frac = min(max(frac, 0), 1)
	const width = 24
	n := int(frac * width)
	if left, ok := timeLeft(now.Sub(p.began), frac); ok {
		label += "  " + formatETA(left)
	}
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %s", strings.Repeat("#", n), strings.Repeat("-", width-n), label)
	p.drawn = true
}

// timeLeft estimates the time left of a task that took elapsed to do
// frac of it, at the same pace; ok is false while there is too little to
// go by (under a second or 1% done).
func timeLeft(elapsed time.Duration, frac float64) (left time.Duration, ok bool) {
	if elapsed < time.Second || !(frac >= 0.01) || frac > 1 {
		return 0, false
	}
	return time.Duration(float64(elapsed) * (1 - frac) / frac), true
}

// formatETA writes a time left as the bar shows it: "ETA 7s", "ETA 3m05s",
// "ETA 2h04m", rounded up to the unit shown.
func formatETA(d time.Duration) string {
	s := int(math.Ceil(d.Seconds()))
	switch {
	case d <= 0:
		return "ETA 0s"
	case s < 60:
		return fmt.Sprintf("ETA %ds", s)
	case s < 3600:
		return fmt.Sprintf("ETA %dm%02ds", s/60, s%60)
	}
	m := int(math.Ceil(d.Minutes()))
	return fmt.Sprintf("ETA %dh%02dm", m/60, m%60)
}

// update shows a solve's progress; each phase (the solve, then the
// long-run analysis) has its own estimate of the time left.
func (p *progressBar) update(pr switching.Progress) {
	if pr.Phase != p.phase {
		p.phase = pr.Phase
		p.restart()
	}
	frac := 0.0
	sweep := fmt.Sprintf("%6d", pr.Sweep)
	if pr.MaxSweeps > 0 {
		sweep = fmt.Sprintf("%d/%d", pr.Sweep, pr.MaxSweeps)
	}
	label := fmt.Sprintf("%-10s sweep %s  residual %.3g", pr.Phase, sweep, pr.Residual)
	switch {
	case pr.Horizon > 0:
		frac = float64(pr.Sweep) / float64(pr.Horizon)
		label = fmt.Sprintf("%-10s sweep %6d/%d", pr.Phase, pr.Sweep, pr.Horizon)
	case pr.Phase == "improve":
		label = fmt.Sprintf("%-10s step %d: %d states changed", pr.Phase, pr.Sweep, int(pr.Residual))
	case pr.Start > 0 && pr.Tolerance > 0 && pr.Start > pr.Tolerance:
		// One evaluation of the krylov method: the bar and the time left
		// are this evaluation's, from its starting residual to its goal;
		// the span is the solve's, which ends below the tolerance.
		frac = math.Log(pr.Start/pr.Residual) / math.Log(pr.Start/pr.Tolerance)
		label = fmt.Sprintf("%-10s policy %d, iteration %d: residual %.3g → %.3g", pr.Phase, pr.Policy, pr.Sweep, pr.Residual, pr.Tolerance)
		if pr.Span > 0 {
			label += fmt.Sprintf(" (last span %.3g)", pr.Span)
		}
	case pr.Residual > 0 && pr.Tolerance > 0:
		// Geometric convergence: progress is how far log(residual) went
		// from the first sweep's scale (1) toward log(tolerance).
		frac = math.Log(pr.Residual) / math.Log(pr.Tolerance)
		label += fmt.Sprintf(" → %.0e", pr.Tolerance)
	}
	if pr.MaxSweeps > 0 && pr.Horizon == 0 {
		// A phase with a budget of its own ends at the budget at the latest.
		frac = max(frac, float64(pr.Sweep)/float64(pr.MaxSweeps))
	}
	p.show(frac, label)
}

func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
