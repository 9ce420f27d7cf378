package api

import (
	"slices"
	"time"
)

// State is a step of a job's lifecycle (docs/internals/lifecycle.md,
// "States and transitions").
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

// Transition is one recorded change of a job's state. The first transition
// of every job is from "" to queued; a running job that lost a worker VM
// and went on records one from running to running naming the VM.
type Transition struct {
	From   State     `json:"from"`
	To     State     `json:"to"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// JobVM is one VM of a job's attempt: JOB-aATTEMPT-m for the master,
// JOB-aATTEMPT-wN for the workers.
type JobVM struct {
	Name   string `json:"name"`
	Site   string `json:"site"`
	Host   string `json:"host"`
	Master bool   `json:"master,omitempty"`
}

// JobLostVM is a worker VM a running elastic job lost and went on
// without: which, on which host, when and why.
type JobLostVM struct {
	JobVM
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}
