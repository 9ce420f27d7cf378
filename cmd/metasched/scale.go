package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/internal/etcdtest"
	"github.com/metasched/metasched/metasched/lab"
)

// The scale experiment's default rows: the table.
var (
	scaleHosts   = []int{1000, 5000, 10000}
	scaleBacklog = []int{20000, 100000, 100000}
	scaleRate    = []int{500, 500, 250}
)

func newScaleCmd(e *env) *cobra.Command {
	var (
		out, dir                 string
		keep, profile            bool
		hosts, backlogs, rates   string
		store                    string
		clients, agents          int
		seed                     uint64
		streamFor, drainFor, sub time.Duration
	)
	ints := func(xs []int) string {
		s := make([]string, len(xs))
		for i, x := range xs {
			s[i] = strconv.Itoa(x)
		}
		return strings.Join(s, ",")
	}
	cmd := &cobra.Command{
		Use:   "scale --out DIR",
		Short: "The daemon at grid scale on simulated hosts: placements per second and submit-to-running latency",
		Long: `Measure the daemon as Kubernetes' scheduler_perf measures its scheduler: for each
row, a real metasched serve (this binary) on a generated grid of simulated hosts
(clusters of 20 to 50, hypervisor: sim, no libvirt), two pools, policy none, the
emulated executor with runs of about 0 s, and jobs of 1 to 8 tasks streamed
through the API by concurrent clients.

The daemon's store is its bbolt file, or with --store etcd an etcd (the etcd
binary: $ETCD, else etcd on the PATH, Debian's etcd-server) that each row
starts with its data in the row's directory, on a port free at the time. The
clusters are the daemon's in-process sites, or with --agents N the sites of N
metasched agent processes (this binary; each serves a share of consecutive
clusters, at most one agent a cluster), which the daemon reaches over TLS
with its client certificate (the row makes a CA and the certificates).

  placements/s  every host drained, the backlog submitted, every host undrained,
                and the jobs reaching running counted in one-second samples
                until the backlog is gone (mean, p50, p99 of the full samples)
  latency       submit to running of a steady stream once the backlog is gone
                (p50, p99, by the daemon's own transitions)

Every sample also has the daemon's CPU and memory, the dispatch round's time,
the store's write transactions and size; GET /v1/jobs and the dashboard's state
are timed with the backlog queued, and the CPU and memory of the row's other
processes (etcd, the agents) are read from /proc. Writes scale.csv (a line per
row, with its store and agents), scale-samples.csv (every sample), scale.svg and
scale.png to --out (with --cpu-profile, each row's daemon's CPU profile too),
and prints the table. Every process a row starts is stopped by its PID when
the row ends, also on an error or an interrupt.`,
		Example: `  metasched experiment scale --out results
  metasched experiment scale --out results --hosts 1000 --backlog 20000 --rate 500
  metasched experiment scale --out results --hosts 1000 --backlog 20000 --rate 500 --store etcd --agents 10`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: required: the directory for scale.csv, scale-samples.csv, .svg and .png")
			}
			hs, err := positiveInts("--hosts", hosts, 1, 100000)
			if err != nil {
				return err
			}
			bs, err := positiveInts("--backlog", backlogs, 1, 10000000)
			if err != nil {
				return err
			}
			rs, err := positiveInts("--rate", rates, 1, 100000)
			if err != nil {
				return err
			}
			if len(bs) != len(hs) || len(rs) != len(hs) {
				return usagef("--hosts, --backlog and --rate: give as many of each (%d, %d and %d)", len(hs), len(bs), len(rs))
			}
			if clients < 1 || clients > 1024 {
				return usagef("--clients: must be within 1 and 1024, not %d", clients)
			}
			if !slices.Contains(lab.ScaleStores, store) {
				return usagef("--store: must be %s, not %q", strings.Join(lab.ScaleStores, " or "), store)
			}
			if agents < 0 || agents > 100000 {
				return usagef("--agents: must be within 0 and 100000, not %d", agents)
			}
			for _, h := range hs {
				if _, clusters := lab.ScaleGrid(h, seed); agents > clusters {
					return usagef("--agents: %d agents for the %d clusters of --hosts %d: at most one a cluster", agents, clusters, h)
				}
			}
			for _, d := range []struct {
				flag string
				v    time.Duration
			}{{"--stream-for", streamFor}, {"--drain-for", drainFor}, {"--submit-for", sub}} {
				if d.v < time.Second || d.v > 24*time.Hour {
					return usagef("%s: must be within 1s and 24h, not %v", d.flag, d.v)
				}
			}
			if store == "etcd" {
				if _, err := etcdtest.Binary(); err != nil {
					return fmt.Errorf("--store etcd: %w", err)
				}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return usagef("--out: %w", err)
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("this program's own path: %w", err)
			}
			work := dir
			if work == "" {
				if work, err = os.MkdirTemp("", "metasched-scale-"); err != nil {
					return err
				}
				if !keep {
					defer os.RemoveAll(work)
				}
			}
			profiles := ""
			if profile {
				profiles = out
			}
			log, err := newLogger(e.stderr, "console", "info")
			if err != nil {
				return err
			}
			rows := make([]lab.ScaleRow, len(hs))
			for i := range hs {
				rows[i] = lab.ScaleRow{Hosts: hs[i], Backlog: bs[i], Rate: float64(rs[i])}
			}
			res, err := lab.RunScale(cmd.Context(), lab.ScaleOptions{Binary: exe, Dir: work, Rows: rows, Seed: seed,
				Clients: clients, DrainFor: drainFor, StreamFor: streamFor, SubmitFor: sub, Log: log, Profiles: profiles,
				Store: store, Agents: agents})
			if len(res) > 0 {
				files, werr := writeFigure(out, "scale",
					func(w io.Writer) error { return lab.WriteScaleCSV(w, res) },
					func(w io.Writer, format string) error { return lab.WriteScalePlot(w, res, format) })
				if werr != nil {
					return werr
				}
				samples, werr := writeFigure(out, "scale-samples",
					func(w io.Writer) error { return lab.WriteScaleSamples(w, res) },
					func(w io.Writer, format string) error { return lab.WriteScaleQueuePlot(w, res, format) })
				if werr != nil {
					return werr
				}
				printScale(e.stdout, res)
				fmt.Fprintf(e.stdout, "\nWrote %s\n", strings.Join(append(files, samples...), ", "))
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "directory for scale.csv, .svg and .png (placements/s against hosts), scale-samples.csv, .svg and .png (memory against queued jobs), required")
	fl.StringVar(&dir, "dir", "", "the rows' working directory: configurations, logs, stores (default: a temporary directory, removed at the end unless --keep)")
	fl.BoolVar(&keep, "keep", false, "keep the working directory at the end")
	fl.BoolVar(&profile, "cpu-profile", false, "write each row's daemon's CPU profile to --out as cpu-HOSTS.pprof (go tool pprof reads it)")
	fl.StringVar(&hosts, "hosts", ints(scaleHosts), "comma-separated hosts of each row")
	fl.StringVar(&backlogs, "backlog", ints(scaleBacklog), "comma-separated backlog (jobs) of each row")
	fl.StringVar(&rates, "rate", ints(scaleRate), "comma-separated steady stream (submissions per second) of each row")
	fl.IntVar(&clients, "clients", 16, "clients submitting at once")
	fl.StringVar(&store, "store", "bbolt", "the daemon's store: bbolt (its file) or etcd (an etcd each row starts)")
	fl.IntVar(&agents, "agents", 0, "serve the clusters from this many metasched agent processes over TLS (0: the daemon's in-process sites)")
	fl.Uint64Var(&seed, "seed", 1, "seed of the grid and the jobs")
	fl.DurationVar(&streamFor, "stream-for", 30*time.Second, "the steady stream's length")
	fl.DurationVar(&drainFor, "drain-for", 10*time.Minute, "the most the backlog's drain is sampled")
	fl.DurationVar(&sub, "submit-for", 10*time.Minute, "the most the backlog's submission takes (the row goes on with what was submitted)")
	return cmd
}

