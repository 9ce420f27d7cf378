package sim

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/metasched/metasched/switching"
)

// independent is two pools that cannot switch: started with 2 and 3
// servers, each is an M/M/k queue.
func independent() *switching.Model {
	m := fig4(2)
	m.Pools = []switching.Pool{
		{Name: "web", ArrivalRate: 1.2, ServiceRate: 1, HoldingCost: 1},
		{Name: "db", ArrivalRate: 0.9, ServiceRate: 0.5, HoldingCost: 2},
	}
	m.Servers = 5
	m.SwitchRates = switching.PairMatrix(2, 0)
	m.SwitchCosts = switching.PairMatrix(2, 0)
	return m
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	r, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMMkMatchesErlangC: with no switching, each pool is an M/M/k queue, so
// the mean holding cost is Σ c_i L_i(k_i) with L from Erlang C. The 95%
// interval must cover it on at least 17 of 20 seeds (a binomial tail below
// 1.6% if the intervals were exact), and the per-pool means must be near L_i.
func TestMMkMatchesErlangC(t *testing.T) {
	m := independent()
	k := []int{2, 3}
	want := 0.0
	var wantJobs []float64
	for i, p := range m.Pools {
		l := switching.MeanInSystem(p.ArrivalRate, p.ServiceRate, k[i])
		want += p.HoldingCost * l
		wantJobs = append(wantJobs, l)
	}
	covered := 0
	for seed := range uint64(20) {
		r := run(t, Config{Model: m, Policies: []switching.Policy{switching.Never{}}, Completions: 100_000, Warmup: 0.1, Seed: seed, Start: k})
		if r.CI95[0] <= want && want <= r.CI95[1] {
			covered++
		}
		if r.Switches != 0 || r.TransitFraction != 0 {
			t.Errorf("seed %d: %d switches, transit %g with a policy that never switches", seed, r.Switches, r.TransitFraction)
		}
		for i := range wantJobs {
			if math.Abs(r.MeanJobs[i]-wantJobs[i]) > 0.1*wantJobs[i] {
				t.Errorf("seed %d: mean jobs of pool %d = %g, want %g ± 10%%", seed, i+1, r.MeanJobs[i], wantJobs[i])
			}
			if math.Abs(r.MeanServers[i]-float64(k[i])) > 1e-9 {
				t.Errorf("seed %d: mean servers of pool %d = %g, want %d", seed, i+1, r.MeanServers[i], k[i])
			}
		}
	}
	if covered < 17 {
		t.Errorf("the 95%% interval covered the exact %g on %d of 20 seeds", want, covered)
	}
	t.Logf("k = %v, exact cost %.4f, covered on %d/20 seeds", k, want, covered)
}

func TestSameSeedSameNumbers(t *testing.T) {
	m := fig4(3.4)
	h, err := switching.NewHeuristic(m, 5)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Model: m, Policies: []switching.Policy{h}, Completions: 20_000, Warmup: 0.1, Seed: 7}
	a, b := run(t, cfg), run(t, cfg)
	if diff := cmp.Diff(a, b, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("same seed, different results (-first +second):\n%s", diff)
	}
	cfg.Seed = 8
	if c := run(t, cfg); c.MeanCost == a.MeanCost {
		t.Errorf("seeds 7 and 8 gave the same mean cost %g", c.MeanCost)
	}
}

