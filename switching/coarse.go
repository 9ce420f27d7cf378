package switching

import (
	"math"
	"slices"
)

// coarse is the preconditioner's coarse level. On the papers' stiff models
// (type 1 a thousand times slower than the others) the error that ILU(0)
// and BiCGSTAB are slow to remove is nearly constant over the fast queues:
// it varies with the configuration and the length of the slow queue
// alone. The coarse level groups the unknowns into aggregates, one per
// configuration and length of the slow queue, and the gain alone, and
// removes that error exactly: with R the aggregates' indicator columns and
// W the rows' weights, it solves the aggregated system (Rᵀ W A R) y =
// Rᵀ W r. It is used when one queue's events are at least coarseRatio
// times rarer than another's; on models without such a queue (Figure 4's)
// it costs more than it saves.
//
// The weights are an estimate of the policy's stationary law: the
// aggregated system is then the aggregated chain's own evaluation system
// (iterative aggregation–disaggregation's), where plain sums would let the
// states the chain hardly visits dominate. The estimate is a few power
// steps of the chain, from the last policy's estimate.
//
// The preconditioner is multiplicative: z₀ = R y, then
// z = z₀ + (LU)⁻¹ (r − A z₀). A z₀ is cheap: every transition of a state
// leaves from its post-decision state, so the product of A with a vector
// constant on aggregates depends only on that post-decision configuration
// and the length of the slow queue, but for the rows that reach the reference
// state (whose value is not an unknown), which are kept aside.
type coarse struct {
	y       *evalSystem
	pool    int // the slow queue
	jn      int // its truncation J_pool
	n       int // aggregates: J_pool per configuration, and the gain last
	sys     coarseSystem
	kr      *bicgstab
	w       []float64 // per state: the weights
	special []specialRow
	exp     []float64     // per aggregate (c, a): the expected coarse value one step from post-decision configuration c
	z0, t   []float64     // fine scratch: the prolonged correction, and the corrected residual
	out     [][]float64   // per worker: a block of scratch for the power steps
	rowsOf  [][]coarseRow // per configuration: its aggregates' rows, reused from one build to the next
	started bool          // the weights have been estimated once
	changed int           // states whose action changed since the last build (−1: unknown)
}

// specialRow is a row of the system computed entry by entry: the
// reference state's (the gain's row) and those with a transition to it.
type specialRow struct {
	i, k int // the unknown (row) and its aggregate
	coarseRow
}

// coarseRow is a row of the aggregated system being assembled.
type coarseRow struct {
	cols []int
	vals []float64
}

func (r *coarseRow) add(col int, v float64) {
	for q := range r.cols {
		if r.cols[q] == col {
			r.vals[q] += v
			return
		}
	}
	r.cols = append(r.cols, col)
	r.vals = append(r.vals, v)
}

// coarseRatio is how much rarer a queue's events (λ + N·µ) must be than
// another's for the coarse level to be used.
const coarseRatio = 10

// The weights are estimated by coarseFirstSteps power steps from uniform
// weights for the first policy, and updated by coarseSteps for each
// later one (policies change little from one to the next), or by
// coarseFewSteps when the policy's actions changed in fewer than 1% of
// the states.
const coarseFirstSteps, coarseSteps, coarseFewSteps = 100, 20, 5

// coarseFloor is the weight every state gets on top of its estimate
// (scaled to average 1).
const coarseFloor = 1e-4

// The aggregated system is solved (by BiCGSTAB with ILU(0)) to
// coarseTolerance of its right-hand side, so that the preconditioner is
// the same linear map at every call, in at most coarseMaxIter iterations.
const coarseTolerance, coarseMaxIter = 1e-10, 500

// coarseBytesPerState is the memory the coarse level adds per state: the
// weights and two vectors of scratch (24 bytes), and the aggregated
// system, about 1 KiB an aggregate (its rows hold up to some forty
// entries, at 20 bytes with their factors, and its BiCGSTAB seven
// vectors), shared by the Π_{i≠pool} J_i states of an aggregate of the
// model's slow queue (CoarsePool, which must be one).
func coarseBytesPerState(m *Model) uint64 {
	per, pool := uint64(1), CoarsePool(m)
	for i := range m.NumPools() {
		if i != pool {
			per *= uint64(m.Limit(i))
		}
	}
	return 24 + (1024+per-1)/per
}

