package lab

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"

	"gonum.org/v1/plot/plotter"

	"github.com/metasched/metasched/internal/plotx"
)

// WriteScaleCSV writes one line per row of the scale experiment.
func WriteScaleCSV(w io.Writer, rs []ScaleResult) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"hosts", "clusters", "store", "agents", "backlog", "submitted", "submit_per_s",
		"placements_mean", "placements_p50", "placements_p99", "drained", "drain_s", "cancelled",
		"stream_rate", "stream_per_s", "stream_jobs", "latency_p50_s", "latency_p99_s",
		"rss_max_mib", "cpu_mean_cores", "round_mean_ms", "rounds_ended", "plans_reused_pct", "commits_per_s", "store_mib",
		"jobs_list_p99_ms", "dashboard_p99_ms", "others_cpu_mean_cores", "others_rss_max_mib"}); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, r := range rs {
		if err := cw.Write([]string{strconv.Itoa(r.Row.Hosts), strconv.Itoa(r.Clusters), r.Store, strconv.Itoa(r.Agents), strconv.Itoa(r.Row.Backlog),
			strconv.Itoa(r.Submitted), f(r.SubmitPerS), f(r.Placements.Mean), f(r.Placements.P50), f(r.Placements.P99),
			strconv.FormatBool(r.Drained), f(r.DrainS), strconv.Itoa(r.Cancelled), f(r.Row.Rate), f(r.StreamPerS), strconv.Itoa(r.StreamJobs),
			f(r.Latency.P50), f(r.Latency.P99), f(r.RSSMaxMiB), f(r.CPUMean), f(r.RoundMeanMs), strconv.Itoa(r.RoundsEnded), f(r.ReusedPct), f(r.CommitsPerS),
			f(r.StoreMiB), f(r.JobsListMs.P99), f(r.DashboardMs.P99), f(r.OthersCPUMean), f(r.OthersRSSMaxMiB)}); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// Setup says what the row ran on: its store, and in-process sites or
// how many agents over TLS.
func (r ScaleResult) Setup() string {
	if r.Agents == 0 {
		return r.Store + ", in-process sites"
	}
	return fmt.Sprintf("%s, %d agents over TLS", r.Store, r.Agents)
}

// WriteScaleSamples writes every one-second sample of every row.
func WriteScaleSamples(w io.Writer, rs []ScaleResult) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{"hosts", "store", "agents", "phase", "t_s", "placed", "queued", "cpu_cores", "rss_mib", "rounds", "round_ms", "plans_searched", "plans_reused", "commits", "store_mib",
		"others_cpu_cores", "others_rss_mib"}); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, r := range rs {
		for _, s := range r.Samples {
			if err := cw.Write([]string{strconv.Itoa(r.Row.Hosts), r.Store, strconv.Itoa(r.Agents), s.Phase, f(s.T), strconv.Itoa(s.Placed), strconv.Itoa(s.Queued),
				f(s.CPU), f(s.RSSMiB), strconv.Itoa(s.Rounds), f(s.RoundMs), strconv.Itoa(s.Searched), strconv.Itoa(s.Reused), f(s.Commits), f(s.StoreMiB),
				f(s.OthersCPU), f(s.OthersRSSMiB)}); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteScalePlot draws how the placements per second (mean, p50, p99 of
// the drain's samples) grow with the hosts, as "svg" or "png".
func WriteScalePlot(w io.Writer, rs []ScaleResult, format string) error {
	if len(rs) == 0 {
		return errors.New("lab: no rows to plot")
	}
	p := plotx.New("The daemon at grid scale: placements per second against hosts", "hosts (simulated)", "jobs placed per second (one-second samples)")
	top, lo, hi := 0.0, float64(rs[0].Row.Hosts), float64(rs[0].Row.Hosts)
	for i, series := range []struct {
		name string
		v    func(ScaleResult) float64
	}{{"mean", func(r ScaleResult) float64 { return r.Placements.Mean }},
		{"p50", func(r ScaleResult) float64 { return r.Placements.P50 }},
		{"p99", func(r ScaleResult) float64 { return r.Placements.P99 }}} {
		pts := make(plotter.XYs, len(rs))
		for j, r := range rs {
			pts[j].X, pts[j].Y = float64(r.Row.Hosts), series.v(r)
			top, lo, hi = max(top, pts[j].Y), min(lo, pts[j].X), max(hi, pts[j].X)
		}
		l, s, err := plotter.NewLinePoints(pts)
		if err != nil {
			return fmt.Errorf("lab: plot: %w", err)
		}
		l.Color, s.Color = plotx.Color(i), plotx.Color(i)
		p.Add(l, s)
		p.Legend.Add("placements/s, "+series.name, l, s)
	}
	plotx.LogAxis(&p.X, lo, hi)
	plotx.LinearAxis(&p.Y, 0, top)
	var notes []string
	for _, r := range rs {
		notes = append(notes, fmt.Sprintf("%d hosts in %d clusters (%s), backlog %d: %.0f placements/s (p50 %.0f, p99 %.0f); stream %.0f/s, submit to running p50 %.2f s, p99 %.2f s; daemon at most %.0f MiB, %.2f cores, dispatch round %.1f ms, %.0f%% of plans reused.",
			r.Row.Hosts, r.Clusters, r.Setup(), r.Submitted, r.Placements.Mean, r.Placements.P50, r.Placements.P99, r.StreamPerS,
			r.Latency.P50, r.Latency.P99, r.RSSMaxMiB, r.CPUMean, r.RoundMeanMs, r.ReusedPct))
	}
	return plotx.Render(w, p, notes, format)
}

// WriteScaleQueuePlot draws how the daemon's resident memory grows with
// the jobs queued, one line per row, from the samples taken while the
// backlog was submitted, as "svg" or "png".
func WriteScaleQueuePlot(w io.Writer, rs []ScaleResult, format string) error {
	if len(rs) == 0 {
		return errors.New("lab: no rows to plot")
	}
	p := plotx.New("The daemon at grid scale: memory against queued jobs", "jobs queued (while every host is drained)", "daemon's resident memory, MiB")
	top, right := 0.0, 0.0
	var notes []string
	for i, r := range rs {
		var pts plotter.XYs
		for _, s := range r.Samples {
			if s.Phase == "submit" {
				pts = append(pts, plotter.XY{X: float64(s.Queued), Y: s.RSSMiB})
				top, right = max(top, s.RSSMiB), max(right, float64(s.Queued))
			}
		}
		if len(pts) == 0 {
			continue
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("lab: plot: %w", err)
		}
		l.Color = plotx.Color(i)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%d hosts (%s)", r.Row.Hosts, r.Setup()), l)
		last := pts[len(pts)-1]
		notes = append(notes, fmt.Sprintf("%d hosts: %.0f MiB at %.0f jobs queued, submitted at %.0f/s; GET /v1/jobs p99 %.1f ms, dashboard p99 %.1f ms with them queued.",
			r.Row.Hosts, last.Y, last.X, r.SubmitPerS, r.JobsListMs.P99, r.DashboardMs.P99))
	}
	plotx.LinearAxis(&p.X, 0, max(right, 1))
	plotx.LinearAxis(&p.Y, 0, max(top, 1))
	return plotx.Render(w, p, notes, format)
}
