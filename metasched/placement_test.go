package metasched_test

import (
	"context"
	"errors"
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

// placementDaemon runs one pool over two clusters of three 1-core hosts:
// fast (4e9 operations/s per machine, 8 GiB) first in grid order, then
// slow (1e9, 2 GiB). A job of placeJob's shape runs alone in 1/4 of its tasks' seconds
// on fast and 1 s per task on slow (two workers each), on all three hosts
// of the cluster. Emulated runs last their predicted time.
func placementDaemon(t *testing.T) *testDaemon {
	t.Helper()
	grid := &graph.Grid{Clusters: []graph.Cluster{
		{Name: "fast", Machines: 3, Cores: 1, MemoryMiB: 8192, Perf: 4e9, LANMbps: 1000, UplinkMbps: 10},
		{Name: "slow", Machines: 3, Cores: 1, MemoryMiB: 2048, Perf: 1e9, LANMbps: 1000, UplinkMbps: 10},
	}, Links: []graph.Link{{Between: [2]string{"fast", "slow"}, Mbps: 10}}}
	return startDaemonGrid(t, grid, metasched.Options{}, func(c *metasched.Config) {
		c.JobTypes = []api.JobType{{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1}}
		c.Policy = metasched.PolicyConfig{Name: "none"}
		c.Executor.TimeScale = 1
		c.MinPoolHosts = 0
		c.HoldAfter = time.Hour
	})
}

// placeJob is a job of tasks tasks of 2e9 operations, with the fields
// extra adds.
func placeJob(name string, tasks int, extra string) string {
	return fmt.Sprintf("name: %s\ntype: sim\ntasks: %d\ntask_ops: 2.0e9\ntask_bytes: 1.0e2\n%s", name, tasks, extra)
}

func submitText(t *testing.T, d *metasched.Daemon, text string) api.Job {
	t.Helper()
	j, err := d.Submit(context.Background(), jobfile.Decode([]byte(text)))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// sitesOf lists the sites of a job's VMs, each once, in order.
func sitesOf(j api.Job) []string {
	var out []string
	for _, v := range j.VMs {
		if !strings.Contains(strings.Join(out, ","), v.Site) {
			out = append(out, v.Site)
		}
	}
	return out
}

// TestPlacementBaselines: with fast busy for about 100 s, a MET job waits
// for fast (where it runs fastest) though slow is free, and says so; an
// MCT job runs on slow at once (it ends there first: 40 s against about
// 100 + 10 s); an OLB job runs on the cluster free first. Each job's
// explanation names its placement. With every cluster free, MET and MCT
// run on fast.
func TestPlacementBaselines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := placementDaemon(t).d
		ctx := context.Background()
		// 200 tasks of 2e9 operations at 2 × 4e9 operations/s: 50 s.
		blocker := submitText(t, d, placeJob("blocker", 200, "placement: met\n"))
		waitFor(t, "the blocker running", time.Minute, func() bool { return stateOf(t, d, blocker.ID).State == api.Running })
		if s := sitesOf(stateOf(t, d, blocker.ID)); len(s) != 1 || s[0] != "fast" {
			t.Fatalf("the MET blocker runs on %v, want fast alone", s)
		}
		met := submitText(t, d, placeJob("met", 40, "placement: met\n"))
		waitFor(t, "the MET job's reason", time.Minute, func() bool {
			return strings.Contains(stateOf(t, d, met.ID).Reason, "waiting: placement met: it runs fastest on cluster fast alone (predicted 10s) and waits for it: the 3 hosts it needs there are free in about")
		})
		if j := stateOf(t, d, met.ID); j.State != api.Queued {
			t.Fatalf("the MET job is %s (%s), want it waiting for fast", j.State, j.Reason)
		}
		dry, err := d.DryRun(ctx, jobfile.Decode([]byte(placeJob("met-dry", 40, "placement: met\n"))))
		if err != nil {
			t.Fatal(err)
		}
		if !dry.Waits || dry.Placement.Plan.Master != "fast" || dry.Placement.Plan.Start <= 0 ||
			!strings.Contains(dry.Explanation, "job met-dry waits for cluster fast (placement met)") {
			t.Errorf("the dry run of a MET job: waits %t, %+v\n%s", dry.Waits, dry.Placement.Plan, dry.Explanation)
		}
		mct := submitText(t, d, placeJob("mct", 40, "placement: mct\n"))
		waitFor(t, "the MCT job done", 5*time.Minute, func() bool { return stateOf(t, d, mct.ID).State == api.Done })
		j := stateOf(t, d, mct.ID)
		if s := sitesOf(j); len(s) != 1 || s[0] != "slow" || j.Placement.Plan.Algorithm != "mct" ||
			!strings.Contains(j.Explanation, "(placement mct)") {
			t.Errorf("the MCT job ran on %v by %s, want slow by mct:\n%s", s, j.Placement.Plan.Algorithm, j.Explanation)
		}
		if st := stateOf(t, d, met.ID).State; st != api.Queued {
			t.Errorf("the MET job is %s while the blocker runs, want queued", st)
		}
		olb := submitText(t, d, placeJob("olb", 40, "placement: olb\n"))
		waitFor(t, "the OLB job done", 5*time.Minute, func() bool { return stateOf(t, d, olb.ID).State == api.Done })
		if s := sitesOf(stateOf(t, d, olb.ID)); len(s) != 1 || s[0] != "slow" {
			t.Errorf("the OLB job ran on %v, want slow, free first", s)
		}
		waitFor(t, "the MET job done", 5*time.Minute, func() bool { return stateOf(t, d, met.ID).State == api.Done })
		j, b := stateOf(t, d, met.ID), stateOf(t, d, blocker.ID)
		if s := sitesOf(j); len(s) != 1 || s[0] != "fast" || !strings.Contains(j.Explanation, "(placement met)") {
			t.Errorf("the MET job ran on %v, want fast:\n%s", s, j.Explanation)
		}
		if planned, ended := transitionAt(j, api.Planned), transitionAt(b, api.Done); planned.Before(ended) {
			t.Errorf("the MET job was planned at %s, before the blocker on fast ended at %s", planned, ended)
		}
		// Everything free: MCT takes fast, as MET does.
		mct2 := submitText(t, d, placeJob("mct-free", 40, "placement: mct\n"))
		waitFor(t, "the second MCT job done", 5*time.Minute, func() bool { return stateOf(t, d, mct2.ID).State == api.Done })
		if s := sitesOf(stateOf(t, d, mct2.ID)); len(s) != 1 || s[0] != "fast" {
			t.Errorf("the MCT job on a free grid ran on %v, want fast", s)
		}
	})
}

