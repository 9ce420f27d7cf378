package selection

import (
	"fmt"
	"math"
	"slices"
)

// Algorithm names a way to choose a plan.
type Algorithm string

// The algorithms of `metasched plan --algorithm`.
const (
	HillClimb  Algorithm = "hillclimb"
	Exhaustive Algorithm = "exhaustive"
	MET        Algorithm = "met"
	MCT        Algorithm = "mct"
	OLB        Algorithm = "olb"
)

// Algorithms lists every algorithm, the default first.
var Algorithms = []Algorithm{HillClimb, Exhaustive, MET, MCT, OLB}

// ClusterPlan is one cluster's part of a plan and why.
type ClusterPlan struct {
	Name   string `json:"name"`
	Index  int    `json:"-"`
	Master bool   `json:"master,omitempty"`
	// Machines counts the workers (the master's machine is not among them):
	// the fewest that finish the job's tasks by the plan's run time.
	Machines int `json:"machines"`
	// Allowed is the workers the caps allow (free machines, efficiency,
	// bandwidth); Machines is at most Allowed.
	Allowed int `json:"allowed"`
	Free    int `json:"free"`
	// Tasks is the tasks the cluster's workers finish by the plan's run
	// time; the clusters' tasks add up to the job's.
	Tasks int `json:"tasks"`
	// BandwidthMbps is the bandwidth the cluster's workers share with the
	// master: the LAN for the master's cluster, else the smallest of its
	// uplink, the widest path and its share of the master's uplink.
	BandwidthMbps float64 `json:"bandwidth_mbps"`
	// Rate is the fluid rate of the cluster's workers:
	// min(Machines·perf/Oper, bandwidth/Comm).
	Rate  float64 `json:"rate_tasks_per_s"`
	Limit Limit   `json:"limit"`
	Why   string  `json:"why"`
}

// Excluded is a cluster left out of a plan and why.
type Excluded struct {
	Name   string `json:"name"`
	Index  int    `json:"-"`
	Reason string `json:"reason"`
}

// Plan is the answer to a Problem: the master cluster, the machines used in
// each cluster, the predicted rate and run time, and an explanation.
type Plan struct {
	Algorithm Algorithm `json:"algorithm"`
	Job       string    `json:"job"`
	Tasks     int       `json:"tasks"`
	// Feasible is false when no plan gives the job a single worker; Reason
	// says why and the other fields are empty.
	Feasible    bool   `json:"feasible"`
	Reason      string `json:"reason,omitempty"`
	Master      string `json:"master"`
	MasterIndex int    `json:"-"`
	// MasterForced says the master's cluster was given (Options.Master),
	// not chosen.
	MasterForced bool `json:"master_forced,omitempty"`
	// Rate is the fluid rate of the plan's workers, the clusters' rates
	// summed.
	Rate float64 `json:"rate_tasks_per_s"`
	// Runtime is t*, when the last of the job's tasks ends, every task
	// whole (docs/research/selection.md, "Whole tasks").
	Runtime float64 `json:"runtime_s"`
	// Machines counts every machine of the plan, the master's included.
	Machines    int     `json:"machines"`
	CostPerHour float64 `json:"cost_per_hour"`
	// Start is when the chosen cluster is ready, for the baselines given
	// ready times (0 = now).
	Start float64 `json:"start_s,omitempty"`
	// Clusters lists the clusters that run part of the job, the master's
	// first, then in grid order; a cluster given no worker is excluded.
	Clusters []ClusterPlan `json:"clusters"`
	Excluded []Excluded    `json:"excluded"`
	// ExcludedMore counts the clusters left out beyond those Excluded
	// lists: a plan kept in a job's record lists the first few only
	// (TrimExcluded).
	ExcludedMore int `json:"excluded_more,omitempty"`
	// Zones are the Kruskal zones the hill climbing restarted from.
	Zones [][]string `json:"zones,omitempty"`
	// Evaluations counts the plans the algorithm evaluated.
	Evaluations int `json:"evaluations"`
}

// TrimExcluded keeps the first n clusters left out (grid order) and
// counts the others in ExcludedMore. On a grid of hundreds of clusters a
// plan's reasons are most of its size; a record that keeps every job's
// plan keeps the first few.
func (p *Plan) TrimExcluded(n int) {
	if len(p.Excluded) <= n {
		return
	}
	p.ExcludedMore += len(p.Excluded) - n
	p.Excluded = slices.Clip(p.Excluded[:n])
}

// Completion returns Start + Runtime.
func (p *Plan) Completion() float64 { return p.Start + p.Runtime }

// Infeasible is the answer of algorithm alg that no plan can run the job,
// for the reason given, with every cluster left out and why.
func (pl *Planner) Infeasible(alg Algorithm, reason string) Plan { return pl.infeasible(alg, reason) }

