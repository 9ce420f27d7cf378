package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"github.com/metasched/metasched/internal/plotx"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/metasched/metasched/selection"
	"github.com/metasched/metasched/selection/replay"
)

type simSelectionFlags struct {
	grid, job, arrivals, algorithm, out, output string
	requests, processes, restarts               int
	rate                                        float64
	seed                                        uint64
}

func newSimulateSelectionCmd(e *env) *cobra.Command {
	var f simSelectionFlags
	cmd := &cobra.Command{
		Use:   "selection --grid FILE --job FILE --rate X",
		Short: "Replay a stream of job requests on a grid under cluster-selection algorithms",
		Long: `Replay --requests requests of --processes tasks each (the job file with its
tasks replaced) arriving over time, and place each one with every --algorithm in
turn, as in the GramVM paper's Figure 1 (004, §4.1: 19 requests of 300 processes,
hill climbing against MCT).

Arrivals: the first request at 0, then gaps drawn from --seed, Uniform(0, 2/rate)
for --arrivals uniform (a steady low rate) or Exp(rate) for exponential (bursts).
Requests start first come, first served, never before the one before them; each
one takes the machines its plan uses, among those free when it starts, until its
predicted run time has passed. hillclimb and exhaustive plan on the machines free
at each possible start (now, or when some machine frees) and keep the earliest
completion; mct takes the single cluster that completes it first, met the
single fastest cluster even if busy, olb the first cluster free to run it.

Prints each request's wait, run and total time per algorithm and their means,
with the improvement over mct. --out DIR also writes selection.csv and a plot like
the paper's (selection.svg, selection.png): total time (solid) and waiting time
(dashed) per request and algorithm.`,
		Example: `  metasched simulate selection --grid examples/grid-8x8.yaml --job examples/job-render.yaml --rate 0.0005
  metasched simulate selection --grid examples/grid-8x8.yaml --job examples/job-render.yaml \
      --arrivals exponential --rate 0.002 --algorithm hillclimb,mct,met,olb --out results`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return simulateSelection(cmd.Context(), e, f, cmd.Flags().Changed("rate"))
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.grid, "grid", "", "grid file (YAML or JSON), required")
	fl.StringVar(&f.job, "job", "", "job file (YAML or JSON): every request is this job, required")
	fl.IntVar(&f.requests, "requests", 19, "number of requests")
	fl.IntVar(&f.processes, "processes", 300, "tasks of each request (replaces the job's tasks)")
	fl.StringVar(&f.arrivals, "arrivals", replay.Uniform, "uniform or exponential gaps between arrivals")
	fl.Float64Var(&f.rate, "rate", 0, "mean arrival rate in requests per second, required")
	fl.StringVar(&f.algorithm, "algorithm", "hillclimb,mct", "comma-separated algorithms: hillclimb, exhaustive, met, mct, olb")
	fl.IntVar(&f.restarts, "restarts", selection.DefaultRestarts, "hill-climbing restarts: the number of Kruskal zones")
	fl.Uint64Var(&f.seed, "seed", 1, "random seed of the arrivals: the same seed gives the same numbers")
	fl.StringVar(&f.out, "out", "", "directory for selection.csv, selection.svg and selection.png")
	fl.StringVar(&f.output, "output", "table", "table or json")
	return cmd
}

// parseAlgorithms reads a comma-separated list of algorithms.
func parseAlgorithms(flag, s string) ([]selection.Algorithm, error) {
	var algs []selection.Algorithm
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			return nil, usagef("%s: empty name in %q: want a comma-separated list of algorithms", flag, s)
		}
		a, err := parseAlgorithm(flag, name)
		if err != nil {
			return nil, err
		}
		if slices.Contains(algs, a) {
			return nil, usagef("%s: %s given twice", flag, a)
		}
		algs = append(algs, a)
	}
	return algs, nil
}

