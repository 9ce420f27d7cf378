package metasched

import (
	"context"
	"time"

	"github.com/metasched/metasched/metasched/store"
)

// The housekeeping keeps the history within its retention (Config
// Retention): at the start and every housekeepingEvery on the daemon's
// clock it drops the finished switches beyond their age or count. Its cost
// is what it drops, never the number of switches kept.

// housekeepingEvery is the housekeeping's period.
const housekeepingEvery = time.Minute

// retention is the configured retention, or DefaultRetention for a
// configuration built in code without one.
func (d *Daemon) retention() RetentionConfig {
	if d.cfg.Retention == (RetentionConfig{}) {
		return DefaultRetention
	}
	return d.cfg.Retention
}

// housekeepingLoop runs the housekeeping now and every housekeepingEvery.
func (d *Daemon) housekeepingLoop(ctx context.Context) {
	t := d.clock.NewTicker(housekeepingEvery)
	defer t.Stop()
	for {
		d.housekeeping(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
	}
}

// housekeeping is one round.
func (d *Daemon) housekeeping(ctx context.Context) {
	r, now := d.retention(), d.now()
	trim := store.SwitchTrim{MaxCount: r.SwitchMaxCount, Keep: now.Add(-MinSwitchMaxAge)}
	if r.SwitchMaxAge > 0 {
		trim.EndedBefore = now.Add(-r.SwitchMaxAge)
	}
	if n, err := d.st.TrimSwitches(ctx, trim); err != nil {
		if ctx.Err() == nil {
			d.log.Warn().Err(err).Msg("housekeeping: cannot drop the switches beyond their retention")
		}
	} else if n > 0 {
		d.log.Info().Int("switches", n).Msg("housekeeping: finished switches beyond their retention dropped")
	}
}
