package experiment

import (
	"bytes"
	"encoding/csv"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// figures, when set, writes the plots of the test data there, to look at.
var figures = flag.String("figures", "", "write the plots of testdata/*.csv to this directory")

// readRows reads a CSV written by WriteCSV back into rows (J from the
// experiment's model for the tables).
func readRows(t *testing.T, path string) (*Experiment, []Row) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // read-only
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	e, err := Lookup(recs[1][0])
	if err != nil {
		t.Fatal(err)
	}
	num := func(s string) float64 {
		if s == "" {
			return math.NaN()
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[name] = i
	}
	// A column the file does not have (beyond_fraction in files written
	// before it) reads as NaN.
	field := func(r []string, name string) string {
		i, ok := col[name]
		if !ok {
			return ""
		}
		return r[i]
	}
	count := func(r []string, name string) int64 {
		n, err := strconv.ParseInt(field(r, name), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	var rows []Row
	for _, r := range recs[1:] {
		row := Row{X: num(field(r, "x")), Policy: field(r, "policy"), MeanCost: num(field(r, "mean_cost")),
			CI95:            [2]float64{num(field(r, "ci95_lo")), num(field(r, "ci95_hi"))},
			TransitFraction: num(field(r, "transit_fraction")), BoundaryFraction: num(field(r, "boundary_fraction")),
			BeyondFraction: num(field(r, "beyond_fraction")), Seconds: num(field(r, "seconds")), Note: field(r, "note"),
			Completions: count(r, "completions"), Events: count(r, "events"), Switches: count(r, "switches"),
			Converged: field(r, "converged") == "true"}
		if !math.IsNaN(row.BoundaryFraction) {
			row.QueueLimits = e.Model(row.X).Limits()
		}
		rows = append(rows, row)
	}
	return e, rows
}

// The notes of Fisher et al.'s Figure 4 (the rows of a full run): which
// lines coincide and why, where best-static has no point and why, where
// the average-cost table stops switching, where tables sat at their
// limit.
func TestFig4Notes(t *testing.T) {
	e, rows := readRows(t, filepath.Join("testdata", "fisher-fig4.csv"))
	want := []string{
		"Equal costs, drawn as nested lines (the one underneath wider and paler): " +
			"optimal (average) = static at 3.6 (no switches there); " +
			"optimal (papers' discounted) = static at every x (no switches); " +
			"best-static = static at 2.6–2.8 (both allocate (2,1,1)).",
		"best-static: no point at 3.0–3.6: no fixed allocation is stable (each pool needs k_i > ρ_i; " +
			"at 3.0: 4 servers for ρ = (1, 1, 1)).",
		"optimal (average) at 3.6: no switches (it switched at 2.6–3.4), and a queue sat at its table's limit J−1 " +
			"for 100% of the time: the table, solved on queues cut at J = 15, stops switching there; " +
			"--truncation auto or a larger --queue-limit may change that.",
		"A queue at its table's limit J−1 over 10% of the time: optimal (average) at 3.0–3.6 (18–100%); " +
			"optimal (papers' discounted) at every x (23–100%).",
	}
	if diff := cmp.Diff(want, Notes(e, rows)); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	p, err := Plot(e, rows)
	if err != nil {
		t.Fatal(err)
	}
	// The cost axis starts at the labelled tick under the best policy's
	// 10.8 and ends at the tick over the worst's 352,000.
	if p.Y.Min != 10 || p.Y.Max != 400_000 {
		t.Errorf("cost axis from %g to %g, want 10 to 400,000", p.Y.Min, p.Y.Max)
	}
	if *figures != "" {
		writeFigures(t, e, rows)
	}
}

// Every line of the printed table fits in TableWidth columns, with the
// largest costs of Figure 4 (hundreds of thousands) and seven policies.
func TestTableWidth(t *testing.T) {
	e, rows := readRows(t, filepath.Join("testdata", "fisher-fig4.csv"))
	var buf bytes.Buffer
	WriteTable(&buf, e, rows)
	out := buf.String()
	for i, line := range strings.Split(out, "\n") {
		if n := utf8.RuneCountInString(line); n > TableWidth {
			t.Errorf("line %d is %d wide, over %d: %q", i+1, n, TableWidth, line)
		}
	}
	for _, want := range []string{
		"x    (average, J = 15)  (papers' discounted, J = 15)  heuristic K=5    heuristic K=1         static  best-static",
		"3.6      14,840 ±3,400                 14,840 ±3,400     60.39 ±3.7  281,700 ±66,000  14,840 ±3,400            —",
		"  x=3.0 best-static: no stable fixed allocation",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// More policies than fit: the columns go on in a second block, the x
	// column repeated.
	var many []Row
	for _, r := range rows {
		many = append(many, r)
		if r.Policy == "cmu" {
			for _, extra := range []string{"cmu again", "cmu once more"} {
				c := r
				c.Policy = extra
				many = append(many, c)
			}
		}
	}
	buf.Reset()
	WriteTable(&buf, e, many)
	blocks := 0
	for _, line := range strings.Split(buf.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > TableWidth {
			t.Errorf("%d wide, over %d: %q", n, TableWidth, line)
		}
		if strings.HasPrefix(line, "x ") {
			blocks++
		}
	}
	if blocks != 2 {
		t.Errorf("%d blocks of columns, want 2:\n%s", blocks, buf.String())
	}
}

// The notes of Palmer and Mitrani's Figures 2 and 3 (demand phases: an
// allocation per phase) and of Fisher et al.'s Figure 3.
func TestOtherNotes(t *testing.T) {
	for file, want := range map[string]string{
		"palmer-fig2.csv": "static = best-static at 4–8 (both allocate the same at each x)",
		"palmer-fig3.csv": "static = best-static at 2.0–2.9 (both allocate (3,1), (1,3) by phase)",
		// The average-cost solves do not converge: no point at all.
		"fisher-fig3.csv": "optimal (average): no point at any x: its solve did not converge within the sweep cap",
	} {
		e, rows := readRows(t, filepath.Join("testdata", file))
		notes := Notes(e, rows)
		if !strings.Contains(strings.Join(notes, "\n"), want) {
			t.Errorf("%s: notes %q lack %q", file, notes, want)
		}
		if *figures != "" {
			writeFigures(t, e, rows)
		}
	}
}

// writeFigures writes the experiment's figure, PNG and SVG, into -figures.
func writeFigures(t *testing.T, e *Experiment, rows []Row) {
	t.Helper()
	for _, format := range []string{"png", "svg"} {
		var buf bytes.Buffer
		if err := WritePlot(&buf, e, rows, format); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(*figures, e.Name+"."+format), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A table looked up beyond its J over 1% of the time is marked in the
// printed table and named in the notes; 1% or less, and no table (NaN),
// are not.
func TestBeyondNotes(t *testing.T) {
	e, rows := readRows(t, filepath.Join("testdata", "fisher-fig4.csv"))
	for i := range rows {
		if rows[i].Policy != "optimal (average)" {
			continue
		}
		switch rows[i].X {
		case 3.4:
			rows[i].BeyondFraction = 0.02
		case 3.6:
			rows[i].BeyondFraction = 0.4
		default:
			rows[i].BeyondFraction = 0.01
		}
	}
	notes := Notes(e, rows)
	want := "A table used beyond its truncation J over 1% of the time, where it answers as at J−1 (marked †): " +
		"optimal (average) at 3.4–3.6 (2–40% of the time). Its cost there is that table's in the real system, not the real system's optimum."
	if got := notes[len(notes)-1]; got != want {
		t.Errorf("the last note:\n%s\nwant\n%s", got, want)
	}
	var buf bytes.Buffer
	WriteTable(&buf, e, rows)
	if n := strings.Count(buf.String(), " †"); n != 2+2 { // two cells, and their notes
		t.Errorf("%d marks, want the two cells' and their notes':\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "x=3.6 optimal (average): † a queue was beyond the table's J 40.0% of the time") {
		t.Errorf("no note for x=3.6:\n%s", buf.String())
	}
	for i, line := range strings.Split(buf.String(), "\n") {
		if n := utf8.RuneCountInString(line); n > TableWidth {
			t.Errorf("line %d is %d columns wide: %q", i+1, n, line)
		}
	}
}
