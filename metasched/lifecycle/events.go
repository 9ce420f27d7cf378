package lifecycle

import (
	"time"

	"github.com/metasched/metasched/gramvm"
)

// Event is an input to Job.Step: a decision of the daemon (Plan, Stop,
// Resume, WorkerLost), the next step the machine asked for (Provision), or
// the answer to an action (Created, CreateFailed, Exited, Moved). At is the driver's
// clock when it happened; the machine has no clock of its own.
type Event interface{ isEvent() }

// Plan places a queued job: the dispatcher found it a placement on free
// hosts. VMs are the attempt's VMs on the placement's hosts; Predicted its
// run time in seconds; Reason the transition's reason.
type Plan struct {
	Placement *gramvm.Placement
	VMs       []VM
	// Predicted is the job's predicted run time, StartEnd the part of it
	// for the job's start and end (Record.StartEnd).
	Predicted, StartEnd float64
	Reason              string
	At                  time.Time
}

// Provision starts creating the VMs of a planned job (asked for by Plan's
// Next action).
type Provision struct{ At time.Time }

// Created answers CreateVMs: every VM of the attempt is up.
type Created struct {
	Attempt int
	VMs     []VM
	At      time.Time
}

// CreateFailed answers CreateVMs: some VM could not be created (the ones
// that were are destroyed by the actions Step returns). Permanent says the
// job can never run as it is (a VM too large for any host), so it fails
// instead of going back to the queue.
type CreateFailed struct {
	Attempt   int
	VMs       []VM
	Err       string
	Permanent bool
	// Boot says a VM of the attempt was made but did not boot (its
	// image): such failures count toward MaxProvisionFailures; a host
	// that was full or busy does not.
	Boot bool
	At   time.Time
}

// Exited answers Execute: the job's run ended. Err is set when the executor
// itself failed; Code is the command's exit code (nil for the emulated
// executor) and Reason the executor's word on it. TasksDone, when the job's
// master wrote a task-farm summary, is the tasks its workers did per site,
// and ProgramSeconds the program's own run time by that summary (its
// master's start to its last result).
type Exited struct {
	Attempt        int
	Code           *int
	Reason         string
	Err            string
	TasksDone      map[string]int
	ProgramSeconds float64
	At             time.Time
}

// Resume picks up a job that was running when the daemon stopped: the
// emulated executor resumes where it was (its VMs still there), the
// command executor takes the exit its command's supervisor recorded or
// follows the supervisor that still runs it.
type Resume struct{ At time.Time }

// Moved says bandwidth tuning moved one of the job's VMs to another host.
type Moved struct {
	VM, Site, Host string
	At             time.Time
}

// Stop ends the job's attempt: To is Queued (requeue: its host was switched
// away, its agent was lost, the daemon restarted under it), Cancelled or
// Failed. Attempt, when not 0, is the attempt the stop is meant for: a stop
// that arrives once the job has begun another is stale. Preempted says a
// switch took one of the job's hosts: the record counts it (Preemptions), so
// that the next switch spares the job.
type Stop struct {
	To        State
	Reason    string
	Attempt   int
	Preempted bool
	At        time.Time
}

// WorkerLost says a worker VM of a running job is lost: a switch took
// its host, it disappeared from its host (destroyed outside the daemon),
// or its host was unreachable for the agent-loss grace. The daemon sends
// it for elastic jobs only (their program survives the loss of a worker:
// the task farm's master gives the lost worker's tasks to the others); a
// job that is not elastic is stopped instead. The job goes on without the
// VM while it keeps at least one worker: its record no longer lists the
// VM among its VMs but among its lost workers, with At and Reason, and
// the VM is destroyed. The loss of the master VM, or of the job's last
// worker, sends the job back to the queue as Stop{To: Queued} would, and
// Preempted (a switch took the host) then counts as a Stop's. Attempt,
// when not 0, is the attempt the loss is meant for.
type WorkerLost struct {
	VM, Host  string
	Reason    string
	Attempt   int
	Preempted bool
	At        time.Time
}

func (Plan) isEvent()         {}
func (Provision) isEvent()    {}
func (Created) isEvent()      {}
func (CreateFailed) isEvent() {}
func (Exited) isEvent()       {}
func (Resume) isEvent()       {}
func (Moved) isEvent()        {}
func (Stop) isEvent()         {}
func (WorkerLost) isEvent()   {}
