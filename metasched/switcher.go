package metasched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/lifecycle"
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
			d.mu.Lock()
			for id, t := range d.timers {
				t.Stop()
				delete(d.timers, id)
			}
			d.mu.Unlock()
			return
		case ev := <-d.events:
			d.step(ctx, ev)
		}
	}
}

// step feeds one event to the coordinator and carries out its actions.
func (d *Daemon) step(ctx context.Context, ev co.Event) {
	d.mu.Lock()
	if t, ok := ev.(co.Timeout); ok {
		// A timer that fired for a phase the switch has left is stale.
		sw, found := d.coord.Switch(t.ID)
		if !found || d.timerPhase[t.ID] != sw.Phase {
			d.mu.Unlock()
			return
		}
	}
	acts, err := d.stepLocked(ev)
	d.mu.Unlock()
	if err != nil {
		lvl := d.log.Warn()
		if errors.Is(err, co.ErrWrongPhase) {
			lvl = d.log.Debug() // an answer after its step was given up on
		}
		lvl.Err(err).Str("event", fmt.Sprintf("%T", ev)).Msg("switch event refused")
		return
	}
	d.apply(ctx, acts)
}

// stepLocked steps the coordinator and makes the host view follow each
// switch's new state at once, so that the API never shows a host as
// switching under a final switch, nor serving while it is held. What must
// last (a host's record) is written after the journal, by the actions.
func (d *Daemon) stepLocked(ev co.Event) ([]co.Action, error) {
	acts, err := d.coord.Step(ev)
	for _, a := range acts {
		p, ok := a.(co.Persist)
		if !ok {
			continue
		}
		sw := p.Record.Switch
		h := d.hosts[sw.Host]
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
	return acts, err
}

// apply carries out the coordinator's actions in order: journal records
// first, then the requests and notifications.
func (d *Daemon) apply(ctx context.Context, acts []co.Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case co.Persist:
			if _, err := d.st.AppendJournal(context.WithoutCancel(ctx), mustJSON(a.Record)); err != nil {
				// The journal must run ahead of the world: stop here; the
				// step's timer cancels the switch.
				d.log.Error().Err(err).Str("switch", string(a.Record.Switch.ID)).Msg("cannot journal a switch: its next step is not taken")
				return
			}
			d.recorded(ctx, a.Record.Switch)
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
			d.goJob(func() { d.commit(ctx, a.ID, co.SideRelease, a.Host, "", FaultCommitRelease) })
		case co.CommitAdd:
			d.goJob(func() { d.commit(ctx, a.ID, co.SideAdd, a.Host, a.Pool, FaultCommitAdd) })
		case co.Revert:
			d.goJob(func() { d.reconfigure(ctx, a.ID, a.Host, a.Pool, true) })
		case co.AbortRelease:
			d.mu.Lock()
			if a.Host == "" {
				// Ended before the release was on record: a host this
				// daemon chose for it is held under its ID still.
				if h := d.hosts[d.released[a.ID]]; h != nil && h.held == a.ID {
					h.held = ""
				}
			}
			delete(d.released, a.ID)
			if h := d.hosts[a.Host]; h != nil {
				h.rec.Pool = a.Pool
				if h.held == a.ID {
					h.held = ""
				}
				d.persistHost(ctx, h)
			}
			d.mu.Unlock()
			d.kick()
		case co.AbortAdd:
			// The destination pool forgets the host: its pool is set by the
			// AbortRelease that ends the switch.
		case co.MarkStranded:
			d.mu.Lock()
			if h := d.hosts[a.Host]; h != nil {
				h.rec.Stranded, h.rec.Reason, h.rec.Switch = true, a.Reason, string(a.ID)
				d.persistHost(ctx, h)
			}
			d.mu.Unlock()
			d.log.Error().Str("switch", string(a.ID)).Str("host", a.Host).Str("reason", a.Reason).
				Msg("host stranded: it can join neither pool and is not used until an operator clears it")
		case co.Rejoin:
			d.mu.Lock()
			if h := d.hosts[a.Host]; h != nil {
				h.rec = hostRecord{Site: h.rec.Site, Pool: a.Pool}
				d.persistHost(ctx, h)
			}
			d.mu.Unlock()
			d.log.Info().Str("host", a.Host).Str("pool", a.Pool).Msg("stranded host cleared")
			d.kick()
		}
	}
}

