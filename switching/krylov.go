package switching

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
)

// KrylovBytesPerState bounds the memory the krylov method needs per state,
// on top of BytesPerState: the ILU(0) factors of the policy's matrix (8
// bytes an entry: its column and its factor in float32; a row holding at
// most one entry per transition of the state: 2M queue moves, a switch
// completing in each transit lane, the state itself and the gain), 36
// bytes of row indexes, right-hand side and the product's scratch vector,
// the seven vectors of BiCGSTAB, the previous policy, and each row's entry
// count and the action it was assembled for (a row holds at most
// 2·11 + 110 + 3 entries: a byte counts them); and, on models with a slow
// queue, the coarse level's (coarseBytesPerState). The matrix itself is
// never stored: its products are taken from the chain's structure.
func KrylovBytesPerState(m *Model) uint64 {
	lanes, _ := transitLanes(m, false)
	entries := uint64(2*m.NumPools() + len(lanes) + 2)
	b := entries*8 + 36 + 7*8 + 1 + 2
	if CoarsePool(m) >= 0 {
		b += coarseBytesPerState(m)
	}
	return b
}

// evalSystem is the linear system of one policy's evaluation,
//
//	V(S) + G − Σ_S' P_f(S,S')·V(S') = h(S) + c(f(S)),  V(ref) = 0,
//
// in the unknowns V(S) for S ≠ ref and the gain per step G. The equation of
// state S is row perm(S) and V(S) is unknown perm(S), where perm moves ref
// to the end: there G takes V(ref)'s place, so the matrix keeps a nonzero
// diagonal and, but for G's column of ones, is the nonsingular M-matrix
// I − P_f without ref's row and column (ILU(0) of such a matrix exists).
//
// Products with the matrix go through the engine's structured sweep
// (P_f V is P V at each state's post-decision state), so the matrix is not
// stored; what is stored, by rows (compressed sparse rows), is the part of
// it the preconditioner factors, with its ILU(0) factors in place.
type evalSystem struct {
	e            *engine
	n            int
	ref          int
	pol          []int8 // the policy evaluated
	ilu[float32]        // the preconditioner's part of the matrix, factored in place
	bound        []int  // the preconditioner's row ranges: [bound[p], bound[p+1])
	rhs          []float64
	vn, u        []float64 // the product's scratch, in state order: V, and P·V (the engine's U)
	co           *coarse   // the preconditioner's coarse level
	count        []uint8   // per row: its entries at the last build (0: none yet)
	last         []int8    // the policy of the last build
	lens         []uint16  // per queue vector: its M queue lengths (J_i ≤ MaxQueueLimit)
}

func newILU[T float32 | float64](n int) ilu[T] {
	m := ilu[T]{start: make([]int, n+1), diag: make([]int, n), pos: make([]int32, n)}
	for i := range m.pos {
		m.pos[i] = -1
	}
	return m
}

// ilu is a sparse matrix stored by rows (compressed sparse rows) and,
// after factor, its incomplete LU factors on its own pattern in place,
// stored as T: float32 for the policy's matrix, whose factors only
// precondition (the solve itself, and every product, is in float64; a
// third less to read in each triangular solve), float64 for the coarse
// level's, which is solved to 1e-10.
type ilu[T float32 | float64] struct {
	start []int   // row i is col/lu[start[i]:start[i+1]], columns increasing
	col   []int32 // column of each entry
	lu    []T     // ILU(0): L below the diagonal (unit diagonal implied), U above, U's diagonal inverted
	diag  []int   // position of each row's diagonal entry
	pos   []int32 // factor's scratch: an entry's offset in its row, by column; −1
}

func (y *evalSystem) perm(s int) int {
	switch {
	case s < y.ref:
		return s
	case s > y.ref:
		return s - 1
	}
	return y.n - 1
}

func (y *evalSystem) unperm(i int) int {
	switch {
	case i == y.n-1:
		return y.ref
	case i < y.ref:
		return i
	}
	return i + 1
}

