package metasched

import (
	"context"
	"encoding/json"
	"fmt"

	co "github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/store"
)

// The switches on record: the store keeps the last record of each switch
// (the coordinator's records are each a switch's whole state), by number.
// The coordinator holds the open switches only: a switch that is over is
// forgotten once its final notification is carried out, and its history is
// read from the store (GET /v1/switches, the dashboard) until the
// retention drops it.

// switchRecord is the store's record of a switch.
func switchRecord(sw co.Switch) (store.SwitchRecord, error) {
	n, ok := co.SwitchIDNumber(sw.ID)
	if !ok || n <= 0 {
		return store.SwitchRecord{}, fmt.Errorf("switch %q: not an ID of this daemon (s-NNNNNN)", sw.ID)
	}
	r := store.SwitchRecord{Num: uint64(n), Host: sw.Host, Open: sw.Open(), Data: mustJSON(co.Record{Switch: sw})}
	if !r.Open {
		r.Ended = sw.Updated
	}
	return r, nil
}

// decodeSwitch reads a switch from the store's record.
func decodeSwitch(r store.SwitchRecord) (co.Switch, error) {
	var rec co.Record
	if err := json.Unmarshal(r.Data, &rec); err != nil {
		return co.Switch{}, fmt.Errorf("switch %d: %w", r.Num, err)
	}
	if n, ok := co.SwitchIDNumber(rec.Switch.ID); !ok || uint64(n) != r.Num {
		return co.Switch{}, fmt.Errorf("switch %d: its record is of switch %q", r.Num, rec.Switch.ID)
	}
	return rec.Switch, nil
}

// convertJournal turns the journal of a store of layout 2 (a record per
// step) into the last record of each switch.
func convertJournal(recs []store.JournalRecord) ([]store.SwitchRecord, error) {
	journal := make([]co.Record, 0, len(recs))
	for _, r := range recs {
		var rec co.Record
		if err := json.Unmarshal(r.Data, &rec); err != nil {
			return nil, fmt.Errorf("journal record %d: %w", r.Seq, err)
		}
		journal = append(journal, rec)
	}
	c, _, err := co.Restore(journal)
	if err != nil {
		return nil, err
	}
	out := make([]store.SwitchRecord, 0, len(recs))
	for _, rec := range c.Journal() {
		r, err := switchRecord(rec.Switch)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// restoreSwitches rebuilds the coordinator from the switches a restart
// needs (New): the open ones and the last switch of each host; it keeps
// what was in flight for resumeSwitches (Run). The final notification of a
// switch is carried out again only if it is its host's last switch; a done
// switch's host gets the destination pool on record. Switch numbers go on
// after the highest the store ever had. The cost does not depend on the
// number of switches kept.
func (d *Daemon) restoreSwitches(ctx context.Context) error {
	if n, err := d.st.ConvertJournal(ctx, convertJournal); err != nil {
		return err
	} else if n > 0 {
		d.log.Info().Int("records", n).Msg("the switch journal of an older store converted into one record per switch")
	}
	seq, err := d.st.SwitchSeq(ctx)
	if err != nil {
		return err
	}
	recs, err := d.st.RestoreSwitches(ctx)
	if err != nil {
		return err
	}
	journal := make([]co.Record, 0, len(recs))
	for _, r := range recs {
		sw, err := decodeSwitch(r)
		if err != nil {
			return fmt.Errorf("restore switches: %w: %w", co.ErrCorruptJournal, err)
		}
		journal = append(journal, co.Record{Switch: sw})
	}
	c, acts, err := co.Restore(journal)
	if err != nil {
		return err
	}
	latest := map[string]int{} // host → the number of its last switch
	last := int(seq)
	for _, sw := range c.Switches() {
		n, _ := co.SwitchIDNumber(sw.ID)
		if sw.Host != "" && n > latest[sw.Host] {
			latest[sw.Host] = n
		}
		last = max(last, n)
	}
	d.hv.mu.Lock()
	defer d.hv.mu.Unlock()
	for _, sw := range c.Switches() {
		n, _ := co.SwitchIDNumber(sw.ID)
		h := d.hv.hosts[sw.Host]
		switch {
		case h == nil:
		case !sw.Phase.Final():
			h.held = sw.ID
		case sw.Phase == co.PhaseDone && latest[sw.Host] == n && h.rec.Pool != sw.To:
			h.rec.Pool = sw.To
			d.persistHost(ctx, h)
		}
	}
	var again []co.Action
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
		if n, _ := co.SwitchIDNumber(id); host != "" && latest[host] != n {
			continue
		}
		again = append(again, a)
	}
	d.sw.restored(c, last, again)
	return nil
}

// resumeSwitches arms a timer for every switch in flight and re-issues
// their requests and the final notifications, then forgets the switches
// that are over.
func (d *Daemon) resumeSwitches(ctx context.Context) {
	acts := d.sw.takeRestored()
	sws := d.sw.all()
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
	for _, sw := range sws {
		if !sw.Open() {
			d.forget(sw.ID)
		}
	}
}

// forget drops a switch that is over from memory: its history is in the
// store.
func (d *Daemon) forget(id co.SwitchID) {
	if err := d.sw.forget(id); err != nil {
		d.log.Error().Err(err).Str("switch", string(id)).Msg("cannot forget a switch")
	}
}
