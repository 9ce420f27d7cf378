package gramvm_test

import (
	"context"
	"math"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

func TestPlanLoaded(t *testing.T) {
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	ctx := context.Background()
	opt := selection.Options{Master: -1}
	// No running jobs: exactly Plan.
	plain, err := sc.s.Plan(ctx, sc.newJob, sc.free, opt)
	if err != nil {
		t.Fatal(err)
	}
	got, load, err := sc.s.PlanLoaded(ctx, sc.newJob, sc.free, nil, opt)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(plain, got); diff != "" {
		t.Errorf("no running jobs: PlanLoaded differs from Plan (-Plan +PlanLoaded):\n%s", diff)
	}
	if diff := cmp.Diff(gramvm.Load{UplinkMbps: map[string]float64{}, Links: []gramvm.LinkLoad{}}, load); diff != "" {
		t.Errorf("no running jobs: load (-want +got):\n%s", diff)
	}
	// The running job moves 1.5 tasks/s · 8e5 bytes = 1.2e6 bytes/s =
	// 9.6 Mbit/s between far and home: far's uplink keeps 0.4 Mbit/s =
	// 5e4 bytes/s, which feeds ⌊5e4·1e9/(0.8·5e4·1e9)⌋ = ⌊1.25⌋ = 1
	// worker of the new job: far is limited by its uplink.
	got, load, err = sc.s.PlanLoaded(ctx, sc.newJob, sc.free, sc.running, opt)
	if err != nil {
		t.Fatal(err)
	}
	wantLoad := gramvm.Load{UplinkMbps: map[string]float64{"home": 9.6, "far": 9.6},
		Links: []gramvm.LinkLoad{{Between: [2]string{"home", "far"}, Mbps: 9.6}}}
	if diff := cmp.Diff(wantLoad, load, approx); diff != "" {
		t.Errorf("load (-want +got):\n%s", diff)
	}
	var far *selection.ClusterPlan
	for i := range got.Plan.Clusters {
		if got.Plan.Clusters[i].Name == "far" {
			far = &got.Plan.Clusters[i]
		}
	}
	if far == nil || far.Limit != selection.LimitUplink || far.Machines != 1 || math.Abs(far.BandwidthMbps-0.4) > 1e-9 {
		t.Errorf("far in the loaded plan = %+v, want 1 worker limited by a 0.4 Mbit/s uplink; plan %+v", far, got.Plan)
	}
	// Whole tasks: home's 2 workers (8 slots of 4 s a task, inputs every
	// 0.4 ms) finish 100 each by 400.0032 s; far's worker (4 slots, an
	// input every second over 5e4 bytes/s) has its slot i start at i s:
	// its 4th slot ends its 100th task at 404 s, T/R = 400 s.
	if math.Abs(got.Plan.Runtime-404) > 1e-6 {
		t.Errorf("loaded run time = %g s, want 404", got.Plan.Runtime)
	}
}

// TestUsage: on the paper's grid a job with its master in spain and
// workers in latam-a (0.2 tasks/s) and latam-b (0.3 tasks/s) of 1e6 bytes
// moves 0.2e6 bytes/s = 1.6 Mbit/s from latam-a and 2.4 Mbit/s from
// latam-b. The widest path from latam-a to spain goes through latam-b
// (min(20, 8) = 8 Mbit/s beats the direct 6): the latam-a–latam-b link
// carries 1.6, latam-b–spain 1.6 + 2.4 = 4.0, latam-a–spain nothing.
func TestUsage(t *testing.T) {
	job := &selection.Job{Name: "j", Type: "render", Tasks: 100, TaskOps: 1e9, TaskBytes: 1e6, Efficiency: 0.8, VM: selection.VM{VCPUs: 1, MemoryMiB: 1024}}
	rj := gramvm.RunningJob{ID: "j", Job: job, RemainingTasks: 50, Placement: gramvm.Placement{
		Master: gramvm.HostRef{Site: "spain", Host: "spain-0"},
		Plan: selection.Plan{Feasible: true, Master: "spain", Rate: 1, Clusters: []selection.ClusterPlan{
			{Name: "spain", Master: true, Machines: 1, BandwidthMbps: 1000, Rate: 0.5},
			{Name: "latam-a", Machines: 1, BandwidthMbps: 8, Rate: 0.2},
			{Name: "latam-b", Machines: 1, BandwidthMbps: 8, Rate: 0.3},
		}}}}
	got, err := gramvm.Usage(paperGrid(t), []gramvm.RunningJob{rj})
	if err != nil {
		t.Fatal(err)
	}
	want := gramvm.Load{
		UplinkMbps: map[string]float64{"latam-a": 1.6, "latam-b": 2.4, "spain": 4},
		Links: []gramvm.LinkLoad{
			{Between: [2]string{"latam-a", "latam-b"}, Mbps: 1.6},
			{Between: [2]string{"latam-b", "spain"}, Mbps: 4},
		},
	}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}

	// The VMs, when given, say the rate: two of the heavy job's workers
	// sharing far-0 make 5 machines, 1.25 tasks/s, 8 Mbit/s.
	sc := newScenario(t, "heavy", 8e5, 1200, 600)
	sc.running[0].VMs[2].Host = "far-0"
	got, err = gramvm.Usage(tuneGrid(), sc.running)
	if err != nil {
		t.Fatal(err)
	}
	want = gramvm.Load{UplinkMbps: map[string]float64{"home": 8, "far": 8}, Links: []gramvm.LinkLoad{{Between: [2]string{"home", "far"}, Mbps: 8}}}
	if diff := cmp.Diff(want, got, approx); diff != "" {
		t.Errorf("consolidated usage (-want +got):\n%s", diff)
	}
}

// TestUsageFollowsWidestPaths: a job with one worker in c and its master
// in m loads the links of a path whose narrowest link is graph's B(c, m).
func TestUsageFollowsWidestPaths(t *testing.T) {
	data, err := os.ReadFile("../examples/grid-8x8.yaml")
	if err != nil {
		t.Fatal(err)
	}
	grid, err := graph.ParseGrid("grid-8x8.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New(grid)
	if err != nil {
		t.Fatal(err)
	}
	mbps := map[[2]string]float64{}
	for _, l := range grid.Links {
		mbps[l.Between] = l.Mbps
	}
	job := &selection.Job{Name: "j", Type: "t", Tasks: 1, TaskOps: 1e9, TaskBytes: 1e3, Efficiency: 0.8, VM: selection.VM{VCPUs: 1, MemoryMiB: 1}}
	for m := range g.Len() {
		row := g.WidestFrom(m)
		for c := range g.Len() {
			if c == m {
				continue
			}
			mc, cc := grid.Clusters[m].Name, grid.Clusters[c].Name
			rj := gramvm.RunningJob{ID: "j", Job: job, Placement: gramvm.Placement{Plan: selection.Plan{Feasible: true, Master: mc,
				Clusters: []selection.ClusterPlan{{Name: mc, Master: true, BandwidthMbps: 1}, {Name: cc, Machines: 1, BandwidthMbps: 1, Rate: 1}}}}}
			ld, err := gramvm.Usage(grid, []gramvm.RunningJob{rj})
			if err != nil {
				t.Fatal(err)
			}
			narrowest := math.Inf(1)
			for _, l := range ld.Links {
				narrowest = min(narrowest, mbps[l.Between])
			}
			if narrowest != row[c] {
				t.Errorf("%s to %s: the loaded path's narrowest link is %g Mbit/s, B = %g", cc, mc, narrowest, row[c])
			}
		}
	}
}
