package experiment

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"

	"github.com/metasched/metasched/internal/plotx"
	"github.com/metasched/metasched/switching"
)

// CSVHeader is the first line of WriteCSV's output.
var CSVHeader = []string{
	"experiment", "x", "policy", "mean_cost", "ci95_lo", "ci95_hi", "completions", "events", "switches",
	"transit_fraction", "boundary_fraction", "beyond_fraction", "queue_limits", "truncation", "seconds", "solve_seconds", "solve_sweeps",
	"converged", "note",
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
			num(r.TransitFraction), num(r.BoundaryFraction), num(r.BeyondFraction), limits(r.QueueLimits), r.Truncation,
			num(r.Seconds), num(r.SolveSeconds),
			strconv.Itoa(r.SolveSweeps), strconv.FormatBool(r.Converged), r.Note,
		})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// limits is a table's J_i as FormatLimits writes them, "" for no table.
func limits(js []int) string {
	if js == nil {
		return ""
	}
	return switching.FormatLimits(js)
}

func num(x float64) string {
	if math.IsNaN(x) {
		return ""
	}
	return strconv.FormatFloat(x, 'g', 10, 64)
}

// series are the rows of each policy, in the experiment's order, and the
// run's x values.
type series struct {
	policies []string
	xs       []float64
	at       map[string]map[float64]Row
}

func seriesOf(rows []Row) series {
	s := series{at: map[string]map[float64]Row{}}
	for _, r := range rows {
		if s.at[r.Policy] == nil {
			s.at[r.Policy] = map[float64]Row{}
			s.policies = append(s.policies, r.Policy)
		}
		if !slices.Contains(s.xs, r.X) {
			s.xs = append(s.xs, r.X)
		}
		s.at[r.Policy][r.X] = r
	}
	slices.Sort(s.xs)
	return s
}

// lines are the figure's lines: one per policy, a point per x where it was
// simulated, with its 95% interval (its low end kept above 0 for a log
// axis).
func (s series) lines() []plotx.Line {
	out := make([]plotx.Line, len(s.policies))
	for i, name := range s.policies {
		l := plotx.Line{Name: name, Color: plotx.Color(i), Dashes: plotutil.Dashes(i), Shape: plotutil.Shape(i), Axis: s.xs}
		for _, x := range s.xs {
			r, ok := s.at[name][x]
			if !ok || math.IsNaN(r.MeanCost) || r.MeanCost <= 0 {
				continue
			}
			c := r.MeanCost
			l.XYs = append(l.XYs, plotter.XY{X: x, Y: c})
			l.Errors = append(l.Errors, struct{ Low, High float64 }{Low: c - max(r.CI95[0], c*1e-3), High: max(r.CI95[1]-c, 0)})
		}
		out[i] = l
	}
	return out
}

