package switching

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// policyModel builds a model for the policy tests: N servers, pools with the
// given rates and holding costs, the same switch rate ζ between every pair,
// queues truncated at 100 and no blocking price.
func policyModel(n int, lambda, mu, c []float64, zeta float64) *Model {
	m := &Model{
		Servers:            n,
		QueueLimit:         100,
		Discount:           0.95,
		UniformizationMode: UniformizationAuto,
		BlockingCosts:      make([]float64, len(c)),
	}
	for i := range c {
		m.Pools = append(m.Pools, Pool{
			Name:        string(rune('a' + i)),
			ArrivalRate: lambda[i],
			ServiceRate: mu[i],
			HoldingCost: c[i],
		})
	}
	m.SwitchRates = make([][]float64, len(c))
	m.SwitchCosts = make([][]float64, len(c))
	for a := range c {
		m.SwitchRates[a] = make([]float64, len(c))
		m.SwitchCosts[a] = make([]float64, len(c))
		for b := range c {
			if a != b {
				m.SwitchRates[a][b] = zeta
			}
		}
	}
	return m
}

// policyState builds a state; transit lists servers in transit as
// {from, to, count} triples.
func policyState(jobs, servers []int, transit ...[3]int) State {
	t := make([][]int, len(jobs))
	for a := range t {
		t[a] = make([]int, len(jobs))
	}
	for _, x := range transit {
		t[x[0]][x[1]] += x[2]
	}
	return State{Jobs: jobs, Servers: servers, Transit: t}
}

// heuristicPM is the two-pool model of the Palmer–Mitrani checks below:
// c = (1,2), λ = 0.5 and µ = 1 for both pools, ζ = 0.25 (so 1/ζ = 4 and all the
// numbers below are exact in binary floating point), N = 2.
func heuristicPM() *Model {
	return policyModel(2, []float64{0.5, 0.5}, []float64{1, 1}, []float64{1, 2}, 0.25)
}

// heuristicM3 is a three-pool model: c = (1,2,2), λ = 0.5, µ = 1, ζ = 0.25,
// N = 4. Pools 2 and 3 are identical.
func heuristicM3() *Model {
	return policyModel(4, []float64{0.5, 0.5, 0.5}, []float64{1, 1, 1}, []float64{1, 2, 2}, 0.25)
}