// positiveInts reads a comma-separated list of whole numbers within lo
// and hi.
func positiveInts(flag, s string, lo, hi int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, usagef("%s: %q is not a whole number within %d and %d", flag, strings.TrimSpace(f), lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

// printScale prints the scale table.
func printScale(w io.Writer, rs []lab.ScaleResult) {
	var table [][]string
	for _, r := range rs {
		drained := fmt.Sprintf("%.0f s", r.DrainS)
		if !r.Drained {
			drained = fmt.Sprintf("not in %.0f s (%d cancelled)", r.DrainS, r.Cancelled)
		}
		round := fmt.Sprintf("%.1f ms (%d)", r.RoundMeanMs, r.RoundsEnded)
		if r.RoundsEnded == 0 {
			round = "none ended"
		}
		agents, others := "in-process", "-"
		if r.Agents > 0 {
			agents = strconv.Itoa(r.Agents)
		}
		if r.Agents > 0 || r.Store == "etcd" {
			others = fmt.Sprintf("%.2f / %.0f MiB", r.OthersCPUMean, r.OthersRSSMaxMiB)
		}
		table = append(table, []string{fmt.Sprintf("%d (%d)", r.Row.Hosts, r.Clusters), r.Store, agents, fmt.Sprintf("%d at %.0f/s", r.Submitted, r.SubmitPerS),
			fmt.Sprintf("%.0f / %.0f / %.0f", r.Placements.Mean, r.Placements.P50, r.Placements.P99), drained,
			fmt.Sprintf("%.0f/s", r.StreamPerS), fmt.Sprintf("%.2f / %.2f s", r.Latency.P50, r.Latency.P99),
			fmt.Sprintf("%.0f MiB", r.RSSMaxMiB), fmt.Sprintf("%.2f", r.CPUMean), round, fmt.Sprintf("%.0f%%", r.ReusedPct),
			fmt.Sprintf("%.0f/s", r.CommitsPerS), fmt.Sprintf("%.0f MiB", r.StoreMiB), fmt.Sprintf("%.0f / %.0f ms", r.JobsListMs.P99, r.DashboardMs.P99), others})
	}
	writeColumns(w, []string{"HOSTS (CLUSTERS)", "STORE", "AGENTS", "BACKLOG", "PLACEMENTS/S MEAN/P50/P99", "DRAINED", "STREAM", "LATENCY P50/P99",
		"RSS MAX", "CPU", "ROUND (ENDED)", "REUSED", "COMMITS", "STORE SIZE", "JOBS/DASHBOARD P99", "OTHERS CPU/RSS"}, table)
}
