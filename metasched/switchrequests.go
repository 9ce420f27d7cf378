package metasched

import (
	"context"
	"fmt"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	co "github.com/metasched/metasched/metasched/coordinator"
)

// The requests that start or end switches from outside the coordinator: the
// policy's decisions, an operator's switch, an operator's clear of a
// stranded host.

// startSwitch hands a decision to the coordinator; why says whose and
// why, for the switch's line in the log when it ends; operator says an
// operator asked for it (the cluster manager's cooldown does not hold it).
func (d *Daemon) startSwitch(ctx context.Context, from, to, why string, operator bool) co.SwitchID {
	id := d.sw.next(why, operator)
	d.post(ctx, co.Start{ID: id, From: from, To: to, At: d.now()})
	return id
}

// operatorWhy is why a switch an operator asked for was started.
const operatorWhy = "requested by an operator"

// RequestSwitch starts a switch of one host from pool from to pool to on
// an operator's request, whatever the policy says. The source pool must
// keep min_pool_hosts.
func (d *Daemon) RequestSwitch(ctx context.Context, from, to string) (_ api.SwitchView, err error) {
	defer apiError(&err)
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
		return api.SwitchView{}, &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid switch", Fields: fields}
	}
	d.lockR()
	in := d.policyInputsLocked(d.now())
	d.unlockR()
	_, i, _ := d.jobType(from)
	if n := in.Pools[i].Servers; n <= d.cfg.MinPoolHosts {
		return api.SwitchView{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("pool %s has %d hosts: it keeps min_pool_hosts = %d", from, n, d.cfg.MinPoolHosts)}
	}
	id := d.startSwitch(ctx, from, to, operatorWhy, true)
	d.log.Info().Str("switch", string(id)).Str("from", from).Str("to", to).Msg("switch requested by an operator")
	return api.SwitchView{ID: string(id), From: from, To: to, Phase: string(co.PhaseReleasing), Started: d.now()}, nil
}

// ClearHost returns a stranded host to a pool (its switch's source pool
// when pool is empty): the host's agent configures it for that pool first.
func (d *Daemon) ClearHost(ctx context.Context, name, pool string) (_ api.HostView, err error) {
	defer apiError(&err)
	d.lockR()
	h := d.hv.hosts[name]
	if h == nil {
		d.unlockR()
		return api.HostView{}, &api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no host %q", name)}
	}
	if !h.rec.Stranded {
		d.unlockR()
		return api.HostView{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("host %s is not stranded (%s)", name, d.hostStateLocked(h))}
	}
	if pool != "" {
		if _, _, ok := d.jobType(pool); !ok {
			d.unlockR()
			return api.HostView{}, invalidField("pool", fmt.Sprintf("no pool %q", pool))
		}
	}
	target := pool
	if target == "" {
		if sw, ok := d.sw.get(co.SwitchID(h.rec.Switch)); ok {
			target = sw.From
		}
	}
	s := d.site(h.rec.Site)
	d.unlockR()
	if target == "" || s == nil {
		return api.HostView{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("host %s: no pool to return it to: give one", name)}
	}
	if _, err := s.agent.ReconfigureHost(ctx, name, hp.Reconfigure{Pool: target, Image: d.imageOf(target)}); err != nil {
		return api.HostView{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("host %s is still stranded: its agent cannot configure it for pool %s: %v", name, target, err)}
	}
	d.hv.mu.Lock()
	acts, _, err := d.stepSwitchLocked(co.Cleared{Host: name, Pool: target, At: d.now()})
	d.hv.mu.Unlock()
	if err != nil {
		return api.HostView{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: err.Error()}
	}
	d.applySwitch(ctx, acts)
	d.lockR()
	defer d.unlockR()
	return d.hostViewLocked(d.hv.hosts[name]), nil
}

func invalidField(field, problem string) *api.RequestError {
	return &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid request", Fields: []api.FieldError{{Field: field, Problem: problem}}}
}
