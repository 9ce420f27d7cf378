package metasched_test

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/gramvm/taskfarm"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/guesttest"
	"github.com/metasched/metasched/metasched/store"
)

// checkPredicted checks what every job that ran shows: its predicted run
// time (want), its measured one, their ratio, and the tasks its plan gave
// each cluster with workers, the plan's whole tasks, which add up to T. A job whose
// run took no time on the bubble's clock (a guest's program that exits at
// once) has no measured time and no ratio.
func checkPredicted(t *testing.T, j api.Job, want float64, ran bool) {
	t.Helper()
	p := j.Placement.Plan
	if math.Abs(j.PredictedS-want) > 1e-9*want || ran != (j.MeasuredS > 0) || j.MeasuredS < 0 ||
		(ran && math.Abs(j.Ratio-j.MeasuredS/j.PredictedS) > 1e-12) || (!ran && j.Ratio != 0) {
		t.Errorf("job %s: predicted %g s (want %g), measured %g s, ratio %g", j.ID, j.PredictedS, want, j.MeasuredS, j.Ratio)
	}
	sum, n := 0.0, 0
	for _, c := range p.Clusters {
		if c.Machines == 0 {
			continue
		}
		if n >= len(j.Clusters) || j.Clusters[n].Name != c.Name || j.Clusters[n].TasksPredicted != float64(c.Tasks) || c.Tasks < c.Machines {
			t.Errorf("job %s: clusters %+v, want %s predicted %d tasks at %d, at least one a machine", j.ID, j.Clusters, c.Name, c.Tasks, n)
		}
		n++
	}
	for _, c := range j.Clusters {
		sum += c.TasksPredicted
	}
	if math.Abs(sum-float64(j.Spec.Tasks)) > 1e-9 {
		t.Errorf("job %s: the clusters' predicted tasks add up to %g, not %d", j.ID, sum, j.Spec.Tasks)
	}
}

// TestPredictedMeasuredEmulated: a job done by the emulated executor shows
// its plan's run time × time_scale as predicted, what it ran as measured,
// their ratio and the tasks its plan gave each cluster (none done: no
// summary); the metric of the ratio counts it in its pool.
func TestPredictedMeasuredEmulated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Executor.TimeScale = 0.01
		})
		d, ctx := td.d, context.Background()
		j := submitText(t, d, "name: emu\ntype: sim\ntasks: 300\ntask_ops: 2.0e11\ntask_bytes: 5.0e7\n")
		waitFor(t, "the job done", 5*time.Minute, func() bool { return stateOf(t, d, j.ID).State == api.Done })
		j, err := d.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		checkPredicted(t, j, j.Placement.Plan.Runtime*0.01, true)
		for _, c := range j.Clusters {
			if c.TasksDone != nil {
				t.Errorf("cluster %s: %d tasks done, with no summary", c.Name, *c.TasksDone)
			}
		}
		// The metrics follow the job's record: the histogram hears of the
		// job just after its state is done.
		f := families{}
		waitFor(t, "the job in the ratio's histogram", time.Minute, func() bool {
			mfs, err := d.Registry().Gather()
			if err != nil {
				t.Fatal(err)
			}
			clear(f)
			for _, mf := range mfs {
				f[mf.GetName()] = mf
			}
			return f.must(t, "metasched_job_runtime_ratio", "pool", "sim") >= 1
		})
		if n := f.must(t, "metasched_job_runtime_ratio", "pool", "sim"); n != 1 {
			t.Errorf("the ratio's histogram counts %g jobs of pool sim, want 1", n)
		}
		if n := f.must(t, "metasched_job_runtime_ratio", "pool", "render"); n != 0 {
			t.Errorf("the ratio's histogram counts %g jobs of pool render, want 0", n)
		}
		var sum float64
		for _, m := range f["metasched_job_runtime_ratio"].GetMetric() {
			sum += m.GetHistogram().GetSampleSum()
		}
		if math.Abs(sum-j.Ratio) > 1e-9 {
			t.Errorf("the ratio's histogram sums %g, the job's ratio is %g", sum, j.Ratio)
		}
	})
}

// farmSummary is a task-farm summary of 10 tasks: 6 done on latam-b, 4 on
// spain.
const farmSummary = `{"tasks":10,"done":10,"workers":[{"name":"w1","site":"latam-b","procs":1,"tasks":6},` +
	`{"name":"w2","site":"spain","procs":2,"tasks":4}],"sites":{"latam-b":{"workers":1,"lost":0,"tasks":6},` +
	`"spain":{"workers":1,"lost":0,"tasks":4}}}`

