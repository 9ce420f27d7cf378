package switching

import "math"

// staticTol is the absolute tolerance of the static allocation's rounding
// and tie-breaking: quotas are sums and quotients of rates, and a quota that
// is a half in real arithmetic (as in Fisher et al.'s Figure 3 setting) must
// not round down because of the last bit.
const staticTol = 1e-9

// StaticAllocation returns the static allocation of the model's N servers to
// its M pools, in proportion to offered load and holding cost
// (Palmer–Mitrani, Fisher et al.):
//
//	quota_i = N ρ_i c_i / Σ_j ρ_j c_j,  ρ_i = λ_i/µ_i,  k_i = ⌊quota_i + 0.5⌋,
//
// then every k_i is raised to at least 1 when N ≥ M, and the sum is made N:
// while it is too large, one server is taken from the pool with the largest
// k_i − quota_i among those with k_i > 1 (k_i > 0 when N < M); while it is
// too small, one is given to the pool with the largest quota_i − k_i. Ties go
// to the lowest index. Quotas within 1e-9 below a half round up, and
// differences within 1e-9 are ties. If Σ ρ_j c_j = 0 the servers are split as
// evenly as possible, the extra ones to the lowest-index pools.
//
// m must be a valid model. The result has M entries summing to N (none when
// M = 0). O(M·(M + |N − Σ⌊quota + 0.5⌋|)) time.
//
// For M = 2 this is Palmer–Mitrani's rule (k_2 = N − k_1, a zero replaced by
// 1 at the other pool's expense) except when both quotas are exactly halves:
// there the tie rule gives the extra server to pool 2, where ⌊quota_1 + 0.5⌋
// gives it to pool 1.
func StaticAllocation(m *Model) []int {
	n, np := m.Servers, m.NumPools()
	k := make([]int, np)
	if np == 0 {
		return k
	}
	quota := make([]float64, np)
	total := 0.0
	for i, p := range m.Pools {
		quota[i] = p.ArrivalRate / p.ServiceRate * p.HoldingCost
		total += quota[i]
	}
	if !(total > 0) {
		for i := range k {
			k[i] = n / np
			if i < n%np {
				k[i]++
			}
		}
		return k
	}
	sum := 0
	for i := range quota {
		quota[i] = float64(n) * quota[i] / total
		k[i] = int(math.Floor(quota[i] + 0.5 + staticTol))
		sum += k[i]
	}
	least := 0 // the fewest servers a pool may be left with
	if n >= np {
		least = 1
		for i := range k {
			if k[i] < 1 {
				sum += 1 - k[i]
				k[i] = 1
			}
		}
	}
	for ; sum > n; sum-- {
		best := -1
		for i := range k {
			if k[i] > least && (best < 0 || float64(k[i])-quota[i] > float64(k[best])-quota[best]+staticTol) {
				best = i
			}
		}
		k[best]-- // some k_i > least, else sum ≤ max(N, M·least) = N
	}
	for ; sum < n; sum++ {
		best := 0
		for i := 1; i < np; i++ {
			if quota[i]-float64(k[i]) > quota[best]-float64(k[best])+staticTol {
				best = i
			}
		}
		k[best]++
	}
	return k
}

// Static is the static policy: it moves servers, one switch per decision,
// until the servers in place plus those in transit to each pool match the
// static allocation, and then does nothing. The target is computed once, at
// construction; a Static for other arrival rates (a demand phase) is a new
// Static.
//
// Decide counts e_i = k_i + Σ_a m_ai (servers in place plus heading to i). If
// some pool has e_i above its target and some below, it switches a server
// from the pool a with the largest surplus e_a − target_a among those with
// k_a > 0 to the pool b with the largest deficit target_b − e_b, ties to the
// lowest index; if a cannot switch to any pool in deficit the next source in
// the same order is tried, and for the chosen source the best pool in deficit
// it can switch to is taken. O(M²) time; no allocation for M ≤ 16. A Static is
// immutable and safe for concurrent use.
type Static struct {
	target    []int
	canSwitch [][]bool
}

var _ Policy = (*Static)(nil)

// NewStatic returns the static policy for model m, with target
// StaticAllocation(m). m must be a valid model; it is not kept.
func NewStatic(m *Model) *Static {
	return &Static{target: StaticAllocation(m), canSwitch: switchable(m)}
}

// switchable copies which pairs of pools of m can switch.
func switchable(m *Model) [][]bool {
	np := m.NumPools()
	can := make([][]bool, np)
	for a := range can {
		can[a] = make([]bool, np)
		for b := range can[a] {
			can[a][b] = m.CanSwitch(a, b)
		}
	}
	return can
}

// Target returns a copy of the allocation the policy moves toward.
func (p *Static) Target() []int { return append([]int(nil), p.target...) }

// Decide returns the next switch toward the target, or NoAction.
func (p *Static) Decide(s State) Action {
	np := len(p.target)
	var buf [16]int
	var e []int
	if np <= len(buf) {
		e = buf[:np]
	} else {
		e = make([]int, np)
	}
	copy(e, s.Servers)
	for a := range s.Transit {
		for b, x := range s.Transit[a] {
			e[b] += x
		}
	}
	src, surplus := -1, 0
	for a := range np {
		d := e[a] - p.target[a]
		if d <= 0 || s.Servers[a] <= 0 || (src >= 0 && d <= surplus) {
			continue
		}
		if p.deficitTarget(a, e) >= 0 {
			src, surplus = a, d
		}
	}
	if src < 0 {
		return NoAction
	}
	return ActionOf(src, p.deficitTarget(src, e))
}

// deficitTarget returns the pool with the largest deficit target_b − e_b > 0
// that pool a can switch to (ties to the lowest index), or −1.
func (p *Static) deficitTarget(a int, e []int) int {
	dst, deficit := -1, 0
	for b, t := range p.target {
		if d := t - e[b]; d > deficit && p.canSwitch[a][b] {
			dst, deficit = b, d
		}
	}
	return dst
}
