package coordinator

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Coordinator is the switch state machine. It is not safe for concurrent use:
// one driver goroutine owns it, feeds it events with Step and carries out the
// actions it returns.
type Coordinator struct {
	switches map[SwitchID]*Switch
	busy     map[string]SwitchID // host -> the switch that holds it
}

// New returns a coordinator with no switches.
func New() *Coordinator {
	return &Coordinator{
		switches: make(map[SwitchID]*Switch),
		busy:     make(map[string]SwitchID),
	}
}

// Step applies one event and returns the actions the driver must carry out,
// in order. Every accepted event returns a Persist first. An event that makes
// no sense (unknown switch, an answer that does not fit the phase, a
// duplicate Start, a host held by another switch, a Cleared for a host that
// is not stranded, missing fields) returns an error wrapping one of the
// sentinel errors, and the state is unchanged.
//
// Step costs O(log n) in the number of switches known, except Start, which
// lists the held hosts in O(h log h).
func (c *Coordinator) Step(ev Event) ([]Action, error) {
	switch ev := ev.(type) {
	case nil:
		return nil, fmt.Errorf("nil event: %w", ErrInvalidEvent)
	case Start:
		return c.start(ev)
	case Cleared:
		return c.clear(ev)
	}
	id := eventID(ev)
	old, ok := c.switches[id]
	if !ok {
		return nil, fmt.Errorf("%s for switch %q: %w", eventName(ev), id, ErrUnknownSwitch)
	}
	next := old.clone()
	if err := advance(&next, ev); err != nil {
		return nil, fmt.Errorf("%s for switch %q: %w", eventName(ev), id, err)
	}
	if r, ok := ev.(Released); ok {
		if holder, busy := c.busy[r.Host]; busy {
			return nil, fmt.Errorf("%s for switch %q: host %s held by switch %q: %w",
				eventName(ev), id, r.Host, holder, ErrHostBusy)
		}
	}
	c.put(next)
	acts := []Action{Persist{Record{Switch: next.clone()}}}
	if next.Phase != old.Phase {
		acts = append(acts, c.outstanding(c.switches[id])...)
	}
	return acts, nil
}

func (c *Coordinator) start(ev Start) ([]Action, error) {
	switch {
	case ev.ID == "":
		return nil, fmt.Errorf("start: empty switch id: %w", ErrInvalidEvent)
	case ev.From == "" || ev.To == "":
		return nil, fmt.Errorf("start switch %q: empty pool: %w", ev.ID, ErrInvalidEvent)
	case ev.From == ev.To:
		return nil, fmt.Errorf("start switch %q: source and destination are both %s: %w",
			ev.ID, ev.From, ErrInvalidEvent)
	}
	if _, ok := c.switches[ev.ID]; ok {
		return nil, fmt.Errorf("start switch %q: %w", ev.ID, ErrDuplicateSwitch)
	}
	sw := Switch{ID: ev.ID, From: ev.From, To: ev.To, Phase: PhaseReleasing, Started: ev.At, Updated: ev.At}
	c.put(sw)
	return append([]Action{Persist{Record{Switch: sw.clone()}}}, c.outstanding(c.switches[ev.ID])...), nil
}

func (c *Coordinator) clear(ev Cleared) ([]Action, error) {
	if ev.Host == "" {
		return nil, fmt.Errorf("clear: empty host: %w", ErrInvalidEvent)
	}
	id, ok := c.busy[ev.Host]
	if !ok || c.switches[id].Phase != PhaseStranded {
		return nil, fmt.Errorf("clear host %s: %w", ev.Host, ErrNotStranded)
	}
	next := c.switches[id].clone()
	next.ClearedTo = ev.Pool
	if next.ClearedTo == "" {
		next.ClearedTo = next.From
	}
	next.Cleared = ev.At
	next.Updated = ev.At
	c.put(next)
	return append([]Action{Persist{Record{Switch: next.clone()}}}, c.outstanding(c.switches[id])...), nil
}

// put stores sw and keeps the index of held hosts up to date.
func (c *Coordinator) put(sw Switch) {
	if old, ok := c.switches[sw.ID]; ok && old.holds() && c.busy[old.Host] == sw.ID {
		delete(c.busy, old.Host)
	}
	if sw.holds() {
		c.busy[sw.Host] = sw.ID
	}
	c.switches[sw.ID] = &sw
}

