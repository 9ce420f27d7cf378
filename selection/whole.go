package selection

import (
	"cmp"
	"math"
	"slices"
)

// Whole tasks (docs/research/selection.md, "Whole tasks"). The caps of sizing
// (size) allow n_c machines in cluster c at bandwidth b_c. A VM of s vCPUs
// runs s task-farm processes, its m_c = n_c·s slots, each at perf_c/s, so a
// slot's task takes σ_c = s·Oper/perf_c; the link carries L_c = b_c/Comm
// tasks/s, an input every u_c = 1/L_c s, and a task starts once its input is
// in. By time t the cluster has finished
//
//	D_c(t) = min(⌊(t − σ_c)·L_c⌋⁺, Σ_{i=1..m_c} ⌊(t − i·u_c)/σ_c⌋⁺)
//
// whole tasks (m_c·⌊t/σ_c⌋ when Comm = 0), and the plan's run time is
// t* = min{t : Σ_c D_c(t) ≥ T}. With R = Σ min(m_c/σ_c, L_c), the fluid
// rate, T/R ≤ t* ≤ T/R + max_c δ_c (stepper.delta); t* is one of the
// completions i·u_c + k·σ_c or σ_c + j·u_c, found by bisection over them.

// maxFinishSteps bounds the bisection's steps; each halves the interval
// that holds t*, and it stops long before when no step separates the ends.
const maxFinishSteps = 200

// slots returns the task-farm processes of one VM: one per vCPU.
func (pl *Planner) slots() int { return pl.job.VM.VCPUs }

// stepSlack is the relative slack of counting steps: a count is rounded
// down after growing by 1e-12 of the terms it is computed from (downAt), so
// that a step at exactly i·u_c + k·σ_c (computed as a product, divided
// again) is not missed, while two distinct steps further apart than relTie
// stay apart.
const stepSlack = 1e-12

// downAt rounds down a count of steps q computed as a difference of terms
// of about scale (such as (t − σ)·L, of about t·L), with the slack relative
// to scale: the difference's rounding error is relative to its terms, not
// to itself.
func downAt(q, scale float64) float64 { return math.Floor(q + stepSlack*scale) }

// linkRate returns L_c = b/Comm in tasks/s, +Inf when Comm = 0.
func (pl *Planner) linkRate(p part) float64 {
	if pl.job.TaskBytes > 0 {
		return p.b / pl.job.TaskBytes
	}
	return math.Inf(1)
}

// doneBy returns Σ_c D_c(t) over the parts, at most T.
func (pl *Planner) doneBy(ps []part, t float64) float64 {
	done, _, _ := at(pl.steppers(ps), t, float64(pl.job.Tasks))
	return done
}

// fluidRate returns R = Σ rate_c over the parts.
func (pl *Planner) fluidRate(ps []part) (R float64) {
	for _, p := range ps {
		if p.n > 0 {
			R += p.rate
		}
	}
	return R
}

// maxDelta returns the largest δ_c of the steppers: t* ≤ T/R + maxDelta.
func maxDelta(st []stepper) (step float64) {
	for _, p := range st {
		step = max(step, p.delta())
	}
	return step
}

// stepper is n machines of one part as the bisection of t* reads them: its
// slot task time σ and 1/σ (a product is cheaper than a quotient in the
// bisection's loop), its slots m = n·s, its link's rate L and u = 1/L (L =
// +Inf and u = 0: no link bound).
type stepper struct {
	sigma, inv, m, L, u float64
}

// stepper returns n machines of part p as a stepper.
func (pl *Planner) stepper(p part, n int) stepper {
	L := pl.linkRate(p)
	return stepper{sigma: pl.sigma[p.c], inv: 1 / pl.sigma[p.c], m: float64(n * pl.slots()), L: L, u: 1 / L}
}

// linkBound reports whether the link is the part's bottleneck: its slots
// take inputs faster than it delivers them (m·u > σ), and task j ends at
// σ + j·u. Otherwise each slot runs back to back from its first input.
func (p stepper) linkBound() bool { return p.m*p.u > p.sigma }

// delta returns δ: D(t) > rate·(t − δ), σ + u when the link is the
// bottleneck, σ + m·u when the slots are.
func (p stepper) delta() float64 {
	if p.linkBound() {
		return p.sigma + p.u
	}
	return p.sigma + p.m*p.u
}

// top returns the tasks slot 1 has finished by t, ⌊(t − u)/σ⌋, and k, the
// slots that have finished as many (the others have one less) when the
// slots are the bottleneck (at least 1, at most m; m without a link bound).
func (p stepper) top(t float64) (top, k float64) {
	top = downAt((t-p.u)*p.inv, t*p.inv)
	if p.u == 0 {
		return top, p.m
	}
	return top, min(max(downAt((t-top*p.sigma)*p.L, t*p.L), 1), p.m)
}