// CoarsePool returns the queue the krylov method's coarse level aggregates
// over: the one whose events (λ + N·µ) are rarest, when they are at least
// coarseRatio times rarer than another queue's; or −1 when the model has
// no such queue and the method uses no coarse level.
func CoarsePool(m *Model) int {
	slow, lo, hi := -1, math.Inf(1), 0.0
	for i, p := range m.Pools {
		r := p.ArrivalRate + float64(m.Servers)*p.ServiceRate
		if r < lo {
			slow, lo = i, r
		}
		hi = max(hi, r)
	}
	if !(lo*coarseRatio <= hi) {
		return -1
	}
	return slow
}

// coarseSystem is the aggregated system, with its ILU(0) factors, solved
// by BiCGSTAB.
type coarseSystem struct {
	ilu[float64]
	val []float64 // the entries (ilu.lu holds their factors)
	rhs []float64
}

func (a *coarseSystem) size() int        { return len(a.rhs) }
func (a *coarseSystem) right() []float64 { return a.rhs }

func (a *coarseSystem) rows(fn func(c, lo, hi int)) {
	n := len(a.rhs)
	for c := range chunks(n) {
		fn(c, c*chunk, min((c+1)*chunk, n))
	}
}

func (a *coarseSystem) mul(out, x []float64) {
	for i := range out {
		acc := 0.0
		for k := a.start[i]; k < a.start[i+1]; k++ {
			acc += a.val[k] * x[a.col[k]]
		}
		out[i] = acc
	}
}

func (a *coarseSystem) precondition(z, r []float64) { a.ilu.solve(z, r, 0, len(r)) }

func newCoarse(y *evalSystem, pool int) *coarse {
	s := y.e.s
	n := s.Configs*s.Js[pool] + 1
	c := &coarse{
		y: y, pool: pool, jn: s.Js[pool], n: n,
		sys: coarseSystem{ilu: newILU[float64](n), rhs: make([]float64, n)},
		kr:  newBiCGStab(n),
		w:   make([]float64, s.States),
		exp: make([]float64, n-1),
		z0:  make([]float64, y.n), t: make([]float64, y.n),
	}
	for i := range c.w {
		c.w[i] = 1
	}
	c.changed = -1
	c.out = make([][]float64, y.e.workers)
	for w := range c.out {
		c.out[w] = make([]float64, s.B)
	}
	c.rowsOf = make([][]coarseRow, s.Configs)
	for k := range c.rowsOf {
		c.rowsOf[k] = make([]coarseRow, s.Js[pool])
	}
	return c
}

// aggregate returns the aggregate of state st.
func (c *coarse) aggregate(st int) int {
	s := c.y.e.s
	return st/s.B*c.jn + st%s.B/s.stride[c.pool]%c.jn
}

// unknown returns the aggregate of unknown i.
func (c *coarse) unknown(i int) int {
	if i == c.y.n-1 {
		return c.n - 1
	}
	return c.aggregate(c.y.unperm(i))
}

// runs calls fn for the runs of contiguous states of configuration k,
// with the slow queue's length a in each.
func (c *coarse) runs(k int, fn func(a, st0, st1 int)) {
	s := c.y.e.s
	st := s.stride[c.pool]
	for hi := k * s.B; hi < (k+1)*s.B; hi += st * c.jn {
		for a := range c.jn {
			lo := hi + a*st
			fn(a, lo, lo+st)
		}
	}
}

// targets sets target[d] to the configuration action d leads to from c.
func targets(s *Space, c int, target *[256]int32) {
	target[0] = int32(c)
	for _, a := range s.acts(c) {
		target[a.d] = a.target
	}
}

