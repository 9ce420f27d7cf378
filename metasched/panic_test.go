package metasched_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/jobfile"
)

// panicky runs jobs emulated, but panics on a job named boom.
type panicky struct{ *executor.Emulated }

func (p panicky) Run(ctx context.Context, r executor.Run) (executor.Result, error) {
	if r.Job.Name == "boom" {
		panic("boom: the executor broke")
	}
	return p.Emulated.Run(ctx, r)
}

// TestJobPanic: a panic while a job runs fails that job with the reason,
// its VMs go, and the daemon goes on running other jobs.
func TestJobPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{Executor: panicky{executor.NewEmulated(zerolog.Nop())}}, func(c *metasched.Config) {
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Executor.TimeScale = 0.001
		})
		d, ctx := td.d, context.Background()
		var ids []string
		for _, name := range []string{"boom", "fine"} {
			j, err := d.Submit(ctx, jobfile.Decode([]byte("name: "+name+"\ntype: render\ntasks: 40\ntask_ops: 1e12\ntask_bytes: 1e5\n")))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, j.ID)
		}
		final := map[string]api.State{}
		waitFor(t, "both jobs ended", time.Minute, func() bool {
			for _, id := range ids {
				j, err := d.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				final[id] = j.State
				if !j.State.Terminal() {
					return false
				}
			}
			return true
		})
		boom, err := d.Job(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if boom.State != api.Failed || !strings.Contains(boom.Reason, "internal error: boom: the executor broke") {
			t.Errorf("boom: %s (%s), want failed with the panic as its reason", boom.State, boom.Reason)
		}
		if final[ids[1]] != api.Done {
			t.Errorf("fine: %s, want done", final[ids[1]])
		}
		waitFor(t, "no VM left", time.Minute, func() bool { return len(d.VMs()) == 0 })
		if !strings.Contains(td.log.String(), "internal error while running a job") {
			t.Error("the panic is not in the log")
		}
	})
}
