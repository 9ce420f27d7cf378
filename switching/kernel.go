package switching

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// engine holds what one solve's sweeps need: the space, the rates divided
// by Λ, the per-step cost of each queue vector, and the worker pool.
//
// Every sweep is two passes over the states, each split over the workers by
// configuration blocks (the result of each state does not depend on which
// worker computes it, so results do not depend on the number of workers):
//
//   - expect: U(S) = α·Σ_S' q(S,S')·V(S'), the discounted expected value one
//     step after S when nothing is done in S (fictitious self-loops included);
//   - improve: V(S) = h(S)/Λ + min_d [c(d) + U(d(S))], where d(S) is the
//     state right after action d: same queues, another configuration.
//
// Because an action only moves servers, U is computed once per state and the
// minimum reads up to M(M−1)+1 contiguous blocks of U.
type engine struct {
	s       *Space
	alpha   float64
	arr     []float64 // λ_i/Λ
	mu      []float64 // µ_i/Λ
	comp    []float64 // completion rate/Λ, per entry of s.comps
	h       []float64 // per queue vector: (Σ c_i j_i + Σ λ_i b_i [j_i = J_i−1])/Λ
	hold    []float64 // per queue vector: Σ c_i j_i (a rate, not divided by Λ)
	edge    []bool    // per queue vector: some j_i = J_i−1
	lam     float64   // Λ
	slow    int       // the queue the krylov method's coarse level aggregates over, or −1
	workers int
}

func newEngine(m *Model, s *Space, alpha float64, workers int) *engine {
	lam := m.Lambda()
	e := &engine{s: s, alpha: alpha, lam: lam, slow: CoarsePool(m), workers: workers}
	if e.workers <= 0 {
		e.workers = runtime.GOMAXPROCS(0)
	}
	for _, p := range m.Pools {
		e.arr = append(e.arr, p.ArrivalRate/lam)
		e.mu = append(e.mu, p.ServiceRate/lam)
	}
	e.comp = make([]float64, len(s.comps))
	for i, c := range s.comps {
		e.comp[i] = c.rate / lam
	}
	e.h = make([]float64, s.B)
	e.hold = make([]float64, s.B)
	e.edge = make([]bool, s.B)
	for j := range s.B {
		hold, block := 0.0, 0.0
		for i, p := range m.Pools {
			q := s.queue(j, i)
			hold += p.HoldingCost * float64(q)
			if q == s.Js[i]-1 {
				block += p.ArrivalRate * m.BlockingCost(i)
				e.edge[j] = true
			}
		}
		e.hold[j] = hold
		e.h[j] = (hold + block) / lam
	}
	return e
}

