package metasched_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/store"
)

// TestCommandExecutor runs jobs' commands through the daemon: the command
// sees its VMs in METASCHED_HOSTFILE, its output is the job's log, and its
// exit code decides done or failed.
// scriptSubmitter returns a function that submits a job of type sim
// running a shell script, and returns its ID.
func scriptSubmitter(t *testing.T, d *metasched.Daemon) func(name, script string) string {
	return func(name, script string) string {
		t.Helper()
		j, err := d.Submit(context.Background(), []byte("name: "+name+"\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/sh, -c, '"+script+"']\n"))
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
}

func TestCommandExecutor(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
		c.Executor = metasched.ExecutorConfig{Name: "command"}
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	d, ctx := td.d, context.Background()
	submit := scriptSubmitter(t, d)
	ok := submit("ok", "echo job $METASCHED_JOB_ID; cat $METASCHED_HOSTFILE")
	bad := submit("bad", "echo failing >&2; exit 3")
	final := func(id string) api.Job {
		var j api.Job
		waitFor(t, "job "+id+" finished", 30*time.Second, func() bool {
			j, _ = d.Job(ctx, id)
			return j.State.Terminal()
		})
		return j
	}
	j := final(ok)
	if j.State != store.Done || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("ok job: %s (%s), exit %v", j.State, j.Reason, j.ExitCode)
	}
	logs, err := d.Store().Logs(ctx, ok)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "job "+ok) || !strings.Contains(string(logs), "role=master") {
		t.Errorf("logs %q: want the job ID and the hostfile", logs)
	}
	for _, vm := range j.VMs {
		if !strings.Contains(string(logs), vm.Name+" slots=") {
			t.Errorf("hostfile in the logs does not list %s: %q", vm.Name, logs)
		}
	}
	j = final(bad)
	if j.State != store.Failed || j.ExitCode == nil || *j.ExitCode != 3 || !strings.Contains(j.Reason, "exit code 3") {
		t.Fatalf("bad job: %s (%s), exit %v", j.State, j.Reason, j.ExitCode)
	}
	if logs, _ := d.Store().Logs(ctx, bad); !strings.Contains(string(logs), "failing") {
		t.Errorf("stderr not kept: %q", logs)
	}
	waitFor(t, "no VM left", 10*time.Second, func() bool { return len(d.VMs()) == 0 })
}

// TestCommandSurvivesRestart stops the daemon (as Ctrl-C would) while a
// job's command runs: the command runs on under its supervisor and ends
// while no daemon runs. The daemon started again on the same data
// directory takes the exit the supervisor recorded: the job is done, its
// command ran once, its output is in its log once, and it never went back
// to the queue.
func TestCommandSurvivesRestart(t *testing.T) {
	dataDir := t.TempDir()
	ran := filepath.Join(t.TempDir(), "ran")
	edit := func(c *metasched.Config) {
		c.DataDir = dataDir
		c.Executor = metasched.ExecutorConfig{Name: "command"}
		c.Policy = metasched.PolicyConfig{Name: "none"}
	}
	td := daemontest.Start(t, nil, metasched.Options{}, edit)
	d, ctx := td.D, context.Background()
	j, err := d.Submit(ctx, []byte("name: survivor\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n"+
		"command: [/bin/sh, -c, 'echo started; sleep 3; echo $METASCHED_JOB_ID >> "+ran+"; echo ended; exit 0']\n"))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command started", 30*time.Second, func() bool {
		logs, _ := d.Store().Logs(ctx, j.ID)
		return strings.Contains(string(logs), "started")
	})
	td.Stop()
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ended before the daemon stopped: the test proves nothing")
	}
	waitFor(t, "the command ended with no daemon", 30*time.Second, func() bool {
		_, err := os.Stat(ran)
		return err == nil
	})

	td = daemontest.Start(t, nil, metasched.Options{}, edit)
	d = td.D
	var got api.Job
	waitFor(t, "the job finished", 30*time.Second, func() bool {
		got, _ = d.Job(ctx, j.ID)
		return got.State.Terminal()
	})
	if got.State != store.Done || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Fatalf("job %s (%s), exit %v; want done with exit code 0", got.State, got.Reason, got.ExitCode)
	}
	for _, tr := range got.Transitions {
		if tr.To == store.Queued && tr.From != "" {
			t.Errorf("the job went back to the queue: %s → %s (%s)", tr.From, tr.To, tr.Reason)
		}
	}
	if data, _ := os.ReadFile(ran); strings.Count(string(data), j.ID) != 1 {
		t.Errorf("the command ran %d times", strings.Count(string(data), j.ID))
	}
	logs, _ := d.Store().Logs(ctx, j.ID)
	if strings.Count(string(logs), "started\n") != 1 || strings.Count(string(logs), "ended\n") != 1 {
		t.Errorf("logs %q: want the command's output once", logs)
	}
	if !strings.Contains(td.Log.String(), "the command's exit is on record: it does not run again") &&
		!strings.Contains(td.Log.String(), "following it") {
		t.Errorf("the restarted daemon does not say it picked the command up:\n%s", td.Log.String())
	}
}

// TestCommandOutputCapped: a job whose command writes without pause (yes)
// under the daemon: its log holds the configured cap of output and the
// note, no more, and the job is cancelled like any other.
func TestCommandOutputCapped(t *testing.T) {
	td := daemontest.Start(t, nil, metasched.Options{}, func(c *metasched.Config) {
		c.Executor = metasched.ExecutorConfig{Name: "command", MaxOutputBytes: 4096, OutputBytesPerSecond: 64 << 10}
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	d, ctx := td.D, context.Background()
	j, err := d.Submit(ctx, []byte("name: yes\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [yes]\n"))
	if err != nil {
		t.Fatal(err)
	}
	const note = "\n[metasched: the job's output reached its cap of 4096 bytes; what it writes from here on is read and discarded, and the command goes on]\n"
	waitFor(t, "the output at its cap", time.Minute, func() bool {
		logs, _ := d.Store().Logs(ctx, j.ID)
		return strings.HasSuffix(string(logs), note)
	})
	got, err := d.Cancel(ctx, j.ID)
	if err != nil || got.State != store.Cancelled {
		t.Fatalf("cancel: %s, %v; want cancelled", got.State, err)
	}
	logs, _ := d.Store().Logs(ctx, j.ID)
	if len(logs) != 4096+len(note) || strings.Count(string(logs), "y\n") != 2048 {
		t.Errorf("the job's log: %d bytes, want the 4096 of the cap and the note", len(logs))
	}
}
