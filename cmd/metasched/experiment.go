package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lab"
)

func newExperimentCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "experiment",
		Short: "Run the papers' workload on a grid of QEMU VMs on this machine, or the daemon at grid scale",
		Long: `realgrid and demo-vms run the papers' workload for real: a grid of sites on this
machine (a bridge per site, each joined to a wan bridge by a link shaped to the
site's uplink, a root libvirtd per host, QEMU guests under TCG with a CPU quota
per vCPU), the real site agents and daemon (this binary), task-farm jobs that
run in booted VMs. They need root, libvirtd, QEMU and iproute2 (make demo-vms
installs them), and the task farm beside this binary (make build).

scale measures the daemon at grid scale on simulated hosts: no root, no
libvirt. Everything started is stopped by PID at the end, also on Ctrl-C.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newRealGridCmd(e), newDemoVMsCmd(e), newScaleCmd(e))
	return cmd
}

// labFlags are the flags of the commands that run a lab.
type labFlags struct {
	image, dir, taskfarm string
	keep                 bool
}

func (f *labFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.image, "image", "", "a built guest image's directory (default: the bundled image, built into the cache when missing)")
	fl.StringVar(&f.taskfarm, "taskfarm", "", "the static task farm binary for the image (default: taskfarm beside this program)")
	fl.StringVar(&f.dir, "dir", "", "the lab's working directory: configurations, logs, data (default: a temporary directory, removed at the end unless --keep)")
	fl.BoolVar(&f.keep, "keep", false, "keep the lab's working directory (its logs) at the end")
}

// startLab builds the image when needed and starts the lab of spec; the
// returned function stops it and removes its directory (unless kept).
func startLab(ctx context.Context, e *env, f labFlags, spec func(image string) lab.Spec) (*lab.Lab, func(), error) {
	if err := lab.Check(); err != nil {
		return nil, nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("this program's own path: %w", err)
	}
	logf := timestamped(e.stderr)
	img := f.image
	if img == "" {
		tf := f.taskfarm
		if tf == "" {
			tf = filepath.Join(filepath.Dir(exe), "taskfarm")
		}
		if _, err := image.ReadTaskFarm(tf); err != nil {
			return nil, nil, usagef("--taskfarm: %w", err)
		}
		logf("building the bundled image (cached after the first time)")
		res, err := image.Build(ctx, image.Options{TaskFarm: tf})
		if err != nil {
			return nil, nil, err
		}
		img = res.Dir
	}
	dir, made := f.dir, false
	if dir == "" {
		if dir, err = os.MkdirTemp("", "metasched-lab-"); err != nil {
			return nil, nil, err
		}
		made = true
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, usagef("--dir: %w", err)
	}
	logf("lab in %s", dir)
	l, err := lab.Start(ctx, spec(img), lab.Options{Binary: exe, Dir: dir, Logf: logf})
	if err != nil {
		if made && !f.keep {
			os.RemoveAll(dir)
		}
		return nil, nil, err
	}
	stop := func() {
		logf("stopping the lab (daemon, agents, libvirtds and their guests, by PID)")
		if err := l.Close(); err != nil {
			logf("stop: %v", err)
		}
		if made && !f.keep {
			os.RemoveAll(dir)
		} else {
			logf("the lab's files and logs are in %s", dir)
		}
	}
	return l, stop, nil
}

func newRealGridCmd(e *env) *cobra.Command {
	var (
		f       labFlags
		out     string
		tasks   int
		compute float64
		runs    string
	)
	cmd := &cobra.Command{
		Use:   "realgrid --out DIR",
		Short: "The real test of Bertogna et al. §4 on QEMU VMs: predicted against measured run times",
		Long: `Run the real test of Bertogna et al. (section 4), scaled to this machine: two slow,
