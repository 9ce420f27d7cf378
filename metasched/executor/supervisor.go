package executor

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// SupervisorArg, as the first argument of the metasched binary, makes it a
// command's supervisor (a hidden subcommand: see MaybeSupervise).
const SupervisorArg = "__metasched-supervise-command"

// MaybeSupervise runs this process as a command's supervisor, and exits,
// when it was started as one (os.Args[1] is SupervisorArg); otherwise it
// returns at once. The host-command executor starts its supervisors by running
// its own binary again (/proc/self/exe), so main, and TestMain of a test
// binary that runs commands, must call it first.
func MaybeSupervise() {
	if len(os.Args) > 1 && os.Args[1] == SupervisorArg {
		os.Exit(supervise(os.Args[2:]))
	}
}

// Defaults of the output's bounds (CommandOptions).
const (
	DefaultMaxOutput  = 4 << 20 // bytes kept of an attempt's output
	DefaultOutputRate = 1 << 20 // bytes per second read from a command
	// outputBurst is what a command may write at once beyond the rate: a
	// pipe's buffer.
	outputBurst = 64 << 10
)

// capNote ends an output cut at its cap.
func capNote(limit int64) string {
	return fmt.Sprintf("\n[metasched: the job's output reached its cap of %d bytes; what it writes from here on is read and discarded, and the command goes on]\n", limit)
}