// TestPredictedMeasuredGuest: with the guest executor, a job's predicted
// run time is its plan's (not scaled), and the tasks done per cluster come
// from the task-farm summary its master wrote; a summary that does not add
// up is noted in the job's log and counts as none, the job done all the
// same.
func TestPredictedMeasuredGuest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startGuestDaemon(t)
		d, ctx := td.d, context.Background()
		job := func(name, summary string) string {
			in, err := json.Marshal(summary)
			if err != nil {
				t.Fatal(err)
			}
			return "name: " + name + "\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\n" +
				"command: [/bin/sh, -c, 'cp summary.json " + taskfarm.SummaryFile + "']\n" +
				"inputs: [{path: summary.json, content: " + string(in) + "}]\n"
		}
		good, bad := submitText(t, d, job("farm", farmSummary)), submitText(t, d, job("bad-farm", `{"tasks":1,"done":2}`))
		for _, id := range []string{good.ID, bad.ID} {
			waitFor(t, "job "+id+" ended", time.Minute, func() bool { return stateOf(t, d, id).State.Terminal() })
		}
		j := stateOf(t, d, good.ID)
		if j.State != api.Done {
			t.Fatalf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
		checkPredicted(t, j, j.Placement.Plan.Runtime, false)
		done := map[string]int{}
		for _, c := range j.Clusters {
			if c.TasksDone == nil {
				t.Errorf("cluster %s: no tasks done, with a summary", c.Name)
				continue
			}
			done[c.Name] = *c.TasksDone
		}
		for site, want := range map[string]int{"latam-b": 6, "spain": 4, "latam-a": 0} {
			if done[site] != want {
				t.Errorf("tasks done on %s: %d, want %d (clusters %+v)", site, done[site], want, j.Clusters)
			}
		}
		list, err := d.Outputs(ctx, j.ID)
		if err != nil || len(list.Files) != 1 || list.Files[0].Name != taskfarm.SummaryFile {
			t.Errorf("the outputs of the job: %+v, %v; want the summary", list, err)
		}

		j = stateOf(t, d, bad.ID)
		if j.State != api.Done {
			t.Fatalf("job %s: %s (%s)", j.ID, j.State, j.Reason)
		}
		for _, c := range j.Clusters {
			if c.TasksDone != nil {
				t.Errorf("cluster %s: %d tasks done from a summary that does not add up", c.Name, *c.TasksDone)
			}
		}
		logs, err := d.Store().Logs(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := "[metasched: " + taskfarm.SummaryFile + " of the master VM is not counted: invalid task-farm summary: done: 2 is not within 0 and tasks (1)]\n"; !strings.Contains(string(logs), want) {
			t.Errorf("the log has no %q:\n%s", want, logs)
		}
	})
}

// oldRecord is a job's record as the daemon wrote it before it kept the
// tasks per cluster: its plan, VMs, predicted run time, start and end.
const oldRecord = `{"placement":{"plan":{"algorithm":"hillclimb","job":"old","tasks":300,"feasible":true,"master":"spain",` +
	`"rate_tasks_per_s":0.105,"runtime_s":2857.142857142857,"machines":16,"cost_per_hour":0,"clusters":[` +
	`{"name":"spain","master":true,"machines":7,"free":8,"bandwidth_mbps":1000,"rate_tasks_per_s":0.07,"limit":"free","why":"w"},` +
	`{"name":"latam-a","machines":3,"free":3,"bandwidth_mbps":8,"rate_tasks_per_s":0.015,"limit":"free","why":"w"},` +
	`{"name":"latam-b","machines":5,"free":5,"bandwidth_mbps":8,"rate_tasks_per_s":0.02,"limit":"free","why":"w"}],` +
	`"excluded":[],"evaluations":20},"master":{"site":"spain","host":"spain-0"},"workers":[{"site":"spain","host":"spain-1"}]},` +
	`"vms":[{"name":"j-000000000001-a1-m","site":"spain","host":"spain-0","master":true}],"predicted_s":2.857142857142857,` +
	`"started":"2026-03-01T12:00:01Z","finished":"2026-03-01T12:00:04Z","attempts":1}`

