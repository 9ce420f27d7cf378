// Package plotx renders gonum plots for the commands that write figures,
// so that each figure reads on its own: the title across the top, the
// legend and the notes in a column beside the plot (never over the data),
// axes that end at a labelled tick near the data, one number format for
// every tick label, lines that stay visible where they coincide.
//
// The design is described in docs/research/simulation.md of the
// repository, "Figures".
package plotx

import (
	"bytes"
	"fmt"
	"image/color"
	"io"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The size of every figure, and its margins.
const (
	Width  = 10 * vg.Inch
	Height = 6 * vg.Inch
	margin = 12 // points, around the figure
	gap    = 12 // points, between the title, the plot and the column
	// slack is the share of a line's width left free for a viewer that
	// sets the text in a slightly wider font than the one it was measured
	// in.
	slack = 0.05
)

// New is a plot with its title and its axes' labels ("" for none).
func New(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	return p
}

// Render writes p as "svg" or "png" (Width × Height) with the notes a
// reader needs beside it: see Draw.
func Render(w io.Writer, p *plot.Plot, notes []string, format string) error {
	var c vg.CanvasWriterTo
	if format == "svg" {
		// With its fonts: a viewer without Liberation Serif would set the
		// text in a wider font than the layout measured, and clip it.
		c = vgsvg.NewWith(vgsvg.UseWH(Width, Height), vgsvg.EmbedFonts(true))
	} else {
		var err error
		if c, err = draw.NewFormattedCanvas(Width, Height, format); err != nil {
			return fmt.Errorf("render %s: %w", format, err)
		}
	}
	Draw(draw.New(c), p, notes)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("write %s: %w", format, err)
	}
	out := buf.Bytes()
	if format == "svg" {
		// For a viewer that does not read the embedded font: the fonts
		// that have its metrics, then any serif.
		out = bytes.ReplaceAll(out, []byte("font-family:Liberation Serif;"), []byte(svgFonts))
	}
	if _, err := w.Write(out); err != nil {
		return fmt.Errorf("write %s: %w", format, err)
	}
	return nil
}

// svgFonts are the fonts of an SVG's text: Liberation Serif (embedded),
// then the fonts with the same metrics, then any serif.
const svgFonts = "font-family:'Liberation Serif','Times New Roman',Times,'Nimbus Roman',serif;"

// Draw lays p out on c: its title (wrapped) across the top, then the plot
// on the left and, in a column on its right, its legend and under it the
// notes (under the plot, across the figure, when the column has no room
// for them). p's own title and legend are not drawn inside the plot.
func Draw(c draw.Canvas, p *plot.Plot, notes []string) {
	c.SetColor(color.White)
	c.Fill(c.Rectangle.Path())
	c = draw.Crop(c, margin, -margin, margin, -margin)

	tsty := p.Title.TextStyle
	tsty.Font.Size = 13
	tsty.XAlign, tsty.YAlign = draw.XCenter, draw.YTop
	y := c.Max.Y
	for _, line := range Wrap(tsty, p.Title.Text, (1-slack)*c.Size().X) {
		c.FillText(tsty, vg.Point{X: c.Center().X, Y: y}, line)
		y -= lineHeight(tsty)
	}
	body := c
	if p.Title.Text != "" {
		body.Max.Y = y - gap/2
	}

	leg := p.Legend
	leg.Top, leg.Left = true, true
	leg.TextStyle.Font.Size = 11
	leg.ThumbnailWidth = vg.Points(30)
	leg.Padding = vg.Points(2)
	legRect := leg.Rectangle(body)
	colW := min(max(legRect.Size().X/(1-slack), 0.27*body.Size().X), 0.4*body.Size().X)
	col := body
	col.Min.X = body.Max.X - colW
	area := body
	area.Max.X = col.Min.X - gap

	nsty := text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, 10), Handler: plot.DefaultTextHandler,
		XAlign: draw.XLeft, YAlign: draw.YTop}
	head := nsty
	legH := legRect.Size().Y
	if legH > 0 {
		leg.Draw(col)
	}
	if len(notes) > 0 {
		lines := noteLines(nsty, notes, colW)
		need := lineHeight(head) + vg.Length(len(lines))*lineHeight(nsty)
		top := col.Max.Y - legH - gap
		x := col.Min.X
		if legH == 0 {
			top = col.Max.Y
		}
		if top-need < col.Min.Y {
			// No room under the legend: across the figure, under the plot.
			lines = noteLines(nsty, notes, body.Size().X)
			need = lineHeight(head) + vg.Length(len(lines))*lineHeight(nsty)
			area.Min.Y += need + gap
			top, x = body.Min.Y+need, body.Min.X
		}
		c.FillText(head, vg.Point{X: x, Y: top}, "Notes:")
		top -= lineHeight(head)
		for _, l := range lines {
			c.FillText(nsty, vg.Point{X: x + l.indent, Y: top}, l.text)
			top -= lineHeight(nsty)
		}
	}

	title, legend := p.Title.Text, p.Legend
	p.Title.Text, p.Legend = "", plot.NewLegend()
	p.Draw(area)
	p.Title.Text, p.Legend = title, legend
}

