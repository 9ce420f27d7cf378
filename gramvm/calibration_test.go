package gramvm_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// calibrationGrid: two clusters of 4 machines whose grid file says 1e9
// operations per second per machine and a 1000 Mbit/s LAN, joined by 10
// Mbit/s.
func calibrationGrid() *graph.Grid {
	return &graph.Grid{
		Clusters: []graph.Cluster{
			{Name: "a", Machines: 4, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 100},
			{Name: "b", Machines: 4, Cores: 4, MemoryMiB: 8192, Perf: 1e9, LANMbps: 1000, UplinkMbps: 100},
		},
		Links: []graph.Link{{Between: [2]string{"a", "b"}, Mbps: 10}},
	}
}

// TestPlanCalibrated: a plan uses the measured perf of its pool's image
// (ops/s per vCPU × the job's vCPUs) and the measured LAN in place of the
// grid file's, and says so with the time and the grid file's value.
//
// The job: 120 tasks of 1e9 operations and 1e6 bytes, efficiency 0.8, on
// the 4 free hosts of cluster a (the master takes one: 3 workers). In
// whole tasks, with an input every u = 1e6/b s on the LAN and slot i's
// first at i·u:
//   - grid file: b = 1000 Mbit/s = 1.25e8 B/s, n = min(3, ⌊1.25e8·1e9 /
//     (0.8·1e6·1e9)⌋ = 156) = 3, rate = min(3·1e9/1e9, 1.25e8/1e6) = 3
//     tasks/s: 6 slots of 2 s a task, 20 rounds each, the 6th slot's
//     ending at 6·0.008 + 40 = 40.048 s;
//   - the LAN measured at 40 Mbit/s = 5e6 B/s (u = 0.2 s), the perf the
//     grid file's: 1.2 + 40 = 41.2 s;
//   - measured 1e8 ops/s per vCPU, VMs of 2 vCPUs (2e8 ops/s), LAN 40
//     Mbit/s: n = min(3, ⌊5e6·1e9/(0.8·1e6·2e8)⌋ = 31) = 3, rate =
//     min(3·2e8/1e9, 5e6/1e6) = 0.6 tasks/s: 6 slots of 10 s a task,
//     1.2 + 200 = 201.2 s;
//   - the same with VMs of 1 vCPU: 0.3 tasks/s, 3 slots, 0.6 + 400 s;
//   - LAN 4 Mbit/s = 5e5 B/s and 2 vCPUs: n = ⌊5e5·1e9/(0.8·1e6·2e8)⌋ =
//     3, rate = min(0.6, 0.5) = 0.5 tasks/s; the link is the bottleneck
//     (6 slots take an input every 10/6 s, it delivers one every 2 s), so
//     task j ends at 10 + 2·j: 250 s, with 4 Mbit/s in the plan.
func TestPlanCalibrated(t *testing.T) {
	ctx := context.Background()
	s, err := gramvm.New(calibrationGrid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	job := &selection.Job{Name: "farm-1", Type: "farm", Tasks: 120, TaskOps: 1e9, TaskBytes: 1e6, Efficiency: 0.8,
		VM: selection.VM{VCPUs: 2, MemoryMiB: 1024}}
	free := gramvm.FreeHosts(hosts("a", "farm", 4), "farm", job.VM)
	plan := func(j *selection.Job) gramvm.Placement {
		t.Helper()
		pl, err := s.Plan(ctx, j, free, selection.Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		if !pl.Plan.Feasible {
			t.Fatalf("plan of %s: infeasible: %s", j.Name, pl.Plan.Reason)
		}
		return pl
	}
	runtime := func(what string, pl gramvm.Placement, want float64) {
		t.Helper()
		if math.Abs(pl.Plan.Runtime-want) > 1e-9*want {
			t.Errorf("%s: predicted %g s, want %g", what, pl.Plan.Runtime, want)
		}
	}
	pl := plan(job)
	runtime("the grid file's figures", pl, 40.048)
	if len(pl.Calibrated) != 0 {
		t.Errorf("nothing measured yet, the plan says %q", pl.Calibrated)
	}

	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if err := s.ObservePerf("a", "debian", 1e8, at); err != nil {
		t.Fatal(err)
	}
	if err := s.ObserveLAN("a", 40, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The pool's image is not known yet: the LAN is measured, the perf
	// is the grid file's (5e6 B/s feeds ⌊5e6·1e9/(0.8·1e6·1e9)⌋ = 6 ≥ 3
	// workers at 1 task/s each).
	pl = plan(job)
	runtime("measured LAN, configured perf", pl, 41.2)
	if want := []string{"a lan: 40 Mbit/s measured 2026-11-21T12:01:00Z, 1000 configured"}; !slices.Equal(pl.Calibrated, want) {
		t.Errorf("calibrated = %q, want %q", pl.Calibrated, want)
	}

	s.SetPoolImages(map[string]string{"farm": "debian", "other": ""})
	pl = plan(job)
	runtime("measured perf and LAN", pl, 201.2)
	want := []string{
		"a perf: 2e+08 ops/s (1e+08 per vCPU × 2 vCPUs, image debian) measured 2026-11-21T12:00:00Z, 1e+09 configured",
		"a lan: 40 Mbit/s measured 2026-11-21T12:01:00Z, 1000 configured",
	}
	if diff := cmp.Diff(want, pl.Calibrated); diff != "" {
		t.Errorf("calibrated (-want +got):\n%s", diff)
	}
	one := *job
	one.VM.VCPUs = 1
	runtime("VMs of 1 vCPU", plan(&one), 400.6)
	// A job of another pool (no image, or one not measured) keeps the
	// grid file's perf.
	other := *job
	other.Type = "other"
	runtime("a pool without an image", plan(&other), 41.2)

	// A newer LAN figure replaces the older one; the configured value
	// stays the grid file's.
	if err := s.ObserveLAN("a", 4, at.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	pl = plan(job)
	runtime("a slower LAN", pl, 250)
	if c := pl.Plan.Clusters[0]; c.BandwidthMbps != 4 || c.Machines != 3 {
		t.Errorf("cluster a in the plan: %+v, want 3 workers on 4 Mbit/s", c)
	}
	if got := pl.Calibrated[1]; got != "a lan: 4 Mbit/s measured 2026-11-21T12:02:00Z, 1000 configured" {
		t.Errorf("the LAN's line: %q", got)
	}
	wantLANs := []gramvm.LAN{{Cluster: "a", MeasuredMbps: 4, MeasuredAt: at.Add(2 * time.Minute), ConfiguredMbps: 1000}}
	if diff := cmp.Diff(wantLANs, s.LANs()); diff != "" {
		t.Errorf("LANs (-want +got):\n%s", diff)
	}
	wantPerfs := []gramvm.Perf{{Cluster: "a", Image: "debian", OpsPerVCPU: 1e8, MeasuredAt: at, ConfiguredPerf: 1e9}}
	if diff := cmp.Diff(wantPerfs, s.Perfs()); diff != "" {
		t.Errorf("perfs (-want +got):\n%s", diff)
	}
}

// TestObserveCalibrationRefused: bad figures are refused naming the
// field, and change nothing.
func TestObserveCalibrationRefused(t *testing.T) {
	s, err := gramvm.New(calibrationGrid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		err  error
		want error
		text string
	}{
		{"perf of no cluster", s.ObservePerf("mars", "debian", 1e8, at), gramvm.ErrNotFound, "no such cluster"},
		{"perf without an image", s.ObservePerf("a", "", 1e8, at), gramvm.ErrInvalid, "image"},
		{"perf 0", s.ObservePerf("a", "debian", 0, at), gramvm.ErrInvalid, "ops_per_vcpu"},
		{"perf NaN", s.ObservePerf("a", "debian", math.NaN(), at), gramvm.ErrInvalid, "ops_per_vcpu"},
		{"perf +Inf", s.ObservePerf("a", "debian", math.Inf(1), at), gramvm.ErrInvalid, "ops_per_vcpu"},
		{"lan of no cluster", s.ObserveLAN("mars", 10, at), gramvm.ErrNotFound, "no such cluster"},
		{"lan 0", s.ObserveLAN("a", 0, at), gramvm.ErrInvalid, "mbps"},
		{"lan NaN", s.ObserveLAN("a", math.NaN(), at), gramvm.ErrInvalid, "mbps"},
		{"link of no cluster", s.ObserveVMs("a", "mars", 10, at), gramvm.ErrNotFound, "no such link"},
		{"link -1", s.ObserveVMs("a", "b", -1, at), gramvm.ErrInvalid, "mbps"},
	} {
		if !errors.Is(tc.err, tc.want) || !strings.Contains(tc.err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v naming %s", tc.name, tc.err, tc.want, tc.text)
		}
	}
	if len(s.Perfs()) != 0 || len(s.LANs()) != 0 || s.Links()[0].Samples != 0 {
		t.Errorf("refused figures were kept: %v %v %v", s.Perfs(), s.LANs(), s.Links())
	}
}

// TestObserveVMs: a VM-to-VM measurement of a link enters its weighted
// average with the agents' probes, and the link and the plan say how the
// newest was taken.
func TestObserveVMs(t *testing.T) {
	s, err := gramvm.New(calibrationGrid(), 0.5)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	if err := s.Observe("a", "b", 8, at); err != nil {
		t.Fatal(err)
	}
	if got := s.Links()[0]; got.Via != gramvm.ViaAgents {
		t.Errorf("after an agents' probe: via %q", got.Via)
	}
	if err := s.ObserveVMs("b", "a", 6, at.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The VM-to-VM figure replaces the agents' average, and their probes
	// no longer move it (in a lab on one machine they measure the
	// loopback).
	want := gramvm.Link{Between: [2]string{"a", "b"}, ConfiguredMbps: 10, MeasuredMbps: 6, MeasuredAt: at.Add(time.Minute), Samples: 1,
		Via: gramvm.ViaVMs, AgentsMbps: 8}
	if diff := cmp.Diff(want, s.Links()[0]); diff != "" {
		t.Errorf("link (-want +got):\n%s", diff)
	}
	if err := s.Observe("a", "b", 9000, at.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.ObserveVMs("a", "b", 8, at.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	want = gramvm.Link{Between: [2]string{"a", "b"}, ConfiguredMbps: 10, MeasuredMbps: 7, MeasuredAt: at.Add(3 * time.Minute), Samples: 2,
		Via: gramvm.ViaVMs, AgentsMbps: 4504}
	if diff := cmp.Diff(want, s.Links()[0]); diff != "" {
		t.Errorf("after an agents' probe of 9000 Mbit/s and a second VM-to-VM figure (-want +got):\n%s", diff)
	}
	job := &selection.Job{Name: "j", Type: "p", Tasks: 10, TaskOps: 1e9, TaskBytes: 1e5, Efficiency: 0.8, VM: selection.VM{VCPUs: 1, MemoryMiB: 64}}
	free := gramvm.FreeHosts(slices.Concat(hosts("a", "p", 2), hosts("b", "p", 2)), "p", job.VM)
	pl, err := s.Plan(context.Background(), job, free, selection.Options{Master: -1})
	if err != nil {
		t.Fatal(err)
	}
	if wantLine := "a-b: 7 Mbit/s measured (2 samples, the newest 2026-11-21T12:03:00Z VM to VM), 10 configured"; !slices.Equal(pl.Measured, []string{wantLine}) {
		t.Errorf("measured = %q, want %q", pl.Measured, wantLine)
	}
}

// TestRunningJobAtMeasuredPerf: a running job's traffic follows the perf
// measured for its VMs. Its 2 workers in b (1 vCPU each, 1e9 operations
// and 1e5 bytes a task, 10 Mbit/s to its master in a) compute 2·1e9/1e9 =
// 2 tasks/s on the grid file's perf and send 2·1e5 B/s = 1.6 Mbit/s; at a
// measured 1e8 ops/s per vCPU, 0.2 tasks/s and 0.16 Mbit/s.
func TestRunningJobAtMeasuredPerf(t *testing.T) {
	ctx := context.Background()
	s, err := gramvm.New(calibrationGrid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	job := &selection.Job{Name: "old", Type: "farm", Tasks: 100, TaskOps: 1e9, TaskBytes: 1e5, Efficiency: 0.8, VM: selection.VM{VCPUs: 1, MemoryMiB: 1024}}
	rj := gramvm.RunningJob{ID: "j-1", Job: job, RemainingTasks: 50, Placement: gramvm.Placement{
		Master: gramvm.HostRef{Site: "a", Host: "a-0"},
		Plan: selection.Plan{Feasible: true, Master: "a", Rate: 2, Clusters: []selection.ClusterPlan{
			{Name: "a", Master: true, Machines: 0, BandwidthMbps: 1000, Rate: 0},
			{Name: "b", Machines: 2, BandwidthMbps: 10, Rate: 2},
		}}},
		VMs: []gramvm.TunableVM{{Name: "m", Site: "a", Host: "a-0", VCPUs: 1, MemoryMiB: 1024},
			{Name: "w1", Site: "b", Host: "b-0", VCPUs: 1, MemoryMiB: 1024}, {Name: "w2", Site: "b", Host: "b-1", VCPUs: 1, MemoryMiB: 1024}}}
	newJob := &selection.Job{Name: "new", Type: "farm", Tasks: 10, TaskOps: 1e9, TaskBytes: 0, Efficiency: 0.8, VM: selection.VM{VCPUs: 1, MemoryMiB: 1024}}
	free := gramvm.FreeHosts(hosts("a", "farm", 2), "farm", newJob.VM)
	load := func() float64 {
		t.Helper()
		_, ld, err := s.PlanLoaded(ctx, newJob, free, []gramvm.RunningJob{rj}, selection.Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		return ld.UplinkMbps["b"]
	}
	if got := load(); math.Abs(got-1.6) > 1e-9 {
		t.Errorf("on the grid file's perf: b's uplink carries %g Mbit/s, want 1.6", got)
	}
	s.SetPoolImages(map[string]string{"farm": "debian"})
	if err := s.ObservePerf("b", "debian", 1e8, time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if got := load(); math.Abs(got-0.16) > 1e-9 {
		t.Errorf("on the measured perf: b's uplink carries %g Mbit/s, want 0.16", got)
	}
}
