// Package dispatch is the daemon's dispatch decision as a pure function: given
// one pool's queue (oldest first), the free capacity of the hosts serving it,
// and the time, a round decides which queued jobs are planned now and on which
// hosts, and why the others wait, with backfill and holds against starvation
// (docs/internals/daemon.md, "Backfill without starvation" and "The dispatch
// round"). It does no I/O and reads no clock: the plans come from the Planner
// its caller gives (the daemon's is GramVM on the live grid), and the caller
// carries out the decisions.
package dispatch

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/selection"
)

// Host is a host serving the pool, ready for VMs: its size and what it
// has free after what is promised to jobs being provisioned.
type Host struct {
	Name          string
	Site          string
	CPUs          int
	MemoryMiB     int
	FreeVCPUs     int
	FreeMemoryMiB int
}

// Job is a queued job of the pool.
type Job struct {
	ID        string
	Spec      *selection.Job
	Submitted time.Time
	// Tuning is the bandwidth tuning being carried out for the job, which
	// it waits for; nil: none.
	Tuning *Tuning
}

// Tuning is a tuning a job waits for: the hosts it frees, held for the
// job meanwhile, and why the job waits.
type Tuning struct {
	Hosts  []string
	Reason string
}

// Input is what a round decides on.
type Input struct {
	Pool string
	// Hosts are the hosts serving the pool and ready, in grid order.
	Hosts []Host
	// Queue yields the pool's queued jobs, oldest first. The round reads
	// it only as far as it decides: it stops where the pool has no room
	// left or at MaxClaims, so a round costs the jobs it considers, not
	// the backlog.
	Queue     iter.Seq[Job]
	Now       time.Time
	HoldAfter time.Duration
	// TimeScale is what a plan's second is in the daemon's (the emulated
	// executor's time_scale); 0: 1.
	TimeScale float64
	// MaxClaims ends the round once it has claimed that many jobs (0: no
	// end), so that the claims are carried out before the rest of a long
	// queue is planned.
	MaxClaims int
	// Claimed, when set, hears each claim as soon as the round makes it
	// (the decision is in the Result too), so that the caller can carry
	// it out while the round plans the next jobs.
	Claimed func(Decision)
}

// Outcome is a plan the Planner made.
type Outcome struct {
	Placement gramvm.Placement
	// Err says the job could not be planned (not that no plan is
	// feasible: that is an infeasible placement).
	Err error
	// Tuning says a bandwidth tuning is now carried out for the job
	// (the Planner evaluated one, as the plan was held back): the job
	// waits for it.
	Tuning *Tuning
}

// Planner plans jobs for a round.
type Planner interface {
	// Plan plans a job (placement gramvm) on the free hosts given, per
	// site in order, with the links as the running jobs load them.
	Plan(j *Job, free map[string][]string) Outcome
	// PlanAvailable plans a job whose placement is a baseline (met,
	// mct, olb) on the hosts of the pool but those held, and when each
	// is free: those of free now, the hosts of the round's claims when
	// their jobs end, the others when their jobs end. A feasible plan
	// whose Start is not 0 waits for its cluster.
	PlanAvailable(j *Job, free map[string][]string, held map[string]string, claims []Decision) Outcome
	// PlanEmpty plans a job on the hosts given (per site) as if nothing
	// ran on them: the hosts an old job holds.
	PlanEmpty(j *Job, hosts map[string][]string) (gramvm.Placement, error)
}

// Decision is the round's decision for one queued job: planned on a
// placement (Claim), or waiting (Why), with the hosts it holds.
type Decision struct {
	Job   string
	Claim *gramvm.Placement
	Why   string
	// Holds are the hosts held for the job in the round (younger jobs
	// are not planned on them).
	Holds []string
}

// Result is a round's decisions, in queue order. Jobs after the pool ran
// out of room (NoRoom says so), or after the round's last claim (Capped),
// get none: they wait as they did.
type Result struct {
	Decisions []Decision
	// NoRoom is why the round stopped before the end of the queue: no
	// host of the pool had a free vCPU and memory left; "" when it did
	// not stop for that.
	NoRoom string
	// Capped says the round stopped at Input.MaxClaims claims: another
	// round should follow once they are carried out.
	Capped bool
}

// round is a round's state: the hosts' capacity as its claims leave it,
// and what it learnt of the shapes it planned.
type round struct {
	in   Input
	p    Planner
	host map[string]*Host
	// room counts the hosts with a free vCPU and memory left.
	room int
	// frees are the free hosts per VM shape, kept up to date as claims
	// take capacity.
	frees map[selection.VM]map[string][]string
	// unheld are frees without the held hosts, per VM shape, made when
	// as many hosts were held as they say.
	unheld map[selection.VM]unheld
	// held maps each held host to the job holding it.
	held map[string]string
	// misfits are the shapes that did not fit, and why: fewer free
	// hosts do not make them fit.
	misfits map[string]string
	// waits are the baseline shapes that wait for their cluster, with
	// its plan, until a claim.
	waits map[string]*gramvm.Placement
	// emptied remembers, per shape, the held hosts' count when its plan
	// on the empty pool added no hold: with no more held, it adds none.
	emptied map[string]int
	claims  []Decision
}

