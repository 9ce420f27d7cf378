package switching

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMeanInSystem(t *testing.T) {
	for _, tt := range []struct {
		lambda, mu float64
		k          int
		want       float64
	}{
		{0.5, 1, 1, 1},                            // M/M/1: ρ/(1−ρ)
		{0.9, 1, 1, 9},                            // M/M/1
		{1.5, 1, 2, 2 * 0.75 / (1 - 0.75*0.75)},   // M/M/2: 2a/(1−a²), a = λ/2µ
		{0.3, 0.2, 2, 2 * 0.75 / (1 - 0.75*0.75)}, // the same with other units
		{0, 1, 0, 0},                              // no arrivals, no servers
		{1, 1, 1, math.Inf(1)},                    // ρ = k: unstable
		{2, 1, 1, math.Inf(1)},                    // ρ > k
		{1, 1, 40, 1},                             // many servers: L → ρ
		{30, 1, 31, 53.9683867645894},             // large k: exact rational arithmetic
		{1.6, 0.001, 2, 1600 + 1600*ErlangC(2, 1600)/(2-1600)},
	} {
		got := MeanInSystem(tt.lambda, tt.mu, tt.k)
		if tt.k == 2 && tt.mu == 0.001 {
			if !math.IsInf(got, 1) {
				t.Errorf("MeanInSystem(%g, %g, %d) = %g, want +Inf", tt.lambda, tt.mu, tt.k, got)
			}
			continue
		}
		if math.IsInf(tt.want, 1) != math.IsInf(got, 1) || (!math.IsInf(got, 1) && math.Abs(got-tt.want) > 1e-9*tt.want+1e-12) {
			t.Errorf("MeanInSystem(%g, %g, %d) = %.12g, want %.12g", tt.lambda, tt.mu, tt.k, got, tt.want)
		}
	}
}

// erlangCDirect is the textbook formula with factorials, for small k.
func erlangCDirect(k int, a float64) float64 {
	sum, term := 0.0, 1.0
	for n := range k {
		if n > 0 {
			term *= a / float64(n)
		}
		sum += term
	}
	last := term * a / float64(k) // a^k / k!
	top := last * float64(k) / (float64(k) - a)
	return top / (sum + top)
}

func TestErlangCAgainstFactorials(t *testing.T) {
	for k := 1; k <= 12; k++ {
		for _, f := range []float64{0.1, 0.5, 0.9, 0.99} {
			a := f * float64(k)
			if got, want := ErlangC(k, a), erlangCDirect(k, a); math.Abs(got-want) > 1e-12 {
				t.Errorf("ErlangC(%d, %g) = %.15g, want %.15g", k, a, got, want)
			}
		}
	}
}

// fig3Model is Fisher et al.'s Figure 3 setting at N servers: type 1 is
// 1000 times slower, arrives 1000 times less often, total load 4N/5 split
// equally, c = (2, 1, 1), ζ = 0.1.
func fig3Model(n int) *Model {
	rho := 0.8 * float64(n) / 3
	return policyModel(n, []float64{rho / 1000, rho, rho}, []float64{0.001, 1, 1}, []float64{2, 1, 1}, 0.1)
}

func TestBestStaticAllocation(t *testing.T) {
	for _, tt := range []struct {
		name         string
		m            *Model
		static, want []int
	}{
		// The papers' rounding gives (3,1,2) at N = 6: pool 2 has ρ = 1.6
		// on one server, unstable. The only stable split is (2,2,2).
		{"fig3 N=6", fig3Model(6), []int{3, 1, 2}, []int{2, 2, 2}},
		{"fig3 N=3", fig3Model(3), []int{1, 1, 1}, []int{1, 1, 1}},
		{"fig4 load 2.6", policyModel(4, []float64{2.6 / 3, 2.6 / 3, 2.6 / 3}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1), []int{2, 1, 1}, []int{2, 1, 1}},
		// Two pools, ρ = 1 each: the papers' rounding favours the costlier
		// pool and leaves the other unstable; only (2,2) is stable.
		{"two pools", policyModel(4, []float64{1, 1}, []float64{1, 1}, []float64{1, 3}, 0.1), []int{1, 3}, []int{2, 2}},
		// Two stable choices: (3,2) costs less than (2,3) with c_1 = 3.
		{"two stable", policyModel(5, []float64{1, 1}, []float64{1, 1}, []float64{3, 1}, 0.1), []int{4, 1}, []int{3, 2}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.static, StaticAllocation(tt.m)); diff != "" {
				t.Errorf("static allocation (-want +got):\n%s", diff)
			}
			got, cost, err := BestStaticAllocation(tt.m)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("best static allocation (-want +got):\n%s", diff)
			}
			// No allocation costs less: brute force over every split.
			brute := bruteBestStatic(tt.m)
			if math.Abs(cost-brute) > 1e-12*brute {
				t.Errorf("cost %g, brute force %g", cost, brute)
			}
		})
	}
}

func bruteBestStatic(m *Model) float64 {
	best := math.Inf(1)
	np, n := m.NumPools(), m.Servers
	k := make([]int, np)
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == np {
			if left != 0 {
				return
			}
			c := 0.0
			for j, p := range m.Pools {
				c += p.HoldingCost * MeanInSystem(p.ArrivalRate, p.ServiceRate, k[j])
			}
			best = math.Min(best, c)
			return
		}
		for x := 0; x <= left; x++ {
			k[i] = x
			rec(i+1, left-x)
		}
	}
	rec(0, n)
	return best
}

func TestBestStaticUnstable(t *testing.T) {
	// Fisher Figure 4 at load 3: ρ_i = 1 for three pools on four servers.
	m := policyModel(4, []float64{1, 1, 1}, []float64{1, 1, 1}, []float64{2, 1, 1}, 0.1)
	_, _, err := BestStaticAllocation(m)
	if !errors.Is(err, ErrNoStableAllocation) {
		t.Fatalf("error %v, want ErrNoStableAllocation", err)
	}
	if want := "4 servers for offered loads ρ = (1, 1, 1), each pool needs k_i > ρ_i"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	if _, err := NewBestStatic(m); !errors.Is(err, ErrNoStableAllocation) {
		t.Errorf("NewBestStatic: %v", err)
	}
}