func TestHeuristicDecide(t *testing.T) {
	noZeta01 := heuristicM3()
	noZeta01.SwitchRates[0][1] = 0

	instant := heuristicPM()
	instant.InstantSwitches = true

	// c = (3,1), λ = (0.1,0.3): c_1 λ_1 = c_2 λ_2 in real arithmetic, but
	// 3·0.1 = 0.30000000000000004 in binary floating point.
	noisy := policyModel(2, []float64{0.1, 0.3}, []float64{1, 1}, []float64{3, 1}, 1)
	noisyMirror := policyModel(2, []float64{0.3, 0.1}, []float64{1, 1}, []float64{1, 3}, 1)

	tests := []struct {
		name  string
		model *Model
		k     float64
		state State
		want  Action
	}{
		{
			// Palmer–Mitrani, pool 2 (the costlier) has the long queue:
			// H(1,2) = 2(5 + (0.5 − 1·min(1,5))·4) − 1(0 + (0.5 − 1·min(0,0))·4)
			//        = 2·3 − 2 = 4
			// H(2,1) = 1(0 + (0.5 − 1·min(1,0))·4) − 2(5 + (0.5 − 1·min(0,5))·4)
			//        = 2 − 14 = −12
			// so switch 1→2: action 1.
			name: "PM K=1 long costly queue switches 1 to 2", model: heuristicPM(), k: 1,
			state: policyState([]int{0, 5}, []int{1, 1}), want: 1,
		},
		{
			// H(1,2) = 2(0 + (0.5 − min(1,0))·4) − 1(7 + (0.5 − min(0,7))·4) = 4 − 9 = −5
			// H(2,1) = 1(7 + (0.5 − min(1,7))·4) − 2(0 + (0.5 − min(0,0))·4) = 5 − 4 = 1
			// so switch 2→1: action 2.
			name: "PM K=1 long cheap queue switches 2 to 1", model: heuristicPM(), k: 1,
			state: policyState([]int{7, 0}, []int{1, 1}), want: 2,
		},
		{
			// H(1,2) = 2(1 + (0.5 − 1)·4) − 1(1 + (0.5 − 0)·4) = −2 − 3 = −5
			// H(2,1) = 1(1 + (0.5 − 1)·4) − 2(1 + (0.5 − 0)·4) = −1 − 6 = −7
			// both negative: nothing.
			name: "PM K=1 one job each does nothing", model: heuristicPM(), k: 1,
			state: policyState([]int{1, 1}, []int{1, 1}), want: NoAction,
		},
		{
			// Empty queues with c = (1,2): the rule anticipates arrivals during
			// the switch, H(1,2) = 2(0 + 0.5·4) − 1(0 + 0.5·4) = 4 − 2 = 2 > 0,
			// H(2,1) = 2 − 4 = −2, so the costlier pool pulls the idle server:
			// action 1 (as the formula, and Palmer–Mitrani's rule 1 read the
			// way the paper explains it, say).
			name: "PM K=1 empty queues pull toward the costlier pool", model: heuristicPM(), k: 1,
			state: policyState([]int{0, 0}, []int{1, 1}), want: 1,
		},
		{
			// Symmetric pools (c = (2,2)) and empty queues:
			// H(1,2) = H(2,1) = 2·0.5·4 − 2·0.5·4 = 0 exactly: a tie with
			// doing nothing, so nothing.
			name:  "exact zero gives no action",
			model: policyModel(2, []float64{0.5, 0.5}, []float64{1, 1}, []float64{2, 2}, 0.25), k: 1,
			state: policyState([]int{0, 0}, []int{1, 1}), want: NoAction,
		},
		{
			// ζ = 1, empty queues: H(1,2) = 1·0.3 − 3·0.1 = −5.6e-17 and
			// H(2,1) = 3·0.1 − 1·0.3 = +5.6e-17 in floating point; both are 0
			// in real arithmetic, so nothing (a rule without tolerance would
			// switch 2→1).
			name: "rounding noise is a tie", model: noisy, k: 1,
			state: policyState([]int{0, 0}, []int{1, 1}), want: NoAction,
		},
		{
			// The same noise the other way round (c = (1,3), λ = (0.3,0.1)):
			// H(1,2) = 3·0.1 − 1·0.3 = +5.6e-17 comes first and stays best,
			// H(2,1) = −5.6e-17; the best does not exceed the tolerance, so
			// nothing.
			name: "rounding noise is no reason to switch", model: noisyMirror, k: 1,
			state: policyState([]int{0, 0}, []int{1, 1}), want: NoAction,
		},
		{
			// The first case with K = 5:
			// H(1,2) = 2·3 − 5·2 = −4, H(2,1) = 2 − 5·14 = −68: nothing.
			name: "PM K=5 damps the switch", model: heuristicPM(), k: 5,
			state: policyState([]int{0, 5}, []int{1, 1}), want: NoAction,
		},
		{
			// With K = 5 a much longer queue is needed: j = (0,9),
			// H(1,2) = 2(9 − 2) − 5·2 = 4 > 0: action 1.
			name: "PM K=5 switches for a long enough queue", model: heuristicPM(), k: 5,
			state: policyState([]int{0, 9}, []int{1, 1}), want: 1,
		},
		{
			// Pool 1 has no server in place (its server is on its way to
			// pool 2), so it cannot be a source even though H(1,2), computed
			// blindly with min(k_1−1, j_1) = −1, would be
			// 2(8 − 2) − 1(0 + (0.5 + 1)·4) = 12 − 6 = 6 > 0.
			// H(2,1) = 1(0 + 0.5·4) − 2(8 + 0.5·4) = 2 − 20 = −18: nothing.
			name: "empty pool is no source", model: heuristicPM(), k: 1,
			state: policyState([]int{0, 8}, []int{0, 1}, [3]int{0, 1, 1}), want: NoAction,
		},
		{
			// M = 3, pools 2 and 3 identical with 5 jobs each, pool 1 idle
			// with 2 servers, k = (2,1,1). In paper order:
			// H(1,2) = 2(5 + (0.5 − 1)·4) − 1(0 + 0.5·4) = 6 − 2 = 4   (action 1)
			// H(2,1) = 1(0 + 0.5·4) − 2(5 + 0.5·4) = 2 − 14 = −12     (action 2)
			// H(1,3) = 4                                               (action 3)
			// H(3,1) = −12                                             (action 4)
			// H(2,3) = 2(5 − 2) − 2(5 + 2) = 6 − 14 = −8               (action 5)
			// H(3,2) = −8                                              (action 6)
			// H(1,2) and H(1,3) tie exactly: the first in paper order wins.
			name: "M=3 exact tie goes to the first pair", model: heuristicM3(), k: 1,
			state: policyState([]int{0, 5, 5}, []int{2, 1, 1}), want: 1,
		},
		{
			// As above with j_3 = 6: H(1,3) = 2(6 − 2) − 2 = 6 > H(1,2) = 4,
			// H(2,3) = 2(6 − 2) − 2(5 + 2) = −6, H(3,2) = 2·3 − 2(6 + 2) = −10:
			// action 3 = switch 1→3.
			name: "M=3 larger later pair wins", model: heuristicM3(), k: 1,
			state: policyState([]int{0, 5, 6}, []int{2, 1, 1}), want: 3,
		},
		{
			// j = (0,6,5): H(1,2) = 2(6 − 2) − 2 = 6 would be best, but
			// ζ_12 = 0; the best switchable pair is H(1,3) = 2(5 − 2) − 2 = 4:
			// action 3.
			name: "pair with zero rate is never chosen", model: noZeta01, k: 1,
			state: policyState([]int{0, 6, 5}, []int{2, 1, 1}), want: 3,
		},
		{
			// Same state with ζ_12 = 0.25: H(1,2) = 6 wins, action 1.
			name: "same state with the pair allowed", model: heuristicM3(), k: 1,
			state: policyState([]int{0, 6, 5}, []int{2, 1, 1}), want: 1,
		},
		{
			// Instant switches: H(a,b) = c_b j_b − K c_a j_a.
			// j = (3,2): H(1,2) = 2·2 − 1·3 = 1, H(2,1) = 1·3 − 2·2 = −1: action 1.
			name: "instant switches", model: instant, k: 1,
			state: policyState([]int{3, 2}, []int{1, 1}), want: 1,
		},
		{
			// j = (4,2): H(1,2) = 4 − 4 = 0, H(2,1) = 4 − 4 = 0: nothing.
			name: "instant switches balanced costs", model: instant, k: 1,
			state: policyState([]int{4, 2}, []int{1, 1}), want: NoAction,
		},
		{
			// j = (3,2), K = 2: H(1,2) = 4 − 2·3 = −2, H(2,1) = 3 − 2·4 = −5:
			// nothing (the rates play no part).
			name: "instant switches K=2", model: instant, k: 2,
			state: policyState([]int{3, 2}, []int{1, 1}), want: NoAction,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHeuristic(tt.model, tt.k)
			if err != nil {
				t.Fatalf("NewHeuristic: %v", err)
			}
			if got := h.Decide(tt.state); got != tt.want {
				t.Errorf("Decide(%+v) = %d, want %d", tt.state, got, tt.want)
			}
		})
	}
}

