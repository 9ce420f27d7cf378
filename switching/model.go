package switching

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Pool is one job type and the pool of servers dedicated to it.
type Pool struct {
	Name        string  // unique, [a-z0-9-]+
	ArrivalRate float64 // λ_i, jobs per time unit
	ServiceRate float64 // µ_i, completions per time unit per busy server
	HoldingCost float64 // c_i, cost per job per time unit in the system
	// QueueLimit is this pool's truncation J_i (queue lengths 0 ≤ j_i < J_i);
	// 0 takes the model's QueueLimit.
	QueueLimit int
}

// Uniformization modes of Model.UniformizationMode.
const (
	UniformizationAuto  = "auto"  // Σλ + N·max(max µ, max ζ)
	UniformizationPaper = "paper" // Σλ + N·max µ + N·max ζ (the papers' eq. 1)
	UniformizationFixed = "fixed" // the number in Model.Uniformization
)

// Model is the M-pool switching model of Fisher et al. and Palmer–Mitrani,
// with the engineering choices of docs/research/switching.md ("The model"): a
// uniformization constant that may be derived from the rates, switch rates
// per pair (0: the pair cannot switch), and a price on arrivals blocked by
// the truncation.
//
// A Model is plain data; ParseModel builds one from YAML and Validate checks
// one built in code. Derived quantities (Lambda, BlockingCost) are computed
// from the current rates, so a copy with other arrival rates stays
// consistent.
type Model struct {
	Servers    int     // N
	QueueLimit int     // J: queue lengths 0 ≤ j_i < J, unless a pool has a J of its own (Pool.QueueLimit)
	Discount   float64 // α, used by the discounted criterion only

	// UniformizationMode is one of the Uniformization* constants;
	// Uniformization holds the number when the mode is UniformizationFixed.
	UniformizationMode string
	Uniformization     float64

	Pools []Pool

	// SwitchRates[a][b] is ζ_ab, the rate at which a server in transit from
	// pool a to pool b arrives; 0 means a and b cannot switch. The diagonal is 0.
	// With InstantSwitches the rates only say which pairs may switch (> 0).
	SwitchRates [][]float64
	// SwitchCosts[a][b] is c_ab, the lump cost of starting a switch a→b.
	SwitchCosts [][]float64
	// InstantSwitches: a switch takes no time (Palmer–Mitrani Table 1).
	InstantSwitches bool

	// BlockingAuto prices a blocked arrival of type i at c_i·J/µ_i;
	// BlockingLower at c_i·(J_i − N)/(N·µ_i) (0 when J_i ≤ N), the least a
	// blocked arrival adds to the untruncated system's expected holding
	// cost, so that the optimum is a lower bound on the untruncated
	// system's (see LowerBlocking); otherwise BlockingCosts[i] is the price (0
	// everywhere gives the papers' model).
	BlockingAuto  bool
	BlockingLower bool
	BlockingCosts []float64
}

// NumPools returns M.
func (m *Model) NumPools() int { return len(m.Pools) }

// MaxQueueLimit is the largest truncation J_i a pool may have.
const MaxQueueLimit = 1 << 16

// Limit returns pool i's truncation J_i: its own QueueLimit, or the
// model's.
func (m *Model) Limit(i int) int {
	if j := m.Pools[i].QueueLimit; j > 0 {
		return j
	}
	return m.QueueLimit
}

// Limits returns every pool's truncation J_i.
func (m *Model) Limits() []int {
	js := make([]int, len(m.Pools))
	for i := range js {
		js[i] = m.Limit(i)
	}
	return js
}

// SetLimits gives pool i the truncation js[i], and the model's QueueLimit
// the largest of them.
func (m *Model) SetLimits(js []int) {
	m.QueueLimit = slices.Max(js)
	for i := range m.Pools {
		m.Pools[i].QueueLimit = js[i]
	}
}

// FormatLimits prints truncations: "15" when every pool has it, else one
// per pool, "15/20/15".
func FormatLimits(js []int) string {
	if len(js) > 0 && slices.Min(js) == slices.Max(js) {
		return strconv.Itoa(js[0])
	}
	parts := make([]string, len(js))
	for i, j := range js {
		parts[i] = strconv.Itoa(j)
	}
	return strings.Join(parts, "/")
}

// BlockingCost returns the price of one arrival of type i blocked at the
// truncation j_i = J_i−1.
func (m *Model) BlockingCost(i int) float64 {
	p := m.Pools[i]
	switch {
	case m.BlockingAuto:
		return p.HoldingCost * float64(m.Limit(i)) / p.ServiceRate
	case m.BlockingLower:
		return LowerBlocking(p.HoldingCost, p.ServiceRate, m.Limit(i), m.Servers)
	}
	return m.BlockingCosts[i]
}

