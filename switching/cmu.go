package switching

import "math"

// cmuTol is the relative tolerance within which two products c_i µ_i count as
// equal: 3·0.1 and 1·0.3 differ in the last bit but are the same priority.
const cmuTol = 1e-9

// CMu is the cµ rule adapted to switching servers between pools: the rule
// that is optimal when switches are free and instant (Buyukkoc et al.),
// giving priority to the job type with the largest c_i µ_i.
//
// Decide looks for a target pool b whose queue j_b exceeds its servers in
// place plus those already heading to it (k_b + Σ_a m_ab), taking the pool
// with the largest c_b µ_b first. The source is, among the pools a ≠ b with
// k_a > 0 that can switch to b, the one with the most idle servers
// (max(0, k_a − j_a) > 0); failing that, the one with the lowest c_a µ_a
// strictly below c_b µ_b (preempting one of its jobs). Ties go to the lowest
// index. If the best target has no source the next target is tried, in order
// of c_b µ_b; if none has one, nothing is done. Products within a relative
// 1e-9 of each other are equal.
//
// O(M²) time, no allocation; a CMu is immutable and safe for concurrent use.
type CMu struct {
	cmu       []float64 // c_i µ_i
	order     []int     // pools by decreasing c_i µ_i, ties by index
	canSwitch [][]bool
}

var _ Policy = (*CMu)(nil)

// NewCMu returns the cµ policy for model m, which must be a valid model; it
// is not kept.
func NewCMu(m *Model) *CMu {
	np := m.NumPools()
	c := &CMu{cmu: make([]float64, np), order: make([]int, 0, np), canSwitch: switchable(m)}
	for i, p := range m.Pools {
		c.cmu[i] = p.HoldingCost * p.ServiceRate
	}
	for i := range np { // insertion sort: stable, and needs no transitivity
		pos := len(c.order)
		c.order = append(c.order, i)
		for pos > 0 && c.below(c.order[pos-1], i) {
			c.order[pos] = c.order[pos-1]
			pos--
		}
		c.order[pos] = i
	}
	return c
}

// below reports whether c_x µ_x is strictly below c_y µ_y.
func (c *CMu) below(x, y int) bool {
	u, v := c.cmu[x], c.cmu[y]
	return u < v-cmuTol*(1+max(math.Abs(u), math.Abs(v)))
}

// Decide returns the switch the cµ rule makes in state s, or NoAction.
func (c *CMu) Decide(s State) Action {
	for _, b := range c.order {
		heading := 0
		for a := range s.Transit {
			heading += s.Transit[a][b]
		}
		if s.Jobs[b] <= s.Servers[b]+heading {
			continue
		}
		if a := c.source(s, b); a >= 0 {
			return ActionOf(a, b)
		}
	}
	return NoAction
}

// source returns the pool to take a server from for target b, or −1.
func (c *CMu) source(s State, b int) int {
	idle, most := -1, 0
	cheap := -1
	for a, k := range s.Servers {
		if a == b || k <= 0 || !c.canSwitch[a][b] {
			continue
		}
		if n := k - s.Jobs[a]; n > most {
			idle, most = a, n
		}
		if c.below(a, b) && (cheap < 0 || c.below(a, cheap)) {
			cheap = a
		}
	}
	if idle >= 0 {
		return idle
	}
	return cheap
}
