package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/metasched/metasched/switching"
)

// progressBar draws one line on a terminal, at most ten times a second.
type progressBar struct {
	w     io.Writer
	last  time.Time
	drawn bool
}

// show draws the bar at fraction frac ∈ [0, 1] with a label.
func (p *progressBar) show(frac float64, label string) {
	now := time.Now()
	if now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	frac = min(max(frac, 0), 1)
	const width = 24
	n := int(frac * width)
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %s", strings.Repeat("#", n), strings.Repeat("-", width-n), label)
	p.drawn = true
}

// update shows a solve's progress.
func (p *progressBar) update(pr switching.Progress) {
	frac := 0.0
	label := fmt.Sprintf("%-10s sweep %6d  residual %.3g", pr.Phase, pr.Sweep, pr.Residual)
	switch {
	case pr.Horizon > 0:
		frac = float64(pr.Sweep) / float64(pr.Horizon)
		label = fmt.Sprintf("%-10s sweep %6d/%d", pr.Phase, pr.Sweep, pr.Horizon)
	case pr.Phase == "improve":
		label = fmt.Sprintf("%-10s step %d: %d states changed", pr.Phase, pr.Sweep, int(pr.Residual))
	case pr.Residual > 0 && pr.Tolerance > 0:
		// Geometric convergence: progress is how far log(residual) went
		// from the first sweep's scale (1) toward log(tolerance).
		frac = math.Log(pr.Residual) / math.Log(pr.Tolerance)
		label += fmt.Sprintf(" → %.0e", pr.Tolerance)
	}
	p.show(frac, label)
}

func (p *progressBar) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
