package metasched

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/metasched/metasched/metasched/api"
	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/wire"
)

// Pools reports every pool: its queue, hosts and switches in flight.
func (d *Daemon) Pools() []api.Pool {
	d.lockR()
	defer d.unlockR()
	now := d.now()
	out := make([]api.Pool, len(d.types))
	idx := map[string]int{}
	for i, jt := range d.types {
		idx[jt.Name] = i
		rates, completed := d.rates.view(jt.Name, now)
		out[i] = api.Pool{Name: jt.Name, VCPUs: jt.VCPUs, MemoryMiB: jt.MemoryMiB, HoldingCost: jt.HoldingCost,
			Hosts: []string{}, Rates: rates, Completed: completed}
	}
	for i, jt := range d.types {
		c := d.countsLocked(jt.Name)
		out[i].Queued, out[i].Active, out[i].Jobs = c.queued, c.placed, c.queued+c.placed
	}
	for _, name := range d.hv.order {
		h := d.hv.hosts[name]
		i, ok := idx[h.rec.Pool]
		if !ok || !h.serving() {
			continue
		}
		out[i].Hosts = append(out[i].Hosts, name)
		if d.hostBusyLocked(name) {
			out[i].Busy++
		} else {
			out[i].Idle++
		}
	}
	for from, row := range d.sw.transit(idx, len(out)) {
		for to, n := range row {
			out[from].SwitchingOut += n
			out[to].SwitchingIn += n
		}
	}
	return out
}

// Hosts reports every host with its VMs.
func (d *Daemon) Hosts() []api.HostView {
	d.lockR()
	defer d.unlockR()
	out := make([]api.HostView, 0, len(d.hv.order))
	for _, name := range d.hv.order {
		out = append(out, d.hostViewLocked(d.hv.hosts[name]))
	}
	return out
}

func (d *Daemon) hostViewLocked(h *gridHost) api.HostView {
	v := api.HostView{Name: h.name, Site: h.rec.Site, Pool: h.rec.Pool, State: d.hostStateLocked(h),
		CPUs: h.inv.CPUs, MemoryMiB: h.inv.MemoryMiB, FreeVCPUs: h.inv.FreeVCPUs, FreeMemoryMiB: h.inv.FreeMemoryMiB,
		VMs: wire.VMs(h.inv.VMs), Reason: h.err}
	if v.VMs == nil {
		v.VMs = []api.VM{}
	}
	if h.held != "" {
		if sw, ok := d.sw.get(h.held); ok {
			v.Switch, v.From, v.To = string(sw.ID), sw.From, sw.To
		}
	}
	if h.rec.Stranded {
		v.Switch, v.Reason = h.rec.Switch, h.rec.Reason
		if sw, ok := d.sw.get(co.SwitchID(h.rec.Switch)); ok {
			v.From, v.To = sw.From, sw.To
		}
	}
	return v
}

// VMs lists every VM the agents last reported.
func (d *Daemon) VMs() []api.VM {
	d.hv.mu.RLock()
	defer d.hv.mu.RUnlock()
	out := []api.VM{}
	for _, name := range d.hv.order {
		for _, vm := range d.hv.hosts[name].inv.VMs {
			out = append(out, wire.VM(vm))
		}
	}
	return out
}

// SwitchReason is why the switch id was started: the policy's decision
// ("heuristic K=2: switch a host from …"), or "requested by an operator";
// "" for a switch that ended long ago or before the daemon started (the
// store does not keep it).
func (d *Daemon) SwitchReason(id string) string { return d.sw.reason(co.SwitchID(id)) }