// advance applies ev, an answer or a timeout, to sw.
func advance(sw *Switch, ev Event) error {
	var at time.Time
	switch ev := ev.(type) {
	case Released:
		if err := expect(sw, PhaseReleasing); err != nil {
			return err
		}
		if ev.Host == "" {
			return fmt.Errorf("empty host: %w", ErrInvalidEvent)
		}
		sw.Host = ev.Host
		sw.Requeued = slices.Clone(ev.Requeued)
		sw.LostWorkers = slices.Clone(ev.LostWorkers)
		sw.Phase = PhaseReconfiguring
		at = ev.At
	case ReleaseFailed:
		if err := expect(sw, PhaseReleasing); err != nil {
			return err
		}
		fail(sw, PhaseCancelled, "prepare-release failed: "+ev.Err)
		at = ev.At
	case Reconfigured:
		if err := expect(sw, PhaseReconfiguring); err != nil {
			return err
		}
		sw.Phase = PhaseAdding
		at = ev.At
	case ReconfigureFailed:
		if err := expect(sw, PhaseReconfiguring); err != nil {
			return err
		}
		fail(sw, PhaseCancelling, "reconfigure failed: "+ev.Err)
		at = ev.At
	case Added:
		if err := expect(sw, PhaseAdding); err != nil {
			return err
		}
		sw.Phase = PhaseCommitting
		at = ev.At
	case AddFailed:
		if err := expect(sw, PhaseAdding); err != nil {
			return err
		}
		fail(sw, PhaseCancelling, "prepare-add failed: "+ev.Err)
		at = ev.At
	case Committed:
		if err := expectCommit(sw, ev.Side); err != nil {
			return err
		}
		if ev.Side == SideRelease {
			sw.ReleaseCommitted = true
		} else {
			sw.AddCommitted = true
		}
		if sw.ReleaseCommitted && sw.AddCommitted {
			sw.Phase = PhaseDone
		}
		at = ev.At
	case CommitFailed:
		if err := expectCommit(sw, ev.Side); err != nil {
			return err
		}
		fail(sw, PhaseRollingBack, fmt.Sprintf("commit-%s failed: %s", ev.Side, ev.Err))
		at = ev.At
	case Reverted:
		if err := expect(sw, PhaseCancelling, PhaseRollingBack); err != nil {
			return err
		}
		if sw.Phase == PhaseCancelling {
			sw.Phase = PhaseCancelled
		} else {
			sw.Phase = PhaseRolledBack
		}
		at = ev.At
	case RevertFailed:
		if err := expect(sw, PhaseCancelling, PhaseRollingBack); err != nil {
			return err
		}
		fail(sw, PhaseStranded, "revert failed: "+ev.Err)
		at = ev.At
	case Timeout:
		next, ok := afterTimeout[sw.Phase]
		if !ok {
			return fmt.Errorf("timeout in phase %s: %w", sw.Phase, ErrWrongPhase)
		}
		fail(sw, next, stepName[sw.Phase]+" timed out")
		at = ev.At
	default:
		return fmt.Errorf("event type %T: %w", ev, ErrInvalidEvent)
	}
	sw.Updated = at
	return nil
}

// afterTimeout is where a timeout in each in-flight phase leads: the same
// place as a failure of that phase's step.
var afterTimeout = map[Phase]Phase{
	PhaseReleasing:     PhaseCancelled,
	PhaseReconfiguring: PhaseCancelling,
	PhaseAdding:        PhaseCancelling,
	PhaseCommitting:    PhaseRollingBack,
	PhaseCancelling:    PhaseStranded,
	PhaseRollingBack:   PhaseStranded,
}

// stepName names the step in progress in each in-flight phase.
var stepName = map[Phase]string{
	PhaseReleasing:     "prepare-release",
	PhaseReconfiguring: "reconfigure",
	PhaseAdding:        "prepare-add",
	PhaseCommitting:    "commit",
	PhaseCancelling:    "revert",
	PhaseRollingBack:   "revert",
}

func expect(sw *Switch, phases ...Phase) error {
	if slices.Contains(phases, sw.Phase) {
		return nil
	}
	return fmt.Errorf("phase is %s: %w", sw.Phase, ErrWrongPhase)
}

func expectCommit(sw *Switch, side Side) error {
	if err := expect(sw, PhaseCommitting); err != nil {
		return err
	}
	switch side {
	case SideRelease:
		if sw.ReleaseCommitted {
			return fmt.Errorf("release side already committed: %w", ErrWrongPhase)
		}
	case SideAdd:
		if sw.AddCommitted {
			return fmt.Errorf("add side already committed: %w", ErrWrongPhase)
		}
	default:
		return fmt.Errorf("unknown commit side %q: %w", side, ErrInvalidEvent)
	}
	return nil
}

// fail moves sw to next after a failure of the step in progress.
func fail(sw *Switch, next Phase, reason string) {
	if sw.FailedIn == "" {
		sw.FailedIn = sw.Phase
	}
	if sw.Reason == "" {
		sw.Reason = reason
	} else {
		sw.Reason += "; " + reason
	}
	sw.Phase = next
}

