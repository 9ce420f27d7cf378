package switching

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// ErrTooLarge is returned when a model's state space is over the limit given
// to NewSpace. Its message carries the number of states and the memory a
// solve would need.
var ErrTooLarge = errors.New("state space too large")

// MaxServers is the largest N a state space holds (configurations are
// stored one byte per entry).
const MaxServers = 127

// BytesPerState is the memory a solve needs per state: two float64 vectors
// (values and expectations) and one byte of policy.
const BytesPerState = 8 + 8 + 1

// Space is the indexed state space of a model, with every configuration's
// successors precomputed.
//
// A configuration is a vector x = (k_1..k_M, n_l for each transit lane) of
// servers in place and in transit, Σx = N. A server in transit from a to b
// goes on only to arrive at b, at rate ζ_ab; where it came from no longer
// matters. So the servers in transit are counted by lane, not by pair: a
// lane is a destination b and a rate ζ, and holds the pairs a→b that can
// switch (ζ_ab > 0) at that rate. Two states that differ only in where
// their travelling servers of one lane came from have the same costs, the
// same actions and the same transitions (the chain is lumpable), so one
// state stands for them all and every value and policy of the model is
// exact on it. With one rate for every pair (the papers' models) there are
// M lanes instead of M(M−1) pairs: at M = 3 and N = 6, 462 configurations
// instead of 3,003. With instant switches there are none.
//
// Symmetric pools are lumped too, in a space built by NewSymmetricSpace:
// pools with the same rates, costs, truncation and switch rates to and
// from every other pool (Figure 3's and 4's types 2 and 3) are
// exchangeable, and a state with two of them swapped has the same value
// under the optimal policy, the same costs, and the swapped transitions.
// Such a space keeps only the canonical configurations: within each group
// of exchangeable pools, the pools' (servers in place, servers on each
// lane into the pool) in non-increasing order. An action or a completion
// that leads to another configuration leads to its canonical one, with
// the pools, and so the queues, permuted (the transition's perm). Every
// configuration of the chain is a canonical one permuted, and the
// canonical state's optimal value and cost are those of every state it
// stands for, so the optimum and its policy (mapped back through the
// permutation, Table.Decide) are exact. A long-run average of a reward
// that treats the exchangeable pools alike is exact too (the chain of
// orbits is the same); a pool's own boundary mass is the mean over its
// group. Figure 4's 126 configurations become 70. Configurations that
// tie within a group keep all their queue vectors: the states they
// double are computed twice, with the same values.
//
// Configurations are numbered in lexicographic order of x (ranked in O(D) by
// binomial counting, no map). A state is (configuration c, queue vector j)
// with index c·B + Σ j_i·stride_i, stride_i = Π_{k>i} J_k, B = Π J_i: the queue vectors of one
// configuration are one contiguous block, so a sweep streams through memory,
// and pool M's queue is the fastest-varying index.
type Space struct {
	M, N    int
	Js      []int // J_i: pool i's queue lengths are 0 ≤ j_i < J_i
	B       int   // Π J_i states per configuration
	Configs int   // number of configurations
	States  int   // Configs·B

	stride []int // stride of j_i inside a block: Π_{k>i} J_k

	// Symmetric holds the groups of exchangeable pools the space lumps
	// (each of two or more pools, in increasing order); nil: none.
	Symmetric [][]int
	canon     []int32     // per configuration of the unlumped space (by rank): its index here, −1 when not canonical; nil without Symmetric
	keyLanes  [][]int     // per pool: the indices in x of the lanes into it, in their rates' order
	perms     []spacePerm // the pool permutations of transitions; perms[0] is the identity

	transit   []Pair  // each lane's first pair (in paper order), in order of those
	transitOf [][]int // transitOf[a][b]: index in x of the lane of (a,b), or −1
	dims      int     // len(x) = M + len(transit)
	binom     [][]uint64
	x         []int8 // Configs·dims configuration vectors

	// Actions available in each configuration, in increasing action order:
	// actions[actStart[c]:actStart[c+1]].
	actStart []int32
	actions  []configAction
	// Switch completions out of each configuration.
	compStart []int32
	comps     []completion
	// Inverse lists, for the stationary distribution: the configurations
	// that reach c by an action, and by a completion.
	invActStart  []int32
	invActs      []configAction // target holds the source configuration
	invCompStart []int32
	invComps     []completion // target holds the source configuration
}

