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
// chooseReleaseLocked); the jobs on it go back to the queue (their VMs
// destroyed) before the answer.
func (d *Daemon) prepareRelease(ctx context.Context, a co.PrepareRelease) {
	if err := d.fault(FaultRelease, a.ID, ""); err != nil {
		if !errors.Is(err, ErrHang) {
			d.post(ctx, co.ReleaseFailed{ID: a.ID, Err: err.Error(), At: d.now()})
		}
		return
	}
	d.mu.Lock()
	if h, ok := d.released[a.ID]; ok { // a repeat: the same answer
		d.mu.Unlock()
		d.post(ctx, co.Released{ID: a.ID, Host: h, At: d.now()})
		return
	}
	best, victims, why := d.chooseReleaseLocked(a.Pool, a.Exclude)
	if best == "" {
		d.mu.Unlock()
		d.post(ctx, co.ReleaseFailed{ID: a.ID, Err: why, At: d.now()})
		return
	}
	d.released[a.ID] = best
	d.hosts[best].held = a.ID // no new job is placed on it from now on
	calibrating := d.calibratingLocked(best)
	slices.SortFunc(victims, func(x, y *liveJob) int { return strings.Compare(x.id(), y.id()) })
	attempts := make([]int, len(victims))
	for i, j := range victims {
		attempts[i] = j.job.Record.Attempts
	}
	d.mu.Unlock()
	if calibrating {
		d.abortCalibrationOn(ctx, best, fmt.Sprintf("switch %s takes host %s", a.ID, best))
	}
	var ids []string
	var runs []*attempt
	for i, j := range victims {
		run, err := d.stopWith(ctx, j, lifecycle.Stop{To: lifecycle.Queued, Preempted: true, Attempt: attempts[i], At: d.now(),
			Reason: fmt.Sprintf("host %s switched from pool %s by %s: requeued", best, a.Pool, a.ID)})
		if err != nil {
			d.log.Error().Err(err).Str("job", j.id()).Msg("cannot requeue a job of a released host")
			continue
		}
		ids = append(ids, j.id())
		runs = append(runs, run)
	}
	for _, run := range runs {
		run.wait(ctx)
	}
	if ctx.Err() != nil {
		return
	}
	if len(ids) > 0 {
		d.log.Info().Str("switch", string(a.ID)).Str("host", best).Strs("requeued", ids).Msg("released a busy host: its jobs went back to the queue")
	}
	d.post(ctx, co.Released{ID: a.ID, Host: best, Requeued: ids, At: d.now()})
}

// chooseReleaseLocked chooses the host of pool that a switch takes, by the
// release rule:
//
//  1. an idle host (no live job placed on it), the first in grid order,
//     one the calibration does not measure on before one it does (whose
//     measurement is then stopped);
//  2. else a host none of whose jobs a switch has stopped before, with the
//     fewest jobs, then the least work lost (the seconds its jobs have run),
//     then the first in grid order;
//  3. a job that a switch stopped once is never stopped by a switch again:
//     when every host of the pool runs such a job, no host is released and
//     the switch fails with why (it is rolled back; the policy asks again
//     later, when jobs have ended).
//
// It returns the host and the jobs on it, or "" and why none.
func (d *Daemon) chooseReleaseLocked(pool string, exclude []string) (string, []*liveJob, string) {
	now := d.now()
	best, bestJobs, bestLost, calHost := "", 0, 0.0, ""
	var victims []*liveJob
	spared := 0
	placed := d.placedLocked()
	for _, name := range d.order {
		h := d.hosts[name]
		if !h.serves(pool) || slices.Contains(exclude, name) {
			continue
		}
		var on []*liveJob
		lost, protected := 0.0, false
		for _, j := range placed {
			if !j.onHost(name) {
				continue
			}
			on = append(on, j)
			protected = protected || j.job.Record.Preemptions > 0
			if st := j.job.Record.Started; j.job.State == lifecycle.Running && !st.IsZero() {
				lost += now.Sub(st).Seconds()
			}
		}
		if len(on) == 0 {
			if d.calibratingLocked(name) {
				if calHost == "" {
					calHost = name
				}
				continue
			}
			return name, nil, ""
		}
		if protected {
			spared++
			continue
		}
		if best == "" || len(on) < bestJobs || (len(on) == bestJobs && lost < bestLost) {
			best, bestJobs, bestLost, victims = name, len(on), lost, on
		}
	}
	switch {
	case calHost != "":
		return calHost, nil, ""
	case best != "":
		return best, victims, ""
	case spared > 0:
		return "", nil, fmt.Sprintf("every host of pool %s that could go runs a job a switch has stopped before (%d hosts): it is not stopped twice", pool, spared)
	}
	return "", nil, fmt.Sprintf("pool %s has no host to spare", pool)
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
	d.mu.Lock()
	h := d.hosts[host]
	var s *siteAgent
	if h != nil {
		s = d.site(h.rec.Site)
	}
	sw, _ := d.coord.Switch(id)
	d.mu.Unlock()
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
	d.log.Info().Str("switch", string(id)).Str("host", host).Str("pool", pool).Bool("revert", revert).
		Float64("seconds", r.Seconds).Msg("host reconfigured")
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
