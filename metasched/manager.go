package metasched

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/policy"
	"github.com/metasched/metasched/metasched/wire"
)

// The cluster manager (Kubicek et al. §II; Fisher et al.): twice a second
// it reads the inventory, each pool's jobs (j_i: queued or running; of
// them, those waiting for hosts) and servers (k_i: hosts of the pool that
// are reachable and not held by a switch), the switches in flight (m_ab),
// updates the rate estimates, works out the switches its guard holds
// (Options.Guard: none toward a pool with no job waiting for hosts, none
// undoing a switch of the last minute) and asks the switching policy. A
// decision to switch goes to the coordinator.

// DefaultGuard is the cluster manager's guard by default: a pool receives
// a host only while one of its jobs waits for hosts, and no switch from b
// to a starts within policy.DefaultCooldown of a switch from a to b.
var DefaultGuard = policy.Guard{NeedWaiting: true, MoveIdle: true, Cooldown: policy.DefaultCooldown}

func (d *Daemon) managerLoop(ctx context.Context) {
	t := d.clock.NewTicker(d.opt.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		d.manage(ctx)
	}
}

// manage is one tick of the cluster manager.
func (d *Daemon) manage(ctx context.Context) {
	d.refresh(ctx)
	if ctx.Err() != nil {
		return
	}
	d.lockR()
	in := d.policyInputsLocked(d.now())
	d.unlockR()
	// Like the papers' decision instants (an arrival, a departure, a switch
	// completion), the policy is asked again only when the state (j, k, m)
	// changed since it last started a switch: a switch in flight takes
	// seconds, and asking every tick would start a switch per tick for
	// the same queue.
	sig := stateSignature(in)
	if !d.sw.changed(sig) {
		return
	}
	dec, err := d.pol.Decide(in)
	// A source pool none of whose hosts the release rule would give now
	// (each runs a job a switch has stopped once, or came from the
	// destination within the cooldown) is locked for this decision and
	// the policy asked again: a switch started from it would only be
	// cancelled.
	now := d.now()
	moves := d.sw.moves(now, d.opt.Guard.Cooldown)
	for tries := 0; err == nil && dec.Switch && tries < len(in.Pools); tries++ {
		from, to := d.types[dec.From].Name, d.types[dec.To].Name
		cooling := d.opt.Guard.Cooling(moves, from, to, now)
		d.lockR()
		rel, why := d.chooseReleaseLocked(from, cooling)
		d.unlockR()
		if rel.host != "" {
			break
		}
		d.log.Debug().Str("from", from).Str("to", to).Str("reason", why).Strs("cooling", cooling).
			Msg("switch not started: no host of the source pool can go now")
		in.Locked[dec.From] = true
		dec, err = d.pol.Decide(in)
	}
	if err != nil {
		d.log.Warn().Err(err).Msg("switching policy")
		return
	}
	if !dec.Switch {
		return
	}
	from, to := d.types[dec.From].Name, d.types[dec.To].Name
	if in.Pools[dec.From].Servers <= d.cfg.MinPoolHosts || in.Pools[dec.From].Servers < 1 {
		d.log.Debug().Str("from", from).Str("to", to).Int("hosts", in.Pools[dec.From].Servers).
			Msg("switch not started: the source pool is at min_pool_hosts")
		return
	}
	d.sw.started(sig)
	id := d.startSwitch(ctx, from, to, dec.Policy+": "+dec.Why, false)
	// At debug: the switch's one line at info is its end ("switch done",
	// or its failure), which names the policy's decision too.
	d.log.Debug().Str("switch", string(id)).Str("from", from).Str("to", to).Str("policy", dec.Policy).
		Str("why", dec.Why).Msg("switch decided")
}

// stateSignature is the policy's state (j, k, m) as a string.
func stateSignature(in policy.Inputs) string {
	var b strings.Builder
	for _, p := range in.Pools {
		fmt.Fprintf(&b, "%d/%d ", p.Jobs, p.Servers)
	}
	for _, row := range in.Transit {
		for _, m := range row {
			fmt.Fprintf(&b, "%d ", m)
		}
	}
	return b.String()
}

// policyInputsLocked gathers the policy's inputs.
func (d *Daemon) policyInputsLocked(now time.Time) policy.Inputs {
	idx := map[string]int{}
	in := policy.Inputs{Pools: make([]policy.PoolInput, len(d.types))}
	for i, jt := range d.types {
		idx[jt.Name] = i
		arrival, service := d.rates.rates(jt.Name, now)
		in.Pools[i] = policy.PoolInput{Name: jt.Name, Arrival: arrival, Service: service, HoldingCost: jt.HoldingCost}
	}
	for i, jt := range d.types {
		c := d.countsLocked(jt.Name)
		in.Pools[i].Jobs = c.queued + c.placed
		in.Pools[i].Waiting = c.queued
	}
	for _, name := range d.hv.order {
		h := d.hv.hosts[name]
		if i, ok := idx[h.rec.Pool]; ok && h.serving() {
			in.Pools[i].Servers++
			if !d.hostBusyLocked(name) {
				in.Pools[i].Idle++
			}
		}
	}
	in.Transit = d.sw.transit(idx, len(d.types))
	in.SwitchRate, _ = d.sw.rate()
	in.Locked = make([]bool, len(d.types))
	for i, p := range in.Pools {
		in.Locked[i] = p.Servers <= d.cfg.MinPoolHosts
	}
	in.Held = d.opt.Guard.Held(in, d.sw.moves(now, d.opt.Guard.Cooldown), now)
	return in
}

// Policy reports the policy in force and its inputs.
func (d *Daemon) Policy() api.PolicyView {
	d.lockR()
	in := d.policyInputsLocked(d.now())
	n := in.Servers()
	d.unlockR()
	_, samples := d.sw.rate()
	pv := d.pol.View()
	v := api.PolicyView{Configured: d.cfg.Policy.String(), InForce: pv.InForce, Note: pv.Note, Servers: n,
		SwitchRate: in.SwitchRate, SwitchSamples: samples, Decisions: pv.Decisions, Switches: pv.Switches,
		LastAt: pv.LastSwitchAt}
	if pv.LastSwitch.Switch && pv.LastSwitch.From < len(d.types) && pv.LastSwitch.To < len(d.types) {
		v.Last = fmt.Sprintf("%s → %s (%s): %s", d.types[pv.LastSwitch.From].Name, d.types[pv.LastSwitch.To].Name,
			pv.LastSwitch.Policy, pv.LastSwitch.Why)
	}
	names, servers, jobs := make([]string, len(in.Pools)), make([]int, len(in.Pools)), make([]int, len(in.Pools))
	for i, p := range in.Pools {
		v.Pools = append(v.Pools, api.PolicyPool{Name: p.Name, Jobs: p.Jobs, Servers: p.Servers, Arrival: p.Arrival,
			Service: p.Service, HoldingCost: p.HoldingCost})
		names[i], servers[i], jobs[i] = p.Name, p.Servers, p.Jobs
	}
	if t := pv.Table; t != nil {
		v.Table = &api.PolicyTable{Source: t.Source, States: t.States, SolvedAt: t.SolvedAt, Arrival: t.Rates.Arrival,
			Service: t.Rates.Service, SwitchRate: t.Rates.SwitchRate, Solving: pv.Solving != nil}
		v.TableView = wire.PolicySlice(d.pol.TableSlice(names, servers, jobs))
	}
	return v
}
