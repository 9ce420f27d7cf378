package selection

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
)

// pruneSlack is the relative margin by which an upper bound on a move's
// rate must fall short of the best rate so far before the move is skipped
// unevaluated: larger than relTie, so pruning never skips a tie.
const pruneSlack = 1e-9

// move is a change to the current plan: the new master, and one cluster
// taken out of (skip) and one put into (add) the plan; -1 for none.
type move struct {
	master, skip, add int
}

// climb is the state of one hill-climbing run: the master's view, the
// worker clusters sorted by their thresholds T (so that the workers whose
// share binds at a weight W are a prefix), and sums that make a move with
// the same master cost O(log |S| + the workers whose share binds).
type climb struct {
	pl    *Planner
	fixed bool // the master is forced
	v     *view
	in    []bool  // in[c]: c is the master or a worker cluster
	mem   []int   // worker clusters by T, then index
	suf   []fluid // suf[i]: the alone parts of mem[i:] summed (no master)
	W     float64 // Σ free·perf over mem
	f     fluid   // the current capped plan's fluid value
	s     score   // the current plan's value
	loss  float64 // Σ over mem of alone rate − rate at W: what drops can win back
	// groups gathers the workers by free machines, each by T: a worker
	// whose share binds has its machines and rate set by its free machines
	// and the plan's weight alone (see bound below), so a group is summed
	// at once.
	groups []group
	at     []int     // at[f]: the group of f free machines while refresh builds them, else -1
	rate   []float64 // rate[c]: worker c's rate at W
	low    []int     // see lowest
	// buf are lists of clusters that an evaluation uses and drops.
	buf [3][]int
}

// group is the workers with the same number of free machines f, by T, with
// running sums of perf and cost per machine-hour.
type group struct {
	f          int
	T          []float64
	perf, cost []float64 // perf[j]: Σ perf over the first j workers
}

func newClimb(pl *Planner, m int, others []int, fixed bool) *climb {
	h := &climb{pl: pl, fixed: fixed, in: make([]bool, pl.n), rate: make([]float64, pl.n),
		at: make([]int, slices.Max(pl.free)+1)}
	for f := range h.at {
		h.at[f] = -1
	}
	h.reset(m, others)
	return h
}

// reset makes (m, others) the current plan. O(|others| log |others|).
func (h *climb) reset(m int, others []int) {
	for _, c := range h.mem {
		h.in[c] = false
	}
	if h.v != nil {
		h.in[h.v.m] = false
	}
	h.v = h.pl.view(m)
	h.in[m] = true
	h.mem = append(h.mem[:0], others...)
	for _, c := range others {
		h.in[c] = true
	}
	slices.SortFunc(h.mem, h.byT)
	h.refresh()
}

func (h *climb) byT(a, b int) int {
	if ta, tb := h.v.T[a], h.v.T[b]; ta != tb {
		if ta < tb {
			return -1
		}
		return 1
	}
	return a - b
}

// refresh recomputes the sums and the value from mem. O(|mem|).
func (h *climb) refresh() {
	pl, v := h.pl, h.v
	h.W = 0
	for _, c := range h.mem {
		h.W += pl.w[c]
	}
	h.suf = slices.Grow(h.suf[:0], len(h.mem)+1)[:len(h.mem)+1]
	h.suf[len(h.mem)] = fluid{}
	for i := len(h.mem) - 1; i >= 0; i-- {
		h.suf[i] = pl.plus(h.suf[i+1], v.alone[h.mem[i]])
	}
	h.loss = 0
	for _, c := range h.mem {
		h.rate[c] = v.alone[c].rate
		if h.W > v.T[c] {
			h.rate[c] = pl.size(c, v.m, h.W, v.row).rate
			h.loss += v.alone[c].rate - h.rate[c]
		}
	}
	// The listCap lowest rates, kept sorted by insertion: O(|mem|·listCap)
	// at worst, about O(|mem|) as most workers fall above the kept ones.
	lower := func(a, b int) bool { return h.rate[a] < h.rate[b] || h.rate[a] == h.rate[b] && a < b }
	h.low = h.low[:0]
	for _, c := range h.mem {
		if len(h.low) == listCap && !lower(c, h.low[listCap-1]) {
			continue
		}
		i := len(h.low)
		for i > 0 && lower(c, h.low[i-1]) {
			i--
		}
		if len(h.low) == listCap {
			h.low = h.low[:listCap-1]
		}
		h.low = slices.Insert(h.low, i, c)
	}
	used := 0
	for _, c := range h.mem { // by T: each group comes out by T
		f := pl.free[c]
		g := h.at[f]
		if g < 0 {
			g, used = used, used+1
			h.at[f] = g
			if g == len(h.groups) {
				h.groups = append(h.groups, group{})
			}
			gr := &h.groups[g]
			gr.f, gr.T, gr.perf, gr.cost = f, gr.T[:0], append(gr.perf[:0], 0), append(gr.cost[:0], 0)
		}
		gr := &h.groups[g]
		gr.T = append(gr.T, v.T[c])
		gr.perf = append(gr.perf, gr.perf[len(gr.perf)-1]+pl.perf[c])
		gr.cost = append(gr.cost, gr.cost[len(gr.cost)-1]+pl.cost[c])
	}
	h.groups = h.groups[:used]
	for _, g := range h.groups {
		h.at[g.f] = -1
	}
	h.f = h.evalSame(-1, -1)
	h.s = h.exact(move{master: v.m, skip: -1, add: -1}, math.Inf(1))
}

