package policy

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rs/zerolog"

	"github.com/metasched/metasched/switching"
)

// rates are the rates of a two-pool test system, per second.
type rates struct {
	lambda, mu, c [2]float64
	zeta          float64
}

// small is the M = 2, N = 3 system of most tests: pool a is loaded and
// costly, pool b light; with J = 6 the state space has 20 configurations ×
// 36 queue states = 720 states and solves in milliseconds.
var small = rates{lambda: [2]float64{1, 0.4}, mu: [2]float64{0.6, 0.6}, c: [2]float64{2, 1}, zeta: 0.5}

const smallJ = 6

// inputs returns the inputs of pools a and b.
func (r rates) inputs(jobs, servers [2]int, transit [2]int) Inputs {
	in := Inputs{SwitchRate: r.zeta, Transit: [][]int{{0, transit[0]}, {transit[1], 0}}}
	for i, name := range []string{"a", "b"} {
		in.Pools = append(in.Pools, PoolInput{Name: name, Jobs: jobs[i], Servers: servers[i],
			Arrival: r.lambda[i], Service: r.mu[i], HoldingCost: r.c[i]})
	}
	return in
}

// states lists every state of N servers over the two pools (in place and in
// transit both ways) with queues 0..maxJob.
func (r rates) states(n, maxJob int) []Inputs {
	var all []Inputs
	for k0 := 0; k0 <= n; k0++ {
		for k1 := 0; k0+k1 <= n; k1++ {
			for m01 := 0; k0+k1+m01 <= n; m01++ {
				m10 := n - k0 - k1 - m01
				for j0 := 0; j0 <= maxJob; j0++ {
					for j1 := 0; j1 <= maxJob; j1++ {
						all = append(all, r.inputs([2]int{j0, j1}, [2]int{k0, k1}, [2]int{m01, m10}))
					}
				}
			}
		}
	}
	return all
}

// decision is the part of a Decision the policies are compared on.
type decision struct {
	From, To int
	Switch   bool
}

func actionDecision(a switching.Action) decision {
	if a == switching.NoAction {
		return decision{}
	}
	p := a.Pair(2)
	return decision{From: p.From, To: p.To, Switch: true}
}