// newEvalSystem allocates the system's storage for the space (the pattern
// is rebuilt for every policy); u is a state vector the products may use
// (the solve's U, which a policy's evaluation leaves free).
func newEvalSystem(e *engine, ref int, u []float64) *evalSystem {
	n := e.s.States
	y := &evalSystem{
		e: e, n: n, ref: ref, ilu: newILU[float32](n),
		rhs: make([]float64, n), vn: make([]float64, n), u: u,
		count: make([]uint8, n), last: make([]int8, n),
	}
	y.cut()
	s := e.s
	y.lens = make([]uint16, s.B*s.M)
	for j := range s.B {
		for q := range s.M {
			y.lens[j*s.M+q] = uint16(s.queue(j, q))
		}
	}
	if pool := e.slow; pool >= 0 {
		y.co = newCoarse(y, pool)
	}
	return y
}

// post returns the post-decision configuration and queue vector of state
// idx under the policy (the queues permuted with the pools when the
// action's configuration is another's canonical one), and the action's
// cost.
func (e *engine) post(idx int, pol []int8) (int, int, float64) {
	c, j := idx/e.s.B, idx%e.s.B
	if d := Action(pol[idx]); d != NoAction {
		a, _ := e.s.find(c, d)
		return int(a.target), e.s.moved(a.perm, j), a.cost
	}
	return c, j, 0
}

// entry is one entry of a row being assembled.
type entry struct {
	col int32
	val float64
}

// row appends to buf the entries of row i whose columns lie in [from, to),
// merged and sorted by column, and returns them with the row's right-hand
// side.
func (y *evalSystem) row(buf []entry, i, from, to int) ([]entry, float64) {
	r := rowBuf{e: buf, from: from, to: to, ref: y.ref}
	rhs := y.fill(&r, i)
	return r.e, rhs
}

// fill assembles row i into r and returns its right-hand side. The row is
// V(S) + G − Σ P_f(S,S')·V(S') over the transitions of the uniformized
// chain out of S's post-decision state (the fictitious self-loop
// included), written out to emit the entries in column order (every row
// of every policy is assembled here): the completions to configurations
// before the post-decision one, the queue moves inside its block, the
// completions after it, the gain last, and the state's own entry merged
// in where it falls.
func (y *evalSystem) fill(r *rowBuf, i int) float64 {
	e, s := y.e, y.e.s
	B := s.B
	st := y.unperm(i)
	j0 := st % B
	post, j, cost := e.post(st, y.pol)
	lens := y.lens[j*s.M : (j+1)*s.M]
	x := s.config(post)
	// The chance of leaving the post-decision state, summed in
	// transitions' order.
	out := 0.0
	c0, c1 := s.compStart[post], s.compStart[post+1]
	for k := c0; k < c1; k++ {
		out += e.comp[k]
	}
	for q, n := range lens {
		if a := e.arr[q]; int(n) < s.Js[q]-1 && a > 0 {
			out += a
		}
		if n > 0 && x[q] > 0 {
			out += e.mu[q] * float64(min(int(n), int(x[q])))
		}
	}
	r.own = -1
	if st != y.ref {
		r.own = st
	}
	// The completions' states, in increasing order, merged where two
	// lead to one (exchangeable pools lumped).
	var cb [128]entry
	comps := cb[:0]
	for k := c0; k < c1; k++ {
		t := int32(int(s.comps[k].target)*B + s.moved(s.comps[k].perm, j))
		q := len(comps)
		for q > 0 && comps[q-1].col > t {
			q--
		}
		if q > 0 && comps[q-1].col == t {
			comps[q-1].val -= e.comp[k]
			continue
		}
		comps = slices.Insert(comps, q, entry{t, -e.comp[k]})
	}
	k := 0
	for ; k < len(comps) && int(comps[k].col) < post*B; k++ {
		r.add(int(comps[k].col), comps[k].val)
	}
	base := post*B + j
	for q := range s.M {
		if n := lens[q]; n > 0 && x[q] > 0 {
			r.add(base-s.stride[q], -e.mu[q]*float64(min(int(n), int(x[q]))))
		}
	}
	if out < 1 {
		r.add(base, -(1 - out))
	}
	for q := s.M - 1; q >= 0; q-- {
		if a := e.arr[q]; int(lens[q]) < s.Js[q]-1 && a > 0 {
			r.add(base+s.stride[q], -a)
		}
	}
	for ; k < len(comps); k++ {
		r.add(int(comps[k].col), comps[k].val)
	}
	r.flush()
	if y.n-1 >= r.from && y.n-1 < r.to {
		r.e = append(r.e, entry{int32(y.n - 1), 1})
	}
	return e.h[j0] + cost
}