// exact returns the value of the plan that mv makes of the current one:
// t* by whole tasks and the sized machines. O(|S| log |S|), and O(|S|) per
// step of the bisection of t*.
func (h *climb) exact(mv move, by float64) score {
	h.buf[0] = h.othersInto(h.buf[0][:0], mv)
	return h.pl.scoreBy(mv.master, h.buf[0], by)
}

// bound returns the machines and rate of the workers of each group whose
// share binds at weight W (T < W), added to s. Such a worker c gets
// b = s_c = up_m·free_c·perf_c/W, so with x = up_m·Oper/(θ·Comm·W):
// n_c = min(f, ⌊f·x + slack⌋) and rate_c = perf_c/Oper · min(n_c, θ·f·x),
// the same for the whole group but for perf_c. O(groups · log |S|).
func (h *climb) bound(s fluid, W float64) fluid {
	pl, j := h.pl, h.pl.job
	x := pl.up[h.v.m] * j.TaskOps / (j.Efficiency * j.TaskBytes * W)
	for _, g := range h.groups {
		k := sort.SearchFloat64s(g.T, W) // T[:k] < W
		if k == 0 {
			continue
		}
		f := float64(g.f)
		n := min(f, math.Floor(f*x+floorSlack))
		s.r += g.perf[k] / j.TaskOps * min(n, j.Efficiency*f*x)
		s.machines += int(n) * k
		s.cost += n * g.cost[k]
	}
	return s
}

// evalSame returns the fluid value of the capped plan with the same master,
// cluster skip taken out and cluster add put in (-1 for none).
func (h *climb) evalSame(skip, add int) fluid {
	pl, v := h.pl, h.v
	pl.evals++
	W := h.W
	if skip >= 0 {
		W -= pl.w[skip]
	}
	if add >= 0 {
		W += pl.w[add]
	}
	if W < 0 || len(h.mem) == 1 && skip >= 0 && add < 0 {
		W = 0 // no worker left; rounding must not leave a negative weight
	}
	// Workers with T < W have their share bind: size them; the rest are
	// alone, summed in suf.
	i := sort.Search(len(h.mem), func(i int) bool { return v.T[h.mem[i]] >= W })
	s := v.ms
	if i > 0 {
		s = h.bound(s, W)
	}
	s.r += h.suf[i].r
	s.machines += h.suf[i].machines
	s.cost += h.suf[i].cost
	if skip >= 0 {
		a := pl.partAt(v, skip, W)
		s.r -= a.rate
		s.machines -= a.n
		s.cost -= pl.cost[skip] * float64(a.n)
	}
	if add >= 0 {
		s = pl.plus(s, pl.partAt(v, add, W))
	}
	s.r, s.cost = max(s.r, 0), max(s.cost, 0) // no rounding below zero
	return s
}

// members calls fn for each worker cluster of the plan that mv makes of
// the current one.
func (h *climb) members(mv move, fn func(c int)) {
	m := h.v.m
	for _, c := range h.mem {
		if c != mv.skip && c != mv.master {
			fn(c)
		}
	}
	if mv.master != m && m != mv.skip {
		fn(m)
	}
	if mv.add >= 0 && mv.add != mv.master {
		fn(mv.add)
	}
}

// evalMaster scores a move to another master: O(|S|) per step of the
// bisection, and O(n) the first time that master's widest paths are
// needed. Such moves are few (at most 3·listCap per pass of the wider
// neighbourhood), so the plain sizing does.
func (h *climb) evalMaster(mv move, by float64) score {
	pl := h.pl
	pl.evals++
	return h.exact(mv, by)
}

