package plotx

import (
	"bytes"
	"image/png"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
)

// A log axis starts at a labelled tick under the lowest data and ends at
// the first tick over the highest: no empty decades, a label where the
// lowest (often the best) values are; every label in one format.
func TestLogAxis(t *testing.T) {
	for _, tc := range []struct {
		lo, hi           float64
		wantMin, wantMax float64
	}{
		{10.45, 350_000, 10, 400_000}, // Fisher et al.'s Figure 4: 4.5 decades, labels 1 and 3
		{14.2, 1230, 10, 2000},        // labels 1, 2, 5
		{0.7, 3.1, 0.5, 4},
		{3e-3, 8.5e5, 1e-3, 9e5}, // 8.4 decades: powers of ten only
	} {
		var p plot.Plot
		LogAxis(&p.Y, tc.lo, tc.hi)
		if math.Abs(p.Y.Min-tc.wantMin) > 1e-12*tc.wantMin || math.Abs(p.Y.Max-tc.wantMax) > 1e-12*tc.wantMax {
			t.Errorf("LogAxis(%g, %g): %g to %g, want %g to %g", tc.lo, tc.hi, p.Y.Min, p.Y.Max, tc.wantMin, tc.wantMax)
		}
		ticks := p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)
		var labels []string
		for _, tk := range ticks {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
				if strings.ContainsAny(tk.Label, "e+") {
					t.Errorf("label %q is not in plain notation", tk.Label)
				}
			}
		}
		if len(labels) < 3 || labels[0] != Plain(tc.wantMin) {
			t.Errorf("LogAxis(%g, %g): labels %q, want several, the first at the bottom %s", tc.lo, tc.hi, labels, Plain(tc.wantMin))
		}
	}
	var p plot.Plot
	LogAxis(&p.Y, 10.45, 350_000)
	var labels []string
	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	want := []string{"10", "30", "100", "300", "1,000", "3,000", "10,000", "30,000", "100,000", "300,000"}
	if diff := cmp.Diff(want, labels); diff != "" {
		t.Errorf("Figure 4's labels (-want +got):\n%s", diff)
	}
}

func TestLinearTicks(t *testing.T) {
	var p plot.Plot
	LinearAxis(&p.Y, 0, 43_547)
	var labels []string
	for _, tk := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
		if tk.Label != "" {
			labels = append(labels, tk.Label)
		}
	}
	if diff := cmp.Diff([]string{"0", "10,000", "20,000", "30,000", "40,000"}, labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if p.Y.Max < 43_547 || p.Y.Max > 1.1*43_547 {
		t.Errorf("axis ends at %g, want just above the data", p.Y.Max)
	}
	if diff := cmp.Diff([]string{"2.6", "2.8", "3.0", "3.2"}, PlainAll([]float64{2.6, 2.8, 3, 3.2000000000000006})); diff != "" {
		t.Errorf("PlainAll (-want +got):\n%s", diff)
	}
	if got := Ranges([]float64{2.6, 2.8, 3, 3.2, 3.4, 3.6}, []float64{2.6, 2.8, 3.2, 3.6}); got != "2.6–2.8, 3.2, 3.6" {
		t.Errorf("Ranges = %q", got)
	}
}

// Lines that coincide are found, named against the line most often
// equal to others (ties to the later one, drawn on top).
func TestCoincidences(t *testing.T) {
	line := func(name string, ys ...float64) Line {
		l := Line{Name: name}
		for i, y := range ys {
			if !math.IsNaN(y) {
				l.XYs = append(l.XYs, plotter.XY{X: float64(i + 1), Y: y})
			}
		}
		return l
	}
	nan := math.NaN()
	lines := []Line{
		line("optimal", 10, 13, 18, 14840),
		line("papers", 14, 30, 389, 14840),
		line("heuristic", 13, 16, 19, 60),
		line("static", 14, 30, 389, 14840),
		line("best-static", 14, 30, nan, nan),
	}
	want := []Coincidence{
		{Line: "optimal", Under: "static", X: []float64{4}},
		{Line: "papers", Under: "static", X: []float64{1, 2, 3, 4}},
		{Line: "best-static", Under: "static", X: []float64{1, 2}},
	}
	if diff := cmp.Diff(want, Coincidences(lines)); diff != "" {
		t.Errorf("coincidences (-want +got):\n%s", diff)
	}
	// Drawn: the segments of a line under others are wider.
	p := plot.New()
	for i := range lines {
		lines[i].Color, lines[i].Shape = Color(i), plotutil.Shape(i)
	}
	if _, err := AddLines(p, lines); err != nil {
		t.Fatal(err)
	}
}