type unheld struct {
	held int
	free map[string][]string
}

// Round plans the pool's queue, oldest first, on the pool's free hosts.
// A job that fits is claimed; one that does not waits, and younger jobs
// that fit go first (backfill). A job that has waited HoldAfter and still
// does not fit holds the hosts of its best plan on the pool as if it were
// empty (or, for a baseline waiting for its cluster, the hosts it waits
// for): younger jobs are not planned on them (no starvation). A job whose
// tuning is being carried out holds the hosts the tuning frees. A shape
// that did not fit is not planned again in the round; jobs after the pool
// has no room left are not considered.
func Round(ctx context.Context, in Input, p Planner) Result {
	r := &round{in: in, p: p, host: make(map[string]*Host, len(in.Hosts)), frees: map[selection.VM]map[string][]string{}, unheld: map[selection.VM]unheld{},
		held: map[string]string{}, misfits: map[string]string{}, waits: map[string]*gramvm.Placement{}, emptied: map[string]int{}}
	for i := range in.Hosts {
		h := in.Hosts[i]
		r.host[h.Name] = &h
		if hasRoom(&h) {
			r.room++
		}
	}
	var out Result
	if in.Queue == nil {
		return out
	}
	for j := range in.Queue {
		if ctx.Err() != nil {
			break
		}
		if r.room == 0 {
			out.NoRoom = "no free host in pool " + in.Pool
			break
		}
		if in.MaxClaims > 0 && len(r.claims) >= in.MaxClaims {
			out.Capped = true
			break
		}
		d := r.decide(&j)
		out.Decisions = append(out.Decisions, d)
		if d.Claim != nil && in.Claimed != nil {
			in.Claimed(d)
		}
	}
	return out
}

// hasRoom reports whether a host has a free vCPU and some memory.
func hasRoom(h *Host) bool { return h.FreeVCPUs >= 1 && h.FreeMemoryMiB >= 1 }

// freeUnheld is free without the held hosts.
func (r *round) freeUnheld(vm selection.VM) map[string][]string {
	if u, ok := r.unheld[vm]; ok && u.held == len(r.held) {
		return u.free
	}
	f := withoutHosts(r.free(vm), r.held)
	r.unheld[vm] = unheld{held: len(r.held), free: f}
	return f
}

// decide is the decision for one job.
func (r *round) decide(j *Job) Decision {
	d := Decision{Job: j.ID}
	if j.Tuning != nil {
		d.Holds = r.hold(j.ID, j.Tuning.Hosts)
		d.Why = j.Tuning.Reason
		return d
	}
	shape := j.Spec.Shape()
	baseline := j.Spec.PlacementOrDefault().Baseline()
	free := r.freeUnheld(j.Spec.VM)
	why, misfit := r.misfits[shape]
	if !misfit && len(free) == 0 && !baseline {
		why, misfit = "no free host in pool "+r.in.Pool+" for its VMs", true
		r.misfits[shape] = why
	}
	if !misfit {
		var o Outcome
		if baseline {
			o = r.p.PlanAvailable(j, r.free(j.Spec.VM), r.held, r.claims)
		} else {
			o = r.p.Plan(j, free)
		}
		pl := o.Placement
		switch {
		case o.Err != nil:
			why, misfit = "cannot plan it: "+o.Err.Error(), true
		case o.Tuning != nil:
			d.Holds = r.hold(j.ID, o.Tuning.Hosts)
			d.Why = o.Tuning.Reason
			return d
		case !pl.Plan.Feasible:
			why, misfit = pl.Plan.Reason, true
			r.misfits[shape] = why
		case pl.Plan.Start > 0: // its baseline waits for the cluster it chose
			why, misfit = WaitReason(&pl, r.in.TimeScale), true
			r.misfits[shape], r.waits[shape] = why, &pl
		default:
			d.Claim = &pl
			r.claim(j.Spec.VM, &pl)
			r.claims = append(r.claims, d)
			return d
		}
	}
	if r.in.Now.Sub(j.Submitted) >= r.in.HoldAfter {
		if hosts := r.holdFor(j, shape); len(hosts) > 0 {
			d.Holds = hosts
			why = fmt.Sprintf("%s; it has waited more than hold_after (%s) and holds hosts %s, which younger jobs do not take",
				why, r.in.HoldAfter, strings.Join(hosts, ", "))
		}
	}
	d.Why = why
	return d
}