// build updates the weights for the system's policy and assembles and
// factors the aggregated system.
func (c *coarse) build() {
	y := c.y
	e, s := y.e, y.e.s
	steps := coarseSteps
	if !c.started {
		steps, c.started = coarseFirstSteps, true
	} else if c.changed >= 0 && c.changed*100 < s.States {
		steps = coarseFewSteps
	}
	c.changed = -1
	rho := c.t // free between preconditioner calls
	for range steps {
		e.powerStep(c.w, rho, y.pol, c.out, nil)
	}
	// States the steps have not reached (or that the chain leaves at
	// once) keep a little weight, so that no aggregate's equation
	// vanishes; the weights are scaled to average 1.
	total := 0.0
	for _, v := range c.w {
		total += v
	}
	mean := total / float64(len(c.w))
	for i, v := range c.w {
		c.w[i] = v/mean + coarseFloor
	}
	c.findSpecial()
	// Each configuration's J rows, assembled on the workers: a row sums
	// its states' rows, weighted, and the rows of the states with one
	// post-decision configuration p sum to (their weight)·(the
	// aggregate, the gain, minus one step from p).
	rowsOf := c.rowsOf
	e.parallel(func(_, c0, c1 int) {
		var target [256]int32
		posts := make([]coarseRow, c.jn) // per length a: post-decision configurations and their weights
		for k := c0; k < c1; k++ {
			targets(s, k, &target)
			for a := range posts {
				posts[a].cols, posts[a].vals = posts[a].cols[:0], posts[a].vals[:0]
			}
			c.runs(k, func(a, st0, st1 int) {
				for st := st0; st < st1; st++ {
					if !c.isSpecial(st) {
						posts[a].add(int(target[y.pol[st]]), c.w[st])
					}
				}
			})
			rs := rowsOf[k]
			for a := range rs {
				r := &rs[a]
				r.cols, r.vals = r.cols[:0], r.vals[:0]
				total := 0.0
				for _, w := range posts[a].vals {
					total += w
				}
				r.add(k*c.jn+a, total)
				r.add(c.n-1, total)
				for q, p := range posts[a].cols {
					w := posts[a].vals[q]
					c.step(p, a, func(to int, prob float64) { r.add(to, -w*prob) })
				}
			}
		}
	})
	// The special rows, entry by entry.
	var gainRow coarseRow
	for _, sp := range c.special {
		w := c.w[y.unperm(sp.i)]
		r := &gainRow
		if sp.k != c.n-1 {
			r = &rowsOf[sp.k/c.jn][sp.k%c.jn]
		}
		for q, col := range sp.cols {
			r.add(col, w*sp.vals[q])
		}
	}
	a := &c.sys
	a.col, a.val = a.col[:0], a.val[:0]
	store := func(i int, r coarseRow) {
		idx := make([]int, len(r.cols))
		for q := range idx {
			idx[q] = q
		}
		slices.SortFunc(idx, func(p, q int) int { return r.cols[p] - r.cols[q] })
		a.start[i] = len(a.col)
		for _, q := range idx {
			if r.cols[q] == i {
				a.diag[i] = len(a.col)
			}
			a.col = append(a.col, int32(r.cols[q]))
			a.val = append(a.val, r.vals[q])
		}
	}
	for k := range s.Configs {
		for q, r := range rowsOf[k] {
			store(k*c.jn+q, r)
		}
	}
	store(c.n-1, gainRow)
	a.start[c.n] = len(a.col)
	a.lu = append(a.lu[:0], a.val...)
	a.factor(0, c.n)
}

// step calls fn for the aggregates one uniformized step leads to from
// post-decision configuration p with the slow queue at length a, and
// their probabilities (the chain's other moves stay in the aggregate).
func (c *coarse) step(p, a int, fn func(to int, prob float64)) {
	e, s := c.y.e, c.y.e.s
	out := 0.0
	for i := s.compStart[p]; i < s.compStart[p+1]; i++ {
		fn(int(s.comps[i].target)*c.jn+a, e.comp[i])
		out += e.comp[i]
	}
	if arr := e.arr[c.pool]; a < c.jn-1 && arr > 0 {
		fn(p*c.jn+a+1, arr)
		out += arr
	}
	if k := int(s.config(p)[c.pool]); a > 0 && k > 0 {
		d := e.mu[c.pool] * float64(min(a, k))
		fn(p*c.jn+a-1, d)
		out += d
	}
	fn(p*c.jn+a, 1-out)
}

