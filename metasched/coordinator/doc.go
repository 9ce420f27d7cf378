// Package coordinator moves one host at a time from one pool (job type) to
// another with the switching protocol of Kubicek et al. (Fig. 6): prepare the
// release at the source pool, reconfigure the host, prepare the add at the
// destination pool, then commit both. It is a pure, single-threaded state
// machine in the style of etcd raft's RawNode: no goroutines, no I/O, no
// clock. A driver loop outside this package feeds it events with
// Coordinator.Step, carries out the actions it returns, and feeds the answers
// back as events.
//
// # Driving it
//
//	c := coordinator.New()
//	acts, err := c.Step(coordinator.Start{ID: "s1", From: "render", To: "sim", At: now})
//	// acts: Persist{...}, PrepareRelease{ID: "s1", Pool: "render", Exclude: [...]}
//
// For each returned slice, the driver writes every Persist record to its
// journal durably before carrying out the actions after it, then carries out
// the requests (remote calls, with a timer each) and feeds their answers back:
//
//	PrepareRelease → Released | ReleaseFailed
//	Reconfigure    → Reconfigured | ReconfigureFailed
//	PrepareAdd     → Added | AddFailed
//	CommitRelease  → Committed{Side: SideRelease} | CommitFailed{Side: SideRelease}
//	CommitAdd      → Committed{Side: SideAdd} | CommitFailed{Side: SideAdd}
//	Revert         → Reverted | RevertFailed
//
// AbortRelease, AbortAdd, MarkStranded and Rejoin are notifications with no
// answer. When the timer of a step fires, the driver feeds Timeout; an answer
// that arrives after its step was given up on no longer fits the phase, Step
// rejects it with ErrWrongPhase, and the driver drops it.
//
// # The phases
//
//	Start
//	  │
//	  ▼   fail/timeout
//	releasing ─────────────────────────────────────▶ cancelled
//	  │ Released: host chosen, its jobs requeued       ▲
//	  ▼   fail/timeout                                 │ Reverted
//	reconfiguring ─────────────────────▶ cancelling ───┘
//	  │ Reconfigured                      ▲      │
//	  ▼   fail/timeout (+AbortAdd)        │      │ RevertFailed/timeout
//	adding ───────────────────────────────┘      ▼
//	  │ Added                                 stranded ── Cleared ──▶ Rejoin
//	  ▼   fail/timeout of either side            ▲ RevertFailed/timeout
//	committing ────────────────────────▶ rolling_back
//	  │ both sides Committed                     │ Reverted
//	  ▼                                          ▼
//	done                                     rolled_back
//
// Done, cancelled, rolled_back and stranded are final. The machine has no
// cycles, so every switch ends in one of them once each step is answered or
// timed out.
//
// # The rules
//
//   - One switch at a time per host. A host is held by a switch from Released
//     until the switch is final, and by a stranded switch until an operator
//     clears it. PrepareRelease carries the held hosts in Exclude, and a
//     Released naming a held host is rejected with ErrHostBusy (the switch
//     stays in releasing; the driver's timer will cancel it).
//   - Every accepted event returns a Persist with the switch's new state
//     first: the journal always runs ahead of the world.
//   - A failure or timeout before commit cancels: the system goes on as if
//     no switch had been tried. In releasing nothing was changed, so the
//     switch is cancelled at once, with an AbortRelease (Host empty) so that
//     the source drops any preparation made under the switch ID. From
//     reconfiguring or adding the host may already be (half) reconfigured,
//     so the switch enters cancelling: AbortAdd (only if the add was
//     prepared) and Revert to the source pool; Reverted then cancels, with
//     an AbortRelease that gives the host back to the source pool.
//   - A failure or timeout of either commit call rolls back: AbortAdd (the
//     destination forgets or removes the host) and Revert; Reverted ends in
//     rolled_back with an AbortRelease that re-adds the host to the source
//     pool even if its release was already committed. An answer for the
//     other commit call arriving later is rejected with ErrWrongPhase.
//   - The commit calls are issued together; the switch is done when both are
//     acknowledged.
//   - A host that can join neither pool is stranded: a Revert that fails or
//     times out ends the switch in stranded with MarkStranded, and the host
//     stays out of every switch until Cleared. Cleared names the pool the
//     operator returns the host to, or none for the source pool of the
//     switch; it returns a Rejoin. Clearing a host that is not stranded is
//     an error (ErrNotStranded).
//   - Errors are for events that make no sense; the state is then unchanged.
//     Failures of the protocol are not errors: they are phases.
//
// # Crashes
//
// The journal is the list of Persist records, each the whole state of one
// switch after a transition. Restore rebuilds the coordinator from it and
// returns the requests to re-issue for every switch in flight, and the final
// notification of every final switch. The components that carry them out
// must be idempotent per switch ID, since the crash may have come after an
// action was carried out but before its answer was journaled. Coordinator
// Journal returns a compacted journal.
//
// # Cost
//
// Step costs O(log n) map work in the number of switches known, and Start
// O(h log h) to list the h held hosts. Switches and Journal cost O(n log n).
// A final switch stays until the driver forgets it (Forget), which it may
// do once the switch is over (not Open: final, and its host cleared if it
// was stranded) and its final notification is carried out; a driver that
// forgets them keeps only the open switches, and its costs do not grow
// with the switches of the past (their history is the driver's to keep).
//
// The design is described in docs/internals/switch-protocol.md of
// the repository.
package coordinator
