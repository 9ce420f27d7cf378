// Package slurm drives a cluster that runs Slurm, for a site whose machines
// belong to Slurm rather than to metasched: its inventory (nodes, their
// CPUs, memory, state and partition), the moves of a node between
// partitions that a pool switch makes, metasched's own allocations in a
// partition and the commands run in them.
//
// It speaks to Slurm through its client commands, as an operator would:
// sinfo and squeue with --json (Slurm's OpenAPI v0.0.38 documents, decoded
// by ParseNodes and ParseJobs, which read only), scontrol to change nodes
// and partitions, salloc --no-shell to allocate, srun to run a command in an
// allocation and scancel to release one. Every command runs with an
// environment of its own (SLURM_CONF, a fixed PATH and, for srun, the
// command's variables), under a time limit: Slurm's clients wait for a
// controller that is down.
//
// Jobs metasched allocates are named "metasched:" and the job's name
// (AllocName); every other job is Slurm's own, counted as busy and never
// touched.
//
// Sub-package slurmtest starts real Slurm clusters for tests.
package slurm
