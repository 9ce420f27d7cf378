package metasched_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/internal/daemontest"
	"github.com/metasched/metasched/metasched/jobfile"
	"github.com/metasched/metasched/metasched/store"
)

// jobUser is the user the tests' jobs run as under the host-command
// executor: nobody when the tests run as root (a job never runs as root),
// else the tests' own user.
func jobUser() string {
	if os.Geteuid() == 0 {
		return "nobody"
	}
	return ""
}

// hostCommand gives a test daemon the host-command executor, its jobs
// running as jobUser, and lets that user reach the daemon's run
// directories (DATA_DIR/jobs/ID, which the daemon makes readable) to read
// the hostfiles there: the directory above a t.TempDir is private.
func hostCommand(t *testing.T, c *metasched.Config) {
	t.Helper()
	c.Executor = metasched.ExecutorConfig{Name: metasched.HostCommand, RunAs: jobUser()}
	openDirs(t, c.DataDir)
}

// openDirs makes dir and the directory above it searchable by others.
func openDirs(t *testing.T, dir string) {
	t.Helper()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// jobWritableDir is a new temporary directory that the jobs' user owns:
// their commands may write there.
func jobWritableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	openDirs(t, dir)
	if os.Geteuid() == 0 {
		if err := os.Chown(dir, 65534, 65534); err != nil { // nobody's
			t.Fatal(err)
		}
	}
	return dir
}