// rowBuf is a row being assembled, state by state in increasing order:
// its entries whose columns lie in [from, to), the state whose own entry
// (1) is still to be merged in (−1: none), and whether a transition
// reaches the reference state (whose value is not an unknown).
type rowBuf struct {
	e        []entry
	from, to int
	ref      int
	own      int
	reaches  bool
}

// add adds v to the entry of state t's unknown (none for the reference
// state). The states come in increasing order, and so do their unknowns.
func (r *rowBuf) add(t int, v float64) {
	if r.own >= 0 && r.own <= t {
		if r.own == t {
			v = 1 + v
		} else {
			r.put(r.own, 1)
		}
		r.own = -1
	}
	r.put(t, v)
}

// flush adds the state's own entry if it is still to come.
func (r *rowBuf) flush() {
	if r.own >= 0 {
		r.put(r.own, 1)
		r.own = -1
	}
}

func (r *rowBuf) put(t int, v float64) {
	ref := r.ref
	if t == ref {
		r.reaches = true
		return
	}
	if t > ref {
		t--
	}
	if t >= r.from && t < r.to {
		r.e = append(r.e, entry{int32(t), v})
	}
}

// build stores the preconditioner's part of the system of policy pol (each
// row's entries inside its range) and the right-hand side, and factors it.
// The storage is sized exactly: the entries of each row are counted first,
// on the workers, and the rows are then assembled. A row depends on its
// state's action alone, so the rows whose action is the last build's keep
// their count, and only the others are assembled to count them.
func (y *evalSystem) build(pol []int8) {
	y.pol = pol
	y.inParts(func(from, to int) {
		var row []entry
		for i := from; i < to; i++ {
			if st := y.unperm(i); y.last[st] != pol[st] || y.count[i] == 0 {
				row, _ = y.row(row[:0], i, from, to)
				y.count[i] = uint8(len(row))
			}
		}
	})
	y.start[0] = 0
	for i := range y.n {
		y.start[i+1] = y.start[i] + int(y.count[i])
	}
	total := y.start[y.n]
	if cap(y.col) < total {
		y.col, y.lu = make([]int32, total), make([]float32, total)
	}
	y.col, y.lu = y.col[:total], y.lu[:total]
	y.inParts(func(from, to int) {
		var row []entry
		for i := from; i < to; i++ {
			row, y.rhs[i] = y.row(row[:0], i, from, to)
			k := y.start[i]
			for _, en := range row {
				if int(en.col) == i {
					y.diag[i] = k
				}
				y.col[k], y.lu[k] = en.col, float32(en.val)
				k++
			}
		}
	})
	y.rows(func(_, lo, hi int) { copy(y.last[lo:hi], pol[lo:hi]) })
	y.factor()
}

// The preconditioner is ILU(0) of the matrix's diagonal blocks: the rows
// are cut into krylovParts ranges at configuration boundaries, entries that
// couple two ranges are left out, and the ranges are factored and solved on
// the workers at once. The cut is fixed, so results do not depend on the
// number of workers.
const krylovParts = 8

