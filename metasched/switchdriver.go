package metasched

import (
	"context"
	"errors"
	"fmt"
	"time"

	co "github.com/metasched/metasched/metasched/coordinator"
)

// The switch driver: it feeds the coordinator (a pure state machine) the
// cluster manager's decisions, the operators' clears, the answers of the
// pools and agents and its own timers, and carries out the actions it
// returns. Everything the coordinator decides goes through one goroutine
// (switchLoop); the requests that take time (a release that waits for its
// jobs to leave, a reconfiguration through an agent) run in their own
// goroutines and answer through d.events.

// post delivers an event to the switch loop.
func (d *Daemon) post(ctx context.Context, ev co.Event) {
	select {
	case d.events <- ev:
	case <-ctx.Done():
	}
}

// switchLoop steps the coordinator, one event at a time.
func (d *Daemon) switchLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			d.sw.stopTimers()
			return
		case ev := <-d.events:
			d.stepSwitch(ctx, ev)
		}
	}
}

// stepSwitch feeds one event to the coordinator and carries out its actions.
func (d *Daemon) stepSwitch(ctx context.Context, ev co.Event) {
	d.hv.mu.Lock()
	acts, stale, err := d.stepSwitchLocked(ev)
	d.hv.mu.Unlock()
	if stale {
		return // a timer that fired for a phase the switch has left
	}
	if err != nil {
		lvl := d.log.Warn()
		if errors.Is(err, co.ErrWrongPhase) || errors.Is(err, co.ErrUnknownSwitch) {
			lvl = d.log.Debug() // an answer after its step was given up on
		}
		lvl.Err(err).Str("event", fmt.Sprintf("%T", ev)).Msg("switch event refused")
		return
	}
	d.applySwitch(ctx, acts)
}

// stepSwitchLocked steps the coordinator and makes the host view follow each
// switch's new state at once, so that the API never shows a host as
// switching under a final switch, nor serving while it is held; the hosts'
// view must be held to write (not the jobs' lock: a step changes no job).
// What must last (a host's record) is written after the journal, by the
// actions. A timeout for a phase its switch has left is stale: nothing is
// stepped.
func (d *Daemon) stepSwitchLocked(ev co.Event) (_ []co.Action, stale bool, _ error) {
	acts, stale, err := d.sw.step(ev)
	if stale {
		return nil, true, nil
	}
	d.hv.steps++
	for _, a := range acts {
		p, ok := a.(co.Persist)
		if !ok {
			continue
		}
		sw := p.Record.Switch
		h := d.hv.hosts[sw.Host]
		switch {
		case h == nil:
		case !sw.Phase.Final():
			h.held = sw.ID
		case sw.Phase == co.PhaseDone:
			h.held, h.rec.Pool = "", sw.To
		case sw.Phase == co.PhaseStranded && sw.ClearedTo == "":
			h.held = ""
			h.rec.Stranded, h.rec.Reason, h.rec.Switch = true, sw.Reason, string(sw.ID)
		default: // cancelled or rolled back: the host never left its pool's record
			h.held = ""
		}
	}
	return acts, false, err
}

