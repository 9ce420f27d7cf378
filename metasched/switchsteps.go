package metasched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	hp "github.com/metasched/metasched/hypervisorproxy"
	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// The steps of a switch that the coordinator asks the pools and the agents
// for; each answers with an event through post.

// prepareRelease chooses a host of the source pool for the switch (see
// chooseReleaseLocked). Before the answer, the jobs on it go back to the
// queue (their VMs destroyed), and the running elastic jobs that only have
// workers there lose those workers (the VMs destroyed) and go on.
func (d *Daemon) prepareRelease(ctx context.Context, a co.PrepareRelease) {
	if err := d.fault(FaultRelease, a.ID, ""); err != nil {
		if !errors.Is(err, ErrHang) {
			d.post(ctx, co.ReleaseFailed{ID: a.ID, Err: err.Error(), At: d.now()})
		}
		return
	}
	d.lockW()
	if h, ok := d.sw.releasedHost(a.ID); ok { // a repeat: the same answer
		d.unlockW()
		d.post(ctx, co.Released{ID: a.ID, Host: h, At: d.now()})
		return
	}
	// A host that came from the destination lately does not go back (the
	// cluster manager's cooldown); an operator's switch may take it.
	exclude := a.Exclude
	var cooling []string
	sw, ok := d.sw.get(a.ID)
	if ok && !d.sw.byOperator(a.ID) {
		now := d.now()
		cooling = d.opt.Guard.Cooling(d.sw.moves(now, d.opt.Guard.Cooldown), a.Pool, sw.To, now)
		exclude = append(slices.Clone(exclude), cooling...)
	}
	rel, why := d.chooseReleaseLocked(a.Pool, exclude)
	if rel.host == "" && len(cooling) > 0 {
		why += fmt.Sprintf("; %s came from pool %s less than %s ago and do not go back yet", strings.Join(cooling, ", "), sw.To, d.opt.Guard.Cooldown)
	}
	if rel.host == "" {
		d.unlockW()
		d.post(ctx, co.ReleaseFailed{ID: a.ID, Err: why, At: d.now()})
		return
	}
	best := rel.host
	d.sw.setReleased(a.ID, best)
	d.hv.hosts[best].held = a.ID // no new job is placed on it from now on
	calibrating := d.cal.Measuring(best)
	attempts := make([]int, len(rel.requeue))
	for i, j := range rel.requeue {
		attempts[i] = j.job.Record.Attempts
	}
	d.unlockW()
	if calibrating {
		d.abortCalibrationOn(ctx, best, fmt.Sprintf("switch %s takes host %s", a.ID, best))
	}
	reason := fmt.Sprintf("host %s switched from pool %s by %s", best, a.Pool, a.ID)
	var ids []string
	var runs []*attempt
	for i, j := range rel.requeue {
		run, err := d.stopWith(ctx, j, lifecycle.Stop{To: lifecycle.Queued, Preempted: true, Attempt: attempts[i], At: d.now(),
			Reason: reason + ": requeued"})
		if err != nil {
			d.log.Error().Err(err).Str("job", j.id()).Msg("cannot requeue a job of a released host")
			continue
		}
		ids = append(ids, j.id())
		runs = append(runs, run)
	}
	var lost []string
	for _, w := range rel.lose {
		for _, vm := range w.vms {
			// A loss that turns out to be the job's last worker after all
			// (another went meanwhile) requeues it: a switch's stop.
			if err := d.stepJob(ctx, w.job, lifecycle.WorkerLost{VM: vm, Host: best, Reason: reason, Attempt: w.attempt,
				Preempted: true, At: d.now()}); err != nil && !errors.Is(err, lifecycle.ErrNotAllowed) {
				d.log.Error().Err(err).Str("job", w.job.id()).Str("vm", vm).Msg("cannot take a worker VM off a released host")
				continue
			}
			lost = append(lost, vm)
		}
		d.jobs.mu.Lock()
		requeued := w.job.job.State == lifecycle.Queued && w.job.job.Record.Attempts == w.attempt
		run := w.job.runs[w.attempt]
		d.jobs.mu.Unlock()
		if requeued {
			ids = append(ids, w.job.id())
			runs = append(runs, run)
		}
	}
	for _, run := range runs {
		run.wait(ctx)
	}
	if ctx.Err() != nil {
		return
	}
	if len(ids) > 0 {
		// At debug: each requeued job logs its own change to queued.
		d.log.Debug().Str("switch", string(a.ID)).Str("host", best).Strs("requeued", ids).Msg("released a busy host: its jobs went back to the queue")
	}
	if len(lost) > 0 {
		d.log.Info().Str("switch", string(a.ID)).Str("host", best).Strs("lost_workers", lost).
			Msg("released a host of elastic jobs' workers: the jobs go on without them")
	}
	d.post(ctx, co.Released{ID: a.ID, Host: best, Requeued: ids, LostWorkers: lost, At: d.now()})
}

