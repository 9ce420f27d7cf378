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

// prepareRelease chooses a host of the source pool for the switch: an idle
// one if there is one, else the one with the fewest jobs, whose jobs go
// back to the queue (their VMs destroyed) before the answer.
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
	best, bestJobs := "", -1
	var victims []*liveJob
	for _, name := range d.order {
		h := d.hosts[name]
		if !h.serves(a.Pool) || slices.Contains(a.Exclude, name) {
			continue
		}
		var on []*liveJob
		for _, j := range d.jobs {
			if j.onHost(name) {
				on = append(on, j)
			}
		}
		if bestJobs < 0 || len(on) < bestJobs {
			best, bestJobs, victims = name, len(on), on
		}
		if len(on) == 0 {
			break
		}
	}
	if best == "" {
		d.mu.Unlock()
		d.post(ctx, co.ReleaseFailed{ID: a.ID, Err: fmt.Sprintf("pool %s has no host to spare", a.Pool), At: d.now()})
		return
	}
	d.released[a.ID] = best
	d.hosts[best].held = a.ID // no new job is placed on it from now on
	slices.SortFunc(victims, func(x, y *liveJob) int { return strings.Compare(x.id(), y.id()) })
	attempts := make([]int, len(victims))
	for i, j := range victims {
		attempts[i] = j.job.Record.Attempts
	}
	d.mu.Unlock()
	var ids []string
	var runs []*attempt
	for i, j := range victims {
		run, err := d.stop(ctx, j, lifecycle.Queued, fmt.Sprintf("host %s switched from pool %s by %s: requeued", best, a.Pool, a.ID), attempts[i])
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
	r, err := s.agent.ReconfigureHost(c, host, hp.Reconfigure{Pool: pool, Released: sw.Requeued})
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
