package selection

import (
	"cmp"
	"math"
	"slices"
)

// Whole tasks (docs/design.md, "Whole tasks"). The caps of sizing (size)
// allow n_c machines in cluster c at bandwidth b_c. A VM of s vCPUs runs s
// task-farm processes, its slots, each at perf_c/s, so a slot's task takes
// σ_c = s·Oper/perf_c, and the link carries L_c = b_c/Comm tasks/s. By time t
// the cluster has finished
//
//	D_c(t) = min(n_c·s·⌊t/σ_c⌋, ⌊t·L_c⌋)
//
// whole tasks (no link bound when Comm = 0), and the plan's run time is
// t* = min{t : Σ_c D_c(t) ≥ T}. With R = Σ min(n_c·perf_c/Oper, L_c), the
// fluid rate, T/R ≤ t* ≤ T/R + max_c max(σ_c, 1/L_c); t* is one of the
// steps k·σ_c or j/L_c, found by bisection over the steps.

// maxFinishSteps bounds the bisection's steps; each halves the interval
// that holds t*, and it stops long before when no step separates the ends.
const maxFinishSteps = 200

// slots returns the task-farm processes of one VM: one per vCPU.
func (pl *Planner) slots() int { return pl.job.VM.VCPUs }

// stepSlack is the relative slack of counting steps: t/σ_c and t·L_c are
// rounded down after growing by a relative 1e-12, so that a step at exactly
// k·σ_c (computed as a product, divided again) is not missed, while two
// distinct steps further apart than relTie stay apart.
const stepSlack = 1e-12

// down rounds a count of steps down with the slack.
func down(q float64) float64 { return math.Floor(q * (1 + stepSlack)) }

// rounds returns ⌊t/σ_c⌋, the tasks one slot of c has finished by t.
func (pl *Planner) rounds(c int, t float64) float64 {
	return down(t * (1 / pl.sigma[c])) // as the steppers count it
}

// linkRate returns L_c = b/Comm in tasks/s, +Inf when Comm = 0.
func (pl *Planner) linkRate(p part) float64 {
	if pl.job.TaskBytes > 0 {
		return p.b / pl.job.TaskBytes
	}
	return math.Inf(1)
}

// carried returns ⌊t·L⌋, the tasks a link of L tasks/s has carried by t
// (+Inf for no link bound), with the slack.
func carried(t, L float64) float64 {
	if math.IsInf(L, 1) {
		return L
	}
	return down(t * L)
}

// doneBy returns Σ_c D_c(t) over the parts, at most T.
func (pl *Planner) doneBy(ps []part, t float64) float64 {
	done, _, _ := at(pl.steppers(ps), t, float64(pl.job.Tasks))
	return done
}

// fluidRate returns R = Σ rate_c over the parts, and the largest step
// max_c max(σ_c, 1/L_c) over the parts with machines.
func (pl *Planner) fluidRate(ps []part) (R, step float64) {
	for _, p := range ps {
		if p.n == 0 {
			continue
		}
		R += p.rate
		step = max(step, pl.sigma[p.c], 1/pl.linkRate(p))
	}
	return R, step
}

// stepper is one part with machines as the bisection of t* reads it: its
// slot task time σ and 1/σ (a product is cheaper than a quotient in the
// bisection's loop), its tasks per round n·s and its link's rate L (+Inf:
// no link bound).
type stepper struct {
	sigma, inv, per, L float64
}

// steppers returns the parts with machines as steppers, in the planner's
// scratch (valid until the next call).
func (pl *Planner) steppers(ps []part) []stepper {
	st := pl.scratchSteps[:0]
	s := float64(pl.slots())
	for _, p := range ps {
		if p.n > 0 {
			st = append(st, stepper{sigma: pl.sigma[p.c], inv: 1 / pl.sigma[p.c], per: float64(p.n) * s, L: pl.linkRate(p)})
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
		q := down(t * p.inv) // as rounds counts
		d := p.per * q
		prev, next = max(prev, p.sigma*q), min(next, p.sigma*(q+1))
		if !math.IsInf(p.L, 1) {
			j := carried(t, p.L)
			d = min(d, j)
			prev, next = max(prev, j/p.L), min(next, (j+1)/p.L)
		}
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
	R, step := pl.fluidRate(ps)
	st := pl.steppers(ps)
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
// cluster) that still finish T tasks by t: a machine of part c finishes
// s·⌊t/σ_c⌋ tasks, and the part's total is capped by its link's ⌊t·L_c⌋.
// Machines are taken greedily, the one finishing most first (ties to the
// faster cluster, then the parts' order); each part's tasks are what its
// machines finish, the last one taking the remainder. The sizing's slices
// are the planner's scratch: valid until the next call.
func (pl *Planner) sizeWhole(ps []part, t float64) sizing {
	T, s := int64(pl.job.Tasks), int64(pl.slots())
	z := sizing{t: t, n: pl.scratchN[:0], tasks: pl.scratchTasks[:0]}
	items := pl.scratchItems[:0]
	for i, p := range ps {
		z.n, z.tasks = append(z.n, 0), append(z.tasks, 0)
		if p.n == 0 || math.IsInf(t, 1) {
			continue
		}
		a := min(s*int64(pl.rounds(p.c, t)), T) // tasks of one machine
		if a == 0 {
			continue
		}
		total := min(int64(p.n)*a, T)
		if lc := carried(t, pl.linkRate(p)); lc < float64(total) {
			total = int64(lc)
		}
		if q := int(total / a); q > 0 {
			items = append(items, item{i: i, k: q, v: a})
		}
		if r := total % a; r > 0 {
			items = append(items, item{i: i, k: 1, v: r})
		}
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
