package metasched_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/store"
)

// TestCommandExecutor runs jobs' commands through the daemon: the command
// sees its VMs in METASCHED_HOSTFILE, its output is the job's log, and its
// exit code decides done or failed.
func TestCommandExecutor(t *testing.T) {
	td := startDaemon(t, metasched.Options{}, func(c *metasched.Config) {
		c.Executor = metasched.ExecutorConfig{Name: "command"}
		c.Policy = metasched.PolicyConfig{Name: "none"}
	})
	d, ctx := td.d, context.Background()
	submit := func(name, script string) string {
		j, err := d.Submit(ctx, []byte("name: "+name+"\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\ncommand: [/bin/sh, -c, '"+script+"']\n"))
		if err != nil {
			t.Fatal(err)
		}
		return j.ID
	}
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