// othersAfter returns the worker clusters after mv, sorted by index.
func (h *climb) othersAfter(mv move) []int {
	return h.othersInto(make([]int, 0, len(h.mem)+2), mv)
}

// othersInto is othersAfter, appended to others.
func (h *climb) othersInto(others []int, mv move) []int {
	h.members(mv, func(c int) { others = append(others, c) })
	slices.Sort(others)
	return others
}

// cur returns the current plan as a candidate.
func (h *climb) cur() *candidate {
	return &candidate{m: h.v.m, others: slices.Sorted(slices.Values(h.mem)), s: h.s}
}

// apply makes mv the current plan.
func (h *climb) apply(mv move) {
	if mv.master != h.v.m {
		h.reset(mv.master, h.othersAfter(mv))
		return
	}
	if mv.skip >= 0 {
		i := slices.Index(h.mem, mv.skip)
		h.mem = slices.Delete(h.mem, i, i+1)
		h.in[mv.skip] = false
	}
	if mv.add >= 0 {
		i, _ := slices.BinarySearchFunc(h.mem, mv.add, h.byT)
		h.mem = slices.Insert(h.mem, i, mv.add)
		h.in[mv.add] = true
	}
	h.refresh()
}

// search finds the best improving move of a neighbourhood. A neighbourhood
// offers each move with an upper bound on its rate; moves whose bound falls
// short of the best rate so far are not evaluated.
type search struct {
	h    *climb
	best score
	mv   move
	ok   bool
}

// short reports whether a plan whose capped fluid rate is at most ub cannot
// reach the best so far: t* ≥ T/R ≥ T/ub, later than the best t*.
func (s *search) short(ub float64) bool {
	return float64(s.h.pl.job.Tasks) > ub*s.best.t*(1+pruneSlack)
}

// offer evaluates mv (when ub, an upper bound on its capped fluid rate, can
// reach the best) and keeps it if it is the best so far in the climb's
// order. It reports false when ub fell short.
func (s *search) offer(mv move, ub float64) bool {
	if s.short(ub) {
		return false
	}
	var sc score
	if mv.master == s.h.v.m {
		f := s.h.evalSame(mv.skip, mv.add)
		if s.short(f.r) {
			return true
		}
		sc = s.h.exact(mv, s.best.t)
	} else {
		sc = s.h.evalMaster(mv, s.best.t)
	}
	c := cmpClimb(sc, s.best)
	if c == 0 {
		// An exact tie: the names decide against the best so far.
		h, pl := s.h, s.h.pl
		// The two candidates are compared and dropped: their lists are
		// the climb's buffers.
		bestC := candidate{m: h.v.m, others: h.buf[1], s: h.s}
		if s.ok {
			bestC.m, bestC.others, bestC.s = s.mv.master, h.othersInto(h.buf[1][:0], s.mv), s.best
		} else {
			bestC.others = append(bestC.others[:0], h.mem...)
			slices.Sort(bestC.others)
		}
		h.buf[1] = bestC.others
		h.buf[2] = h.othersInto(h.buf[2][:0], mv)
		if pl.ahead(&candidate{m: mv.master, others: h.buf[2], s: sc}, &bestC) {
			c = 1
		}
	}
	if c > 0 {
		s.best, s.mv, s.ok = sc, mv, true
	}
	return true
}

// listCap bounds the candidate lists of a neighbourhood on big grids:
// at most this many clusters to add, workers to drop or swap out, clusters
// to swap in, and masters to move to, each time the best-looking ones. On
// grids of up to listCap candidate clusters the neighbourhoods are complete.
const listCap = 16

// lowest returns up to listCap worker clusters with the lowest rate at the
// current weight (ties by index): the ones worth dropping or swapping out.
// Computed by refresh.
func (h *climb) lowest() []int { return h.low }

// outside returns up to listCap clusters outside the plan, by alone rate.
func (h *climb) outside() []int {
	var out []int
	for _, c := range h.v.order {
		if !h.in[c] {
			out = append(out, c)
			if len(out) == listCap {
				break
			}
		}
	}
	return out
}

// addDrop is the first neighbourhood: add one candidate cluster, or drop
// one worker cluster.
func (h *climb) addDrop(s *search) {
	v := h.v
	for _, c := range h.outside() { // by alone rate: the bound falls
		if !s.offer(move{master: v.m, skip: -1, add: c}, h.f.r+v.alone[c].rate) {
			break
		}
	}
	for _, c := range h.lowest() {
		s.offer(move{master: v.m, skip: c, add: -1}, h.f.r-h.rate[c]+h.loss)
	}
}