// outstanding returns what the driver must do for sw in its current phase:
// the requests still unanswered while in flight, the final notification once
// final. Step issues it on entering a phase; Restore re-issues it.
func (c *Coordinator) outstanding(sw *Switch) []Action {
	switch sw.Phase {
	case PhaseReleasing:
		return []Action{PrepareRelease{ID: sw.ID, Pool: sw.From, Exclude: c.heldHosts()}}
	case PhaseReconfiguring:
		return []Action{Reconfigure{ID: sw.ID, Host: sw.Host, Pool: sw.To}}
	case PhaseAdding:
		return []Action{PrepareAdd{ID: sw.ID, Pool: sw.To, Host: sw.Host}}
	case PhaseCommitting:
		var acts []Action
		if !sw.ReleaseCommitted {
			acts = append(acts, CommitRelease{ID: sw.ID, Pool: sw.From, Host: sw.Host})
		}
		if !sw.AddCommitted {
			acts = append(acts, CommitAdd{ID: sw.ID, Pool: sw.To, Host: sw.Host})
		}
		return acts
	case PhaseCancelling:
		var acts []Action
		if sw.FailedIn == PhaseAdding {
			acts = append(acts, AbortAdd{ID: sw.ID, Pool: sw.To, Host: sw.Host})
		}
		return append(acts, Revert{ID: sw.ID, Host: sw.Host, Pool: sw.From})
	case PhaseRollingBack:
		return []Action{
			AbortAdd{ID: sw.ID, Pool: sw.To, Host: sw.Host},
			Revert{ID: sw.ID, Host: sw.Host, Pool: sw.From},
		}
	case PhaseCancelled, PhaseRolledBack:
		return []Action{AbortRelease{ID: sw.ID, Pool: sw.From, Host: sw.Host}}
	case PhaseStranded:
		if sw.ClearedTo != "" {
			return []Action{Rejoin{ID: sw.ID, Host: sw.Host, Pool: sw.ClearedTo}}
		}
		return []Action{MarkStranded{ID: sw.ID, Host: sw.Host, Reason: sw.Reason}}
	}
	return nil
}

// heldHosts lists, sorted, the hosts no new switch may take.
func (c *Coordinator) heldHosts() []string {
	hosts := make([]string, 0, len(c.busy))
	for h := range c.busy {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return hosts
}

// Forget drops a switch that is over (not Open) from the coordinator, once
// its final notification has been carried out: its host is free, and an
// answer or a timeout for it is then refused with ErrUnknownSwitch. The
// coordinator then holds only what it still needs, so its costs do not
// grow with the switches of the past. Forgetting an open switch is an
// error (ErrStillOpen); an unknown one is fine.
func (c *Coordinator) Forget(id SwitchID) error {
	sw, ok := c.switches[id]
	if !ok {
		return nil
	}
	if sw.Open() {
		return fmt.Errorf("forget switch %q in phase %s: %w", id, sw.Phase, ErrStillOpen)
	}
	delete(c.switches, id)
	return nil
}

// Switches returns a copy of every switch the coordinator holds (in flight
// and final, but for those forgotten), sorted by ID.
func (c *Coordinator) Switches() []Switch {
	out := make([]Switch, 0, len(c.switches))
	for _, id := range c.ids() {
		out = append(out, c.switches[id].clone())
	}
	return out
}

// Switch returns a copy of switch id.
func (c *Coordinator) Switch(id SwitchID) (Switch, bool) {
	sw, ok := c.switches[id]
	if !ok {
		return Switch{}, false
	}
	return sw.clone(), true
}

// Stranded returns the stranded hosts not yet cleared, sorted.
func (c *Coordinator) Stranded() []string {
	var hosts []string
	for h, id := range c.busy {
		if c.switches[id].Phase == PhaseStranded {
			hosts = append(hosts, h)
		}
	}
	slices.Sort(hosts)
	return hosts
}

func (c *Coordinator) ids() []SwitchID {
	ids := make([]SwitchID, 0, len(c.switches))
	for id := range c.switches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func eventID(ev Event) SwitchID {
	switch ev := ev.(type) {
	case Start:
		return ev.ID
	case Released:
		return ev.ID
	case ReleaseFailed:
		return ev.ID
	case Reconfigured:
		return ev.ID
	case ReconfigureFailed:
		return ev.ID
	case Added:
		return ev.ID
	case AddFailed:
		return ev.ID
	case Committed:
		return ev.ID
	case CommitFailed:
		return ev.ID
	case Reverted:
		return ev.ID
	case RevertFailed:
		return ev.ID
	case Timeout:
		return ev.ID
	}
	return ""
}

// eventName gives "released" for Released, "release-failed" for
// ReleaseFailed, and so on.
func eventName(ev Event) string {
	name := fmt.Sprintf("%T", ev)
	name = name[strings.LastIndex(name, ".")+1:]
	var b strings.Builder
	for i, r := range name {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('-')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