// release is the host a switch takes and what that costs: the jobs it
// requeues, and the worker VMs of running elastic jobs that go on without
// them.
type release struct {
	host    string
	requeue []*liveJob
	lose    []workerLoss
}

// workerLoss is the worker VMs a running elastic job loses (on one host,
// or on hosts lost), at its attempt.
type workerLoss struct {
	job     *liveJob
	attempt int
	vms     []string
}

// elasticLossLocked says what the job loses when the hosts in gone go:
// the names of its VMs there, and whether it goes on without them (a
// running elastic job whose master is elsewhere and that keeps a worker
// elsewhere) or must be requeued.
func elasticLossLocked(j *liveJob, gone func(host string) bool) (vms []string, goesOn bool) {
	master, left := false, 0
	for _, v := range j.job.Record.VMs {
		switch {
		case gone(v.Host):
			vms = append(vms, v.Name)
			master = master || v.Master
		case !v.Master:
			left++
		}
	}
	return vms, j.spec != nil && j.spec.Elastic && j.job.State == lifecycle.Running && !master && left > 0 && len(vms) > 0
}

// chooseReleaseLocked chooses the host of pool that a switch takes, by the
// release rule:
//
//  1. an idle host (no live job placed on it), the first in grid order,
//     one the calibration does not measure on before one it does (whose
//     measurement is then stopped), and one its hypervisor's own users
//     do not use (the jobs of a Slurm site's own users, in its inventory
//     as VMs the agent does not manage, which the switch would wait for)
//     before one they do;
//  2. else a host that costs no work: every job on it is a running
//     elastic job that has only workers there and keeps another worker
//     elsewhere, so that each loses those workers and goes on; the one
//     whose release loses the fewest worker VMs, then the first in grid
//     order;
//  3. else a host none of whose jobs to requeue a switch has stopped
//     before, with the fewest jobs to requeue, then the least work lost
//     (the seconds those jobs have run), then the first in grid order;
//     the elastic jobs that only lose workers there go on;
//  4. a job that a switch stopped once is never stopped by a switch again:
//     when every other host of the pool would requeue such a job, no host
//     is released and the switch fails with why (it is rolled back; the
//     policy asks again later, when jobs have ended). Losing a worker is
//     not a stop: it neither counts nor protects.
//
// It returns the host and what its release costs, or no host and why.
func (d *Daemon) chooseReleaseLocked(pool string, exclude []string) (release, string) {
	now := d.now()
	var best, cheap release
	bestLost, cheapVMs, calHost, usedHost := 0.0, 0, "", ""
	spared := 0
	for _, name := range d.hv.order {
		h := d.hv.hosts[name]
		if !h.serves(pool) || slices.Contains(exclude, name) {
			continue
		}
		r := release{host: name}
		lost, protected, vms := 0.0, false, 0
		for _, j := range d.placedOnLocked(name) {
			if names, goesOn := elasticLossLocked(j, func(h string) bool { return h == name }); goesOn {
				r.lose = append(r.lose, workerLoss{job: j, attempt: j.job.Record.Attempts, vms: names})
				vms += len(names)
				continue
			}
			r.requeue = append(r.requeue, j)
			protected = protected || j.job.Record.Preemptions > 0
			if st := j.job.Record.Started; j.job.State == lifecycle.Running && !st.IsZero() {
				lost += now.Sub(st).Seconds()
			}
		}
		switch {
		case len(r.requeue) == 0 && len(r.lose) == 0 && d.cal.Measuring(name):
			if calHost == "" {
				calHost = name
			}
		case len(r.requeue) == 0 && len(r.lose) == 0 && slices.ContainsFunc(h.inv.VMs, func(v hp.VM) bool { return !v.Managed }):
			if usedHost == "" {
				usedHost = name
			}
		case len(r.requeue) == 0 && len(r.lose) == 0:
			return r, ""
		case len(r.requeue) == 0:
			if cheap.host == "" || vms < cheapVMs {
				cheap, cheapVMs = r, vms
			}
		case protected:
			spared++
		case best.host == "" || len(r.requeue) < len(best.requeue) || (len(r.requeue) == len(best.requeue) && lost < bestLost):
			best, bestLost = r, lost
		}
	}
	switch {
	case calHost != "":
		return release{host: calHost}, ""
	case usedHost != "":
		return release{host: usedHost}, ""
	case cheap.host != "":
		return cheap, ""
	case best.host != "":
		return best, ""
	case spared > 0:
		return release{}, fmt.Sprintf("every host of pool %s that could go runs a job a switch has stopped before (%d hosts), and no job is stopped twice", pool, spared)
	}
	return release{}, fmt.Sprintf("pool %s has no host to spare", pool)
}

