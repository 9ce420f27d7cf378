package metasched

import (
	"context"
	"encoding/json"
	"fmt"

	co "github.com/metasched/metasched/metasched/coordinator"
)

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
	d.applySwitch(ctx, acts)
}