func TestCountsAndWindow(t *testing.T) {
	m := fig4(3.0)
	h, err := switching.NewHeuristic(m, 5)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, Config{Model: m, Policies: []switching.Policy{h}, Completions: 10_000, Warmup: 0.25, Seed: 1, QueueLimits: []int{15, 15, 15}})
	if r.Completions != 10_000 || r.WarmupCompletions != 2_500 {
		t.Errorf("completions %d, warm-up %d; want 10000 and 2500", r.Completions, r.WarmupCompletions)
	}
	// Every completion is an event, every arrival too: about twice the
	// completions, warm-up included.
	if r.Events < 2*12_500 {
		t.Errorf("events = %d, fewer than arrivals plus departures", r.Events)
	}
	if r.Switches == 0 || r.TransitFraction <= 0 || r.TransitFraction >= 1 {
		t.Errorf("switches %d, transit fraction %g: the heuristic switches at load 3", r.Switches, r.TransitFraction)
	}
	// Servers in place plus in transit are N at every instant, so their
	// time-averages add up to N.
	sum := r.TransitFraction * 4
	for _, k := range r.MeanServers {
		sum += k
	}
	if math.Abs(sum-4) > 1e-6 {
		t.Errorf("mean servers in place + in transit = %g, want 4", sum)
	}
	// Throughput: completions per unit time ≈ the arrival rate 3.
	if got := float64(r.Completions) / r.Time; math.Abs(got-3) > 0.15 {
		t.Errorf("throughput %g, want about 3", got)
	}
	if !(r.BoundaryFraction >= 0 && r.BoundaryFraction < 1) {
		t.Errorf("boundary fraction %g", r.BoundaryFraction)
	}
	lo, hi := r.CI95[0], r.CI95[1]
	if !(lo < r.MeanCost && r.MeanCost < hi) {
		t.Errorf("mean %g outside its interval [%g, %g]", r.MeanCost, lo, hi)
	}
	// The mean cost is Σ c_i · mean jobs_i.
	if got := 2*r.MeanJobs[0] + r.MeanJobs[1] + r.MeanJobs[2]; math.Abs(got-r.MeanCost) > 1e-9*got {
		t.Errorf("Σ c_i mean jobs = %g, mean cost %g", got, r.MeanCost)
	}
}

// TestPhases: with demand phases the pool whose phase it is gets the high
// rate, so over a long run each pool's arrivals average (high + (M−1)·low)/M
// and the phase changes happen at rate 1/mean.
func TestPhases(t *testing.T) {
	m := fig4(3)
	ph := &Phases{High: 2.4, Low: 0.3, Mean: 50}
	models := PhaseModels(m, ph)
	var pols []switching.Policy
	for _, pm := range models {
		if pm.Pools[0].ArrivalRate == 2.4 != (pm == models[0]) {
			t.Fatalf("phase model rates %v", pm.Pools)
		}
		h, err := switching.NewHeuristic(pm, 5)
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, h)
	}
	r := run(t, Config{Model: m, Policies: pols, Phases: ph, Completions: 200_000, Warmup: 0.05, Seed: 3})
	if r.PhaseChanges < 1000 {
		t.Errorf("%d phase changes in %g time units with mean length 50", r.PhaseChanges, r.Time)
	}
	rate := float64(r.PhaseChanges) / r.Time
	if math.Abs(rate-1.0/50) > 0.002 {
		t.Errorf("phase changes at rate %g, want 0.02", rate)
	}
	if got := float64(r.Completions) / r.Time; math.Abs(got-3) > 0.1 {
		t.Errorf("throughput %g, want the mean total arrival rate 3", got)
	}
	if r.MeanServers[0] == r.MeanServers[1] {
		t.Errorf("servers never moved between phases: %v", r.MeanServers)
	}
}

func TestStaticReachesTarget(t *testing.T) {
	m := fig4(2.6)
	best, err := switching.NewBestStatic(m)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, Config{Model: m, Policies: []switching.Policy{best}, Completions: 1000, Seed: 1})
	// Best static starts at the static allocation (2,1,1), which is the
	// only stable one at this load, so it never switches.
	want := best.Target()
	if r.Switches != 0 {
		t.Errorf("%d switches", r.Switches)
	}
	for i, k := range r.MeanServers {
		if math.Abs(k-float64(want[i])) > 1e-9 {
			t.Errorf("mean servers %v, want the target %v", r.MeanServers, want)
			break
		}
	}
}

