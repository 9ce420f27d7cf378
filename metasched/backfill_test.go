package metasched_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// backfillDaemon runs one pool of four 2-core hosts whose jobs' VMs take 1
// vCPU unless the job asks for more.
func backfillDaemon(t *testing.T, holdAfter time.Duration) *testDaemon {
	t.Helper()
	grid := &graph.Grid{Clusters: []graph.Cluster{
		{Name: "solo", Machines: 4, Cores: 2, MemoryMiB: 4096, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
	}}
	td := startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
		c.JobTypes = []api.JobType{{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1}}
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 1
		c.MinPoolHosts = 0
		c.HoldAfter = holdAfter
	})
	return td
}

// A wide job: one 1-vCPU VM on each of the four hosts, for about 30 s.
const wideJob = "name: %s\ntype: sim\ntasks: 120\ntask_ops: 1.0e9\ntask_bytes: 1.0e2\n"

// A big-VM job: 2-vCPU VMs, which fit only hosts with nothing else on them.
const bigJob = "name: %s\ntype: sim\ntasks: 40\ntask_ops: 1.0e9\ntask_bytes: 1.0e2\nvm: {vcpus: 2, memory_mib: 1024}\n"

func submitf(t *testing.T, d *metasched.Daemon, format, name string) api.Job {
	t.Helper()
	j, err := d.Submit(context.Background(), jobfile.Decode([]byte(fmt.Sprintf(format, name))))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func stateOf(t *testing.T, d *metasched.Daemon, id string) api.Job {
	t.Helper()
	j, err := d.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestBackfill: three jobs that cannot run now (their 2-vCPU VMs fit no
// host while a wide job keeps one vCPU of each busy) do not keep a younger
// job that fits from running. (Before, the dispatcher gave up on a pool
// after three misses among its oldest jobs: the small job waited as long as
// the wide one ran.)
func TestBackfill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := backfillDaemon(t, time.Hour).d
		wide := submitf(t, d, wideJob, "wide")
		waitFor(t, "the wide job running", time.Minute, func() bool { return stateOf(t, d, wide.ID).State == api.Running })
		if n := len(stateOf(t, d, wide.ID).VMs); n != 4 {
			t.Fatalf("the wide job has %d VMs, want one on each host", n)
		}
		var big []api.Job
		for i := range 3 {
			big = append(big, submitf(t, d, bigJob, fmt.Sprintf("big-%d", i)))
		}
		small := submitf(t, d, wideJob, "small")
		waitFor(t, "the small job running", 10*time.Second, func() bool { return stateOf(t, d, small.ID).State == api.Running })
		if st := stateOf(t, d, wide.ID).State; st != api.Running {
			t.Fatalf("the wide job is %s: the small job should have run beside it", st)
		}
		for _, b := range big {
			if j := stateOf(t, d, b.ID); j.State != api.Queued || !strings.Contains(j.Reason, "no free host") {
				t.Errorf("big job %s: %s (%s), want it waiting for a free host", b.Name, j.State, j.Reason)
			}
		}
	})
}

// TestNoStarvation: a big-VM job waits while wide jobs, one starting every
// 20 s and each running about 30 s, always keep one vCPU of every host
// busy: without a hold it would never find a host with two free vCPUs.
// After hold_after it holds the hosts of its plan on the empty pool, the
// wide jobs that come later wait instead of taking them, and the big job
// runs once the wide jobs on its hosts end.
func TestNoStarvation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := backfillDaemon(t, 10*time.Second).d
		start := time.Now()
		submitf(t, d, wideJob, "wide-0")
		time.Sleep(time.Second)
		big := submitf(t, d, bigJob, "big")
		next, n := start.Add(20*time.Second), 1
		var ran time.Time
		for time.Since(start) < 5*time.Minute {
			if j := stateOf(t, d, big.ID); j.State != api.Queued && ran.IsZero() {
				ran = time.Now()
			}
			if !ran.IsZero() {
				break
			}
			if !time.Now().Before(next) {
				submitf(t, d, wideJob, fmt.Sprintf("wide-%d", n))
				next, n = next.Add(20*time.Second), n+1
			}
			time.Sleep(time.Second)
		}
		j := stateOf(t, d, big.ID)
		if ran.IsZero() {
			t.Fatalf("the big job never ran in 5 minutes of wide jobs: %s (%s)", j.State, j.Reason)
		}
		t.Logf("the big job was planned after %s, %d wide jobs submitted", ran.Sub(start), n)
		if ran.Sub(start) > 2*time.Minute {
			t.Errorf("the big job waited %s: holding should give it hosts within two wide jobs' runs", ran.Sub(start))
		}
	})
}

// TestIdleDispatchCost: with 2,000 jobs queued that cannot run and nothing
// changing, a minute costs the dispatcher one round over the queues every
// fullRoundEvery (5 s) at most: a round whose hosts and queues are as the
// last left them is skipped. (Before, every tick, 4 a second, sorted and
// walked the queues: 240 rounds a minute.)
func TestIdleDispatchCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		td := backfillDaemon(t, time.Hour)
		d := td.d
		wide := submitf(t, d, strings.Replace(wideJob, "tasks: 120", "tasks: 1200", 1), "wide") // 300 s
		waitFor(t, "the wide job running", time.Minute, func() bool { return stateOf(t, d, wide.ID).State == api.Running })
		for i := range 2000 {
			submitf(t, d, bigJob, fmt.Sprintf("big-%d", i))
		}
		time.Sleep(2 * time.Second)
		rounds := func(kind string) float64 {
			return scrape(t, td.http, td.addr+"/metrics").must(t, "metasched_dispatch_rounds_total", "kind", kind)
		}
		planned, skipped := rounds("planned"), rounds("skipped")
		time.Sleep(time.Minute)
		planned, skipped = rounds("planned")-planned, rounds("skipped")-skipped
		if st := stateOf(t, d, wide.ID).State; st != api.Running {
			t.Fatalf("the wide job is %s: the minute was not idle", st)
		}
		t.Logf("dispatcher rounds in an idle minute with 2,000 queued: %v planned, %v skipped", planned, skipped)
		if planned > 60/5+1 || skipped < 60*4/2 {
			t.Errorf("%v rounds planned and %v skipped in an idle minute, want at most %d planned", planned, skipped, 60/5+1)
		}
	})
}