// parallel runs fn over configuration ranges on the workers and returns when
// all are done. Each worker gets its index w for per-worker scratch.
func (e *engine) parallel(fn func(w, c0, c1 int)) {
	const chunk = 8
	n := e.s.Configs
	if e.workers == 1 || n <= chunk {
		fn(0, 0, n)
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range e.workers {
		wg.Go(func() {
			for {
				c0 := int(next.Add(chunk)) - chunk
				if c0 >= n {
					return
				}
				fn(w, c0, min(c0+chunk, n))
			}
		})
	}
	wg.Wait()
}

// expect computes U = α·P·V over every state.
func (e *engine) expect(U, V []float64) {
	e.parallel(func(_, c0, c1 int) {
		for c := c0; c < c1; c++ {
			e.expectBlock(U, V, c)
		}
	})
}

// expectBlock computes U for the states of configuration c. It starts from
// U = V and adds, for every possible transition, rate/Λ·(V(S') − V(S)): the
// self-loop 1 − r/Λ is then implicit, and blocked arrivals add nothing.
func (e *engine) expectBlock(U, V []float64, c int) {
	s := e.s
	B := s.B
	base := c * B
	u := U[base : base+B]
	v := V[base : base+B]
	copy(u, v)
	for i := s.compStart[c]; i < s.compStart[c+1]; i++ {
		z := e.comp[i]
		t := int(s.comps[i].target) * B
		w := V[t : t+B]
		if r := s.remap(s.comps[i].perm); r != nil {
			for x := range u {
				u[x] += z * (w[r[x]] - v[x])
			}
			continue
		}
		for x := range u {
			u[x] += z * (w[x] - v[x])
		}
	}
	x := s.config(c)
	for i := range s.M {
		st, J := s.stride[i], s.Js[i]
		span := J * st
		a := e.arr[i]
		k := int(x[i])
		for hi := 0; hi < B; hi += span {
			if a != 0 {
				n := (J - 1) * st
				uu, vv, vn := u[hi:hi+n], v[hi:hi+n], v[hi+st:hi+st+n]
				for y := range uu {
					uu[y] += a * (vn[y] - vv[y])
				}
			}
			if k == 0 {
				continue
			}
			if st == 1 {
				uu, vv := u[hi:hi+J], v[hi:hi+J]
				for q := 1; q < J; q++ {
					uu[q] += e.mu[i] * float64(min(q, k)) * (vv[q-1] - vv[q])
				}
				continue
			}
			for q := 1; q < J; q++ {
				d := e.mu[i] * float64(min(q, k))
				lo := hi + q*st
				uu, vv, vp := u[lo:lo+st], v[lo:lo+st], v[lo-st:lo]
				for y := range uu {
					uu[y] += d * (vp[y] - vv[y])
				}
			}
		}
	}
	if e.alpha != 1 {
		for y := range u {
			u[y] *= e.alpha
		}
	}
}

// sweepStats are the extremes of V_new − V_old over a sweep.
type sweepStats struct{ lo, hi float64 }

func (a sweepStats) merge(b sweepStats) sweepStats {
	return sweepStats{min(a.lo, b.lo), max(a.hi, b.hi)}
}

func emptyStats() sweepStats { return sweepStats{math.Inf(1), math.Inf(-1)} }

// extremes runs fn over configuration ranges on the workers and merges
// the extremes each returns (a min and a max: the same for any split).
func (e *engine) extremes(fn func(w, c0, c1 int) sweepStats) sweepStats {
	stats := make([]sweepStats, e.workers)
	for w := range stats {
		stats[w] = emptyStats()
	}
	e.parallel(func(w, c0, c1 int) { stats[w] = stats[w].merge(fn(w, c0, c1)) })
	total := emptyStats()
	for _, st := range stats {
		total = total.merge(st)
	}
	return total
}

// improve sets V = h + min_d [c(d) + U(d(S))] − offset over every state and
// returns the extremes of the change (before the offset is subtracted).
func (e *engine) improve(V, U []float64, offset float64, scratch [][]float64) sweepStats {
	return e.extremes(func(w, c0, c1 int) sweepStats {
		st := emptyStats()
		for c := c0; c < c1; c++ {
			st = st.merge(e.improveBlock(V, U, c, offset, scratch[w]))
		}
		return st
	})
}

func (e *engine) improveBlock(V, U []float64, c int, offset float64, best []float64) sweepStats {
	B := e.s.B
	base := c * B
	e.bestBlock(U, c, best)
	v := V[base : base+B]
	h := e.h[:B]
	lo, hi := math.Inf(1), math.Inf(-1)
	for x := range v {
		nv := h[x] + best[x]
		d := nv - v[x]
		lo, hi = min(lo, d), max(hi, d)
		v[x] = nv - offset
	}
	return sweepStats{lo, hi}
}

// span returns the extremes of T V − V over every state, where U = P·V, and
// leaves V as it is.
func (e *engine) span(V, U []float64, scratch [][]float64) sweepStats {
	return e.extremes(func(w, c0, c1 int) sweepStats {
		best := scratch[w]
		B := e.s.B
		lo, hi := math.Inf(1), math.Inf(-1)
		for c := c0; c < c1; c++ {
			e.bestBlock(U, c, best)
			for x, v := range V[c*B : (c+1)*B] {
				d := e.h[x] + best[x] - v
				lo, hi = min(lo, d), max(hi, d)
			}
		}
		return sweepStats{lo, hi}
	})
}

// bestBlock sets best over configuration c to min_d [c(d) + U(d(S))].
func (e *engine) bestBlock(U []float64, c int, best []float64) {
	s := e.s
	B := s.B
	base := c * B
	copy(best, U[base:base+B])
	for _, a := range s.acts(c) {
		t := int(a.target) * B
		w := U[t : t+B]
		if r := s.remap(a.perm); r != nil {
			for x, k := range r {
				if q := w[k] + a.cost; q < best[x] {
					best[x] = q
				}
			}
			continue
		}
		for x, q := range w {
			if q += a.cost; q < best[x] {
				best[x] = q
			}
		}
	}
}

// valueAt returns (T V)(idx) = h + min_d [c(d) + U(d(S))] for one state.
func (e *engine) valueAt(U []float64, idx int) float64 {
	s := e.s
	c, j := idx/s.B, idx%s.B
	best := U[idx]
	for _, a := range s.acts(c) {
		best = min(best, a.cost+U[int(a.target)*s.B+s.moved(a.perm, j)])
	}
	return e.h[j] + best
}

// tieTolerance is how close to the minimum an action's value must be to tie
// with it.
func tieTolerance(best float64) float64 { return 1e-9 * max(1, math.Abs(best)) }

// decide writes into pol the action of every state by the tie rule: the
// actions within tieTolerance of the minimum tie; do nothing wins a tie,
// then the lowest action number. With keep non-nil (policy iteration), an
// action of keep that ties is kept instead; the number of states whose
// action differs from keep is returned.
func (e *engine) decide(pol []int8, U []float64, keep []int8) int {
	s := e.s
	B := s.B
	return e.eachState(func(c, j, idx int, acts []configAction) bool {
		best := U[idx]
		for _, a := range acts {
			best = min(best, a.cost+U[int(a.target)*B+s.moved(a.perm, j)])
		}
		tol := best + tieTolerance(best)
		d := Action(-1)
		if U[idx] <= tol {
			d = NoAction
		} else {
			for _, a := range acts {
				if a.cost+U[int(a.target)*B+s.moved(a.perm, j)] <= tol {
					d = a.d
					break
				}
			}
		}
		changed := false
		if keep != nil {
			k := Action(keep[idx])
			if k != d && e.actionValue(U, c, j, k) <= tol {
				d = k
			}
			changed = d != k
		}
		pol[idx] = int8(d)
		return changed
	})
}

// eachState calls fn for every state (configuration c, queue vector j,
// index idx, the actions of c) on the workers, and returns how many calls
// returned true.
func (e *engine) eachState(fn func(c, j, idx int, acts []configAction) bool) int {
	counts := make([]int, e.workers)
	e.parallel(func(w, c0, c1 int) {
		B := e.s.B
		for c := c0; c < c1; c++ {
			acts := e.s.acts(c)
			for j := range B {
				if fn(c, j, c*B+j, acts) {
					counts[w]++
				}
			}
		}
	})
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// greedy improves pol for U: each state takes the exact minimizer (do
// nothing, then the lowest action number, wins an exact tie), except that
// it keeps its action when that is within keep of the minimum. It returns
// the number of states whose action changed. Policy iteration to a tight
// tolerance needs this rather than decide: a tie tolerance relative to the
// values would keep actions whose cost exceeds the minimum by more than the
// tolerance; and keeping near-ties keeps the chain from splitting on a
// choice between actions of equal value.
func (e *engine) greedy(pol []int8, U []float64, keep float64) int {
	s := e.s
	B := s.B
	return e.eachState(func(c, j, idx int, acts []configAction) bool {
		best, d := U[idx], NoAction
		for _, a := range acts {
			if v := a.cost + U[int(a.target)*B+s.moved(a.perm, j)]; v < best {
				best, d = v, a.d
			}
		}
		old := Action(pol[idx])
		if old == d || e.actionValue(U, c, j, old) <= best+keep {
			return false
		}
		pol[idx] = int8(d)
		return true
	})
}

// actionValue returns c(d) + U(d(S)) for state (c, j), +Inf when d is not
// available there.
func (e *engine) actionValue(U []float64, c, j int, d Action) float64 {
	s := e.s
	if d == NoAction {
		return U[c*s.B+j]
	}
	if a, ok := s.find(c, d); ok {
		return a.cost + U[int(a.target)*s.B+s.moved(a.perm, j)]
	}
	return math.Inf(1)
}

// evaluate sets V = h + c(f(S)) + U(f(S)(S)) − offset for a fixed policy f
// and returns the extremes of the change.
func (e *engine) evaluate(V, U []float64, pol []int8, offset float64) sweepStats {
	return e.extremes(func(_, c0, c1 int) sweepStats {
		s := e.s
		B := s.B
		var target [256]int32
		var perm [256]uint16
		var cost [256]float64
		lo, hi := math.Inf(1), math.Inf(-1)
		for c := c0; c < c1; c++ {
			target[0], perm[0], cost[0] = int32(c), 0, 0
			for _, a := range s.acts(c) {
				target[a.d], perm[a.d], cost[a.d] = a.target, a.perm, a.cost
			}
			base := c * B
			for j := range B {
				d := pol[base+j]
				nv := e.h[j] + cost[d] + U[int(target[d])*B+s.moved(perm[d], j)]
				diff := nv - V[base+j]
				lo, hi = min(lo, diff), max(hi, diff)
				V[base+j] = nv - offset
			}
		}
		return sweepStats{lo, hi}
	})
}

// evalAt returns h + c(f(S)) + U(f(S)(S)) for one state.
func (e *engine) evalAt(U []float64, pol []int8, idx int) float64 {
	c, j := idx/e.s.B, idx%e.s.B
	return e.h[j] + e.actionValue(U, c, j, Action(pol[idx]))
}