func lineHeight(sty text.Style) vg.Length {
	return sty.FontExtents().Height * 1.15
}

type noteLine struct {
	text   string
	indent vg.Length
}

// noteLines wraps each note to width behind a bullet, its continuation
// lines indented under its text.
func noteLines(sty text.Style, notes []string, width vg.Length) []noteLine {
	const bullet = "• "
	indent := sty.Width(bullet)
	var out []noteLine
	for _, n := range notes {
		for i, l := range Wrap(sty, n, (1-slack)*width-indent) {
			if i == 0 {
				out = append(out, noteLine{bullet + l, 0})
			} else {
				out = append(out, noteLine{l, indent})
			}
		}
	}
	return out
}

// Wrap breaks s into lines no wider than width in style sty, at spaces
// (a word wider than width gets a line of its own).
func Wrap(sty text.Style, s string, width vg.Length) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && sty.Width(line+" "+word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line == "" {
			line = word
		} else {
			line += " " + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Palette is the figures' line colours (Okabe and Ito's, which stay
// apart for colour-blind readers and in grey, without their yellow).
var Palette = []color.Color{
	color.RGBA{0x00, 0x72, 0xb2, 0xff}, // blue
	color.RGBA{0xd5, 0x5e, 0x00, 0xff}, // vermillion
	color.RGBA{0x00, 0x9e, 0x73, 0xff}, // bluish green
	color.RGBA{0xcc, 0x79, 0xa7, 0xff}, // reddish purple
	color.RGBA{0x00, 0x00, 0x00, 0xff}, // black
	color.RGBA{0xe6, 0x9f, 0x00, 0xff}, // orange
	color.RGBA{0x56, 0xb4, 0xe9, 0xff}, // sky blue
}

// Faded is c at the given opacity, for a wide line under the lines it
// coincides with.
func Faded(c color.Color, alpha float64) color.Color {
	r, g, b, _ := c.RGBA()
	a := uint32(alpha * 0xffff)
	return color.RGBA64{uint16(r * a / 0xffff), uint16(g * a / 0xffff), uint16(b * a / 0xffff), uint16(a)}
}

// Color is the i-th line colour of Palette (cycling).
func Color(i int) color.Color { return Palette[i%len(Palette)] }

// Ticks marks a linear axis with about six labelled ticks at a step of
// 1, 2, 2.5 or 5 times a power of ten, and four unlabelled ones between
// each, labelled in Plain's format.
type Ticks struct{}

// Ticks implements plot.Ticker.
func (Ticks) Ticks(min, max float64) []plot.Tick {
	if !(max > min) {
		return nil
	}
	raw := (max - min) / 6
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	step := 10 * pow
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*pow >= raw {
			step = m * pow
			break
		}
	}
	minor := step / 5
	var ts []plot.Tick
	for i := math.Ceil(min / minor); i*minor <= max*(1+1e-12); i++ {
		v := roundTick(i * minor)
		t := plot.Tick{Value: v}
		if q := v / step; math.Abs(q-math.Round(q)) < 1e-9 {
			t.Label = Plain(v)
		}
		ts = append(ts, t)
	}
	return ts
}

// ValueTicks marks an axis at the given values, labelled by PlainAll.
func ValueTicks(values []float64) plot.ConstantTicks {
	labels := PlainAll(values)
	ts := make(plot.ConstantTicks, len(values))
	for i, v := range values {
		ts[i] = plot.Tick{Value: v, Label: labels[i]}
	}
	return ts
}

// roundTick drops the float noise of a tick value (0.30000000000000004).
func roundTick(v float64) float64 { return sigRound(v, 12) }

func sigRound(v float64, digits int) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	p := math.Pow(10, float64(digits-1)-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*p) / p
}

