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
// # The supervisor
//
// Each attempt of a command (Run.Attempt) runs under a supervisor: the
// daemon's own binary run again (/proc/self/exe with SupervisorArg, which
// main hands to MaybeSupervise), in a session of its own, with no
// parent-death signal, so that it outlives the daemon. Its files are in
// Run.Dir/attempt-N: a lock the supervisor holds (flock) from before it
// starts until it has recorded the command's end, its PID and start time,
// the output, and the exit record. The supervisor starts the command, waits
// for it, and writes how it ended (exit code, signal, or why it could not
// start) to the exit record atomically and durably: a temporary file
// written and fsync'd, renamed, and the directory fsync'd. Only then does
// it exit and release the lock.
//
// Run follows its supervisor: it copies the output file to Run.Output as it
// grows (every 250 ms) and returns the recorded exit. An attempt's command
// runs at most once: a Run that finds the attempt's exit on record returns
// it, and one that finds the lock held follows the supervisor that holds
// it. With Run.Resume (the daemon restarted while the attempt ran), Run
// never starts the command; when it finds neither a record nor a
// supervisor (the machine restarted, or the daemon died before the
// supervisor started), it returns ErrLost, and the daemon runs the job
// again in a new attempt. A Run that watched its supervisor die without a
// record (killed from outside) fails with the reason.
//
// The command's standard output and standard error go, through one pipe,
// to the supervisor, which writes them to the attempt's output file:
// interleaved in the order the command wrote them. The file keeps at most
// CommandOptions.MaxOutput bytes (default 4 MiB), then a note that the
// output reached its cap; what the command writes after that is read and
// discarded, and the command goes on (its exit code is its result, and a
// verbose job is not a failed one). The supervisor reads the pipe at most
// CommandOptions.OutputRate bytes per second (default 1 MiB/s, beyond a
// burst of 64 KiB): a command that writes faster blocks on its pipe, so a
// command that writes without pause (yes) costs neither the supervisor nor
// the daemon a core, and the daemon takes at most the cap of each
// attempt's output. The exit status becomes Result.ExitCode; a command
// killed by signal N gets 128+N, as in the shells, and a Reason naming the
// signal ("killed by signal SIGKILL (9)").
//
// # Stopping a command
//
// The command runs in a process group of its own. When ctx is cancelled,
// Run sends SIGTERM to the supervisor, which sends SIGTERM to the whole
// group (the command and what it started), then SIGKILL after
// CommandOptions.Grace (default 5 s) to what is left; Run returns, with
// ctx's error wrapped, once the exit is recorded and the output read to the
// end. Processes that the command leaves running in its group when it
// exits by itself get the same treatment, so a run leaves nothing behind; a
// process that moved to another group or session (setsid) escapes it. The
// supervisor is a child subreaper: the background processes of a job whose
// parent is gone are re-parented to it, and it reaps them.
//
// A cancel whose cause is ErrDetached (context.WithCancelCause: the daemon
// is stopping) makes Run return at once and leaves the command running: the
// next start of the daemon resumes the attempt.
//
// # When the daemon dies
//
// Nothing happens to the command: its supervisor has no parent-death
// signal and runs in its own session, so a SIGKILL, a crash or a restart of
// the daemon, or a Ctrl-C on its terminal, does not reach it, and the
// command's output goes to a file, so the daemon's death does not SIGPIPE
// it. The command, though, has the parent-death signal SIGKILL towards its
// supervisor: a supervisor killed from outside records nothing, and a
// command left running without it could be run again beside itself.
// Processes the command started are not killed by the kernel. After a
// restart the daemon resumes the attempt (Run.Resume): the recorded exit
// completes the job, a supervisor still running is followed, and only an
// attempt with neither runs again. An emulated job resumes where it was,
// through Run.Elapsed.
//
// The command executor needs Linux; elsewhere its Run fails.
//
// The design is described in docs/design.md of the repository, section
// "Executors".
package executor
