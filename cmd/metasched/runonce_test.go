package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/client"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// commandConfig is the daemon's configuration for TestCommandsRunOnce: the
// paper's grid, one job type, the command executor, no switching.
const commandConfig = `listen: 127.0.0.1:%d
data_dir: data
grid: grid.yaml
job_types:
  - {name: sim, vm: {vcpus: 1, memory_mib: 1024}}
policy: {name: none}
executor: {name: command}
`

// TestCommandsRunOnce runs the real daemon with the command executor and
// SIGKILLs it three times while commands run and finish: each command
// appends its job's ID to a file, then works on for 0.4 s, and every kill
// comes once two commands of that run have written their line (so that
// they are still running, or ending, when the daemon dies). After each kill
// the daemon restarts on its data directory; in the end every
// acknowledged job is done, and no command's line is in the file twice:
// a restart never runs a command again that had run.
func TestCommandsRunOnce(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	gridData, err := os.ReadFile(example + "grid-paper.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "grid.yaml"), gridData, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "metasched.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(commandConfig, freePort(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	linesFile := filepath.Join(dir, "lines")
	h := &crashHarness{t: t, bin: bin, cfg: cfg, dataDir: filepath.Join(dir, "data"), logDir: dir,
		acked: map[string]string{}, lost: map[string]bool{}}
	t.Cleanup(h.dumpLogsOnFailure)
	lines := func() []string {
		data, err := os.ReadFile(linesFile)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Fields(string(data))
	}
	const n = 36
	next := 0
	submit := func(d *crashDaemon) {
		t.Helper()
		name := fmt.Sprintf("once-%02d", next)
		body := fmt.Sprintf("name: %s\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n"+
			"command: [/bin/sh, -c, 'echo $METASCHED_JOB_ID >> %s; sleep 0.4; echo ran']\n", name, linesFile)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		j, err := d.c.Submit(ctx, []byte(body))
		if err != nil {
			t.Fatalf("submit %s: %v", name, err)
		}
		h.acked[j.ID] = name
		next++
	}
	start := time.Now()
	for run := 1; run <= 3; run++ {
		d := h.start()
		before := len(lines())
		deadline := time.Now().Add(60 * time.Second)
		for len(lines()) < before+2 {
			if time.Now().After(deadline) {
				t.Fatalf("run %d: %d lines written in 60 s, want 2 more than %d", run, len(lines())-before, before)
			}
			if next < n {
				submit(d)
			}
			time.Sleep(50 * time.Millisecond)
		}
		h.kill(d, fmt.Sprintf("run %d, %d commands had written their line, %d jobs submitted", run, len(lines()), next))
	}
	d := h.start()
	for next < n {
		submit(d)
	}
	h.waitFor(d, 120*time.Second, "every job finished", func(ctx context.Context) (string, bool, error) {
		l, err := d.c.Jobs(ctx, client.JobsQuery{States: []lifecycle.State{lifecycle.Queued, lifecycle.Planned, lifecycle.Provisioning, lifecycle.Running}})
		return "", err == nil && len(l.Jobs) == 0, err
	})

	jobs := h.allJobs(d)
	written := map[string]int{}
	for _, id := range lines() {
		written[id]++
	}
	requeued := 0
	for _, j := range jobs {
		if _, ok := h.acked[j.ID]; !ok {
			t.Errorf("job %s (%s) was never acknowledged", j.ID, j.Name)
		}
		if j.State != lifecycle.Done {
			t.Errorf("job %s (%s) is %s (%s), want done", j.ID, j.Name, j.State, j.Reason)
		}
		if written[j.ID] != 1 {
			t.Errorf("job %s (%s): its command wrote its line %d times, want once", j.ID, j.Name, written[j.ID])
		}
		checkLifecycle(t, j)
		for _, tr := range j.Transitions {
			if tr.To == lifecycle.Queued && tr.From == lifecycle.Running {
				requeued++
				t.Logf("job %s requeued: %s", j.ID, tr.Reason)
			}
		}
	}
	if len(jobs) != len(h.acked) || len(jobs) != n {
		t.Errorf("%d jobs, %d acknowledged, want %d", len(jobs), len(h.acked), n)
	}
	t.Logf("%d jobs, %d kills (%s), %d lines, %d running jobs requeued (their command had not started), %.1f s",
		len(jobs), len(h.kills), strings.Join(h.kills, "; "), len(lines()), requeued, time.Since(start).Seconds())
	h.interrupt(d)
}
