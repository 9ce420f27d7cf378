package selection

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/metasched/metasched/graph"
)

// paperPlanner plans the bundled job on the bundled three-cluster grid of
// the paper's real test (examples/grid-paper.yaml, examples/job-render.yaml),
// with changes to the job.
func paperPlanner(t *testing.T, edit func(*Job)) *Planner {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile("../examples/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	grid, err := graph.ParseGrid("grid-paper.yaml", read("grid-paper.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New(grid)
	if err != nil {
		t.Fatal(err)
	}
	job, err := ParseJob("job-render.yaml", read("job-render.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(job)
	}
	pl, err := NewPlanner(Problem{Graph: g, Job: job})
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// brief is what the hand computations below check of a cluster's part.
type briefPart struct {
	Name     string
	Machines int
	Mbps     float64
	Rate     float64
	Limit    Limit
}

// taskCounts returns the tasks of each cluster of a plan.
func taskCounts(p Plan) []int {
	var out []int
	for _, c := range p.Clusters {
		out = append(out, c.Tasks)
	}
	return out
}

func parts(p Plan) []briefPart {
	var out []briefPart
	for _, c := range p.Clusters {
		out = append(out, briefPart{c.Name, c.Machines, c.BandwidthMbps, c.Rate, c.Limit})
	}
	return out
}

var approx = cmpopts.EquateApprox(1e-9, 1e-12)

// The job: T = 300 tasks, Oper = 2e11, Comm = 5e7 bytes, θ = 0.8. Machines
// per byte/s at efficiency θ: k = Oper/(θ·Comm·perf) = 5e-6 on latam
// (perf 1e9) and 2.5e-6 on spain (perf 2e9). 1 Mbit/s = 125,000 bytes/s.
func TestPlanByHand(t *testing.T) {
	ctx := context.Background()
	latamA, spain := 0, 2

	t.Run("free choice: master in spain", func(t *testing.T) {
		// spain: LAN 1.25e8 B/s, ⌊1.25e8·2.5e-6⌋ = 312 ≥ 7 free after the
		//   master: 7 workers, rate min(7·2e9/2e11, 1.25e8/5e7) = 0.07.
		// latam-a: share of spain's 1.25e7 B/s uplink 3e9/8e9 → 4.6875e6;
		//   own uplink 1.25e6; widest path a–b–spain min(20, 8) = 8 Mbit/s
		//   = 1e6 (the direct link is 6): b = 1e6, ⌊1e6·5e-6⌋ = 5 ≥ 3 free:
		//   3 workers, rate min(3e9/2e11, 1e6/5e7) = 0.015.
		// latam-b: b = 1e6 (path 8), ⌊5⌋ = 5 = 5 free: 5 workers, rate
		//   min(0.025, 0.02) = 0.02.
		// R = 0.105 tasks/s, T/R = 2857.14 s, 16 machines allowed.
		// Whole tasks (2 vCPUs, 2 slots a VM): a slot's task takes
		//   σ = 2·2e11/2e9 = 200 s on spain, 400 s on latam; an input
		//   crosses spain's LAN in u = 5e7/1.25e8 = 0.4 s, the latam links
		//   in 50 s. spain (14 slots, 14·0.4 ≤ 200) and latam-a (6 slots,
		//   300 ≤ 400) are bound by their slots: slot i finishes
		//   ⌊(t − i·u)/σ⌋; latam-b (10 slots, 500 > 400) by its link:
		//   ⌊(t − 400)·0.02⌋. At 3004.8 s: spain's slots 1–12 have 15, 13
		//   and 14 have 14: 208; latam-a's slots 1–4 have 7, 5 and 6 have
		//   6: 40; latam-b ⌊52.096⌋ = 52: 300 tasks, spain's slot 12
		//   ending the 300th (at 3004.8 − ε, 299), so t* = 3004.8 s.
		// Sizing at 3004.8 s: spain's machines finish 30 (6 of them) and
		//   28; latam-a's 14, 14, 12; latam-b's 14, 14, then 12 each up
		//   to its link's 52. Greedy: spain's 7 (208), the four of 14
		//   (latam-a first on the tie: 264), then latam-a's 12 and two of
		//   latam-b's: 300. 14 workers and the master: 15 machines,
		//   latam-b's fifth machine left free (limit tasks).
		want := []briefPart{
			{"spain", 7, 1000, 0.07, LimitFree},
			{"latam-a", 3, 8, 0.015, LimitFree},
			{"latam-b", 4, 8, 0.02, LimitTasks},
		}
		for _, search := range []func() (Plan, error){
			func() (Plan, error) { return paperPlanner(t, nil).HillClimb(ctx, Options{Master: -1}) },
			func() (Plan, error) { return paperPlanner(t, nil).Exhaustive(ctx, Options{Master: -1}) },
		} {
			p, err := search()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, parts(p), approx); diff != "" {
				t.Errorf("%s: parts (-want +got):\n%s", p.Algorithm, diff)
			}
			if p.MasterForced {
				t.Errorf("%s: a plan of a free choice says its master was forced", p.Algorithm)
			}
			if p.Master != "spain" || p.Machines != 15 || math.Abs(p.Rate-0.105) > 1e-12 || math.Abs(p.Runtime-3004.8) > 1e-9 {
				t.Errorf("%s: master %s, %d machines, rate %g, runtime %g; want spain, 15, 0.105, 3004.8", p.Algorithm, p.Master, p.Machines, p.Rate, p.Runtime)
			}
			if got := taskCounts(p); !cmp.Equal(got, []int{208, 40, 52}) {
				t.Errorf("%s: tasks per cluster %v, want [208 40 52]", p.Algorithm, got)
			}
			if len(p.Excluded) != 0 {
				t.Errorf("%s: excluded %v, want none", p.Algorithm, p.Excluded)
			}
		}
	})

	t.Run("master forced on latam-a", func(t *testing.T) {
		// latam-a: LAN 1.25e7 B/s, ⌊62.5⌋ ≥ 2 free: 2 workers, 0.01.
		// With latam-b only: share = the whole 1.25e6 uplink of latam-a,
		//   own uplink 1.25e6, path 20 Mbit/s: b = 1.25e6 (own uplink
		//   first on a tie), ⌊6.25⌋ ≥ 5: 5 workers, rate min(0.025,
		//   0.025) = 0.025. R = 0.035, 8571.4 s.
		// Adding spain (w = 16e9, W = 21e9): latam-b's share falls to
		//   2.976e5 → 1 worker, 0.005; spain gets 9.524e5 → ⌊2.38⌋ = 2
		//   workers, min(0.02, 0.019048): R = 0.034048 < 0.035.
		// Whole tasks without spain: latam-a 2·2 slots of σ = 400 s, an
		//   input every 4 s on its LAN; latam-b 10 slots, an input every
		//   40 s (10·40 = 400: bound by its slots, just). Slot i finishes
		//   ⌊(t − i·u)/400⌋: at 8880 s latam-a's 4 slots 22 each (88),
		//   latam-b's slots 1 and 2 22, the other 8 21 (212): 300, latam-b's
		//   slot 2 ending the 300th at 2·40 + 22·400, so t* = 8880 s. With
		//   spain the shares of latam-a's uplink leave latam-b one worker
		//   and spain two, and the job ends at 9072 s.
		for _, search := range []func(*Planner) (Plan, error){
			func(pl *Planner) (Plan, error) { return pl.HillClimb(ctx, Options{Master: latamA}) },
			func(pl *Planner) (Plan, error) { return pl.Exhaustive(ctx, Options{Master: latamA}) },
		} {
			p, err := search(paperPlanner(t, nil))
			if err != nil {
				t.Fatal(err)
			}
			want := []briefPart{{"latam-a", 2, 100, 0.01, LimitFree}, {"latam-b", 5, 10, 0.025, LimitFree}}
			if diff := cmp.Diff(want, parts(p), approx); diff != "" {
				t.Errorf("%s: parts (-want +got):\n%s", p.Algorithm, diff)
			}
			if !p.MasterForced {
				t.Errorf("%s: the plan does not say its master was forced", p.Algorithm)
			}
			if math.Abs(p.Rate-0.035) > 1e-12 || p.Machines != 8 || math.Abs(p.Runtime-8880) > 1e-9 {
				t.Errorf("%s: rate %g with %d machines in %g s, want 0.035 with 8 in 8880 s", p.Algorithm, p.Rate, p.Machines, p.Runtime)
			}
			if len(p.Excluded) != 1 || !strings.Contains(p.Excluded[0].Reason, "makes the job end later, at 9072 s") {
				t.Errorf("%s: excluded %+v, want spain making the job end at 9072 s", p.Algorithm, p.Excluded)
			}
		}
	})

	t.Run("a data-free job", func(t *testing.T) {
		// Comm = 0: no bandwidth limit, so the master goes where it costs the
		// least compute: on a slow latam machine, R = (2·1e9 + 5·1e9 +
		// 8·2e9)/2e11 = 0.115 (0.11 with the master in spain). latam-a
		// and latam-b tie in everything but the name.
		// Whole tasks, no link bound: 2 slots a VM, a task 200 s on spain,
		// 400 s on latam. At 2600 s 8·2·13 + 7·2·6 = 292 < 300; at 2800 s
		// 8·28 + 7·14 = 322: t* = 2800 s. The 8 spain machines finish 224,
		// the other 76 take ⌈76/14⌉ = 6 latam machines: 15 with the
		// master, fluid rate 8·0.01 + 6·0.005 = 0.11. With the master in
		// spain t* is the same but 7·28 leaves 104 for 8 latam machines:
		// one more.
		p, err := paperPlanner(t, func(j *Job) { j.TaskBytes = 0 }).Exhaustive(ctx, Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		if p.Master != "latam-a" || p.Machines != 15 || math.Abs(p.Rate-0.11) > 1e-12 || p.Runtime != 2800 {
			t.Errorf("master %s, %d machines, rate %g, %g s; want latam-a, 15, 0.11, 2800 s", p.Master, p.Machines, p.Rate, p.Runtime)
		}
	})

	t.Run("efficiency bounds the master's cluster", func(t *testing.T) {
		// Comm = 5e9: k = 2e11/(0.8·5e9·2e9) = 2.5e-8 on spain; its LAN
		// feeds ⌊1.25e8·2.5e-8⌋ = ⌊3.125⌋ = 3 workers at θ, rate
		// min(3·0.01, 1.25e8/5e9) = 0.025.
		p := paperPlanner(t, func(j *Job) { j.TaskBytes = 5e9 }).Alone(spain)
		want := []briefPart{{"spain", 3, 1000, 0.025, LimitEfficiency}}
		if diff := cmp.Diff(want, parts(p), approx); diff != "" {
			t.Errorf("parts (-want +got):\n%s", diff)
		}
	})

	t.Run("clusters that cannot hold the VM", func(t *testing.T) {
		// 4 vCPUs: the latam machines have 2 cores; spain alone, 0.07.
		p, err := paperPlanner(t, func(j *Job) { j.VM.VCPUs = 4 }).HillClimb(ctx, Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		if p.Master != "spain" || math.Abs(p.Rate-0.07) > 1e-12 || len(p.Excluded) != 2 ||
			!strings.Contains(p.Excluded[0].Reason, "cannot hold the job's VM (4 vCPUs, 2048 MiB; a machine has 2 cores, 4096 MiB)") {
			t.Errorf("got master %s rate %g excluded %+v", p.Master, p.Rate, p.Excluded)
		}
	})

	t.Run("no cluster can run it", func(t *testing.T) {
		p, err := paperPlanner(t, func(j *Job) { j.VM.VCPUs = 16 }).HillClimb(ctx, Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		if p.Feasible || !strings.Contains(p.Reason, "no cluster can take part") || len(p.Excluded) != 3 {
			t.Errorf("got feasible %v reason %q excluded %d", p.Feasible, p.Reason, len(p.Excluded))
		}
	})
}

// Alone: spain 7 workers, 0.07 tasks/s, 4400 s; latam-a 2 workers,
// 0.01, 30000 s; latam-b 4 workers (one is the master), 0.02, 15200 s.
func TestBaselinesByHand(t *testing.T) {
	for _, tc := range []struct {
		alg   Algorithm
		ready []float64
		want  string
		start float64
	}{
		{MET, nil, "spain", 0},
		{MET, []float64{0, 0, 1e6}, "spain", 1e6},             // ignores availability
		{MCT, nil, "spain", 0},                                // 4400 < 15200 < 30000
		{MCT, []float64{0, 0, 20000}, "latam-b", 0},           // 24400 > 15200
		{OLB, []float64{0, 100, 50}, "latam-a", 0},            // free first, however slow
		{OLB, []float64{10, 10, 10}, "latam-a", 10},           // ties: grid order
		{OLB, []float64{100, 100, 5}, "spain", 5},             // free first
		{MCT, []float64{30000, 30000, 1e9}, "latam-b", 30000}, // 45200 < 60000
	} {
		p, err := paperPlanner(t, nil).Baseline(tc.alg, tc.ready)
		if err != nil {
			t.Fatal(err)
		}
		if p.Master != tc.want || p.Start != tc.start || len(p.Clusters) != 1 || len(p.Excluded) != 2 {
			t.Errorf("%s ready %v: got %s at %g (%d clusters, excluded %v), want %s at %g",
				tc.alg, tc.ready, p.Master, p.Start, len(p.Clusters), p.Excluded, tc.want, tc.start)
		}
	}
	pl := paperPlanner(t, nil)
	// Whole tasks, an input every 4 s on a latam LAN, 0.4 s on spain's:
	// latam-a 2 workers of 2 slots, 400 s a task: 75 rounds each, the 4th
	// slot's ending at 4·4 + 75·400 = 30016 s; latam-b 4 workers: 296
	// tasks in 37 rounds, then slots 1–4 a 38th, the 4th's at 16 + 15200;
	// spain 7 workers of 2 slots, 200 s a task: 294 in 21 rounds, then
	// slots 1–6 a 22nd, the 6th's at 2.4 + 4400.
	for c, want := range []float64{30016, 15216, 4402.4} {
		if got := pl.Alone(c).Runtime; math.Abs(got-want) > 1e-9 {
			t.Errorf("alone on %d: runtime %g, want %g", c, got, want)
		}
	}
	if _, err := pl.Baseline("fastest", nil); err == nil {
		t.Error("unknown baseline: no error")
	}
	if _, err := pl.Baseline(MCT, []float64{0}); err == nil {
		t.Error("ready times of the wrong length: no error")
	}
}

// TestRuntimeLimit: a job whose best plan would take longer than
// MaxRuntimeSeconds has no plan, and says why; just under the limit it has
// one.
func TestRuntimeLimit(t *testing.T) {
	// The paper's best plan runs 0.105 tasks/s at 2e11 operations a task.
	for _, tc := range []struct {
		ops      float64
		feasible bool
	}{{1e18, false}, {2e11, true}} {
		pl := paperPlanner(t, func(j *Job) { j.Tasks, j.TaskOps, j.TaskBytes = MaxTasks, tc.ops, 0 })
		p, err := pl.Exhaustive(context.Background(), Options{Master: -1})
		if err != nil {
			t.Fatal(err)
		}
		if p.Feasible != tc.feasible {
			t.Fatalf("task_ops %g: feasible %v (%s), want %v", tc.ops, p.Feasible, p.Reason, tc.feasible)
		}
		if !p.Feasible && !strings.Contains(p.Reason, "beyond the 3.1536e+08 s (ten years) a plan may take") {
			t.Errorf("reason %q does not give the limit", p.Reason)
		}
		if p.Feasible && !(p.Runtime <= MaxRuntimeSeconds) {
			t.Errorf("feasible plan of %g s", p.Runtime)
		}
	}
}

// TestTrimExcluded: a plan keeps its first clusters left out and counts
// the others; trimming again counts on; a short list stays as it is.
func TestTrimExcluded(t *testing.T) {
	p := Plan{Excluded: []Excluded{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	p.TrimExcluded(5)
	if len(p.Excluded) != 3 || p.ExcludedMore != 0 {
		t.Fatalf("trim to 5 of 3: %+v", p)
	}
	p.TrimExcluded(2)
	if len(p.Excluded) != 2 || p.Excluded[1].Name != "b" || p.ExcludedMore != 1 {
		t.Fatalf("trim to 2 of 3: %+v", p)
	}
	p.TrimExcluded(1)
	if len(p.Excluded) != 1 || p.Excluded[0].Name != "a" || p.ExcludedMore != 2 {
		t.Fatalf("trim to 1 of 2 (1 more): %+v", p)
	}
}

// TestExcludedReasons: a plan that explains only its first clusters left
// out is the plan that explains them all, trimmed: the same clusters,
// run time and machines, the same first reasons, the others counted.
func TestExcludedReasons(t *testing.T) {
	g := scaleGrid(t, 1000)
	for tasks := 1; tasks <= 8; tasks++ {
		job := &Job{Name: "j", Type: "a", Tasks: tasks, TaskOps: 1e9, TaskBytes: 1e6, Efficiency: DefaultEfficiency, VM: VM{VCPUs: 1, MemoryMiB: 1024}}
		plan := func(o Options) Plan {
			pl, err := NewPlanner(Problem{Graph: g, Job: job})
			if err != nil {
				t.Fatal(err)
			}
			p, err := pl.HillClimb(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		all := plan(Options{Master: -1})
		few := plan(Options{Master: -1, ExcludedReasons: 8})
		if len(all.Excluded) <= 8 {
			t.Fatalf("%d tasks: %d clusters left out, the test wants more than 8", tasks, len(all.Excluded))
		}
		all.TrimExcluded(8)
		if diff := cmp.Diff(all, few); diff != "" {
			t.Errorf("%d tasks: the plan explaining 8 clusters left out (-all trimmed +8):\n%s", tasks, diff)
		}
	}
}