type configAction struct {
	d      Action
	target int32 // configuration after the action
	perm   uint16
	cost   float64
}

type completion struct {
	target int32 // configuration after the completion
	perm   uint16
	rate   float64 // ζ_ab·m_ab (not divided by Λ)
}

// spacePerm is a permutation of exchangeable pools: the transitions whose
// configuration it makes canonical lead to the queue vector remap[j]
// from queue vector j.
type spacePerm struct {
	to    []int8  // to[i]: the position pool i moves to
	remap []int32 // nil for the identity
}

// remap returns perm p's map of queue vectors, nil for the identity.
func (s *Space) remap(p uint16) []int32 { return s.perms[p].remap }

// moved returns queue vector j after perm p.
func (s *Space) moved(p uint16, j int) int {
	if r := s.perms[p].remap; r != nil {
		return int(r[j])
	}
	return j
}

// CountStates returns the number of configurations and states of the model
// without building anything; ok is false when the count overflows 64 bits.
func CountStates(m *Model) (configs, states uint64, ok bool) {
	return countStates(m, false, false)
}

// CountSymmetricStates is CountStates for NewSymmetricSpace: it counts the
// canonical configurations, one by one.
func CountSymmetricStates(m *Model) (configs, states uint64, ok bool) {
	return countStates(m, false, true)
}

func countStates(m *Model, byPair, symmetric bool) (configs, states uint64, ok bool) {
	lanes, _ := transitLanes(m, byPair)
	d := m.NumPools() + len(lanes)
	configs, ok = binomial(uint64(m.Servers+d-1), uint64(d-1))
	if !ok {
		return 0, 0, false
	}
	if symmetric && configs <= maxLumpedConfigs {
		if groups := SymmetricPools(m); groups != nil {
			s := &Space{M: m.NumPools(), N: m.Servers, Symmetric: groups}
			s.transit, s.transitOf = transitLanes(m, false)
			s.index0()
			configs = 0
			s.enumerate(func(x []int8) {
				if s.canonical(x) {
					configs++
				}
			})
		}
	}
	block := uint64(1)
	for i := range m.NumPools() {
		hi, lo := bits.Mul64(block, uint64(m.Limit(i)))
		if hi != 0 {
			return configs, 0, false
		}
		block = lo
	}
	hi, states := bits.Mul64(configs, block)
	return configs, states, hi == 0
}

// binomial returns C(n, k), and false on overflow.
func binomial(n, k uint64) (uint64, bool) {
	if k > n {
		return 0, true
	}
	k = min(k, n-k)
	r := uint64(1)
	for i := uint64(1); i <= k; i++ {
		// r·(n−k+i)/i is exact at every step (r is C(n−k+i−1, i−1)).
		hi, lo := bits.Mul64(r, n-k+i)
		if hi >= i {
			return 0, false
		}
		q, _ := bits.Div64(hi, lo, i)
		r = q
	}
	return r, true
}

// transitLanes returns the model's transit lanes, each as its first pair in
// paper order, and the lane of every pair that can switch (−1: none);
// byPair gives every pair a lane of its own (the chain before lumping,
// which tests compare with).
func transitLanes(m *Model, byPair bool) ([]Pair, [][]int) {
	M := m.NumPools()
	of := make([][]int, M)
	for a := range of {
		of[a] = make([]int, M)
		for b := range of[a] {
			of[a][b] = -1
		}
	}
	if m.InstantSwitches {
		return nil, of
	}
	var lanes []Pair
	for _, p := range Pairs(M) {
		if !m.CanSwitch(p.From, p.To) {
			continue
		}
		rate := m.SwitchRates[p.From][p.To]
		l := slices.IndexFunc(lanes, func(q Pair) bool {
			return !byPair && q.To == p.To && m.SwitchRates[q.From][q.To] == rate
		})
		if l < 0 {
			l = len(lanes)
			lanes = append(lanes, p)
		}
		of[p.From][p.To] = l
	}
	return lanes, of
}

// NewSpace indexes the state space of a valid model. maxStates > 0 refuses,
// before allocating, a space of more states than that (ErrTooLarge).
func NewSpace(m *Model, maxStates int) (*Space, error) {
	return newSpace(m, maxStates, false, false)
}