type badPolicy struct{}

func (badPolicy) Decide(switching.State) switching.Action { return switching.ActionOf(1, 0) }

func TestBadInputs(t *testing.T) {
	m := fig4(3)
	never := []switching.Policy{switching.Never{}}
	bad := *m
	bad.Servers = -1
	for _, tt := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no model", Config{Policies: never, Completions: 100}, "no model"},
		{"few completions", Config{Model: m, Policies: never, Completions: 19}, "completions: must be at least 20"},
		{"warmup", Config{Model: m, Policies: never, Completions: 100, Warmup: -0.1}, "warmup"},
		{"warmup NaN", Config{Model: m, Policies: never, Completions: 100, Warmup: math.NaN()}, "warmup"},
		{"model", Config{Model: &bad, Policies: never, Completions: 100}, "servers"},
		{"policies", Config{Model: m, Completions: 100}, "0 policies given for 1 phases"},
		{"phase policies", Config{Model: m, Policies: never, Phases: &Phases{1, 0.1, 10}, Completions: 100}, "1 policies given for 3 phases"},
		{"phase mean", Config{Model: m, Policies: never, Phases: &Phases{1, 0.1, 0}, Completions: 100}, "phases: mean: must be > 0"},
		{"start sum", Config{Model: m, Policies: never, Completions: 100, Start: []int{1, 1, 1}}, "start: must give the servers of each of the 3 pools, 4 in all"},
		{"start negative", Config{Model: m, Policies: never, Completions: 100, Start: []int{5, -1, 0}}, "start[1]: must be >= 0"},
		{"phase high", Config{Model: m, Policies: never, Phases: &Phases{-1, 0.1, 1}, Completions: 100}, "phases: high: must be >= 0"},
		{"bad action", Config{Model: m, Policies: []switching.Policy{badPolicy{}}, Completions: 100}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.cfg)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	// A policy switching from a pool without servers is reported with the
	// state. Pool 2 starts with one server; switching 2→1 twice empties it.
	_, err := Run(context.Background(), Config{Model: m, Policies: []switching.Policy{badPolicy{}}, Completions: 100})
	if err == nil || !strings.Contains(err.Error(), "has none in place") || !strings.Contains(err.Error(), "servers [") {
		t.Errorf("error %v, want the action and the state", err)
	}
}

func TestCancel(t *testing.T) {
	m := fig4(3.4)
	h, err := switching.NewHeuristic(m, 5)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err = Run(ctx, Config{Model: m, Policies: []switching.Policy{h}, Completions: 100_000_000, Seed: 1,
		Progress: func(p Progress) {
			calls++
			if p.Target != 100_000_000 || p.Events == 0 {
				t.Errorf("progress %+v", p)
			}
			if calls == 3 {
				cancel()
			}
		}})
	if !errors.Is(err, ErrCanceled) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want ErrCanceled wrapping context.Canceled", err)
	}
}

