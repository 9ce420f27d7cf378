package metasched_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/jobfile"
)

// TestWalltimeEmulated: an emulated job that would run for hours fails when
// its walltime (the job file's, or the configuration's default) has passed
// since its start, with the reason, not requeued, its VMs destroyed; a job
// within its walltime is done; a job asking more than the configuration's
// max is refused at submission, the field named.
func TestWalltimeEmulated(t *testing.T) {
	skipShortLong(t)
	synctest.Test(t, func(t *testing.T) {
		td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
			c.Executor.TimeScale = 1 // the plans' run times: hours
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Walltime = metasched.WalltimeConfig{Default: 20 * time.Minute, Max: 2 * time.Hour}
		})
		d, ctx := td.d, context.Background()
		const long = "type: sim\ntasks: 400\ntask_ops: 1.0e13\ntask_bytes: 0\n"
		submit := func(file string) api.Job {
			j, err := d.Submit(ctx, jobfile.Decode([]byte(file)))
			if err != nil {
				t.Fatal(err)
			}
			return j
		}
		if _, err := d.Submit(ctx, jobfile.Decode([]byte("name: greedy\n"+long+"walltime: 3h\n"))); err == nil || !strings.Contains(err.Error(), "walltime") ||
			!strings.Contains(err.Error(), "at most 2h0m0s") {
			t.Fatalf("a job asking 3h with a max of 2h: %v; want refused naming walltime", err)
		}
		own := submit("name: own\n" + long + "walltime: 10m\n")
		dflt := submit("name: dflt\n" + long)
		short := submit("name: short\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\nwalltime: 1h\n")
		final := func(id string) api.Job {
			var j api.Job
			waitFor(t, "job "+id+" finished", 3*time.Hour, func() bool {
				var err error
				j, err = d.Job(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				return j.State.Terminal()
			})
			return j
		}
		for _, c := range []struct {
			id, reason string
		}{{own.ID, "walltime 10m0s exceeded"}, {dflt.ID, "walltime 20m0s exceeded"}} {
			j := final(c.id)
			if j.State != api.Failed || j.Reason != c.reason {
				t.Errorf("job %s: %s (%s), want failed with %q", c.id, j.State, j.Reason, c.reason)
			}
			if j.Attempts != 1 {
				t.Errorf("job %s: %d attempts, want 1 (not requeued)", c.id, j.Attempts)
			}
			if j.PredictedS < 2*3600 {
				t.Errorf("job %s: predicted %g s: the test needs jobs that would run for hours", c.id, j.PredictedS)
			}
		}
		if j := final(short.ID); j.State != api.Done {
			t.Errorf("job within its walltime: %s (%s), want done", j.State, j.Reason)
		}
		waitFor(t, "no VM left", time.Minute, func() bool { return len(d.VMs()) == 0 })
	})
}

// TestWalltimeCommand: a command that runs past its job's walltime is
// stopped (its process group gone, and the process it double-forked into
// a session of its own with setsid too: before the job's cgroup, that one
// ran on) and the job fails with the reason.
func TestWalltimeCommand(t *testing.T) {
	skipShortLong(t)
	td := daemontest.Start(t, nil, metasched.Options{}, func(c *metasched.Config) {
		hostCommand(t, c)
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	d, ctx := td.D, context.Background()
	j, err := d.Submit(ctx, jobfile.Decode([]byte("name: sleeper\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\nwalltime: 2s\n"+
		"command: [/bin/sh, -c, '( setsid sh -c \"echo escapee=\\$\\$; exec sleep 600\" & ); echo pid=$$; exec sleep 600']\n")))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job finished", 2*time.Minute, func() bool {
		j, err = d.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State.Terminal()
	})
	if j.State != api.Failed || j.Reason != "walltime 2s exceeded" || j.Attempts != 1 {
		t.Fatalf("job: %s (%s), %d attempts; want failed with the walltime, once", j.State, j.Reason, j.Attempts)
	}
	logs, err := d.Store().Logs(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	pid, escapee := 0, 0
	for line := range strings.Lines(string(logs)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "pid="); ok {
			pid, err = strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "escapee="); ok {
			escapee, err = strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if pid == 0 || escapee == 0 {
		t.Fatalf("no pid or escapee in the log %q", logs)
	}
	defer syscall.Kill(escapee, syscall.SIGKILL) // whatever happens
	waitFor(t, "the command's escapee gone", time.Minute, func() bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(escapee) + "/stat")
		return err != nil || strings.Contains(string(stat), ") Z ")
	})
	waitFor(t, "the command's process group gone", time.Minute, func() bool {
		return errors.Is(syscall.Kill(-pid, 0), syscall.ESRCH)
	})
	waitFor(t, "no VM left", time.Minute, func() bool { return len(d.VMs()) == 0 })
}

// TestWalltimeAcrossRestart: the walltime counts from the attempt's start,
// not from the daemon's: a job 6 minutes into a walltime of 10 when the
// daemon stops, restarted 2 minutes later, fails 2 minutes after the
// restart.
func TestWalltimeAcrossRestart(t *testing.T) {
	skipShortLong(t)
	synctest.Test(t, func(t *testing.T) {
		dataDir := t.TempDir()
		edit := func(c *metasched.Config) {
			c.DataDir = dataDir
			c.Executor.TimeScale = 1
			c.Policy = metasched.PolicyConfig{Name: "none"}
		}
		td := startDaemon(t, metasched.Options{}, edit)
		d, ctx := td.d, context.Background()
		j, err := d.Submit(ctx, jobfile.Decode([]byte("name: long\ntype: sim\ntasks: 400\ntask_ops: 1.0e13\ntask_bytes: 0\nwalltime: 10m\n")))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the job running", time.Minute, func() bool {
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State == api.Running
		})
		time.Sleep(6 * time.Minute)
		td.stop()
		time.Sleep(2 * time.Minute)

		td = startDaemon(t, metasched.Options{}, edit)
		d = td.d
		restarted := time.Now()
		waitFor(t, "the job finished", time.Hour, func() bool {
			j, err = d.Job(ctx, j.ID)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		if j.State != api.Failed || j.Reason != "walltime 10m0s exceeded" {
			t.Fatalf("job: %s (%s), want failed past its walltime", j.State, j.Reason)
		}
		if after := time.Since(restarted); after > 3*time.Minute {
			t.Errorf("the job failed %s after the restart, want about 2m: its walltime counted from the restart", after)
		}
	})
}