// wider is the second neighbourhood, tried when the first has no improving
// move: swap a worker cluster for one outside the plan; make a worker
// cluster the master; hand the master role to a worker cluster and drop
// the old master's; bring in an outside cluster as the new master.
func (h *climb) wider(s *search) {
	pl, v := h.pl, h.v
	in := h.outside()
	for _, a := range h.lowest() {
		pa := h.rate[a]
		for _, b := range in {
			if !s.offer(move{master: v.m, skip: a, add: b}, h.f.r-pa+h.loss+v.alone[b].rate) {
				break
			}
		}
	}
	if h.fixed {
		return
	}
	pl.masterBounds()
	members, others := 0, 0
	for _, c := range pl.masterOrder { // by fluid bound: the best-looking masters first
		switch {
		case c == v.m:
		case h.in[c] && members < listCap:
			members++
			s.offer(move{master: c, skip: -1, add: -1}, pl.masterBound(c))
			s.offer(move{master: c, skip: v.m, add: -1}, pl.masterBound(c))
		case !h.in[c] && others < listCap:
			others++
			s.offer(move{master: c, skip: -1, add: c}, pl.masterBound(c))
		}
	}
}

// step applies the best improving move of a neighbourhood, if any.
func (h *climb) step(nb func(*search)) bool {
	s := &search{h: h, best: h.s}
	nb(s)
	if s.ok {
		h.apply(s.mv)
	}
	return s.ok
}

// descend climbs until no move of either neighbourhood improves the plan
// (variable neighbourhood descent, steepest ascent in each).
func (h *climb) descend(ctx context.Context) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if h.step(h.addDrop) || h.step(h.wider) {
			continue
		}
		return nil
	}
}

// jump tries to leave the current local optimum for a better one around
// another master: for the candidate masters by decreasing upper bound on
// the capped fluid rate (stopping where T over the bound is later than the
// incumbent's t*), it climbs with that master fixed from the master alone,
// and moves there when that is ahead of the current plan in the climb's
// order or, trimmed, better than the incumbent; it then descends again
// with the master free. inc, the best plan found so far (trimmed, by
// better), is kept up to date.
func (h *climb) jump(ctx context.Context, inc **candidate) error {
	pl := h.pl
	pl.masterBounds()
	T := float64(pl.job.Tasks)
	for i, m := range pl.masterOrder {
		if i == listCap || T > pl.fluidBound[m]*(*inc).s.t*(1+pruneSlack) {
			return nil // and for the masters after it, of lower fluid bounds
		}
		if m == h.v.m || T > pl.masterBound(m)*(*inc).s.t*(1+pruneSlack) {
			continue
		}
		c, err := pl.fixedClimb(ctx, m)
		if err != nil {
			return err
		}
		t := pl.trim(c)
		found := pl.better(t, *inc)
		if found {
			*inc = t
		}
		if found || pl.ahead(c, h.cur()) {
			h.reset(c.m, c.others)
			if err := h.descend(ctx); err != nil {
				return err
			}
			if t := pl.trim(h.cur()); pl.better(t, *inc) {
				*inc = t
			}
		}
	}
	return nil
}

// fixedClimb returns the local optimum of a climb with master m fixed,
// from m alone (remembered: it does not depend on the restart).
func (pl *Planner) fixedClimb(ctx context.Context, m int) (*candidate, error) {
	if c := pl.fixedBest[m]; c != nil {
		return c, nil
	}
	h := newClimb(pl, m, nil, true)
	if err := h.descend(ctx); err != nil {
		return nil, err
	}
	pl.fixedBest[m] = h.cur()
	return pl.fixedBest[m], nil
}

