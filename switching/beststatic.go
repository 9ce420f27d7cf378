package switching

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// MeanInSystem returns the mean number of jobs in an M/M/k queue (arrival
// rate lambda, service rate mu per server, k servers): L = ρ + C(k, ρ)·ρ/(k − ρ)
// with ρ = λ/µ and C the Erlang C probability of waiting. It is +Inf when the
// queue is unstable (k ≤ ρ) and 0 when lambda is 0.
//
// C is computed from the Erlang B recursion B_0 = 1,
// B_n = ρB_{n−1}/(n + ρB_{n−1}), C = B_k/(1 − (ρ/k)(1 − B_k)), which is stable
// for any k.
func MeanInSystem(lambda, mu float64, k int) float64 {
	if lambda == 0 {
		return 0
	}
	rho := lambda / mu
	if float64(k) <= rho {
		return math.Inf(1)
	}
	return rho + ErlangC(k, rho)*rho/(float64(k)-rho)
}

// ErlangC returns the probability that an arrival waits in an M/M/k queue
// with offered load rho = λ/µ < k.
func ErlangC(k int, rho float64) float64 {
	b := 1.0
	for n := 1; n <= k; n++ {
		b = rho * b / (float64(n) + rho*b)
	}
	return b / (1 - rho/float64(k)*(1-b))
}

// ErrNoStableAllocation is returned by BestStaticAllocation when every way
// of splitting the servers leaves some pool with k_i ≤ ρ_i.
var ErrNoStableAllocation = errors.New("no allocation of the servers is stable")

// BestStaticAllocation returns the fixed allocation k (Σk_i = N) that
// minimizes the exact long-run holding cost Σ c_i L_i(k_i) of M independent
// M/M/k_i queues, L by MeanInSystem, over every allocation that is stable
// (k_i > ρ_i for each pool with λ_i > 0), and that cost. It is the best a
// policy that never switches can do: the honest baseline for what dynamic
// switching buys. Allocations are visited with the most servers at pool 1
// first, then at pool 2, and so on; one replaces the best so far only if it
// costs less by more than a relative 1e-12, so ties go to the first visited.
//
// Time O(C(N+M−1, M−1)·N·M) at most; the model must be valid.
func BestStaticAllocation(m *Model) ([]int, float64, error) {
	np, n := m.NumPools(), m.Servers
	// cost[i][k] = c_i L_i(k), +Inf when unstable.
	cost := make([][]float64, np)
	for i, p := range m.Pools {
		cost[i] = make([]float64, n+1)
		for k := range cost[i] {
			l := MeanInSystem(p.ArrivalRate, p.ServiceRate, k)
			cost[i][k] = p.HoldingCost * l
			if math.IsInf(l, 1) {
				cost[i][k] = math.Inf(1) // even when c_i = 0: an unstable queue is not a plan
			}
		}
	}
	best := make([]int, np)
	bestCost := math.Inf(1)
	k := make([]int, np)
	var walk func(i, left int, sum float64)
	walk = func(i, left int, sum float64) {
		if math.IsInf(sum, 1) {
			return
		}
		if i == np-1 {
			k[i] = left
			total := sum + cost[i][left]
			if total < bestCost-1e-12*math.Abs(bestCost) || (math.IsInf(bestCost, 1) && !math.IsInf(total, 1)) {
				copy(best, k)
				bestCost = total
			}
			return
		}
		for x := left; x >= 0; x-- { // lexicographic order: most servers to pool 1 first
			k[i] = x
			walk(i+1, left-x, sum+cost[i][x])
		}
	}
	if np > 0 {
		walk(0, n, 0)
	}
	if math.IsInf(bestCost, 1) {
		var rho []string
		for _, p := range m.Pools {
			rho = append(rho, fmt.Sprintf("%.4g", p.ArrivalRate/p.ServiceRate))
		}
		return nil, 0, fmt.Errorf("best static allocation: %w: %d servers for offered loads ρ = (%s), each pool needs k_i > ρ_i",
			ErrNoStableAllocation, n, strings.Join(rho, ", "))
	}
	return best, bestCost, nil
}

// NewBestStatic returns the policy that moves servers to the best static
// allocation (BestStaticAllocation) the way Static moves them to the
// papers' proportional one, and then never switches.
func NewBestStatic(m *Model) (*Static, error) {
	k, _, err := BestStaticAllocation(m)
	if err != nil {
		return nil, err
	}
	return &Static{target: k, canSwitch: switchable(m)}, nil
}