// The figure's text stays inside it: the title, the tick labels (the
// last x tick of the issue was cut off), the legend and the notes, in the
// SVG as in the PNG.
func TestRenderFits(t *testing.T) {
	p := plot.New()
	p.Title.Text = "Policy comparisons: M = 3, N = 4, increasing load (Fisher et al., Figure 4), a title long enough to wrap onto a second line"
	p.X.Label.Text = "total offered load"
	p.Y.Label.Text = "mean holding cost Σ c·j (log scale)"
	xs := []float64{2.6, 2.8, 3, 3.2, 3.4, 3.6}
	var lines []Line
	for i, name := range []string{"optimal (average)", "optimal (papers' discounted)", "heuristic K=5", "heuristic K=1", "static", "best-static", "cmu"} {
		l := Line{Name: name, Color: Color(i), Dashes: plotutil.Dashes(i), Shape: plotutil.Shape(i)}
		for k, x := range xs {
			l.XYs = append(l.XYs, plotter.XY{X: x, Y: 10 * math.Pow(3, float64(i+k))})
		}
		lines = append(lines, l)
	}
	LogAxis(&p.Y, 10, 10*math.Pow(3, 12))
	p.X.Tick.Marker = ValueTicks(xs)
	p.X.Min, p.X.Max = 2.56, 3.64
	if _, err := AddLines(p, lines); err != nil {
		t.Fatal(err)
	}
	notes := []string{strings.Repeat("A note long enough to wrap over several lines of the column. ", 4), "Another."}
	var svg bytes.Buffer
	if err := Render(&svg, p, notes, "svg"); err != nil {
		t.Fatal(err)
	}
	out := svg.String()
	if !strings.Contains(out, "@font-face") || !strings.Contains(out, "'Times New Roman'") {
		t.Error("the SVG carries neither its font nor the fonts with the same metrics")
	}
	// <text x="X" y="Y" ... font-size:Spx">TEXT</text>, x the left end.
	re := regexp.MustCompile(`<text x="([-0-9.e]+)" y="([-0-9.e]+)"[^>]*font-size:([0-9.]+)px[^>]*>([^<]*)</text>`)
	texts := re.FindAllStringSubmatch(out, -1)
	var all []string
	for _, m := range texts {
		x, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		size, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		s := strings.NewReplacer("&#39;", "'", "&amp;", "&", "&lt;", "<", "&gt;", ">").Replace(m[4])
		sty := text.Style{Font: font.From(plot.DefaultFont, font.Length(size)), Handler: plot.DefaultTextHandler}
		w := float64(sty.Width(s))
		if x < 0 || x+w > float64(Width) {
			t.Errorf("text %q from x = %.1f to %.1f: outside the figure's width %g", s, x, x+w, float64(Width))
		}
		all = append(all, s)
	}
	for _, want := range []string{"3.6", "2.6", "10", "Notes:", "Another.", "cmu", "optimal (papers' discounted)"} {
		if !slices.Contains(all, want) && !slices.ContainsFunc(all, func(s string) bool { return strings.HasSuffix(s, want) }) {
			t.Errorf("the SVG lacks the text %q", want)
		}
	}
	var img bytes.Buffer
	if err := Render(&img, p, notes, "png"); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&img); err != nil {
		t.Errorf("png: %v", err)
	}
}