// HillClimb searches with one restart per Kruskal zone (o.Restarts zones,
// 3 by default), each from the zone's candidate cluster of largest
// free·perf, and returns the best plan found. See the package doc for the
// neighbourhoods, the jumps between masters, and why.
func (pl *Planner) HillClimb(ctx context.Context, o Options) (Plan, error) {
	if err := pl.checkMaster(o); err != nil {
		return Plan{}, err
	}
	k := o.Restarts
	if k == 0 {
		k = DefaultRestarts
	}
	if k < 0 {
		return Plan{}, fmt.Errorf("restarts: must be >= 1, got %d", k)
	}
	zones, err := pl.g.Zones(k)
	if err != nil {
		return Plan{}, err
	}
	pl.evals = 0
	var best *candidate
	for _, z := range zones {
		head := pl.zoneHead(z)
		if head < 0 {
			continue // no candidate in this zone
		}
		var h *climb
		switch {
		case o.Master < 0:
			h = newClimb(pl, head, nil, false)
		case head == o.Master:
			h = newClimb(pl, o.Master, nil, true)
		default:
			h = newClimb(pl, o.Master, []int{head}, true)
		}
		if err := h.descend(ctx); err != nil {
			return Plan{}, fmt.Errorf("hill climbing: %w", err)
		}
		if c := pl.trim(h.cur()); best == nil || pl.better(c, best) {
			best = c
		}
		if !h.fixed {
			if err := h.jump(ctx, &best); err != nil {
				return Plan{}, fmt.Errorf("hill climbing: %w", err)
			}
		}
	}
	var p Plan
	if best == nil {
		p = pl.infeasible(HillClimb, pl.noWorkerReason())
	} else {
		pl.excludedReasons = o.ExcludedReasons
		p = pl.plan(HillClimb, best)
		pl.excludedReasons = 0
	}
	p.Zones = pl.g.ZoneNames(zones)
	p.MasterForced = o.Master >= 0
	return p, nil
}

// masterBounds sets, for each candidate master m, fluidBound[m], an upper
// bound on the capped fluid rate of any plan with master m, and
// masterOrder, the candidates by decreasing fluid bound (ties in grid
// order). The bound is the master cluster's own rate plus the lesser of
// two ceilings on the workers: the master's uplink, which every byte to or
// from another cluster crosses (rate_c ≤ b_c/Comm ≤ s_c/Comm, and the
// shares s_c sum to the uplink), and the sum over the other clusters of
// what their free machines and own uplinks allow. O(n log n) once.
func (pl *Planner) masterBounds() {
	if pl.fluidBound != nil {
		return
	}
	pl.fluidBound = make([]float64, pl.n)
	pl.bound = make([]float64, pl.n)
	j := pl.job
	alone := make([]float64, pl.n)
	total := 0.0
	for _, c := range pl.cand {
		alone[c] = float64(pl.free[c]) * pl.perf[c] / j.TaskOps
		if j.TaskBytes > 0 {
			alone[c] = min(alone[c], pl.up[c]/j.TaskBytes)
		}
		total += alone[c]
	}
	for _, m := range pl.cand {
		workers := total - alone[m]
		if j.TaskBytes > 0 {
			workers = min(workers, pl.up[m]/j.TaskBytes)
		}
		// A relative margin covers the rounding of the sums.
		pl.fluidBound[m] = (pl.size(m, m, 1, nil).rate + workers) * (1 + pruneSlack)
	}
	pl.masterOrder = slices.Clone(pl.cand)
	slices.SortStableFunc(pl.masterOrder, func(a, b int) int {
		switch {
		case pl.fluidBound[a] > pl.fluidBound[b]:
			return -1
		case pl.fluidBound[a] < pl.fluidBound[b]:
			return 1
		}
		return 0
	})
}

// masterBound returns an upper bound on T/t* for any plan with master m,
// where t* is its run time by whole tasks: the lesser of the fluid bound
// (t* ≥ T/R) and T over the earliest a task can end in such a plan. No
// cluster c ends a task before one slot's task time and the transfer of
// its input, σ_c + Comm/b_c (docs/research/selection.md, "Whole tasks"), and
// b_c is at most the master's LAN in the master's cluster and at most the
// lesser of the two uplinks in another (the widest path and the master's share
// only narrow it). Where tasks are few and short, T/R is far below t* and this
// bound is what prunes the masters of slower clusters. O(n) the first time for
// each m (call masterBounds first).
func (pl *Planner) masterBound(m int) float64 {
	if b := pl.bound[m]; b > 0 {
		return b
	}
	j := pl.job
	first := pl.sigma[m] + j.TaskBytes/pl.lan[m]
	for _, c := range pl.cand {
		if c != m {
			first = min(first, pl.sigma[c]+j.TaskBytes/min(pl.up[c], pl.up[m]))
		}
	}
	b := pl.fluidBound[m]
	if first > 0 {
		// The same relative margin as the fluid bound's.
		b = min(b, float64(j.Tasks)/first*(1+pruneSlack))
	}
	pl.bound[m] = b
	return b
}

// zoneHead returns the zone's candidate cluster of largest free·perf (the
// first in grid order on a tie), where a restart begins, or -1 when the
// zone has no candidate.
func (pl *Planner) zoneHead(zone []int) int {
	head := -1
	for _, c := range zone {
		if pl.why[c] == "" && (head < 0 || pl.w[c] > pl.w[head]) {
			head = c
		}
	}
	return head
}
