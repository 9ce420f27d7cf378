// Package lifecycle is the job lifecycle of the metasched daemon: a pure,
// single-threaded state machine per job, in the style of the switch
// coordinator (and of etcd raft's RawNode): no goroutines, no I/O, no
// clock. The daemon's driver feeds a Job events with Job.Step, commits the
// transition it returns to the store, and only then takes the returned Job
// as the job's state and carries out the other actions, feeding their
// answers back as events. The design is described in
// docs/internals/lifecycle.md of the repository.
//
// # The states
//
//	          Plan                Provision             Created
//	queued ─────────▶ planned ─────────────▶ provisioning ─────────▶ running
//	  ▲  │               │                     │     │                 │  │
//	  │  │               │ Stop                │     │ CreateFailed    │  │ Exited
//	  │  │               ▼                     │     │ (permanent)     │  ▼
//	  │  └── Stop ──▶ cancelled | failed ◀─────┴─────┴── Stop ─────────┘ done | failed
//	  │                                                                  │
//	  └───────── Stop{To: queued} (requeue), CreateFailed ───────────────┘
//
// Queued, Planned, Provisioning and Running are live; Done, Failed and
// Cancelled are terminal. A requeue (the job's host was switched to another
// pool, its agent was lost, the daemon restarted before the job ran, or
// provisioning failed for want of room) sends a planned, provisioning or
// running job back to the queue; its next attempt has new VM names.
//
// A running elastic job (one whose program survives the loss of a worker)
// that loses a worker VM (WorkerLost: a switch took its host, it
// disappeared, its host was lost) stays running without it: the record
// moves the VM from VMs to LostWorkers, the store keeps a transition from
// running to running with the reason, and the VM is destroyed. Only the
// loss of its master VM, or of its last worker, requeues it.
//
// # Driving it
//
//	next, acts, err := job.Step(lifecycle.Plan{Placement: pl, VMs: vms, Predicted: 12, Reason: why, At: now})
//	// acts: Commit{queued → planned}, Reserve{vms}, Next{Provision}
//
// The first action of every change is a Commit. When the store refuses it,
// the driver keeps the job it had and drops the actions; an event that
// reports something that already happened (Created, Exited) is fed again
// once the store takes writes. Then:
//
//	CreateVMs  → Created | CreateFailed
//	Execute    → Exited
//	Next       → feed its event
//
// Reserve, Unreserve, StopRun and DestroyVMs have no answer. Every answer
// names its attempt; an answer for an attempt that ended is stale and
// changes nothing (a VM created for a cancelled attempt is destroyed).
package lifecycle
