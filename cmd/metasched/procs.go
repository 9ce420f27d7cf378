package main

import (
	"os"
	"runtime"
)

// extraProcs is how many Ps serve runs with beyond the CPUs Go would use
// (its default GOMAXPROCS), unless GOMAXPROCS is set.
//
// The daemon's goroutines wait in fsync: the store's commits, and each
// in-process site's record. A goroutine in a system call keeps its P
// until the runtime's monitor takes it back, so with as many Ps as CPUs
// the job drivers and the dispatch rounds wait behind fsyncs while the
// CPUs idle. A trace of the scale experiment (1,000 hosts, 2 CPUs, 2 Ps)
// had 73 goroutines runnable on average, 1.2 running and 1.3 in system
// calls (fsync and fdatasync, 88% of their time); the backlog drained at
// 769 placements/s at 5,000 hosts with 2 Ps and 1,038 with 8, the
// daemon's CPU 1.33 and 1.69 cores (with the store's group commit too,
// 1,086 with 4 Ps and 1,202 with 8, 1.81 cores). The extra Ps run goroutines
// while others wait for the disk; what they cost is the operating
// system's switches between more threads than CPUs when none waits.
const extraProcs = 6

// setProcs gives serve its Ps: Go's default plus extraProcs, unless the
// environment sets GOMAXPROCS. It returns how many it runs with.
func setProcs() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	n := runtime.GOMAXPROCS(0) + extraProcs
	runtime.GOMAXPROCS(n)
	return n
}