// TestHeuristicPerPairRate checks that each pair uses its own ζ_ab.
func TestHeuristicPerPairRate(t *testing.T) {
	// M = 2 as heuristicPM but ζ_12 = 0.5 (1/ζ = 2), ζ_21 = 0.25, K = 1,
	// j = (0,3), k = (1,1):
	// H(1,2) = 2(3 + (0.5 − 1)·2) − 1(0 + 0.5·2) = 4 − 1 = 3 > 0: action 1.
	// With ζ_12 = 0.25 it would be 2(3 − 2) − 2 = 0: nothing.
	m := heuristicPM()
	m.SwitchRates[0][1] = 0.5
	h, err := NewHeuristic(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := policyState([]int{0, 3}, []int{1, 1})
	if got := h.Decide(s); got != 1 {
		t.Errorf("ζ_12 = 0.5: Decide = %d, want 1", got)
	}
	h, err = NewHeuristic(heuristicPM(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Decide(s); got != NoAction {
		t.Errorf("ζ_12 = 0.25: Decide = %d, want 0", got)
	}
}

// TestHeuristicCopiesRates checks that changing the model afterwards does not
// change a heuristic already built.
func TestHeuristicCopiesRates(t *testing.T) {
	m := heuristicPM()
	h, err := NewHeuristic(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	m.Pools[1].HoldingCost = 0
	m.SwitchRates[0][1] = 0
	if got := h.Decide(policyState([]int{0, 5}, []int{1, 1})); got != 1 {
		t.Errorf("Decide = %d, want 1", got)
	}
}

func TestNewHeuristicErrors(t *testing.T) {
	for _, k := range []float64{0, -1, math.NaN(), math.Inf(1), math.Inf(-1)} {
		_, err := NewHeuristic(heuristicPM(), k)
		if !errors.Is(err, ErrBadK) {
			t.Errorf("K = %g: error %v, want ErrBadK", k, err)
		}
	}
	if _, err := NewHeuristic(nil, 1); err == nil {
		t.Error("nil model: no error")
	}
	bad := heuristicPM()
	bad.SwitchRates = bad.SwitchRates[:1]
	if _, err := NewHeuristic(bad, 1); err == nil {
		t.Error("short switch rates: no error")
	}
	h, err := NewHeuristic(heuristicPM(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(5.0, h.K()); diff != "" {
		t.Errorf("K() (-want +got):\n%s", diff)
	}
}

func TestHeuristicDecideDoesNotAllocate(t *testing.T) {
	h, err := NewHeuristic(heuristicM3(), 5)
	if err != nil {
		t.Fatal(err)
	}
	s := policyState([]int{0, 9, 6}, []int{2, 1, 1})
	if n := testing.AllocsPerRun(100, func() { h.Decide(s) }); n != 0 {
		t.Errorf("Decide allocates %v times per call", n)
	}
}

func BenchmarkHeuristicDecide(b *testing.B) {
	h, err := NewHeuristic(heuristicM3(), 5)
	if err != nil {
		b.Fatal(err)
	}
	states := []State{
		policyState([]int{0, 9, 6}, []int{2, 1, 1}),
		policyState([]int{3, 2, 1}, []int{2, 1, 0}, [3]int{0, 2, 1}),
		policyState([]int{14, 0, 0}, []int{1, 1, 2}),
		policyState([]int{0, 0, 0}, []int{2, 1, 1}),
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		h.Decide(states[i&3])
		i++
	}
}

// heuristicReference is the rule written straight from the formula: H for
// every pair in paper order, no switch unless the largest H exceeds
// 1e-9·(1+|max|), and the first pair within that tolerance of the largest.
func heuristicReference(m *Model, k float64, s State) Action {
	best := math.Inf(-1)
	hv := map[Action]float64{}
	for d, p := range Pairs(m.NumPools()) {
		a, b := p.From, p.To
		if !m.CanSwitch(a, b) || s.Servers[a] <= 0 {
			continue
		}
		pa, pb := m.Pools[a], m.Pools[b]
		ja, jb, ka, kb := float64(s.Jobs[a]), float64(s.Jobs[b]), s.Servers[a], s.Servers[b]
		var v float64
		if m.InstantSwitches {
			v = pb.HoldingCost*jb - k*pa.HoldingCost*ja
		} else {
			z := m.SwitchRates[a][b]
			v = pb.HoldingCost*(jb+(pb.ArrivalRate-pb.ServiceRate*math.Min(float64(kb), jb))/z) -
				k*pa.HoldingCost*(ja+(pa.ArrivalRate-pa.ServiceRate*math.Min(float64(ka-1), ja))/z)
		}
		hv[Action(d+1)] = v
		best = math.Max(best, v)
	}
	tol := 1e-9 * (1 + math.Abs(best))
	if !(best > tol) {
		return NoAction
	}
	for d := Action(1); int(d) <= len(Pairs(m.NumPools())); d++ {
		if v, ok := hv[d]; ok && v >= best-tol {
			return d
		}
	}
	return NoAction
}

// TestHeuristicMatchesReference checks Decide (its fast path for uniform ζ
// and M ≤ 4, and the general one) against the formula on random models and
// states, including symmetric pools where H is 0 in real arithmetic.
func TestHeuristicMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 400 {
		np := 2 + trial%5 // 2..6 pools: both paths
		n := 1 + rng.IntN(6)
		lambda, mu, c := make([]float64, np), make([]float64, np), make([]float64, np)
		for i := range np {
			lambda[i], mu[i], c[i] = float64(rng.IntN(4))/2, 0.5+float64(rng.IntN(3))/2, float64(1+rng.IntN(2))
		}
		m := policyModel(n, lambda, mu, c, 0.1)
		switch trial % 4 {
		case 1: // per-pair rates, one pair forbidden
			for a := range np {
				for b := range np {
					if a != b {
						m.SwitchRates[a][b] = 0.05 + 0.05*float64(rng.IntN(3))
					}
				}
			}
			m.SwitchRates[0][1] = 0
		case 2:
			m.InstantSwitches = true
		}
		k := []float64{1, 5, 0.5}[trial%3]
		h, err := NewHeuristic(m, k)
		if err != nil {
			t.Fatal(err)
		}
		for range 50 {
			jobs, servers := make([]int, np), make([]int, np)
			left := n
			for i := range np {
				jobs[i] = rng.IntN(6)
				if i == np-1 {
					servers[i] = left
				} else {
					servers[i] = rng.IntN(left + 1)
				}
				left -= servers[i]
			}
			s := policyState(jobs, servers)
			if got, want := h.Decide(s), heuristicReference(m, k, s); got != want {
				t.Fatalf("trial %d (M=%d, K=%g, mode %d): Decide(jobs %v, servers %v) = %d, want %d",
					trial, np, k, trial%4, jobs, servers, got, want)
			}
		}
	}
}

// TestHeuristicClipped: a pool that serves faster than it receives has a
// negative term in the papers' formula, so taking its server looks like a
// gain; clipped, each pool's expected queue is at least 0 and nothing
// moves. With a real queue the clipped rule still switches.
func TestHeuristicClipped(t *testing.T) {
	m := &Model{Servers: 4, QueueLimit: 10, Discount: 0.95, UniformizationMode: UniformizationAuto,
		Pools: []Pool{
			{Name: "a", ArrivalRate: 0, ServiceRate: 1, HoldingCost: 1},
			{Name: "b", ArrivalRate: 0, ServiceRate: 1, HoldingCost: 1},
		},
		SwitchRates: PairMatrix(2, 0.8), SwitchCosts: PairMatrix(2, 0), BlockingAuto: true}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	h, err := NewHeuristic(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	// j = (1, 0), k = (3, 1): a's term is 1 + (0 − 1·min(2, 1))/0.8 = −0.25.
	s := State{Jobs: []int{1, 0}, Servers: []int{3, 1}, Transit: [][]int{{0, 0}, {0, 0}}}
	if got := h.Decide(s); got != ActionOf(0, 1) {
		t.Fatalf("papers' formula: %v, want the switch a→b its negative term asks for", got)
	}
	if got := h.Clipped().Decide(s); got != NoAction {
		t.Fatalf("clipped: %v, want no switch", got)
	}
	// b has a queue of 3 with one server: 3 + (0 − 1)/0.8 = 1.75 > 0.
	s.Jobs = []int{0, 3}
	if got := h.Clipped().Decide(s); got != ActionOf(0, 1) {
		t.Fatalf("clipped with a queue at b: %v, want a→b", got)
	}
	// Different switch rates take the general path: the same answers.
	m.SwitchRates = [][]float64{{0, 0.8}, {0.5, 0}}
	g, err := NewHeuristic(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	s.Jobs = []int{1, 0}
	if got := g.Decide(s); got != ActionOf(0, 1) {
		t.Fatalf("general path, papers' formula: %v, want a→b", got)
	}
	if got := g.Clipped().Decide(s); got != NoAction {
		t.Fatalf("general path, clipped: %v, want no switch", got)
	}
}
