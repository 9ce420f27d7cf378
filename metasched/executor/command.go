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
	// the commands run as the daemon. NewCommand checks it. With
	// Accounts, RunAs is the account of the owners Accounts does not name,
	// all together; absent, their jobs cannot run.
	RunAs string
	// Accounts maps owners of jobs (Run.Owner: a token's name, or
	// cert:NAME) to users of this machine, by name or uid: a job runs as
	// its owner's account, so that another owner's job can neither read
	// its files nor signal its processes. Each account has a uid of its
	// own, never root's nor RunAs's; only a daemon that runs as root
	// switches users. NewCommand checks it.
	Accounts map[string]string
	// Grace is how long a cancelled command's process group has between
	// SIGTERM and SIGKILL. Zero or negative means DefaultGrace.
	Grace time.Duration
	// WorkDir is the working directory of the commands; "" is each job's
	// own, Run.Dir/work (WorkName), which only the job's account and the
	// daemon can reach. A relative program path ("./master") is relative
	// to it.
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
	// CgroupParent is the cgroup (v2) directory in which each attempt's
	// command gets a cgroup of its own; "" is the daemon's own cgroup,
	// found in the v2 hierarchy wherever it is mounted. NewCommand checks
	// that the daemon can make cgroups there and kill them.
	CgroupParent string
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
	log     zerolog.Logger
	opt     CommandOptions
	as      *account           // who the commands of owners not in owners run as; nil: nobody
	owners  map[string]account // the owners' own accounts
	cgroups string             // where the attempts' cgroups are made
}