poorly connected "South American" sites (latam-a and latam-b, 2 hosts each, VMs
at 1/8 of a core, 2 Mbit/s uplinks) and a faster "Spanish" one (spain, 3 hosts,
VMs at 1/4 of a core, an 8 Mbit/s uplink). The daemon first calibrates every
site (the task farm's kernel in a VM under its quota, its LAN, every link VM to
VM); then the same task-farm job runs, one at a time, placed by GramVM with the
master chosen freely and forced on latam-a, and by MET, MCT and OLB; then two
small GramVM jobs, of 1 and 4 tasks of 8 s on a latam VM, which a plan in whole
tasks gives only the machines they can use (runs gramvm-1-task and
gramvm-4-tasks). --runs picks some of these seven runs by name, run in the
order given; --tasks and --compute-seconds size the first five's job, not the
two small ones. Writes
realgrid.csv (one row per job: placement, master, predicted_s, measured_s,
ratio, tasks per cluster predicted and done), realgrid.svg and realgrid.png to
--out, and prints the table.`,
		Example: `  metasched experiment realgrid --out results
  metasched experiment realgrid --out results --runs gramvm,gramvm-master-latam-a`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: required: the directory for realgrid.csv, .svg and .png")
			}
			if tasks < 1 || tasks > 100000 {
				return usagef("--tasks: must be within 1 and 100000, not %d", tasks)
			}
			if !(compute > 0 && compute <= 60) {
				return usagef("--compute-seconds: must be within 0 and 60, not %g", compute)
			}
			selected, err := selectRuns(runs)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return usagef("--out: %w", err)
			}
			return realGrid(cmd.Context(), e, f, out, tasks, compute, selected)
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&out, "out", "", "directory for realgrid.csv, .svg and .png, required")
	fl.IntVar(&tasks, "tasks", 120, "the job's tasks (T)")
	fl.Float64Var(&compute, "compute-seconds", 1, "a task's compute time on a VM of the slow sites: task_ops is their calibrated speed times this")
	fl.StringVar(&runs, "runs", "", "comma-separated subset of the runs, run in that order (default: all): "+runNames())
	return cmd
}

func runNames() string {
	names := make([]string, len(lab.RealGridRuns))
	for i, r := range lab.RealGridRuns {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}

func selectRuns(s string) ([]lab.Run, error) {
	if s == "" {
		return lab.RealGridRuns, nil
	}
	var out []lab.Run
	for name := range strings.SplitSeq(s, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(lab.RealGridRuns, func(r lab.Run) bool { return r.Name == name })
		if i < 0 {
			return nil, usagef("--runs: %q is not a run: %s", name, runNames())
		}
		out = append(out, lab.RealGridRuns[i])
	}
	return out, nil
}

// slowPerf is the calibrated speed of latam-a's VMs, per vCPU.
func slowPerf(c api.Calibration) (float64, error) {
	for _, f := range c.Figures {
		if f.Kind == api.CalibrationPerf && f.Site == "latam-a" && f.Value > 0 {
			return f.Value, nil
		}
	}
	return 0, errors.New("the calibration has no speed for latam-a's VMs")
}

// timestamped is a logf writing a line to w after the time of day.
func timestamped(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		fmt.Fprintf(w, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
	}
}

// calibratedLab starts the real grid (startLab), waits until the daemon
// has calibrated it (30 minutes at most), prints the figures, and returns
// the calibrated speed of the slow sites' VMs per vCPU.
func calibratedLab(ctx context.Context, e *env, f labFlags) (*lab.Lab, func(), float64, error) {
	l, stop, err := startLab(ctx, e, f, lab.RealGridSpec)
	if err != nil {
		return nil, nil, 0, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	cal, err := l.WaitCalibrated(cctx, timestamped(e.stderr))
	cancel()
	if err == nil {
		printCalibration(e.stdout, cal)
		var perf float64
		if perf, err = slowPerf(cal); err == nil {
			return l, stop, perf, nil
		}
	}
	stop()
	return nil, nil, 0, err
}

func realGrid(ctx context.Context, e *env, f labFlags, out string, tasks int, compute float64, runs []lab.Run) error {
	l, stop, perf, err := calibratedLab(ctx, e, f)
	if err != nil {
		return err
	}
	defer stop()
	logf := timestamped(e.stderr)
	job := lab.RealGridJob{Tasks: tasks, TaskOps: math.Round(perf * compute), TaskBytes: 128 << 10}
	var rows []lab.Row
	for _, r := range runs {
		logf("job %s: submitted", r.Name)
		j, err := l.RunJob(ctx, job.For(r, perf).File(r))
		if err != nil {
			return err
		}
		row := lab.RowOf(r, j)
		logf("job %s (%s): master %s, predicted %.1f s, measured %.1f s, ratio %.2f", r.Name, row.Job, row.Master, row.PredictedS, row.MeasuredS, row.Ratio)
		rows = append(rows, row)
	}
	files, err := writeFigure(out, "realgrid",
		func(w io.Writer) error { return lab.WriteCSV(w, rows) },
		func(w io.Writer, format string) error { return lab.WritePlot(w, rows, format) })
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "\nThe job: %d tasks of %.3g operations (%.3g s on a latam VM) and %.0f bytes each", job.Tasks, job.TaskOps, compute, job.TaskBytes)
	for _, r := range runs {
		if r.Tasks > 0 {
			fmt.Fprintf(e.stdout, "; %s: %d of %.3g s", r.Name, r.Tasks, r.Compute)
		}
	}
	fmt.Fprint(e.stdout, "\n\n")
	printRows(e.stdout, rows)
	fmt.Fprintf(e.stdout, "\nWrote %s\n", strings.Join(files, ", "))
	return nil
}

// printRows prints the jobs' table and the summary of their ratios.
func printRows(w io.Writer, rows []lab.Row) {
	var table [][]string
	for _, r := range rows {
		var parts []string
		for _, c := range r.Clusters {
			done := "-"
			if c.TasksDone != nil {
				done = fmt.Sprint(*c.TasksDone)
			}
			parts = append(parts, fmt.Sprintf("%s %.0f/%s", c.Name, c.TasksPredicted, done))
		}
		table = append(table, []string{r.Run, r.Master, fmt.Sprintf("%.1f s", r.PredictedS), fmt.Sprintf("%.1f s", r.StartEndS),
			fmt.Sprintf("%.1f s", r.MeasuredS), fmt.Sprintf("%.2f", r.Ratio), fmt.Sprintf("%.1f s", r.ProgramS),
			fmt.Sprintf("%.2f", r.ProgramRatio), strings.Join(parts, ", ")})
	}
	writeColumns(w, []string{"RUN", "MASTER", "PREDICTED", "START/END", "MEASURED", "RATIO", "PROGRAM", "PLAN RATIO", "TASKS PREDICTED/DONE"}, table)
	if len(rows) == 0 {
		return
	}
	ratios, program := make([]float64, len(rows)), make([]float64, 0, len(rows))
	for i, r := range rows {
		ratios[i] = r.Ratio
		if r.ProgramRatio > 0 {
			program = append(program, r.ProgramRatio)
		}
	}
	med, worst := spread(ratios)
	fmt.Fprintf(w, "measured/predicted: median %.2f, worst %.2f (%d jobs)\n", med, worst, len(rows))
	if len(program) > 0 {
		med, worst := spread(program)
		fmt.Fprintf(w, "the program's own run time/the plan's run time: median %.2f, worst %.2f (%d jobs)\n", med, worst, len(program))
	}
	free := slices.IndexFunc(rows, func(r lab.Row) bool { return r.Run == "gramvm" })
	forced := slices.IndexFunc(rows, func(r lab.Row) bool { return r.Run == "gramvm-master-latam-a" })
	if free >= 0 && forced >= 0 {
		fmt.Fprintf(w, "master chosen (%s) against forced on latam-a: measured %.2f of the time, predicted %.2f\n",
			rows[free].Master, rows[free].MeasuredS/rows[forced].MeasuredS, rows[free].PredictedS/rows[forced].PredictedS)
	}
}

// spread is the median of ratios and the one farthest from 1 (by its
// logarithm: 0.5 is as far as 2).
func spread(ratios []float64) (median, worst float64) {
	sorted := slices.Sorted(slices.Values(ratios))
	n := len(sorted)
	median = sorted[n/2]
	if n%2 == 0 {
		median = (sorted[n/2-1] + sorted[n/2]) / 2
	}
	worst = slices.MaxFunc(sorted, func(a, b float64) int {
		return cmp.Compare(math.Abs(math.Log(a)), math.Abs(math.Log(b)))
	})
	return median, worst
}

func newDemoVMsCmd(e *env) *cobra.Command {
	var (
		f     labFlags
		jobs  int
		every time.Duration
	)
	cmd := &cobra.Command{
		Use:   "demo-vms",
		Short: "A stream of task-farm jobs on three sites of QEMU hosts: predicted against measured",
		Long: `Start the grid of experiment realgrid (three sites of QEMU hosts under private
libvirtds, joined by shaped links, the real agents and daemon), let the daemon
calibrate it, and submit a stream of task-farm jobs of different sizes (one
every --every), which the daemon places and runs in booted VMs side by side.
Prints each job's predicted and measured run time as it ends, and a summary;
stops everything by PID at the end (also on Ctrl-C). make demo-vms runs it.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jobs < 1 || jobs > 100 {
				return usagef("--jobs: must be within 1 and 100, not %d", jobs)
			}
			if every < 0 || every > time.Hour {
				return usagef("--every: must be within 0s and 1h, not %s", every)
			}
			return demoVMs(cmd.Context(), e, f, jobs, every)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&jobs, "jobs", 6, "how many jobs the stream has")
	cmd.Flags().DurationVar(&every, "every", 30*time.Second, "the time between two submissions")
	return cmd
}

