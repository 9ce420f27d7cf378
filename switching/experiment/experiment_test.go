package experiment

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/metasched/metasched/switching"
	"github.com/metasched/metasched/switching/sim"
)

func TestAxes(t *testing.T) {
	for name, want := range map[string][]float64{
		"fisher-fig4": {2.6, 2.8, 3, 3.2, 3.4, 3.6},
		"fisher-fig3": {3, 4, 5, 6},
		"palmer-fig2": {2, 3, 4, 5, 6, 7, 8},
		"palmer-fig3": {2, 2.3, 2.6, 2.9, 3.2, 3.5, 3.8},
	} {
		e, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, e.X); diff != "" {
			t.Errorf("%s axis (-want +got):\n%s", name, diff)
		}
		for _, x := range e.X {
			if err := e.Model(x).Validate(); err != nil {
				t.Errorf("%s at %g: %v", name, x, err)
			}
		}
	}
	if _, err := Lookup("fisher-fig5"); err == nil || !strings.Contains(err.Error(), "fisher-fig4, fisher-fig3, palmer-fig2, palmer-fig3") {
		t.Errorf("unknown experiment: %v", err)
	}
}

// TestModels checks the figures' parameters as the papers state them.
func TestModels(t *testing.T) {
	m := FisherFig3(6)
	rho := 0.0
	for _, p := range m.Pools {
		rho += p.ArrivalRate / p.ServiceRate
	}
	if math.Abs(rho-4.8) > 1e-12 || m.Pools[1].ArrivalRate != 1000*m.Pools[0].ArrivalRate ||
		m.Pools[0].ServiceRate*1000 != m.Pools[1].ServiceRate || m.SwitchRates[0][1] != m.Pools[1].ServiceRate/10 {
		t.Errorf("Figure 3 model at N = 6: %+v", m.Pools)
	}
	ph := PalmerPhases(3)
	if math.Abs(ph.High+ph.Low-3) > 1e-12 || math.Abs(ph.High/ph.Low-100) > 1e-9 || ph.Mean != 100 {
		t.Errorf("Palmer phases at load 3: %+v", ph)
	}
	// Palmer–Mitrani's eq. 1 at N = 4, load 3: Σλ + N(µ1+µ2+ξ+η) = 3 + 4·2.2.
	if got := PalmerLambda(PalmerModel(4, 3)); math.Abs(got-11.8) > 1e-12 {
		t.Errorf("Palmer Λ = %g, want 11.8", got)
	}
	pm := PapersModel(FisherFig4(3.4), nil)
	if pm.BlockingAuto || pm.BlockingCost(0) != 0 || math.Abs(pm.Lambda()-7.8) > 1e-12 {
		t.Errorf("papers' Figure 4 model: blocking %v %g, Λ %g", pm.BlockingAuto, pm.BlockingCost(0), pm.Lambda())
	}
}

