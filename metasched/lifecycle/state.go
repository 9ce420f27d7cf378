package lifecycle

import (
	"slices"
	"time"
)

// State is a step of the job lifecycle.
type State string

// The job states. Queued, Planned, Provisioning and Running are live; Done,
// Failed and Cancelled are terminal.
const (
	Queued       State = "queued"
	Planned      State = "planned"
	Provisioning State = "provisioning"
	Running      State = "running"
	Done         State = "done"
	Failed       State = "failed"
	Cancelled    State = "cancelled"
)

// States lists every job state in lifecycle order.
var States = []State{Queued, Planned, Provisioning, Running, Done, Failed, Cancelled}

// Terminal reports whether a job in state s will never change again.
func (s State) Terminal() bool {
	return s == Done || s == Failed || s == Cancelled
}

// Valid reports whether s is one of States.
func (s State) Valid() bool { return slices.Contains(States, s) }

// allowed holds the lifecycle: queued → planned → provisioning → running →
// done | failed; any live state → cancelled or failed; planned,
// provisioning and running → queued (requeue: the job's host was switched
// to another pool, its agent was lost, or the daemon restarted under it).
var allowed = map[State][]State{
	Queued:       {Planned, Cancelled, Failed},
	Planned:      {Provisioning, Queued, Cancelled, Failed},
	Provisioning: {Running, Queued, Cancelled, Failed},
	Running:      {Done, Failed, Cancelled, Queued},
}

// CanTransition reports whether the lifecycle allows a job to go from one
// state to the other.
func CanTransition(from, to State) bool {
	return slices.Contains(allowed[from], to)
}

// Transition is one recorded change of a job's state. The first transition
// of every job is from "" to queued. A running job that loses a worker VM
// and goes on (WorkerLost) records a transition from running to running
// whose reason names the VM, its host and why.
type Transition struct {
	From   State     `json:"from"`
	To     State     `json:"to"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}