// cut sets the ranges.
func (y *evalSystem) cut() {
	s := y.e.s
	parts := min(krylovParts, s.Configs)
	y.bound = y.bound[:0]
	for p := range parts {
		y.bound = append(y.bound, s.Configs*p/parts*s.B)
	}
	y.bound = append(y.bound, y.n)
}

// inParts runs fn for every range of rows, on the workers.
func (y *evalSystem) inParts(fn func(from, to int)) {
	y.spread(len(y.bound)-1, func(p int) { fn(y.bound[p], y.bound[p+1]) })
}

// spread calls fn(0) … fn(count−1) on the engine's workers.
func (y *evalSystem) spread(count int, fn func(k int)) {
	var wg sync.WaitGroup
	next := make(chan int, count)
	for k := range count {
		next <- k
	}
	close(next)
	for range min(y.e.workers, count) {
		wg.Go(func() {
			for k := range next {
				fn(k)
			}
		})
	}
	wg.Wait()
}

// factor computes, in place, the ILU(0) factors of the diagonal blocks.
func (y *evalSystem) factor() {
	y.inParts(y.ilu.factor)
	if y.co != nil {
		y.co.build()
	}
}

// factor computes, in place, the ILU(0) factors of rows [from, to), which
// couple to no row outside: Gaussian elimination row by row that keeps
// only the entries of the pattern, each row eliminated in float64.
func (m *ilu[T]) factor(from, to int) {
	lu, col, pos, start := m.lu, m.col, m.pos, m.start
	var row []float64
	for i := from; i < to; i++ {
		a, b := start[i], start[i+1]
		// The row's scale, before elimination changes it.
		scale := 0.0
		row = row[:0]
		for k := a; k < b; k++ {
			pos[col[k]] = int32(k - a)
			v := float64(lu[k])
			row = append(row, v)
			scale = max(scale, math.Abs(v))
		}
		d := m.diag[i] - a
		for kk := range d {
			k := int(col[a+kk])
			row[kk] *= float64(lu[m.diag[k]])
			f := row[kk]
			for jj := m.diag[k] + 1; jj < start[k+1]; jj++ {
				if q := pos[col[jj]]; q >= 0 {
					row[q] -= f * float64(lu[jj])
				}
			}
		}
		for k := a; k < b; k++ {
			pos[col[k]] = -1
		}
		// Dropping fill can leave a pivot near zero (the gain's row,
		// last, whose column of ones is not an M-matrix's): the
		// preconditioner then takes the row's scale there instead,
		// and BiCGSTAB makes up the difference.
		if !(math.Abs(row[d]) > 1e-8*scale) {
			row[d] = scale
		}
		row[d] = 1 / row[d] // the solve multiplies by it
		for k, v := range row {
			lu[a+k] = T(v)
		}
	}
}

// precondition sets z = (LU)⁻¹ r, corrected on the coarse level.
func (y *evalSystem) precondition(z, r []float64) {
	if y.co != nil {
		y.co.precondition(z, r)
		return
	}
	y.inParts(func(from, to int) { y.ilu.solve(z, r, from, to) })
}

// solve sets z = (LU)⁻¹ r on rows [from, to) by forward and back
// substitution. Two partial sums per row: the chain of dependent additions
// is half as long.
func (m *ilu[T]) solve(z, r []float64, from, to int) {
	lu, col, start := m.lu, m.col, m.start
	for i := from; i < to; i++ {
		a0, a1 := 0.0, 0.0
		k, d := start[i], m.diag[i]
		for ; k+1 < d; k += 2 {
			a0 += float64(lu[k]) * z[col[k]]
			a1 += float64(lu[k+1]) * z[col[k+1]]
		}
		if k < d {
			a1 += float64(lu[k]) * z[col[k]]
		}
		z[i] = r[i] - a0 - a1
	}
	for i := to - 1; i >= from; i-- {
		a0, a1 := 0.0, 0.0
		d := m.diag[i]
		k := start[i+1] - 1
		for ; k-1 > d; k -= 2 {
			a0 += float64(lu[k]) * z[col[k]]
			a1 += float64(lu[k-1]) * z[col[k-1]]
		}
		if k > d {
			a1 += float64(lu[k]) * z[col[k]]
		}
		z[i] = (z[i] - a0 - a1) * float64(lu[d])
	}
}

