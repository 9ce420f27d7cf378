package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// DefaultGrace is CommandOptions.Grace when it is not set.
const DefaultGrace = 5 * time.Second

// HostfileName is the name of the hostfile that Command.Run writes in the
// run's directory.
const HostfileName = "hostfile"

const (
	// killWait bounds the wait for a job's processes to vanish after
	// SIGKILL (a process in uninterruptible sleep outlives it for a while).
	killWait = 2 * time.Second
	// drainWait bounds the wait for the output pipe's end of file once no
	// process of the job's group is left: a process that left the group
	// may still hold the pipe.
	drainWait = time.Second
)

// CommandOptions configures the host-command executor.
type CommandOptions struct {
	// RunAs is the user of this machine the jobs' commands run as, by
	// name or numeric uid: each command runs with its uid, gid and
	// supplementary groups, and with HOME (and USER, LOGNAME) set to its
	// when the daemon's environment sets them; the supervisor keeps the
	// daemon's identity. A daemon that runs as root must give one whose
	// uid is not 0: jobs never run as root. A daemon that runs as another
	// user cannot switch users: RunAs is then "" or that same user, and
	// the commands run as the daemon. NewCommand checks it.
	RunAs string
	// Grace is how long a cancelled command's process group has between
	// SIGTERM and SIGKILL. Zero or negative means DefaultGrace.
	Grace time.Duration
	// WorkDir is the working directory of the commands; "" is each job's
	// run directory (Run.Dir, which holds its hostfile). A relative
	// program path ("./master") is relative to it.
	WorkDir string
	// Env names the variables of the daemon's environment that the
	// commands get besides CommandEnvNames and the METASCHED_* variables:
	// nothing else of the daemon's environment (its secrets, its
	// credentials) reaches a job.
	Env []string
	// MaxOutput bounds the bytes kept of an attempt's output (what comes
	// after is discarded, with a note); 0 means DefaultMaxOutput.
	MaxOutput int64
	// OutputRate bounds the bytes per second read from a command's output
	// (beyond a burst of 64 KiB): a command that writes faster blocks on
	// its pipe. 0 means DefaultOutputRate.
	OutputRate int64
	// Supervisor is the argv prefix that starts a supervisor (the command
	// and its flags follow); nil means this binary run again,
	// {"/proc/self/exe", SupervisorArg}, whose main calls MaybeSupervise.
	Supervisor []string
}

// Errors of Command.Run, to be tested with errors.Is.
var (
	// ErrDetached: Run returned because its context was cancelled with
	// this cause (context.WithCancelCause): the daemon is stopping, and
	// the command runs on under its supervisor, for a later Run of the
	// same attempt with Resume to pick up.
	ErrDetached = errors.New("the daemon is stopping: the command runs on under its supervisor")
	// ErrLost: a Run with Resume found neither a record of how the
	// attempt's command ended nor a supervisor running it (the machine
	// restarted, or the daemon died before it started the command): the
	// job must run again.
	ErrLost = errors.New("the command neither left an exit record nor runs under a supervisor")
)

// Command is the host-command executor: it runs the job's command on the
// daemon's own machine, as CommandOptions.RunAs, with a hostfile of the
// job's VMs (see the package documentation), each attempt under a
// supervisor that outlives the daemon. It is safe for concurrent use.
type Command struct {
	log zerolog.Logger
	opt CommandOptions
	as  account // who the commands run as
}

// NewCommand returns the host-command executor, or an error (naming
// run_as) when opt.RunAs does not fit the user the daemon runs as: see
// CommandOptions.RunAs. It logs a warning that the jobs' commands run on
// this machine, and as whom.
func NewCommand(log zerolog.Logger, opt CommandOptions) (*Command, error) {
	as, err := runAsAccount(opt.RunAs, os.Geteuid(), systemUser)
	if err != nil {
		return nil, err
	}
	if opt.Grace <= 0 {
		opt.Grace = DefaultGrace
	}
	if opt.MaxOutput <= 0 {
		opt.MaxOutput = DefaultMaxOutput
	}
	if opt.OutputRate <= 0 {
		opt.OutputRate = DefaultOutputRate
	}
	if len(opt.Supervisor) == 0 {
		opt.Supervisor = []string{"/proc/self/exe", SupervisorArg}
	}
	c := &Command{log: log.With().Str("executor", CommandName).Logger(), opt: opt, as: as}
	how := "as the daemon's own user"
	if as.switched {
		how = "switching to that user from root"
	}
	c.log.Warn().Str("run_as", as.name).Uint32("uid", as.uid).Uint32("gid", as.gid).
		Msgf("the host-command executor runs every job's command on this machine, the daemon's own, as user %s (%s): a job can do whatever that user can here", as, how)
	return c, nil
}