// scriptSubmitter returns a function that submits a job of type sim
// running a shell script, and returns its ID.
func scriptSubmitter(t *testing.T, d *metasched.Daemon) func(name, script string) string {
	return func(name, script string) string {
		t.Helper()
		j, err := d.Submit(context.Background(), jobfile.Decode([]byte("name: "+name+"\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/sh, -c, '"+script+"']\n")))
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
}

// TestCommandExecutor runs jobs' commands through the daemon: the command
// sees its VMs in METASCHED_HOSTFILE, its output is the job's log, and its
// exit code decides done or failed. It runs as run_as (nobody when the
// tests run as root), not as the daemon's user.
func TestCommandExecutor(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
		hostCommand(t, c)
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	d, ctx := td.d, context.Background()
	submit := scriptSubmitter(t, d)
	ok := submit("ok", "echo job $METASCHED_JOB_ID; echo uid $(id -u); cat $METASCHED_HOSTFILE")
	bad := submit("bad", "echo failing >&2; exit 3")
	final := func(id string) api.Job {
		var j api.Job
		waitFor(t, "job "+id+" finished", 30*time.Second, func() bool {
			var err error
			j, err = d.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		return j
	}
	j := final(ok)
	if j.State != api.Done || j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("ok job: %s (%s), exit %v", j.State, j.Reason, j.ExitCode)
	}
	logs, err := d.Store().Logs(ctx, ok)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "job "+ok) || !strings.Contains(string(logs), "role=master") {
		t.Errorf("logs %q: want the job ID and the hostfile", logs)
	}
	uid := "uid " + strconv.Itoa(os.Getuid()) + "\n" // the daemon's own user
	if os.Geteuid() == 0 {
		uid = "uid 65534\n" // nobody
	}
	if !strings.Contains(string(logs), uid) {
		t.Errorf("logs %q: want the command to run as %q", logs, uid)
	}
	if !strings.Contains(td.log.String(), "the host-command executor runs every job's command on this machine") {
		t.Errorf("the daemon did not warn that the jobs run on its machine:\n%s", td.log.String())
	}
	for _, vm := range j.VMs {
		if !strings.Contains(string(logs), vm.Name+" slots=") {
			t.Errorf("hostfile in the logs does not list %s: %q", vm.Name, logs)
		}
	}
	j = final(bad)
	if j.State != api.Failed || j.ExitCode == nil || *j.ExitCode != 3 || !strings.Contains(j.Reason, "exit code 3") {
		t.Fatalf("bad job: %s (%s), exit %v", j.State, j.Reason, j.ExitCode)
	}
	logs, err = d.Store().Logs(ctx, bad)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "failing") {
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
	skipShortLong(t)
	dataDir := t.TempDir()
	ran := filepath.Join(jobWritableDir(t), "ran") // the command writes there
	edit := func(c *metasched.Config) {
		c.DataDir = dataDir
		hostCommand(t, c)
		c.Policy = metasched.PolicyConfig{Name: "none"}
	}
	td := daemontest.Start(t, nil, metasched.Options{}, edit)
	d, ctx := td.D, context.Background()
	j, err := d.Submit(ctx, jobfile.Decode([]byte("name: survivor\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n"+
		"command: [/bin/sh, -c, 'echo started; sleep 3; echo $METASCHED_JOB_ID >> "+ran+"; echo ended; exit 0']\n")))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the command started", 30*time.Second, func() bool {
		logs, err := d.Store().Logs(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
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
		got, err = d.Job(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got.State.Terminal()
	})
	if got.State != api.Done || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Fatalf("job %s (%s), exit %v; want done with exit code 0", got.State, got.Reason, got.ExitCode)
	}
	for _, tr := range got.Transitions {
		if tr.To == api.Queued && tr.From != "" {
			t.Errorf("the job went back to the queue: %s → %s (%s)", tr.From, tr.To, tr.Reason)
		}
	}
	data, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), j.ID) != 1 {
		t.Errorf("the command ran %d times", strings.Count(string(data), j.ID))
	}
	logs, err := d.Store().Logs(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
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
		hostCommand(t, c)
		c.Executor.MaxOutputBytes, c.Executor.OutputBytesPerSecond = 4096, 64<<10
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	d, ctx := td.D, context.Background()
	j, err := d.Submit(ctx, jobfile.Decode([]byte("name: yes\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [yes]\n")))
	if err != nil {
		t.Fatal(err)
	}
	const note = "\n[metasched: the job's output reached its cap of 4096 bytes; what it writes from here on is read and discarded, and the command goes on]\n"
	waitFor(t, "the output at its cap", time.Minute, func() bool {
		logs, err := d.Store().Logs(ctx, j.ID)
		if err != nil {
			t.Fatal(err)
		}
		return strings.HasSuffix(string(logs), note)
	})
	got, err := d.Cancel(ctx, j.ID)
	if err != nil || got.State != api.Cancelled {
		t.Fatalf("cancel: %s, %v; want cancelled", got.State, err)
	}
	logs, err := d.Store().Logs(ctx, j.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(logs) != 4096+len(note) || strings.Count(string(logs), "y\n") != 2048 {
		t.Errorf("the job's log: %d bytes, want the 4096 of the cap and the note", len(logs))
	}
}

// TestCommandAccountsDaemon: with executor.accounts, the daemon runs each
// owner's job as its owner's account (alice as nobody, bob's certificate
// as games), and refuses at the submission the job of an owner with
// none, naming it and the field, with nothing stored.
func TestCommandAccountsDaemon(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an account per owner needs a daemon that runs as root")
	}
	var dataDir string
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
		hostCommand(t, c)
		dataDir = c.DataDir
		c.Executor.RunAs = ""
		c.Executor.Accounts = map[string]string{"alice": "nobody", "cert:bob": "games"}
		c.Executor.AllowUsers = true
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	d := td.d
	as := func(name string) context.Context {
		return api.WithPrincipal(context.Background(), api.Principal{Name: name, Role: api.RoleUser})
	}
	job := []byte("name: who\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/sh, -c, 'id -un; pwd']\n")
	ids := map[string]string{}
	for _, owner := range []string{"alice", "cert:bob"} {
		j, err := d.Submit(as(owner), jobfile.Decode(job))
		if err != nil {
			t.Fatalf("%s: %v", owner, err)
		}
		ids[owner] = j.ID
	}
	if _, err := d.Submit(as("carol"), jobfile.Decode(job)); err == nil || !strings.Contains(err.Error(), "carol has none in executor.accounts") {
		t.Errorf("carol, with no account: %v", err)
	}
	if l, err := d.Store().Jobs(context.Background(), store.JobFilter{Owner: "carol"}); err != nil || len(l) != 0 {
		t.Errorf("carol's refused job is stored: %v, %v", l, err)
	}
	for owner, account := range map[string]string{"alice": "nobody", "cert:bob": "games"} {
		id := ids[owner]
		waitFor(t, "job "+id+" finished", 30*time.Second, func() bool {
			j, err := d.Job(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			return j.State.Terminal()
		})
		logs, err := d.Store().Logs(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		want := account + "\n" + filepath.Join(dataDir, "jobs", id, "work") + "\n"
		if !strings.Contains(string(logs), want) {
			t.Errorf("%s's job: log %q, want it to run as %s in its own working directory", owner, logs, account)
		}
	}
}
