// Package selection is GramVM's planning core (Bertogna et al., 004 §3):
// given a grid of clusters and a master-worker job, it chooses the master
// cluster, the worker clusters and how many machines of each, so that the
// job runs fastest while every worker stays efficient, and it says why.
//
// # Problem and sizing
//
// A Problem is a cluster graph (package graph), a Job (ParseJob reads job
// files strictly) and the free machines of each cluster. A cluster whose
// machines cannot hold the job's VM, or with none free, takes no part.
// A plan is a master cluster m and a set S ∋ m. Sizing follows
// docs/research/selection.md ("Sizing") exactly: the master takes one
// machine of m, whose other machines work over its LAN; a worker cluster
// c ≠ m gets the bandwidth b_c = min(B(c, m), uplink_c, s_c), where B is
// the widest path and s_c its share of m's uplink in proportion to
// free·perf; it uses n_c = min(free_c, ⌊b_c·Oper/(θ·Comm·perf_c) + 1e-9⌋)
// machines, so that none waits for data more than 1−θ of its time, at the
// fluid rate rate_c = min(n_c·perf_c/Oper, b_c/Comm) tasks/s.
//
// # Whole tasks
//
// Those n_c are what the caps allow; the plan's run time counts whole
// tasks (docs/research/selection.md, "Whole tasks"). A VM of s vCPUs runs
// s task-farm processes, m_c = n_c·s slots, so a slot's task takes
// σ_c = s·Oper/perf_c; the link carries L_c = b_c/Comm tasks/s, one input
// after another, and a task starts once its input is in. By time t
// cluster c has finished
// D_c(t) = min(⌊(t − σ_c)·L_c⌋⁺, Σ_{i≤m_c} ⌊(t − i/L_c)/σ_c⌋⁺) tasks (the
// fastest any schedule can), and the run time is t* = min{t : Σ D_c(t) ≥ T},
// between T/R and T/R + max_c (σ_c + max(σ_c, 1/L_c)) (R = Σ rate_c),
// found by bisection over the completions. The plan keeps the
// fewest machines that finish T tasks by t* (greedily, the one finishing
// most first), each cluster's tasks being what its machines finish. Plans
// compare by t* (within a relative 1e-12), then fewer machines, lower cost,
// fewer clusters, and names.
//
// Every Plan explains itself: for each cluster used its bandwidth, workers
// and the Limit that bound them (free, uplink, path, master-share,
// efficiency), and for each cluster left out the reason: its VM does not
// fit, it has nothing free, or what adding it would do to the rate.
//
// # Exhaustive search
//
// Planner.Exhaustive evaluates all n·2^(n−1) plans, in O(n²·2^n); it is
// the reference of the tests and refuses more than MaxExhaustive (20)
// candidate clusters. Only plans whose T/R is not later than the best t*
// so far get t* by bisection. 16 clusters take about 0.15 s.
//
// # Hill climbing with k restarts
//
// Planner.HillClimb is the paper's hill climbing with one restart per
// Kruskal zone (graph.Zones), each from the zone's cluster of largest
// free·perf as master alone. Read literally — steepest ascent with moves
// add a cluster, drop a cluster, make another member the master — it stops
// on plateaus and ridges: a cluster whose share of the master's uplink is
// worth less than one machine adds nothing, and the better plan around
// another master is several non-improving moves away. On 3,000 random
// grids of 3–12 clusters (the tests' seeded generator: regions joined by
// slow links, clusters of 1–16 machines, jobs from compute- to
// communication-bound) the literal algorithm reaches the exhaustive
// optimum on about 95% and falls as low as 0 (no plan) on some. And t* is
// a step function: a move often leaves it where it is.
//
// The search here escapes in three ways:
//
//  1. Two neighbourhoods, in variable neighbourhood descent: first add or
//     drop a cluster; only when neither improves, the wider one: swap a
//     worker cluster for an outside one, make a worker cluster the
//     master, hand the master role to a worker cluster and drop the old
//     master's, or bring in an outside cluster as the new master. Each is
//     steepest ascent; after any improvement the descent starts again
//     from the first.
//  2. Jumps between masters: at a local optimum, for the candidate masters
//     in order of an upper bound on any plan's rate around them (the
//     master's own LAN rate plus the lesser of its uplink's task rate and
//     the other clusters' free machines and own uplinks), it climbs with
//     that master fixed from the master alone, and moves there when the
//     result is better, descending again. The order stops where the bound
//     cannot beat the current rate, and skips a master around which no
//     plan can end by the best t* so far (no cluster ends a task before a
//     slot's task time and its input's transfer); a fixed-master climb is
//     remembered across restarts.
//  3. Restarts from every zone, as in the paper.
//
// On the plateaus of t* the climb ascends in its own order: t*, then the
// tasks finished just before t* (how near the next step down is), then the
// plan order; its local optima are trimmed of clusters the sizing gives no
// machine, and the best trimmed plan is kept. With these it reaches the
// exhaustive t* on 99.7–100% of those grids for jobs of 1 to 100,000
// tasks, never below 0.95 of it (TestHillClimbAgainstExhaustive).
//
// Speed. Moves with the same master are bounded in O(log |S| + g), g
// the number of distinct free-machine counts among the workers whose share
// binds: for each candidate master the planner keeps, per cluster, its
// part when the share does not bind and the weight Σ free·perf up to which
// it does not; workers sorted by that weight make the unbound ones a
// suffix with precomputed sums, and a bound worker's machines and rate
// depend only on its free machines, its perf and the plan's weight, so
// they are summed by group. A move whose fluid bound T/R is later than the
// best t* so far is skipped; the others get t* by bisection, O(|S|) a
// probe. On big grids the candidate lists are capped
// (listCap = 16: the best-looking clusters to add, the lowest-rate
// workers to drop or swap out, the best-bounded masters); on grids of up
// to 16 candidates every move is tried. A plan on a random grid of 1,000
// clusters with 3 restarts takes 0.18–0.34 s (BenchmarkHillClimb1000).
//
// # Baselines
//
// Planner.Baseline places the whole job on one cluster as MET, MCT or OLB
// (Braun et al. 2001), given the time each cluster is ready; the run time
// on cluster c is that of the plan S = {c} (Planner.Alone).
//
// The package is a pure core: no I/O, no clock, deterministic; a Planner
// is not safe for concurrent use.
//
// The design is described in docs/research/selection.md of the
// repository.
package selection