// demoJob is the i-th job of the demo's stream: sizes that vary with i.
func demoJob(i int, perf float64) lab.RealGridJob {
	// Long enough that the few seconds of starting and ending a job
	// (its VMs' files and commands, through their guest agents) are not
	// most of it.
	tasks := []int{120, 240, 180}[i%3]
	compute := []float64{1, 0.5}[i%2]
	bytes := []float64{128 << 10, 32 << 10, 64 << 10, 256 << 10}[i%4]
	return lab.RealGridJob{Tasks: tasks, TaskOps: math.Round(perf * compute), TaskBytes: bytes}
}

func demoVMs(ctx context.Context, e *env, f labFlags, n int, every time.Duration) error {
	l, stop, perf, err := calibratedLab(ctx, e, f)
	if err != nil {
		return err
	}
	defer stop()
	logf := timestamped(e.stderr)
	type result struct {
		row lab.Row
		err error
	}
	results := make(chan result, n)
	for i := range n {
		if i > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(every):
			}
		}
		r := lab.Run{Name: fmt.Sprintf("demo-%d", i+1)}
		job := demoJob(i, perf)
		logf("job %s: %d tasks of %.3g operations and %.0f bytes", r.Name, job.Tasks, job.TaskOps, job.TaskBytes)
		go func() {
			j, err := l.RunJob(ctx, job.File(r))
			results <- result{lab.RowOf(r, j), err}
		}()
	}
	var rows []lab.Row
	var errs []error
	for range n {
		res := <-results
		if res.err != nil {
			logf("%v", res.err)
			errs = append(errs, res.err)
			continue
		}
		r := res.row
		fmt.Fprintf(e.stdout, "%s  job %s (%s): master %s, predicted %.1f s, measured %.1f s, ratio %.2f\n          %s\n",
			time.Now().Format("15:04:05"), r.Run, r.Job, r.Master, r.PredictedS, r.MeasuredS, r.Ratio, r.TasksLine())
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(a, b lab.Row) int { return strings.Compare(a.Job, b.Job) })
	fmt.Fprintln(e.stdout)
	printRows(e.stdout, rows)
	return errors.Join(errs...)
}
