package metasched_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
)

// drainStart runs a daemon on one site of hosts home-0..n-1 with one render
// pool, and a long job on home-0 and home-1 (the other hosts join once it
// runs).
func drainStart(t *testing.T, n int) (*metasched.Daemon, api.Job) {
	t.Helper()
	grid := &graph.Grid{Clusters: []graph.Cluster{
		{Name: "home", Machines: n, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 1000},
	}}
	var hidden []string
	for i := 2; i < n; i++ {
		hidden = append(hidden, "home-"+string(rune('0'+i)))
	}
	rec := newTuningRecorder(0, hidden...)
	td := startRecorded(t, grid, rec, 2048, 0.05)
	d, ctx := td.d, context.Background()
	long, err := d.Submit(ctx, jobfile.Decode([]byte("name: long\ntype: render\ntasks: 4000\ntask_ops: 4.0e9\ntask_bytes: 1.0e3\nvm: {vcpus: 2, memory_mib: 2048}\n")))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the long job running", 20*time.Second, func() bool {
		j, err := d.Job(ctx, long.ID)
		if err != nil {
			t.Fatal(err)
		}
		return j.State == api.Running
	})
	rec.show()
	waitFor(t, "every host in the daemon's view", 20*time.Second, func() bool { return len(d.Hosts()) == n })
	j, err := d.Job(ctx, long.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(j.VMs, func(v api.JobVM) bool { return v.Host == "home-0" }) {
		t.Fatalf("the long job's VMs %+v: want some on home-0", j.VMs)
	}
	return d, j
}

// waitDone waits until the job has ended, and fails the test unless it is
// done.
func waitDone(t *testing.T, d *metasched.Daemon, id string, limit time.Duration) api.Job {
	t.Helper()
	var j api.Job
	waitFor(t, "job "+id+" ended", limit, func() bool {
		var err error
		j, err = d.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j.State.Terminal()
	})
	if j.State != api.Done {
		t.Fatalf("job %s %s: %s", id, j.State, j.Reason)
	}
	return j
}

func hostView(t *testing.T, d *metasched.Daemon, name string) api.HostView {
	t.Helper()
	for _, h := range d.Hosts() {
		if h.Name == name {
			return h
		}
	}
	t.Fatalf("no host %s", name)
	return api.HostView{}
}

func poolHosts(d *metasched.Daemon, pool string) []string {
	for _, p := range d.Pools() {
		if p.Name == pool {
			return p.Hosts
		}
	}
	return nil
}

