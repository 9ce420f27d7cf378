package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/selection"
)

// VM is one virtual machine of a job's virtual cluster.
type VM struct {
	Name   string // the VM's host name, as the other VMs of the job reach it
	Site   string // the site (cluster) it runs in
	Host   string // the physical host it runs on
	Master bool   // the job's master; every other VM is a worker
	// Address is the VM's IPv4 address on its site's network with its
	// prefix length (10.77.1.12/16), as its agent gave it; the guest
	// executor needs it, the others ignore it.
	Address   string
	VCPUs     int
	MemoryMiB int
	// User is the VM's job user, as its agent reports it (a cloud image's,
	// made by cloud-init): the guest executor runs the command as it.
	// Empty: as root.
	User string
	// Kind is the agent's kind of VM: "slurm" for an allocation on a
	// node of a Slurm site (hp.KindSlurm), whose files the guest executor
	// keeps under a directory of the VM's own on the node (GuestNodeDir);
	// empty for a VM.
	Kind string
}

// Run is one run of a job: what an Executor needs to run it.
type Run struct {
	JobID string
	// Owner is who submitted the job (its principal: a token's name,
	// cert:NAME): Command runs the job as its owner's account.
	Owner string
	Job   *selection.Job // the job file: Name, Tasks, Command...
	VMs   []VM           // the job's virtual cluster, the master first

	// Predicted is the emulated run time: the plan's predicted run time,
	// already scaled by the daemon's time_scale. Command ignores it.
	Predicted time.Duration
	// Elapsed is the time the emulated run had already run before a daemon
	// restart: the run lasts Predicted−Elapsed more. Command ignores it (a
	// command's attempt resumes through Resume).
	Elapsed time.Duration

	// Dir is a directory for the job's files (the hostfile, each
	// attempt's in Dir/attempt-N, and Command's working directory
	// Dir/work); Run creates it when missing. Command needs it; Emulated
	// writes no file.
	Dir string
	// Attempt numbers this run of the job (the daemon's attempt): Command
	// runs an attempt's command at most once, and keeps its files apart.
	Attempt int
	// Resume says the daemon restarted while this attempt ran: Command
	// then never starts the command, it follows the supervisor that runs
	// it or returns the exit it recorded, and fails with ErrLost when
	// neither is there. Emulated resumes through Elapsed.
	Resume bool
	// Output receives what the job prints (Command: its stdout and stderr;
	// Emulated: a description of what it emulates). Run calls Output.Write
	// from one goroutine at a time and never after it returned. Nil
	// discards the output.
	Output io.Writer
	// OutputFrom is how many bytes of the attempt's output Output already
	// took (before a restart): Command and Guest write what follows them.
	// Emulated ignores it.
	OutputFrom int64
	// Lost, when set, says which worker VMs of the attempt the job has
	// lost since it started, by name, with why (an elastic job goes on
	// without them: a switch took the host, the VM disappeared, its host
	// was lost). It may be called from any goroutine, often. Guest asks it
	// at every poll and before it tries a failing VM's agent again: a lost
	// VM is no longer followed nor stopped (its agent's calls may fail:
	// the VM is being destroyed), what it printed so far stays in the log,
	// and a line of the log says it was lost; the master's exit still
	// decides. Emulated and Command ignore it.
	Lost func() map[string]string
}

// Result is how a run ended.
type Result struct {
	// ExitCode is 0 when the job is done, else the command's exit status,
	// or 128+N when signal N killed it (the shells' convention).
	ExitCode int
	// Reason says why a run failed ("exit status 3", "killed by signal
	// SIGKILL (9)"); empty when ExitCode is 0.
	Reason string
}

// Executor runs a job on its virtual cluster once the VMs exist.
//
// Run blocks until the job has ended or ctx is cancelled. A job that ran to
// its end returns a nil error, whatever its exit code: the Result says
// whether it is done or failed. A non-nil error means the job could not be
// run (bad input, a program that cannot start: the daemon fails the job with
// the error as its reason) or was stopped because ctx was cancelled
// (errors.Is(err, context.Canceled) or context.DeadlineExceeded); after a
// cancel the Result still tells how a command ended, for the job's log.
type Executor interface {
	Name() string
	Run(ctx context.Context, r Run) (Result, error)
}

var (
	_ Executor = (*Emulated)(nil)
	_ Executor = (*Command)(nil)
	_ Executor = (*Guest)(nil)
)

// ErrNoCommand is returned (wrapped, naming the job) by Command.Run for a
// job whose file has no command.
var ErrNoCommand = errors.New("job has no command")

type noCommandError struct{ job string }

func (e *noCommandError) Error() string {
	return fmt.Sprintf("job %s has no command: the command executor runs the job's command", e.job)
}

func (e *noCommandError) Unwrap() error { return ErrNoCommand }

// jobName names the run's job in messages: its name, else its ID.
func jobName(r Run) string {
	if r.Job != nil && r.Job.Name != "" {
		return r.Job.Name
	}
	return r.JobID
}

func output(r Run) io.Writer {
	if r.Output == nil {
		return io.Discard
	}
	return r.Output
}

// outputRefused logs that Output refused what the job printed, and what
// becomes of it (then): as the daemon stops (Output's error wraps
// ErrDetached) that is no fault of the job's, and the restart takes it;
// otherwise it is a warning.
func outputRefused(log zerolog.Logger, err error, then string) {
	if errors.Is(err, ErrDetached) {
		log.Info().Err(err).Msg("daemon stopping: job output not taken, " + then)
		return
	}
	log.Warn().Err(err).Msg("job output not taken: " + then)
}

// FormatNumber writes a job's task_ops or task_bytes for a command's
// environment (METASCHED_TASK_OPS, METASCHED_TASK_BYTES): the shortest
// decimal that parses back to exactly the same float64
// (strconv.ParseFloat), such as 200000000000 as 2e+11.
func FormatNumber(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
