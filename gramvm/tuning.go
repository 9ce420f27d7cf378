package gramvm

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/selection"
)

// Defaults of TuneOptions.
const (
	DefaultMaxPerHost = 1
	DefaultMaxPerLink = 2
)

// The actions of a TuningDecision.
const (
	ActionConsolidate = "consolidate"
	ActionShrink      = "shrink"
)

// relNetTie is the relative difference under which two decisions' nets tie.
const relNetTie = 1e-9

// TuneOptions bound the migrations of Tune.
type TuneOptions struct {
	// MaxPerHost caps the migrations touching one host at a time (as
	// source or destination); 0 means DefaultMaxPerHost.
	MaxPerHost int `json:"max_per_host"`
	// MaxPerLink caps the migrations over one link at a time: a
	// cluster's LAN for the moves inside it; 0 means DefaultMaxPerLink.
	MaxPerLink int `json:"max_per_link"`
	// CanShrink says whether the hypervisor of a site can unplug vCPUs
	// of a running VM; nil: none can.
	CanShrink func(site string) bool `json:"-"`
	// InFlight counts the migrations already under way per host name
	// and per LAN (LANKey), so that the caps hold across decisions.
	InFlight map[string]int `json:"in_flight,omitempty"`
}

// LANKey is the key of a cluster's LAN in TuneOptions.InFlight.
func LANKey(cluster string) string { return "lan:" + cluster }