// TestRunSmall runs two policies at two points end to end: rows, CSV,
// plots and the printed table.
func TestRunSmall(t *testing.T) {
	e, err := Lookup("palmer-fig2")
	if err != nil {
		t.Fatal(err)
	}
	var steps []int
	rows, err := e.Run(context.Background(), Options{
		Completions: 5000, Warmup: 0.1, Seed: 1, X: []float64{2, 4},
		Policies: []string{"heuristic K=1", "static", "best-static"},
		Progress: func(p Progress) {
			if len(steps) == 0 || steps[len(steps)-1] != p.Step {
				steps = append(steps, p.Step)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{1, 2, 3, 4, 5, 6}, steps); diff != "" {
		t.Errorf("progress steps (-want +got):\n%s", diff)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6", len(rows))
	}
	for _, r := range rows {
		switch {
		case r.Policy == "best-static" && r.X == 2:
			// Load 1.5 in a phase: the busy pool needs 2 servers and the
			// other 1; there are 2.
			if !math.IsNaN(r.MeanCost) || !strings.Contains(r.Note, "no stable fixed allocation") {
				t.Errorf("best-static at N = 2: cost %g, note %q", r.MeanCost, r.Note)
			}
		case math.IsNaN(r.MeanCost) || r.Completions != 5000 || !(r.CI95[0] < r.MeanCost && r.MeanCost < r.CI95[1]):
			t.Errorf("row %+v", r)
		}
	}
	var buf bytes.Buffer
	if err := WriteCSV(&buf, e, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 7 || !cmp.Equal(recs[0], CSVHeader) || recs[1][0] != "palmer-fig2" || recs[1][2] != "heuristic K=1" {
		t.Errorf("csv: %q", recs)
	}
	if recs[3][2] != "best-static" || recs[3][3] != "" || !strings.Contains(recs[3][len(CSVHeader)-1], "stable") {
		t.Errorf("csv row of an unstable best-static: %q", recs[3])
	}
	for _, format := range []string{"svg", "png"} {
		buf.Reset()
		if err := WritePlot(&buf, e, rows, format); err != nil {
			t.Fatal(err)
		}
		head := buf.String()[:min(buf.Len(), 200)]
		if format == "png" && !strings.HasPrefix(head, "\x89PNG") || format == "svg" && !strings.Contains(head, "<svg") {
			t.Errorf("%s plot starts %q", format, head)
		}
	}
	buf.Reset()
	WriteTable(&buf, e, rows)
	for _, want := range []string{"palmer-fig2", "heuristic K=1", "best-static", "x=2 best-static: no stable fixed allocation", "The paper:"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	if _, err := e.Run(context.Background(), Options{Policies: []string{"optimal"}}); err == nil || !strings.Contains(err.Error(), `policy "optimal": not in palmer-fig2`) {
		t.Errorf("unknown policy name: %v", err)
	}
	if _, err := e.Run(context.Background(), Options{X: []float64{9}}); err == nil || !strings.Contains(err.Error(), "x = 9: not on the x-axis") {
		t.Errorf("unknown x: %v", err)
	}
}

// simulate runs a policy of the Figure 4 or 3 setting for a short run.
func simulate(t *testing.T, m *switching.Model, spec Spec, completions int64) *sim.Result {
	t.Helper()
	b, err := Build(context.Background(), spec, m, nil, nil, SolveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := sim.Run(context.Background(), sim.Config{Model: m, Policies: b.Policies, Completions: completions, Warmup: 0.1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFisherFig4Findings: in the Figure 4 setting the heuristic (K = 5)
// beats the static policy by a factor that grows with the load, by orders
// of magnitude at 3.4–3.6, while K = 1 and the cµ rule thrash (servers
// spend most of their time switching) and are far worse than both.
func TestFisherFig4Findings(t *testing.T) {
	if testing.Short() {
		t.Skip("simulations")
	}
	// The static allocation (2,1,1) is unstable from load 3 on, so its
	// simulated cost grows with the length of the run; the factor grows
	// up to 3.4 and stays in the hundreds at 3.6.
	prev := 0.0
	for _, load := range []float64{2.6, 3.0, 3.4, 3.6} {
		m := FisherFig4(load)
		h5 := simulate(t, m, Spec{Kind: Heuristic, K: 5}, 100_000)
		st := simulate(t, m, Spec{Kind: Static}, 100_000)
		ratio := st.MeanCost / h5.MeanCost
		t.Logf("load %.1f: heuristic K=5 %.4g, static %.4g, ratio %.3g", load, h5.MeanCost, st.MeanCost, ratio)
		if load <= 3.4 && !(ratio > prev) {
			t.Errorf("load %.1f: static/heuristic = %.3g, not above %.3g at the lower load", load, ratio, prev)
		}
		if load >= 3.4 && ratio < 100 {
			t.Errorf("load %.1f: static/heuristic = %.3g, want orders of magnitude", load, ratio)
		}
		prev = ratio
		if load < 3.4 {
			continue
		}
		for _, spec := range []Spec{{Kind: Heuristic, K: 1}, {Kind: CMu}} {
			r := simulate(t, m, spec, 100_000)
			t.Logf("load %.1f: %s %.4g, in transit %.0f%%", load, spec.Name(), r.MeanCost, 100*r.TransitFraction)
			if r.TransitFraction < 0.5 {
				t.Errorf("load %.1f: %s has servers in transit %.0f%% of the time, want thrashing (> 50%%)", load, spec.Name(), 100*r.TransitFraction)
			}
			if r.MeanCost < 5*max(st.MeanCost, h5.MeanCost) {
				t.Errorf("load %.1f: %s costs %.4g, want far worse than static %.4g and heuristic %.4g",
					load, spec.Name(), r.MeanCost, st.MeanCost, h5.MeanCost)
			}
		}
	}
}

// TestFisherFig3Findings: at N = 6 the papers' rounded static allocation
// (3,1,2) leaves pool 2 unstable and is far worse than the heuristic, while
// the best static allocation (2,2,2) is close to the heuristic.
func TestFisherFig3Findings(t *testing.T) {
	if testing.Short() {
		t.Skip("simulations")
	}
	m := FisherFig3(6)
	st := switching.NewStatic(m)
	if diff := cmp.Diff([]int{3, 1, 2}, st.Target()); diff != "" {
		t.Errorf("static allocation (-want +got):\n%s", diff)
	}
	h := simulate(t, m, Spec{Kind: Heuristic, K: 5}, 200_000)
	s := simulate(t, m, Spec{Kind: Static}, 200_000)
	b := simulate(t, m, Spec{Kind: BestStatic}, 200_000)
	t.Logf("N = 6: heuristic %.4g ± %.2g, static %.4g, best-static %.4g ± %.2g",
		h.MeanCost, (h.CI95[1]-h.CI95[0])/2, s.MeanCost, b.MeanCost, (b.CI95[1]-b.CI95[0])/2)
	if s.MeanCost < 10*h.MeanCost {
		t.Errorf("static %.4g is not far worse than the heuristic %.4g", s.MeanCost, h.MeanCost)
	}
	if b.MeanCost > 1.5*h.MeanCost || h.MeanCost > 1.5*b.MeanCost {
		t.Errorf("best-static %.4g is not close to the heuristic %.4g", b.MeanCost, h.MeanCost)
	}
}

// TestExamplesAreTheFigures: the bundled example models are the
// experiments' models at one point of each figure.
func TestExamplesAreTheFigures(t *testing.T) {
	for file, want := range map[string]*switching.Model{
		"fisher-fig4-load3.4.yaml": FisherFig4(3.4),
		"fisher-fig3-n6.yaml":      FisherFig3(6),
		"palmer-fig2-n4.yaml":      PalmerModel(4, 3),
		"palmer-fig3-load3.2.yaml": PalmerModel(4, 3.2),
	} {
		data, err := os.ReadFile(filepath.Join("..", "..", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := switching.ParseModel(file, data)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateApprox(1e-15, 0)); diff != "" {
			t.Errorf("%s is not the experiment's model (-experiment +file):\n%s", file, diff)
		}
	}
}

// An experiment whose optimal column grows its truncation: at each point
// the table is solved on a J grown from the experiment's until it settles,
// the column and the notes say so, and with demand phases each phase's
// table keeps its own J, which the simulator measures each phase against.
func TestRunGrownTruncation(t *testing.T) {
	e := &Experiment{
		Name: "grown", Title: "two pools", Source: "a test", XLabel: "servers N", X: []float64{2, 3},
		Model:    func(n float64) *switching.Model { return PalmerModel(int(n), 0.5*n) },
		Phases:   func(n float64) *sim.Phases { return PalmerPhases(0.5 * n) },
		Policies: []Spec{{Kind: Optimal}, {Kind: Heuristic, K: 5}},
	}
	opts := Options{Completions: 4000, Seed: 1, QueueLimit: 4, Solve: SolveOptions{Grow: &switching.GrowOptions{BoundaryTolerance: 1e-5}}}
	rows, err := e.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Policy != "optimal (average)" {
			if r.Truncation != "" || r.QueueLimits != nil {
				t.Errorf("%s at %g: truncation %q, J %v", r.Policy, r.X, r.Truncation, r.QueueLimits)
			}
			continue
		}
		t.Logf("N = %g: %s; boundary %.3g, beyond %.3g", r.X, r.Truncation, r.BoundaryFraction, r.BeyondFraction)
		if !strings.Contains(r.Truncation, "grown from 4 in") || !strings.Contains(r.Truncation, "the optimum settled") ||
			strings.Contains(r.Truncation, "NOT SETTLED") {
			t.Errorf("N = %g: truncation %q", r.X, r.Truncation)
		}
		// Phase 1 loads pool 1, phase 2 pool 2: their tables grow the busy
		// pool's J.
		if len(r.PhaseLimits) != 2 || r.PhaseLimits[0][0] <= r.PhaseLimits[0][1] || r.PhaseLimits[1][1] <= r.PhaseLimits[1][0] {
			t.Fatalf("N = %g: J by phase %v", r.X, r.PhaseLimits)
		}
		if want := []int{r.PhaseLimits[1][0], r.PhaseLimits[0][1]}; !cmp.Equal(r.QueueLimits, want) {
			t.Errorf("N = %g: J %v, want the smaller of each pool's, %v", r.X, r.QueueLimits, want)
		}
		// Each phase measured against its own table's J: at a boundary mass
		// under 1e-5 the queues are almost never there.
		if !(r.BoundaryFraction < 0.01) || r.BeyondFraction > r.BoundaryFraction {
			t.Errorf("N = %g: boundary %g, beyond %g", r.X, r.BoundaryFraction, r.BeyondFraction)
		}
	}
	var buf bytes.Buffer
	WriteTable(&buf, e, rows)
	for _, want := range []string{"(average, J grown)", "x=2 optimal (average): phase 1: J = "} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, buf.String())
		}
	}
	if notes := strings.Join(Notes(e, rows), "\n"); !strings.Contains(notes, "optimal (average): each point's table is solved on queues cut at a J grown") ||
		!strings.Contains(notes, fmt.Sprintf("J = %s and %s by phase at 2", switching.FormatLimits(rows[0].PhaseLimits[0]), switching.FormatLimits(rows[0].PhaseLimits[1]))) {
		t.Errorf("notes:\n%s", notes)
	}
	buf.Reset()
	if err := WriteCSV(&buf, e, rows); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	jcol, tcol := slices.Index(CSVHeader, "queue_limits"), slices.Index(CSVHeader, "truncation")
	if recs[1][2] != "optimal (average)" || recs[1][jcol] == "" || !strings.Contains(recs[1][tcol], "settled") || recs[2][jcol] != "" {
		t.Errorf("csv: %q", recs[:3])
	}

	// Fixed: the experiment's J, named in the column.
	opts.Solve.Grow = nil
	rows, err = e.Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	WriteTable(&buf, e, rows)
	if r := rows[0]; r.Truncation != "" || r.PhaseLimits != nil || !cmp.Equal(r.QueueLimits, []int{4, 4}) ||
		!strings.Contains(buf.String(), "(average, J = 4)") {
		t.Errorf("fixed: row %+v, table:\n%s", r, buf.String())
	}
}

// A growth that stops before it settles says so in the row and the
// figure's notes.
func TestRunGrownTruncationStopped(t *testing.T) {
	e := &Experiment{
		Name: "grown", Title: "two pools", Source: "a test", XLabel: "servers N", X: []float64{3},
		Model:    func(n float64) *switching.Model { return PalmerModel(int(n), 0.8*n) },
		Policies: []Spec{{Kind: Optimal}},
	}
	rows, err := e.Run(context.Background(), Options{Completions: 2000, Seed: 1, QueueLimit: 4,
		Solve: SolveOptions{MaxStates: 500, Grow: &switching.GrowOptions{}}})
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	if !strings.Contains(r.Truncation, "NOT SETTLED: the next truncation") || math.IsNaN(r.MeanCost) {
		t.Errorf("row %+v", r)
	}
	notes := strings.Join(Notes(e, rows), "\n")
	if !strings.Contains(notes, "Not settled at 3, the next truncation, J = ") || !strings.Contains(notes, "has more states than the 500 given") {
		t.Errorf("notes:\n%s", notes)
	}
}

// A table in the real system against its exact cost: solved on queues cut
// short, it is looked up beyond its J much of the time and its simulated
// holding cost is not the truncated chain's; grown until the truncation
// stops mattering, the two agree within the simulation's interval.
func TestTableBeyondItsTruncation(t *testing.T) {
	m := PalmerModel(3, 1.5) // ρ = 0.5, no demand phases
	m.QueueLimit = 3
	ctx := context.Background()
	short, err := switching.Solve(ctx, m, switching.SolveOptions{Boundary: true})
	if err != nil {
		t.Fatal(err)
	}
	grown, err := switching.GrowTruncation(ctx, m, switching.SolveOptions{}, switching.GrowOptions{})
	if err != nil || !grown.Settled {
		t.Fatalf("growth: %v, %+v", err, grown)
	}
	for _, tc := range []struct {
		name  string
		sol   *switching.Solution
		agree bool
	}{{"J = 3", short, false}, {"J = " + switching.FormatLimits(grown.Limits()), grown.Solution, true}} {
		r, err := sim.Run(ctx, sim.Config{Model: m, Policies: []switching.Policy{tc.sol.Table}, Completions: 200_000, Warmup: 0.1, Seed: 7,
			QueueLimits: tc.sol.Table.Space.Limits()})
		if err != nil {
			t.Fatal(err)
		}
		exact := tc.sol.Stationary.HoldingCost
		inside := r.CI95[0] <= exact && exact <= r.CI95[1]
		t.Logf("%s: exact holding cost %.4f, simulated %.4f [%.4f, %.4f], beyond J %.2g of the time", tc.name, exact, r.MeanCost, r.CI95[0], r.CI95[1], r.BeyondFraction)
		if inside != tc.agree || (r.BeyondFraction > BeyondMark) == tc.agree {
			t.Errorf("%s: exact %.4f, simulated %.4f in [%.4f, %.4f], beyond J %.3g of the time", tc.name, exact, r.MeanCost, r.CI95[0], r.CI95[1], r.BeyondFraction)
		}
	}
}