// NewSymmetricSpace is NewSpace with the model's exchangeable pools lumped
// (SymmetricPools; see Space). Its states stand for their permutations:
// only policies that treat exchangeable pools alike (an optimal one) are
// exact on it.
func NewSymmetricSpace(m *Model, maxStates int) (*Space, error) {
	return newSpace(m, maxStates, false, true)
}

// maxLumpedConfigs is the most configurations (before lumping) a
// symmetric space enumerates to find the canonical ones; a model with more
// is not lumped by its symmetric pools.
const maxLumpedConfigs = 1 << 26

// newSpace is NewSpace, or with byPair the space before lumping: servers
// in transit counted by pair; symmetric lumps exchangeable pools.
func newSpace(m *Model, maxStates int, byPair, symmetric bool) (*Space, error) {
	if m.Servers > MaxServers {
		return nil, fmt.Errorf("servers: %d servers, a policy table holds at most %d", m.Servers, MaxServers)
	}
	configs, states, ok := countStates(m, byPair, symmetric)
	if !ok || configs > math.MaxInt32 || states > math.MaxInt64/BytesPerState {
		return nil, fmt.Errorf("%w: more than 2^59 states", ErrTooLarge)
	}
	if maxStates > 0 && states > uint64(maxStates) {
		return nil, fmt.Errorf("%w: %d states (%d configurations × %d queue states) need %s, over the limit of %d states (%s)",
			ErrTooLarge, states, configs, states/configs, FormatBytes(states*BytesPerState),
			maxStates, FormatBytes(uint64(maxStates)*BytesPerState))
	}
	M := m.NumPools()
	s := &Space{M: M, N: m.Servers, Js: m.Limits(), Configs: int(configs)}
	s.B = int(states / configs)
	s.States = int(states)
	s.stride = make([]int, M)
	st := 1
	for i := M - 1; i >= 0; i-- {
		s.stride[i] = st
		st *= s.Js[i]
	}
	s.transit, s.transitOf = transitLanes(m, byPair)
	if symmetric && !byPair {
		if full, ok := binomial(uint64(m.Servers+M+len(s.transit)-1), uint64(M+len(s.transit)-1)); ok && full <= maxLumpedConfigs {
			s.Symmetric = SymmetricPools(m)
		}
	}
	s.index0()
	s.perms = []spacePerm{{to: identity(M)}}
	s.x = make([]int8, 0, s.Configs*s.dims)
	if s.Symmetric != nil {
		s.canon = make([]int32, 0, s.Configs)
	}
	s.enumerate(func(x []int8) {
		if s.Symmetric == nil {
			s.x = append(s.x, x...)
			return
		}
		if !s.canonical(x) {
			s.canon = append(s.canon, -1)
			return
		}
		s.canon = append(s.canon, int32(len(s.x)/s.dims))
		s.x = append(s.x, x...)
	})
	s.successors(m)
	return s, nil
}

// index0 sets what ranking configurations needs: the dimensions, the
// lanes' places in x, the binomials, and the lanes into each pool.
func (s *Space) index0() {
	M := s.M
	s.dims = M + len(s.transit)
	for a := range s.transitOf {
		for b, l := range s.transitOf[a] {
			if l >= 0 {
				s.transitOf[a][b] = M + l
			}
		}
	}
	s.binom = make([][]uint64, s.N+s.dims+1)
	for n := range s.binom {
		s.binom[n] = make([]uint64, s.dims+1)
		for k := 0; k <= s.dims && k <= n; k++ {
			s.binom[n][k], _ = binomial(uint64(n), uint64(k))
		}
	}
	s.keyLanes = make([][]int, M)
	for l, p := range s.transit {
		s.keyLanes[p.To] = append(s.keyLanes[p.To], M+l)
	}
}

func identity(n int) []int8 {
	to := make([]int8, n)
	for i := range to {
		to[i] = int8(i)
	}
	return to
}

