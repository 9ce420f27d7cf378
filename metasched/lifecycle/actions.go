package lifecycle

import "time"

// Action is an output of Job.Step, for the driver to carry out in order.
// Commit comes first whenever the event changed the job; CreateVMs and
// Execute are answered by feeding an event back (Created or CreateFailed,
// Exited), tagged with the attempt, so that an answer for an attempt that
// has ended is recognised; the others have no answer.
type Action interface{ isAction() }

// Commit asks the driver to record the job's change in the store, in one
// transaction: the transition From → To with its Reason, Job's record and
// exit code. When From equals To the state stays: with a Reason (a running
// job lost a worker) the store records it as a transition of the state to
// itself, so that the job's history shows it; without one (a VM moved)
// only the record changed. Only when it is on disk does Job become the
// job's state in memory.
type Commit struct {
	From, To State
	Reason   string
	Job      Job
}

// Reserve promises the capacity of the VMs on their hosts, so that no other
// job is planned onto it while they are being created.
type Reserve struct{ VMs []VM }

// Unreserve ends what Reserve promised: the VMs exist now or will not be
// created. The driver gives the capacity of VMs that will not exist back at
// once, and keeps the promise of created VMs until the hosts' inventory
// counts them.
type Unreserve struct{ VMs []VM }

// Next asks the driver to feed Event to the job next, as part of attempt
// Attempt.
type Next struct {
	Event   Event
	Attempt int
}

// CreateVMs asks the agents to create the attempt's VMs. Answer: Created or
// CreateFailed.
type CreateVMs struct {
	Attempt int
	VMs     []VM
}

// Execute asks the executor to run the job on its VMs, Elapsed into its
// run. Resume says the daemon restarted while the attempt ran: the
// executor picks its run up (an emulated run where it was, a command's
// exit as recorded or its supervisor still running) instead of starting
// it. Answer: Exited.
type Execute struct {
	Attempt int
	VMs     []VM
	Elapsed time.Duration
	Resume  bool
}

// StopRun asks the driver to stop what runs for the attempt (VM creation,
// the executor) at once; their late answers are then stale.
type StopRun struct{ Attempt int }

// DestroyVMs asks the agents to destroy VMs; one already gone is fine.
type DestroyVMs struct{ VMs []VM }

func (Commit) isAction()     {}
func (Reserve) isAction()    {}
func (Unreserve) isAction()  {}
func (Next) isAction()       {}
func (CreateVMs) isAction()  {}
func (Execute) isAction()    {}
func (StopRun) isAction()    {}
func (DestroyVMs) isAction() {}
