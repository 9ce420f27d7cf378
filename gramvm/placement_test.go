package gramvm_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/selection"
)

// renderJob is the paper's job (examples/job-render.yaml). Alone on the
// paper's grid it runs (T/R) 30,000 s on latam-a (2 workers), 15,000 s
// on latam-b (4) and 4,285.7 s on spain (7): spain needs all of its 8
// hosts, latam-a its 3 and latam-b its 5.
func renderJob(placement selection.Placement, master string) *selection.Job {
	return &selection.Job{Name: "render", Type: "render", Tasks: 300, TaskOps: 2e11, TaskBytes: 5e7, Efficiency: 0.8,
		VM: selection.VM{VCPUs: 1, MemoryMiB: 1024}, Placement: placement, Master: master}
}

// avail gives every cluster of the paper's grid its hosts, those of
// spain free after spainIn (the first spainNow of them now).
func avail(spainIn float64, spainNow int) map[string][]gramvm.HostFree {
	out := map[string][]gramvm.HostFree{}
	for _, c := range []struct {
		name string
		n    int
	}{{"latam-a", 3}, {"latam-b", 5}, {"spain", 8}} {
		for i := range c.n {
			h := gramvm.HostFree{Host: fmt.Sprintf("%s-%d", c.name, i)}
			if c.name == "spain" && i >= spainNow {
				h.In = spainIn
			}
			out[c.name] = append(out[c.name], h)
		}
	}
	return out
}

