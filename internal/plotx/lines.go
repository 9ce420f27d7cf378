package plotx

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Line is one line of a figure: its points in x order, optionally a
// confidence bar per point.
type Line struct {
	Name   string
	XYs    plotter.XYs
	Errors plotter.YErrors // nil, or one per point
	Color  color.Color
	Dashes []vg.Length
	Shape  draw.GlyphDrawer
	// Axis, when set, is every x of the figure: a segment joins two points
	// only if they are neighbours on it, so that a missing point breaks
	// the line.
	Axis []float64
}

// joined reports whether the line's points k−1 and k are joined.
func (l Line) joined(k int) bool {
	if l.Axis == nil {
		return true
	}
	a, b := slices.Index(l.Axis, l.XYs[k-1].X), slices.Index(l.Axis, l.XYs[k].X)
	return a >= 0 && b == a+1
}

// Coincidence says that line Line has the same y as line Under at X:
// the two are drawn on top of each other there.
type Coincidence struct {
	Line, Under string
	X           []float64
}

// same reports whether two y values are the same point on a figure (the
// same result, not merely close).
func same(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b)) }

func yAt(l Line, x float64) (float64, bool) {
	i := slices.IndexFunc(l.XYs, func(p plotter.XY) bool { return p.X == x })
	if i < 0 {
		return 0, false
	}
	return l.XYs[i].Y, true
}

// AddLines adds the lines to p in order, each with its markers, its bars
// (when it has some) and a legend entry. Every line stays visible where
// it coincides with lines drawn after it: each of its segments that
// another line covers (at both ends) is drawn as a solid, paler band,
// wider by 3 points for each line over it, and each of its markers larger
// by 2.5 points for each line whose marker is on it; the legend shows the
// style of its most common segment. It returns the coincidences (see
// Coincidences).
func AddLines(p *plot.Plot, lines []Line) ([]Coincidence, error) {
	for i, l := range lines {
		if len(l.XYs) == 0 {
			continue
		}
		later := lines[i+1:]
		covered := func(x float64) int {
			n := 0
			for _, o := range later {
				if y, ok := yAt(o, x); ok && same(y, yOf(l, x)) {
					n++
				}
			}
			return n
		}
		under := make([]int, len(l.XYs))
		over := make([]int, len(l.XYs)) // over[k]: lines over the segment from point k−1 to k
		for k, pt := range l.XYs {
			under[k] = covered(pt.X)
			if k == 0 {
				continue
			}
			for _, o := range later {
				if !l.joined(k) {
					break
				}
				y0, ok0 := yAt(o, l.XYs[k-1].X)
				y1, ok1 := yAt(o, pt.X)
				if ok0 && ok1 && same(y0, l.XYs[k-1].Y) && same(y1, pt.Y) {
					over[k]++
				}
			}
		}
		style := func(depth int) draw.LineStyle {
			if depth == 0 {
				return draw.LineStyle{Color: l.Color, Dashes: l.Dashes, Width: vg.Points(1.5)}
			}
			return draw.LineStyle{Color: Faded(l.Color, 0.45), Width: vg.Points(1.5 + 3*float64(depth))}
		}
		common := map[int]int{}
		for k := 1; k < len(l.XYs); k++ {
			if !l.joined(k) {
				continue
			}
			seg, err := plotter.NewLine(l.XYs[k-1 : k+1])
			if err != nil {
				return nil, fmt.Errorf("plot %s: %w", l.Name, err)
			}
			seg.LineStyle = style(over[k])
			p.Add(seg)
			common[over[k]]++
		}
		legendDepth := 0
		for d, n := range common {
			if n > common[legendDepth] || n == common[legendDepth] && d < legendDepth {
				legendDepth = d
			}
		}
		line, err := plotter.NewLine(l.XYs)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", l.Name, err)
		}
		line.LineStyle = style(legendDepth)
		scatter, err := plotter.NewScatter(l.XYs)
		if err != nil {
			return nil, fmt.Errorf("plot %s: %w", l.Name, err)
		}
		col, shape := l.Color, l.Shape
		scatter.GlyphStyle = draw.GlyphStyle{Color: col, Shape: shape, Radius: vg.Points(3)} // the legend's
		scatter.GlyphStyleFunc = func(k int) draw.GlyphStyle {
			return draw.GlyphStyle{Color: col, Shape: shape, Radius: vg.Points(3 + 2.5*float64(under[k]))}
		}
		p.Add(scatter)
		if l.Errors != nil {
			bars, err := plotter.NewYErrorBars(struct {
				plotter.XYs
				plotter.YErrors
			}{l.XYs, l.Errors})
			if err != nil {
				return nil, fmt.Errorf("plot %s: %w", l.Name, err)
			}
			bars.Color = col
			bars.CapWidth = vg.Points(6)
			bars.LineStyle.Width = vg.Points(1)
			p.Add(bars)
		}
		p.Legend.Add(l.Name, line, scatter)
	}
	return Coincidences(lines), nil
}

func yOf(l Line, x float64) float64 {
	y, _ := yAt(l, x)
	return y
}

// Coincidences groups, at each x, the lines with the same y, and names
// each line of a group against the group's line that is in groups at the
// most x (ties to the later line, drawn on top): one Coincidence per pair,
// in the lines' order, with the x values where they meet in order.
func Coincidences(lines []Line) []Coincidence {
	var xs []float64
	for _, l := range lines {
		for _, p := range l.XYs {
			if !slices.Contains(xs, p.X) {
				xs = append(xs, p.X)
			}
		}
	}
	slices.Sort(xs)
	groups := map[float64][][]int{}
	count := make([]int, len(lines))
	for _, x := range xs {
		var gs [][]int
		for i, l := range lines {
			y, ok := yAt(l, x)
			if !ok {
				continue
			}
			g := slices.IndexFunc(gs, func(g []int) bool { return same(yOf(lines[g[0]], x), y) })
			if g < 0 {
				gs = append(gs, []int{i})
			} else {
				gs[g] = append(gs[g], i)
			}
		}
		for _, g := range gs {
			if len(g) > 1 {
				groups[x] = append(groups[x], g)
				for _, i := range g {
					count[i]++
				}
			}
		}
	}
	type pair struct{ line, under int }
	at := map[pair][]float64{}
	var order []pair
	for _, x := range xs {
		for _, g := range groups[x] {
			rep := g[0]
			for _, i := range g[1:] {
				if count[i] >= count[rep] {
					rep = i
				}
			}
			for _, i := range g {
				if i == rep {
					continue
				}
				k := pair{i, rep}
				if at[k] == nil {
					order = append(order, k)
				}
				at[k] = append(at[k], x)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b pair) int { return a.line - b.line })
	out := make([]Coincidence, len(order))
	for n, k := range order {
		out[n] = Coincidence{Line: lines[k.line].Name, Under: lines[k.under].Name, X: at[k]}
	}
	return out
}

// Ranges writes xs, a subset of all (both in order), as runs of
// neighbours in all: "2.6–2.8, 3.6".
func Ranges(all, xs []float64) string {
	labels := PlainAll(all)
	label := func(x float64) string {
		if i := slices.Index(all, x); i >= 0 {
			return labels[i]
		}
		return Plain(x)
	}
	var parts []string
	for i := 0; i < len(xs); {
		j := i
		for j+1 < len(xs) && slices.Index(all, xs[j+1]) == slices.Index(all, xs[j])+1 && slices.Index(all, xs[j]) >= 0 {
			j++
		}
		if j == i {
			parts = append(parts, label(xs[i]))
		} else {
			parts = append(parts, label(xs[i])+"–"+label(xs[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ", ")
}
