package experiment

import (
	"encoding/csv"
	"fmt"
	"github.com/metasched/metasched/internal/plotx"
	"io"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// CSVHeader is the first line of WriteCSV's output.
var CSVHeader = []string{
	"experiment", "x", "policy", "mean_cost", "ci95_lo", "ci95_hi", "completions", "events", "switches",
	"transit_fraction", "boundary_fraction", "seconds", "solve_seconds", "solve_sweeps", "converged", "note",
}

// WriteCSV writes the rows of experiment e, one per policy and x; NaN
// (not simulated, or no table) is an empty field.
func WriteCSV(w io.Writer, e *Experiment, rows []Row) error {
	cw := csv.NewWriter(w)
	cw.Write(CSVHeader)
	for _, r := range rows {
		cw.Write([]string{
			e.Name, num(r.X), r.Policy, num(r.MeanCost), num(r.CI95[0]), num(r.CI95[1]),
			strconv.FormatInt(r.Completions, 10), strconv.FormatInt(r.Events, 10), strconv.FormatInt(r.Switches, 10),
			num(r.TransitFraction), num(r.BoundaryFraction), num(r.Seconds), num(r.SolveSeconds),
			strconv.Itoa(r.SolveSweeps), strconv.FormatBool(r.Converged), r.Note,
		})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

func num(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', 10, 64)
}

// errPoints are a line's points with their confidence bars.
type errPoints struct {
	plotter.XYs
	plotter.YErrors
}

// Plot draws the rows as one line per policy with 95% confidence bars; the
// cost axis is logarithmic when the costs span more than a factor of 20.
// Policies not simulated at some x have no point there.
func Plot(e *Experiment, rows []Row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s (%s)", e.Title, e.Source)
	p.X.Label.Text = e.XLabel
	p.Y.Label.Text = "mean holding cost Σ c·j"
	p.Legend.Top = true
	p.Legend.Left = true
	var order []string
	lines := map[string]*errPoints{}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rows {
		pts, ok := lines[r.Policy]
		if !ok {
			pts = &errPoints{}
			lines[r.Policy] = pts
			order = append(order, r.Policy)
		}
		if math.IsNaN(r.MeanCost) || r.MeanCost <= 0 {
			continue
		}
		pts.XYs = append(pts.XYs, plotter.XY{X: r.X, Y: r.MeanCost})
		pts.YErrors = append(pts.YErrors, struct{ Low, High float64 }{
			Low: r.MeanCost - max(r.CI95[0], r.MeanCost*1e-3), High: r.CI95[1] - r.MeanCost})
		lo, hi = min(lo, r.MeanCost), max(hi, r.MeanCost)
	}
	// Room above the data for the legend (top left).
	if hi/lo > 20 {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Max = hi * math.Pow(hi/lo, 0.6)
	} else if hi > lo {
		p.Y.Max = hi + 0.6*(hi-lo)
	}
	for i, name := range order {
		pts := lines[name]
		if len(pts.XYs) == 0 {
			continue
		}
		line, scatter, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", name, err)
		}
		line.Color = plotutil.Color(i)
		line.Dashes = plotutil.Dashes(i)
		scatter.Color = plotutil.Color(i)
		scatter.Shape = plotutil.Shape(i)
		bars, err := plotter.NewYErrorBars(pts)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", name, err)
		}
		bars.Color = plotutil.Color(i)
		bars.CapWidth = vg.Points(4)
		p.Add(line, scatter, bars)
		p.Legend.Add(name, line, scatter)
	}
	p.Add(plotter.NewGrid())
	return p, nil
}

// WritePlot renders the plot of rows as "svg" or "png", 8×5 inches.
func WritePlot(w io.Writer, e *Experiment, rows []Row, format string) error {
	p, err := Plot(e, rows)
	if err != nil {
		return err
	}
	return plotx.Render(w, p, format)
}

// WriteTable prints the rows as a table: one line per x, one column per
// policy (mean cost ± half the interval), then the notes.
func WriteTable(w io.Writer, e *Experiment, rows []Row) {
	var policies []string
	var xs []float64
	cell := map[string]map[float64]Row{}
	for _, r := range rows {
		if cell[r.Policy] == nil {
			cell[r.Policy] = map[float64]Row{}
			policies = append(policies, r.Policy)
		}
		if len(xs) == 0 || xs[len(xs)-1] != r.X {
			xs = append(xs, r.X)
		}
		cell[r.Policy][r.X] = r
	}
	fmt.Fprintf(w, "%s — %s\n%s\n\n", e.Name, e.Title, e.Source)
	width := 10
	for _, p := range policies {
		width = max(width, len(p))
	}
	fmt.Fprintf(w, "%-8s", "x")
	for _, p := range policies {
		fmt.Fprintf(w, "  %*s", width+2, p)
	}
	fmt.Fprintln(w)
	var notes []string
	for _, x := range xs {
		fmt.Fprintf(w, "%-8g", x)
		for _, p := range policies {
			r, ok := cell[p][x]
			s := ""
			switch {
			case !ok:
			case math.IsNaN(r.MeanCost):
				s = "—"
			default:
				s = fmt.Sprintf("%.4g ±%.2g", r.MeanCost, (r.CI95[1]-r.CI95[0])/2)
			}
			fmt.Fprintf(w, "  %*s", width+2, s)
			if ok && r.Note != "" && (math.IsNaN(r.MeanCost) || strings.Contains(r.Note, "unstable")) {
				notes = append(notes, fmt.Sprintf("x=%g %s: %s", x, p, r.Note))
			}
			if ok && !math.IsNaN(r.BoundaryFraction) && r.BoundaryFraction > 0.01 {
				notes = append(notes, fmt.Sprintf("x=%g %s: a queue sat at the table's limit J−1 %.1f%% of the time", x, p, 100*r.BoundaryFraction))
			}
		}
		fmt.Fprintln(w)
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, "  "+n)
		}
	}
	fmt.Fprintf(w, "\nThe paper: %s\n", e.Claim)
}