// TestBaselinesWaitForTheirCluster: MET takes the fastest cluster and
// waits for it, MCT the earliest completion, OLB the cluster ready first;
// a cluster is ready when the hosts its plan alone needs are free.
func TestBaselinesWaitForTheirCluster(t *testing.T) {
	s, err := gramvm.New(paperGrid(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// spain alone: 7 workers of one slot, 100 s a task, an input every
	// 0.4 s on its LAN: 294 tasks in 42 rounds, then slots 1–6 a 43rd,
	// the 6th's input in at 2.4 s (whole tasks). latam-a alone: 2 slots,
	// 200 s a task, an input every 4 s: 150 rounds, the 2nd slot's last
	// at 8 + 30000 s; latam-b: 4 slots, 75 rounds, at 16 + 15000 s.
	const spainAlone, latamA, latamB = 4302.4, 30008, 15016
	inf := math.Inf(1)
	for _, tc := range []struct {
		name      string
		placement selection.Placement
		spainIn   float64
		spainNow  int
		master    string
		start     float64
		runtime   float64
		infeasble string
	}{
		{"met, all free", selection.PlaceMET, 0, 8, "spain", 0, spainAlone, ""},
		{"mct, all free", selection.PlaceMCT, 0, 8, "spain", 0, spainAlone, ""},
		{"olb, all free: the first cluster", selection.PlaceOLB, 0, 8, "latam-a", 0, latamA, ""},
		{"met waits for spain", selection.PlaceMET, 10000, 0, "spain", 10000, spainAlone, ""},
		{"mct waits for spain: 10000 + 4302.4 < 15016", selection.PlaceMCT, 10000, 0, "spain", 10000, spainAlone, ""},
		{"mct takes latam-b: 20000 + 4302.4 > 15016", selection.PlaceMCT, 20000, 0, "latam-b", 0, latamB, ""},
		{"olb takes what is free", selection.PlaceOLB, 10000, 0, "latam-a", 0, latamA, ""},
		{"met waits for all of spain's hosts", selection.PlaceMET, 500, 4, "spain", 500, spainAlone, ""},
		{"met on a cluster whose hosts' times are unknown", selection.PlaceMET, inf, 0, "", 0, 0, "met chose cluster spain, and when its busy hosts will be free is not known"},
		{"mct leaves a cluster of unknown times", selection.PlaceMCT, inf, 0, "latam-b", 0, latamB, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pl, load, err := s.PlanAvailable(ctx, renderJob(tc.placement, ""), avail(tc.spainIn, tc.spainNow), nil, selection.Options{Master: -1})
			if err != nil {
				t.Fatal(err)
			}
			if load.UplinkMbps == nil {
				t.Errorf("no load returned")
			}
			p := pl.Plan
			if tc.infeasble != "" {
				if p.Feasible || p.Reason != tc.infeasble || pl.Master.Host != "" {
					t.Fatalf("plan %+v, want infeasible: %s", p, tc.infeasble)
				}
				return
			}
			if !p.Feasible || p.Algorithm != selection.Algorithm(tc.placement) || p.Master != tc.master || p.Start != tc.start ||
				math.Abs(p.Runtime-tc.runtime) > 1e-6 || len(p.Clusters) != 1 {
				t.Fatalf("plan %s on %s, start %g, run %g s, %d clusters; want %s, start %g, run %g s, one cluster (%+v)",
					p.Algorithm, p.Master, p.Start, p.Runtime, len(p.Clusters), tc.master, tc.start, tc.runtime, p)
			}
			if pl.Master.Site != tc.master || len(pl.Workers)+1 != p.Machines {
				t.Fatalf("hosts: master %+v and %d workers for %d machines", pl.Master, len(pl.Workers), p.Machines)
			}
			// The hosts are the cluster's, the free ones first: those a
			// job ready now uses, and those a waiting one waits for.
			for i, h := range append([]gramvm.HostRef{pl.Master}, pl.Workers...) {
				if want := fmt.Sprintf("%s-%d", tc.master, i); h.Host != want || h.Site != tc.master {
					t.Errorf("host %d: %+v, want %s", i, h, want)
				}
			}
			if len(p.Excluded) != 2 {
				t.Errorf("excluded %+v, want the two other clusters with their reasons", p.Excluded)
			}
		})
	}
}

// TestForcedMaster: the job's master is the plan's (and said so); a master
// without a free host now is a plan that waits, one the grid lacks an
// error.
func TestForcedMaster(t *testing.T) {
	s, err := gramvm.New(paperGrid(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	free := map[string][]string{"latam-a": {"a0", "a1", "a2"}, "latam-b": {"b0", "b1", "b2", "b3", "b4"},
		"spain": {"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}}
	pl, err := s.Plan(ctx, renderJob("", ""), free, selection.Options{Master: -1})
	if err != nil || pl.Plan.Master != "spain" || pl.Plan.MasterForced {
		t.Fatalf("free choice: master %s (forced %t), %v; want spain, chosen", pl.Plan.Master, pl.Plan.MasterForced, err)
	}
	for _, plan := range []func(*selection.Job, map[string][]string) (gramvm.Placement, error){
		func(j *selection.Job, free map[string][]string) (gramvm.Placement, error) {
			return s.Plan(ctx, j, free, selection.Options{Master: -1})
		},
		func(j *selection.Job, free map[string][]string) (gramvm.Placement, error) {
			pl, _, err := s.PlanLoaded(ctx, j, free, nil, selection.Options{Master: -1})
			return pl, err
		},
	} {
		pl, err := plan(renderJob(selection.PlaceGramVM, "latam-a"), free)
		if err != nil {
			t.Fatal(err)
		}
		// The paper's forced master: latam-a with latam-b, 8 machines, 300
		// tasks at 0.035 tasks/s, whole by 8760 s: latam-a's 2 slots 43
		// each (86), latam-b's 5 slots, an input every 40 s (5·40 = 200 s,
		// a task's time), ⌊(8760 − 40·i)/200⌋: 43, 43, 43, 43, 42 (214);
		// just before, latam-b's 4th slot has 42.
		if !pl.Plan.Feasible || pl.Plan.Master != "latam-a" || !pl.Plan.MasterForced || pl.Master.Site != "latam-a" ||
			pl.Plan.Machines != 8 || math.Abs(pl.Plan.Runtime-8760) > 1e-6 {
			t.Errorf("master forced on latam-a: %+v", pl.Plan)
		}
		busy := map[string][]string{"latam-b": free["latam-b"], "spain": free["spain"]}
		pl, err = plan(renderJob("", "latam-a"), busy)
		if err != nil {
			t.Fatal(err)
		}
		if pl.Plan.Feasible || !pl.Plan.MasterForced || pl.Plan.Reason != "the master is forced on latam-a, which has no free host for the job's VM now" {
			t.Errorf("master forced on a busy latam-a: %+v", pl.Plan)
		}
		big := renderJob("", "latam-a")
		big.VM = selection.VM{VCPUs: 4, MemoryMiB: 1024}
		pl, err = plan(big, free)
		if err != nil || pl.Plan.Feasible || !strings.Contains(pl.Plan.Reason, "the master is forced on latam-a, whose machines cannot hold the job's VM (4 vCPUs, 1024 MiB)") {
			t.Errorf("master forced where the VM does not fit: %+v, %v", pl.Plan, err)
		}
		if _, err := plan(renderJob("", "mars"), free); !errors.Is(err, gramvm.ErrInvalid) || !strings.Contains(err.Error(), `master: invalid request: the grid has no cluster "mars"`) {
			t.Errorf("master mars: %v", err)
		}
	}
}

func TestPlanAvailableBadInput(t *testing.T) {
	s, err := gramvm.New(paperGrid(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		job   *selection.Job
		avail map[string][]gramvm.HostFree
		opt   selection.Options
		want  string
	}{
		{"negative time", renderJob(selection.PlaceMET, ""), map[string][]gramvm.HostFree{"spain": {{Host: "s0", In: -1}}},
			selection.Options{Master: -1}, "host 0 (s0) of spain: its free time must be >= 0, got -1"},
		{"NaN time", renderJob(selection.PlaceGramVM, ""), map[string][]gramvm.HostFree{"spain": {{Host: "s0", In: math.NaN()}}},
			selection.Options{Master: -1}, "host 0 (s0) of spain: its free time must be >= 0, got NaN"},
		{"unknown placement", renderJob("fastest", ""), nil, selection.Options{Master: -1}, `placement: invalid request: unknown placement "fastest"`},
		{"a baseline with a master", renderJob(selection.PlaceMCT, ""), nil, selection.Options{Master: 1},
			"master: invalid request: placement mct chooses its one cluster itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.PlanAvailable(ctx, tc.job, tc.avail, nil, tc.opt)
			if !errors.Is(err, gramvm.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