// recorded updates the host view and the timers after a switch's new state
// is journaled.
func (d *Daemon) recorded(ctx context.Context, sw co.Switch) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t := d.timers[sw.ID]; t != nil {
		t.Stop()
		delete(d.timers, sw.ID)
		delete(d.timerPhase, sw.ID)
	}
	if sw.Phase.Final() {
		if sw.Phase == co.PhaseDone {
			if h := d.hosts[sw.Host]; h != nil {
				d.persistHost(ctx, h)
			}
			d.switchRates.observe(sw.Updated.Sub(sw.Started))
			d.log.Info().Str("switch", string(sw.ID)).Str("host", sw.Host).Str("from", sw.From).Str("to", sw.To).
				Dur("took", sw.Updated.Sub(sw.Started)).Msg("switch done")
		} else if sw.Phase != co.PhaseStranded {
			d.log.Warn().Str("switch", string(sw.ID)).Str("host", sw.Host).Str("phase", string(sw.Phase)).
				Str("failed_in", string(sw.FailedIn)).Str("reason", sw.Reason).Msg("switch " + string(sw.Phase))
		}
		d.kick()
		return
	}
	timeout := d.opt.StepTimeout
	if sw.Phase == co.PhaseReconfiguring || sw.Phase == co.PhaseCancelling || sw.Phase == co.PhaseRollingBack {
		timeout += d.cfg.SwitchDelay
	}
	if sw.Phase == co.PhaseReleasing {
		timeout += time.Minute // the host's jobs leave first
	}
	id, phase := sw.ID, sw.Phase
	d.timerPhase[id] = phase
	d.timers[id] = d.clock.AfterFunc(timeout, func() { d.post(ctx, co.Timeout{ID: id, At: d.now()}) })
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

// commit carries out one side of the commit: the source pool lets the host
// go (nothing to record: it is held), the destination pool takes it (its
// record names the new pool).
func (d *Daemon) commit(ctx context.Context, id co.SwitchID, side co.Side, host, pool string, p FaultPoint) {
	if err := d.fault(p, id, host); err != nil {
		if !errors.Is(err, ErrHang) {
			d.post(ctx, co.CommitFailed{ID: id, Side: side, Err: err.Error(), At: d.now()})
		}
		return
	}
	d.post(ctx, co.Committed{ID: id, Side: side, At: d.now()})
}

// startSwitch hands a policy decision to the coordinator.
func (d *Daemon) startSwitch(ctx context.Context, from, to string) co.SwitchID {
	d.mu.Lock()
	d.seq++
	id := co.NewSwitchID(d.seq)
	d.mu.Unlock()
	d.post(ctx, co.Start{ID: id, From: from, To: to, At: d.now()})
	return id
}

// RequestSwitch starts a switch of one host from pool from to pool to on
// an operator's request, whatever the policy says. The source pool must
// keep min_pool_hosts.
func (d *Daemon) RequestSwitch(ctx context.Context, from, to string) (api.SwitchView, error) {
	var fields []api.FieldError
	for _, p := range [][2]string{{"from", from}, {"to", to}} {
		if _, _, ok := d.jobType(p[1]); !ok {
			fields = append(fields, api.FieldError{Field: p[0], Problem: fmt.Sprintf("no pool %q", p[1])})
		}
	}
	if from == to && len(fields) == 0 {
		fields = append(fields, api.FieldError{Field: "to", Problem: "must differ from from"})
	}
	if len(fields) > 0 {
		return api.SwitchView{}, &RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid switch", Fields: fields}
	}
	d.mu.Lock()
	in := d.policyInputsLocked(d.now())
	d.mu.Unlock()
	_, i, _ := d.jobType(from)
	if n := in.Pools[i].Servers; n <= d.cfg.MinPoolHosts {
		return api.SwitchView{}, &RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("pool %s has %d hosts: it keeps min_pool_hosts = %d", from, n, d.cfg.MinPoolHosts)}
	}
	id := d.startSwitch(ctx, from, to)
	d.log.Info().Str("switch", string(id)).Str("from", from).Str("to", to).Msg("switch requested by an operator")
	return api.SwitchView{ID: string(id), From: from, To: to, Phase: string(co.PhaseReleasing), Started: d.now()}, nil
}

