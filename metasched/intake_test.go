package metasched_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
)

// TestNeverRunsFollowsFigures: a job that no plan on the whole grid could
// run is refused at submission, and so is its repeat (the answer is kept
// per shape); once the planner's figures change so that it could run (a
// measured perf of its pool's image), the same job is accepted: the kept
// answer does not outlive the figures it was made on.
func TestNeverRunsFollowsFigures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{}, nil)
		ctx := context.Background()
		job := "name: huge\ntype: render\ntasks: 10000000\ntask_ops: 1.0e18\ntask_bytes: 0\n"
		for range 2 {
			_, err := td.d.Submit(ctx, []byte(job))
			var re *api.RequestError
			if !errors.As(err, &re) || re.Status != 400 || !strings.Contains(re.Error(), "can never run on this grid") {
				t.Fatalf("submit: %v, want a 400 saying the job can never run", err)
			}
		}
		p := td.d.Planner()
		p.SetPoolImages(map[string]string{"render": "fast"})
		for _, c := range []string{"latam-a", "latam-b", "spain"} {
			if err := p.ObservePerf(c, "fast", 1e18, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		j, err := td.d.Submit(ctx, []byte(job))
		if err != nil {
			t.Fatalf("submit with the measured perf: %v", err)
		}
		if j.State != "queued" {
			t.Errorf("job state %s, want queued", j.State)
		}
	})
}