// SymmetricPools returns the groups of exchangeable pools of m, each of two
// or more pools in increasing order, nil when there are none: pools whose
// arrival, service and holding rates, blocking cost and truncation are
// equal, and whose switch rates and costs to and from every other pool
// (and between them) are, so that swapping them changes nothing. A group
// holding the pool the krylov method's coarse level aggregates over
// (CoarsePool) is left out: its aggregates follow that pool's queue.
func SymmetricPools(m *Model) [][]int {
	M := m.NumPools()
	swappable := func(a, b int) bool {
		pa, pb := m.Pools[a], m.Pools[b]
		if pa.ArrivalRate != pb.ArrivalRate || pa.ServiceRate != pb.ServiceRate || pa.HoldingCost != pb.HoldingCost ||
			m.BlockingCost(a) != m.BlockingCost(b) || m.Limit(a) != m.Limit(b) {
			return false
		}
		if m.SwitchRates[a][b] != m.SwitchRates[b][a] || m.SwitchCosts[a][b] != m.SwitchCosts[b][a] {
			return false
		}
		for k := range M {
			if k == a || k == b {
				continue
			}
			if m.SwitchRates[a][k] != m.SwitchRates[b][k] || m.SwitchRates[k][a] != m.SwitchRates[k][b] ||
				m.SwitchCosts[a][k] != m.SwitchCosts[b][k] || m.SwitchCosts[k][a] != m.SwitchCosts[k][b] {
				return false
			}
		}
		return true
	}
	// A pool joins the first group whose first pool it can swap with: the
	// swaps with one pool generate every permutation of the group.
	var groups [][]int
	for i := range M {
		joined := false
		for g := range groups {
			if swappable(groups[g][0], i) {
				groups[g] = append(groups[g], i)
				joined = true
				break
			}
		}
		if !joined {
			groups = append(groups, []int{i})
		}
	}
	slow := CoarsePool(m)
	var out [][]int
	for _, g := range groups {
		if len(g) > 1 && !slices.Contains(g, slow) {
			out = append(out, g)
		}
	}
	return out
}

// less reports whether pool a's key (servers in place, then on each lane
// into it) in configuration x is below pool b's.
func (s *Space) less(x []int8, a, b int) bool {
	if x[a] != x[b] {
		return x[a] < x[b]
	}
	for k, la := range s.keyLanes[a] {
		if lb := s.keyLanes[b][k]; x[la] != x[lb] {
			return x[la] < x[lb]
		}
	}
	return false
}

// canonical reports whether configuration x is canonical: within each
// group of exchangeable pools, keys in non-increasing order.
func (s *Space) canonical(x []int8) bool {
	for _, g := range s.Symmetric {
		for k := 1; k < len(g); k++ {
			if s.less(x, g[k-1], g[k]) {
				return false
			}
		}
	}
	return true
}

// canonicalize writes into to the permutation that makes x canonical (a
// stable sort of each group by decreasing key: ties keep their order) and
// into z the permuted configuration.
func (s *Space) canonicalize(x, z []int8, to []int8) {
	for i := range to {
		to[i] = int8(i)
	}
	var order [MaxPools]int
	for _, g := range s.Symmetric {
		o := order[:len(g)]
		copy(o, g)
		// Insertion sort: groups are small.
		for k := 1; k < len(o); k++ {
			for q := k; q > 0 && s.less(x, o[q-1], o[q]); q-- {
				o[q-1], o[q] = o[q], o[q-1]
			}
		}
		for r, pool := range o {
			to[pool] = int8(g[r])
		}
	}
	for i := range s.M {
		z[to[i]] = x[i]
	}
	for l, p := range s.transit {
		z[s.transitOf[to[p.From]][to[p.To]]] = x[s.M+l]
	}
}

// index returns the configuration index of x (any configuration of the
// chain) and the perm that leads there.
func (s *Space) index(x []int8) (int, uint16) {
	if s.Symmetric == nil {
		return s.rank(x), 0
	}
	var zb [128]int8
	var tb [MaxPools]int8
	z, to := zb[:s.dims], tb[:s.M]
	s.canonicalize(x, z, to)
	c := int(s.canon[s.rank(z)])
	for p, q := range s.perms {
		if slices.Equal(q.to, to) {
			return c, uint16(p)
		}
	}
	q := spacePerm{to: slices.Clone(to), remap: make([]int32, s.B)}
	for j := range s.B {
		r := 0
		for i := range s.M {
			r += s.queue(j, i) * s.stride[to[i]]
		}
		q.remap[j] = int32(r)
	}
	s.perms = append(s.perms, q)
	return c, uint16(len(s.perms) - 1)
}

// FormatBytes prints a byte count in binary units.
func FormatBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// enumerate calls fn with every configuration, in lexicographic order
// (fn must not keep x).
func (s *Space) enumerate(fn func(x []int8)) {
	cur := make([]int8, s.dims)
	var rec func(i, left int)
	rec = func(i, left int) {
		if i == s.dims-1 {
			cur[i] = int8(left)
			fn(cur)
			return
		}
		for v := 0; v <= left; v++ {
			cur[i] = int8(v)
			rec(i+1, left-v)
		}
	}
	rec(0, s.N)
}