// slowDestroy is a site agent whose VM destructions wait until gate is
// closed.
type slowDestroy struct {
	metasched.SiteAgent
	gate chan struct{}
}

func (s slowDestroy) DestroyVM(ctx context.Context, name string) error {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.SiteAgent.DestroyVM(ctx, name)
}

// TestMCTWaitsForVMsBeingDestroyed: the hosts of a job that just ended
// still hold its VMs while they are destroyed; a MCT job submitted then
// counts them free in moments and runs on fast (10 s), not on slow at once
// (40 s) as if fast's hosts were held for an unknown time.
func TestMCTWaitsForVMsBeingDestroyed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		grid := &graph.Grid{Clusters: []graph.Cluster{
			{Name: "fast", Machines: 3, Cores: 1, MemoryMiB: 8192, Perf: 4e9, LANMbps: 1000, UplinkMbps: 10},
			{Name: "slow", Machines: 3, Cores: 1, MemoryMiB: 2048, Perf: 1e9, LANMbps: 1000, UplinkMbps: 10},
		}, Links: []graph.Link{{Between: [2]string{"fast", "slow"}, Mbps: 10}}}
		d := startDaemonGrid(t, grid, metasched.Options{WrapAgent: func(site string, a metasched.SiteAgent) metasched.SiteAgent {
			if site == "fast" {
				return slowDestroy{SiteAgent: a, gate: gate}
			}
			return a
		}}, func(c *metasched.Config) {
			c.JobTypes = []api.JobType{{Name: "sim", VCPUs: 1, MemoryMiB: 1024, HoldingCost: 1}}
			c.Policy = metasched.PolicyConfig{Name: "none"}
			c.Executor.TimeScale = 1
			c.MinPoolHosts = 0
			c.HoldAfter = time.Hour
		}).d
		first := submitText(t, d, placeJob("first", 40, "placement: met\n"))
		waitFor(t, "the first job done", 5*time.Minute, func() bool { return stateOf(t, d, first.ID).State == api.Done })
		if s := sitesOf(stateOf(t, d, first.ID)); len(s) != 1 || s[0] != "fast" {
			t.Fatalf("the first job ran on %v, want fast", s)
		}
		mct := submitText(t, d, placeJob("mct", 40, "placement: mct\n"))
		time.Sleep(5 * time.Second) // dispatch rounds, with fast's VMs still there
		if j := stateOf(t, d, mct.ID); j.State != api.Queued {
			t.Fatalf("the MCT job is %s (%s) while fast's hosts are being emptied, want it waiting for fast", j.State, j.Reason)
		}
		close(gate)
		waitFor(t, "the MCT job done", 5*time.Minute, func() bool { return stateOf(t, d, mct.ID).State == api.Done })
		if s := sitesOf(stateOf(t, d, mct.ID)); len(s) != 1 || s[0] != "fast" {
			t.Errorf("the MCT job ran on %v, want fast, free a moment after the first job's end", s)
		}
	})
}

