package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// CommandOptions configures the command executor.
type CommandOptions struct {
	// Grace is how long a cancelled command's process group has between
	// SIGTERM and SIGKILL. Zero or negative means DefaultGrace.
	Grace time.Duration
	// WorkDir is the working directory of the commands; "" is the
	// daemon's. A relative program path ("./master") is relative to it.
	WorkDir string
}

// Command runs the job's command on the daemon's machine with a hostfile of
// the job's VMs (see the package documentation). It is safe for concurrent
// use: each Run starts its own process group.
type Command struct {
	log zerolog.Logger
	opt CommandOptions
}

// NewCommand returns the command executor.
func NewCommand(log zerolog.Logger, opt CommandOptions) *Command {
	if opt.Grace <= 0 {
		opt.Grace = DefaultGrace
	}
	return &Command{log: log.With().Str("executor", "command").Logger(), opt: opt}
}

// Name returns "command", the executor's name in the daemon's
// configuration.
func (c *Command) Name() string { return "command" }

// Run writes the hostfile in r.Dir, runs r.Job.Command in its own process
// group with its output to r.Output and returns how it exited. On cancel it
// stops the group (SIGTERM, SIGKILL after the grace period) and returns,
// once the command is reaped, ctx's error wrapped. r.Predicted and
// r.Elapsed are ignored.
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
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("job %s: run directory: %w", name, err)
	}
	hfPath := filepath.Join(dir, HostfileName)
	if err := os.WriteFile(hfPath, hf, 0o644); err != nil {
		return Result{}, fmt.Errorf("job %s: hostfile: %w", name, err)
	}

	// One pipe for stdout and stderr: the child's writes arrive in the
	// order it made them, and one goroutine copies them to Output.
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{}, fmt.Errorf("job %s: output pipe: %w", name, err)
	}
	defer pr.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = c.opt.WorkDir
	cmd.Env = append(os.Environ(), // exec keeps the last of duplicate keys
		"METASCHED_HOSTFILE="+hfPath,
		"METASCHED_JOB_ID="+r.JobID,
		"METASCHED_JOB_NAME="+r.Job.Name,
		"METASCHED_TASKS="+strconv.Itoa(r.Job.Tasks),
	)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	pw.Close() // the child holds its own copy
	if err != nil {
		return Result{}, fmt.Errorf("job %s: start %q: %w", name, argv[0], err)
	}
	pgid := cmd.Process.Pid // Setpgid: the command leads its own group
	log := c.log.With().Str("job", r.JobID).Int("pgid", pgid).Logger()
	log.Info().Strs("argv", argv).Str("hostfile", hfPath).Msg("command started")
	start := time.Now()

	copied := make(chan error, 1)
	go func() { copied <- drain(output(r), pr) }()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // cmd.ProcessState says how it ended
		close(exited)
	}()

	// Wait for the command; on cancel, SIGTERM its group and SIGKILL it
	// after the grace period.
	var (
		stop           error // ctx's error when the run was cancelled
		termAt, killAt time.Time
		killTimer      <-chan time.Time
		done           = ctx.Done()
	)
	for running := true; running; {
		select {
		case <-exited:
			running = false
		case <-done:
			stop, done = ctx.Err(), nil
			log.Info().Err(stop).Dur("grace", c.opt.Grace).Msg("stopping command: SIGTERM to its process group")
			signalGroup(pgid, syscall.SIGTERM)
			termAt = time.Now()
			t := time.NewTimer(c.opt.Grace)
			defer t.Stop()
			killTimer = t.C
		case <-killTimer:
			log.Warn().Msg("command outlived its grace period: SIGKILL to its process group")
			signalGroup(pgid, syscall.SIGKILL)
			killAt, killTimer = time.Now(), nil
		}
	}
	res := exitResult(cmd.ProcessState)

	c.clearGroup(log, pgid, termAt, killAt)
	select {
	case err = <-copied:
	case <-time.After(drainWait):
		log.Warn().Msg("output pipe still open after the job's processes ended: a process that left the job's process group holds it; its later output is lost")
		pr.Close() // unblocks the copy
		err = <-copied
	}
	if err != nil {
		log.Warn().Err(err).Msg("job output not fully captured")
	}

	log.Info().Int("exit_code", res.ExitCode).Str("reason", res.Reason).
		Dur("took", time.Since(start)).Msg("command ended")
	if stop != nil {
		return res, fmt.Errorf("job %s: command stopped: %w", name, stop)
	}
	return res, nil
}

// clearGroup ends what is left of the job's process group once its leader
// (the command) has been reaped: background processes it left running get
// SIGTERM and, after the grace period, SIGKILL. termAt and killAt are when
// the group already had those signals (zero: not yet). Zombies of the group
// that are the daemon's own children (when it is a subreaper) are reaped.
func (c *Command) clearGroup(log zerolog.Logger, pgid int, termAt, killAt time.Time) {
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
		case killAt.IsZero() && now.Sub(termAt) >= c.opt.Grace:
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

// drain copies r to w until r ends or is closed. After a write error it
// keeps reading (and discarding) so that the job never blocks on a full
// pipe; it returns the first write error and any read error.
func drain(w io.Writer, r io.Reader) error {
	buf := make([]byte, 32<<10)
	var werr error
	for {
		n, err := r.Read(buf)
		if n > 0 && werr == nil {
			_, werr = w.Write(buf[:n])
		}
		if err == io.EOF || errors.Is(err, os.ErrClosed) { // ErrClosed: Run gave up waiting
			return werr
		}
		if err != nil {
			return errors.Join(werr, err)
		}
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
