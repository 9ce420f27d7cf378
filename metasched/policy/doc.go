// Package policy is the switching policy as the daemon's cluster manager
// uses it: every 500 ms the manager reads each pool's queue and hosts and
// the switches in flight, updates its rate estimators (switching.ArrivalRate,
// switching.ServiceRate, switching.SwitchRate), and asks an Engine whether to
// move a host from one pool to another. The package takes plain Inputs and
// returns a Decision: it knows nothing of the daemon, its store or its
// agents.
//
// # From the live system to the model
//
// Each decision builds a switching.Model from the inputs (Model):
//
//   - a pool per job type, in the order of the inputs; j_i counts the jobs
//     of the type queued or running, k_i the hosts in the pool, m_ab the
//     hosts being switched from a to b, and N = Σ k_i + Σ m_ab;
//   - λ_i is the estimated arrival rate, per second; c_i the holding cost of
//     the job type, per job per second;
//   - ζ is one estimated switch rate (1 / the mean measured switch
//     duration) for every pair of pools, with no switch cost;
//   - queues are truncated at J = Config.QueueLimit for tables, with the
//     blocking price c_i·J/µ_i, and µ_i and ζ are floored at MinRate so that
//     a pool that has completed nothing yet still gives a valid model.
//
// µ_i is an approximation. In the papers a server serves one job at a
// time at rate µ_i, so pool i completes µ_i·min(j_i, k_i) jobs per unit
// time. Here a job spans many hosts. The estimator measures µ_i per busy
// host-second (one over the mean of hosts × seconds per completed job) and
// the model treats each host as one of the papers' servers. When all k_i
// hosts of a pool are busy, the model's µ_i·k_i completions per second is
// the pool's mean throughput: under load, when switching matters, the
// approximation is right on average. With fewer jobs than hosts it is
// pessimistic: a job on h hosts completes at h·µ_i per second where the
// model counts µ_i, so the heuristic and the tables see a lightly loaded
// pool drain more slowly than it does, and are a little quicker to bring it
// hosts. Rates also move with demand: the estimators follow them with a lag
// of a few events, and a table solved for old rates is re-solved (below).
//
// # Policies
//
//   - heuristic: Fisher et al.'s rule (switching.Heuristic) with constant
//     K, rebuilt each decision from the current rates; O(M²) per decision.
//   - static, best-static: switching.Static toward the proportional
//     allocation, or switching.NewBestStatic's allocation of least M/M/k
//     holding cost; reached by one switch per decision, and recomputed when
//     N or the pools change or a rate drifts by more than Config.Drift from
//     those the target was computed for (Palmer–Mitrani recompute it at
//     each demand phase). When no allocation is stable (too much load for
//     any split of the hosts) best-static falls back to static, with a note.
//     Recomputing best-static costs O(C(N+M−1, M−1)·N·M).
//   - none: never switches.
//   - optimal: a table of the optimal policy of the average criterion, read
//     from a file written by switching.WriteTable or solved here. A table
//     decides only when it is for the live pools (names, in order) and N,
//     and no rate drifted by more than Config.Drift from the rates it was
//     solved for. Otherwise the heuristic with K = 5 decides, and a solve
//     starts in the background (one at a time) on the live rates; when it
//     ends its table is in force. A table from a file is re-solved on its
//     own model (queue limit, switch costs, blocking prices, the pairs it
//     can switch) with the live rates and N; a table for other pools on the
//     live model. Config.Solve solves at the first decision, when the rates
//     are first known. A state space over Config.MaxStates is refused before
//     anything is allocated, with the number of states and the memory in
//     the log and in View().Note, and no solve is tried again: the heuristic
//     decides from then on, or the table, whenever it fits again.
//
// # The guard
//
// The papers' policies know neither the jobs that wait for hosts, nor the
// hosts that no job uses, nor the switches done a moment ago. The daemon
// asks them through a Guard (guard.go), which an operator expects of a
// cluster manager: no host goes to a pool none of whose jobs waits for
// hosts (else, once the queues are empty, the heuristic moves idle hosts
// back and forth by c_i·λ_i as the arrival estimates decay); a host
// switched from a to b does not go back to a within a minute, and no host
// goes from b to a while a switch from a to b is in flight; and, with the
// heuristic, when it does not switch, an idle host of a pool with nothing
// waiting goes to a pool whose jobs wait (Config.MoveIdle). Guard.Held
// gives the switches held, with why, in Inputs.Held; the heuristic chooses
// among the others and says what it would have done, a static or table
// policy's decision of a held switch becomes no switch. The package
// switching keeps the papers' rules unchanged for the research tools.
//
// Decide is cheap (the heuristic and static policies are O(M²), a table a
// lookup) and serialized; View may be called from any goroutine. The only
// goroutine the package starts is the background solve, which stops on
// its context or at Close.
//
// The design is described in docs/internals/daemon.md of the
// repository, "Pools and the policy in the live system", and in
// docs/research/switching.md, "Rate estimators".
package policy