// free lists, per site, the hosts that can take one more VM of the shape.
func (r *round) free(vm selection.VM) map[string][]string {
	if f, ok := r.frees[vm]; ok {
		return f
	}
	f := map[string][]string{}
	for _, h := range r.in.Hosts {
		if c := r.host[h.Name]; c.FreeVCPUs >= vm.VCPUs && c.FreeMemoryMiB >= vm.MemoryMiB {
			f[h.Site] = append(f[h.Site], h.Name)
		}
	}
	r.frees[vm] = f
	return f
}

// claim takes a placement's capacity: each of its hosts loses one VM of
// the shape per VM it gets, and leaves the free lists it no longer fits.
func (r *round) claim(vm selection.VM, pl *gramvm.Placement) {
	clear(r.waits) // the hosts' free times changed
	clear(r.unheld)
	for _, ref := range append([]gramvm.HostRef{pl.Master}, pl.Workers...) {
		h := r.host[ref.Host]
		if h == nil {
			continue // not the pool's: the Planner's mistake, which the caller's check refuses
		}
		if hasRoom(h) {
			r.room--
		}
		h.FreeVCPUs -= vm.VCPUs
		h.FreeMemoryMiB -= vm.MemoryMiB
		if hasRoom(h) {
			r.room++
		}
		for shape, f := range r.frees {
			if h.FreeVCPUs < shape.VCPUs || h.FreeMemoryMiB < shape.MemoryMiB {
				f[h.Site] = slices.DeleteFunc(f[h.Site], func(n string) bool { return n == h.Name })
				if len(f[h.Site]) == 0 {
					delete(f, h.Site)
				}
			}
		}
	}
}

// hold marks hosts as held for the job (those held by an older job stay
// its) and returns those it took.
func (r *round) hold(job string, hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if _, ok := r.held[h]; !ok {
			r.held[h] = job
			out = append(out, h)
		}
	}
	return out
}

// holdFor holds for an old job the hosts of its best plan on the empty
// pool (less what older jobs hold), or those its baseline waits for.
func (r *round) holdFor(j *Job, shape string) []string {
	pl := r.waits[shape]
	if pl == nil {
		if n, ok := r.emptied[shape]; ok && n == len(r.held) {
			return nil // as the last job of its shape: it would hold nothing more
		}
		empty := withoutHosts(r.empty(j.Spec.VM), r.held)
		if len(empty) == 0 {
			return nil
		}
		p, err := r.p.PlanEmpty(j, empty)
		if err != nil || !p.Plan.Feasible {
			r.emptied[shape] = len(r.held)
			return nil
		}
		pl = &p
	}
	var hosts []string
	for _, h := range append([]gramvm.HostRef{pl.Master}, pl.Workers...) {
		if !slices.Contains(hosts, h.Host) {
			hosts = append(hosts, h.Host)
		}
	}
	out := r.hold(j.ID, hosts)
	if len(out) == 0 {
		r.emptied[shape] = len(r.held)
	}
	return out
}

// empty lists, per site, the hosts that could take a VM of the shape if
// they ran nothing.
func (r *round) empty(vm selection.VM) map[string][]string {
	out := map[string][]string{}
	for _, h := range r.in.Hosts {
		if h.CPUs >= vm.VCPUs && h.MemoryMiB >= vm.MemoryMiB {
			out[h.Site] = append(out[h.Site], h.Name)
		}
	}
	return out
}

// withoutHosts is free without the held hosts.
func withoutHosts(free map[string][]string, held map[string]string) map[string][]string {
	if len(held) == 0 {
		return free
	}
	out := map[string][]string{}
	for site, hosts := range free {
		for _, h := range hosts {
			if _, ok := held[h]; !ok {
				out[site] = append(out[site], h)
			}
		}
	}
	return out
}

// WaitReason says why a job whose baseline placement chose a cluster that
// is not ready waits, in the daemon's seconds: the plan's times scale
// (0: 1).
func WaitReason(pl *gramvm.Placement, scale float64) string {
	if scale == 0 {
		scale = 1
	}
	p := &pl.Plan
	in, run := p.Start*scale, p.Runtime*scale
	switch p.Algorithm {
	case selection.MET:
		return fmt.Sprintf("placement met: it runs fastest on cluster %s alone (predicted %.3gs) and waits for it: the %d hosts it needs there are free in about %.3gs, as the jobs on them end (predicted)",
			p.Master, run, p.Machines, in)
	case selection.MCT:
		return fmt.Sprintf("placement mct: it ends first on cluster %s alone and waits for it: the %d hosts it needs there are free in about %.3gs, as the jobs on them end (predicted), then it runs %.3gs",
			p.Master, p.Machines, in, run)
	}
	return fmt.Sprintf("placement %s: cluster %s is the first with the %d hosts it needs, free in about %.3gs as the jobs on them end (predicted), and it waits for it",
		p.Algorithm, p.Master, p.Machines, in)
}
