package metasched_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// failingStore fails the commits of jobs' changes it is told to, as a full
// or failing disk would, and counts them.
type failingStore struct {
	mu      sync.Mutex
	fail    func(from, to lifecycle.State) bool
	refused map[string]int // "from->to" → commits refused
}

func (f *failingStore) fault(job string, from, to lifecycle.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil && f.fail(from, to) {
		f.refused[fmt.Sprintf("%s->%s", from, to)]++
		return errors.New("write metasched.db: no space left on device")
	}
	return nil
}

func (f *failingStore) set(fail func(from, to lifecycle.State) bool) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *failingStore) count(tr string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refused[tr]
}

// TestCommitFailure: while the store refuses a job's changes, memory stays
// as the store says (the job is not shown planned, nothing is reserved or
// created for it; a job whose command exited stays running with its VMs
// until its outcome is on disk), and the daemon goes on by itself once the
// store takes writes again.
func TestCommitFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := &failingStore{refused: map[string]int{}}
		fs.set(func(from, to lifecycle.State) bool { return to == lifecycle.Planned })
		td := startDaemon(t, metasched.Options{CommitFault: fs.fault}, func(c *metasched.Config) { c.Executor.TimeScale = 0.0005 })
		ctx := context.Background()
		job, err := td.d.Submit(ctx, jobfile.Decode([]byte("name: a\ntype: render\ntasks: 40\ntask_ops: 1e12\ntask_bytes: 1e5\n")))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, "three refused plans", time.Minute, func() bool { return fs.count("queued->planned") >= 3 })
		got, err := td.d.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.Queued || got.Attempts != 0 || len(got.VMs) != 0 {
			t.Errorf("while its plan is refused the job is %s, attempts %d, VMs %v; want queued, 0, none", got.State, got.Attempts, got.VMs)
		}
		for _, p := range td.d.Pools() {
			if p.Active != 0 || p.Busy != 0 {
				t.Errorf("pool %s: %d active jobs, %d busy hosts while no plan is on disk", p.Name, p.Active, p.Busy)
			}
			if p.Name == "render" && p.Queued != 1 {
				t.Errorf("pool render: %d queued, want 1", p.Queued)
			}
		}
		if vms := td.d.VMs(); len(vms) != 0 {
			t.Errorf("VMs created for a job whose plan is not on disk: %v", vms)
		}

		// The store takes the plan, but not the job's end: the command has
		// exited, the job stays running with its VMs, and the answer is tried
		// again.
		fs.set(func(from, to lifecycle.State) bool { return from == lifecycle.Running })
		waitFor(t, "three refused ends", time.Minute, func() bool { return fs.count("running->done") >= 3 })
		got, err = td.d.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != api.Running || len(got.VMs) == 0 {
			t.Fatalf("while its end is refused the job is %s with VMs %v; want running with its VMs", got.State, got.VMs)
		}
		if n := len(td.d.VMs()); n != len(got.VMs) {
			t.Errorf("%d VMs on the hosts, want the job's %d until its end is on disk", n, len(got.VMs))
		}

		// The store takes writes again: the job ends, once, and its VMs go; a
		// new job runs too.
		fs.set(nil)
		second, err := td.d.Submit(ctx, jobfile.Decode([]byte("name: b\ntype: render\ntasks: 40\ntask_ops: 1e12\ntask_bytes: 1e5\n")))
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{job.ID, second.ID} {
			waitFor(t, id+" done", time.Minute, func() bool {
				j, err := td.d.Job(ctx, id)
				return err == nil && j.State == api.Done
			})
		}
		got, err = td.d.Job(ctx, job.ID)
		if err != nil {
			t.Fatal(err)
		}
		var path []api.State
		for _, tr := range got.Transitions {
			path = append(path, tr.To)
		}
		want := []api.State{api.Queued, api.Planned, api.Provisioning, api.Running, api.Done}
		if fmt.Sprint(path) != fmt.Sprint(want) || got.Attempts != 1 {
			t.Errorf("transitions %v, attempts %d; want %v and 1", path, got.Attempts, want)
		}
		waitFor(t, "no VM left", time.Minute, func() bool { return len(td.d.VMs()) == 0 })
	})
}

// TestCommitFailsAsItStops: a job's change whose commit fails after the
// daemon stopped (a leader cut off from etcd stops before its commit's
// bound ends) is not tried again, nor logged as an error of the job: the
// daemon says it is stopping, and the job resumes after the restart or
// under the next leader.
func TestCommitFailsAsItStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		entered, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		fault := func(job string, from, to lifecycle.State) error {
			if to != lifecycle.Provisioning {
				return nil
			}
			first := false
			once.Do(func() { first = true })
			if !first {
				return nil
			}
			close(entered)
			<-release
			return errors.New("etcd does not answer (is a majority of its members up?): nothing in 10s")
		}
		td := startDaemon(t, metasched.Options{CommitFault: fault}, func(c *metasched.Config) { c.Executor.TimeScale = 0.0005 })
		if _, err := td.d.Submit(context.Background(), jobfile.Decode([]byte("name: a\ntype: render\ntasks: 4\ntask_ops: 1e9\ntask_bytes: 1e5\n"))); err != nil {
			t.Fatal(err)
		}
		<-entered
		stopped := make(chan struct{})
		go func() {
			td.stop()
			close(stopped)
		}()
		synctest.Wait() // the daemon has stopped but for the job's commit
		close(release)
		<-stopped
		log := td.log.String()
		if !strings.Contains(log, "daemon stopping: the job's change is not recorded") {
			t.Errorf("the daemon did not say its stop left the job's change unrecorded:\n%s", log)
		}
		if strings.Contains(log, "cannot record the job's change: trying again") {
			t.Errorf("the daemon logged a retry of a commit that failed as it stopped:\n%s", log)
		}
	})
}
