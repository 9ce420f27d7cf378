// Package taskfarm is the master-worker application of the papers that
// GramVM places: a master holds T tasks and hands them to worker
// processes (one per vCPU of each worker VM), which compute each task's
// operations and send the result back, each receiving its next task's
// input while it computes one. The program
// cmd/taskfarm runs it in the VMs of a job (the bundled guest image has
// it at /usr/bin/taskfarm); this package is the program's whole logic.
// It is pure Go and links no cgo, so that the program is one static
// binary.
//
// # A task
//
// A job's task_ops (Oper) is the number of operations of the compute
// kernel per task, and its task_bytes (Comm) the bytes a task exchanges
// with the master, split by [Split]: the result is the kernel's 32-byte
// digest when task_bytes ≥ 64, else half of task_bytes, and the input is
// the rest. So nearly all of Comm flows from the master to the workers,
// as the model's b/Comm counts it on a full-duplex link.
//
// The kernel ([Kernel]) is four 64-bit lanes mixed, one operation at a
// time, with the input's 64-bit words in turn: operation k is one round
// of x = (s[k mod 4] xor w[k mod n]) · 0x9e3779b97f4a7c15, s[k mod 4] =
// (x xor x>>29) + s[(k+1) mod 4]. An operation costs the same whatever
// the input's size, so a task's compute time is task_ops over the
// kernel's rate, which [Bench] measures (`taskfarm bench`). The digest is
// the four lanes, finalized with MurmurHash3's fmix64.
//
// # The wire protocol
//
// Master and workers speak over TCP (the master's port is 7420 by
// default), in frames:
//
//	length  uint32, big-endian: the bytes after it (1 at least)
//	type    1 byte
//	payload length-1 bytes, by type (integers big-endian):
//
//	1 hello     worker → master, first: version uint16, procs uint16 (the
//	            VM's worker processes), proc uint16 (this one's index),
//	            prefetch uint16 (the tasks the connection may hold, 1 to
//	            16), name (the rest, UTF-8, at most 255 bytes)
//	2 welcome   master → worker, the answer: version uint16, heartbeat
//	            uint32 ms, timeout uint32 ms, input_bytes uint32,
//	            result_bytes uint8
//	3 request   worker → master: give me a task (empty)
//	4 task      master → worker: task uint64, ops uint64, input (the rest,
//	            input_bytes of it)
//	5 result    worker → master: task uint64, result (the rest,
//	            result_bytes of it); also asks for the next task
//	6 heartbeat either way (empty)
//	7 done      master → worker: the run is over (empty)
//	8 error     master → worker: why the master drops the connection (the
//	            rest, UTF-8, at most 1024 bytes); the connection closes
//
// A connection holds at most its prefetch of tasks (its hello says how
// many, N): the tasks given to it and not yet answered, and its requests
// not yet served, together. A worker process sends N requests at once
// after the welcome, computes the first task that comes and sends its
// result, which asks for the next task; so while it computes one task
// the next N-1 are given and their inputs cross the link, and a link
// that takes no longer to bring an input than the kernel takes to
// compute a task never leaves the process waiting: a task costs the
// longer of the two, not their sum (the planning model's rate min(n ·
// perf / Oper, b / Comm) counts on that overlap). N is 2 by default
// ([DefaultPrefetch]); 1 is one task at a time: the link idles while the
// process computes. The master takes results in any order, for any task
// the connection holds.
//
// A connection that holds no task is given one at once, while one is
// left. A request of a connection that holds a task already, a prefetch,
// waits for the next result (of any connection) or for a lost
// connection's tasks: then the waiting requests are served, one task at a
// time to the connection that holds the fewest (the first to ask among
// equals), while tasks are left. So no process gets a second task while
// another that has asked holds none, and a prefetch takes only the tasks
// left over once every connection holds one. The processes connect one by
// one and the master does not know how many will come: a prefetch served
// at once would give the first ones the tasks of those still connecting.
// Waiting for a result, a job of T tasks on P ≥ T processes that have all
// connected before its first result runs every task on a different
// process. The cost is at the start: a process's second input crosses the
// link after the run's first result, not all the while it computes its
// first task. When no task is left to give but some are still computed
// elsewhere, a request waits, and a task of a lost connection goes to the
// waiting requests in the same order (a process with nothing to compute
// first).
//
// A frame that does not decode, a frame the protocol does not allow (a
// request or a result for a task it does not hold, beyond the
// connection's prefetch; a result for a task that is not the run's), or
// another version, is answered with an error frame and the connection is
// dropped. A hello's version is read before the rest of it, so that a
// worker of version 1 (whose hello had no prefetch) is told the versions
// differ. The frames are decoded by [ReadFrame] and [DecodeFrame]
// (fuzzed); [AppendFrame] encodes them.
//
// # Losing workers
//
// A worker VM that is destroyed sends no FIN: each side sends a
// heartbeat every fifth of the timeout (the welcome says both; the
// master's timeout is 15 s by default) when it has nothing else to send,
// and drops a connection on which nothing arrived for the timeout (each
// read waits at most that long, so a long task frame that keeps arriving
// is not dropped). TCP keepalive is on as well. A live-migrated VM pauses
// for well under a second and keeps its connections: it is not lost.
// The master gives every task a dropped connection held (the one being
// computed and those on their way), first, to other workers (each
// counted as reissued, and in the summary as the VM's lost_in_flight);
// the job does not restart. A worker whose connection is lost connects
// again, for up to its retry period (5 min by default), and sends on the
// new connection the result it finished meanwhile, which asks for a task
// as a request does (it drops the tasks it had not begun: they are the
// master's to give again): the master takes the result unless the task
// is done already (then it counts a duplicate and discards it), so no
// task counts twice.
//
// The master identifies a worker VM by the address its connections come
// from, and names it and its site from the job's hostfile
// ([ParseHostfile]). When every task is done it takes the [Summary],
// tells every connection the run is over (done), answers later hellos
// the same, and ends once the connections have closed or after its
// linger (3 s). A worker told the run is over exits 0; one that cannot
// reach its master for its retry period exits non-zero.
//
// # Measuring the network
//
// [Sink] and [Probe] (`taskfarm sink` and `taskfarm probe`) measure the
// bandwidth between two VMs: the probe sends N bytes on one TCP
// connection and half-closes it, the sink times its reads from the first
// to the last and answers with one JSON line.
//
// The design is described in docs/internals/taskfarm.md of the
// repository.
package taskfarm