// restoreSwitches rebuilds the coordinator from the journal (New), and
// keeps what was in flight for resumeSwitches (Run). The final notification
// of a switch is carried out again only if no later switch took the same
// host; a done switch's host gets the destination pool on record.
func (d *Daemon) restoreSwitches(ctx context.Context) error {
	recs, err := d.st.Journal(ctx)
	if err != nil {
		return err
	}
	var journal []co.Record
	for _, r := range recs {
		var rec co.Record
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			return fmt.Errorf("journal record %d: %w", r.Seq, err)
		}
		journal = append(journal, rec)
	}
	c, acts, err := co.Restore(journal)
	if err != nil {
		return err
	}
	latest := map[string]co.SwitchID{}
	for _, sw := range c.Switches() {
		if sw.Host != "" && sw.ID > latest[sw.Host] {
			latest[sw.Host] = sw.ID
		}
	}
	d.coord = c
	for _, sw := range c.Switches() {
		if n, ok := co.SwitchIDNumber(sw.ID); ok && n > d.seq {
			d.seq = n
		}
		h := d.hosts[sw.Host]
		switch {
		case h == nil:
		case !sw.Phase.Final():
			h.held = sw.ID
		case sw.Phase == co.PhaseDone && latest[sw.Host] == sw.ID && h.rec.Pool != sw.To:
			h.rec.Pool = sw.To
			d.persistHost(ctx, h)
		}
	}
	for _, a := range acts {
		var host string // the host a final notification is about
		var id co.SwitchID
		switch a := a.(type) {
		case co.AbortRelease:
			host, id = a.Host, a.ID
		case co.MarkStranded:
			host, id = a.Host, a.ID
		case co.Rejoin:
			host, id = a.Host, a.ID
		}
		if host != "" && latest[host] != id {
			continue
		}
		d.restoreActs = append(d.restoreActs, a)
	}
	return nil
}

// resumeSwitches arms a timer for every switch in flight and re-issues
// their requests.
func (d *Daemon) resumeSwitches(ctx context.Context) {
	d.mu.Lock()
	acts := d.restoreActs
	d.restoreActs = nil
	sws := d.coord.Switches()
	d.mu.Unlock()
	n := 0
	for _, sw := range sws {
		if !sw.Phase.Final() {
			d.recorded(ctx, sw)
			n++
		}
	}
	if n > 0 {
		d.log.Info().Int("switches", n).Msg("resuming the switches in flight")
	}
	d.apply(ctx, acts)
}

// ClearHost returns a stranded host to a pool (its switch's source pool
// when pool is empty): the host's agent configures it for that pool first.
func (d *Daemon) ClearHost(ctx context.Context, name, pool string) (api.HostView, error) {
	d.mu.Lock()
	h := d.hosts[name]
	if h == nil {
		d.mu.Unlock()
		return api.HostView{}, &RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no host %q", name)}
	}
	if !h.rec.Stranded {
		d.mu.Unlock()
		return api.HostView{}, &RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("host %s is not stranded (%s)", name, d.hostStateLocked(h))}
	}
	if pool != "" {
		if _, _, ok := d.jobType(pool); !ok {
			d.mu.Unlock()
			return api.HostView{}, invalidField("pool", fmt.Sprintf("no pool %q", pool))
		}
	}
	target := pool
	if target == "" {
		if sw, ok := d.coord.Switch(co.SwitchID(h.rec.Switch)); ok {
			target = sw.From
		}
	}
	s := d.site(h.rec.Site)
	d.mu.Unlock()
	if target == "" || s == nil {
		return api.HostView{}, &RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("host %s: no pool to return it to: give one", name)}
	}
	if _, err := s.agent.ReconfigureHost(ctx, name, hp.Reconfigure{Pool: target}); err != nil {
		return api.HostView{}, &RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("host %s is still stranded: its agent cannot configure it for pool %s: %v", name, target, err)}
	}
	d.mu.Lock()
	acts, err := d.stepLocked(co.Cleared{Host: name, Pool: target, At: d.now()})
	d.mu.Unlock()
	if err != nil {
		return api.HostView{}, &RequestError{Status: 409, Code: api.CodeConflict, Msg: err.Error()}
	}
	d.apply(ctx, acts)
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.hostViewLocked(d.hosts[name]), nil
}

func invalidField(field, problem string) *RequestError {
	return &RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid request", Fields: []api.FieldError{{Field: field, Problem: problem}}}
}

// switchView is the API's view of a switch.
func switchView(sw co.Switch, now time.Time) api.SwitchView {
	end := sw.Updated
	if !sw.Phase.Final() {
		end = now
	}
	return api.SwitchView{ID: string(sw.ID), From: sw.From, To: sw.To, Host: sw.Host, Phase: string(sw.Phase),
		Final: sw.Phase.Final(), Requeued: sw.Requeued, FailedIn: string(sw.FailedIn), Reason: sw.Reason,
		ClearedTo: sw.ClearedTo, Started: sw.Started, Updated: sw.Updated, Seconds: end.Sub(sw.Started).Seconds()}
}
