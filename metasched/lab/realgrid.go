package lab

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/metasched/metasched/internal/plotx"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/selection"
)

// The real test of Bertogna et al. (section 4) scaled to one machine of two
// cores: two slow, poorly connected "South American" sites and a faster
// "Spanish" one. A site's speed is the CPU quota of its VMs (every VM of
// every site shares the same two cores: each host takes one VM of one
// vCPU, as its grid entry of one core says, so the quotas of all the VMs
// add up to 1.25 cores at most, whatever jobs run side by side, and the
// VMs never ask for more than the machine has), its connection the rate its uplink is shaped to (TCG
// networking is far slower than a gigabit LAN, so the WAN is a few
// Mbit/s, as the paper's job was bound by its WAN).
var (
	realGridSites = []Site{
		{Name: "latam-a", Hosts: 2, UplinkMbit: 2, CPUQuota: 0.125, Perf: 3e7, LANMbps: 50, Cores: 1, MemoryMiB: 1024, Sized: true},
		{Name: "latam-b", Hosts: 2, UplinkMbit: 2, CPUQuota: 0.125, Perf: 3e7, LANMbps: 50, Cores: 1, MemoryMiB: 1024, Sized: true},
		{Name: "spain", Hosts: 3, UplinkMbit: 8, CPUQuota: 0.25, Perf: 6e7, LANMbps: 100, Cores: 1, MemoryMiB: 1024, Sized: true},
	}
)

// RealGridPool is the pool (job type) of the real grid's jobs.
const RealGridPool = "farm"

// RealGridSpec is the lab of the real test, its VMs booting the image in
// the directory image. The grid file's perf and LAN are estimates; the
// daemon calibrates them (and the links) in VMs before the first job.
func RealGridSpec(image string) Spec {
	return Spec{
		Sites:  slices.Clone(realGridSites),
		Pools:  []Pool{{Name: RealGridPool, VCPUs: 1, MemoryMiB: 128, Image: "guest"}},
		Images: map[string]string{"guest": image},
		Serve:  "calibration: {bench_seconds: 20, probe_bytes: 1048576}\n",
		// The jobs' VMs are polled as the calibration's are, once a
		// second: a faster poll would slow the VMs it measures.
		ExecutorPoll: time.Second,
	}
}

// Run is one job of an experiment: how it is placed, and, for a job of
// its own size, its tasks and a task's compute seconds on a VM of the slow
// sites (0: the experiment's).
type Run struct {
	Name      string
	Placement selection.Placement
	Master    string
	Tasks     int
	Compute   float64
}

// RealGridRuns are the real test's jobs: GramVM with the master chosen
// freely and forced on latam-a (the paper's comparison), the
// single-cluster baselines, and two small GramVM jobs, of 1 and 4 tasks
// of 8 s on a latam VM, which a plan in whole tasks gives only the
// machines they can use.
var RealGridRuns = []Run{
	{Name: "gramvm", Placement: selection.PlaceGramVM},
	{Name: "gramvm-master-latam-a", Placement: selection.PlaceGramVM, Master: "latam-a"},
	{Name: "met", Placement: selection.PlaceMET},
	{Name: "mct", Placement: selection.PlaceMCT},
	{Name: "olb", Placement: selection.PlaceOLB},
	{Name: "gramvm-1-task", Placement: selection.PlaceGramVM, Tasks: 1, Compute: 8},
	{Name: "gramvm-4-tasks", Placement: selection.PlaceGramVM, Tasks: 4, Compute: 8},
}

// For returns the job of run r: j, or a job of r's own size when it has
// one, whose task_ops are slowPerf × its compute seconds.
func (j RealGridJob) For(r Run, slowPerf float64) RealGridJob {
	if r.Tasks > 0 {
		j.Tasks = r.Tasks
	}
	if r.Compute > 0 {
		j.TaskOps = math.Round(slowPerf * r.Compute)
	}
	return j
}

// RealGridJob is the task-farm job of the real test: tasks of computeSeconds
// on a VM of the slow sites (ops from their calibrated speed) and 128 KiB
// each, which the 2 Mbit/s uplinks carry in about half a second.
type RealGridJob struct {
	Tasks     int
	TaskOps   float64
	TaskBytes float64
}

// File is the job file of a run; a run of no placement leaves the
// daemon's default (gramvm), of no master the plan's choice.
func (j RealGridJob) File(r Run) string {
	var extra strings.Builder
	if r.Placement != "" {
		fmt.Fprintf(&extra, "placement: %s\n", r.Placement)
	}
	if r.Master != "" {
		fmt.Fprintf(&extra, "master: %s\n", r.Master)
	}
	return fmt.Sprintf(`name: realgrid-%s
type: %s
tasks: %d
task_ops: %g
task_bytes: %g
vm: {vcpus: 1, memory_mib: 128}
walltime: 30m
command: [taskfarm, run]
elastic: true
%s`, r.Name, RealGridPool, j.Tasks, j.TaskOps, j.TaskBytes, extra.String())
}