// Move is one live migration of a decision.
type Move struct {
	VM   string `json:"vm"`
	Site string `json:"site"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Shrink is one vCPU hot-unplug of a decision.
type Shrink struct {
	VM    string `json:"vm"`
	Site  string `json:"site"`
	Host  string `json:"host"`
	VCPUs int    `json:"vcpus"` // after the shrink
}

// TuningDecision is one candidate action on a running job (the target) in
// one cluster, with what it would do to the new job and to the target.
type TuningDecision struct {
	NewJob string `json:"new_job"`
	Target string `json:"target"`
	// Action is ActionConsolidate or ActionShrink.
	Action  string   `json:"action"`
	Cluster string   `json:"cluster"`
	Moves   []Move   `json:"moves,omitempty"`
	Shrinks []Shrink `json:"shrinks,omitempty"`
	// GainSeconds is how much sooner the new job ends: its predicted run
	// time T/R now less that after the action.
	GainSeconds float64 `json:"gain_seconds"`
	// LossSeconds is how much later the target ends: its remaining tasks
	// at its rate after the action less at its rate now.
	LossSeconds float64 `json:"loss_seconds"`
	// MigrationSeconds is the memory of the moved VMs over the cluster's
	// LAN bandwidth (0 for a shrink).
	MigrationSeconds    float64 `json:"migration_seconds"`
	NewJobSecondsBefore float64 `json:"new_job_seconds_before"`
	NewJobSecondsAfter  float64 `json:"new_job_seconds_after"`
	TargetSecondsBefore float64 `json:"target_seconds_before"`
	TargetSecondsAfter  float64 `json:"target_seconds_after"`
	// Accepted is GainSeconds > LossSeconds + MigrationSeconds.
	Accepted bool   `json:"accepted"`
	Reason   string `json:"reason"`
}

// net is what a decision saves in all.
func (d *TuningDecision) net() float64 { return d.GainSeconds - d.LossSeconds - d.MigrationSeconds }

// Tune decides how to free hosts and bandwidth for a new job by
// consolidating or shrinking the VMs of running jobs (004 §3.2). free are
// the new job's free hosts (FreeHosts), hosts the capacities of the hosts
// of the running jobs' VMs.
//
// It plans the new job on the loaded grid (PlanLoaded, hill climbing with
// selection.Options{Master: -1}: any master, the default restarts). When
// the plan is feasible, the clusters that hold it back are those it uses
// whose limit is a link (their uplink, the path to the new master, the new
// master's uplink) and those where more free machines would give it more
// workers (limit free, or left out though its VM fits). Each running job
// is a target in each cluster where it has workers and whose traffic
// crosses such a link, or where more machines would help and it is of the
// new job's type (its hosts are in the new job's pool). For each target
// and cluster Tune evaluates:
//
//   - consolidate: k pairs of the target's full-speed workers share a host,
//     one of each pair moving live to the other's host where the host has
//     the vCPUs and memory for it; both then run at half speed. It frees
//     the source hosts for the new job and lowers the target's data rate
//     once its compute falls below its bandwidth. k runs from 1 to the
//     pairs the caps allow: the moves of a decision start together, so at
//     most MaxPerLink − InFlight[LANKey(cluster)] of them, and no host in
//     more than MaxPerHost − InFlight[host] (one pair uses a host once).
//   - shrink, where opt.CanShrink(cluster): the vCPUs of k of the target's
//     workers halve, and so does their speed; a host whose freed vCPUs let
//     the new job's VM fit counts as free. k runs from 1 to every worker
//     with at least 2 vCPUs.
//
// For each k the new job is planned again with the freed hosts and the
// target's lower traffic: GainSeconds is the difference of its run times,
// LossSeconds the target's extra time for its remaining tasks,
// MigrationSeconds the moved memory over the cluster's LAN (moves that
// share the LAN share its bandwidth, however they are grouped in rounds);
// the best k (largest net gain − loss − migration, then fewer) is the
// candidate's. A candidate is accepted when its gain exceeds its loss and
// migration.
//
// Every candidate is returned, the best first: accepted ones first, then
// by net, then by target ID, consolidate before shrink, and grid order.
// When the first is accepted it is the one to carry out; the others are
// stale once it is done. No candidates (nil) is the answer when the new
// job has no plan (its wait cannot be weighed) or nothing holds it back.
// Errors are for bad input and cancellation. Each k costs one plan of the
// new job: O(clusters + links) to load the grid plus a hill climb.
func (s *Service) Tune(ctx context.Context, newJob *selection.Job, free map[string][]string, hosts []HostCapacity, running []RunningJob, opt TuneOptions) ([]TuningDecision, error) {
	if newJob == nil {
		return nil, errors.New("tune: no new job")
	}
	if err := newJob.Validate(); err != nil {
		return nil, fmt.Errorf("tune %s: %w", newJob.Name, err)
	}
	if opt.MaxPerHost < 0 || opt.MaxPerLink < 0 {
		return nil, fmt.Errorf("tune %s: caps must be >= 0, got %d per host and %d per link", newJob.Name, opt.MaxPerHost, opt.MaxPerLink)
	}
	if opt.MaxPerHost == 0 {
		opt.MaxPerHost = DefaultMaxPerHost
	}
	if opt.MaxPerLink == 0 {
		opt.MaxPerLink = DefaultMaxPerLink
	}
	base := s.snapshot()
	md, err := base.model(running)
	if err != nil {
		return nil, fmt.Errorf("tune %s: %w", newJob.Name, err)
	}
	caps := map[hostKey]HostCapacity{}
	for i, h := range hosts {
		k := hostKey{h.Site, h.Host}
		if _, dup := caps[k]; dup {
			return nil, fmt.Errorf("tune %s: hosts[%d]: host %s of %s listed twice", newJob.Name, i, h.Host, h.Site)
		}
		caps[k] = h
	}
	t := &tuner{s: base, md: md, job: newJob, free: free, caps: caps, opt: opt, rates: md.currentRates()}
	up, links := md.load(t.rates)
	loaded := md.loadedGrid(up, links)
	before, err := t.plan(ctx, loaded, free)
	if err != nil {
		return nil, err
	}
	if !before.Plan.Feasible {
		return nil, nil
	}
	t.before = before.Plan.Runtime
	lg, err := graph.New(loaded)
	if err != nil {
		return nil, fmt.Errorf("tune %s: %w", newJob.Name, err)
	}
	t.pressure(before.Plan, lg)

	var out []TuningDecision
	order := make([]int, len(md.jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(md.jobs[a].rj.ID, md.jobs[b].rj.ID) })
	for _, j := range order {
		jm := md.jobs[j]
		for _, pi := range jm.byCluster() {
			c := jm.parts[pi].c
			if len(jm.workers(jm.rj.VMs, c)) == 0 || !t.relevant(jm, c) {
				continue
			}
			d, err := t.consolidate(ctx, j, pi)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
			if name := md.grid.Clusters[c].Name; opt.CanShrink != nil && opt.CanShrink(name) {
				d, err := t.shrink(ctx, j, pi)
				if err != nil {
					return nil, err
				}
				out = append(out, d)
			}
		}
	}
	t.rank(out)
	return out, nil
}

// tuner holds what one Tune call knows.
type tuner struct {
	s    *Service // a snapshot
	md   *model
	job  *selection.Job
	free map[string][]string
	caps map[hostKey]HostCapacity
	opt  TuneOptions
	// rates are the running jobs' rates now; before is the new job's run
	// time now.
	rates  [][]float64
	before float64
	// The links that hold the new job back (uplinks by cluster, links
	// by index) and the clusters where more free machines would help.
	upHeld, linkHeld, short map[int]bool
}

// plan plans the new job on a loaded grid.
func (t *tuner) plan(ctx context.Context, g *graph.Grid, free map[string][]string) (Placement, error) {
	return t.s.withGrid(g).Plan(ctx, t.job, free, selection.Options{Master: -1})
}

// pressure finds what holds the new job's plan back. lg is the loaded
// grid's graph, whose widest paths are the plan's.
func (t *tuner) pressure(p selection.Plan, lg *graph.Graph) {
	t.upHeld, t.linkHeld, t.short = map[int]bool{}, map[int]bool{}, map[int]bool{}
	m := p.MasterIndex
	for _, cp := range p.Clusters {
		switch cp.Limit {
		case selection.LimitUplink:
			t.upHeld[cp.Index] = true
		case selection.LimitPath:
			for _, l := range lg.WidestPath(cp.Index, m) {
				t.linkHeld[l] = true
			}
		case selection.LimitMasterShare:
			t.upHeld[m] = true
		case selection.LimitFree:
			t.short[cp.Index] = true
		}
	}
	for _, ex := range p.Excluded {
		cl := t.md.grid.Clusters[ex.Index]
		if cl.Cores < t.job.VM.VCPUs || cl.MemoryMiB < t.job.VM.MemoryMiB {
			continue
		}
		t.short[ex.Index] = true
		if ex.Index != m && len(t.free[cl.Name]) > 0 {
			t.upHeld[ex.Index], t.upHeld[m] = true, true
			for _, l := range lg.WidestPath(ex.Index, m) {
				t.linkHeld[l] = true
			}
		}
	}
}

// relevant says whether tuning job jm in cluster c could help: its
// traffic from c crosses a link that holds the new job back, or c is short
// of machines and jm's hosts are in the new job's pool.
func (t *tuner) relevant(jm *jobModel, c int) bool {
	if t.short[c] && jm.rj.Job.Type == t.job.Type {
		return true
	}
	if c == jm.m {
		return false
	}
	if t.upHeld[c] || t.upHeld[jm.m] {
		return true
	}
	for _, l := range t.md.g.WidestPath(c, jm.m) {
		if t.linkHeld[l] {
			return true
		}
	}
	return false
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// decide fills d from the best outcome: the largest net among those that
// leave the new job a plan, then the fewest steps. what describes the
// action with k steps.
func (t *tuner) decide(d *TuningDecision, outs []outcome, what func(k int) string) {
	best := -1
	for i := range outs {
		if outs[i].feasible && (best < 0 || outs[i].net() > outs[best].net()) {
			best = i
		}
	}
	if best < 0 {
		d.Reason = what(len(outs)) + ": " + t.job.Name + " would have no plan after it"
		return
	}
	o := outs[best]
	d.Moves, d.Shrinks = o.moves, o.shrinks
	d.GainSeconds, d.LossSeconds, d.MigrationSeconds = o.gain, o.loss, o.mig
	d.NewJobSecondsAfter, d.TargetSecondsAfter = o.after, o.targetAfter
	d.Accepted = d.GainSeconds > d.LossSeconds+d.MigrationSeconds
	var b strings.Builder
	b.WriteString(what(o.k))
	fmt.Fprintf(&b, " frees %d host(s) for %s and %.4g Mbit/s of %s's WAN traffic", o.freedHosts, t.job.Name, o.freedMbps, d.Target)
	verdict := "not more than"
	if d.Accepted {
		verdict = "more than"
	}
	fmt.Fprintf(&b, ": %s gains %.4g s (%.4g s to %.4g s), %s %s loses (%.4g s) plus the migrations (%.4g s)",
		t.job.Name, d.GainSeconds, d.NewJobSecondsBefore, d.NewJobSecondsAfter, verdict, d.Target, d.LossSeconds, d.MigrationSeconds)
	d.Reason = b.String()
}

// rank sorts the decisions, the one to carry out first, and says why the
// other accepted ones were not chosen.
func (t *tuner) rank(ds []TuningDecision) {
	action := map[string]int{ActionConsolidate: 0, ActionShrink: 1}
	slices.SortStableFunc(ds, func(a, b TuningDecision) int {
		if c := boolFirst(a.Accepted, b.Accepted); c != 0 {
			return c
		}
		if na, nb := a.net(), b.net(); math.Abs(na-nb) > relNetTie*max(math.Abs(na), math.Abs(nb)) {
			return cmp.Compare(nb, na)
		}
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(action[a.Action], action[b.Action]),
			cmp.Compare(t.md.index[a.Cluster], t.md.index[b.Cluster]))
	})
	if len(ds) == 0 || !ds[0].Accepted {
		return
	}
	for i := 1; i < len(ds) && ds[i].Accepted; i++ {
		ds[i].Reason += fmt.Sprintf("; not chosen: to %s %s on %s nets %.4g s, this %.4g s",
			ds[0].Action, ds[0].Target, ds[0].Cluster, ds[0].net(), ds[i].net())
	}
}
