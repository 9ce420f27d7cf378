package metasched

import (
	"context"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// probeLoop keeps the grid's link bandwidths current: for every link
// between two sites with remote agents over TLS, the first site's agent
// streams a probe to the second's (each proving itself to the other by
// its certificate), and the measurement goes into the link's weighted
// average (plans then use it and say so). In-process agents share one
// machine, where a probe would measure the loopback, and agents of plain
// HTTP have no way to prove themselves to each other: their links keep
// the grid file's bandwidths.
func (d *Daemon) probeLoop(ctx context.Context) {
	first := d.clock.NewTimer(2 * time.Second)
	defer first.Stop()
	select {
	case <-ctx.Done():
		return
	case <-first.Chan():
	}
	t := d.clock.NewTicker(d.opt.ProbeEvery)
	defer t.Stop()
	for {
		d.probeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// probeAll measures every link between remote agents over TLS once, one at a time
// (concurrent probes would share the links they measure).
func (d *Daemon) probeAll(ctx context.Context) {
	for _, l := range d.grid.Links {
		a, b := d.site(l.Between[0]), d.site(l.Between[1])
		if a == nil || b == nil || a.address == "" || b.address == "" {
			continue
		}
		c, cancel := context.WithTimeout(ctx, hp.DefaultProbeTimeout+5*time.Second)
		p, err := a.agent.Probe(c, hp.ProbeRequest{Target: b.address, Site: b.name})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn().Err(err).Str("from", a.name).Str("to", b.name).Msg("bandwidth probe failed")
			}
			continue
		}
		if err := d.planner.Observe(a.name, b.name, p.Mbps, p.MeasuredAt); err != nil {
			d.log.Warn().Err(err).Msg("bandwidth probe")
			continue
		}
		d.log.Info().Str("from", a.name).Str("to", b.name).Float64("mbps", p.Mbps).Msg("link measured")
	}
}