// chunk is the span of the parallel vector operations; their sums are
// taken chunk by chunk in order, so they do not depend on the workers.
const chunk = 1 << 14

// rows runs fn over ranges of [0, n) on the engine's workers.
func (y *evalSystem) rows(fn func(c, lo, hi int)) {
	y.spread(chunks(y.n), func(c int) { fn(c, c*chunk, min((c+1)*chunk, y.n)) })
}

// toStates sets V, in state order, to the values among the unknowns x
// (V(ref) = 0; x's last entry, the gain, is left out).
func (y *evalSystem) toStates(V, x []float64) {
	ref := y.ref
	y.rows(func(_, lo, hi int) {
		if a := min(hi, ref); lo < a {
			copy(V[lo:a], x[lo:a])
		}
		if a := max(lo, ref+1); a < hi {
			copy(V[a:hi], x[a-1:hi-1])
		}
		if lo <= ref && ref < hi {
			V[ref] = 0
		}
	})
}

// fromStates sets the unknowns x to the values V (in state order) and the
// gain g.
func (y *evalSystem) fromStates(x, V []float64, g float64) {
	ref, n := y.ref, y.n
	copy(x[:ref], V[:ref])
	copy(x[ref:n-1], V[ref+1:])
	x[n-1] = g
}

// mul sets out = A x. In state order, x is the values V (with V(ref) = 0)
// and the gain G; the engine's sweep gives P·V at every state, and
// P_f V(S) is that at S's post-decision state f(S)(S) (the chain's
// transitions all start there), so row perm(S) is V(S) + G − (P·V)(f(S)(S)).
func (y *evalSystem) mul(out, x []float64) {
	V, U := y.vn, y.u
	y.toStates(V, x)
	y.e.expect(U, V)
	g := x[y.n-1]
	y.e.parallel(func(_, c0, c1 int) {
		s := y.e.s
		B := s.B
		var target [256]int32
		var perm [256]uint16
		for c := c0; c < c1; c++ {
			targets(s, c, &target)
			for _, a := range s.acts(c) {
				perm[a.d] = a.perm
			}
			base := c * B
			for j := range B {
				st := base + j
				d := y.pol[st]
				out[y.perm(st)] = V[st] + g - U[int(target[d])*B+s.moved(perm[d], j)]
			}
		}
	})
}

// linear is a system BiCGSTAB solves: a policy's evaluation system, or
// its coarse level.
type linear interface {
	size() int
	// rows runs fn over the chunks of [0, size()) (c numbers the chunk).
	rows(fn func(c, lo, hi int))
	mul(out, x []float64)
	precondition(z, r []float64)
	right() []float64
}

func (y *evalSystem) size() int        { return y.n }
func (y *evalSystem) right() []float64 { return y.rhs }

// chunks is the number of chunks of a vector of n entries.
func chunks(n int) int { return (n + chunk - 1) / chunk }

// dot returns ⟨a, b⟩, summed chunk by chunk in order.
func dot(l linear, a, b []float64) float64 {
	sums := make([]float64, chunks(l.size()))
	l.rows(func(c, lo, hi int) {
		acc := 0.0
		for i := lo; i < hi; i++ {
			acc += a[i] * b[i]
		}
		sums[c] = acc
	})
	total := 0.0
	for _, s := range sums {
		total += s
	}
	return total
}

