package metasched_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/jobfile"
)

// loopWaiters is how many of the daemon's loops wait on its clock.
const loopWaiters = 5

// TestInjectedClock: the daemon keeps time by the clock it is given. On a
// fake clock that the test steps, a job's transitions carry the clock's
// times, its emulated run lasts until the clock has moved past its
// predicted time however long it waits in real time, and its measured run
// time is the clock's.
func TestInjectedClock(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(at)
	td := daemontest.Start(t, nil, metasched.Options{Clock: clock}, func(c *metasched.Config) {
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 0.01
	})
	d, ctx := td.D, context.Background()
	// The daemon's loops wait on the clock: the dispatcher's, the cluster
	// manager's, the chart samples' and the housekeeping's tickers and the
	// probes' first timer.
	if err := clock.BlockUntilContext(ctx, loopWaiters); err != nil {
		t.Fatal(err)
	}
	early, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	if clock.BlockUntilContext(early, loopWaiters+1) == nil {
		t.Fatalf("more than %d waiters on the clock before any job", loopWaiters)
	}
	cancel()
	job, err := d.Submit(ctx, jobfile.Decode([]byte("name: a\ntype: render\ntasks: 40\ntask_ops: 1e12\ntask_bytes: 1e5\n")))
	if err != nil {
		t.Fatal(err)
	}
	daemontest.WaitFor(t, "the job running", time.Minute, func() bool {
		j, err := d.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == api.Running
	})
	// The emulated run waits on the clock too.
	if err := clock.BlockUntilContext(ctx, loopWaiters+1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // real time: the run does not end
	j, err := d.Job(ctx, job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != api.Running {
		t.Fatalf("the job is %s after 200 ms of real time and none of its clock, want running", j.State)
	}
	for _, tr := range j.Transitions {
		if !tr.At.Equal(at) {
			t.Errorf("transition to %s at %v, want the clock's %v", tr.To, tr.At, at)
		}
	}
	step := time.Duration(j.PredictedS*float64(time.Second)) + time.Second
	clock.Advance(step)
	daemontest.WaitFor(t, "the job done", time.Minute, func() bool {
		j, err = d.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == api.Done
	})
	if math.Abs(j.MeasuredS-step.Seconds()) > 1e-9 {
		t.Errorf("measured run time %gs, want the %gs the clock moved", j.MeasuredS, step.Seconds())
	}
	if last := j.Transitions[len(j.Transitions)-1].At; !last.Equal(at.Add(step)) {
		t.Errorf("done at %v, want %v", last, at.Add(step))
	}
}
