package metasched

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/metasched/metasched/gramvm/taskfarm"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// Predicted against measured (docs/internals/lifecycle.md, "Predicted against
// measured"): a job's record keeps its plan's predicted run time and each
// cluster's predicted share of the tasks from when it was planned, its
// measured run time (running to its end) and, when its master wrote a
// task-farm summary, the tasks each site did.

// tasksDone reads the task-farm summary the guest executor copied out of
// the master VM of the job's attempt: the tasks done per site, nil when
// there is none, and the program's own run time. A summary that does not read or does not add up is noted
// in the job's log and counts as none: the job's outcome is the master's
// exit, not its summary.
func (d *Daemon) tasksDone(ctx context.Context, id string, attempt int) (map[string]int, float64) {
	p := filepath.Join(executor.OutputsDir(filepath.Join(d.cfg.DataDir, "jobs", id), attempt), taskfarm.SummaryFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0
	}
	var s *taskfarm.Summary
	if err == nil {
		s, err = taskfarm.ParseSummary(data)
	}
	if err != nil {
		d.log.Warn().Err(err).Str("job", id).Msg("the task-farm summary is not counted")
		note := fmt.Sprintf("[metasched: %s of the master VM is not counted: %v]\n", taskfarm.SummaryFile, err)
		if err := d.st.AppendLog(ctx, id, []byte(note)); err != nil {
			d.log.Warn().Err(err).Str("job", id).Msg("cannot note it in the job's log")
		}
		return nil, 0
	}
	return s.TasksBySite(), s.WallSeconds
}

// runTimesOf is a job's predicted and measured run times, and their ratio
// when both are known.
func runTimesOf(rec lifecycle.Record) api.RunTimes {
	rt := api.RunTimes{PredictedS: rec.Predicted, StartEndS: rec.StartEnd, ProgramS: rec.ProgramSeconds}
	if !rec.Started.IsZero() && !rec.Finished.IsZero() {
		rt.MeasuredS = rec.Finished.Sub(rec.Started).Seconds()
	}
	if rt.PredictedS > 0 && rt.MeasuredS > 0 {
		rt.Ratio = rt.MeasuredS / rt.PredictedS
	}
	return rt
}

// clustersOf is a job's tasks per cluster, predicted and done. A record
// written before the daemon kept them has none: its plan gives the
// prediction.
func clustersOf(rec lifecycle.Record) []api.ClusterTasks {
	tasks := rec.Tasks
	if len(tasks) == 0 {
		tasks = lifecycle.PredictedTasks(rec.Placement)
	}
	if len(tasks) == 0 {
		return nil
	}
	out := make([]api.ClusterTasks, len(tasks))
	for i, c := range tasks {
		out[i] = api.ClusterTasks{Name: c.Name, TasksPredicted: c.Predicted, TasksDone: c.Done}
	}
	return out
}

// observeRatio adds a job that is done to the distribution of measured
// over predicted run times of its pool.
func (m *metrics) observeRatio(pool string, rec lifecycle.Record) {
	if rt := runTimesOf(rec); rt.Ratio > 0 {
		m.ratio.WithLabelValues(pool).Observe(rt.Ratio)
	}
}
