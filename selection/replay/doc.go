// Package replay simulates a stream of requests on a grid, each one the
// same master-worker job, placed one after the other by a selection
// algorithm: the experiment of the GramVM paper (004, §4.1, Figure 1), where
// 19 requests of 300 processes each arrive over time and hill climbing
// (every cluster's machines, the best master) is compared with MCT (the
// single cluster that completes first).
//
// It is pure and deterministic: no I/O, no clock, a seeded PCG; the same
// Config gives the same Result.
//
// # Arrivals
//
// The first request arrives at 0. The gaps between arrivals are drawn once
// from the seed, and every algorithm replays the same arrival times:
//   - "uniform": Uniform(0, 2/Rate), a steady, low rate;
//   - "exponential": Exp(Rate) (mean 1/Rate), Poisson arrivals that come
//     in bursts.
//
// # Machines
//
// Every machine of every cluster has a ready time, 0 at first. A request
// that starts at time t on a plan takes, in each cluster of the plan, as
// many machines as the plan uses there among those free at t (ready <= t):
// its workers, plus one for the master in the master's cluster. Their ready
// time becomes t + Runtime, the plan's predicted run time. A plan is
// computed with selection.Problem.Free set to the machines free at t, so a
// busy machine is never counted twice.
//
// # Order and start times
//
// Requests start in arrival order (first come, first served, no
// overtaking): request r may not start before request r−1 started. Its
// candidate start times are t0 = max(arrival_r, start_{r−1}) and every
// machine ready time after t0, ascending. The last candidate has every
// machine free, so a request runs if any plan can run it on an idle grid;
// one that cannot (the job's VM fits no cluster, no worker can be fed) is
// an error (ErrInfeasible) naming the request and the reason.
//
// # Algorithms
//
// Each algorithm is simulated separately, from an idle grid:
//   - hillclimb and exhaustive: at each candidate t, ascending, plan the job
//     on the machines free at t (Planner.HillClimb with Config.Restarts, or
//     Planner.Exhaustive, any master); keep the plan of minimum completion
//     t + Runtime, the earliest t on a tie; stop once t reaches the best
//     completion found. Infeasible plans (no worker) are skipped. Waiting
//     for more machines is thus chosen only when it finishes sooner.
//   - mct, minimum completion time: over every cluster c and candidate t,
//     the plan S = {c} (Planner.Alone) on the machines free at t; the
//     minimum completion, ties to the earliest t, then grid order.
//   - met, minimum execution time: the cluster c* whose plan alone with all
//     its machines free runs fastest (ties in grid order), whatever is
//     busy; then the earliest completion on c* alone, as mct restricted
//     to c*.
//   - olb, opportunistic load balancing: the cluster with the earliest
//     candidate t at which it can run the job alone (a feasible Alone plan,
//     however slow), ties in grid order, started at that t.
//
// Completions within a relative 1e-12 tie.
//
// # Results
//
// Per algorithm and request: arrival, start, wait = start − arrival, run
// (the plan's run time), total = wait + run, end = start + run, the master
// cluster, the machines used (workers and the master) and the clusters
// (names joined with "+", the master's first). Per algorithm: the mean
// wait, run and total time, the makespan (the last end), and, when mct was
// simulated, the improvement of the mean total time over mct's,
// 1 − total/total_mct (0.7: 70% less time).
//
// # Cost
//
// A request scans at most one candidate per machine, plus one; each
// candidate costs a planner (O(n)) and a plan: a hill climb, an exhaustive
// search (O(n²·2^n)) or n Alone plans (O(n²) with their explanations).
// The context is checked between requests and inside the searches.
//
// The design is described in docs/research/selection.md of the
// repository, "A stream of jobs: the paper's Figure 1".
package replay