func simulateSelection(ctx context.Context, e *env, f simSelectionFlags, rateSet bool) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	switch {
	case f.requests < 1:
		return usagef("--requests: must be >= 1, got %d", f.requests)
	case f.processes < 1:
		return usagef("--processes: must be >= 1, got %d", f.processes)
	case f.arrivals != replay.Uniform && f.arrivals != replay.Exponential:
		return usagef("--arrivals: must be %s or %s, got %q", replay.Uniform, replay.Exponential, f.arrivals)
	case !rateSet:
		return usagef("--rate: required: the mean arrival rate in requests per second (e.g. 0.0005, a request every 2000 s)")
	case !(f.rate > 0) || math.IsInf(f.rate, 1):
		return usagef("--rate: must be a number > 0 (requests per second), got %g", f.rate)
	case f.restarts < 1:
		return usagef("--restarts: must be >= 1, got %d", f.restarts)
	}
	algs, err := parseAlgorithms("--algorithm", f.algorithm)
	if err != nil {
		return err
	}
	g, err := loadGrid(f.grid)
	if err != nil {
		return err
	}
	job, err := loadJob(f.job)
	if err != nil {
		return err
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return usageError{Err: fmt.Errorf("--out: %w", err)}
		}
	}
	cfg := replay.Config{
		Graph: g, Job: job, Requests: f.requests, Processes: f.processes, Arrivals: f.arrivals,
		Rate: f.rate, Seed: f.seed, Algorithms: algs, Restarts: f.restarts,
	}
	var bar *progressBar
	if e.tty {
		bar = &progressBar{w: e.stderr}
		cfg.Progress = func(p replay.Progress) {
			bar.show(float64(p.Step)/float64(p.Steps), fmt.Sprintf("%s: request %d/%d", p.Algorithm, p.Request, f.requests))
		}
	}
	res, err := replay.Run(ctx, cfg)
	if bar != nil {
		bar.done()
	}
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w", context.Canceled)
	case errors.Is(err, replay.ErrInfeasible):
		return err
	default:
		return usageError{Err: err}
	}
	rep := &selectionReport{
		Grid: f.grid, Job: job.Name, Requests: f.requests, Processes: f.processes, Arrivals: f.arrivals,
		Rate: f.rate, Seed: f.seed, Restarts: f.restarts, ArrivalTimes: res.Arrivals, Series: res.Series,
	}
	if f.out != "" {
		if rep.Files, err = writeSelection(f.out, rep); err != nil {
			return err
		}
	}
	if f.output == "json" {
		return writeJSON(e.stdout, rep)
	}
	rep.print(e.stdout)
	return nil
}

// selectionReport is the output of simulate selection.
type selectionReport struct {
	Grid      string  `json:"grid"`
	Job       string  `json:"job"`
	Requests  int     `json:"requests"`
	Processes int     `json:"processes"`
	Arrivals  string  `json:"arrivals"`
	Rate      float64 `json:"rate"`
	Seed      uint64  `json:"seed"`
	Restarts  int     `json:"restarts"`
	// ArrivalTimes are shared by every algorithm.
	ArrivalTimes []float64       `json:"arrivals_s"`
	Series       []replay.Series `json:"algorithms"`
	Files        []string        `json:"files,omitempty"`
}

func (r *selectionReport) title() string {
	return fmt.Sprintf("%d requests of %d processes (%s), %s arrivals at %g requests/s, seed %d",
		r.Requests, r.Processes, r.Job, r.Arrivals, r.Rate, r.Seed)
}

func (r *selectionReport) print(w io.Writer) {
	fmt.Fprintf(w, "%s\ngrid: %s\n\n", r.title(), r.Grid)
	var rows [][]string
	for i := range r.ArrivalTimes {
		for _, s := range r.Series {
			q := s.Requests[i]
			rows = append(rows, []string{fmt.Sprint(q.Index), fmt.Sprintf("%.0f", q.Arrival), string(s.Algorithm),
				fmt.Sprintf("%.0f", q.Wait), fmt.Sprintf("%.0f", q.Run), fmt.Sprintf("%.0f", q.Total), fmt.Sprint(q.Machines), q.Master, q.Clusters})
		}
	}
	writeColumns(w, []string{"REQUEST", "ARRIVAL S", "ALGORITHM", "WAIT S", "RUN S", "TOTAL S", "MACHINES", "MASTER", "CLUSTERS"}, rows)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ALGORITHM\tMEAN WAIT S\tMEAN RUN S\tMEAN TOTAL S\tMAKESPAN S\tVS MCT")
	for _, s := range r.Series {
		vs := "—"
		switch {
		case s.Algorithm == selection.MCT:
			vs = "reference"
		case s.Summary.ImprovementVsMCT != nil:
			vs = fmt.Sprintf("%+.1f%%", 100**s.Summary.ImprovementVsMCT)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%s\n",
			s.Algorithm, s.Summary.MeanWait, s.Summary.MeanRun, s.Summary.MeanTotal, s.Summary.Makespan, vs)
	}
	tw.Flush()
	if slices.ContainsFunc(r.Series, func(s replay.Series) bool { return s.Algorithm == selection.MCT }) && len(r.Series) > 1 {
		fmt.Fprintln(w, "\nVS MCT: how much less mean total time (wait + run) than mct, 1 − total/total(mct).")
	}
	if len(r.Files) > 0 {
		fmt.Fprintf(w, "\nwrote %s\n", strings.Join(r.Files, ", "))
	}
}