// TestDrainHost: a drained host leaves its pool at once (the pool's hosts,
// the planner), its running job finishes on it, and it is drained once the
// job has ended; a new job meanwhile is placed elsewhere. Undrain returns
// it to its pool. A host being drained cannot be undrained twice, an
// unknown host is 404.
func TestDrainHost(t *testing.T) {
	skipShortLong(t)
	synctest.Test(t, func(t *testing.T) {
		d, long := drainStart(t, 3)
		ctx := context.Background()
		h, err := d.DrainHost(ctx, "home-0", api.DrainRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if h.State != api.HostDraining || h.Pool != "render" {
			t.Fatalf("drained home-0: %s in %q, want draining in render", h.State, h.Pool)
		}
		if hosts := poolHosts(d, "render"); slices.Contains(hosts, "home-0") {
			t.Errorf("render's hosts %v while home-0 drains: want it left out", hosts)
		}
		// Draining again is harmless.
		if h, err = d.DrainHost(ctx, "home-0", api.DrainRequest{}); err != nil || h.State != api.HostDraining {
			t.Errorf("second drain: %s, %v", h.State, err)
		}
		next, err := d.Submit(ctx, jobfile.Decode([]byte("name: next\ntype: render\ntasks: 40\ntask_ops: 1.0e9\ntask_bytes: 1.0e3\nvm: {vcpus: 2, memory_mib: 2048}\n")))
		if err != nil {
			t.Fatal(err)
		}
		nj := waitDone(t, d, next.ID, 120*time.Second)
		for _, v := range nj.VMs {
			if v.Host == "home-0" {
				t.Errorf("the next job's VM %s was placed on the draining home-0", v.Name)
			}
		}
		lj, err := d.Job(ctx, long.ID)
		if err != nil {
			t.Fatal(err)
		}
		if lj.State != api.Running {
			t.Errorf("the long job is %s while its host drains: want it running on", lj.State)
		}
		waitDone(t, d, long.ID, 30*time.Minute)
		waitFor(t, "home-0 drained", 20*time.Second, func() bool { return hostView(t, d, "home-0").State == api.HostDrained })

		h, err = d.UndrainHost(ctx, "home-0")
		if err != nil {
			t.Fatal(err)
		}
		if h.State != api.HostIdle || !slices.Contains(poolHosts(d, "render"), "home-0") {
			t.Errorf("undrained home-0 is %s, render's hosts %v: want idle, in render", h.State, poolHosts(d, "render"))
		}
		var re *api.RequestError
		if _, err := d.UndrainHost(ctx, "home-0"); !errors.As(err, &re) || re.Status != 409 {
			t.Errorf("undrain of a host not drained: %v, want a 409", err)
		}
		if _, err := d.DrainHost(ctx, "nowhere", api.DrainRequest{}); !errors.As(err, &re) || re.Status != 404 {
			t.Errorf("drain of an unknown host: %v, want a 404", err)
		}

		// Drains and undrains of one host at once (each records it
		// without the daemon's lock): each is done or a 409 (not
		// drained, or the last one still being recorded), and the host
		// ends as the last one done left it.
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				var err error
				if i%2 == 0 {
					_, err = d.DrainHost(ctx, "home-1", api.DrainRequest{})
				} else {
					_, err = d.UndrainHost(ctx, "home-1")
				}
				var re *api.RequestError
				if err != nil && (!errors.As(err, &re) || re.Status != 409) {
					t.Errorf("a drain or undrain among others: %v, want done or a 409", err)
				}
			})
		}
		wg.Wait()
		if _, err := d.DrainHost(ctx, "home-1", api.DrainRequest{}); err != nil {
			t.Fatal(err)
		}
		if h, err := d.UndrainHost(ctx, "home-1"); err != nil || h.State != api.HostIdle || !slices.Contains(poolHosts(d, "render"), "home-1") {
			t.Errorf("home-1 undrained after the others: %s, %v, render's hosts %v", h.State, err, poolHosts(d, "render"))
		}
	})
}

// TestDrainHostMove: with move, the VMs of the running job on the drained
// host are moved to the other hosts of its pool at its site, the host is
// drained at once, and the job runs on to its end.
func TestDrainHostMove(t *testing.T) {
	skipShortLong(t)
	synctest.Test(t, func(t *testing.T) {
		d, long := drainStart(t, 4)
		ctx := context.Background()
		var onIt []string
		for _, v := range long.VMs {
			if v.Host == "home-0" {
				onIt = append(onIt, v.Name)
			}
		}
		h, err := d.DrainHost(ctx, "home-0", api.DrainRequest{Move: true})
		if err != nil {
			t.Fatal(err)
		}
		if h.State != api.HostDrained || len(h.VMs) != 0 {
			t.Fatalf("home-0 after a drain with moves: %s with VMs %+v, want drained and empty", h.State, h.VMs)
		}
		j, err := d.Job(ctx, long.ID)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("the long job's VMs before the drain %+v, after %+v", long.VMs, j.VMs)
		for _, v := range j.VMs {
			if slices.Contains(onIt, v.Name) && (v.Host == "home-0" || v.Host == "home-1") {
				t.Errorf("VM %s is on %s after the drain: want it moved to home-2 or home-3", v.Name, v.Host)
			}
		}
		if j.State != api.Running {
			t.Errorf("the long job is %s after its VMs moved: want running", j.State)
		}
		waitDone(t, d, long.ID, 30*time.Minute)
	})
}