// Row is one job of an experiment, as it ran.
type Row struct {
	Run        string
	Placement  string
	Master     string // the master's cluster
	Job        string // the job's ID
	PredictedS float64
	MeasuredS  float64
	Ratio      float64
	// StartEndS is the part of PredictedS for the job's start and end
	// (api.RunTimes).
	StartEndS float64
	// ProgramS is the task farm's own run time (its summary's), and
	// ProgramRatio ProgramS over the plan's run time t* (PredictedS less
	// StartEndS).
	ProgramS, ProgramRatio float64
	Clusters               []api.ClusterTasks
	// MasterWhy is the plan's reason for the master's cluster's part:
	// why its workers take the tasks they take, none included.
	MasterWhy string
}

// TasksLine says where a job's tasks ran, cluster by cluster, and, when
// its master's cluster ran none, why the plan gave it none: a master
// whose cluster works for nobody but it surprises a reader otherwise.
func (r Row) TasksLine() string {
	var parts []string
	masterRan := false
	for _, c := range r.Clusters {
		n := fmt.Sprintf("%.0f planned", c.TasksPredicted)
		if c.TasksDone != nil {
			n = fmt.Sprintf("%d done", *c.TasksDone)
		}
		if c.Name == r.Master {
			masterRan = c.TasksPredicted > 0 || c.TasksDone != nil && *c.TasksDone > 0
			parts = append(parts, fmt.Sprintf("%s (master) %s", c.Name, n))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %s", c.Name, n))
	}
	line := "tasks: " + strings.Join(parts, ", ")
	if !masterRan && r.Master != "" {
		why := r.MasterWhy
		if why == "" {
			why = "its cluster has no free machine beside the master's"
		}
		line += fmt.Sprintf("; the master's cluster %s runs no task: %s", r.Master, why)
	}
	return line
}

// WaitCalibrated waits until every figure of the daemon's calibration is
// measured, and returns it; a failed figure is an error.
func (l *Lab) WaitCalibrated(ctx context.Context, logf func(string, ...any)) (api.Calibration, error) {
	start := time.Now()
	last, lastAt := "", time.Time{}
	for {
		c, err := l.Client.Calibration(ctx)
		if err == nil {
			var pending, failed []string
			for _, f := range c.Figures {
				switch f.State {
				case api.CalibrationFailed:
					failed = append(failed, fmt.Sprintf("%s: %s", f.Key, f.Error))
				case api.CalibrationMeasured:
				default:
					pending = append(pending, f.Key)
				}
			}
			if len(failed) > 0 {
				return c, fmt.Errorf("lab: calibration failed: %s", strings.Join(failed, "; "))
			}
			if len(pending) == 0 && len(c.Figures) > 0 {
				return c, nil
			}
			if state := CalibrationState(c); logf != nil && (state != last || time.Since(lastAt) >= progressEvery) {
				// The daemon's clock and this one are the machine's.
				logf("%s", CalibrationProgress(c, nil, start))
				last, lastAt = state, time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return api.Calibration{}, fmt.Errorf("lab: calibration: %w (last: %v)", ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

// RunJob submits a job file, waits for its end and returns it; a job that
// is not done is an error carrying its reason.
func (l *Lab) RunJob(ctx context.Context, file string) (api.Job, error) {
	j, err := l.Client.Submit(ctx, []byte(file))
	if err != nil {
		return api.Job{}, fmt.Errorf("lab: submit: %w", err)
	}
	for !j.State.Terminal() {
		select {
		case <-ctx.Done():
			return j, fmt.Errorf("lab: job %s: %w (%s: %s)", j.ID, ctx.Err(), j.State, j.Reason)
		case <-time.After(time.Second):
		}
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := l.Client.Job(c, j.ID)
		cancel()
		if err == nil {
			j = n
		}
	}
	if j.State != api.Done {
		return j, fmt.Errorf("lab: job %s %s: %s", j.ID, j.State, j.Reason)
	}
	return j, nil
}

// RowOf is the row of a job that ran.
func RowOf(r Run, j api.Job) Row {
	row := Row{Run: r.Name, Placement: string(r.Placement), Job: j.ID, PredictedS: j.PredictedS, MeasuredS: j.MeasuredS,
		Ratio: j.Ratio, Clusters: j.Clusters}
	if j.Placement != nil {
		row.Master = j.Placement.Plan.Master
		for _, c := range j.Placement.Plan.Clusters {
			if c.Master {
				row.MasterWhy = c.Why
			}
		}
	}
	row.StartEndS, row.ProgramS, row.ProgramRatio = j.StartEndS, j.ProgramS, j.ProgramRatio()
	return row
}

// Clusters are the names of the clusters of rows, in first-seen order.
func clusterNames(rows []Row) []string {
	var out []string
	for _, r := range rows {
		for _, c := range r.Clusters {
			if !slices.Contains(out, c.Name) {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

// WriteCSV writes one row per job: the run, its placement and master,
// predicted_s and the part of it to start and end, measured_s, their
// ratio, the program's own run time and its ratio to the plan's t*, and
// per cluster the tasks predicted and done.
func WriteCSV(w io.Writer, rows []Row) error {
	names := clusterNames(rows)
	cw := csv.NewWriter(w)
	head := []string{"run", "placement", "master", "job", "predicted_s", "start_end_s", "measured_s", "ratio", "program_s", "program_ratio"}
	for _, n := range names {
		head = append(head, "tasks_predicted_"+n, "tasks_done_"+n)
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }
	for _, r := range rows {
		rec := []string{r.Run, r.Placement, r.Master, r.Job, f(r.PredictedS), f(r.StartEndS), f(r.MeasuredS), f(r.Ratio), f(r.ProgramS), f(r.ProgramRatio)}
		for _, n := range names {
			pred, done := "0", "0"
			if i := slices.IndexFunc(r.Clusters, func(c api.ClusterTasks) bool { return c.Name == n }); i >= 0 {
				pred = strconv.FormatFloat(r.Clusters[i].TasksPredicted, 'f', 1, 64)
				if d := r.Clusters[i].TasksDone; d != nil {
					done = strconv.Itoa(*d)
				} else {
					done = ""
				}
			}
			rec = append(rec, pred, done)
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WritePlot draws, per job, its predicted and measured run times side by
// side, as "svg" or "png".
func WritePlot(w io.Writer, rows []Row, format string) error {
	if len(rows) == 0 {
		return errors.New("lab: no rows to plot")
	}
	p := plotx.New("Real grid (Bertogna et al. §4 on QEMU VMs): predicted and measured run time", "", "run time (s)")
	pred, meas, prog := make(plotter.Values, len(rows)), make(plotter.Values, len(rows)), make(plotter.Values, len(rows))
	names := make([]string, len(rows))
	for i, r := range rows {
		pred[i], meas[i], prog[i] = r.PredictedS, r.MeasuredS, r.ProgramS
		// A long run name goes on two lines, so that seven jobs' labels
		// do not run into each other.
		names[i] = r.Run
		if len(r.Run) > 10 {
			names[i] = strings.Replace(r.Run, "-", "\n", 1)
		}
		if r.Master != "" {
			names[i] += "\n(" + r.Master + ")"
		}
	}
	width := vg.Points(14)
	bp, err := plotter.NewBarChart(pred, width)
	if err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	bm, err := plotter.NewBarChart(meas, width)
	if err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	bg, err := plotter.NewBarChart(prog, width)
	if err != nil {
		return fmt.Errorf("lab: plot: %w", err)
	}
	bp.Offset, bg.Offset, bm.Offset = -width, 0, width
	bp.Color = color.RGBA{R: 0x44, G: 0x77, B: 0xaa, A: 0xff}
	bm.Color = color.RGBA{R: 0xcc, G: 0x66, B: 0x44, A: 0xff}
	bg.Color = color.RGBA{R: 0xdd, G: 0xaa, B: 0x33, A: 0xff}
	bp.LineStyle.Width, bg.LineStyle.Width, bm.LineStyle.Width = 0, 0, 0
	grid := plotter.NewGrid()
	grid.Vertical.Width = 0
	p.Add(grid, bp, bg, bm)
	p.Legend.Add("predicted (the plan's run time)", bp)
	p.Legend.Add("the task farm's own run", bg)
	p.Legend.Add("measured (running to done)", bm)
	p.NominalX(names...)
	top := 0.0
	for i := range rows {
		top = math.Max(top, math.Max(math.Max(pred[i], meas[i]), prog[i]))
	}
	plotx.LinearAxis(&p.Y, 0, top)
	notes := []string{"Per job, left to right: the plan's predicted run time (t*, whole tasks, with the job's start and end), " +
		"the task farm's own run time in its VMs, and the measured time from running to done; below each job, its master's cluster."}
	ratios := make([]string, len(rows))
	for i, r := range rows {
		ratios[i] = fmt.Sprintf("%s %.2f", r.Run, r.Ratio)
	}
	notes = append(notes, "Measured/predicted: "+strings.Join(ratios, ", ")+".")
	return plotx.Render(w, p, notes, format)
}