// transitionAt is when the job last entered state to.
func transitionAt(j api.Job, to api.State) time.Time {
	var at time.Time
	for _, tr := range j.Transitions {
		if tr.To == to {
			at = tr.At
		}
	}
	return at
}

// TestForcedMasterJob: a job whose master is forced runs with its master
// there, and its plan and explanation say the master was forced; without
// it the daemon chooses slow (the master costs the least compute there).
func TestForcedMasterJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := placementDaemon(t).d
		free := submitText(t, d, placeJob("free", 40, ""))
		waitFor(t, "the free job done", 5*time.Minute, func() bool { return stateOf(t, d, free.ID).State == api.Done })
		if j := stateOf(t, d, free.ID); j.Placement.Plan.Master != "slow" || j.Placement.Plan.MasterForced {
			t.Fatalf("free choice: master %s (forced %t), want slow, chosen", j.Placement.Plan.Master, j.Placement.Plan.MasterForced)
		}
		forced := submitText(t, d, placeJob("forced", 40, "master: fast\n"))
		waitFor(t, "the forced job done", 5*time.Minute, func() bool { return stateOf(t, d, forced.ID).State == api.Done })
		j := stateOf(t, d, forced.ID)
		if j.Placement.Plan.Master != "fast" || !j.Placement.Plan.MasterForced || j.VMs[0].Site != "fast" || !j.VMs[0].Master {
			t.Fatalf("master forced on fast: plan master %s (forced %t), master VM %+v", j.Placement.Plan.Master, j.Placement.Plan.MasterForced, j.VMs[0])
		}
		if !strings.Contains(j.Explanation, "master fast (forced)") || !strings.Contains(j.Explanation, "(placement gramvm)") {
			t.Errorf("the explanation does not name the forced master and the placement:\n%s", j.Explanation)
		}
		var planned string
		for _, tr := range j.Transitions {
			if tr.To == api.Planned {
				planned = tr.Reason
			}
		}
		if !strings.HasPrefix(planned, "planned: master fast (forced), ") {
			t.Errorf("the planned transition's reason: %q", planned)
		}
	})
}

// TestPlacementFieldsRefused: a job whose master or placement cannot be
// is refused at submission, the field named, and nothing is stored.
func TestPlacementFieldsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := placementDaemon(t).d
		ctx := context.Background()
		for _, tc := range []struct{ extra, field, problem string }{
			{"master: mars\n", "master", `no cluster "mars" in the grid: the clusters are fast, slow`},
			{"master: slow\nvm: {vcpus: 1, memory_mib: 4096}\n", "master", "cluster slow's machines (1 cores, 2048 MiB) can never hold the job's VM (1 vCPUs, 4096 MiB)"},
			{"placement: random\n", "placement", `must be one of gramvm, met, mct, olb, got "random"`},
			{"placement: olb\nmaster: fast\n", "master", "a baseline placement (olb) places the whole job on the one cluster it chooses"},
		} {
			_, err := d.Submit(ctx, jobfile.Decode([]byte(placeJob("bad", 10, tc.extra))))
			var re *api.RequestError
			if !errors.As(err, &re) || re.Status != 400 || len(re.Fields) != 1 || re.Fields[0].Field != tc.field ||
				!strings.Contains(re.Fields[0].Problem, tc.problem) {
				t.Errorf("%q: %v (%+v), want 400 on %s: %s", tc.extra, err, re, tc.field, tc.problem)
			}
		}
		if l, err := d.Jobs(ctx, api.JobFilter{}); err != nil || len(l.Jobs) != 0 {
			t.Errorf("jobs stored: %d, %v", len(l.Jobs), err)
		}
	})
}