// Plot draws the rows as one line per policy with 95% confidence bars;
// the cost axis is logarithmic when the costs span more than a factor of
// 20, and starts at a labelled tick under the lowest cost. Policies not
// simulated at some x have no point there. Lines that coincide stay
// visible (plotx.AddLines). The legend and the notes go beside the plot
// (WritePlot).
func Plot(e *Experiment, rows []Row) (*plot.Plot, error) {
	s := seriesOf(rows)
	p := plotx.New(fmt.Sprintf("%s (%s)", e.Title, e.Source), e.XLabel, "mean holding cost Σ c·j")
	lines := s.lines()
	for i := range lines {
		lines[i].Name = s.heading(lines[i].Name)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, l := range lines {
		for k, pt := range l.XYs {
			lo, hi = min(lo, pt.Y-l.Errors[k].Low), max(hi, pt.Y+l.Errors[k].High)
		}
	}
	if math.IsInf(lo, 1) {
		lo, hi = 1, 10
	}
	if hi/lo > 20 {
		plotx.LogAxis(&p.Y, lo, hi)
		p.Y.Label.Text += " (log scale)"
	} else {
		plotx.LinearAxis(&p.Y, 0, hi)
	}
	p.X.Tick.Marker = plotx.ValueTicks(s.xs)
	if n := len(s.xs); n > 0 {
		pad := 0.04 * (s.xs[n-1] - s.xs[0])
		if pad == 0 {
			pad = 0.5
		}
		p.X.Min, p.X.Max = s.xs[0]-pad, s.xs[n-1]+pad
	}
	p.Add(plotter.NewGrid())
	if _, err := plotx.AddLines(p, lines); err != nil {
		return nil, err
	}
	return p, nil
}

// Notes are what a reader of the plot needs beside it, from the rows:
// which lines coincide (and why, when the rows say: the same allocation,
// or no switches), which
// policies have no point where and why, where a policy solved on truncated
// queues stopped switching, and where a table's queues sat at its limit
// much of the time.
func Notes(e *Experiment, rows []Row) []string {
	s := seriesOf(rows)
	var notes []string
	notes = append(notes, coincidenceNotes(s)...)
	notes = append(notes, missingNotes(s)...)
	notes = append(notes, truncationNotes(s)...)
	return notes
}

// coincidenceNotes says which policies have the same cost where
// (plotx.Coincidences), and why when the rows tell.
func coincidenceNotes(s series) []string {
	var parts []string
	for _, c := range plotx.Coincidences(s.lines()) {
		why := ""
		if a, ok := s.sameAllocation(c.Line, c.Under, c.X); ok && a != "" {
			why = " (both allocate " + a + ")"
		} else if ok {
			why = " (both allocate the same at each x)"
		} else if s.switches(c.Line, c.X) == 0 {
			why = " (no switches)"
			if len(c.X) < len(s.xs) {
				why = " (no switches there)"
			}
		}
		parts = append(parts, fmt.Sprintf("%s = %s %s%s", c.Line, c.Under, s.where(c.X), why))
	}
	if len(parts) == 0 {
		return nil
	}
	return []string{"Equal costs, drawn as nested lines (the one underneath wider and paler): " + strings.Join(parts, "; ") + "."}
}

// switches is the policy's switches over the xs.
func (s series) switches(policy string, xs []float64) int64 {
	var n int64
	for _, x := range xs {
		n += s.at[policy][x].Switches
	}
	return n
}

// allocation is the fixed allocation in a static policy's note, "(2,1,1)",
// or its allocation per demand phase, "(3,1), (1,3) by phase"; "" when
// the note has none.
func (s series) allocation(policy string, x float64) string {
	note, ok := strings.CutPrefix(s.at[policy][x].Note, "allocation ")
	if !ok {
		return ""
	}
	var all []string
	for part := range strings.SplitSeq(note, "; ") {
		a, _, _ := strings.Cut(part, " ")
		all = append(all, a)
	}
	if len(all) > 1 {
		return strings.Join(all, ", ") + " by phase"
	}
	return all[0]
}

// sameAllocation reports whether policies a and b have the same fixed
// allocation at each x of xs, and returns it when it is the same at
// every x.
func (s series) sameAllocation(a, b string, xs []float64) (string, bool) {
	first := s.allocation(a, xs[0])
	one := true
	for _, x := range xs {
		if s.allocation(a, x) == "" || s.allocation(a, x) != s.allocation(b, x) {
			return "", false
		}
		one = one && s.allocation(a, x) == first
	}
	if !one {
		return "", true
	}
	return first, true
}

// heading names what a policy's column and line show: a table's J,
// "optimal (average, J = 15)", or "J grown" when its truncation was grown
// at each point (the notes give each J), or "J per point" when it
// differs between points otherwise.
func (s series) heading(policy string) string {
	var js []int
	grown, same := false, true
	for _, x := range s.xs {
		r, ok := s.at[policy][x]
		if !ok || r.QueueLimits == nil {
			continue
		}
		grown = grown || r.Truncation != ""
		if js != nil && !slices.Equal(js, r.QueueLimits) {
			same = false
		}
		js = r.QueueLimits
	}
	what := ""
	switch {
	case js == nil:
		return policy
	case grown:
		what = "J grown"
	case same:
		what = "J = " + switching.FormatLimits(js)
	default:
		what = "J per point"
	}
	if head, ok := strings.CutSuffix(policy, ")"); ok && strings.Contains(head, " (") {
		return head + ", " + what + ")"
	}
	return policy + " (" + what + ")"
}

// label is x as the axis and the table write it.
func (s series) label(x float64) string {
	if i := slices.Index(s.xs, x); i >= 0 {
		return plotx.PlainAll(s.xs)[i]
	}
	return plotx.Plain(x)
}

// where says at which of the run's x values xs are: "at every x", "at
// 2.6–2.8, 3.6".
func (s series) where(xs []float64) string {
	if len(xs) == len(s.xs) && len(xs) > 1 {
		return "at every x"
	}
	return "at " + plotx.Ranges(s.xs, xs)
}

// missingNotes says which policies have no point where, and why.
func missingNotes(s series) []string {
	var notes []string
	for _, p := range s.policies {
		var xs []float64
		first := ""
		for _, x := range s.xs {
			r, ok := s.at[p][x]
			if !ok || !math.IsNaN(r.MeanCost) {
				continue
			}
			if first == "" {
				first = r.Note
			}
			xs = append(xs, x)
		}
		if len(xs) == 0 {
			continue
		}
		why := first
		switch {
		case strings.HasPrefix(first, "no stable fixed allocation"):
			why = "no fixed allocation is stable (each pool needs k_i > ρ_i"
			if _, d, ok := strings.Cut(first, "is stable: "); ok {
				d, _, _ = strings.Cut(d, ", each pool")
				d = strings.Replace(d, "offered loads ", "", 1)
				why += fmt.Sprintf("; at %s: %s", s.label(xs[0]), d)
			}
			why += ")"
		case strings.HasPrefix(first, "not simulated:"):
			why = "its solve did not converge within the sweep cap, so it was not simulated"
		}
		where := s.where(xs)
		if len(xs) == len(s.xs) {
			where = "at any x"
		}
		notes = append(notes, fmt.Sprintf("%s: no point %s: %s.", p, where, why))
	}
	return notes
}

// truncationNotes: where a table policy made no switches though it did at
// other x, with a queue at its table's limit most of the time (the
// truncation shapes the table there: Figure 4's optimum at 3.6, whose cost
// jumps to the static policy's), and where a table's queue sat at its
// limit J−1 more than 10% of the time. (Switches are those of the measured
// run, after the warm-up.)
func truncationNotes(s series) []string {
	var notes []string
	var limit []string
	for _, p := range s.policies {
		var stopped, switched, atLimit []float64
		var j []int
		for _, x := range s.xs {
			r, ok := s.at[p][x]
			if !ok || math.IsNaN(r.MeanCost) || r.QueueLimits == nil {
				continue
			}
			j = r.QueueLimits
			if r.Switches > 0 {
				switched = append(switched, x)
			} else if r.BoundaryFraction >= 0.5 {
				stopped = append(stopped, x)
			}
			if r.BoundaryFraction > 0.1 {
				atLimit = append(atLimit, x)
			}
		}
		if len(stopped) > 0 && len(switched) > 0 {
			notes = append(notes, fmt.Sprintf("%s %s: no switches (it switched %s), and a queue sat at its table's limit "+
				"J−1 for %s of the time: the table, solved on queues cut at J = %s, stops switching there; "+
				"--truncation auto or a larger --queue-limit may change that.", p, s.where(stopped), s.where(switched), s.fractions(p, stopped), switching.FormatLimits(j)))
		}
		if len(atLimit) > 0 {
			limit = append(limit, fmt.Sprintf("%s %s (%s)", p, s.where(atLimit), s.fractions(p, atLimit)))
		}
	}
	if len(limit) > 0 {
		notes = append(notes, "A queue at its table's limit J−1 over 10% of the time: "+strings.Join(limit, "; ")+".")
	}
	if beyond := beyondNotes(s); beyond != "" {
		notes = append(notes, beyond)
	}
	return append(notes, growthNotes(s)...)
}

// growthNotes say, for each table whose truncation was grown, the J it
// reached at each x, and where it did not settle, why.
func growthNotes(s series) []string {
	var notes []string
	for _, p := range s.policies {
		var at, unsettled []string
		for _, x := range s.xs {
			r, ok := s.at[p][x]
			if !ok || r.Truncation == "" {
				continue
			}
			js := limits(r.QueueLimits)
			if r.PhaseLimits != nil {
				var by []string
				for _, l := range r.PhaseLimits {
					by = append(by, limits(l))
				}
				js = strings.Join(by, " and ") + " by phase"
			}
			at = append(at, fmt.Sprintf("%s at %s", js, s.label(x)))
			if _, why, ok := strings.Cut(r.Truncation, "NOT SETTLED: "); ok {
				unsettled = append(unsettled, fmt.Sprintf("at %s, %s", s.label(x), strings.TrimSuffix(why, ")")))
			}
		}
		if len(at) == 0 {
			continue
		}
		n := fmt.Sprintf("%s: each point's table is solved on queues cut at a J grown until every pool's long-run "+
			"boundary mass is under the tolerance and the optimum stops moving: J = %s.", p, strings.Join(at, ", "))
		if len(unsettled) > 0 {
			n += " Not settled " + strings.Join(unsettled, "; ") + ": there the optimum is that of the truncation reached."
		}
		notes = append(notes, n)
	}
	return notes
}

// BeyondMark is the fraction of time over which a table's queues beyond
// its truncation mark its cost (WriteTable's †, and the notes).
const BeyondMark = 0.01

// beyondNotes names the points where a table was looked up with a queue
// beyond its J over BeyondMark of the time: there it answered as at J−1,
// so its cost is that table's in the real system, not the optimum's.
func beyondNotes(s series) string {
	var parts []string
	for _, p := range s.policies {
		var xs []float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, x := range s.xs {
			r, ok := s.at[p][x]
			if !ok || !(r.BeyondFraction > BeyondMark) {
				continue
			}
			xs = append(xs, x)
			lo, hi = min(lo, r.BeyondFraction), max(hi, r.BeyondFraction)
		}
		if len(xs) == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s of the time)", p, s.where(xs), percents(lo, hi)))
	}
	if len(parts) == 0 {
		return ""
	}
	return "A table used beyond its truncation J over 1% of the time, where it answers as at J−1 (marked †): " +
		strings.Join(parts, "; ") + ". Its cost there is that table's in the real system, not the real system's optimum."
}

