package coordinator

import (
	"fmt"
	"slices"
)

// Restore rebuilds a coordinator from a journal (the Records of the Persist
// actions, in the order they were written) after a crash, and returns the
// actions to re-issue, switch by switch in ID order:
//
//   - for a switch in flight, the requests of its phase that have no answer
//     on record (PrepareRelease, Reconfigure, PrepareAdd, the commit calls
//     not yet acknowledged, AbortAdd and Revert);
//   - for a final switch, its final notification (AbortRelease,
//     MarkStranded or Rejoin; nothing for a done switch), since the crash may
//     have come between writing the record and delivering it.
//
// Some of these actions may already have been carried out before the crash,
// so the pool managers and agents must treat a repeat as a no-op returning
// the same answer (PrepareRelease in particular must name the same host for
// the same switch ID). No Persist is returned: the records are already in the
// journal.
//
// A driver may compact the journal to the last record of each switch, and may
// drop the switches that are done, cancelled, rolled back or stranded and
// cleared once their final notification has been carried out.
//
// Restore fails, wrapping ErrCorruptJournal, on a record without an ID, with
// an unknown phase, or giving a host to two switches at once. Restore costs
// O(n log n) in the number of records.
func Restore(journal []Record) (*Coordinator, []Action, error) {
	c := New()
	for i, r := range journal {
		sw := r.Switch
		if sw.ID == "" {
			return nil, nil, fmt.Errorf("journal record %d: empty switch id: %w", i, ErrCorruptJournal)
		}
		if !sw.Phase.valid() {
			return nil, nil, fmt.Errorf("journal record %d: switch %q: unknown phase %q: %w",
				i, sw.ID, sw.Phase, ErrCorruptJournal)
		}
		if sw.holds() {
			if holder, ok := c.busy[sw.Host]; ok && holder != sw.ID {
				return nil, nil, fmt.Errorf("journal record %d: switch %q: host %s held by switch %q: %w",
					i, sw.ID, sw.Host, holder, ErrCorruptJournal)
			}
		}
		c.put(sw.clone())
	}
	var acts []Action
	for _, id := range c.ids() {
		acts = append(acts, c.outstanding(c.switches[id])...)
	}
	return c, acts, nil
}

// Journal returns the last record of every switch, sorted by ID: a compacted
// journal from which Restore rebuilds the same state.
func (c *Coordinator) Journal() []Record {
	out := make([]Record, 0, len(c.switches))
	for _, id := range c.ids() {
		out = append(out, Record{Switch: c.switches[id].clone()})
	}
	return slices.Clip(out)
}