// compositions returns the number of ways to write n as an ordered sum of
// parts non-negative integers.
func (s *Space) compositions(n, parts int) uint64 {
	if parts == 0 {
		if n == 0 {
			return 1
		}
		return 0
	}
	return s.binom[n+parts-1][parts-1]
}

// rank returns the index of configuration vector x.
func (s *Space) rank(x []int8) int {
	r := uint64(0)
	left := s.N
	for i := 0; i < s.dims-1; i++ {
		for v := 0; v < int(x[i]); v++ {
			r += s.compositions(left-v, s.dims-i-1)
		}
		left -= int(x[i])
	}
	return int(r)
}

func (s *Space) config(c int) []int8 { return s.x[c*s.dims : (c+1)*s.dims] }

// queue returns pool i's queue length in queue vector j (an index within a
// configuration's block).
func (s *Space) queue(j, i int) int { return j / s.stride[i] % s.Js[i] }

// Limits returns every pool's truncation J_i.
func (s *Space) Limits() []int { return slices.Clone(s.Js) }

func (s *Space) successors(m *Model) {
	pairs := Pairs(s.M)
	s.actStart = make([]int32, s.Configs+1)
	s.compStart = make([]int32, s.Configs+1)
	y := make([]int8, s.dims)
	for c := range s.Configs {
		x := s.config(c)
		for i, p := range pairs {
			if x[p.From] == 0 || !m.CanSwitch(p.From, p.To) {
				continue
			}
			copy(y, x)
			y[p.From]--
			if m.InstantSwitches {
				y[p.To]++
			} else {
				y[s.transitOf[p.From][p.To]]++
			}
			t, perm := s.index(y)
			s.actions = append(s.actions, configAction{Action(i + 1), int32(t), perm, m.SwitchCosts[p.From][p.To]})
		}
		s.actStart[c+1] = int32(len(s.actions))
		for t, p := range s.transit {
			n := x[s.M+t]
			if n == 0 {
				continue
			}
			copy(y, x)
			y[s.M+t]--
			y[p.To]++
			t, perm := s.index(y)
			s.comps = append(s.comps, completion{int32(t), perm, m.SwitchRates[p.From][p.To] * float64(n)})
		}
		s.compStart[c+1] = int32(len(s.comps))
	}
	// Inverse lists, grouped by target, sources in increasing order; each
	// item keeps its action or rate and holds its source configuration.
	var src, entry []int32
	s.invActStart, src, entry = invert(s.Configs, s.actStart, func(i int) int32 { return s.actions[i].target })
	s.invActs = make([]configAction, len(entry))
	for k, i := range entry {
		s.invActs[k] = s.actions[i]
		s.invActs[k].target = src[k]
	}
	s.invCompStart, src, entry = invert(s.Configs, s.compStart, func(i int) int32 { return s.comps[i].target })
	s.invComps = make([]completion, len(entry))
	for k, i := range entry {
		s.invComps[k] = s.comps[i]
		s.invComps[k].target = src[k]
	}
}

// invert turns per-source successor lists (entries start[c]:start[c+1] of
// configuration c, leading to target(i)) into per-target lists: for target
// t, entries invStart[t]:invStart[t+1] of src (the source configuration) and
// entry (the index of the successor entry), sources in increasing order.
func invert(n int, start []int32, target func(i int) int32) (invStart, src, entry []int32) {
	invStart = make([]int32, n+1)
	for i := range int(start[n]) {
		invStart[target(i)+1]++
	}
	for c := range n {
		invStart[c+1] += invStart[c]
	}
	src = make([]int32, start[n])
	entry = make([]int32, start[n])
	fill := append([]int32(nil), invStart[:n]...)
	for c := range n {
		for i := start[c]; i < start[c+1]; i++ {
			t := target(int(i))
			src[fill[t]], entry[fill[t]] = int32(c), i
			fill[t]++
		}
	}
	return invStart, src, entry
}

// acts returns the actions available in configuration c, in increasing
// action order.
func (s *Space) acts(c int) []configAction { return s.actions[s.actStart[c]:s.actStart[c+1]] }