// newEngine returns an engine closed at the end of the test.
func newEngine(t *testing.T, cfg Config, log zerolog.Logger) *Engine {
	t.Helper()
	e, err := New(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func mustDecide(t *testing.T, e *Engine, in Inputs) Decision {
	t.Helper()
	d, err := e.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// wait waits for the background solve to end.
func wait(t *testing.T, e *Engine) {
	t.Helper()
	select {
	case <-e.Idle():
	case <-time.After(time.Minute):
		t.Fatal("the background solve did not end within a minute")
	}
}

// solved returns the optimal table of the average criterion for the
// model the engine builds from in.
func solved(t *testing.T, in Inputs, j int) *switching.Table {
	t.Helper()
	m, _, err := Model(in, j)
	if err != nil {
		t.Fatal(err)
	}
	sol, err := switching.Solve(context.Background(), m, switching.SolveOptions{Criterion: switching.Average})
	if err != nil {
		t.Fatal(err)
	}
	if !sol.Converged {
		t.Fatalf("test model did not converge")
	}
	return sol.Table
}

func tableFile(t *testing.T, tab *switching.Table) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := switching.WriteTable(&buf, tab); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sameAsPolicy checks the engine's decisions in every state against p's.
func sameAsPolicy(t *testing.T, e *Engine, p switching.Policy, policyName string, all []Inputs) (switches int) {
	t.Helper()
	for _, in := range all {
		_, st, err := Model(in, smallJ)
		if err != nil {
			t.Fatal(err)
		}
		d := mustDecide(t, e, in)
		want := actionDecision(p.Decide(st))
		if got := (decision{d.From, d.To, d.Switch}); got != want || d.Policy != policyName {
			t.Fatalf("in %s: %+v by %q, want %+v by %q", describe(in), got, d.Policy, want, policyName)
		}
		if d.Switch {
			switches++
		}
	}
	return switches
}

func TestConfig(t *testing.T) {
	file := tableFile(t, solved(t, small.inputs([2]int{}, [2]int{2, 1}, [2]int{}), smallJ))
	tests := []struct {
		name string
		cfg  Config
		want string // an error containing this; "" for none
	}{
		{"heuristic", Config{Name: Heuristic}, ""},
		{"optimal table", Config{Name: Optimal, Table: file}, ""},
		{"optimal solve", Config{Name: Optimal, Solve: true}, ""},
		{"unknown", Config{Name: "magic"}, `name: "magic" is not one of heuristic, optimal, static, best-static, none`},
		{"negative K", Config{Name: Heuristic, K: -1}, "K: must be >= 1, got -1"},
		{"K on static", Config{Name: Static, K: 3}, "K: applies to the heuristic policy only"},
		{"table on heuristic", Config{Name: Heuristic, Table: file}, "apply to the optimal policy only"},
		{"optimal with both", Config{Name: Optimal, Table: file, Solve: true}, "give either a table or solve, not both"},
		{"optimal with neither", Config{Name: Optimal}, "optimal needs a table or solve"},
		{"queue limit", Config{Name: Heuristic, QueueLimit: 1}, "queue limit: must be >= 2, got 1"},
		{"drift", Config{Name: Heuristic, Drift: -0.1}, "drift: must be a finite number > 0, got -0.1"},
		{"max states", Config{Name: Heuristic, MaxStates: -5}, "max states: must be >= 0, got -5"},
		{"bad table", Config{Name: Optimal, Table: []byte("not gzip"), TableSource: "x.table"}, "policy table x.table: not a valid policy table"},
		{"table over the limit", Config{Name: Optimal, Table: file, MaxStates: 100}, "state space too large: 720 states"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := New(context.Background(), tt.cfg, zerolog.Nop())
			if e != nil {
				defer e.Close()
			}
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

func TestHeuristicDecidesLikeSwitching(t *testing.T) {
	e := newEngine(t, Config{Name: Heuristic, K: 3}, zerolog.Nop())
	all := small.states(3, 8)
	m, _, err := Model(all[0], DefaultQueueLimit)
	if err != nil {
		t.Fatal(err)
	}
	h0, err := switching.NewHeuristic(m, 3)
	if err != nil {
		t.Fatal(err)
	}
	h := h0.Clipped()
	if n := sameAsPolicy(t, e, h, "heuristic K=3", all); n == 0 {
		t.Fatal("the heuristic never switched: the test states are too tame")
	}
	v := e.View()
	if v.Configured != "heuristic K=3" || v.InForce != "heuristic K=3" || v.Decisions != len(all) || v.Note != "" {
		t.Errorf("view %+v", v)
	}
}

func TestLongQueueGetsAHost(t *testing.T) {
	e := newEngine(t, Config{Name: Heuristic}, zerolog.Nop())
	d := mustDecide(t, e, small.inputs([2]int{9, 0}, [2]int{1, 2}, [2]int{}))
	want := Decision{From: 1, To: 0, Switch: true, Policy: "heuristic K=5",
		Why: "switch a host from b to a in j=(9,0) k=(1,2), 0 in transit"}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("decision (-want +got):\n%s", diff)
	}
	d = mustDecide(t, e, small.inputs([2]int{0, 0}, [2]int{1, 2}, [2]int{}))
	if d.Switch {
		t.Errorf("empty queues: %+v, want no switch", d)
	}
	v := e.View()
	if v.Decisions != 2 || v.Switches != 1 || v.LastSwitch != want || v.Last.Switch || v.LastSwitchAt.IsZero() {
		t.Errorf("view %+v", v)
	}
}

func TestNoneNeverSwitches(t *testing.T) {
	e := newEngine(t, Config{Name: None}, zerolog.Nop())
	sameAsPolicy(t, e, switching.Never{}, "none", small.states(3, 8))
	if v := e.View(); v.Switches != 0 || v.InForce != "none" {
		t.Errorf("view %+v", v)
	}
}

func TestNothingToSwitch(t *testing.T) {
	e := newEngine(t, Config{Name: Heuristic}, zerolog.Nop())
	one := Inputs{Pools: []PoolInput{{Name: "a", Jobs: 5, Servers: 2, Arrival: 1, Service: 1, HoldingCost: 1}}}
	noHosts := small.inputs([2]int{5, 0}, [2]int{0, 0}, [2]int{})
	for _, in := range []Inputs{one, noHosts} {
		if d := mustDecide(t, e, in); d.Switch || !strings.Contains(d.Why, "nothing to switch") {
			t.Errorf("%+v, want no switch", d)
		}
	}
	if _, err := e.Decide(small.inputs([2]int{-1, 0}, [2]int{1, 1}, [2]int{})); !errors.Is(err, ErrBadInputs) {
		t.Errorf("negative queue: %v, want ErrBadInputs", err)
	}
}

func TestStatic(t *testing.T) {
	e := newEngine(t, Config{Name: Static}, zerolog.Nop())
	even := rates{lambda: [2]float64{1, 1}, mu: [2]float64{1, 1}, c: [2]float64{1, 1}, zeta: 0.5}
	// N = 3, equal loads: quotas (1.5, 1.5) tie, pool a gives one up: (1, 2).
	steps := []struct {
		name    string
		r       rates
		servers [2]int
		transit [2]int
		want    decision
		target  string
	}{
		{"toward the target", even, [2]int{3, 0}, [2]int{}, decision{0, 1, true}, "(1,2)"},
		{"heading there", even, [2]int{2, 0}, [2]int{1, 0}, decision{0, 1, true}, "(1,2)"},
		{"at the target", even, [2]int{1, 2}, [2]int{}, decision{}, "(1,2)"},
		// λ_a +10% would make the target (2, 1), but that is within the
		// drift: the target stays.
		{"small drift keeps the target", rates{lambda: [2]float64{1.1, 1}, mu: even.mu, c: even.c, zeta: 0.5},
			[2]int{1, 2}, [2]int{}, decision{}, "(1,2)"},
		// λ_a ×3: quota 3·3/4 = 2.25 → (2, 1).
		{"drift recomputes", rates{lambda: [2]float64{3, 1}, mu: even.mu, c: even.c, zeta: 0.5},
			[2]int{1, 2}, [2]int{}, decision{1, 0, true}, "(2,1)"},
		// Another N recomputes too: 4 hosts at λ = (3, 1) → (3, 1).
		{"another N recomputes", rates{lambda: [2]float64{3, 1}, mu: even.mu, c: even.c, zeta: 0.5},
			[2]int{2, 2}, [2]int{}, decision{1, 0, true}, "(3,1)"},
	}
	for _, s := range steps {
		d := mustDecide(t, e, s.r.inputs([2]int{0, 0}, s.servers, s.transit))
		if got := (decision{d.From, d.To, d.Switch}); got != s.want || d.Policy != "static" || !strings.Contains(d.Why, "target "+s.target) {
			t.Errorf("%s: %+v, want %+v toward %s", s.name, d, s.want, s.target)
		}
	}
}

func TestBestStatic(t *testing.T) {
	e := newEngine(t, Config{Name: BestStatic}, zerolog.Nop())
	// ρ = (1.5, 0.2) with 3 hosts: only (2, 1) is stable.
	r := rates{lambda: [2]float64{1.5, 0.2}, mu: [2]float64{1, 1}, c: [2]float64{1, 1}, zeta: 0.5}
	d := mustDecide(t, e, r.inputs([2]int{}, [2]int{1, 2}, [2]int{}))
	if d.Policy != "best-static" || !d.Switch || d.From != 1 || d.To != 0 || !strings.Contains(d.Why, "target (2,1)") {
		t.Errorf("%+v, want a switch b → a toward (2,1) by best-static", d)
	}
	// ρ = (5, 5) with 3 hosts: no allocation is stable.
	heavy := rates{lambda: [2]float64{5, 5}, mu: [2]float64{1, 1}, c: [2]float64{1, 1}, zeta: 0.5}
	d = mustDecide(t, e, heavy.inputs([2]int{}, [2]int{3, 0}, [2]int{}))
	if d.Policy != "static" || !d.Switch {
		t.Errorf("%+v, want a switch by the static policy", d)
	}
	if v := e.View(); v.InForce != "static" || !strings.Contains(v.Note, "no allocation of the servers is stable") {
		t.Errorf("view %+v, want the static fallback noted", v)
	}
}

func TestSolveInBackground(t *testing.T) {
	var logs bytes.Buffer
	e := newEngine(t, Config{Name: Optimal, Solve: true, QueueLimit: smallJ}, zerolog.New(&logs))
	e.hold = make(chan struct{})
	if v := e.View(); v.Configured != "optimal (solved at start)" || v.InForce != "heuristic K=5" || !strings.Contains(v.Note, "first decision") {
		t.Errorf("view before the first decision %+v", v)
	}
	all := small.states(3, 8)
	m, _, err := Model(all[0], smallJ)
	if err != nil {
		t.Fatal(err)
	}
	h0, err := switching.NewHeuristic(m, DefaultK)
	if err != nil {
		t.Fatal(err)
	}
	h := h0.Clipped()
	// While the solve is held, every decision is the heuristic's, and one
	// solve only was started.
	sameAsPolicy(t, e, h, "heuristic K=5", all)
	v := e.View()
	if v.Solving == nil || v.Solving.States != 720 || v.Solving.Reason != "no optimal table yet" || v.Table != nil {
		t.Fatalf("view while solving %+v", v)
	}
	if !strings.Contains(v.Note, "solving in the background") {
		t.Errorf("note %q", v.Note)
	}
	close(e.hold)
	wait(t, e)
	v = e.View()
	if v.Solving != nil || v.Table == nil || v.Table.Source != "solved" || v.Table.States != 720 || !v.Table.Converged || v.Table.SolvedAt.IsZero() {
		t.Fatalf("view after the solve %+v", v)
	}
	wantRates := Rates{Servers: 3, Pools: []string{"a", "b"}, Arrival: small.lambda[:], Service: small.mu[:], HoldingCost: small.c[:], SwitchRate: small.zeta}
	if diff := cmp.Diff(wantRates, v.Table.Rates); diff != "" {
		t.Errorf("rates solved for (-want +got):\n%s", diff)
	}
	if n := sameAsPolicy(t, e, solved(t, all[0], smallJ), "optimal (solved)", all); n == 0 {
		t.Fatal("the table never switched: the test states are too tame")
	}
	if v := e.View(); v.InForce != "optimal (solved)" || v.Note != "" {
		t.Errorf("view with the table %+v", v)
	}
	if !strings.Contains(logs.String(), "optimal policy solved") {
		t.Errorf("no log of the solve:\n%s", logs.String())
	}
}

func TestTooLargeRefused(t *testing.T) {
	var logs bytes.Buffer
	e := newEngine(t, Config{Name: Optimal, Solve: true, QueueLimit: smallJ, MaxStates: 100}, zerolog.New(&logs))
	in := small.inputs([2]int{9, 0}, [2]int{1, 2}, [2]int{})
	for range 2 {
		if d := mustDecide(t, e, in); d.Policy != "heuristic K=5" || !d.Switch {
			t.Fatalf("%+v, want a switch by the heuristic", d)
		}
	}
	select {
	case <-e.Idle():
	default:
		t.Fatal("a solve is running")
	}
	v := e.View()
	m, _, err := Model(in, smallJ)
	if err != nil {
		t.Fatal(err)
	}
	memory := switching.FormatBytes(720 * switching.StateBytes(m, switching.Krylov))
	for _, want := range []string{"720 states", memory, "limit of 100 states", "no solve is tried again"} {
		if !strings.Contains(v.Note, want) {
			t.Errorf("note %q lacks %q", v.Note, want)
		}
	}
	for _, want := range []string{"720 states", memory, "limit of 100 states", `"states":720`, `"limit":100`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if v.Solving != nil || v.Table != nil || v.InForce != "heuristic K=5" {
		t.Errorf("view %+v", v)
	}
}

func TestTableFile(t *testing.T) {
	all := small.states(3, 8)
	tab := solved(t, all[0], smallJ)
	// The engine's own queue limit differs from the table's: the table
	// keeps its J.
	e := newEngine(t, Config{Name: Optimal, Table: tableFile(t, tab), TableSource: "small.table"}, zerolog.Nop())
	if n := sameAsPolicy(t, e, tab, "optimal (table small.table)", all); n == 0 {
		t.Fatal("the table never switched")
	}
	v := e.View()
	if v.Configured != "optimal (table small.table)" || v.Solving != nil || v.Table == nil || v.Table.Source != "small.table" || v.Table.States != 720 || v.Note != "" {
		t.Errorf("view %+v", v)
	}
}

func TestDriftResolves(t *testing.T) {
	all := small.states(3, 8)
	tab := solved(t, all[0], smallJ)
	e := newEngine(t, Config{Name: Optimal, Table: tableFile(t, tab), TableSource: "small.table", QueueLimit: 10}, zerolog.Nop())
	in := small.inputs([2]int{3, 0}, [2]int{1, 2}, [2]int{})
	if d := mustDecide(t, e, in); d.Policy != "optimal (table small.table)" {
		t.Fatalf("%+v, want the table", d)
	}
	// λ_a +40%: within the drift, the table stays.
	near := small
	near.lambda[0] = 1.4
	if d := mustDecide(t, e, near.inputs([2]int{3, 0}, [2]int{1, 2}, [2]int{})); d.Policy != "optimal (table small.table)" {
		t.Fatalf("%+v, want the table", d)
	}
	if v := e.View(); v.Solving != nil {
		t.Fatalf("a small drift started a solve: %+v", v.Solving)
	}
	// λ_a ×2: the heuristic decides and a re-solve starts.
	e.hold = make(chan struct{})
	far := small
	far.lambda[0] = 2
	farIn := far.inputs([2]int{3, 0}, [2]int{1, 2}, [2]int{})
	if d := mustDecide(t, e, farIn); d.Policy != "heuristic K=5" {
		t.Fatalf("%+v, want the heuristic", d)
	}
	v := e.View()
	if v.Solving == nil || !strings.Contains(v.Solving.Reason, "the arrival rate of a moved +100% (1/s → 2/s)") {
		t.Fatalf("solving %+v", v.Solving)
	}
	if !strings.Contains(v.Note, "drifted") || v.Table.Source != "small.table" {
		t.Errorf("view %+v", v)
	}
	close(e.hold)
	wait(t, e)
	d := mustDecide(t, e, farIn)
	v = e.View()
	if d.Policy != "optimal (solved)" || v.Table.Rates.Arrival[0] != 2 || v.Note != "" {
		t.Fatalf("%+v, view %+v: want the re-solved table", d, v)
	}
	// Re-solved on the table's model: J = 6 of the file, not the engine's 10.
	if v.Table.States != 720 {
		t.Errorf("re-solved table has %d states, want 720 (J = 6)", v.Table.States)
	}
	sameAsPolicy(t, e, solved(t, farIn, smallJ), "optimal (solved)", far.states(3, 8))
}

func TestTableForOtherPools(t *testing.T) {
	other := Inputs{Pools: []PoolInput{
		{Name: "x", Servers: 2, Arrival: 1, Service: 0.6, HoldingCost: 2},
		{Name: "y", Servers: 1, Arrival: 0.4, Service: 0.6, HoldingCost: 1},
	}, SwitchRate: 0.5}
	e := newEngine(t, Config{Name: Optimal, Table: tableFile(t, solved(t, other, smallJ)), TableSource: "xy.table", QueueLimit: smallJ}, zerolog.Nop())
	e.hold = make(chan struct{})
	in := small.inputs([2]int{3, 0}, [2]int{1, 2}, [2]int{})
	if d := mustDecide(t, e, in); d.Policy != "heuristic K=5" {
		t.Fatalf("%+v, want the heuristic", d)
	}
	v := e.View()
	if want := "the table is for pools (x, y), the live pools are (a, b)"; !strings.Contains(v.Note, want) {
		t.Errorf("note %q lacks %q", v.Note, want)
	}
	close(e.hold)
	wait(t, e)
	if d := mustDecide(t, e, in); d.Policy != "optimal (solved)" {
		t.Errorf("%+v, want the table solved for the live pools", d)
	}

	// A table for N = 3 with 4 hosts live.
	e = newEngine(t, Config{Name: Optimal, Table: tableFile(t, solved(t, in, smallJ)), TableSource: "small.table", QueueLimit: smallJ}, zerolog.Nop())
	e.hold = make(chan struct{})
	if d := mustDecide(t, e, small.inputs([2]int{3, 0}, [2]int{2, 2}, [2]int{})); d.Policy != "heuristic K=5" {
		t.Fatalf("%+v, want the heuristic", d)
	}
	if want := "the table is for N=3 hosts, the pools have 4"; !strings.Contains(e.View().Note, want) {
		t.Errorf("note %q lacks %q", e.View().Note, want)
	}
	// Back to 3 hosts, the table fits again.
	if d := mustDecide(t, e, in); d.Policy != "optimal (table small.table)" {
		t.Errorf("%+v, want the table", d)
	}
}

func TestCloseStopsTheSolve(t *testing.T) {
	before := runtime.NumGoroutine()
	var logs bytes.Buffer
	e, err := New(context.Background(), Config{Name: Optimal, Solve: true}, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	// M = 3, N = 5, J = 10: 1287 configurations × 1000 = 1.3 M states,
	// many seconds of sweeps.
	in := Inputs{Pools: []PoolInput{
		{Name: "a", Jobs: 4, Servers: 2, Arrival: 1, Service: 0.5, HoldingCost: 2},
		{Name: "b", Jobs: 1, Servers: 2, Arrival: 0.5, Service: 0.5, HoldingCost: 1},
		{Name: "c", Jobs: 0, Servers: 1, Arrival: 0.2, Service: 0.5, HoldingCost: 1},
	}, SwitchRate: 0.1}
	if d := mustDecide(t, e, in); d.Policy != "heuristic K=5" {
		t.Fatalf("%+v, want the heuristic", d)
	}
	// Wait for the first sweep, so that Close interrupts value iteration.
	deadline := time.Now().Add(time.Minute)
	for {
		v := e.View()
		if v.Solving == nil {
			t.Fatalf("the solve ended before Close: %+v", v)
		}
		if v.Solving.Sweep > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no sweep within a minute")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	e.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Close took %v", took)
	}
	select {
	case <-e.Idle():
	default:
		t.Fatal("a solve still runs after Close")
	}
	if v := e.View(); v.Solving != nil || v.Table != nil {
		t.Errorf("view after Close %+v", v)
	}
	if !strings.Contains(logs.String(), "solve stopped") {
		t.Errorf("no log of the stopped solve:\n%s", logs.String())
	}
	if _, err := e.Decide(in); !errors.Is(err, ErrClosed) {
		t.Errorf("Decide after Close: %v, want ErrClosed", err)
	}
	e.Close() // twice is fine
	// The goroutines of the solve exit after wg.Done: allow them a moment.
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before New:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(time.Millisecond)
	}
}

func TestCanceledContextStopsTheSolve(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	solved := 0 // OnSolved is not called for a solve that was stopped
	e, err := New(ctx, Config{Name: Optimal, Solve: true, QueueLimit: smallJ,
		OnSolved: func(float64, error) { solved++ }}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e.hold = make(chan struct{}) // never released: only the context ends the solve
	mustDecide(t, e, small.inputs([2]int{3, 0}, [2]int{1, 2}, [2]int{}))
	cancel()
	wait(t, e)
	if v := e.View(); v.Table != nil || v.Solving != nil || solved != 0 {
		t.Errorf("view %+v, OnSolved called %d times; want no table, no solve, no call", v, solved)
	}
}

// TestLockedPools: a pool marked Locked gives no host; the heuristic takes
// the next best source instead.
func TestLockedPools(t *testing.T) {
	e, err := New(context.Background(), Config{Name: Heuristic, K: 2}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	in := Inputs{Pools: []PoolInput{
		{Name: "a", Jobs: 30, Servers: 8, Arrival: 1, Service: 0.1, HoldingCost: 1},
		{Name: "b", Jobs: 3, Servers: 6, Arrival: 0.2, Service: 0.1, HoldingCost: 1},
		{Name: "c", Jobs: 0, Servers: 2, Arrival: 0, Service: 0.1, HoldingCost: 1},
	}, SwitchRate: 1}
	d, err := e.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Switch || d.From != 2 || d.To != 0 {
		t.Fatalf("unlocked: %+v, want c → a", d)
	}
	in.Locked = []bool{false, false, true}
	if d, err = e.Decide(in); err != nil {
		t.Fatal(err)
	}
	if !d.Switch || d.From != 1 || d.To != 0 {
		t.Fatalf("c locked: %+v, want b → a", d)
	}
	in.Locked = []bool{false}
	if _, err := e.Decide(in); !errors.Is(err, ErrBadInputs) {
		t.Fatalf("short Locked: %v, want ErrBadInputs", err)
	}
}

// TestOnSolved: the hook is called once when a background solve ends, with
// its duration and no error, before Idle's channel closes (a solve stopped
// by the context is not reported: TestCanceledContextStopsTheSolve).
func TestOnSolved(t *testing.T) {
	type call struct {
		seconds float64
		err     error
	}
	var calls []call // written by the solve's goroutine before Idle closes
	e := newEngine(t, Config{Name: Optimal, Solve: true, QueueLimit: smallJ,
		OnSolved: func(s float64, err error) { calls = append(calls, call{s, err}) }}, zerolog.Nop())
	e.hold = make(chan struct{})
	mustDecide(t, e, small.inputs([2]int{3, 0}, [2]int{1, 2}, [2]int{}))
	mustDecide(t, e, small.inputs([2]int{4, 0}, [2]int{1, 2}, [2]int{}))
	close(e.hold)
	wait(t, e)
	if len(calls) != 1 || !(calls[0].seconds > 0) || calls[0].err != nil {
		t.Fatalf("OnSolved calls %+v, want one with seconds > 0 and no error", calls)
	}
	if v := e.View(); v.Table == nil || v.Table.Source != "solved" {
		t.Errorf("view %+v, want the solved table", v)
	}
}
