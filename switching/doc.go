// Package switching is the pool-switching engine: the M-pool Markov
// decision process of Fisher et al. and Palmer–Mitrani, its optimal policies,
// and the heuristic, static and cµ policies a running system can use
// instead.
//
// # The model
//
// N servers are split among M pools, one per job type. Jobs of type i arrive
// at rate λ_i, are served at rate µ_i by each busy server of pool i and cost
// c_i per unit time while in the system. A server can be switched from pool a
// to pool b; the switch takes an exponential time of rate ζ_ab (or no time,
// with instant switches) and may cost a lump c_ab. The state is S = (j, k, m):
// queue lengths (jobs in service included), servers in place, and servers in
// transit. Queues are truncated at J: an arrival at j_i = J−1 is blocked.
//
// A Model is decoded from YAML by ParseModel (the command opens the file);
// every error names the field. Decisions are Actions: 0 does nothing, d > 0
// starts the switch Pairs(M)[d−1], numbered like the papers
// ((1,2),(2,1),(1,3),(3,1),(2,3),(3,2),…).
//
// # Solving
//
// Solve uniformizes the chain at rate Λ (Model.Lambda: a number, "auto" =
// Σλ + N·max(max µ, max ζ), or the papers' "paper" = Σλ + N·max µ + N·max ζ)
// and iterates
//
//	V_n(S) = h(S)/Λ + min_d [c(d) + α Σ q_d(S,S') V_{n−1}(S')]
//
// with h(S) = Σ c_i j_i + Σ λ_i·b_i·[j_i = J−1]. At Λ = 1 and b = 0 this is
// exactly the papers' recurrence. Ties between actions (within 1e-9 of the
// minimum, relative) go to doing nothing, then to the lowest action number.
//
// Two criteria:
//   - Average (the default, and what a running system should use): the
//     gain times Λ is the long-run average cost per unit time. Its default
//     method (DefaultMethod) is Krylov: policy iteration whose evaluations
//     solve each policy's linear system by BiCGSTAB, preconditioned by
//     ILU(0) and, when one queue is much slower than another, a coarse
//     level. ValueIteration is relative value iteration instead: α = 1
//     against a reference state, stopped when the span of V_n − V_{n−1} is
//     below the tolerance; it barely moves on stiff models.
//   - Discounted: the papers' α per uniformized step. It is myopic when
//     switches are slow relative to the event rate: α^Λ per unit time
//     discounts a switch's benefit, which arrives 1/ζ time units later, to
//     almost nothing. With α = 0.95 and Fisher et al.'s Figure 4 rates (N = 4,
//     µ = 1, ζ = 0.1, load 3.4, Λ = 7.4) the discounted policy never switches
//     at all, so it does no better than the static policy, while the heuristic
//     does hundreds of times better in the real system.
//
// Methods (SolveOptions.Method): Krylov (the average criterion's default),
// value iteration (the discounted criterion's), finite horizons
// (SolveOptions.Horizon), and Howard's policy improvement with iterative
// evaluation (the papers' eq. 7); the policy iterations start from the
// heuristic or the cµ rule.
//
// # The truncation
//
// Each pool's queue is truncated at J_i − 1 (Model.QueueLimit for every
// pool, or Pool.QueueLimit for one). Blocking arrivals at J_i−1 for free
// makes abandoning a queue look cheap: at
// heavy load the "optimal" policy of the truncated model moves a pool's last
// server away and never returns it, and that policy diverges in the real,
// untruncated system. So each blocked arrival of type i costs b_i
// (Model.BlockingCosts, or c_i·J_i/µ_i with BlockingAuto, the default of
// model files); b = 0 gives the papers' model. BlockingLower prices it at
// the least it adds to the untruncated system (LowerBlocking), which makes
// the average-cost optimum a lower bound on the untruncated system's. SolveOptions.Boundary reports
// the stationary fraction of time some queue sits at J_i−1 under the solved
// policy, in all and per pool: when it is not small, raise that pool's J_i.
//
// # Performance
//
// The state space has C(N + D − 1, D − 1)·Π J_i states (J_i is pool i's
// truncation: the model's queue_limit, or the pool's own), D = M + the number of
// transit lanes (servers in transit are counted by destination and rate,
// not by the pool they left, which changes no value: see Space): M lanes
// when every pair switches at one rate, 1.56 M states for M = 3, N = 6,
// J = 15 (10.1 M counted by pair).
// States are indexed configuration-major, so the Π J_i queue states of one
// server configuration are contiguous. One sweep is two passes: the expected
// next value of every state when nothing is done (a few streaming
// multiply-adds per transition kind over a configuration block), then the
// minimum over actions, each of which reads the block of the configuration it
// leads to. A sweep costs O(S·(M² + M)) and runs on all cores; the result does
// not depend on the number of workers. Memory is BytesPerState per state, and
// KrylovBytesPerState more for Krylov (StateBytes); NewSpace refuses a space
// over the caller's limit before allocating.
//
// # Policies
//
// Table (a solved or loaded policy), Heuristic (Fisher et al.'s rule with
// constant K; for M = 2 and K = 1 the Palmer–Mitrani rule, with the
// inequalities the right way round), Static, CMu and Never all implement
// Policy. NewBestStatic moves to the fixed allocation with the lowest exact
// M/M/k holding cost (BestStaticAllocation, by Erlang C: MeanInSystem): the
// best a policy that never switches can do. The names a user gives these
// policies, in the daemon's configuration and to the simulator, are
// PolicyNames. The simulator is the sub-package
// sim; the papers' figures are experiments in the sub-package experiment.
// WriteTable and ReadTable save and load tables. The package does no I/O,
// keeps no clock (SolveOptions.Now is an input) and is deterministic.
//
// The design is described in docs/research/switching.md of the
// repository.
package switching