// selectionCSVHeader is the first line of selection.csv.
var selectionCSVHeader = []string{
	"algorithm", "request", "arrival_s", "start_s", "wait_s", "run_s", "total_s", "end_s", "master", "machines", "clusters",
}

func writeSelectionCSV(w io.Writer, r *selectionReport) error {
	cw := csv.NewWriter(w)
	cw.Write(selectionCSVHeader)
	num := func(x float64) string { return strconv.FormatFloat(x, 'g', 10, 64) }
	for _, s := range r.Series {
		for _, q := range s.Requests {
			cw.Write([]string{
				string(s.Algorithm), strconv.Itoa(q.Index), num(q.Arrival), num(q.Start), num(q.Wait), num(q.Run),
				num(q.Total), num(q.End), q.Master, strconv.Itoa(q.Machines), q.Clusters,
			})
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// selectionPlot draws the paper's Figure 1: per algorithm, the total time
// of each request (solid) and its waiting time (dashed), in one colour;
// lines that coincide stay visible (plotx.AddLines). It returns the notes
// a reader needs beside it.
func selectionPlot(r *selectionReport) (*plot.Plot, []string, error) {
	p := plotx.New(r.title()+", on "+filepath.Base(r.Grid), "request, in order of arrival", "seconds")
	p.X.Min, p.X.Max = 0.5, float64(len(r.ArrivalTimes))+0.5
	p.X.Tick.Marker = requestTicks(len(r.ArrivalTimes))
	hi := 0.0
	var lines []plotx.Line
	for i, s := range r.Series {
		total := make(plotter.XYs, len(s.Requests))
		wait := make(plotter.XYs, len(s.Requests))
		for k, q := range s.Requests {
			total[k] = plotter.XY{X: float64(q.Index), Y: q.Total}
			wait[k] = plotter.XY{X: float64(q.Index), Y: q.Wait}
			hi = max(hi, q.Total)
		}
		lines = append(lines,
			plotx.Line{Name: fmt.Sprintf("%s total", s.Algorithm), XYs: total, Color: plotx.Color(i), Shape: plotutil.Shape(i)},
			plotx.Line{Name: fmt.Sprintf("%s wait", s.Algorithm), XYs: wait, Color: plotx.Color(i), Shape: plotutil.Shape(i),
				Dashes: []vg.Length{vg.Points(6), vg.Points(3)}})
	}
	plotx.LinearAxis(&p.Y, 0, hi)
	p.Add(plotter.NewGrid())
	same, err := plotx.AddLines(p, lines)
	if err != nil {
		return nil, nil, err
	}
	notes := []string{"Solid: a request's total time (waiting, then running); dashed: its waiting time."}
	var all []float64
	for i := range r.ArrivalTimes {
		all = append(all, float64(i+1))
	}
	var parts []string
	for _, c := range same {
		// Lines that meet at a point only show it by their markers: the
		// notes name those that run together from a request to the next.
		var runs []float64
		for k, x := range c.X {
			if k > 0 && c.X[k-1] == x-1 || k+1 < len(c.X) && c.X[k+1] == x+1 {
				runs = append(runs, x)
			}
		}
		if len(runs) == 0 {
			continue
		}
		where := "at every request"
		if len(runs) < len(all) {
			where = "at requests " + plotx.Ranges(all, runs)
		}
		parts = append(parts, fmt.Sprintf("%s = %s %s", c.Line, c.Under, where))
	}
	if len(parts) > 0 {
		notes = append(notes, "Equal times, drawn as nested lines (the one underneath wider and paler): "+strings.Join(parts, "; ")+".")
	}
	return p, notes, nil
}

// requestTicks labels every request, or every few when there are many.
func requestTicks(n int) plot.ConstantTicks {
	step := max(1, (n+19)/20)
	var ts []plot.Tick
	for i := 1; i <= n; i++ {
		label := ""
		if (i-1)%step == 0 {
			label = strconv.Itoa(i)
		}
		ts = append(ts, plot.Tick{Value: float64(i), Label: label})
	}
	return ts
}

// writeSelectionPlot renders the plot as "svg" or "png", 8×5 inches.
func writeSelectionPlot(w io.Writer, r *selectionReport, format string) error {
	p, notes, err := selectionPlot(r)
	if err != nil {
		return err
	}
	return plotx.Render(w, p, notes, format)
}

// writeSelection writes DIR/selection.csv, .svg and .png.
func writeSelection(dir string, r *selectionReport) ([]string, error) {
	return writeFigure(dir, "selection",
		func(w io.Writer) error { return writeSelectionCSV(w, r) },
		func(w io.Writer, format string) error { return writeSelectionPlot(w, r, format) })
}