// fractions is the range of the time a queue of the policy's table sat at
// its limit over xs: "100%", "18–58%".
func (s series) fractions(policy string, xs []float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		f := s.at[policy][x].BoundaryFraction
		lo, hi = min(lo, f), max(hi, f)
	}
	return percents(lo, hi)
}

// percents prints the range of fractions lo to hi as whole percents:
// "100%", "18–58%".
func percents(lo, hi float64) string {
	if math.Round(100*lo) == math.Round(100*hi) {
		return fmt.Sprintf("%.0f%%", 100*hi)
	}
	return fmt.Sprintf("%.0f–%.0f%%", 100*lo, 100*hi)
}

// WritePlot renders the plot of rows with its notes (Notes) as "svg" or
// "png" (plotx.Render).
func WritePlot(w io.Writer, e *Experiment, rows []Row, format string) error {
	p, err := Plot(e, rows)
	if err != nil {
		return err
	}
	return plotx.Render(w, p, Notes(e, rows), format)
}

// TableWidth is the widest line WriteTable prints.
const TableWidth = 120

// WriteTable prints the rows as a table: one line per x, one column per
// policy (mean cost ± half the 95% interval, in plotx.Plain's format),
// split into blocks of columns that fit in TableWidth; then the notes,
// wrapped to TableWidth.
func WriteTable(w io.Writer, e *Experiment, rows []Row) {
	s := seriesOf(rows)
	fmt.Fprintf(w, "%s — %s\n%s\n", e.Name, e.Title, e.Source)
	// Columns: a header of one or two lines (a name is broken before its
	// parenthesis) and a cell per x.
	type column struct {
		head  [2]string
		cells []string
		width int
	}
	xcol := column{head: [2]string{"", "x"}}
	xcol.cells = plotx.PlainAll(s.xs)
	var cols []column
	var notes []string
	for _, p := range s.policies {
		head := s.heading(p)
		c := column{head: [2]string{"", head}}
		if a, b, ok := strings.Cut(head, " ("); ok {
			c.head = [2]string{a, "(" + b}
		}
		for _, x := range s.xs {
			r, ok := s.at[p][x]
			cell := ""
			switch {
			case !ok:
			case math.IsNaN(r.MeanCost):
				cell = "—"
			default:
				cell = fmt.Sprintf("%s ±%s", plotx.Sig(r.MeanCost, 4), plotx.Sig((r.CI95[1]-r.CI95[0])/2, 2))
				if r.BeyondFraction > BeyondMark {
					cell += " †"
				}
			}
			c.cells = append(c.cells, cell)
			if ok && r.Note != "" && (math.IsNaN(r.MeanCost) || strings.Contains(r.Note, "unstable")) {
				notes = append(notes, fmt.Sprintf("x=%s %s: %s", s.label(x), p, r.Note))
			}
			if ok && !math.IsNaN(r.BoundaryFraction) && r.BoundaryFraction > 0.01 {
				notes = append(notes, fmt.Sprintf("x=%s %s: a queue sat at the table's limit J−1 %.1f%% of the time", s.label(x), p, 100*r.BoundaryFraction))
			}
			if ok && r.Truncation != "" {
				notes = append(notes, fmt.Sprintf("x=%s %s: %s", s.label(x), p, r.Truncation))
			}
			if ok && r.BeyondFraction > BeyondMark {
				notes = append(notes, fmt.Sprintf("x=%s %s: † a queue was beyond the table's J %.1f%% of the time, where the table answers as at J−1: "+
					"this is that table's cost, not the real system's optimum", s.label(x), p, 100*r.BeyondFraction))
			}
		}
		cols = append(cols, c)
	}
	for _, c := range append([]*column{&xcol}, ptrs(cols)...) {
		for _, t := range append(c.head[:], c.cells...) {
			c.width = max(c.width, utf8.RuneCountInString(t))
		}
	}
	const sep = 2
	for start := 0; start < len(cols); {
		end, width := start, xcol.width
		for end < len(cols) && (end == start || width+sep+cols[end].width <= TableWidth) {
			width += sep + cols[end].width
			end++
		}
		fmt.Fprintln(w)
		for line := range 2 + len(s.xs) {
			var b strings.Builder
			cell := func(c column) string {
				if line < 2 {
					return c.head[line]
				}
				return c.cells[line-2]
			}
			fmt.Fprintf(&b, "%-*s", xcol.width, cell(xcol))
			for _, c := range cols[start:end] {
				fmt.Fprintf(&b, "%*s%*s", sep, "", c.width, cell(c))
			}
			if t := strings.TrimRight(b.String(), " "); t != "" {
				fmt.Fprintln(w, t)
			}
		}
		start = end
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			WriteWrapped(w, n, "  ", "      ")
		}
	}
	fmt.Fprintln(w)
	WriteWrapped(w, "The paper: "+e.Claim, "", "  ")
}

func ptrs[T any](xs []T) []*T {
	out := make([]*T, len(xs))
	for i := range xs {
		out[i] = &xs[i]
	}
	return out
}

// WriteWrapped writes s wrapped at spaces to TableWidth, its first line
// after first and the others after indent (the command line's tables wrap
// their long cells with it too).
func WriteWrapped(w io.Writer, s, first, indent string) {
	line, empty := first, true
	for _, word := range strings.Fields(s) {
		if !empty && utf8.RuneCountInString(line)+1+utf8.RuneCountInString(word) > TableWidth {
			fmt.Fprintln(w, line)
			line, empty = indent, true
		}
		if empty {
			line += word
		} else {
			line += " " + word
		}
		empty = false
	}
	fmt.Fprintln(w, line)
}