// linkDone returns ⌊(t − σ)·L⌋⁺, the tasks whose inputs the link has
// carried in time to be done by t (+Inf without a link bound).
func (p stepper) linkDone(t float64) float64 {
	if p.u == 0 {
		return math.Inf(1)
	}
	return max(downAt((t-p.sigma)*p.L, t*p.L), 0)
}

// count returns D(t), the latest completion at or before t (0 for none)
// and the earliest after it. O(1).
func (p stepper) count(t float64) (d, prev, next float64) {
	if p.linkBound() {
		j := p.linkDone(t)
		if j > 0 {
			prev = p.sigma + j*p.u
		}
		return j, prev, p.sigma + (j+1)*p.u
	}
	top, k := p.top(t)
	if top < 1 {
		return 0, 0, p.u + p.sigma
	}
	d = k*top + (p.m-k)*(top-1)
	prev, next = k*p.u+top*p.sigma, p.u+(top+1)*p.sigma
	if k < p.m {
		next = min(next, (k+1)*p.u+top*p.sigma)
		if top > 1 {
			prev = max(prev, p.m*p.u+(top-1)*p.sigma)
		}
	}
	return d, prev, next
}

// steppers returns the parts with machines as steppers, in the planner's
// scratch (valid until the next call).
func (pl *Planner) steppers(ps []part) []stepper {
	st := pl.scratchSteps[:0]
	for _, p := range ps {
		if p.n > 0 {
			st = append(st, pl.stepper(p, p.n))
		}
	}
	pl.scratchSteps = st
	return st
}

// at returns, for the steppers at time t, Σ D_c(t) (stopping at T), the
// latest step at or before t and the earliest after it, in one pass.
func at(st []stepper, t, T float64) (done, prev, next float64) {
	next = math.Inf(1)
	for _, p := range st {
		d, pv, nx := p.count(t)
		prev, next = max(prev, pv), min(next, nx)
		done += d
	}
	return min(done, T), prev, next
}

// finish returns t*, the time the parts finish the job's T tasks, whole:
// +Inf when they have no machine. It bisects [T/R, T/R + step] keeping the
// upper end on a step, and stops when no step lies between the ends (or
// they are within a relative 1e-12: such steps tie). O(|ps|) per step of
// the bisection.
func (pl *Planner) finish(ps []part) float64 {
	R, st := pl.fluidRate(ps), pl.steppers(ps)
	step := maxDelta(st)
	if !(R > 0) {
		return math.Inf(1)
	}
	T := float64(pl.job.Tasks)
	lo := T / R
	done, prev, nlo := at(st, lo, T)
	if done >= T {
		return prev
	}
	hi := lo + step*(1+1e-9)
	for i := 0; ; i++ {
		d, p, _ := at(st, hi, T)
		if d >= T {
			hi = p
			break
		}
		if i == 64 { // cannot happen but for rounding gone wild
			return math.Inf(1)
		}
		hi = 2*hi + step
	}
	// Invariant: Σ D(lo) = done < T ≤ Σ D(hi), hi a step, nlo the first
	// step after lo. Every other probe is the fluid guess lo + (T −
	// done)/R, kept off the ends, which lands near t* as Σ D grows at
	// about R; the others halve the interval, which bounds the probes.
	for i := range maxFinishSteps {
		if nlo >= hi*(1-relTie) || hi-lo <= relTie*hi {
			return hi
		}
		mid := lo + (hi-lo)/2
		if i%2 == 0 {
			mid = min(max(lo+(T-done)/R, lo+(hi-lo)/16), hi-(hi-lo)/16)
		}
		d, p, n := at(st, mid, T)
		if d >= T {
			hi = p
		} else {
			lo, nlo, done = mid, n, d
		}
	}
	return hi
}

// item is one kind of machine of the sizing by whole tasks: k machines of
// part i, each finishing v tasks by t*.
type item struct {
	i, k int
	v    int64
}

// sizing is the result of sizeWhole.
type sizing struct {
	t        float64
	machines int     // workers, the master's machine not among them
	cost     float64 // per hour, the master's machine included
	rate     float64 // fluid rate of the sized machines
	// n[i] and tasks[i]: the sized workers and tasks of part i.
	n, tasks []int
}

