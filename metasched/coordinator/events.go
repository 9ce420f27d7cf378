package coordinator

import "time"

// Event is an input to Step: a request of the cluster manager or an operator
// (Start, Cleared), the answer to an action (Released, Reconfigured, ...), or
// the driver's timer (Timeout). At is the driver's clock when the event
// happened; the coordinator has no clock of its own.
type Event interface{ isEvent() }

// Start asks for a new switch of one host from pool From to pool To.
type Start struct {
	ID       SwitchID
	From, To string
	At       time.Time
}

// Released answers PrepareRelease: the source pool chose Host, returned the
// jobs in Requeued to its queue, took the worker VMs in LostWorkers from
// running elastic jobs that go on without them, and holds the host for the
// switch.
type Released struct {
	ID          SwitchID
	Host        string
	Requeued    []string
	LostWorkers []string
	At          time.Time
}

// ReleaseFailed answers PrepareRelease: the source pool could not spare a host
// and changed nothing.
type ReleaseFailed struct {
	ID  SwitchID
	Err string
	At  time.Time
}

// Reconfigured answers Reconfigure: the host is configured for the
// destination pool.
type Reconfigured struct {
	ID SwitchID
	At time.Time
}

// ReconfigureFailed answers Reconfigure. The host may be half configured.
type ReconfigureFailed struct {
	ID  SwitchID
	Err string
	At  time.Time
}

// Added answers PrepareAdd: the destination pool is ready to take the host.
type Added struct {
	ID SwitchID
	At time.Time
}

// AddFailed answers PrepareAdd: the destination pool refused the host.
type AddFailed struct {
	ID  SwitchID
	Err string
	At  time.Time
}

// Committed answers CommitRelease (Side is SideRelease) or CommitAdd
// (SideAdd).
type Committed struct {
	ID   SwitchID
	Side Side
	At   time.Time
}

// CommitFailed answers CommitRelease or CommitAdd with a failure.
type CommitFailed struct {
	ID   SwitchID
	Side Side
	Err  string
	At   time.Time
}

// Reverted answers Revert: the host is configured for the source pool again.
type Reverted struct {
	ID SwitchID
	At time.Time
}

// RevertFailed answers Revert: the host is configured for no pool.
type RevertFailed struct {
	ID  SwitchID
	Err string
	At  time.Time
}

// Timeout says the driver's timer for the step in progress of switch ID
// fired. It counts as a failure of that step.
type Timeout struct {
	ID SwitchID
	At time.Time
}

// Cleared says an operator repaired the stranded Host and returns it to Pool;
// an empty Pool means the source pool of the switch that stranded it.
type Cleared struct {
	Host string
	Pool string
	At   time.Time
}

func (Start) isEvent()             {}
func (Released) isEvent()          {}
func (ReleaseFailed) isEvent()     {}
func (Reconfigured) isEvent()      {}
func (ReconfigureFailed) isEvent() {}
func (Added) isEvent()             {}
func (AddFailed) isEvent()         {}
func (Committed) isEvent()         {}
func (CommitFailed) isEvent()      {}
func (Reverted) isEvent()          {}
func (RevertFailed) isEvent()      {}
func (Timeout) isEvent()           {}
func (Cleared) isEvent()           {}
