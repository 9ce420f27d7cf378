package coordinator

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SwitchID names one switch. The cluster manager chooses it; it must be unique
// for the life of the journal.
type SwitchID string

// NewSwitchID returns the ID of the daemon's n-th switch, "s-" and n in at
// least six digits: s-000042.
func NewSwitchID(n int) SwitchID { return SwitchID(fmt.Sprintf("s-%06d", n)) }

// SwitchIDNumber returns n of an ID that NewSwitchID made, and false for any
// other ID.
func SwitchIDNumber(id SwitchID) (int, bool) {
	digits, ok := strings.CutPrefix(string(id), "s-")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	return n, err == nil
}

// Phase is where a switch stands in the protocol. The first six phases are in
// flight: the coordinator waits for an answer. The last four are final.
type Phase string

// The phases of a switch; see the package documentation for the diagram.
const (
	PhaseReleasing     Phase = "releasing"     // PrepareRelease sent to the source pool
	PhaseReconfiguring Phase = "reconfiguring" // Reconfigure sent for the destination pool
	PhaseAdding        Phase = "adding"        // PrepareAdd sent to the destination pool
	PhaseCommitting    Phase = "committing"    // CommitRelease and CommitAdd sent together
	PhaseCancelling    Phase = "cancelling"    // Revert sent after a failure before commit
	PhaseRollingBack   Phase = "rolling_back"  // Revert sent after a failure in commit
	PhaseDone          Phase = "done"          // the host serves the destination pool
	PhaseCancelled     Phase = "cancelled"     // as if the switch had never been tried
	PhaseRolledBack    Phase = "rolled_back"   // the host serves the source pool again
	PhaseStranded      Phase = "stranded"      // the host serves no pool until cleared
)

// Final reports whether p is one of the four final phases.
func (p Phase) Final() bool {
	switch p {
	case PhaseDone, PhaseCancelled, PhaseRolledBack, PhaseStranded:
		return true
	}
	return false
}

func (p Phase) valid() bool {
	switch p {
	case PhaseReleasing, PhaseReconfiguring, PhaseAdding, PhaseCommitting,
		PhaseCancelling, PhaseRollingBack:
		return true
	}
	return p.Final()
}

// Side names one of the two concurrent commit calls.
type Side string

// The two sides of the commit phase.
const (
	SideRelease Side = "release" // the source pool lets the host go (CommitRelease)
	SideAdd     Side = "add"     // the destination pool takes the host (CommitAdd)
)

// Switch is the state of one switch. The coordinator hands out copies.
type Switch struct {
	ID       SwitchID
	From, To string // source and destination pools
	Host     string // chosen by the source pool at release; "" before
	Phase    Phase
	Requeued []string // jobs the source pool returned to its queue to free Host
	// LostWorkers are the worker VMs of running elastic jobs that the
	// release took off Host: their jobs went on without them.
	LostWorkers []string `json:",omitempty"`

	// ReleaseCommitted and AddCommitted record the commit answers received.
	ReleaseCommitted, AddCommitted bool

	// FailedIn is the phase whose step failed first ("" while none has), and
	// Reason says what failed, each later failure appended after "; ".
	FailedIn Phase
	Reason   string

	// ClearedTo is the pool an operator returned a stranded host to, and
	// Cleared when; both are empty while the host is stranded.
	ClearedTo string
	Cleared   time.Time

	Started, Updated time.Time
}

// holds reports whether sw keeps its host from every other switch: while it
// is in flight, and while the host is stranded and not cleared.
func (sw *Switch) holds() bool {
	if sw.Host == "" {
		return false
	}
	if !sw.Phase.Final() {
		return true
	}
	return sw.Phase == PhaseStranded && sw.ClearedTo == ""
}

// Open reports whether the switch still matters to the coordinator: while
// it is in flight, and while its host is stranded and not cleared. A switch
// that is not open is over: the driver may Forget it once its final
// notification is carried out, and drop its records.
func (sw Switch) Open() bool {
	return !sw.Phase.Final() || (sw.Phase == PhaseStranded && sw.ClearedTo == "")
}

func (sw Switch) clone() Switch {
	if sw.Requeued != nil {
		sw.Requeued = append([]string(nil), sw.Requeued...)
	}
	sw.LostWorkers = slices.Clone(sw.LostWorkers)
	return sw
}

// Record is one journal entry: the whole state of one switch right after a
// transition. The last record of a switch is its current state, so a journal
// can be compacted to the last record of each switch.
type Record struct {
	Switch Switch
}

// Sentinel errors returned, wrapped, by Step and Restore.
var (
	ErrUnknownSwitch   = errors.New("unknown switch")
	ErrDuplicateSwitch = errors.New("switch already exists")
	ErrWrongPhase      = errors.New("event does not fit the phase")
	ErrHostBusy        = errors.New("host is held by another switch")
	ErrNotStranded     = errors.New("host is not stranded")
	ErrStillOpen       = errors.New("switch is still open")
	ErrInvalidEvent    = errors.New("invalid event")
	ErrCorruptJournal  = errors.New("corrupt journal")
)