// supervise is the supervisor's main: it runs the command of one attempt,
// copies its output to the attempt's output file (capped, at a bounded
// rate), forwards a stop (SIGTERM) to the command's process group with
// SIGKILL after the grace period, and records how the command ended,
// durably, before it exits. File descriptor 3 is the attempt's lock,
// locked by the daemon that started it; the supervisor holds it until it
// exits. Its stderr is its log.
func supervise(args []string) int {
	fs := flag.NewFlagSet(SupervisorArg, flag.ContinueOnError)
	dir := fs.String("dir", "", "the attempt's directory")
	attempt := fs.Int("attempt", 0, "the attempt")
	grace := fs.Duration("grace", DefaultGrace, "SIGTERM to SIGKILL")
	maxOut := fs.Int64("max-output", DefaultMaxOutput, "bytes of output kept")
	rate := fs.Int64("output-rate", DefaultOutputRate, "bytes per second read from the command")
	uid := fs.String("uid", "", "the uid the command runs as (none: the supervisor's)")
	gid := fs.String("gid", "", "the command's gid, with --uid")
	groups := fs.String("groups", "", "the command's supplementary groups, comma-separated, with --uid")
	cgroup := fs.String("cgroup", "", "the cgroup (v2) the command runs in, made for it")
	if err := fs.Parse(args); err != nil || *dir == "" || *cgroup == "" || fs.NArg() == 0 {
		fmt.Fprintf(os.Stderr, "%s: want --dir DIR --cgroup DIR [flags] -- COMMAND...: %v\n", SupervisorArg, err)
		return 2
	}
	ids, err := parseIDs(*uid, *gid, *groups)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", SupervisorArg, err)
		return 2
	}
	argv := fs.Args()
	log := zerolog.New(os.Stderr).With().Timestamp().Int("pid", os.Getpid()).Int("attempt", *attempt).Logger()
	closeOnExec(3) // the lock: the command must not hold it
	lock := os.NewFile(3, "lock")
	defer lock.Close()
	if err := BecomeSubreaper(); err != nil {
		log.Warn().Err(err).Msg("not a subreaper: orphans of the command go to init")
	}
	// SIGINT and SIGHUP (none comes from a terminal: the supervisor has
	// none) are caught and dropped, not ignored: an ignored signal would
	// stay ignored in the command.
	go func() {
		dropped := make(chan os.Signal, 1)
		signal.Notify(dropped, syscall.SIGINT, syscall.SIGHUP)
		for range dropped {
		}
	}()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)

	rec := exitRecord{Attempt: *attempt}
	// fail records why the command did not start; its cgroup, made for
	// it and empty, goes (whoever finds the attempt later may not: its
	// directory may be gone, which is one way to fail here).
	fail := func(what string, err error) int {
		log.Error().Err(err).Msg(what)
		if err := removeCgroup(*cgroup); err != nil {
			log.Error().Err(err).Msg("the command's cgroup is left")
		}
		rec.StartError, rec.Errno, rec.ExitCode = what+": "+err.Error(), errnoOf(err), -1
		return record(log, *dir, rec)
	}
	if err := writeSupervisorRef(*dir); err != nil {
		return fail("record the supervisor", err)
	}
	out, err := os.OpenFile(filepath.Join(*dir, outputName), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fail("open the output file", err)
	}
	defer out.Close()
	cg, err := openCgroup(*cgroup)
	if err != nil {
		return fail("open the job's cgroup", err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		cg.Close()
		return fail("output pipe", err)
	}
	defer pr.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = commandAttr(ids, cg)
	err = cmd.Start()
	pw.Close()
	cg.Close()
	if err != nil {
		return fail(fmt.Sprintf("start %q", argv[0]), err)
	}
	log = log.With().Int("pid", cmd.Process.Pid).Str("cgroup", *cgroup).Logger()
	log.Info().Strs("argv", argv).Msg("command started")

	cp := &outputCopy{w: out, limit: *maxOut, rate: float64(*rate), fast: make(chan struct{})}
	copied := make(chan error, 1)
	go func() { copied <- cp.run(pr) }()
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var (
		termAt, killAt time.Time
		killTimer      <-chan time.Time
	)
	for running := true; running; {
		select {
		case <-exited:
			running = false
		case <-stop:
			if rec.Stopped {
				continue // stopping already; a SIGTERM again must not end the supervisor
			}
			rec.Stopped = true
			log.Info().Dur("grace", *grace).Msg("stopping the command: SIGTERM to every process of its cgroup")
			signalCgroup(*cgroup, syscall.SIGTERM)
			termAt = time.Now()
			t := time.NewTimer(*grace)
			defer t.Stop()
			killTimer = t.C
		case <-killTimer:
			log.Warn().Msg("the command outlived its grace period: killing every process of its cgroup")
			if err := killCgroup(*cgroup); err != nil {
				log.Error().Err(err).Msg("cannot kill the job's cgroup")
			}
			killAt, killTimer = time.Now(), nil
		}
	}
	res := exitResult(cmd.ProcessState)
	if err := clearCgroup(log, *cgroup, *grace, termAt, killAt); err != nil {
		log.Error().Err(err).Msg("the job's cgroup is not cleared: the daemon tries again")
	}
	close(cp.fast) // nobody left to slow down: read the rest at once
	select {
	case err = <-copied:
	case <-time.After(drainWait):
		log.Warn().Msg("output pipe still open after the job's processes ended: a process outside the job's cgroup holds it; its later output is lost")
		pr.Close()
		err = <-copied
	}
	if err != nil {
		log.Warn().Err(err).Msg("job output not fully kept")
	}
	rec.ExitCode, rec.Reason = res.ExitCode, res.Reason
	rec.OutputKept, rec.OutputRead = cp.stats()
	log.Info().Int("exit_code", res.ExitCode).Str("reason", res.Reason).Int64("output_kept", rec.OutputKept).
		Int64("output_read", rec.OutputRead).Msg("command ended")
	return record(log, *dir, rec)
}

// commandIDs are the uid, gid and supplementary groups a command runs
// with, when they are not its supervisor's.
type commandIDs struct {
	uid, gid uint32
	groups   []uint32
}

// formatIDs writes ids for the supervisor's --groups: comma-separated.
func formatIDs(ids []uint32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(uint64(id), 10)
	}
	return strings.Join(s, ",")
}