// available returns which action numbers configuration c allows (doing
// nothing always).
func (s *Space) available(c int) [256]bool {
	var ok [256]bool
	ok[0] = true
	for _, a := range s.acts(c) {
		ok[a.d] = true
	}
	return ok
}

// find returns action d of configuration c, false when it is not available.
func (s *Space) find(c int, d Action) (configAction, bool) {
	for _, a := range s.acts(c) {
		if a.d == d {
			return a, true
		}
	}
	return configAction{}, false
}

// Transit returns the space's transit lanes, each as its first pair in
// paper order; State reports a lane's servers as in transit on that pair.
func (s *Space) Transit() []Pair { return s.transit }

// Index returns the state index of s, with queue lengths clamped to J_i−1
// and its servers in transit counted by lane; ok is false when the
// configuration is not one of this space (wrong number of pools or
// servers, or servers in transit on a pair that cannot switch).
func (s *Space) Index(st State) (int, bool) {
	idx, _, ok := s.lookup(st)
	return idx, ok
}

// lookup is Index, with the permutation that carries st to the state at
// idx (to[i]: the position of pool i there; the identity without
// symmetric pools).
func (s *Space) lookup(st State) (idx int, to [MaxPools]int8, ok bool) {
	for i := range s.M {
		to[i] = int8(i)
	}
	if len(st.Jobs) != s.M || len(st.Servers) != s.M {
		return 0, to, false
	}
	var buf [128]int8
	x := buf[:0]
	if s.dims <= len(buf) {
		x = buf[:s.dims]
	} else {
		x = make([]int8, s.dims)
	}
	total := 0
	for i, k := range st.Servers {
		if k < 0 || k > s.N {
			return 0, to, false
		}
		x[i] = int8(k)
		total += k
	}
	for a := range st.Transit {
		for b, n := range st.Transit[a] {
			if n == 0 {
				continue
			}
			if n < 0 || n > s.N-total || a >= s.M || b >= s.M || s.transitOf[a][b] < 0 {
				return 0, to, false
			}
			x[s.transitOf[a][b]] += int8(n)
			total += n
		}
	}
	if total != s.N {
		return 0, to, false
	}
	c := 0
	if s.Symmetric == nil {
		c = s.rank(x)
	} else {
		var zb [128]int8
		z := zb[:s.dims]
		if s.dims > len(zb) {
			z = make([]int8, s.dims)
		}
		s.canonicalize(x, z, to[:s.M])
		c = int(s.canon[s.rank(z)])
	}
	j := 0
	for i, q := range st.Jobs {
		j += min(max(q, 0), s.Js[i]-1) * s.stride[to[i]]
	}
	return c*s.B + j, to, true
}

// symmetrize replaces each pool's figure in v by its group's mean: the
// exact figure of each of exchangeable pools, from a lumped chain's.
func (s *Space) symmetrize(v []float64) {
	for _, g := range s.Symmetric {
		mean := 0.0
		for _, i := range g {
			mean += v[i]
		}
		mean /= float64(len(g))
		for _, i := range g {
			v[i] = mean
		}
	}
}

// unmap returns action d of the state a lookup found, as an action of the
// state looked up (to: the lookup's permutation).
func (s *Space) unmap(d Action, to [MaxPools]int8) Action {
	if d == NoAction || s.Symmetric == nil {
		return d
	}
	var from [MaxPools]int
	for i := range s.M {
		from[to[i]] = i
	}
	// Action d is Pairs(M)[d−1]: pairs (lo,hi), (hi,lo) by hi, then lo.
	k, hi := int(d)-1, 1
	for (hi+1)*hi <= k {
		hi++
	}
	lo, r := (k-hi*(hi-1))/2, (k-hi*(hi-1))%2
	a, b := lo, hi
	if r == 1 {
		a, b = hi, lo
	}
	return ActionOf(from[a], from[b])
}

// State returns the state with index idx; a lane's servers in transit are
// on its first pair.
func (s *Space) State(idx int) State {
	c, j := idx/s.B, idx%s.B
	x := s.config(c)
	st := State{Jobs: make([]int, s.M), Servers: make([]int, s.M), Transit: make([][]int, s.M)}
	for i := range s.M {
		st.Jobs[i] = s.queue(j, i)
		st.Servers[i] = int(x[i])
		st.Transit[i] = make([]int, s.M)
	}
	for t, p := range s.transit {
		st.Transit[p.From][p.To] = int(x[s.M+t])
	}
	return st
}