// NewCommand returns the host-command executor, or an error (naming
// run_as) when opt.RunAs does not fit the user the daemon runs as: see
// CommandOptions.RunAs. It logs a warning that the jobs' commands run on
// this machine, and as whom.
func NewCommand(log zerolog.Logger, opt CommandOptions) (*Command, error) {
	var as *account
	if opt.RunAs != "" || len(opt.Accounts) == 0 || os.Geteuid() != 0 {
		a, err := runAsAccount(opt.RunAs, os.Geteuid(), systemUser)
		if err != nil {
			return nil, err
		}
		as = &a
	}
	owners, err := ownerAccounts(opt.Accounts, os.Geteuid(), systemUser, as)
	if err != nil {
		return nil, err
	}
	if err := supported(); err != nil {
		return nil, err
	}
	cgroups := opt.CgroupParent
	if cgroups == "" {
		if cgroups, err = findCgroupParent(); err != nil {
			return nil, fmt.Errorf("the host-command executor runs each job in a cgroup of its own, so that none of its processes outlives it, and finds none here: %w", err)
		}
	}
	if err := checkCgroupParent(cgroups); err != nil {
		return nil, fmt.Errorf("the host-command executor runs each job in a cgroup of its own, so that none of its processes outlives it, and cannot here: %w", err)
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
	c := &Command{log: log.With().Str("executor", CommandName).Logger(), opt: opt, as: as, owners: owners, cgroups: cgroups}
	switch {
	case as == nil:
		c.log.Warn().Int("accounts", len(owners)).
			Msg("the host-command executor runs every job's command on this machine, the daemon's own, as its owner's account (executor.accounts): a job can do whatever that user can here; the jobs of owners without an account are refused")
	case len(owners) > 0:
		c.log.Warn().Int("accounts", len(owners)).Str("run_as", as.name).Uint32("uid", as.uid).
			Msgf("the host-command executor runs every job's command on this machine, the daemon's own, as its owner's account (executor.accounts), or as user %s for the owners accounts does not name: a job can do whatever that user can here, and those owners' jobs can read and signal each other's", as)
	default:
		how := "as the daemon's own user"
		if as.switched {
			how = "switching to that user from root"
		}
		c.log.Warn().Str("run_as", as.name).Uint32("uid", as.uid).Uint32("gid", as.gid).
			Msgf("the host-command executor runs every job's command on this machine, the daemon's own, as user %s (%s): a job can do whatever that user can here, and every job can read and signal every other's (give each owner an account: executor.accounts)", as, how)
	}
	return c, nil
}

// account is the account the jobs of owner run as: its own, or run_as's.
func (c *Command) account(owner string) (account, error) {
	if a, ok := c.owners[owner]; ok {
		return a, nil
	}
	if c.as != nil {
		return *c.as, nil
	}
	if owner == "" {
		return account{}, fmt.Errorf("%w: a job submitted by the daemon itself (no principal), and no run_as", ErrNoAccount)
	}
	return account{}, fmt.Errorf("%w: %s has none in executor.accounts, and there is no run_as for the others", ErrNoAccount, owner)
}

// Admits says why the jobs of owner cannot run here (wrapping
// ErrNoAccount), or nil: the daemon asks at the submission.
func (c *Command) Admits(owner string) error {
	_, err := c.account(owner)
	return err
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
	as, err := c.account(r.Owner)
	if err != nil {
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
	hfPath := filepath.Join(dir, HostfileName)
	if err := runDir(dir, adir, hfPath, hf, as); err != nil {
		return Result{}, fmt.Errorf("job %s: run directory: %w", name, err)
	}
	log := c.log.With().Str("job", r.JobID).Int("attempt", r.Attempt).Logger()
	if why := unreachable(hfPath, as); why != "" {
		log.Warn().Str("hostfile", hfPath).Msgf("user %s cannot reach the job's run directory (%s): its command cannot read METASCHED_HOSTFILE; give that directory search permission for others (chmod o+x)", as, why)
	}

	// The lock tells whether a supervisor runs the attempt.
	lock, err := os.OpenFile(filepath.Join(adir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
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
		c.endCgroup(log, adir) // what the lost command left
		return Result{}, fmt.Errorf("job %s: attempt %d: %w", name, r.Attempt, ErrLost)
	}
	sup, err := c.startSupervisor(r, as, adir, hfPath, lock)
	lock.Close() // the supervisor holds the lock now
	if err != nil {
		return Result{}, fmt.Errorf("job %s: start the command's supervisor: %w", name, err)
	}
	log.Info().Strs("argv", argv).Str("hostfile", hfPath).Int("supervisor", sup.Process.Pid).Msg("command started")
	return c.follow(ctx, log, r, name, adir, sup, true)
}

// WorkName is the job's own working directory in its run directory
// (Run.Dir/work), its account's, which only that account and the daemon
// can reach: the command's working directory unless
// CommandOptions.WorkDir names another.
const WorkName = "work"

// runDir makes the job's run directory dir for the account as: dir itself
// the daemon's, which others may cross but not list (0711) when the
// command runs as another user, else private (0700); the hostfile and the
// working directory the account's, and private (0600, 0700); the
// attempt's directory adir the daemon's and private (0700), its files too
// (the command's output reaches the daemon through its supervisor). The
// hostfile is written whole (renamed into place), in a directory the
// account cannot write in.
func runDir(dir, adir, hfPath string, hf []byte, as account) error {
	mode := os.FileMode(0o700)
	if as.switched {
		mode = 0o711
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := os.Mkdir(dir, mode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if err := os.Chmod(dir, mode); err != nil {
		return err
	}
	for _, d := range []string{adir, filepath.Join(dir, WorkName)} {
		if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return err
		}
	}
	tmp, err := os.CreateTemp(dir, "."+HostfileName+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // once renamed, nothing to remove
	_, err = tmp.Write(hf)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if as.switched {
		for _, p := range []string{tmp.Name(), filepath.Join(dir, WorkName)} {
			if err := os.Lchown(p, int(as.uid), int(as.gid)); err != nil {
				return err
			}
		}
	}
	return os.Rename(tmp.Name(), hfPath)
}

// startSupervisor starts the attempt's supervisor, handing it the locked
// lock as its file descriptor 3.
func (c *Command) startSupervisor(r Run, as account, adir, hfPath string, lock *os.File) (*exec.Cmd, error) {
	slog, err := os.OpenFile(filepath.Join(adir, slogName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer slog.Close() // the supervisor has its own copy
	args := append(slices.Clone(c.opt.Supervisor[1:]), "--dir", adir, "--attempt", strconv.Itoa(r.Attempt),
		"--grace", c.opt.Grace.String(), "--max-output", strconv.FormatInt(c.opt.MaxOutput, 10),
		"--output-rate", strconv.FormatInt(c.opt.OutputRate, 10))
	if as.switched {
		args = append(args, "--uid", strconv.FormatUint(uint64(as.uid), 10), "--gid", strconv.FormatUint(uint64(as.gid), 10),
			"--groups", formatIDs(as.groups))
	}
	cg, err := cgroupName(c.cgroups, "job-"+r.JobID+"-a"+strconv.Itoa(r.Attempt))
	if err != nil {
		return nil, err
	}
	// Recorded before it is made, and so before the supervisor starts:
	// whoever finds the attempt without its supervisor (a daemon killed
	// at any moment of this) ends what is in the cgroup, and removes it.
	if err := writeDurably(adir, cgroupFile, []byte(cg+"\n")); err != nil {
		return nil, err
	}
	if err := makeCgroup(cg); err != nil {
		return nil, err
	}
	args = append(args, "--cgroup", cg, "--")
	cmd := exec.Command(c.opt.Supervisor[0], append(args, r.Job.Command...)...)
	cmd.Dir = c.opt.WorkDir
	if cmd.Dir == "" {
		cmd.Dir = filepath.Join(filepath.Dir(hfPath), WorkName)
	}
	cmd.Env = c.commandEnv(r, as, hfPath, os.LookupEnv)
	cmd.Stdout, cmd.Stderr = slog, slog
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = supervisorAttr()
	if err := cmd.Start(); err != nil {
		_ = removeCgroup(cg)
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
func (c *Command) commandEnv(r Run, as account, hfPath string, lookup func(string) (string, bool)) []string {
	var env []string
	for _, k := range append(slices.Clone(CommandEnvNames), c.opt.Env...) {
		v, ok := lookup(k)
		if as.switched {
			switch k {
			case "HOME":
				v = as.home
			case "USER", "LOGNAME":
				v = as.name
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
	tail.copyTo(log, out)  // the rest
	c.endCgroup(log, adir) // the supervisor removed it, unless it died
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

// endCgroup kills what is left in the attempt's cgroup and removes it,
// when its supervisor has not (it died): no process of a job outlives it.
func (c *Command) endCgroup(log zerolog.Logger, adir string) {
	cg, err := readCgroup(adir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			log.Error().Err(err).Msg("cannot read the attempt's cgroup")
		}
		return
	}
	if populated(cg) { // a cgroup that is gone is not
		log.Warn().Str("cgroup", cg).Msg("processes of the job outlived its supervisor: killing every process of its cgroup")
	}
	if err := endCgroup(cg); err != nil {
		log.Error().Err(err).Msg("the job's cgroup is not cleared")
	}
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
				outputRefused(log, werr, "trying again")
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