// Switches lists a page of the switches, newest first: those kept in the
// store (f.Active: only the open ones, in flight or stranded and not
// cleared), started before f.Before, at most f.Limit (0: the default page).
// A page costs what it holds, whatever the number of switches kept.
func (d *Daemon) Switches(ctx context.Context, f api.SwitchFilter) (_ api.SwitchList, err error) {
	defer apiError(&err)
	var before uint64
	if f.Before != "" {
		n, ok := co.SwitchIDNumber(co.SwitchID(f.Before))
		if !ok || n <= 0 {
			return api.SwitchList{}, invalidField("before", fmt.Sprintf("must be a switch ID like s-000042, not %q", f.Before))
		}
		before = uint64(n)
	}
	if f.Limit < 0 || f.Limit > api.MaxPageSize {
		return api.SwitchList{}, invalidField("limit", fmt.Sprintf("must be 0 (the default page) to %d, not %d", api.MaxPageSize, f.Limit))
	}
	limit := f.Limit
	if limit == 0 {
		limit = api.DefaultPageSize
	}
	now := d.now()
	out := api.SwitchList{Switches: []api.SwitchView{}}
	if f.Active {
		for _, sw := range d.openSwitches() {
			if n, _ := co.SwitchIDNumber(sw.ID); before > 0 && uint64(n) >= before {
				continue
			}
			if len(out.Switches) == limit {
				out.Next = out.Switches[limit-1].ID
				break
			}
			out.Switches = append(out.Switches, switchView(sw, now))
		}
		return out, nil
	}
	recs, err := d.st.Switches(ctx, before, limit+1)
	if err != nil {
		return api.SwitchList{}, err
	}
	if len(recs) > limit {
		recs = recs[:limit]
		out.Next = string(co.NewSwitchID(int(recs[limit-1].Num)))
	}
	sws := make([]co.Switch, 0, len(recs))
	for _, r := range recs {
		sw, err := decodeSwitch(r)
		if err != nil {
			d.log.Error().Err(err).Msg("a switch's record in the store cannot be read: left out of the listing")
			continue
		}
		sws = append(sws, sw)
	}
	for i, sw := range sws {
		if live, ok := d.sw.get(sw.ID); ok {
			sws[i] = live // the coordinator may be one record ahead
		}
	}
	for _, sw := range sws {
		out.Switches = append(out.Switches, switchView(sw, now))
	}
	return out, nil
}

// openSwitches lists the switches in flight and the stranded ones not
// cleared, newest first.
func (d *Daemon) openSwitches() []co.Switch {
	sws := d.sw.all()
	out := make([]co.Switch, 0, len(sws))
	for _, sw := range slices.Backward(sws) {
		if sw.Open() {
			out = append(out, sw)
		}
	}
	return out
}

// recentSwitches lists, newest first, the switches in flight and the
// stranded ones not cleared, then at most final of the others.
func (d *Daemon) recentSwitches(ctx context.Context, final int) ([]api.SwitchView, error) {
	now := d.now()
	open := d.openSwitches()
	out := make([]api.SwitchView, 0, len(open)+final)
	isOpen := map[co.SwitchID]bool{}
	for _, sw := range open {
		out = append(out, switchView(sw, now))
		isOpen[sw.ID] = true
	}
	if final <= 0 {
		return out, nil
	}
	// The newest final+len(open) records hold the newest final closed ones.
	recs, err := d.st.Switches(ctx, 0, final+len(open))
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if r.Open || final == 0 {
			continue
		}
		sw, err := decodeSwitch(r)
		if err != nil || isOpen[sw.ID] {
			continue
		}
		out = append(out, switchView(sw, now))
		final--
	}
	return out, nil
}

// Tuning lists the bandwidth tuning decisions, newest first.
func (d *Daemon) Tuning() []api.TuningRecord { return d.tuner.Records() }

// Links reports every link of the grid with its measurements.
func (d *Daemon) Links() []api.Link { return wire.Links(d.planner.Links()) }

// switchView is the API's view of a switch.
func switchView(sw co.Switch, now time.Time) api.SwitchView {
	end := sw.Updated
	if !sw.Phase.Final() {
		end = now
	}
	return api.SwitchView{ID: string(sw.ID), From: sw.From, To: sw.To, Host: sw.Host, Phase: string(sw.Phase),
		Final: sw.Phase.Final(), Requeued: sw.Requeued, LostWorkers: sw.LostWorkers, FailedIn: string(sw.FailedIn), Reason: sw.Reason,
		ClearedTo: sw.ClearedTo, Started: sw.Started, Updated: sw.Updated, Seconds: end.Sub(sw.Started).Seconds()}
}