// infeasible is the answer when no plan has a worker.
func (pl *Planner) infeasible(alg Algorithm, reason string) Plan {
	p := Plan{Algorithm: alg, Job: pl.job.Name, Tasks: pl.job.Tasks, Reason: reason, MasterIndex: -1,
		Clusters: []ClusterPlan{}, Evaluations: pl.evals}
	for c := range pl.n {
		r := pl.why[c]
		if r == "" {
			r = "no plan with this cluster gives the job a worker"
		}
		p.Excluded = append(p.Excluded, Excluded{Name: pl.g.Cluster(c).Name, Index: c, Reason: r})
	}
	return p
}

// noWorkerReason explains an infeasible problem.
func (pl *Planner) noWorkerReason() string {
	if len(pl.cand) == 0 {
		return "no cluster can take part: each one's machines cannot hold the job's VM or none is free"
	}
	return "no cluster can get a worker: the master needs one free machine and every bandwidth is worth less than one worker at the job's efficiency"
}

// plan turns a candidate into a Plan with its explanation. Clusters not in
// the candidate are explained by what adding them would do.
func (pl *Planner) plan(alg Algorithm, c *candidate) Plan {
	if math.IsInf(c.s.t, 1) || c.s.machines < 2 {
		return pl.infeasible(alg, pl.noWorkerReason())
	}
	if !(c.s.t <= MaxRuntimeSeconds) {
		return pl.infeasible(alg, fmt.Sprintf("the best plan's predicted run time, %.3g s, is beyond the %g s (ten years) a plan may take",
			c.s.t, MaxRuntimeSeconds))
	}
	g, j := pl.g, pl.job
	// The master's cluster first, then the rest in grid order (a
	// candidate's others are sorted).
	ps := pl.parts(c.m, c.others)
	z := pl.sizeWhole(ps, c.s.t)
	n, tasks := slices.Clone(z.n), slices.Clone(z.tasks)
	p := Plan{
		Algorithm: alg, Job: j.Name, Tasks: j.Tasks, Feasible: true,
		Master: g.Cluster(c.m).Name, MasterIndex: c.m,
		Rate: z.rate, Runtime: c.s.t, Machines: 1 + z.machines, CostPerHour: z.cost,
		Clusters: []ClusterPlan{}, Excluded: []Excluded{}, Evaluations: pl.evals,
	}
	in := map[int]int{}
	for i, pt := range ps {
		in[pt.c] = i
		if i > 0 && n[i] == 0 {
			continue
		}
		limit := pt.limit
		if n[i] < pt.n {
			limit = LimitTasks
		}
		rate := 0.0
		if n[i] > 0 {
			rate = pl.sizedRate(pt, n[i])
		}
		p.Clusters = append(p.Clusters, ClusterPlan{
			Name: g.Cluster(pt.c).Name, Index: pt.c, Master: i == 0, Machines: n[i], Allowed: pt.n, Free: pl.free[pt.c],
			Tasks: tasks[i], BandwidthMbps: pt.b / bytesPerMbps, Rate: rate, Limit: limit,
			Why: pl.whyPart(c.m, pt, n[i], tasks[i], c.s.t),
		})
	}
	for k := range pl.n {
		i, ok := in[k]
		if pl.why[k] == "" && ok && (k == c.m || n[i] > 0) {
			continue // in the plan
		}
		if pl.excludedReasons > 0 && len(p.Excluded) >= pl.excludedReasons {
			p.ExcludedMore++ // left out, its reason not worked out (Options.ExcludedReasons)
			continue
		}
		var reason string
		switch {
		case pl.why[k] != "":
			reason = pl.why[k]
		case ok && ps[i].n == 0:
			reason = "in the set, but " + pl.zeroReason(c.m, ps[i])
		case ok:
			reason = fmt.Sprintf("in the set, but not needed: the other clusters finish the %s by %s", count(j.Tasks, "task"), secs(c.s.t))
		default:
			reason = pl.whyNotAdded(c, k)
		}
		p.Excluded = append(p.Excluded, Excluded{Name: g.Cluster(k).Name, Index: k, Reason: reason})
	}
	return p
}

// whyPart explains the workers of one cluster of a plan: n of the pt.n
// the caps allow, finishing tasks by t.
func (pl *Planner) whyPart(m int, pt part, n, tasks int, t float64) string {
	head := fmt.Sprintf("%s by %s", count(tasks, "task"), secs(t))
	if n < pt.n {
		if pt.c == m && n == 0 {
			return fmt.Sprintf("master's cluster: the master takes 1 machine; its other %d allowed are not needed, as the other clusters finish the %s by %s",
				pt.n, count(pl.job.Tasks, "task"), secs(t))
		}
		return fmt.Sprintf("%s: %s of %d free, %s; more would not end the job sooner",
			head, count(n, "machine"), pl.free[pt.c], pl.each(pt, n, tasks, t))
	}
	return head + ": " + pl.whyCap(m, pt) + ", " + pl.each(pt, n, tasks, t)
}