// applySwitch carries out the coordinator's actions in order: the switch's
// record first, then the requests and notifications; a switch that is over
// is then forgotten (its record stays in the store).
func (d *Daemon) applySwitch(ctx context.Context, acts []co.Action) {
	var over []co.SwitchID
	defer func() {
		for _, id := range over {
			d.forget(id)
		}
	}()
	for _, a := range acts {
		switch a := a.(type) {
		case co.Persist:
			sw := a.Record.Switch
			r, err := switchRecord(sw)
			if err == nil {
				err = d.st.PutSwitch(context.WithoutCancel(ctx), r)
			}
			if err != nil {
				// The record must run ahead of the world: stop here; the
				// step's timer cancels the switch.
				d.log.Error().Err(err).Str("switch", string(sw.ID)).Msg("cannot record a switch: its next step is not taken")
				return
			}
			d.recorded(ctx, sw)
			if !sw.Open() {
				over = append(over, sw.ID)
			}
		case co.PrepareRelease:
			d.goJob(func() { d.prepareRelease(ctx, a) })
		case co.Reconfigure:
			d.goJob(func() { d.reconfigure(ctx, a.ID, a.Host, a.Pool, false) })
		case co.PrepareAdd:
			d.goJob(func() {
				if err := d.fault(FaultAdd, a.ID, a.Host); err != nil {
					if !errors.Is(err, ErrHang) {
						d.post(ctx, co.AddFailed{ID: a.ID, Err: err.Error(), At: d.now()})
					}
					return
				}
				if _, _, ok := d.jobType(a.Pool); !ok {
					d.post(ctx, co.AddFailed{ID: a.ID, Err: "no pool " + a.Pool, At: d.now()})
					return
				}
				d.post(ctx, co.Added{ID: a.ID, At: d.now()})
			})
		case co.CommitRelease:
			d.goJob(func() { d.commitSide(ctx, a.ID, co.SideRelease, a.Host, "", FaultCommitRelease) })
		case co.CommitAdd:
			d.goJob(func() { d.commitSide(ctx, a.ID, co.SideAdd, a.Host, a.Pool, FaultCommitAdd) })
		case co.Revert:
			d.goJob(func() { d.reconfigure(ctx, a.ID, a.Host, a.Pool, true) })
		case co.AbortRelease:
			d.hv.mu.Lock()
			chosen := d.sw.takeReleased(a.ID)
			if a.Host == "" {
				// Ended before the release was on record: a host this
				// daemon chose for it is held under its ID still.
				if h := d.hv.hosts[chosen]; h != nil && h.held == a.ID {
					h.held = ""
				}
			}
			d.hv.steps++
			if h := d.hv.hosts[a.Host]; h != nil {
				h.rec.Pool = a.Pool
				if h.held == a.ID {
					h.held = ""
				}
				d.persistHost(ctx, h)
			}
			d.hv.mu.Unlock()
			d.kick()
		case co.AbortAdd:
			// The destination pool forgets the host: its pool is set by the
			// AbortRelease that ends the switch.
		case co.MarkStranded:
			d.hv.mu.Lock()
			if h := d.hv.hosts[a.Host]; h != nil {
				h.rec.Stranded, h.rec.Reason, h.rec.Switch = true, a.Reason, string(a.ID)
				d.persistHost(ctx, h)
			}
			d.hv.mu.Unlock()
			d.log.Error().Str("switch", string(a.ID)).Str("host", a.Host).Str("reason", a.Reason).
				Msg("host stranded: it can join neither pool and is not used until an operator clears it")
		case co.Rejoin:
			d.hv.mu.Lock()
			if h := d.hv.hosts[a.Host]; h != nil {
				h.rec = hostRecord{Site: h.rec.Site, Pool: a.Pool}
				d.persistHost(ctx, h)
			}
			d.hv.mu.Unlock()
			d.log.Info().Str("host", a.Host).Str("pool", a.Pool).Msg("stranded host cleared")
			d.kick()
		}
	}
}

// recorded updates the host view and the timers after a switch's new state
// is journaled.
func (d *Daemon) recorded(ctx context.Context, sw co.Switch) {
	timeout := d.opt.StepTimeout
	if sw.Phase == co.PhaseReconfiguring || sw.Phase == co.PhaseCancelling || sw.Phase == co.PhaseRollingBack {
		timeout += d.cfg.SwitchDelay
	}
	if sw.Phase == co.PhaseReleasing {
		timeout += time.Minute // the host's jobs leave first
	}
	id := sw.ID
	d.sw.arm(sw, d.clock, timeout, func() { d.post(ctx, co.Timeout{ID: id, At: d.now()}) })
	if sw.Phase.Final() {
		why := d.sw.end(sw)
		if sw.Phase == co.PhaseDone {
			d.hv.mu.RLock()
			if h := d.hv.hosts[sw.Host]; h != nil {
				d.persistHost(ctx, h)
			}
			d.hv.mu.RUnlock()
			d.log.Info().Str("switch", string(sw.ID)).Str("host", sw.Host).Str("from", sw.From).Str("to", sw.To).
				Float64("seconds", roundMs(sw.Updated.Sub(sw.Started).Seconds())).Str("why", why).Msg("switch done")
		} else if sw.Phase != co.PhaseStranded {
			ev, msg := d.log.Warn(), switchEndMsg(sw)
			if sw.Phase == co.PhaseCancelled && sw.FailedIn == co.PhaseReleasing && sw.Host == "" {
				ev = d.log.Info() // the release rule found no host: nothing is wrong
			}
			ev.Str("switch", string(sw.ID)).Str("host", sw.Host).Str("phase", string(sw.Phase)).
				Str("failed_in", string(sw.FailedIn)).Str("reason", sw.Reason).Str("why", why).Msg(msg)
		}
		d.kick()
	}
}

// switchEndMsg says, for a person, what a switch that did not end done
// did and whether anything is wrong; the fields say the rest.
func switchEndMsg(sw co.Switch) string {
	switch {
	case sw.Phase == co.PhaseCancelled && sw.FailedIn == co.PhaseReleasing && sw.Host == "":
		return "switch not carried out, nothing is wrong: the source pool had no host it could give now (reason); every host stays in its pool and the policy decides again"
	case sw.Phase == co.PhaseCancelled:
		return "switch cancelled: a step failed or timed out (failed_in, reason); the host stays in its pool and serves it"
	case sw.Phase == co.PhaseRolledBack:
		return "switch rolled back: a step failed (failed_in, reason) and the host was put back in its pool, which it serves again"
	}
	return "switch " + string(sw.Phase)
}

// fault asks the test hook.
func (d *Daemon) fault(p FaultPoint, id co.SwitchID, host string) error {
	if d.opt.Fault == nil {
		return nil
	}
	if err := d.opt.Fault(p, string(id), host); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}