// LogTicks marks a log axis: a tick at every m·10^k (m = 1…9), labelled
// in Plain's format at m in logLabels' set.
type LogTicks struct{}

// Ticks implements plot.Ticker.
func (LogTicks) Ticks(min, max float64) []plot.Tick {
	labelled := logLabels(min, max)
	var ts []plot.Tick
	for k := math.Floor(math.Log10(min)); math.Pow(10, k) <= max*(1+1e-12); k++ {
		for m := 1; m <= 9; m++ {
			v := sigRound(float64(m)*math.Pow(10, k), 12)
			if v < min*(1-1e-12) || v > max*(1+1e-12) {
				continue
			}
			t := plot.Tick{Value: v}
			if labelled[m] {
				t.Label = Plain(v)
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// logLabels are the mantissas labelled on a log axis from min to max:
// 1, 2 and 5 over up to 4 decades, 1 and 3 up to 7, powers of ten beyond.
func logLabels(min, max float64) map[int]bool {
	switch d := math.Log10(max / min); {
	case d <= 4:
		return map[int]bool{1: true, 2: true, 5: true}
	case d <= 7:
		return map[int]bool{1: true, 3: true}
	}
	return map[int]bool{1: true}
}

// LogAxis makes a a log axis for data from lo to hi (> 0): it starts at
// the labelled tick just below lo, so that the lowest data have a label
// under them, and ends at the tick just above hi.
func LogAxis(a *plot.Axis, lo, hi float64) {
	if !(lo > 0) || !(hi >= lo) {
		return
	}
	if hi == lo {
		lo, hi = lo/2, hi*2
	}
	labelled := logLabels(lo, hi)
	// The range grows a little at each end: the labels are those of the
	// final range. The top ends at the first tick above hi, labelled or
	// not (a labelled one is at most a tick below).
	a.Min, a.Max = labelBelow(lo, labelled), labelAbove(hi, allTicks)
	if l := logLabels(a.Min, a.Max); len(l) != len(labelled) {
		a.Min = labelBelow(lo, l)
	}
	a.Scale = plot.LogScale{}
	a.Tick.Marker = LogTicks{}
}

var allTicks = map[int]bool{1: true, 2: true, 3: true, 4: true, 5: true, 6: true, 7: true, 8: true, 9: true}

// labelBelow is the largest m·10^k ≤ v with m labelled; labelAbove the
// smallest ≥ v.
func labelBelow(v float64, labelled map[int]bool) float64 {
	k := math.Floor(math.Log10(v))
	for ; ; k-- {
		for m := 9; m >= 1; m-- {
			if x := sigRound(float64(m)*math.Pow(10, k), 12); labelled[m] && x <= v*(1+1e-12) {
				return x
			}
		}
	}
}

func labelAbove(v float64, labelled map[int]bool) float64 {
	k := math.Floor(math.Log10(v))
	for ; ; k++ {
		for m := 1; m <= 9; m++ {
			if x := sigRound(float64(m)*math.Pow(10, k), 12); labelled[m] && x >= v*(1-1e-12) {
				return x
			}
		}
		if x := math.Pow(10, k+1); x >= v*(1-1e-12) {
			return x
		}
	}
}

// LinearAxis makes a a linear axis from min (often 0) to a little above
// hi, its ticks labelled in Plain's format.
func LinearAxis(a *plot.Axis, min, hi float64) {
	a.Min = min
	a.Max = hi + 0.05*(hi-min)
	if a.Max <= a.Min {
		a.Max = a.Min + 1
	}
	a.Tick.Marker = Ticks{}
}