// each says how the tasks of n machines of part pt fall on them by t:
// the part's machines in the sizing's order, the last taking what is left.
func (pl *Planner) each(pt part, n, tasks int, t float64) string {
	if tasks == n {
		return "one task each"
	}
	lo, hi, left := int64(math.MaxInt64), int64(0), int64(tasks)
	for _, it := range pl.machines(nil, 0, pt, t, int64(pl.job.Tasks)) {
		for range min(it.k, n) {
			v := min(it.v, left)
			lo, hi, left = min(lo, v), max(hi, v), left-v
			n--
		}
	}
	if lo == hi {
		return fmt.Sprintf("%d tasks each", lo)
	}
	return fmt.Sprintf("%d to %d tasks each", lo, hi)
}

// whyCap explains what the caps allow in one cluster of a plan.
func (pl *Planner) whyCap(m int, pt part) string {
	g, theta := pl.g, pl.job.Efficiency
	mb := pt.b / bytesPerMbps
	if pt.c == m {
		switch pt.limit {
		case LimitFree:
			return fmt.Sprintf("master's cluster: the master takes 1 machine, the other %d free work over the %s LAN",
				pt.n, mbps(mb))
		default:
			return fmt.Sprintf("master's cluster: the master takes 1 machine; %d of the other %d free work, as more on the %s LAN would drop efficiency below %g",
				pt.n, pl.free[m]-1, mbps(mb), theta)
		}
	}
	master := g.Cluster(m).Name
	switch pt.limit {
	case LimitFree:
		return fmt.Sprintf("all %d free machines work, fed at %s from %s", pt.n, mbps(mb), master)
	case LimitUplink:
		return fmt.Sprintf("%d of %d free: its own %s uplink feeds no more at efficiency %g", pt.n, pl.free[pt.c], mbps(mb), theta)
	case LimitPath:
		return fmt.Sprintf("%d of %d free: the widest path to %s carries %s, which feeds no more at efficiency %g",
			pt.n, pl.free[pt.c], master, mbps(mb), theta)
	default:
		return fmt.Sprintf("%d of %d free: its share of %s's %s uplink is %s, which feeds no more at efficiency %g",
			pt.n, pl.free[pt.c], master, mbps(pl.up[m]/bytesPerMbps), mbps(mb), theta)
	}
}

// count writes n things: "1 task", "4 tasks".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// zeroReason explains a worker cluster given no machine.
func (pl *Planner) zeroReason(m int, pt part) string {
	what := map[Limit]string{
		LimitUplink:      "its own uplink",
		LimitPath:        "the widest path to " + pl.g.Cluster(m).Name,
		LimitMasterShare: "its share of " + pl.g.Cluster(m).Name + "'s uplink",
	}[pt.limit]
	return fmt.Sprintf("%s (%s) is worth less than one machine at efficiency %g", what, mbps(pt.b/bytesPerMbps), pl.job.Efficiency)
}

// whyNotAdded explains why cluster k is not in the plan of candidate c.
func (pl *Planner) whyNotAdded(c *candidate, k int) string {
	others := append(slices.Clone(c.others), k)
	slices.Sort(others)
	s := pl.score(c.m, others)
	row := pl.row(c.m)
	pt := pl.size(k, c.m, pl.weight(others), row)
	switch {
	case pt.n == 0:
		return "adding it gives it no worker: " + pl.zeroReason(c.m, pt)
	case cmpTime(s.t, c.s.t) < 0:
		return fmt.Sprintf("adding it makes the job end later, at %s: it would take a share of %s's uplink worth more to the clusters in the plan",
			secs(s.t), pl.g.Cluster(c.m).Name)
	case cmpTime(s.t, c.s.t) == 0 && s.machines > c.s.machines:
		return fmt.Sprintf("adding it does not make the job end sooner (%s) and uses %d more machines", secs(s.t), s.machines-c.s.machines)
	case cmpTime(s.t, c.s.t) == 0:
		return fmt.Sprintf("adding it does not make the job end sooner than %s: its machines are not needed", secs(s.t))
	default:
		return fmt.Sprintf("adding it would end the job at %s, sooner, which this algorithm did not find", secs(s.t))
	}
}

// mbps formats a bandwidth in Mbit/s.
func mbps(x float64) string { return fmt.Sprintf("%.4g Mbit/s", x) }
