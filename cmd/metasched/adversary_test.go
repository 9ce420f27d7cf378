package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/client"
)

// adversaryCycles is how many times TestAdversary kills the daemon: 4 in
// make test, 25 in make soak.
var adversaryCycles = flag.Int("adversary-cycles", 4, "SIGKILL cycles of TestAdversary")

// commandConfig is the daemon's configuration for TestAdversary: the
// paper's grid, one job type, the host-command executor (the %s gives
// run_as: nobody when the test runs as root), no switching.
const commandConfig = `listen: 127.0.0.1:%d
insecure_http: true
data_dir: data
grid: grid.yaml
job_types:
  - {name: sim, vm: {vcpus: 1, memory_mib: 1024}}
policy: {name: none}
executor: {name: host-command%s}
`

// TestAdversary runs the real daemon with the host-command executor under
// concurrent submissions and SIGKILLs it -adversary-cycles times (4 here,
// as the adversary did; 25 in make soak). Four clients submit without
// pause, each submission with its own Idempotency-Key, sent again with
// that key until it is answered (across the kills, as a client that lost an answer would do).
// Each command appends its job's ID to a file, then works on for 0.3 s.
// Each kill comes at a random moment once two commands of that run have
// written their line, with commands running or ending and submissions in
// flight. The daemon restarts on its data directory every time. In the
// end: every submission acknowledged, one job for each (found =
// acknowledged: no duplicate of a retried submission), every job done (0
// lost), and no command's line in the file twice (0 commands run twice).
func TestAdversary(t *testing.T) {
	// Parallel: the package's longest tests run two at a time once its
	// other tests are done (the QEMU one beside one that boots no guest),
	// each with processes, directories and ports of its own.
	t.Parallel()
	bin := buildBinary(t)
	dir := t.TempDir()
	writePaperGrid(t, dir)
	cfg := filepath.Join(dir, "metasched.yaml")
	runAs := ""
	if os.Geteuid() == 0 { // the jobs never run as root
		runAs = ", run_as: nobody"
	}
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(commandConfig, freePort(t), runAs)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The commands, nobody's, write their lines in a directory of theirs.
	jobsDir := filepath.Join(dir, "jobs-out")
	if err := os.Mkdir(jobsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(jobsDir, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	linesFile := filepath.Join(jobsDir, "lines")
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

	// The clients: the daemon they reach changes at every restart (nil
	// while it is down).
	var (
		mu       sync.Mutex
		cur      *client.Client
		next     int
		stopping bool
		acked    = map[string]string{} // submission → its job
		retried  int                   // requests sent again after a lost answer
		fatal    error
	)
	submitter := func() {
		for {
			mu.Lock()
			if stopping || fatal != nil {
				mu.Unlock()
				return
			}
			name := fmt.Sprintf("adv-%05d", next)
			next++
			mu.Unlock()
			body := fmt.Sprintf("name: %s\ntype: sim\ntasks: 10\ntask_ops: 1.0e9\ntask_bytes: 0\n"+
				"command: [/bin/sh, -c, 'echo $METASCHED_JOB_ID >> %s; sleep 0.3; echo ran']\n", name, linesFile)
			for tries := 0; ; tries++ {
				mu.Lock()
				c := cur
				mu.Unlock()
				if c == nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				s, err := c.SubmitWith(ctx, []byte(body), client.SubmitOptions{IdempotencyKey: name})
				cancel()
				var re *client.RemoteError
				mu.Lock()
				switch {
				case err == nil:
					acked[name] = s.Job.ID
					if tries > 0 {
						retried++
					}
				case errors.As(err, &re) && re.Status < 500:
					fatal = fmt.Errorf("submit %s: refused: %w", name, err)
				}
				mu.Unlock()
				if err == nil || fatal != nil {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(submitter)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	for cycle := 1; cycle <= *adversaryCycles; cycle++ {
		d := h.start()
		mu.Lock()
		cur = d.c
		mu.Unlock()
		before := len(lines())
		deadline := time.Now().Add(2 * time.Minute)
		for len(lines()) < before+2 {
			if time.Now().After(deadline) {
				t.Fatalf("cycle %d: %d lines written in 2 minutes, want 2 more than %d", cycle, len(lines())-before, before)
			}
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		mu.Lock()
		cur = nil
		n := len(acked)
		mu.Unlock()
		h.kill(d, fmt.Sprintf("cycle %d: %d lines, %d submissions acknowledged", cycle, len(lines()), n))
	}
	d := h.start()
	mu.Lock()
	cur = d.c
	mu.Unlock()
	time.Sleep(time.Second)
	mu.Lock()
	stopping = true
	mu.Unlock()
	wg.Wait()
	if fatal != nil {
		t.Fatal(fatal)
	}
	h.waitFor(time.Duration(2+*adversaryCycles)*time.Minute, "every job finished", func(ctx context.Context) (string, bool, error) {
		l, err := d.c.Jobs(ctx, client.JobsQuery{States: []api.State{api.Queued, api.Planned, api.Provisioning, api.Running}})
		return "", err == nil && len(l.Jobs) == 0, err
	})

	jobs := h.allJobs(d.c)
	written := map[string]int{}
	for _, id := range lines() {
		written[id]++
	}
	byJob := map[string]string{}
	for name, id := range acked {
		byJob[id] = name
	}
	done, twice, requeued := 0, 0, 0
	for _, j := range jobs {
		if byJob[j.ID] != j.Name {
			t.Errorf("job %s (%s) is not the job of an acknowledged submission (a duplicate?)", j.ID, j.Name)
		}
		if j.State == api.Done {
			done++
		} else {
			t.Errorf("job %s (%s) is %s (%s), want done", j.ID, j.Name, j.State, j.Reason)
		}
		switch w := written[j.ID]; {
		case w > 1:
			twice++
			t.Errorf("job %s (%s): its command wrote its line %d times, want once", j.ID, j.Name, w)
		case w == 0:
			t.Errorf("job %s (%s): its command never wrote its line", j.ID, j.Name)
		}
		checkLifecycle(t, j)
		for _, tr := range j.Transitions {
			if tr.To == api.Queued && tr.From == api.Running {
				requeued++
			}
		}
	}
	lost := len(acked) - done
	if len(jobs) != len(acked) || lost != 0 || twice != 0 {
		t.Errorf("acknowledged %d, found %d, done %d, lost %d, commands run twice %d", len(acked), len(jobs), done, lost, twice)
	}
	t.Logf("tally: %d SIGKILL cycles; acknowledged %d, found %d, done %d, lost %d, commands run twice %d; "+
		"%d submissions answered only after a retry with their key, %d running jobs requeued (their command had not started); %.1f s",
		len(h.kills), len(acked), len(jobs), done, lost, twice, retried, requeued, time.Since(start).Seconds())
	h.interrupt(d)
}
