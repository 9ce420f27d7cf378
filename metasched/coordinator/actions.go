package coordinator

// Action is an output of Step and Restore, for the driver to carry out in
// slice order. Requests (PrepareRelease, Reconfigure, PrepareAdd,
// CommitRelease, CommitAdd, Revert) are answered by feeding an event back;
// notifications (AbortRelease, AbortAdd, MarkStranded, Rejoin) have no answer.
// Every action names its switch, and the components that carry them out must
// treat a repeat of an action for the same switch as a no-op (or return the
// same answer): Restore re-issues actions that may already have been done.
type Action interface{ isAction() }

// Persist asks the driver to append Record to the journal durably before it
// carries out any action after it in the same slice.
type Persist struct {
	Record Record
}

// PrepareRelease asks the source pool manager to choose a host of Pool for
// switch ID, skipping the hosts in Exclude (held by other switches or
// stranded). It prefers an idle host; if none is idle it returns the jobs of
// the chosen host to the queue. Answer: Released or ReleaseFailed. A repeat
// for the same ID must answer with the same host.
type PrepareRelease struct {
	ID      SwitchID
	Pool    string
	Exclude []string
}

// Reconfigure asks the host's agent to configure Host for Pool, the
// destination pool (this may take the switch delay). Answer: Reconfigured or
// ReconfigureFailed.
type Reconfigure struct {
	ID   SwitchID
	Host string
	Pool string
}

// PrepareAdd asks the destination pool manager to get ready to take Host into
// Pool. Answer: Added or AddFailed.
type PrepareAdd struct {
	ID   SwitchID
	Pool string
	Host string
}

// CommitRelease asks the source pool manager to let Host go for good. It is
// issued together with CommitAdd. Answer: Committed or CommitFailed with
// SideRelease.
type CommitRelease struct {
	ID   SwitchID
	Pool string
	Host string
}

// CommitAdd asks the destination pool manager to take Host into Pool for
// good. Answer: Committed or CommitFailed with SideAdd.
type CommitAdd struct {
	ID   SwitchID
	Pool string
	Host string
}

// Revert asks the host's agent to configure Host for Pool, the source pool,
// again. Answer: Reverted or RevertFailed.
type Revert struct {
	ID   SwitchID
	Host string
	Pool string
}

// AbortRelease tells the source pool manager that Host stays in (or comes
// back to) Pool: undo a prepared release, or re-add the host if the release
// was already committed. Host is empty when the switch ended before the
// source named a host: the pool manager then drops whatever it prepared
// under ID, usually nothing.
type AbortRelease struct {
	ID   SwitchID
	Pool string
	Host string
}

// AbortAdd tells the destination pool manager to forget Host: undo a
// prepared add, or remove the host if the add was already committed.
type AbortAdd struct {
	ID   SwitchID
	Pool string
	Host string
}

// MarkStranded tells the driver that Host can join neither pool: it takes
// the host out of every pool's view (the source pool's pending release
// included) and reports it with Reason until an operator clears it.
type MarkStranded struct {
	ID     SwitchID
	Host   string
	Reason string
}

// Rejoin tells the driver that an operator cleared the stranded Host: it adds
// the host to Pool.
type Rejoin struct {
	ID   SwitchID
	Host string
	Pool string
}

func (Persist) isAction()        {}
func (PrepareRelease) isAction() {}
func (Reconfigure) isAction()    {}
func (PrepareAdd) isAction()     {}
func (CommitRelease) isAction()  {}
func (CommitAdd) isAction()      {}
func (Revert) isAction()         {}
func (AbortRelease) isAction()   {}
func (AbortAdd) isAction()       {}
func (MarkStranded) isAction()   {}
func (Rejoin) isAction()         {}