// CommandName is the host-command executor's name in the daemon's
// configuration (executor: {name: host-command, run_as: USER}).
const CommandName = "host-command"

// Name returns "host-command", the executor's name in the daemon's
// configuration.
func (c *Command) Name() string { return CommandName }

// tailEvery is how often Run copies what the command wrote to Output, and
// looks whether a supervisor it did not start has ended.
const tailEvery = 250 * time.Millisecond

// Run writes the hostfile in r.Dir and runs r.Job.Command for attempt
// r.Attempt under a supervisor, in its own process group, with its output
// to the attempt's output file and, from there, to r.Output; it returns how
// the command exited once the supervisor has recorded it. An attempt runs
// its command at most once: a Run of an attempt whose exit is recorded
// returns that exit, and one whose supervisor runs follows it. With
// r.Resume (after a restart of the daemon), Run never starts the command:
// when neither holds it returns ErrLost. On cancel it has the supervisor
// stop the group (SIGTERM, SIGKILL after the grace period) and returns,
// once the exit is recorded, ctx's error wrapped; a cancel whose cause is
// ErrDetached returns at once and leaves the command running.
// r.Predicted and r.Elapsed are ignored.
func (c *Command) Run(ctx context.Context, r Run) (Result, error) {
	name := jobName(r)
	if err := ctx.Err(); err != nil {
		return Result{}, fmt.Errorf("job %s: %w", name, err)
	}
	if r.Job == nil {
		return Result{}, fmt.Errorf("job %s: no job file", name)
	}
	argv := r.Job.Command
	if len(argv) == 0 {
		return Result{}, &noCommandError{job: name}
	}
	if err := supported(); err != nil {
		return Result{}, fmt.Errorf("job %s: %w", name, err)
	}
	hf, err := hostfile(r.VMs)
	if err != nil {
		return Result{}, fmt.Errorf("job %s: hostfile: %w", name, err)
	}
	if r.Dir == "" {
		return Result{}, fmt.Errorf("job %s: no run directory for the hostfile", name)
	}
	dir, err := filepath.Abs(r.Dir)
	if err != nil {
		return Result{}, fmt.Errorf("job %s: run directory: %w", name, err)
	}
	adir := AttemptDir(dir, r.Attempt)
	if err := os.MkdirAll(adir, 0o755); err != nil {
		return Result{}, fmt.Errorf("job %s: run directory: %w", name, err)
	}
	hfPath := filepath.Join(dir, HostfileName)
	if err := os.WriteFile(hfPath, hf, 0o644); err != nil {
		return Result{}, fmt.Errorf("job %s: hostfile: %w", name, err)
	}
	log := c.log.With().Str("job", r.JobID).Int("attempt", r.Attempt).Logger()
	if c.as.switched {
		// The command, another user, reads the hostfile whatever the
		// daemon's umask; it writes nothing here (its output goes through
		// a pipe to the supervisor), and may not: the directory and the
		// attempt's files stay the daemon's.
		for _, f := range []struct {
			path string
			mode os.FileMode
		}{{dir, 0o755}, {hfPath, 0o644}} {
			if err := os.Chmod(f.path, f.mode); err != nil {
				return Result{}, fmt.Errorf("job %s: run directory: %w", name, err)
			}
		}
		if why := unreachable(hfPath, c.as); why != "" {
			log.Warn().Str("hostfile", hfPath).Msgf("user %s cannot reach the job's run directory (%s): its command cannot read METASCHED_HOSTFILE; give that directory search permission for others (chmod o+x)", c.as, why)
		}
	}

	// The lock tells whether a supervisor runs the attempt.
	lock, err := os.OpenFile(filepath.Join(adir, lockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return Result{}, fmt.Errorf("job %s: attempt lock: %w", name, err)
	}
	held, err := tryLock(lock, true)
	if err != nil {
		lock.Close()
		return Result{}, fmt.Errorf("job %s: attempt lock: %w", name, err)
	}
	if !held {
		lock.Close()
		log.Info().Msg("the command's supervisor runs: following it")
		return c.follow(ctx, log, r, name, adir, nil, true)
	}
	// No supervisor runs the attempt: it has ended, or never started.
	if rec, err := readExit(adir); err == nil {
		lock.Close()
		log.Info().Int("exit_code", rec.ExitCode).Msg("the command's exit is on record: it does not run again")
		return c.follow(ctx, log, r, name, adir, nil, false)
	} else if !errors.Is(err, fs.ErrNotExist) {
		lock.Close()
		return Result{}, fmt.Errorf("job %s: %w", name, err)
	}
	if r.Resume || started(adir) {
		lock.Close()
		return Result{}, fmt.Errorf("job %s: attempt %d: %w", name, r.Attempt, ErrLost)
	}
	sup, err := c.startSupervisor(r, adir, hfPath, lock)
	lock.Close() // the supervisor holds the lock now
	if err != nil {
		return Result{}, fmt.Errorf("job %s: start the command's supervisor: %w", name, err)
	}
	log.Info().Strs("argv", argv).Str("hostfile", hfPath).Int("supervisor", sup.Process.Pid).Msg("command started")
	return c.follow(ctx, log, r, name, adir, sup, true)
}

// startSupervisor starts the attempt's supervisor, handing it the locked
// lock as its file descriptor 3.
func (c *Command) startSupervisor(r Run, adir, hfPath string, lock *os.File) (*exec.Cmd, error) {
	slog, err := os.OpenFile(filepath.Join(adir, slogName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer slog.Close() // the supervisor has its own copy
	args := append(slices.Clone(c.opt.Supervisor[1:]), "--dir", adir, "--attempt", strconv.Itoa(r.Attempt),
		"--grace", c.opt.Grace.String(), "--max-output", strconv.FormatInt(c.opt.MaxOutput, 10),
		"--output-rate", strconv.FormatInt(c.opt.OutputRate, 10))
	if c.as.switched {
		args = append(args, "--uid", strconv.FormatUint(uint64(c.as.uid), 10), "--gid", strconv.FormatUint(uint64(c.as.gid), 10),
			"--groups", formatIDs(c.as.groups))
	}
	args = append(args, "--")
	cmd := exec.Command(c.opt.Supervisor[0], append(args, r.Job.Command...)...)
	cmd.Dir = c.opt.WorkDir
	if cmd.Dir == "" {
		cmd.Dir = filepath.Dir(hfPath) // the job's run directory
	}
	cmd.Env = c.commandEnv(r, hfPath, os.LookupEnv)
	cmd.Stdout, cmd.Stderr = slog, slog
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = supervisorAttr()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return cmd, nil
}

// CommandEnvNames are the variables of the daemon's environment a job's
// command always gets, when the daemon has them: PATH and LANG as they
// are, HOME, USER and LOGNAME those of run_as's account when the command
// switches to it.
var CommandEnvNames = []string{"PATH", "LANG", "HOME", "USER", "LOGNAME"}

// commandEnv is the environment of a job's command (its supervisor
// passes it on, and uses none of it): CommandEnvNames, the names
// CommandOptions.Env allows, as lookup finds them in the daemon's
// environment, and the METASCHED_* variables of the job. Nothing else.
func (c *Command) commandEnv(r Run, hfPath string, lookup func(string) (string, bool)) []string {
	var env []string
	for _, k := range append(slices.Clone(CommandEnvNames), c.opt.Env...) {
		v, ok := lookup(k)
		if c.as.switched {
			switch k {
			case "HOME":
				v = c.as.home
			case "USER", "LOGNAME":
				v = c.as.name
			}
		}
		if ok && (v != "" || !slices.Contains(CommandEnvNames, k)) {
			env = append(env, k+"="+v)
		}
	}
	return append(env,
		"METASCHED_HOSTFILE="+hfPath,
		"METASCHED_JOB_ID="+r.JobID,
		"METASCHED_JOB_NAME="+r.Job.Name,
		"METASCHED_TASKS="+strconv.Itoa(r.Job.Tasks),
		"METASCHED_TASK_OPS="+FormatNumber(r.Job.TaskOps),
		"METASCHED_TASK_BYTES="+FormatNumber(r.Job.TaskBytes),
	)
}

// follow copies the attempt's output to r.Output while its supervisor
// runs (sup, when this Run started it; else the one the lock shows, when
// running), stops the command on cancel, and returns the recorded exit.
func (c *Command) follow(ctx context.Context, log zerolog.Logger, r Run, name, adir string, sup *exec.Cmd, running bool) (Result, error) {
	out := output(r)
	tail := &tailer{path: filepath.Join(adir, outputName), off: r.OutputFrom}
	defer tail.close()
	var exited chan struct{}
	if sup != nil {
		exited = make(chan struct{})
		go func() {
			_ = sup.Wait() // reaps it, also after Run returned
			close(exited)
		}()
	}
	ticker := time.NewTicker(tailEvery)
	defer ticker.Stop()
	var (
		stop     error // ctx's error when the run was cancelled
		signaled bool  // the supervisor got the stop
		done     = ctx.Done()
		start    = time.Now()
	)
	for ended := !running; !ended; {
		tail.copyTo(log, out)
		select {
		case <-exited:
			ended = true
		case <-ticker.C:
			if sup == nil {
				ended = !supervised(adir)
				if !ended && stop != nil && !signaled {
					// Its record was not written yet at the cancel.
					signaled = signalSupervisor(log, adir, syscall.SIGTERM)
				}
			}
		case <-done:
			done = nil
			if errors.Is(context.Cause(ctx), ErrDetached) {
				log.Info().Msg("the daemon stops: the command runs on under its supervisor")
				return Result{}, fmt.Errorf("job %s: %w", name, ErrDetached)
			}
			stop = ctx.Err()
			log.Info().Err(stop).Dur("grace", c.opt.Grace).Msg("stopping the command: SIGTERM to its supervisor")
			if sup != nil {
				_ = sup.Process.Signal(syscall.SIGTERM)
				signaled = true
			} else {
				signaled = signalSupervisor(log, adir, syscall.SIGTERM)
			}
		}
	}
	tail.copyTo(log, out) // the rest
	rec, err := readExit(adir)
	if err != nil {
		why := "it was killed"
		if sup != nil && sup.ProcessState != nil {
			why = sup.ProcessState.String()
		}
		return Result{}, fmt.Errorf("job %s: the command's supervisor ended (%s) without recording how the command ended: %w", name, why, err)
	}
	if rec.StartError != "" {
		return Result{}, fmt.Errorf("job %s: %s: %w", name, rec.StartError, &startError{errno: rec.Errno})
	}
	res := rec.result()
	log.Info().Int("exit_code", res.ExitCode).Str("reason", res.Reason).Int64("output_kept", rec.OutputKept).
		Int64("output_read", rec.OutputRead).Dur("followed", time.Since(start)).Msg("command ended")
	if stop != nil {
		return res, fmt.Errorf("job %s: command stopped: %w", name, stop)
	}
	return res, nil
}

// startError is the errno of a command that could not be started, so that
// errors.Is(err, os.ErrPermission) and the like still hold.
type startError struct{ errno int }

func (e *startError) Error() string { return "the command did not start" }
func (e *startError) Unwrap() error { return errnoError(e.errno) }

// supervised reports whether a supervisor holds the attempt's lock.
func supervised(adir string) bool {
	f, err := os.Open(filepath.Join(adir, lockName))
	if err != nil {
		return false
	}
	defer f.Close()
	free, err := tryLock(f, false)
	if err != nil {
		return true // cannot tell: look again later
	}
	if free {
		unlock(f)
	}
	return !free
}

// signalSupervisor signals the attempt's supervisor, a process this Run
// did not start: the one its record names, if that process still is it.
// It reports whether the signal went (or there is no supervisor left to
// signal).
func signalSupervisor(log zerolog.Logger, adir string, sig syscall.Signal) bool {
	ref, err := readSupervisorRef(adir)
	if err != nil {
		log.Warn().Err(err).Msg("cannot find the command's supervisor to signal it yet")
		return false
	}
	if !ref.alive() {
		return true
	}
	if err := syscall.Kill(ref.pid, sig); err != nil && err != syscall.ESRCH {
		log.Warn().Err(err).Int("supervisor", ref.pid).Msg("cannot signal the command's supervisor")
		return false
	}
	return true
}

// tailer copies an output file to a writer as it grows.
type tailer struct {
	path string
	off  int64 // what was taken already
	f    *os.File
	buf  []byte
}

// copyTo writes what the file holds beyond what was taken to w.
func (t *tailer) copyTo(log zerolog.Logger, w io.Writer) {
	if t.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return // not yet made
		}
		t.f, t.buf = f, make([]byte, 64<<10)
	}
	for {
		n, err := t.f.ReadAt(t.buf, t.off)
		if n > 0 {
			if _, werr := w.Write(t.buf[:n]); werr != nil {
				log.Warn().Err(werr).Msg("job output not taken: trying again")
				return
			}
			t.off += int64(n)
		}
		if err != nil || n == 0 {
			return
		}
	}
}

func (t *tailer) close() {
	if t.f != nil {
		t.f.Close()
	}
}

// clearGroup ends what is left of the job's process group once its leader
// (the command) has been reaped: background processes it left running get
// SIGTERM and, after the grace period, SIGKILL. termAt and killAt are when
// the group already had those signals (zero: not yet). Zombies of the group
// that are this process's own children (it is a subreaper) are reaped.
func clearGroup(log zerolog.Logger, pgid int, grace time.Duration, termAt, killAt time.Time) {
	pause := 2 * time.Millisecond
	for {
		reapGroup(pgid)
		if !groupAlive(pgid) {
			reapGroup(pgid) // zombies seen by groupAlive
			return
		}
		now := time.Now()
		switch {
		case termAt.IsZero():
			log.Info().Msg("the command left processes in its group: SIGTERM to them")
			signalGroup(pgid, syscall.SIGTERM)
			termAt = now
		case killAt.IsZero() && now.Sub(termAt) >= grace:
			log.Warn().Msg("processes of the job's group outlived the grace period: SIGKILL to them")
			signalGroup(pgid, syscall.SIGKILL)
			killAt = now
		case !killAt.IsZero() && now.Sub(killAt) >= killWait:
			log.Error().Msg("processes of the job's group survive SIGKILL; leaving them")
			return
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// hostfile renders the job's VMs one per line, master first, in OpenMPI's
// hostfile syntax with a trailing comment:
//
//	NAME slots=VCPUS # site=SITE host=HOST role=master|worker
func hostfile(vms []VM) ([]byte, error) {
	if len(vms) == 0 {
		return nil, errors.New("no VMs")
	}
	var b strings.Builder
	for i, vm := range vms {
		for _, f := range []struct{ field, v string }{{"name", vm.Name}, {"site", vm.Site}, {"host", vm.Host}} {
			if f.v == "" {
				return nil, fmt.Errorf("VM %d: no %s", i, f.field)
			}
			if strings.ContainsAny(f.v, " \t\r\n#=") {
				return nil, fmt.Errorf("VM %d: %s %q: must not contain white space, '#' or '='", i, f.field, f.v)
			}
		}
		if vm.VCPUs < 1 {
			return nil, fmt.Errorf("VM %d (%s): vcpus %d: must be at least 1", i, vm.Name, vm.VCPUs)
		}
		role := "worker"
		switch {
		case i == 0 && !vm.Master:
			return nil, fmt.Errorf("VM 0 (%s): the first VM must be the master", vm.Name)
		case i > 0 && vm.Master:
			return nil, fmt.Errorf("VM %d (%s): a second master: only the first VM is the master", i, vm.Name)
		case vm.Master:
			role = "master"
		}
		fmt.Fprintf(&b, "%s slots=%d # site=%s host=%s role=%s\n", vm.Name, vm.VCPUs, vm.Site, vm.Host, role)
	}
	return []byte(b.String()), nil
}
