package replay

import (
	"context"
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

func parseGrid(t *testing.T, text string) *graph.Graph {
	t.Helper()
	grid, err := graph.ParseGrid("grid.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	g, err := graph.New(grid)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func exampleGrid(t *testing.T, name string) *graph.Graph {
	t.Helper()
	data, err := os.ReadFile("../../examples/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return parseGrid(t, string(data))
}

func exampleJob(t *testing.T) *selection.Job {
	t.Helper()
	data, err := os.ReadFile("../../examples/job-render.yaml")
	if err != nil {
		t.Fatal(err)
	}
	j, err := selection.ParseJob("job-render.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// cpuJob is a job that exchanges no data: a machine of perf 1e9 does one
// task per second.
func cpuJob() *selection.Job {
	return &selection.Job{Name: "cpu", Type: "cpu", Tasks: 1, TaskOps: 1e9, Efficiency: 0.8,
		VM: selection.VM{VCPUs: 1, MemoryMiB: 1024}}
}

// One cluster of 4 machines: the master and 3 workers do 30 tasks in 10 s.
const oneCluster = `
clusters:
  - {name: solo, machines: 4, cores: 4, memory_mib: 8192, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100}
`

// big alone: 6 workers, 6 tasks/s, 90 tasks in 15 s; small alone: 4
// workers of 0.9, 3.6 tasks/s, 90 tasks in ⌈90/4⌉ = 23 rounds of 1/0.9 s
// each, 25.56 s (whole tasks).
const twoClusters = `
clusters:
  - {name: big,   machines: 7, cores: 4, memory_mib: 8192, perf: 1.0e9, lan_mbps: 1000, uplink_mbps: 100}
  - {name: small, machines: 5, cores: 4, memory_mib: 8192, perf: 0.9e9, lan_mbps: 1000, uplink_mbps: 100}
links:
  - {between: [big, small], mbps: 100}
`

// simulate runs one algorithm on given arrival times.
func simulate(t *testing.T, g *graph.Graph, job *selection.Job, processes int, alg selection.Algorithm, arrivals ...float64) []Request {
	t.Helper()
	c := Config{Graph: g, Job: job, Requests: len(arrivals), Processes: processes, Arrivals: Uniform, Rate: 1,
		Algorithms: []selection.Algorithm{alg}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	res, err := run(context.Background(), c, arrivals)
	if err != nil {
		t.Fatal(err)
	}
	return res.Series[0].Requests
}

// times are a request's start, run and cluster, as checked by hand.
type times struct {
	Start, Run float64
	Clusters   string
}

func startsAndRuns(rs []Request) []times {
	var out []times
	for _, r := range rs {
		out = append(out, times{r.Start, r.Run, r.Clusters})
	}
	return out
}

var approx = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b)) })

// On one cluster the second request waits exactly until the first ends,
// whatever the algorithm.
func TestOneClusterSecondWaits(t *testing.T) {
	g := parseGrid(t, oneCluster)
	for _, alg := range selection.Algorithms {
		rs := simulate(t, g, cpuJob(), 30, alg, 0, 4)
		want := []Request{
			{Index: 1, Arrival: 0, Start: 0, Wait: 0, Run: 10, Total: 10, End: 10, Master: "solo", Machines: 4, Clusters: "solo"},
			{Index: 2, Arrival: 4, Start: 10, Wait: 6, Run: 10, Total: 16, End: 20, Master: "solo", Machines: 4, Clusters: "solo"},
		}
		if diff := cmp.Diff(want, rs); diff != "" {
			t.Errorf("%s (-want +got):\n%s", alg, diff)
		}
	}
}

// A request takes only the machines its plan uses: when the LAN feeds
// three workers of eight machines, the second request runs beside the
// first on the other four, and the third waits for the first's four.
func TestPartOfAClusterIsFree(t *testing.T) {
	g := parseGrid(t, `
clusters:
  - {name: solo, machines: 8, cores: 4, memory_mib: 8192, perf: 1.0e9, lan_mbps: 24, uplink_mbps: 100}
`)
	job := cpuJob()
	// b·Oper/(θ·Comm·perf) = 3e6·1e9/(0.8·1.25e6·1e9) = 3 workers; their
	// rate is bound by the LAN, 3e6/1.25e6 = 2.4 tasks/s, and in whole
	// tasks task j ends 1 s after its input: 30 tasks in 1 + 30/2.4 = 13.5 s.
	job.TaskBytes = 1.25e6
	for _, alg := range []selection.Algorithm{selection.HillClimb, selection.Exhaustive, selection.MCT} {
		rs := simulate(t, g, job, 30, alg, 0, 1, 2)
		want := []times{{0, 13.5, "solo"}, {1, 13.5, "solo"}, {13.5, 13.5, "solo"}}
		if diff := cmp.Diff(want, startsAndRuns(rs), approx); diff != "" {
			t.Errorf("%s (-want +got):\n%s", alg, diff)
		}
		if rs[0].Machines != 4 {
			t.Errorf("%s: %d machines, want 4 (3 workers and the master)", alg, rs[0].Machines)
		}
	}
}

// MCT places each request on the cluster that completes it first, and a
// request never starts before the one that arrived before it: the third
// could run on small at its arrival (7 s), but the second started at 15 s.
func TestMCTFasterClusterAndNoOvertaking(t *testing.T) {
	g := parseGrid(t, twoClusters)
	rs := simulate(t, g, cpuJob(), 90, selection.MCT, 0, 6, 7)
	// 1: big at 0 ends at 15 (small: 25.56). 2: small at 6 ends at 31.56,
	// big at 15 at 30: big. 3: from 15, small ends at 40.56, big (free at
	// 30) at 45.
	want := []times{{0, 15, "big"}, {15, 15, "big"}, {15, smallAlone, "small"}}
	if diff := cmp.Diff(want, startsAndRuns(rs), approx); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if rs[2].Wait != 8 || rs[1].Wait != 9 {
		t.Errorf("waits %g and %g, want 9 and 8", rs[1].Wait, rs[2].Wait)
	}
}

// OLB takes the cluster free first, however slow: small for the second
// request, where MCT waits for big.
func TestOLBFreeFirst(t *testing.T) {
	g := parseGrid(t, twoClusters)
	rs := simulate(t, g, cpuJob(), 90, selection.OLB, 0, 6, 7)
	// 1: both free at 0, big first in grid order. 2: small is free at 6.
	// 3: from 7, big is free again at 15, small at 31.
	want := []times{{0, 15, "big"}, {6, smallAlone, "small"}, {15, 15, "big"}}
	if diff := cmp.Diff(want, startsAndRuns(rs), approx); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// MET always takes the fastest cluster, even when it is busy and the
// other one idle.
func TestMETIgnoresAvailability(t *testing.T) {
	g := parseGrid(t, twoClusters)
	rs := simulate(t, g, cpuJob(), 90, selection.MET, 0, 6, 7)
	want := []times{{0, 15, "big"}, {15, 15, "big"}, {30, 15, "big"}}
	if diff := cmp.Diff(want, startsAndRuns(rs), approx); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// smallAlone is the run time of 90 tasks on small alone.
const smallAlone = 23 / 0.9

// Hill climbing uses both clusters: 10.6 tasks/s with the master on small
// (4·0.9 + 7), 10.5 on big (6 + 5·0.9), but in whole tasks both finish at
// 9 s (at 8/0.9 = 8.89 s 7·8 + 4·8 = 88 and 6·8 + 5·8 = 88 tasks; at 9 s
// 63 + 32 and 54 + 40), and both on 11 workers (63 + 4 small machines of 8
// tasks, 54 + 5): the name decides, big.
func TestHillClimbBothClusters(t *testing.T) {
	g := parseGrid(t, twoClusters)
	for _, alg := range []selection.Algorithm{selection.HillClimb, selection.Exhaustive} {
		rs := simulate(t, g, cpuJob(), 90, alg, 0, 6, 7)
		run := 9.0
		want := []times{{0, run, "big+small"}, {run, run, "big+small"}, {2 * run, run, "big+small"}}
		if diff := cmp.Diff(want, startsAndRuns(rs), approx); diff != "" {
			t.Errorf("%s (-want +got):\n%s", alg, diff)
		}
		if rs[1].Start != rs[0].End || rs[2].Start != rs[1].End || rs[0].Machines != 12 || rs[0].Master != "big" {
			t.Errorf("%s: %+v", alg, rs)
		}
	}
}

// A request waits for more machines when that completes sooner: on six
// machines, the first request takes four; the second could start at once
// with the other two (one worker, its first input in at 1/2.4 s, then 30
// tasks of 1 s: ending at 1 + 30.42 = 31.42 s), but waiting for the
// first's end gives three workers again (ending at 13.5 + 13.5 = 27 s).
func TestWaitsWhenSooner(t *testing.T) {
	g := parseGrid(t, `
clusters:
  - {name: solo, machines: 6, cores: 4, memory_mib: 8192, perf: 1.0e9, lan_mbps: 24, uplink_mbps: 100}
`)
	job := cpuJob()
	job.TaskBytes = 1.25e6
	for _, alg := range []selection.Algorithm{selection.HillClimb, selection.Exhaustive, selection.MCT} {
		rs := simulate(t, g, job, 30, alg, 0, 1, 2)
		// 3: from 13.5, two machines end at 13.5 + 30.42 = 43.92; at 27
		// the second's four are free too: 27 + 13.5 = 40.5.
		want := []times{{0, 13.5, "solo"}, {13.5, 13.5, "solo"}, {27, 13.5, "solo"}}
		if diff := cmp.Diff(want, startsAndRuns(rs), approx); diff != "" {
			t.Errorf("%s (-want +got):\n%s", alg, diff)
		}
	}
	// OLB takes the two machines at once.
	rs := simulate(t, g, job, 30, selection.OLB, 0, 1)
	if want := []times{{0, 13.5, "solo"}, {1, 30 + 1/2.4, "solo"}}; !cmp.Equal(want, startsAndRuns(rs), approx) {
		t.Errorf("olb: %+v, want %+v", startsAndRuns(rs), want)
	}
}

func paperConfig(t *testing.T, arrivals string, rate float64, seed uint64) Config {
	return Config{Graph: exampleGrid(t, "grid-8x8.yaml"), Job: exampleJob(t), Requests: 19, Processes: 300,
		Arrivals: arrivals, Rate: rate, Seed: seed, Algorithms: selection.Algorithms}
}

// The invariants of every run on the paper's eight-cluster grid: no
// request starts before it arrives or before the one before it, the
// figures add up, and the summary is their mean.
func TestInvariantsOnEightClusters(t *testing.T) {
	for _, arrivals := range []string{Uniform, Exponential} {
		for _, rate := range []float64{0.0005, 0.005} {
			res, err := Run(context.Background(), paperConfig(t, arrivals, rate, 7))
			if err != nil {
				t.Fatal(err)
			}
			var mct float64
			for _, s := range res.Series {
				if len(s.Requests) != 19 {
					t.Fatalf("%s: %d requests", s.Algorithm, len(s.Requests))
				}
				var sum, end float64
				for i, r := range s.Requests {
					if r.Index != i+1 || r.Arrival != res.Arrivals[i] || r.Start < r.Arrival ||
						(i > 0 && r.Start < s.Requests[i-1].Start) || r.Wait != r.Start-r.Arrival ||
						r.Total != r.Wait+r.Run || r.End != r.Start+r.Run || r.Run <= 0 ||
						r.Machines < 2 || r.Machines > 64 || !strings.HasPrefix(r.Clusters, r.Master) {
						t.Errorf("%s %g %s: request %+v", arrivals, rate, s.Algorithm, r)
					}
					sum += r.Total
					end = max(end, r.End)
				}
				if math.Abs(sum/19-s.Summary.MeanTotal) > 1e-9*sum || s.Summary.Makespan != end {
					t.Errorf("%s: summary %+v, mean total %g, makespan %g", s.Algorithm, s.Summary, sum/19, end)
				}
				if s.Algorithm == selection.MCT {
					mct = s.Summary.MeanTotal
				}
			}
			for _, s := range res.Series {
				if s.Summary.ImprovementVsMCT == nil || math.Abs(*s.Summary.ImprovementVsMCT-(1-s.Summary.MeanTotal/mct)) > 1e-12 {
					t.Errorf("%s: improvement %v", s.Algorithm, s.Summary.ImprovementVsMCT)
				}
			}
			if hc, mct := res.Series[0].Summary, res.Series[3].Summary; res.Series[0].Algorithm != selection.HillClimb || hc.MeanRun >= mct.MeanRun {
				t.Errorf("%s %g: hill climbing runs %g s on average, MCT %g s: want hill climbing faster", arrivals, rate, hc.MeanRun, mct.MeanRun)
			}
		}
	}
}

func TestSameSeedSameResult(t *testing.T) {
	c := paperConfig(t, Exponential, 0.001, 42)
	a, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("same seed, different results (-first +second):\n%s", diff)
	}
	c.Seed = 43
	d, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(a.Arrivals, d.Arrivals) {
		t.Error("seeds 42 and 43 give the same arrivals")
	}
}

func TestArrivalKinds(t *testing.T) {
	u := ArrivalTimes(Config{Requests: 2000, Arrivals: Uniform, Rate: 0.5, Seed: 1})
	e := ArrivalTimes(Config{Requests: 2000, Arrivals: Exponential, Rate: 0.5, Seed: 1})
	if u[0] != 0 || e[0] != 0 {
		t.Fatalf("first arrivals %g and %g, want 0", u[0], e[0])
	}
	if slices.Equal(u, e) {
		t.Fatal("uniform and exponential arrivals are the same")
	}
	// Both have mean gap 1/rate = 2 s; uniform gaps stay below 2/rate.
	for _, at := range [][]float64{u, e} {
		if mean := at[len(at)-1] / float64(len(at)-1); math.Abs(mean-2) > 0.15 {
			t.Errorf("mean gap %g, want about 2", mean)
		}
	}
	for i := 1; i < len(u); i++ {
		if g := u[i] - u[i-1]; g < 0 || g >= 4 {
			t.Fatalf("uniform gap %g outside [0, 4)", g)
		}
	}
	// The simulations differ too.
	c := paperConfig(t, Uniform, 0.002, 1)
	c.Algorithms = []selection.Algorithm{selection.MCT}
	ru, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	c.Arrivals = Exponential
	re, err := Run(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if cmp.Equal(ru, re) {
		t.Error("uniform and exponential arrivals give the same simulation")
	}
}

func TestBadConfig(t *testing.T) {
	g := exampleGrid(t, "grid-paper.yaml")
	job := exampleJob(t)
	good := func() Config {
		return Config{Graph: g, Job: job, Requests: 3, Processes: 10, Arrivals: Uniform, Rate: 0.1,
			Algorithms: []selection.Algorithm{selection.HillClimb, selection.MCT}}
	}
	for _, tt := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no graph", func(c *Config) { c.Graph = nil }, "graph: required"},
		{"no job", func(c *Config) { c.Job = nil }, "job: required"},
		{"requests", func(c *Config) { c.Requests = 0 }, "requests: must be >= 1, got 0"},
		{"processes", func(c *Config) { c.Processes = -2 }, "processes: must be >= 1 (tasks per request), got -2"},
		{"arrivals", func(c *Config) { c.Arrivals = "poisson" }, `arrivals: must be uniform or exponential, got "poisson"`},
		{"rate zero", func(c *Config) { c.Rate = 0 }, "rate: must be a number > 0 (requests per second), got 0"},
		{"rate NaN", func(c *Config) { c.Rate = math.NaN() }, "rate: must be a number > 0"},
		{"rate Inf", func(c *Config) { c.Rate = math.Inf(1) }, "rate: must be a number > 0"},
		{"no algorithms", func(c *Config) { c.Algorithms = nil }, "algorithms: none given"},
		{"unknown algorithm", func(c *Config) { c.Algorithms = []selection.Algorithm{"random"} },
			`algorithms: unknown algorithm "random": want one of hillclimb, exhaustive, met, mct, olb`},
		{"twice", func(c *Config) { c.Algorithms = []selection.Algorithm{"mct", "olb", "mct"} }, "algorithms: mct given twice"},
		{"restarts", func(c *Config) { c.Restarts = -1 }, "restarts: must be >= 1, or 0 for 3, got -1"},
		{"bad job", func(c *Config) { j := *job; j.TaskOps = 0; c.Job = &j }, "job: task_ops: must be a number > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := good()
			tt.edit(&c)
			_, err := Run(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	if _, err := Run(context.Background(), good()); err != nil {
		t.Errorf("good config: %v", err)
	}
}

// A request no plan can run is an error naming the request and why.
func TestInfeasibleRequest(t *testing.T) {
	job := *exampleJob(t)
	job.VM.VCPUs = 64
	for _, alg := range selection.Algorithms {
		c := Config{Graph: exampleGrid(t, "grid-paper.yaml"), Job: &job, Requests: 2, Processes: 10, Arrivals: Uniform,
			Rate: 1, Algorithms: []selection.Algorithm{alg}}
		_, err := Run(context.Background(), c)
		if !errors.Is(err, ErrInfeasible) || !strings.Contains(err.Error(), string(alg)+": request 1: ") ||
			!strings.Contains(err.Error(), "cannot hold the job's VM") && !strings.Contains(err.Error(), "no cluster can") {
			t.Errorf("%s: error %v", alg, err)
		}
	}
}

func TestCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Run(ctx, paperConfig(t, Uniform, 0.001, 1))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
}

func TestProgress(t *testing.T) {
	c := paperConfig(t, Uniform, 0.001, 1)
	c.Algorithms = []selection.Algorithm{selection.MCT, selection.OLB}
	var got []Progress
	c.Progress = func(p Progress) { got = append(got, p) }
	if _, err := Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if len(got) != 38 || got[0] != (Progress{selection.MCT, 1, 1, 38}) || got[37] != (Progress{selection.OLB, 19, 38, 38}) {
		t.Errorf("progress: %d reports, first %+v, last %+v", len(got), got[0], got[len(got)-1])
	}
}
