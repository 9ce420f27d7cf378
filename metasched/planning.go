package metasched

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/gramvm"
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
	hosts := make([]gramvm.Host, 0, len(d.order))
	for _, name := range d.order {
		h := d.hosts[name].plannerHost()
		r := d.promised.on(name)
		h.FreeVCPUs -= r.vcpus
		h.FreeMemoryMiB -= r.mem
		hosts = append(hosts, h)
	}
	return gramvm.FreeHosts(hosts, pool, vm)
}

// runningJobsLocked lists the running jobs for gramvm: their plans, the VMs
// where they are now with their sizes as the agents last reported them
// (a resize or a shrink changed them; the job's VM shape until an
// inventory lists them), and the tasks left (from the elapsed share of
// the predicted run time).
func (d *Daemon) runningJobsLocked(now time.Time) []gramvm.RunningJob {
	var out []gramvm.RunningJob
	for _, j := range d.index.placed {
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
			if h := d.hosts[v.Host]; h != nil {
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

// plan plans a queued job on the free hosts of its pool with the links as
// the running jobs leave them, and evaluates bandwidth tuning for it when
// something holds it back. tuning is true when an accepted tuning decision
// is being carried out for the job: it then waits for it, to be planned
// again on what the tuning frees.
func (d *Daemon) plan(ctx context.Context, j *liveJob, free map[string][]string) (pl gramvm.Placement, tuning bool, err error) {
	now := d.now()
	d.mu.Lock()
	running := d.runningJobsLocked(now)
	tune := len(running) > 0 && now.Sub(j.lastTune) >= tuneEvery && d.tuningActive == 0
	if tune {
		j.lastTune = now
	}
	d.mu.Unlock()
	pl, _, err = d.planLoaded(ctx, j.spec, free, running, selection.Options{Master: -1})
	if err != nil || !tune || !heldBack(&pl) {
		return pl, false, err
	}
	return pl, d.tune(ctx, j, free, running), nil
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
