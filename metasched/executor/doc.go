// Package executor holds the ways the metasched daemon runs a job once the
// job's virtual cluster (its VMs) exists. The daemon's configuration names
// one (`executor: {name: emulated, time_scale: 0.001}` or `{name:
// command}`); the daemon builds a Run for each job (the job file, its VMs
// with the master first, a directory and a writer for the job's log) and
// calls Executor.Run, which blocks until the job has ended:
//
//	ex := executor.NewCommand(log, executor.CommandOptions{Grace: 5 * time.Second})
//	res, err := ex.Run(ctx, executor.Run{JobID: id, Job: job, VMs: vms, Dir: dir, Output: logw})
//	switch {
//	case err != nil:        // not run (the error says why), or stopped by ctx
//	case res.ExitCode == 0: // done
//	default:                // failed: res.Reason
//	}
//
// # Emulated
//
// Emulated does not run anything. It writes what it emulates to the job's
// output (the master VM and its host, the worker VMs per site, the predicted
// run time), waits for the run time the plan predicted (Run.Predicted, which
// the daemon has already scaled by time_scale so that a demo finishes in
// seconds) and reports the job done. After a daemon restart the daemon
// passes the time the job had already run as Run.Elapsed, and the run lasts
// only Predicted−Elapsed more (no time at all when that is negative). A
// cancel returns at once.
//
// # Command
//
// Command runs the job file's command (an argv list, not a shell line: use
// ["sh", "-c", "..."] for one) on the daemon's machine, in
// CommandOptions.WorkDir. A job without a command is an error (ErrNoCommand),
// and so is a program that cannot be started (not found, not executable):
// the error names it and the daemon fails the job with it.
//
// Before starting the command, Run writes the hostfile of the job's VMs to
// Run.Dir/hostfile: one VM per line, the master first, in the hostfile
// syntax of OpenMPI's mpirun (which ignores what follows a '#'), so that
// `mpirun --hostfile "$METASCHED_HOSTFILE" ...` starts a process per vCPU:
//
//	render-42-0 slots=2 # site=spain host=spain-1 role=master
//	render-42-1 slots=2 # site=spain host=spain-2 role=worker
//	render-42-2 slots=4 # site=latam-a host=latam-a-1 role=worker
//
// The command's environment is the daemon's plus:
//
//	METASCHED_HOSTFILE  absolute path of the hostfile
//	METASCHED_JOB_ID    the job's ID
//	METASCHED_JOB_NAME  the job's name
//	METASCHED_TASKS     the job's number of tasks
//
// Its standard output and standard error go, through one pipe, to
// Run.Output: interleaved in the order the command wrote them, each chunk
// read from the pipe written whole, by one goroutine at a time. The exit
// status becomes Result.ExitCode; a command killed by signal N gets
// 128+N, as in the shells, and a Reason naming the signal ("killed by
// signal SIGKILL (9)").
//
// # Stopping a command
//
// The command runs in a process group of its own. When ctx is cancelled,
// Run sends SIGTERM to the whole group (the command and what it started),
// then SIGKILL after CommandOptions.Grace (default 5 s) to what is left,
// and returns, with ctx's error wrapped, only after the command has been
// reaped and its output read to the end. Processes that the command leaves
// running in its group when it exits by itself get the same treatment, so
// a run leaves nothing behind; a process that moved to another group or
// session (setsid) escapes it. On Linux a process keeps existing as a
// zombie until its parent reaps it; the background processes of a job
// whose parent is gone are re-parented to init, or to the daemon when it
// called BecomeSubreaper, and Run then reaps them itself.
//
// # When the daemon dies
//
// The kernel kills the command (SIGKILL, through the parent-death signal)
// when the daemon dies, even by SIGKILL. Processes the command started are
// not killed by the kernel: they stop when the command's death closes what
// they need (an MPI launcher's daemons exit when mpirun goes) or run on as
// orphans. A command has no checkpoint: after a restart the daemon requeues
// the job and its command is run again from the start. Only an emulated job
// resumes where it was, through Run.Elapsed.
//
// The command executor needs Linux; elsewhere its Run fails.
//
// The design is described in docs/design.md of the repository, section
// "Executors".
package executor
