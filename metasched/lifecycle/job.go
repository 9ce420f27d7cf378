package lifecycle

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/metasched/metasched/gramvm"
)

// ErrNotAllowed is returned by Step for an event that the job's state does
// not allow (planning a job that is not queued, cancelling a finished one).
// The job is unchanged.
var ErrNotAllowed = errors.New("not allowed")

// VM is one VM of a job's attempt, named JOB-aATTEMPT-m for the master and
// JOB-aATTEMPT-wN for the workers, so that VMs of two attempts never
// collide.
type VM struct {
	Name   string `json:"name"`
	Site   string `json:"site"`
	Host   string `json:"host"`
	Master bool   `json:"master,omitempty"`
}

// Record is what the daemon keeps of a job beside its state: the plan of
// its current (or last) attempt, its VMs, the predicted run time, when it
// started and finished running, and how many attempts it had. The store
// keeps it as the job's data, in this JSON.
type Record struct {
	Placement *gramvm.Placement `json:"placement,omitempty"`
	VMs       []VM              `json:"vms,omitempty"`
	// Predicted is the run time the daemon expects, in seconds: the plan's
	// run time for the executors that run a real program (command, guest),
	// scaled by time_scale for the emulated one.
	Predicted float64   `json:"predicted_s,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	Finished  time.Time `json:"finished,omitzero"`
	Attempts  int       `json:"attempts,omitempty"`
	// Preemptions counts the attempts a switch stopped by taking one of the
	// job's hosts.
	Preemptions int `json:"preemptions,omitempty"`
	// ProvisionFailures counts the attempts with a VM that did not boot:
	// after MaxProvisionFailures the job fails.
	ProvisionFailures int `json:"provision_failures,omitempty"`
	// Tasks are the job's tasks per cluster of its plan: predicted when it
	// was planned, and done as the task-farm summary of its master says,
	// once it ended with one.
	Tasks []ClusterTasks `json:"tasks,omitempty"`
	// StartEnd is the part of Predicted for the job's start and end,
	// which the plan's T/R does not hold: the VMs' contextualization, the
	// program's start and the end's detection, as the pool's recent jobs
	// measured them (0: none measured yet).
	StartEnd float64 `json:"start_end_s,omitempty"`
	// ProgramSeconds is the run time the job's task-farm summary gives:
	// from its master's start to its last result (0: no summary).
	ProgramSeconds float64 `json:"program_s,omitempty"`
	// LostWorkers are the worker VMs the current (or last) attempt of an
	// elastic job lost and went on without, oldest first: VMs holds the
	// workers that remain, Placement still what was planned.
	LostWorkers []LostVM `json:"lost_workers,omitempty"`
}

// ClusterTasks is one cluster's share of a job's tasks: Predicted is the
// tasks its plan gives it, the whole tasks its workers finish by the plan's
// run time (docs/research/selection.md, "Whole tasks"; the master's cluster
// counts when it has workers); Done is what the job's task-farm summary says
// its workers did (nil: no summary).
type ClusterTasks struct {
	Name      string  `json:"name"`
	Predicted float64 `json:"predicted"`
	Done      *int    `json:"done,omitempty"`
}

// PredictedTasks is the tasks each cluster of a plan with workers is
// predicted to do, in the plan's order (the master's cluster first): the
// plan's per-cluster tasks, or T·rate_c/R for a plan stored before plans
// counted whole tasks (none of its clusters has tasks). None for a plan
// without a rate (infeasible).
func PredictedTasks(pl *gramvm.Placement) []ClusterTasks {
	if pl == nil || !(pl.Plan.Rate > 0) {
		return nil
	}
	whole := false
	for _, c := range pl.Plan.Clusters {
		whole = whole || c.Tasks > 0
	}
	var out []ClusterTasks
	for _, c := range pl.Plan.Clusters {
		switch {
		case whole && c.Machines > 0:
			out = append(out, ClusterTasks{Name: c.Name, Predicted: float64(c.Tasks)})
		case !whole && c.Machines > 0 && c.Rate > 0:
			out = append(out, ClusterTasks{Name: c.Name, Predicted: float64(pl.Plan.Tasks) * c.Rate / pl.Plan.Rate})
		}
	}
	return out
}

// withDone is tasks with the tasks done per site of a summary: a cluster
// of the plan the summary does not name did none; a site the plan did not
// predict (a worker VM that moved there) follows, in name order.
func withDone(tasks []ClusterTasks, done map[string]int) []ClusterTasks {
	out := make([]ClusterTasks, 0, len(tasks)+len(done))
	for _, c := range tasks {
		n := done[c.Name]
		c.Done = &n
		out = append(out, c)
	}
	var extra []string
	for site := range done {
		if !slices.ContainsFunc(tasks, func(c ClusterTasks) bool { return c.Name == site }) {
			extra = append(extra, site)
		}
	}
	slices.Sort(extra)
	for _, site := range extra {
		n := done[site]
		out = append(out, ClusterTasks{Name: site, Done: &n})
	}
	return out
}

// LostVM is a worker VM a running job lost (WorkerLost): which, on which
// host, when and why.
type LostVM struct {
	VM
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}

// MaxProvisionFailures is how many attempts with a VM that did not boot a
// job has before it fails instead of being requeued: an image that does
// not boot fails every attempt, a guest that was slow once does not.
const MaxProvisionFailures = 3

// Job is one job's lifecycle: its state, the reason of its last
// transition, its record and its exit code. It is a value: Step returns the
// next one and leaves the receiver as it was.
type Job struct {
	ID       string
	Type     string
	State    State
	Reason   string
	Record   Record
	ExitCode *int
}

// New is a job just submitted: queued.
func New(id, typ string) Job {
	return Job{ID: id, Type: typ, State: Queued, Reason: "submitted"}
}

// Step feeds one event to the job. It returns the job after the event and
// the actions that carry it out, in order. Every transition comes first as
// a Commit: the driver commits it to the store and only then takes the
// returned job as the job's state and carries out the other actions; when
// the commit fails, the driver keeps the job it had and drops the actions.
//
// An event for an attempt that has ended (an answer that arrives after the
// job was stopped or requeued) returns the job unchanged with at most the
// clean-up of that attempt's VMs. An event the state does not allow returns
// ErrNotAllowed.
func (j Job) Step(ev Event) (Job, []Action, error) {
	switch e := ev.(type) {
	case Plan:
		return j.plan(e)
	case Provision:
		if j.State != Planned {
			return j, nil, j.notAllowed("provision")
		}
		return j.to(Provisioning, fmt.Sprintf("creating %d VMs", len(j.Record.VMs)), CreateVMs{Attempt: j.attempt(), VMs: j.Record.VMs})
	case Created:
		if j.stale(e.Attempt, Provisioning) {
			return j, cleanUp(e.VMs), nil
		}
		n := j
		n.Record.Started = e.At
		return n.to(Running, fmt.Sprintf("%d VMs up", len(n.Record.VMs)),
			Unreserve{VMs: j.Record.VMs}, Execute{Attempt: j.attempt(), VMs: j.Record.VMs})
	case CreateFailed:
		if j.stale(e.Attempt, Provisioning) {
			return j, cleanUp(e.VMs), nil
		}
		if e.Permanent {
			return j.end(Failed, "provisioning failed: "+e.Err, nil, e.At, false)
		}
		n := j
		if e.Boot {
			n.Record.ProvisionFailures++
		}
		if f := n.Record.ProvisionFailures; e.Boot && f >= MaxProvisionFailures {
			return n.end(Failed, fmt.Sprintf("provisioning failed %d times, the last: %s", f, e.Err), nil, e.At, false)
		}
		return n.requeue("provisioning failed, requeued: "+e.Err, false)
	case Exited:
		if j.stale(e.Attempt, Running) {
			return j, nil, nil
		}
		if e.TasksDone != nil {
			j.Record.Tasks = withDone(j.Record.Tasks, e.TasksDone)
			j.Record.ProgramSeconds = e.ProgramSeconds
		}
		switch {
		case e.Err != "":
			return j.end(Failed, "executor: "+e.Err, nil, e.At, false)
		case e.Code != nil && *e.Code != 0:
			reason := fmt.Sprintf("exit code %d", *e.Code)
			if e.Reason != "" {
				reason += ": " + e.Reason
			}
			return j.end(Failed, reason, e.Code, e.At, false)
		case e.Code != nil:
			return j.end(Done, "exit code 0", e.Code, e.At, false)
		default:
			return j.end(Done, "completed", nil, e.At, false)
		}
	case Resume:
		if j.State != Running {
			return j, nil, j.notAllowed("resume")
		}
		return j, []Action{Execute{Attempt: j.attempt(), VMs: j.Record.VMs, Elapsed: e.At.Sub(j.Record.Started), Resume: true}}, nil
	case Moved:
		return j.moved(e)
	case Stop:
		return j.stop(e)
	case WorkerLost:
		return j.workerLost(e)
	}
	return j, nil, fmt.Errorf("job %s: unknown event %T", j.ID, ev)
}

func (j Job) notAllowed(what string) error {
	return fmt.Errorf("job %s is %s: cannot %s it: %w", j.ID, j.State, what, ErrNotAllowed)
}

// attempt is the number of the job's current attempt.
func (j Job) attempt() int { return j.Record.Attempts }

// stale reports whether an answer for attempt n no longer fits: the job
// left the state that waited for it, or began another attempt.
func (j Job) stale(n int, want State) bool { return n != j.attempt() || j.State != want }

// cleanUp destroys the VMs of an attempt that ended while they were being
// created.
func cleanUp(vms []VM) []Action {
	if len(vms) == 0 {
		return nil
	}
	return []Action{DestroyVMs{VMs: vms}}
}

func (j Job) plan(e Plan) (Job, []Action, error) {
	if j.State != Queued {
		return j, nil, j.notAllowed("plan")
	}
	if e.Placement == nil || len(e.VMs) == 0 {
		return j, nil, fmt.Errorf("job %s: a plan needs a placement and VMs: %w", j.ID, ErrNotAllowed)
	}
	n := j
	n.Record = Record{Placement: e.Placement, VMs: e.VMs, Predicted: e.Predicted, StartEnd: e.StartEnd, Attempts: j.Record.Attempts + 1,
		Preemptions: j.Record.Preemptions, ProvisionFailures: j.Record.ProvisionFailures, Tasks: PredictedTasks(e.Placement)}
	return n.to(Planned, e.Reason, Reserve{VMs: e.VMs}, Next{Event: Provision{At: e.At}, Attempt: n.attempt()})
}

func (j Job) moved(e Moved) (Job, []Action, error) {
	if j.State != Provisioning && j.State != Running {
		return j, nil, j.notAllowed("move a VM of")
	}
	n := j
	n.Record.VMs = make([]VM, len(j.Record.VMs))
	found := false
	for i, v := range j.Record.VMs {
		if v.Name == e.VM {
			v.Site, v.Host, found = e.Site, e.Host, true
		}
		n.Record.VMs[i] = v
	}
	if !found {
		return j, nil, fmt.Errorf("job %s has no VM %s: %w", j.ID, e.VM, ErrNotAllowed)
	}
	return n, []Action{Commit{From: j.State, To: j.State, Job: n}}, nil
}

// workerLost takes a lost worker VM out of the running job, which goes on
// with the workers left; the loss of the master VM or of the last worker
// requeues the job instead.
func (j Job) workerLost(e WorkerLost) (Job, []Action, error) {
	if j.State.Terminal() {
		return j, nil, j.notAllowed("lose a worker of")
	}
	if e.Attempt != 0 && e.Attempt != j.attempt() {
		return j, nil, nil // meant for an attempt that has ended
	}
	if slices.ContainsFunc(j.Record.LostWorkers, func(l LostVM) bool { return l.Name == e.VM }) {
		return j, nil, nil // already lost: a repeat
	}
	if j.State != Running {
		return j, nil, j.notAllowed("lose a worker of")
	}
	i := slices.IndexFunc(j.Record.VMs, func(v VM) bool { return v.Name == e.VM })
	if i < 0 {
		return j, nil, fmt.Errorf("job %s has no VM %s: %w", j.ID, e.VM, ErrNotAllowed)
	}
	vm := j.Record.VMs[i]
	host := e.Host
	if host == "" {
		host = vm.Host
	}
	workers := 0
	for _, v := range j.Record.VMs {
		if !v.Master && v.Name != e.VM {
			workers++
		}
	}
	if vm.Master || workers == 0 {
		what := "the master VM"
		if !vm.Master {
			what = "the last worker VM"
		}
		return j.stop(Stop{To: Queued, Attempt: e.Attempt, Preempted: e.Preempted, At: e.At,
			Reason: fmt.Sprintf("%s %s on %s lost (%s): requeued", what, e.VM, host, e.Reason)})
	}
	reason := fmt.Sprintf("worker VM %s on %s lost (%s): the job goes on with %d %s", e.VM, host, e.Reason, workers, plural(workers, "worker"))
	n := j
	n.Reason = reason
	n.Record.VMs = slices.Delete(slices.Clone(j.Record.VMs), i, i+1)
	lost := vm
	lost.Host = host
	n.Record.LostWorkers = append(slices.Clone(j.Record.LostWorkers), LostVM{VM: lost, At: e.At, Reason: e.Reason})
	return n, []Action{Commit{From: Running, To: Running, Reason: reason, Job: n}, DestroyVMs{VMs: []VM{vm}}}, nil
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// stop ends the job's attempt: back to the queue, cancelled or failed.
func (j Job) stop(e Stop) (Job, []Action, error) {
	if j.State.Terminal() {
		return j, nil, j.notAllowed("stop")
	}
	if e.Attempt != 0 && e.Attempt != j.attempt() {
		return j, nil, nil // meant for an attempt that has ended
	}
	switch e.To {
	case Queued:
		if j.State == Queued {
			return j, nil, nil // already waiting: nothing to do
		}
		n, acts, err := j.requeue(e.Reason, true)
		if e.Preempted {
			n.Record.Preemptions++
			if c, ok := acts[0].(Commit); ok {
				c.Job = n
				acts[0] = c
			}
		}
		return n, acts, err
	case Cancelled, Failed:
		return j.end(e.To, e.Reason, nil, e.At, true)
	}
	return j, nil, fmt.Errorf("job %s: stop to %q: %w", j.ID, e.To, ErrNotAllowed)
}

// requeue sends the job back to the queue and undoes its attempt (see
// undo).
func (j Job) requeue(reason string, stop bool) (Job, []Action, error) {
	n := j
	n.Record.VMs, n.Record.Placement, n.Record.Tasks, n.Record.LostWorkers, n.Record.ProgramSeconds = nil, nil, nil, nil, 0
	n.Record.Started = time.Time{}
	return n.to(Queued, reason, j.undo(stop)...)
}

// end finishes the job: done, failed or cancelled, and undoes its attempt
// (see undo).
func (j Job) end(to State, reason string, code *int, at time.Time, stop bool) (Job, []Action, error) {
	n := j
	if code != nil {
		c := *code
		n.ExitCode = &c
	}
	if !j.Record.Started.IsZero() {
		n.Record.Finished = at
	}
	return n.to(to, reason, j.undo(stop)...)
}

// undo lists what ends the job's attempt in the world: its run stops (when
// the attempt is stopped from outside; an attempt that ended by itself has
// nothing left running), the capacity promised to it is given back, and its
// VMs go.
func (j Job) undo(stop bool) []Action {
	var out []Action
	if stop && j.State != Queued {
		out = append(out, StopRun{Attempt: j.attempt()})
	}
	if j.State == Planned || j.State == Provisioning {
		out = append(out, Unreserve{VMs: j.Record.VMs})
	}
	if j.State != Queued && j.State != Planned && len(j.Record.VMs) > 0 {
		out = append(out, DestroyVMs{VMs: j.Record.VMs})
	}
	return out
}

// to is the transition to state s for the reason, then the actions.
func (j Job) to(s State, reason string, then ...Action) (Job, []Action, error) {
	if !CanTransition(j.State, s) {
		return j, nil, fmt.Errorf("job %s: %s to %s: %w", j.ID, j.State, s, ErrNotAllowed)
	}
	n := j
	n.State, n.Reason = s, reason
	return n, append([]Action{Commit{From: j.State, To: s, Reason: reason, Job: n}}, then...), nil
}