// sizeWhole keeps the fewest machines of the parts (ps[0] is the master's
// cluster) that still finish T tasks by t: part c's slot i finishes
// ⌊(t − i·u_c)/σ_c⌋ tasks (machines), the part's total capped by its
// link's ⌊(t − σ_c)·L_c⌋ (machines). Machines are taken greedily, the one
// finishing most first (ties to the faster cluster, then the parts'
// order); each part's tasks are what its machines finish, the last one
// taking the remainder. The sizing's slices are the planner's scratch:
// valid until the next call.
func (pl *Planner) sizeWhole(ps []part, t float64) sizing {
	T := int64(pl.job.Tasks)
	z := sizing{t: t, n: pl.scratchN[:0], tasks: pl.scratchTasks[:0]}
	items := pl.scratchItems[:0]
	for i, p := range ps {
		z.n, z.tasks = append(z.n, 0), append(z.tasks, 0)
		if p.n == 0 || math.IsInf(t, 1) {
			continue
		}
		items = pl.machines(items, i, p, t, T)
	}
	slices.SortFunc(items, func(x, y item) int {
		if x.v != y.v {
			return cmp.Compare(y.v, x.v)
		}
		if px, py := pl.perf[ps[x.i].c], pl.perf[ps[y.i].c]; px != py {
			return cmp.Compare(py, px)
		}
		return cmp.Compare(x.i, y.i)
	})
	left := T
	for _, it := range items {
		if left <= 0 {
			break
		}
		k := int(min(int64(it.k), (left+it.v-1)/it.v))
		got := min(int64(k)*it.v, left)
		z.n[it.i] += k
		z.tasks[it.i] += int(got)
		left -= got
	}
	z.cost = pl.cost[ps[0].c]
	for i, p := range ps {
		if z.n[i] == 0 {
			continue
		}
		z.machines += z.n[i]
		z.cost += pl.cost[p.c] * float64(z.n[i])
		z.rate += pl.sizedRate(p, z.n[i])
	}
	pl.scratchN, pl.scratchTasks, pl.scratchItems = z.n, z.tasks, items
	return z
}

// machines appends part p's machines at t (part i of the plan), in
// order, as runs of machines that finish as many tasks each: those whose
// slots all finish top, the one holding slot k (k of top, the rest top −
// 1), those whose slots finish top − 1, until the part's total reaches its
// link's cap or T (the last machine then finishing the remainder).
func (pl *Planner) machines(items []item, i int, p part, t float64, T int64) []item {
	st := pl.stepper(p, p.n)
	top, k := st.top(t)
	if top < 1 {
		return items
	}
	s, left := int64(pl.slots()), T
	if c := st.linkDone(t); c < float64(left) {
		left = int64(c)
	}
	full, mixed := int64(k)/s, int64(k)%s
	run := func(k, v int64) {
		if k <= 0 || v <= 0 || left <= 0 {
			return
		}
		q := min(k, left/v)
		if q > 0 {
			items = append(items, item{i: i, k: int(q), v: v})
			left -= q * v
		}
		if q < k && left > 0 {
			items = append(items, item{i: i, k: 1, v: left})
			left = 0
		}
	}
	T0 := int64(top)
	run(full, s*T0)
	if mixed > 0 {
		run(1, mixed*T0+(s-mixed)*(T0-1))
	}
	run(int64(p.n)-full-min(mixed, 1), s*(T0-1))
	return items
}

// sizedRate returns the fluid rate of n machines of part p:
// min(n·perf/Oper, L).
func (pl *Planner) sizedRate(p part, n int) float64 {
	return min(float64(n)*pl.perf[p.c]/pl.job.TaskOps, pl.linkRate(p))
}

// nearSlack: the tasks finished "just before t*" are those finished by
// t*·(1 − nearSlack).
const nearSlack = 1e-9

// value returns the score of the plan whose parts are ps (ps[0] the
// master's cluster): t* and the fewest machines that finish by it, with
// the tasks finished just before t* that the hill climbing follows on
// plateaus.
func (pl *Planner) value(ps []part) score { return pl.valueBy(ps, math.Inf(1)) }

// valueBy is value for a plan that must reach run time by to matter: a
// later t* is returned alone, without the sizing.
func (pl *Planner) valueBy(ps []part, by float64) score {
	t := pl.finish(ps)
	if math.IsInf(t, 1) || cmpTime(t, by) < 0 {
		return score{t: t, machines: 1, cost: pl.cost[ps[0].c]}
	}
	z := pl.sizeWhole(ps, t)
	return score{t: t, near: pl.doneBy(ps, t*(1-nearSlack)), machines: 1 + z.machines, cost: z.cost}
}

// trim drops from a plan the worker clusters its sizing gives no machine,
// while that makes it better: without them the others' shares of the
// master's uplink only grow, so t* is no later and the machines no more.
// The hill climbing, which follows the capped plan's fluid rate across
// plateaus of t*, ends on plans that keep such clusters.
func (pl *Planner) trim(c *candidate) *candidate {
	for len(c.others) > 0 && !math.IsInf(c.s.t, 1) {
		ps := pl.parts(c.m, c.others)
		z := pl.sizeWhole(ps, c.s.t)
		keep := make([]int, 0, len(c.others))
		for i, o := range c.others {
			if z.n[i+1] > 0 {
				keep = append(keep, o)
			}
		}
		if len(keep) == len(c.others) {
			return c
		}
		d := &candidate{m: c.m, others: keep, s: pl.score(c.m, keep)}
		if !pl.better(d, c) {
			return c
		}
		c = d
	}
	return c
}