// parseIDs reads the supervisor's --uid, --gid and --groups: nil without
// --uid (the command runs as its supervisor).
func parseIDs(uid, gid, groups string) (*commandIDs, error) {
	if uid == "" {
		if gid != "" || groups != "" {
			return nil, errors.New("--gid and --groups go with --uid")
		}
		return nil, nil
	}
	id := func(flag, s string) (uint32, error) {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return 0, fmt.Errorf("--%s %q: not a numeric id", flag, s)
		}
		return uint32(n), nil
	}
	var ids commandIDs
	var err error
	if ids.uid, err = id("uid", uid); err != nil {
		return nil, err
	}
	if ids.uid == 0 {
		return nil, errors.New("--uid 0: a command never runs as root")
	}
	if ids.gid, err = id("gid", gid); err != nil {
		return nil, err
	}
	if groups != "" {
		for g := range strings.SplitSeq(groups, ",") {
			n, err := id("groups", g)
			if err != nil {
				return nil, err
			}
			ids.groups = append(ids.groups, n)
		}
	}
	return &ids, nil
}

// record writes the exit record durably: once it is on disk the command
// is never run again for this attempt.
func record(log zerolog.Logger, dir string, rec exitRecord) int {
	rec.Ended = time.Now().UTC()
	data, err := json.Marshal(rec)
	if err == nil {
		err = writeDurably(dir, exitName, data)
	}
	if err != nil {
		log.Error().Err(err).Msg("cannot record how the command ended")
		return 1
	}
	return 0
}

// outputCopy copies a command's output to the attempt's output file: at
// most limit bytes, then a note, then nothing (what comes is read and
// discarded); and it reads at most rate bytes per second beyond a burst of
// a pipe's buffer, so that a command that writes without pause blocks on
// its pipe instead of burning the machine's CPU, the supervisor's and the
// daemon's. Once fast is closed it reads as fast as it can.
type outputCopy struct {
	w     io.Writer
	limit int64
	rate  float64
	fast  chan struct{}

	mu         sync.Mutex
	kept, read int64
}

func (c *outputCopy) stats() (kept, read int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.kept, c.read
}

// run copies r until it ends or is closed; it returns the first write
// error (after which it keeps reading, so that the command never blocks on
// a full pipe for good) and any read error.
func (c *outputCopy) run(r io.Reader) error {
	buf := make([]byte, 32<<10)
	// A token bucket of a pipe's buffer, filled at the rate: a read takes
	// at most the tokens there are, and waits for a few when there are
	// none.
	const minRead = 4 << 10
	tokens, last := float64(outputBurst), time.Now()
	var (
		werr  error
		noted bool
	)
	for {
		size := len(buf)
		if c.rate > 0 {
			refill := func() {
				now := time.Now()
				tokens = min(float64(outputBurst), tokens+c.rate*now.Sub(last).Seconds())
				last = now
			}
			refill()
			if tokens < minRead {
				select {
				case <-time.After(time.Duration((minRead - tokens) / c.rate * float64(time.Second))):
					refill()
				case <-c.fast:
					c.rate = 0
				}
			}
			if c.rate > 0 {
				size = min(size, int(tokens))
			}
		}
		n, err := r.Read(buf[:size])
		tokens -= float64(n)
		if n > 0 {
			werr = c.keep(buf[:n], werr, &noted)
		}
		if err == io.EOF || errors.Is(err, os.ErrClosed) {
			return werr
		}
		if err != nil {
			return errors.Join(werr, err)
		}
	}
}

// keep writes what of p the cap leaves room for, and the note when it
// cuts; werr is the first write error so far, which it returns.
func (c *outputCopy) keep(p []byte, werr error, noted *bool) error {
	c.mu.Lock()
	c.read += int64(len(p))
	room := max(c.limit-c.kept, 0)
	if *noted {
		room = 0
	}
	k := min(int64(len(p)), room)
	c.kept += k
	cut := k < int64(len(p)) && !*noted
	if cut {
		*noted = true
		c.kept += int64(len(capNote(c.limit)))
	}
	c.mu.Unlock()
	if werr != nil {
		return werr
	}
	if k > 0 {
		if _, err := c.w.Write(p[:k]); err != nil {
			return err
		}
	}
	if cut {
		if _, err := io.WriteString(c.w, capNote(c.limit)); err != nil {
			return err
		}
	}
	return nil
}
