// Package selection will hold the GramVM planning problem: sizing of the
// machines used in each cluster from computation and communication demands,
// the plan value, hill climbing with k restarts, exhaustive search for small
// grids, the MET, MCT and OLB baselines, and an explanation for every plan.
// It is a pure core: no I/O, no clock, seeded randomness, deterministic.
//
// Not built yet: see the README for what exists today.
package selection
