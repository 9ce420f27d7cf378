package lab

import (
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/api"
)

func TestCalibrationProgress(t *testing.T) {
	start := time.Date(2026, 1, 1, 10, 0, 0, 0, time.UTC)
	fig := func(key, state string, measured time.Time, waiting string) api.CalibrationFigure {
		return api.CalibrationFigure{Key: key, State: state, MeasuredAt: measured, Waiting: waiting}
	}
	c := api.Calibration{
		At:        start.Add(4 * time.Minute),
		Measuring: "perf/latam-a/default",
		Figures: []api.CalibrationFigure{
			fig("perf/spain/default", api.CalibrationMeasured, start.Add(time.Minute), ""),
			fig("lan/spain", api.CalibrationMeasured, start.Add(2*time.Minute), ""),
			fig("start/spain", api.CalibrationMeasured, start.Add(-time.Hour), ""), // from before: no pace
			fig("perf/latam-a/default", api.CalibrationMeasuring, time.Time{}, ""),
			fig("lan/latam-a", api.CalibrationDue, time.Time{}, "two idle hosts (idle: serving its pool, with no VM)"),
			fig("link/spain/latam-a", api.CalibrationDue, time.Time{}, "an idle host at each site"),
			fig("perf/latam-b/default", api.CalibrationDue, time.Time{}, ""),
			fig("lan/latam-b", api.CalibrationDue, time.Time{}, ""),
			fig("start/latam-b", api.CalibrationFailed, time.Time{}, ""),
		},
	}
	for _, tc := range []struct {
		keys []string
		want string
	}{
		{nil, "calibration: 3 of 9 figures measured after 4m0s, 1 failed (about 10m0s left at this pace); measuring perf/latam-a/default; " +
			"4 waiting: lan/latam-a (two idle hosts), link/spain/latam-a, perf/latam-b/default and 1 more"},
		{[]string{"start/spain", "lan/latam-a"}, "calibration: 1 of 2 figures measured after 4m0s; 1 waiting: lan/latam-a (two idle hosts)"},
	} {
		if got := CalibrationProgress(c, tc.keys, start); got != tc.want {
			t.Errorf("keys %v:\n got %s\nwant %s", tc.keys, got, tc.want)
		}
	}
	// Nothing yet: no pace to tell, and a start after the view is no time.
	c.Figures = c.Figures[3:5]
	if got, want := CalibrationProgress(c, nil, start.Add(time.Hour)), "calibration: 0 of 2 figures measured after 0s; measuring perf/latam-a/default; 1 waiting: lan/latam-a (two idle hosts)"; got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

func TestTasksLine(t *testing.T) {
	done := func(n int) *int { return &n }
	r := Row{Master: "latam-b", MasterWhy: "the master takes the only free machine",
		Clusters: []api.ClusterTasks{{Name: "spain", TasksPredicted: 20, TasksDone: done(20)}}}
	if got, want := r.TasksLine(), "tasks: spain 20 done; the master's cluster latam-b runs no task: the master takes the only free machine"; got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
	r = Row{Master: "spain", Clusters: []api.ClusterTasks{{Name: "spain", TasksPredicted: 12}, {Name: "latam-a", TasksPredicted: 8}}}
	if got, want := r.TasksLine(), "tasks: spain (master) 12 planned, latam-a 8 planned"; got != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}