// findSpecial lists the reference state's row and the rows with a
// transition to the reference state. The reference state's queues are
// empty, so only states whose queues are empty or hold one job can reach
// it.
func (c *coarse) findSpecial() {
	y := c.y
	s := y.e.s
	c.special = c.special[:0]
	js := append([]int{0}, s.stride...)
	var buf []entry
	for k := range s.Configs {
		for _, j := range js {
			st := k*s.B + j
			i := y.perm(st)
			r := rowBuf{e: buf[:0], from: 0, to: y.n, ref: y.ref}
			y.fill(&r, i)
			buf = r.e
			if st != y.ref && !r.reaches {
				continue
			}
			sp := specialRow{i: i, k: c.unknown(i)}
			for _, en := range r.e {
				sp.add(c.unknown(int(en.col)), en.val)
			}
			c.special = append(c.special, sp)
		}
	}
}

// isSpecial reports whether state st's row is special.
func (c *coarse) isSpecial(st int) bool {
	s := c.y.e.s
	if j := st % s.B; j != 0 && !slices.Contains(s.stride, j) {
		return false
	}
	for _, sp := range c.special {
		if c.y.unperm(sp.i) == st {
			return true
		}
	}
	return false
}

// precondition sets z = z₀ + (LU)⁻¹ (r − A z₀), z₀ = R (Rᵀ W A R)⁻¹ Rᵀ W r.
func (c *coarse) precondition(z, r []float64) {
	y := c.y
	e, s := y.e, y.e.s
	a := &c.sys
	// Restrict.
	e.parallel(func(_, c0, c1 int) {
		for k := c0; k < c1; k++ {
			rhs := a.rhs[k*c.jn : (k+1)*c.jn]
			clear(rhs)
			c.runs(k, func(q, st0, st1 int) {
				acc := 0.0
				for st := st0; st < st1; st++ {
					if st != y.ref {
						acc += c.w[st] * r[y.perm(st)]
					}
				}
				rhs[q] += acc
			})
		}
	})
	a.rhs[c.n-1] = c.w[y.ref] * r[y.n-1]
	// Solve the aggregated system.
	goal := 0.0
	for _, v := range a.rhs {
		goal = max(goal, math.Abs(v))
	}
	clear(c.kr.x)
	c.kr.solve(a, goal*coarseTolerance, coarseMaxIter, func(int, float64) error { return nil })
	yc := c.kr.x
	// The expected coarse value one step from every post-decision aggregate.
	for p := range s.Configs {
		for q := range c.jn {
			acc := 0.0
			c.step(p, q, func(to int, prob float64) { acc += prob * yc[to] })
			c.exp[p*c.jn+q] = acc
		}
	}
	// Prolong, and take A z₀ away from r.
	g := yc[c.n-1]
	e.parallel(func(_, c0, c1 int) {
		var target [256]int32
		for k := c0; k < c1; k++ {
			targets(s, k, &target)
			c.runs(k, func(q, st0, st1 int) {
				v := yc[k*c.jn+q]
				for st := st0; st < st1; st++ {
					i := y.perm(st)
					if st == y.ref {
						c.z0[i] = g
						continue
					}
					c.z0[i] = v
					c.t[i] = r[i] - (v + g - c.exp[int(target[y.pol[st]])*c.jn+q])
				}
			})
		}
	})
	for _, sp := range c.special {
		acc := 0.0
		for q, col := range sp.cols {
			acc += sp.vals[q] * yc[col]
		}
		c.t[sp.i] = r[sp.i] - acc
	}
	y.inParts(func(from, to int) { y.ilu.solve(z, c.t, from, to) })
	y.rows(func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			z[i] += c.z0[i]
		}
	})
}
