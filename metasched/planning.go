package metasched

import (
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/dispatch"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/selection"
)

// Planning a queued job: the free hosts of its pool (with what is promised
// to jobs being provisioned taken off), the running jobs whose traffic
// loads the links, gramvm's plan on both, and bandwidth tuning when
// something holds the plan back. The dispatcher (dispatch.go) and the dry
// run (dryrun.go) plan through here.

// freeLocked lists, per site, the hosts of pool that can take one more VM
// of the given shape: serving the pool, reachable, with the capacity the
// agents report minus what is promised to jobs being provisioned. gramvm
// picks them among the daemon's hosts.
func (d *Daemon) freeLocked(pool string, vm selection.VM) map[string][]string {
	hosts := make([]gramvm.Host, 0, len(d.hv.order))
	for _, name := range d.hv.order {
		h := d.hv.hosts[name].plannerHost()
		r := d.ledger.On(name)
		h.FreeVCPUs -= r.VCPUs
		h.FreeMemoryMiB -= r.MemoryMiB
		hosts = append(hosts, h)
	}
	return gramvm.FreeHosts(hosts, pool, vm)
}

// timeScale is what a plan's seconds are in the daemon's: the emulated
// executor's time_scale; 1 for the executors that run a real program.
func (d *Daemon) timeScale() float64 {
	if d.cfg.Executor.Name == "emulated" {
		return d.cfg.Executor.TimeScale
	}
	return 1
}

// availLocked lists, per site, the hosts serving pool that could take a VM
// of the shape if they ran nothing, but for those held for other jobs, and
// when each can (docs/research/selection.md, "On the live grid"): now (0)
// when it is among free (it has the room now); else when the placed jobs
// with a VM on it end by their predicted run time (a running job from its
// start, a planned or provisioning one from now, as a job the round
// claimed; one past its predicted end in a dispatch round), in the plan's
// seconds, and in a dispatch round when the VMs on it are being destroyed
// (their job ended); +Inf when a VM of no placed job, not being destroyed,
// takes its room (when it goes is not known).
func (d *Daemon) availLocked(pool string, vm selection.VM, held map[string]string, now time.Time, free map[string][]string, claims []dispatch.Decision) map[string][]gramvm.HostFree {
	isFree := map[string]bool{}
	for _, hosts := range free {
		for _, h := range hosts {
			isFree[h] = true
		}
	}
	ends := map[string]time.Time{} // host → the latest predicted end of the jobs on it
	jobs := map[string]bool{}
	for id, j := range d.jobs.index.placed {
		jobs[id] = true
		rec := j.job.Record
		end := now.Add(duration(rec.Predicted))
		if j.job.State == lifecycle.Running && !rec.Started.IsZero() {
			end = rec.Started.Add(duration(rec.Predicted))
		}
		for _, v := range rec.VMs {
			if end.After(ends[v.Host]) {
				ends[v.Host] = end
			}
		}
	}
	scale := d.timeScale()
	for _, c := range claims {
		startEnd, _ := d.startEndLocked(pool, c.Claim)
		end := now.Add(duration(c.Claim.Plan.Runtime*scale + startEnd))
		for _, h := range hostsOf(c.Claim) {
			if end.After(ends[h.Host]) {
				ends[h.Host] = end
			}
		}
	}
	out := map[string][]gramvm.HostFree{}
	for site, hosts := range d.emptyPoolLocked(pool, vm) {
		for _, name := range hosts {
			if _, ok := held[name]; ok {
				continue
			}
			h := gramvm.HostFree{Host: name}
			if !isFree[name] {
				end, known := ends[name]
				// The VMs of a job that ended are being destroyed, or were
				// and the inventory lists them until its next refresh:
				// their room is free in moments.
				gone := true
				for _, v := range d.hv.hosts[name].inv.VMs {
					gone = gone && (jobs[v.Job] || d.ledger.Gone(v.Name))
				}
				if !known && gone {
					end, known = now, true
				}
				known = known && gone
				if known {
					h.In = max(end.Sub(now), dispatchEvery).Seconds() / scale
				} else {
					h.In = math.Inf(1)
				}
			}
			out[site] = append(out[site], h)
		}
	}
	return out
}

// runningJobsLocked lists the running jobs for gramvm: their plans, the VMs
// where they are now with their sizes as the agents last reported them
// (a resize or a shrink changed them; the job's VM shape until an
// inventory lists them), and the tasks left (from the elapsed share of
// the predicted run time).
func (d *Daemon) runningJobsLocked(now time.Time) []gramvm.RunningJob {
	var out []gramvm.RunningJob
	for _, j := range d.jobs.index.placed {
		rec := j.job.Record
		if j.job.State != lifecycle.Running || rec.Placement == nil {
			continue
		}
		left := float64(j.spec.Tasks)
		if p := rec.Predicted; p > 0 && !rec.Started.IsZero() {
			left *= max(0, 1-now.Sub(rec.Started).Seconds()/p)
		}
		rj := gramvm.RunningJob{ID: j.id(), Job: j.spec, Placement: *rec.Placement, RemainingTasks: left}
		for _, v := range rec.VMs {
			tv := gramvm.TunableVM{Name: v.Name, Site: v.Site, Host: v.Host, VCPUs: j.spec.VM.VCPUs, MemoryMiB: j.spec.VM.MemoryMiB}
			if h := d.hv.hosts[v.Host]; h != nil {
				for _, iv := range h.inv.VMs {
					if iv.Name == v.Name {
						tv.VCPUs, tv.MemoryMiB = iv.VCPUs, iv.MemoryMiB
					}
				}
			}
			rj.VMs = append(rj.VMs, tv)
		}
		out = append(out, rj)
	}
	slices.SortFunc(out, func(a, b gramvm.RunningJob) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// planAvailable plans a job whose placement is a baseline (met, mct,
// olb) on the hosts of its pool and when each is free, with the links as
// the running jobs leave them (the dry run's; a dispatch round plans
// through its roundPlanner). A plan whose Start is not 0 waits for its
// cluster.
func (d *Daemon) planAvailable(ctx context.Context, spec *selection.Job, free map[string][]string, running []gramvm.RunningJob) (gramvm.Placement, error) {
	now := d.now()
	d.lockR()
	avail := d.availLocked(spec.Type, spec.VM, nil, now, free, nil)
	d.unlockR()
	start := time.Now() // the plan's compute time, on the wall clock whatever the daemon's clock
	pl, _, err := d.planner.PlanAvailable(ctx, spec, avail, running, selection.Options{Master: -1})
	d.metrics.plan.Observe(time.Since(start).Seconds())
	return pl, err
}

// heldBack reports whether a plan is limited by a link or by free hosts.
func heldBack(pl *gramvm.Placement) bool {
	for _, c := range pl.Plan.Clusters {
		switch c.Limit {
		case selection.LimitUplink, selection.LimitPath, selection.LimitMasterShare, selection.LimitFree:
			return true
		}
	}
	return len(pl.Plan.Excluded) > 0
}

// planLoaded is d.planner.PlanLoaded, timed (metasched_plan_duration_seconds).
func (d *Daemon) planLoaded(ctx context.Context, job *selection.Job, free map[string][]string, running []gramvm.RunningJob, opt selection.Options) (gramvm.Placement, gramvm.Load, error) {
	start := time.Now() // the plan's compute time, on the wall clock whatever the daemon's clock
	pl, load, err := d.planner.PlanLoaded(ctx, job, free, running, opt)
	d.metrics.plan.Observe(time.Since(start).Seconds())
	return pl, load, err
}