// reconfigure asks the host's agent to configure it for pool (revert: back
// to the switch's source pool).
func (d *Daemon) reconfigure(ctx context.Context, id co.SwitchID, host, pool string, revert bool) {
	point := FaultReconfigure
	if revert {
		point = FaultRevert
	}
	fail := func(err error) {
		if revert {
			d.post(ctx, co.RevertFailed{ID: id, Err: err.Error(), At: d.now()})
		} else {
			d.post(ctx, co.ReconfigureFailed{ID: id, Err: err.Error(), At: d.now()})
		}
	}
	if err := d.fault(point, id, host); err != nil {
		if !errors.Is(err, ErrHang) {
			fail(err)
		}
		return
	}
	d.hv.mu.RLock()
	h := d.hv.hosts[host]
	var s *siteAgent
	if h != nil {
		s = d.site(h.rec.Site)
	}
	d.hv.mu.RUnlock()
	sw, _ := d.sw.get(id)
	if s == nil {
		fail(fmt.Errorf("host %s: no agent", host))
		return
	}
	c, cancel := context.WithTimeout(ctx, d.opt.StepTimeout+d.cfg.SwitchDelay)
	defer cancel()
	r, err := s.agent.ReconfigureHost(c, host, hp.Reconfigure{Pool: pool, Released: sw.Requeued, Image: d.imageOf(pool)})
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: the restart re-issues the step
		}
		fail(err)
		return
	}
	// The VMs of the released jobs the agent destroyed with the old pool
	// are the daemon's, destroyed at its asking.
	d.vmsDestroyed.Add(int64(len(r.Destroyed)))
	d.log.Debug().Str("switch", string(id)).Str("host", host).Str("pool", pool).Bool("revert", revert).
		Float64("seconds", r.Seconds).Int("vms_destroyed", len(r.Destroyed)).Msg("host reconfigured")
	if revert {
		d.post(ctx, co.Reverted{ID: id, At: d.now()})
	} else {
		d.post(ctx, co.Reconfigured{ID: id, At: d.now()})
	}
}

// commitSide carries out one side of the commit: the source pool lets the host
// go (nothing to record: it is held), the destination pool takes it (its
// record names the new pool).
func (d *Daemon) commitSide(ctx context.Context, id co.SwitchID, side co.Side, host, pool string, p FaultPoint) {
	if err := d.fault(p, id, host); err != nil {
		if !errors.Is(err, ErrHang) {
			d.post(ctx, co.CommitFailed{ID: id, Side: side, Err: err.Error(), At: d.now()})
		}
		return
	}
	d.post(ctx, co.Committed{ID: id, Side: side, At: d.now()})
}