// LowerBlocking is the blocking price of blocking_cost "lower" for a pool
// with holding cost c, service rate µ and truncation J on N servers:
// c·(J − N)/(N·µ), 0 when J ≤ N. It makes the truncated model's optimal
// average cost a lower bound on the untruncated system's.
//
// Couple the two systems on the same arrivals and on N service clocks of
// rate µ per pool (clock s completes a job of pool i when s ≤ min(k_i, j_i)),
// and let the truncated one switch servers exactly as any policy of the
// untruncated one does (a randomized policy that follows the untruncated
// queues: it may, since the truncated model's optimum over such policies is
// its stationary optimum). The servers then agree, and the queue difference
// D_i = j_i(untruncated) − j_i(truncated) stays ≥ 0: it grows by one at each
// blocked arrival and falls only at a completion of the untruncated system
// alone, which needs j_i(truncated) < k_i ≤ N. A blocked arrival finds
// j_i(truncated) = J − 1, which must see J − N completions, each at rate at
// most N·µ, before it falls below N: the unit of D_i it adds lives
// (J − N)/(N·µ) in expectation at least, and costs c times that. Priced at
// this, a blocked arrival costs the truncated system no more than it costs the
// untruncated one, so the truncated optimum is at most the untruncated
// system's under any policy. The switching costs are the same.
func LowerBlocking(c, mu float64, j, n int) float64 {
	if j <= n {
		return 0
	}
	return c * float64(j-n) / (float64(n) * mu)
}

// CanSwitch reports whether a server may be switched from pool a to pool b.
func (m *Model) CanSwitch(a, b int) bool {
	return a != b && m.SwitchRates[a][b] > 0
}

// MaxRate returns the largest total transition rate out of any state of the
// truncated model under any action: the smallest admissible Λ. Each server
// adds the rate of what it does (serve a job, at most J_i−1 in pool i, or travel
// between pools), so the maximum fills servers greedily by rate.
func (m *Model) MaxRate() float64 {
	total := 0.0
	type activity struct {
		rate float64
		cap  int // servers it can occupy; -1: unlimited
	}
	var acts []activity
	for i, p := range m.Pools {
		if m.Limit(i) < 2 {
			continue // its queue is always empty: nothing happens there
		}
		total += p.ArrivalRate
		acts = append(acts, activity{p.ServiceRate, m.Limit(i) - 1})
	}
	if !m.InstantSwitches {
		acts = append(acts, activity{m.maxSwitchRate(), -1})
	}
	slices.SortStableFunc(acts, func(x, y activity) int { return cmp.Compare(y.rate, x.rate) })
	left := m.Servers
	for _, a := range acts {
		n := left
		if a.cap >= 0 {
			n = min(n, a.cap)
		}
		total += float64(n) * a.rate
		left -= n
	}
	return total
}

func (m *Model) maxSwitchRate() float64 {
	z := 0.0
	if m.InstantSwitches {
		return 0
	}
	for a := range m.SwitchRates {
		for b := range m.SwitchRates[a] {
			if a != b {
				z = max(z, m.SwitchRates[a][b])
			}
		}
	}
	return z
}

// Lambda returns the uniformization constant Λ in force.
func (m *Model) Lambda() float64 {
	if m.UniformizationMode == UniformizationFixed {
		return m.Uniformization
	}
	sum, maxMu := 0.0, 0.0
	for _, p := range m.Pools {
		sum += p.ArrivalRate
		maxMu = max(maxMu, p.ServiceRate)
	}
	n := float64(m.Servers)
	if m.UniformizationMode == UniformizationPaper {
		return sum + n*(maxMu+m.maxSwitchRate())
	}
	return sum + n*max(maxMu, m.maxSwitchRate())
}

// Pair is a possible switch of one server from pool From to pool To (0-based).
type Pair struct{ From, To int }

// Pairs lists the M(M−1) switches in the papers' action order:
// (1,2),(2,1),(1,3),(3,1),(2,3),(3,2),(1,4),(4,1),(2,4),… (1-based in the
// papers). Action d > 0 is Pairs(M)[d−1].
func Pairs(m int) []Pair {
	ps := make([]Pair, 0, m*(m-1))
	for b := 1; b < m; b++ {
		for a := 0; a < b; a++ {
			ps = append(ps, Pair{a, b}, Pair{b, a})
		}
	}
	return ps
}

// ActionOf returns the action number that switches a server from pool a to
// pool b (0-based pools, a ≠ b).
func ActionOf(a, b int) Action {
	lo, hi := min(a, b), max(a, b)
	d := hi*(hi-1) + 2*lo + 1 // pairs before column hi, then (lo,hi),(hi,lo)
	if a > b {
		d++
	}
	return Action(d)
}

// Action is a decision: 0 does nothing, d > 0 starts the switch Pairs(M)[d−1].
type Action int

// NoAction does nothing.
const NoAction Action = 0

// Pair returns the switch started by a non-zero action.
func (a Action) Pair(m int) Pair {
	if a <= 0 || int(a) > m*(m-1) {
		panic(fmt.Sprintf("switching: action %d out of range for %d pools", a, m))
	}
	return Pairs(m)[a-1]
}

// State is the state S = (j, k, m) of the system: queue lengths (including
// the jobs in service), servers in place at each pool, and servers in
// transit between pools (Transit[a][b] servers on their way from a to b).
type State struct {
	Jobs    []int
	Servers []int
	Transit [][]int
}

// Policy decides what to do in a state. Implementations must be
// deterministic and must not keep the state's slices.
type Policy interface {
	Decide(s State) Action
}