// TestOldRecordReads: a job that ended under the code before predicted
// against measured reads with its predicted and measured run times, their
// ratio and the tasks per cluster its stored plan gives.
func TestOldRecordReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		st, err := store.Open(filepath.Join(dir, "metasched.db"), store.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		sj, err := st.SubmitJob(ctx, "sim", json.RawMessage(`{"name":"old","type":"sim","tasks":300,"task_ops":2e11,"task_bytes":5e7,"efficiency":0.8,"vm":{"vcpus":1,"memory_mib":1024}}`), "submitted")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []store.Change{{From: store.Queued, To: store.Planned, Reason: "planned"},
			{From: store.Planned, To: store.Provisioning, Reason: "creating 1 VMs"},
			{From: store.Provisioning, To: store.Running, Reason: "1 VMs up"},
			{From: store.Running, To: store.Done, Reason: "completed", Data: json.RawMessage(oldRecord)}} {
			if _, err := st.Commit(ctx, sj.ID, c); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
			c.DataDir = dir
			c.Policy = metasched.PolicyConfig{Name: "none"}
		})
		j, err := td.d.Job(ctx, sj.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.PredictedS != 2.857142857142857 || j.MeasuredS != 3 || math.Abs(j.Ratio-3/2.857142857142857) > 1e-12 {
			t.Errorf("predicted %g, measured %g, ratio %g; want 2.857, 3, 1.05", j.PredictedS, j.MeasuredS, j.Ratio)
		}
		want := []api.ClusterTasks{{Name: "spain", TasksPredicted: 200}, {Name: "latam-a", TasksPredicted: 300 * 0.015 / 0.105},
			{Name: "latam-b", TasksPredicted: 300 * 0.02 / 0.105}}
		if len(j.Clusters) != len(want) {
			t.Fatalf("clusters %+v, want %+v", j.Clusters, want)
		}
		for i, c := range j.Clusters {
			if c.Name != want[i].Name || math.Abs(c.TasksPredicted-want[i].TasksPredicted) > 1e-9 || c.TasksDone != nil {
				t.Errorf("cluster %d: %+v, want %+v", i, c, want[i])
			}
		}
	})
}

// TestStartEndLearned: a job's plan adds to its T/R the start and end that
// the pool's last jobs took beyond their programs' own run time (measured
// less the summary's wall time); the first job of a pool has none to add.
func TestStartEndLearned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sites := map[string]*guesttest.Site{}
		nets := 0
		td := startDaemon(t, metasched.Options{WrapAgent: func(name string, a metasched.SiteAgent) metasched.SiteAgent {
			nets++
			s := &guesttest.Site{SiteAgent: a, Net: nets}
			sites[name] = s
			return s
		}}, func(c *metasched.Config) {
			c.Executor = metasched.ExecutorConfig{Name: "guest", Poll: 100 * time.Millisecond}
			c.Policy = metasched.PolicyConfig{Name: "none"}
		})
		d, ctx := td.d, context.Background()
		summary, err := json.Marshal(strings.Replace(farmSummary, `{"tasks":10,`, `{"tasks":10,"wall_seconds":4,`, 1))
		if err != nil {
			t.Fatal(err)
		}
		job := func(name, command string) string {
			return "name: " + name + "\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\n" +
				"command: [/bin/sh, -c, '" + command + "']\n" +
				"inputs: [{path: summary.json, content: " + string(summary) + "}]\n"
		}
		first := submitText(t, d, job("first", "cp summary.json "+taskfarm.SummaryFile+"; hold"))
		waitFor(t, "the first job running", time.Minute, func() bool { return stateOf(t, d, first.ID).State == api.Running })
		time.Sleep(10 * time.Second)
		j := stateOf(t, d, first.ID)
		if !sites[j.VMs[0].Site].Exit(j.VMs[0].Name, 0) {
			t.Fatalf("the master VM %s runs no held command", j.VMs[0].Name)
		}
		waitFor(t, "the first job done", time.Minute, func() bool { return stateOf(t, d, first.ID).State == api.Done })
		j = stateOf(t, d, first.ID)
		if j.StartEndS != 0 || j.ProgramS != 4 || j.MeasuredS < 10 {
			t.Fatalf("the first job: start and end %g s, program %g s, measured %g s; want 0, 4 and at least 10", j.StartEndS, j.ProgramS, j.MeasuredS)
		}
		checkPredicted(t, j, j.Placement.Plan.Runtime, true)

		second := submitText(t, d, job("second", "cp summary.json "+taskfarm.SummaryFile))
		waitFor(t, "the second job done", time.Minute, func() bool { return stateOf(t, d, second.ID).State == api.Done })
		k, err := d.Job(ctx, second.ID)
		if err != nil {
			t.Fatal(err)
		}
		if want := j.MeasuredS - 4; math.Abs(k.StartEndS-want) > 1e-9 {
			t.Errorf("the second job's start and end: %g s, want the first's measured less its program's, %g s", k.StartEndS, want)
		}
		checkPredicted(t, k, k.Placement.Plan.Runtime+k.StartEndS, false)
		if !strings.Contains(k.Transitions[1].Reason, "to start and end, the median of the pool's last 1 jobs with their master at "+k.Placement.Master.Site) {
			t.Errorf("the plan's reason says nothing of the start and end: %q", k.Transitions[1].Reason)
		}
	})
}