// The boundary and beyond fractions: at J = 1 every queue is always at
// its J−1 = 0, and beyond it whenever a job waits or runs; at a J no
// queue reaches, never; in between, beyond J is rarer than at J−1.
func TestBoundaryAndBeyond(t *testing.T) {
	m := fig4(3.0)
	h, err := switching.NewHeuristic(m, 5)
	if err != nil {
		t.Fatal(err)
	}
	frac := func(js []int) (float64, float64) {
		r := run(t, Config{Model: m, Policies: []switching.Policy{h}, Completions: 20_000, Seed: 3, QueueLimits: js})
		return r.BoundaryFraction, r.BeyondFraction
	}
	if at, beyond := frac([]int{1, 1, 1}); at != 1 || !(beyond > 0.5 && beyond < 1) {
		t.Errorf("J = 1: at the boundary %g (want 1), beyond %g (want most of the time)", at, beyond)
	}
	if at, beyond := frac([]int{1000, 1000, 1000}); at != 0 || beyond != 0 {
		t.Errorf("J = 1000: %g and %g, want 0", at, beyond)
	}
	if at, beyond := frac([]int{6, 4, 1000}); !(beyond > 0 && beyond < at && at < 1) {
		t.Errorf("J = 6/4/1000: at the boundary %g, beyond %g: want 0 < beyond < at < 1", at, beyond)
	}
	r := run(t, Config{Model: m, Policies: []switching.Policy{h}, Completions: 20_000, Seed: 3})
	if !math.IsNaN(r.BoundaryFraction) || !math.IsNaN(r.BeyondFraction) {
		t.Errorf("without limits: %g and %g, want NaN", r.BoundaryFraction, r.BeyondFraction)
	}
	if err := (&Config{Model: m, Policies: []switching.Policy{h}, Completions: 20_000, QueueLimits: []int{5, 5}}).check(); err == nil ||
		err.Error() != "simulate: queue limits: must be one per pool (3), got 2" {
		t.Errorf("two limits for three pools: %v", err)
	}
	if err := (&Config{Model: m, Policies: []switching.Policy{h}, Completions: 20_000, QueueLimits: []int{5, 0, 5}}).check(); err == nil ||
		err.Error() != "simulate: queue limits[1]: must be >= 1, got 0" {
		t.Errorf("a limit of 0: %v", err)
	}
}

// Limits per demand phase: each phase's time is measured against its own
// table's J. The same limits in every phase measure what QueueLimits does;
// a phase with J = 1 is at its boundary all its time.
func TestPhaseQueueLimits(t *testing.T) {
	m := fig4(3.0)
	ph := &Phases{High: 2, Low: 0.5, Mean: 50}
	var pols []switching.Policy
	for _, pm := range PhaseModels(m, ph) {
		h, err := switching.NewHeuristic(pm, 5)
		if err != nil {
			t.Fatal(err)
		}
		pols = append(pols, h)
	}
	cfg := func(js []int, byPhase [][]int) Config {
		return Config{Model: m, Policies: pols, Phases: ph, Completions: 20_000, Seed: 3, QueueLimits: js, PhaseQueueLimits: byPhase}
	}
	one := run(t, cfg([]int{6, 6, 6}, nil))
	same := run(t, cfg(nil, [][]int{{6, 6, 6}, {6, 6, 6}, {6, 6, 6}}))
	if one.BoundaryFraction != same.BoundaryFraction || one.BeyondFraction != same.BeyondFraction || one.MeanCost != same.MeanCost {
		t.Errorf("the same limits in every phase: %g/%g, one set: %g/%g", same.BoundaryFraction, same.BeyondFraction, one.BoundaryFraction, one.BeyondFraction)
	}
	// Phase 1 at J = 1 (at its boundary whenever it runs), the others never.
	mixed := run(t, cfg(nil, [][]int{{1, 1, 1}, {1000, 1000, 1000}, {1000, 1000, 1000}}))
	if !(mixed.BoundaryFraction > 0.2 && mixed.BoundaryFraction < 0.5) {
		t.Errorf("J = 1 in one phase of three: at the boundary %g of the time, want about a third", mixed.BoundaryFraction)
	}
	for _, tc := range []struct {
		byPhase [][]int
		want    string
	}{
		{[][]int{{6, 6, 6}}, "simulate: phase queue limits: must be one per phase's policy (3), got 1"},
		{[][]int{{6, 6, 6}, {6, 6}, {6, 6, 6}}, "simulate: phase queue limits[1]: must be one per pool (3), got 2"},
		{[][]int{{6, 6, 6}, {6, 6, 6}, {6, 0, 6}}, "simulate: phase queue limits[2][1]: must be >= 1, got 0"},
	} {
		c := cfg(nil, tc.byPhase)
		if err := c.check(); err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.byPhase, err, tc.want)
		}
	}
}
