// Package plotx renders gonum plots for the commands that write figures.
//
// The design is described in docs/design.md of the repository, section
// "The simulator".
package plotx

import (
	"fmt"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// Render writes p as "svg" or "png", 8×5 inches.
func Render(w io.Writer, p *plot.Plot, format string) error {
	wt, err := p.WriterTo(8*vg.Inch, 5*vg.Inch, format)
	if err != nil {
		return fmt.Errorf("render %s: %w", format, err)
	}
	if _, err := wt.WriteTo(w); err != nil {
		return fmt.Errorf("write %s: %w", format, err)
	}
	return nil
}
