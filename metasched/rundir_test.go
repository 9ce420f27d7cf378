package metasched_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// A finished job's run directory (DATA_DIR/jobs/ID, its hostfile) is
// removed retention.job_dirs after the job ended, and a run directory
// whose job is not in the store at the next housekeeping; a live job's
// directory and anything that is not a job's stay. Before, none was ever
// removed.
func TestRunDirRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		var held string // a job kept queued: the store refuses its plan
		refuse := func(job string, from, to lifecycle.State) error {
			if job == held && to == lifecycle.Planned {
				return errors.New("test: refused")
			}
			return nil
		}
		td := startDaemon(t, metasched.Options{CommitFault: refuse}, func(c *metasched.Config) {
			c.DataDir = dir
			hostCommand(t, c)
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Retention = metasched.RetentionConfig{SwitchMaxCount: 10, JobDirs: 3 * time.Minute}
		})
		d, ctx := td.d, context.Background()
		runs := filepath.Join(dir, "jobs")
		exists := func(name string) bool {
			_, err := os.Stat(filepath.Join(runs, name))
			return err == nil
		}
		// The live job first, so that the store refuses its plan from the
		// start.
		held = "j-000000000001"
		live, err := d.Submit(ctx, jobfile.Decode([]byte("name: live\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n")))
		if err != nil || live.ID != held {
			t.Fatalf("the live job: %s %v", live.ID, err)
		}
		done, err := d.Submit(ctx, jobfile.Decode([]byte("name: done\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/true]\n")))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the job done", 30*time.Second, func() bool {
			j, err := d.Job(ctx, done.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == api.Done
		})
		if !exists(done.ID) {
			t.Fatalf("no run directory %s for the job that ran", done.ID)
		}
		for _, name := range []string{held, "j-000000009999", "notes"} {
			if err := os.MkdirAll(filepath.Join(runs, name), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		d.Housekeeping()
		if exists("j-000000009999") {
			t.Error("the run directory of a job the store does not have is still there")
		}
		if !exists(done.ID) {
			t.Error("the run directory of a job that just ended is gone")
		}
		time.Sleep(4 * time.Minute) // the housekeeping runs every minute
		if exists(done.ID) {
			t.Error("the run directory of a job that ended 4 minutes ago is still there (job_dirs: 3m)")
		}
		if !exists(held) || !exists("notes") {
			t.Errorf("the live job's directory (%v) or one that is no job's (%v) was removed", exists(held), exists("notes"))
		}
		j, err := d.Job(ctx, held)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != api.Queued {
			t.Errorf("the live job is %s, want queued", j.State)
		}
	})
}