// dot2 returns ⟨a, b⟩ and ⟨a, c⟩ in one pass, each summed as dot sums.
func dot2(l linear, a, b, c []float64) (float64, float64) {
	n := chunks(l.size())
	sums := make([]float64, 2*n)
	l.rows(func(k, lo, hi int) {
		ab, ac := 0.0, 0.0
		for i := lo; i < hi; i++ {
			ab += a[i] * b[i]
			ac += a[i] * c[i]
		}
		sums[k], sums[n+k] = ab, ac
	})
	ab, ac := 0.0, 0.0
	for k := range n {
		ab += sums[k]
		ac += sums[n+k]
	}
	return ab, ac
}

// sysResidual sets r = rhs − A x and returns its sup-norm.
func sysResidual(l linear, r, x []float64) float64 {
	l.mul(r, x)
	rhs := l.right()
	sups := make([]float64, chunks(l.size()))
	l.rows(func(c, lo, hi int) {
		m := 0.0
		for i := lo; i < hi; i++ {
			r[i] = rhs[i] - r[i]
			m = max(m, math.Abs(r[i]))
		}
		sups[c] = m
	})
	m := 0.0
	for _, s := range sups {
		m = max(m, s)
	}
	return m
}

// bicgstab holds the vectors of the BiCGSTAB iteration (right
// preconditioned by the ILU(0) factors).
type bicgstab struct {
	x, r, r0, p, v, z, t []float64
	start                float64 // the last solve's starting residual
}

func newBiCGStab(n int) *bicgstab {
	return &bicgstab{
		x: make([]float64, n), r: make([]float64, n), r0: make([]float64, n),
		p: make([]float64, n), v: make([]float64, n), z: make([]float64, n), t: make([]float64, n),
	}
}

// solve runs BiCGSTAB from b.x until the sup-norm of the true residual is
// at most target, for at most maxIter iterations; each iteration calls
// step with its count and the residual (the recurrence's, checked against
// the true one before stopping), and stops early when step returns an
// error. It returns the last residual's sup-norm (the true residual's
// when target was reached; NaN when the iteration broke down: not a
// number, a billion times the starting residual, or stalled: no residual
// under stallDrop of the least one so far in stallWindow iterations).
func (b *bicgstab) solve(y linear, target float64, maxIter int, step func(it int, res float64) error) (float64, error) {
	res := sysResidual(y, b.r, b.x)
	b.start = res
	if res <= target {
		return res, nil
	}
	// A residual a billion times the starting one (or not a number) is a
	// breakdown: the iteration is not going to come back.
	limit := 1e9 * res
	// A singular system whose right-hand side is not in its range (a
	// policy whose chain splits in two closed classes: one gain cannot
	// hold for both) need not blow up: its residual can stay where it is
	// for ever, with each class's share of the inconsistency left in it.
	best, bestAt := res, 0
	restart := func() {
		copy(b.r0, b.r)
		clear(b.p)
		clear(b.v)
	}
	restart()
	rho, alpha, omega := 1.0, 1.0, 1.0
	// next is ⟨r0, r⟩ when the last iteration's pass took it (NaN: not).
	next := math.NaN()
	n := chunks(y.size())
	sups, rhos := make([]float64, n), make([]float64, n)
	for it := 1; it <= maxIter; it++ {
		if !(res <= limit) || it-bestAt > stallWindow {
			return math.NaN(), nil
		}
		rho1 := next
		if math.IsNaN(rho1) {
			rho1 = dot(y, b.r0, b.r)
		}
		next = math.NaN()
		if rho1 == 0 || omega == 0 || math.IsNaN(rho1) {
			res = sysResidual(y, b.r, b.x)
			restart()
			rho, alpha, omega = 1, 1, 1
			rho1 = dot(y, b.r0, b.r)
		}
		beta := rho1 / rho * alpha / omega
		y.rows(func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				b.p[i] = b.r[i] + beta*(b.p[i]-omega*b.v[i])
			}
		})
		y.precondition(b.z, b.p)
		y.mul(b.v, b.z)
		alpha = rho1 / dot(y, b.r0, b.v)
		y.rows(func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				b.x[i] += alpha * b.z[i]
				b.r[i] -= alpha * b.v[i]
			}
		})
		y.precondition(b.z, b.r)
		y.mul(b.t, b.z)
		tt, tr := dot2(y, b.t, b.t, b.r)
		omega = 0
		if tt > 0 {
			omega = tr / tt
		}
		// The update, the residual's sup-norm and the next iteration's
		// ⟨r0, r⟩ in one pass (each sum chunk by chunk, as dot).
		y.rows(func(c, lo, hi int) {
			m, acc := 0.0, 0.0
			for i := lo; i < hi; i++ {
				b.x[i] += omega * b.z[i]
				b.r[i] -= omega * b.t[i]
				m = max(m, math.Abs(b.r[i]))
				acc += b.r0[i] * b.r[i]
			}
			sups[c], rhos[c] = m, acc
		})
		rho = rho1
		res, next = 0, 0
		for c, s := range sups {
			res = max(res, s)
			next += rhos[c]
		}
		if res <= target || it == maxIter {
			next = math.NaN() // r is checked, and may start again
			// The recurrence drifts from the true residual: check, and
			// go on from the true one when it is not there yet.
			res = sysResidual(y, b.r, b.x)
			if res <= target {
				return res, step(it, res)
			}
			restart()
			rho, alpha, omega = 1, 1, 1
		}
		if res < stallDrop*best {
			best, bestAt = res, it
		}
		if err := step(it, res); err != nil {
			return res, err
		}
	}
	return res, nil
}

