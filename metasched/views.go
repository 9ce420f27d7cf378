package metasched

import (
	"slices"
	"time"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	co "github.com/metasched/metasched/metasched/coordinator"
)

// Pools reports every pool: its queue, hosts and switches in flight.
func (d *Daemon) Pools() []api.Pool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	out := make([]api.Pool, len(d.types))
	idx := map[string]int{}
	for i, jt := range d.types {
		idx[jt.Name] = i
		r := d.rates[jt.Name]
		out[i] = api.Pool{Name: jt.Name, VCPUs: jt.VCPUs, MemoryMiB: jt.MemoryMiB, HoldingCost: jt.HoldingCost,
			Hosts: []string{}, Rates: r.view(now), Completed: r.completed}
	}
	for i, jt := range d.types {
		c := d.countsLocked(jt.Name)
		out[i].Queued, out[i].Active, out[i].Jobs = c.queued, c.placed, c.queued+c.placed
	}
	for _, name := range d.order {
		h := d.hosts[name]
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
	for _, sw := range d.coord.Switches() {
		if sw.Phase.Final() {
			continue
		}
		if i, ok := idx[sw.From]; ok {
			out[i].SwitchingOut++
		}
		if i, ok := idx[sw.To]; ok {
			out[i].SwitchingIn++
		}
	}
	return out
}

// Hosts reports every host with its VMs.
func (d *Daemon) Hosts() []api.HostView {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]api.HostView, 0, len(d.order))
	for _, name := range d.order {
		out = append(out, d.hostViewLocked(d.hosts[name]))
	}
	return out
}

func (d *Daemon) hostViewLocked(h *gridHost) api.HostView {
	v := api.HostView{Name: h.name, Site: h.rec.Site, Pool: h.rec.Pool, State: d.hostStateLocked(h),
		CPUs: h.inv.CPUs, MemoryMiB: h.inv.MemoryMiB, FreeVCPUs: h.inv.FreeVCPUs, FreeMemoryMiB: h.inv.FreeMemoryMiB,
		VMs: h.inv.VMs, Reason: h.err}
	if v.VMs == nil {
		v.VMs = []hp.VM{}
	}
	if h.held != "" {
		if sw, ok := d.coord.Switch(h.held); ok {
			v.Switch, v.From, v.To = string(sw.ID), sw.From, sw.To
		}
	}
	if h.rec.Stranded {
		v.Switch, v.Reason = h.rec.Switch, h.rec.Reason
		if sw, ok := d.coord.Switch(co.SwitchID(h.rec.Switch)); ok {
			v.From, v.To = sw.From, sw.To
		}
	}
	return v
}

// VMs lists every VM the agents last reported.
func (d *Daemon) VMs() []hp.VM {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := []hp.VM{}
	for _, name := range d.order {
		out = append(out, d.hosts[name].inv.VMs...)
	}
	return out
}

// Switches lists the switches, newest first: all of them, or those in
// flight and the stranded ones not cleared.
func (d *Daemon) Switches(active bool) []api.SwitchView {
	if active {
		return d.switchViews(0)
	}
	return d.switchViews(-1)
}

// switchViews lists, newest first, the switches in flight and the stranded
// ones not cleared, and at most final of the others (-1: all of them).
func (d *Daemon) switchViews(final int) []api.SwitchView {
	d.mu.Lock()
	sws := d.coord.Switches()
	d.mu.Unlock()
	now := d.now()
	out := []api.SwitchView{}
	for _, sw := range slices.Backward(sws) {
		if sw.Phase.Final() && !(sw.Phase == co.PhaseStranded && sw.ClearedTo == "") {
			if final == 0 {
				continue
			}
			final--
		}
		out = append(out, switchView(sw, now))
	}
	return out
}

// Tuning lists the bandwidth tuning decisions, newest first.
func (d *Daemon) Tuning() []api.TuningRecord {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := slices.Clone(d.tuning)
	slices.Reverse(out)
	if out == nil {
		out = []api.TuningRecord{}
	}
	return out
}

// Links reports every link of the grid with its measurements.
func (d *Daemon) Links() []gramvm.Link { return d.planner.Links() }

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
