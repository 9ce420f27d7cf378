// Package executor holds the ways the metasched daemon runs a job once the
// job's virtual cluster (its VMs) exists. The daemon's configuration names
// one (`executor: {name: emulated, time_scale: 0.001}`, `{name:
// host-command, run_as: USER}` or `{name: guest}`); the daemon builds a Run
// for each job (the job file, its VMs with the master first, a directory
// and a writer for the job's log) and calls Executor.Run, which blocks
// until the job has ended:
//
//	ex, err := executor.NewCommand(log, executor.CommandOptions{Grace: 5 * time.Second, RunAs: "metasched-jobs",
//		Accounts: map[string]string{"alice": "alice-jobs"}})
//	...
//	res, err := ex.Run(ctx, executor.Run{JobID: id, Owner: owner, Job: job, VMs: vms, Dir: dir, Output: logw})
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
// # Host command
//
// Command, the host-command executor (`executor: {name: host-command,
// run_as: USER, accounts: {OWNER: USER}}`), runs the job file's command
// (an argv list, not a shell line: use ["sh", "-c", "..."] for one) on the
// daemon's own machine, in the job's own working directory (Run.Dir/work,
// or CommandOptions.WorkDir when set): whoever may submit a job may run a
// program there, as its owner's account (CommandOptions.Accounts, by
// Run.Owner) or, for the owners that map does not name, as
// CommandOptions.RunAs, all together; a job whose owner has neither fails
// with ErrNoAccount (the daemon asks Admits at the submission). The
// command's environment is clean: PATH and LANG from the daemon's, HOME,
// USER and LOGNAME (the account's when the command switches to it), the
// names CommandOptions.Env allows, and the job's METASCHED_* variables;
// nothing else of the daemon's environment (its credentials, its secrets)
// reaches it. No account is root: a daemon that runs as root needs RunAs
// or Accounts, users whose uid is not 0 and, in Accounts, a uid of each
// owner's own, and each command switches to its account's uid, gid and
// supplementary groups; a daemon that runs as another user cannot switch
// users, and runs the commands as itself (RunAs "" or that user, no
// Accounts). NewCommand checks this (an unknown user, root, a shared uid,
// a switch the daemon cannot make are errors naming run_as or accounts)
// and logs a warning that the commands run on this machine and as whom.
// Only the command switches: its supervisor keeps the daemon's identity
// (it writes the attempt's files, which the daemon trusts). The run
// directory is the daemon's, crossed but not listed by others (0711), and
// the account cannot write in it; its hostfile and working directory are
// the account's and private (0600, 0700), and the attempts' directories
// and files the daemon's and private (0700, 0600): another owner's job
// reads none of them. A directory the account could write in there would
// let a job replace the files the daemon reads and writes as root (its
// exit record, the record of which process to signal, the hostfile it
// writes again at the next attempt). A warning in the log says when a
// directory above the run directory is not searchable by the account: a
// working directory it cannot enter fails the start.
//
// A job without a command is an error (ErrNoCommand), and so is a program
// that cannot be started (not found, not executable by the user): the
// error names it and the daemon fails the job with it.
//
// Before starting the command, Run writes the hostfile of the job's VMs to
// Run.Dir/hostfile (HostfileName): one VM per line, the master first, in the hostfile
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
//	METASCHED_TASK_OPS  the job's task_ops, as a decimal that parses back
//	                    exactly (FormatNumber)
//	METASCHED_TASK_BYTES the job's task_bytes, likewise
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
// The command runs in a cgroup (v2) of its own, made for the attempt in
// CommandOptions.CgroupParent (by default the daemon's own cgroup, found
// wherever the v2 hierarchy is mounted), and started inside it
// (CLONE_INTO_CGROUP): whatever it starts stays in it, a process that
// double-forks and calls setsid too, and the account cannot move out.
// NewCommand refuses the executor, with the reason, where it cannot make
// and kill such cgroups. When ctx is cancelled, Run sends SIGTERM to the
// supervisor, which sends SIGTERM to every process of the cgroup, then
// after CommandOptions.Grace (default 5 s) kills all that is left at once
// (cgroup.kill); Run returns, with ctx's error wrapped, once the exit is
// recorded and the output read to the end. Processes that the command
// leaves in its cgroup when it exits by itself get the same treatment, so
// a run leaves nothing behind. The supervisor is a child subreaper: the
// background processes of a job whose parent is gone are re-parented to
// it, and it reaps them, then removes the cgroup.
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
// command left running without it could be run again beside itself. What
// else the command started stays in its cgroup, whose path the attempt
// records before the supervisor starts: a Run that finds the supervisor
// gone without a record (it watched it die, or resumes after a restart)
// kills the cgroup and removes it. After a
// restart the daemon resumes the attempt (Run.Resume): the recorded exit
// completes the job, a supervisor still running is followed, and only an
// attempt with neither runs again. An emulated job resumes where it was,
// through Run.Elapsed.
//
// The host-command executor needs Linux; elsewhere its Run fails.
//
// # Guest
//
// Guest (`executor: {name: guest}`) runs the job's command inside every VM
// of the job, through the guest API of the VMs' site agents (GuestAgent;
// the agents reach each VM's QEMU guest agent): the daemon never talks to
// libvirt. A fresh attempt first contextualizes every VM with the guest
// agent's file calls (mkdir -p through GuestExec, then GuestWriteFile):
//
//	/etc/metasched/hostfile  the job's VMs, master first, in OpenMPI's hostfile
//	                         syntax by address: "10.77.1.12 slots=2 # name=j-1-m
//	                         site=spain host=spain-1 role=master"
//	/etc/hosts               localhost, then "ADDRESS NAME" of every VM of the job
//	/etc/metasched/job       the VM's METASCHED_ variables, for sh's "."
//
// (the VM's own address and host name come from its kernel command line).
// It then writes the command line (the job's argv, quoted for sh) to
// DIR/command, DIR being /run/metasched/JOB_ID/ATTEMPT in the guest, and
// runs the guest image's runner, `metasched-run start DIR /root/JOB_ID
// MAX_OUTPUT`, in every VM, the workers first and the master last, with
// the environment PATH, HOME=/root, METASCHED_JOB_ID, METASCHED_JOB_NAME,
// METASCHED_TASKS, METASCHED_TASK_OPS, METASCHED_TASK_BYTES,
// METASCHED_ROLE (master or worker), METASCHED_RANK (0
// for the master, 1.. for the workers in the order of Run.VMs),
// METASCHED_MASTER (the master's name), METASCHED_MASTER_ADDRESS and
// METASCHED_HOSTFILE=/etc/metasched/hostfile. A runner that does not start
// fails the run with the VM's name and its standard error. The runner
// keeps the command's output in DIR/output (at most MAX_OUTPUT bytes) and
// its exit status in DIR/exit, so neither depends on the daemon or the
// agent staying up.
//
// Every GuestOptions.Poll (default 500 ms) Run reads each VM's exit file
// and what its output file holds beyond what the log took, and writes the
// output to Run.Output line by line, each line prefixed with the VM's
// name ("j-1-w1| ..."), within the same bounds as Command (MaxOutput bytes
// of all VMs together, then a note; OutputRate bytes per second). A
// worker's exit is noted in the log; the master's ends the run: the rest
// of every VM's output is read, the workers still running are stopped
// (`metasched-run stop DIR`: SIGTERM to the command's process group,
// SIGKILL 5 s later) and the master's exit status is the Result. Before
// that the job's outputs are copied out of the master VM into OutputsDir,
// and with them the task-farm summary (taskfarm.SummaryFile) whenever the
// master wrote one, listed or not. A cancel
// stops the command in every VM and returns ctx's error; a cancel whose
// cause is ErrDetached leaves them running. The stops, then the removal
// of the job's directories on Slurm nodes but those of VMs it could not
// stop, take at most guestStopWait (30 s) in all.
//
// How far the log took each VM's output is kept in the attempt's
// directory on the daemon's side (Run.Dir/attempt-N/guest-state.json),
// written after each poll: after a restart of the daemon, Run with
// Run.Resume starts nothing, follows the runners' files from there, and
// repeats at most the lines of one poll. A master VM with no runner
// (DIR/pid missing) gives ErrLost: the job runs again. A VM whose agent
// fails is tried again, pausing from Poll/4 doubling to 5 s, for
// GuestOptions.RetryFor (default 1 min) before the run fails naming the VM
// and the error; an agent's ErrNotFound or ErrInvalid fails at once.
//
// A worker VM that the job has lost (Run.Lost names it: an elastic job
// goes on without a worker whose host a switch took, or that
// disappeared) is dropped from the run at the next poll, or at once when
// its agent fails meanwhile: the end of a line it had begun goes to the
// log, then "[metasched: worker VM NAME lost (WHY): the job goes on
// without it]", and it is neither followed nor stopped again (its VM is
// being destroyed: its agent's calls may fail or find nothing). The
// master's exit still ends the run. guest-state.json keeps the losses
// noted, so a restart notes each once.
//
// The design is described in docs/internals/agent.md of the
// repository, "Executors".
package executor