// A BiCGSTAB solve whose residual has not gone under stallDrop of its
// least so far in stallWindow iterations has stalled. Evaluations that
// converge take tens of iterations per tenfold drop (Figure 3 at N = 6:
// 418 iterations in all for 19 policies); a policy whose chain splits kept
// its residual at 6.04 for 3,700 iterations (Figure 3 at N = 3 priced
// lower, J = 15/33 grown to 18/41, its seventh policy).
const (
	stallWindow = 500
	stallDrop   = 0.9
)

// How exact the krylov method's evaluations are: the first to krylovFirst
// of its starting residual; each later one to krylovFollow of the last
// Bellman span or krylovGain of the gain, whichever is smaller, or to
// krylovLoose of each after an improvement that changed the actions of
// more than krylovMany of the states: values that will change that much
// again need not be exact (Figure 4 at N = 6: 157 iterations in 11
// policies to 139 in 12; tightening only as the changes fall keeps the
// last policies' evaluations tight, where looser ones throughout took 20
// policies instead of 12). With the coarse level all are
// krylovCoarseFollow: its evaluations are cheap beside a policy's
// set-up, and looser ones that take a few more policies take fewer
// iterations in all (Figure 3 at N = 6: 418 iterations in 19 policies,
// 353 s, to 340 in 22, 308 s; looser still after large changes, 0.3, took
// 277 iterations against 256 at N = 4).
const (
	krylovFirst, krylovFollow, krylovGain = 1e-2, 1e-2, 1e-2
	krylovLoose, krylovMany               = 1e-1, 0.01
	krylovCoarseFollow                    = 1e-1
)

// solveKrylov is policy iteration whose evaluations solve the policy's
// linear system by BiCGSTAB with an ILU(0) preconditioner, warm-started
// from the previous policy's values. An evaluation is solved only as far as
// the last Bellman sweep's span warrants (krylovFollow of it, down to a
// quarter of the tolerance), and the solve ends when one Bellman sweep
// applied to the values changes them by a span below the tolerance: the
// same test as relative value iteration's, and the certified bounds'
// width divided by Λ.
//
// A policy improved from loosely evaluated values can be a bad one, even
// one whose chain splits (no single gain: its system is singular and
// BiCGSTAB diverges). Then the solve goes back to the previous policy and
// its values, evaluates it a hundred times tighter, and improves again; a
// breakdown with nothing tighter to go back to leaves the rest of the solve
// to relative value iteration, from the last good values, and says so.
func solveKrylov(ctx context.Context, m *Model, e *engine, V, U []float64, scratch [][]float64, ref int, opts SolveOptions, sol *Solution) error {
	pol := sol.Table.Actions
	if err := startPolicy(m, e.s, opts, pol); err != nil {
		return err
	}
	y := newEvalSystem(e, ref, U)
	b := newBiCGStab(y.n)
	prev := make([]int8, len(pol))
	floor := opts.Tolerance / 4
	// The first evaluation (from V = 0) is solved to krylovFirst of its
	// starting residual.
	target, gain, lastRes, lastGoal, good := math.NaN(), 0.0, 0.0, 0.0, false
	if opts.Warm != nil {
		// The first evaluation starts from the warm values and gain.
		y.fromStates(b.x, V, opts.Warm.AverageCost/e.lam)
	}
	// The system is built again only when the policy changed: when the
	// improvement kept every action, only the evaluation was short.
	rebuild := true
	for {
		if err := canceled(ctx); err != nil {
			return err
		}
		if rebuild {
			y.build(pol)
		}
		if math.IsNaN(target) {
			target = sysResidual(y, b.r, b.x) * krylovFirst
		}
		goal := max(floor, target)
		res, err := b.solve(y, goal, opts.MaxSweeps-sol.Sweeps, func(it int, res float64) error {
			sol.Sweeps++
			if opts.Progress != nil {
				opts.Progress(Progress{Phase: "evaluate", Sweep: it, Residual: res, Tolerance: goal,
					Start: b.start, Policy: sol.Improvements + 1, Span: sol.Residual})
			}
			return canceled(ctx)
		})
		if err != nil {
			return err
		}
		// Policy iteration lowers the gain at every step. A gain above the
		// last one (beyond both evaluations' errors) means the last
		// evaluation was too loose to improve on; so does a breakdown.
		worse := good && b.x[y.n-1]-res > gain+lastRes
		retry := math.IsNaN(res) || worse
		if retry && (!good || lastGoal <= floor) {
			if !worse {
				sol.Method = ValueIteration
				sol.Fallback = fmt.Sprintf("the krylov evaluation of policy %d broke down; relative value iteration went on from its last values", sol.Improvements+1)
				return solveValue(ctx, e, V, U, scratch, ref, opts, sol)
			}
			retry = false // nothing tighter to go back to: go on
		}
		if retry {
			copy(pol, prev)
			rebuild = true
			y.fromStates(b.x, V, gain)
			target = lastGoal / 100
			continue
		}
		y.toStates(V, b.x)
		gain, lastRes, lastGoal, good = b.x[y.n-1], res, goal, true
		e.expect(U, V)
		st := e.span(V, U, scratch)
		sol.Residual = st.hi - st.lo
		sol.AverageCost = (st.lo + st.hi) / 2 * e.lam
		if sol.Residual < opts.Tolerance {
			sol.Converged = true
			e.decide(pol, U, nil)
			return nil
		}
		if sol.Sweeps >= opts.MaxSweeps {
			e.decide(pol, U, nil)
			return nil
		}
		sol.Improvements++
		copy(prev, pol)
		changed := e.greedy(pol, U, opts.Tolerance/16)
		rebuild = changed > 0
		if opts.Progress != nil {
			opts.Progress(Progress{Phase: "improve", Sweep: sol.Improvements, Residual: float64(changed)})
		}
		follow, ofGain := krylovFollow, krylovGain
		switch {
		case y.co != nil:
			y.co.changed = changed
			follow, ofGain = krylovCoarseFollow, krylovCoarseFollow
		case float64(changed) > krylovMany*float64(len(pol)):
			follow, ofGain = krylovLoose, krylovLoose
		}
		target = min(sol.Residual*follow, math.Abs(gain)*ofGain)
		if changed == 0 {
			// The policy stands: only the evaluation is short.
			target = min(target, goal/10)
		}
	}
}
