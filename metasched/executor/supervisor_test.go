package executor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metasched/metasched/metasched/executor"
)

// daemonProcess is this test binary playing a daemon that runs one command
// (see playDaemon), and the command's PID, which it printed first.
type daemonProcess struct {
	cmd *exec.Cmd
	pid int
}

// startDaemonProcess runs the daemon on dir with script (which prints
// "pid=$$" first) and waits for the command's PID in its output.
func startDaemonProcess(t *testing.T, dir, script string) *daemonProcess {
	t.Helper()
	d := exec.Command(os.Args[0], "-test.run=^$")
	d.Env = append(os.Environ(), daemonEnv+"="+dir, scriptEnv+"="+script)
	d.Stderr = os.Stderr
	stdout, err := d.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = d.Process.Kill() // by PID: this test's own child; harmless if it has exited
		_ = d.Wait()         // killed: its status is the kill
	})
	type read struct {
		s   string
		err error
	}
	line := make(chan read, 1)
	go func() {
		s, err := bufio.NewReader(stdout).ReadString('\n')
		line <- read{s, err}
	}()
	select {
	case first := <-line:
		if first.err != nil {
			t.Fatalf("the command's first line %q: %v", first.s, first.err)
		}
		return &daemonProcess{cmd: d, pid: pgidOf(t, first.s)}
	case <-time.After(time.Minute):
		t.Fatal("the command printed no pid within a minute")
		return nil
	}
}

// kill SIGKILLs the daemon process and waits for it.
func (d *daemonProcess) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = d.cmd.Wait() // killed: its status is the kill
}

// waitExitRecord waits until the attempt's command has ended and its exit
// is on record.
func waitExitRecord(t *testing.T, dir string, attempt int) {
	t.Helper()
	path := filepath.Join(executor.AttemptDir(dir, attempt), "exit")
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no exit record %s after a minute", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func lines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// TestCommandOutlivesDaemon: the daemon is SIGKILLed while its command
// runs; the command runs on under its supervisor and ends while no daemon
// is there to learn it. A fresh executor, resuming the attempt, gets the
// recorded exit and the output at once and never runs the command again,
// however often it is asked; the command ran once.
func TestCommandOutlivesDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ran := filepath.Join(userDir(t), "ran") // the command writes there
	d := startDaemonProcess(t, dir, `echo pid=$$; sleep 1; echo ran >> `+ran+`; echo bye; exit 7`)
	d.kill(t)
	waitExitRecord(t, dir, 1)

	want := executor.Result{ExitCode: 7, Reason: "exit status 7"}
	for i, resume := range []bool{true, true, false} {
		out := newWatchWriter("")
		r := daemonRun(dir, "echo must not run >> "+ran, out)
		r.Resume = resume
		res, err := newCommand(t, executor.CommandOptions{}).Run(context.Background(), r)
		if err != nil {
			t.Fatalf("run %d (resume %v): %v", i, resume, err)
		}
		if diff := cmp.Diff(want, res); diff != "" {
			t.Errorf("run %d (resume %v): result (-want +got):\n%s", i, resume, diff)
		}
		if got := out.String(); !strings.HasPrefix(got, "pid=") || !strings.HasSuffix(got, "bye\n") {
			t.Errorf("run %d: output %q, want the command's", i, got)
		}
	}
	// Resuming from where the output was taken gives the rest only.
	out := newWatchWriter("")
	r := daemonRun(dir, "", out)
	first, err := os.ReadFile(filepath.Join(executor.AttemptDir(dir, 1), "output"))
	if err != nil {
		t.Fatal(err)
	}
	r.Resume, r.OutputFrom = true, int64(strings.IndexByte(string(first), '\n')+1)
	if _, err := newCommand(t, executor.CommandOptions{}).Run(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "bye\n" {
		t.Errorf("output from the second line: %q, want %q", got, "bye\n")
	}
	if got := lines(t, ran); len(got) != 1 {
		t.Errorf("the command ran %d times: %q", len(got), got)
	}
}

// TestCommandReattach: the daemon is SIGKILLed while its command runs; a
// fresh executor resuming the attempt follows the supervisor that still
// runs it, takes its output, and gets its exit when it ends; cancelled, it
// has the supervisor stop the command's group. The job's cgroup outlives
// the daemon as the supervisor does: a process of the command's that left
// its session (setsid) runs on after the daemon's death, and ends with the
// cancel.
func TestCommandReattach(t *testing.T) {
	t.Parallel()
	t.Run("to its end", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		d := startDaemonProcess(t, dir, `echo pid=$$; sleep 1; echo late; exit 3`)
		d.kill(t)
		out := newWatchWriter("late\n")
		r := daemonRun(dir, "", out)
		r.Resume = true
		res, err := newCommand(t, executor.CommandOptions{}).Run(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(executor.Result{ExitCode: 3, Reason: "exit status 3"}, res); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
		if got := out.String(); !strings.HasSuffix(got, "late\n") {
			t.Errorf("output %q, want the line written after the daemon died", got)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		d := startDaemonProcess(t, dir, `echo pid=$$; ( setsid sleep 60 & echo escapee=$! ); sleep 60 & echo ready; wait`)
		d.kill(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := newWatchWriter("ready\n")
		r := daemonRun(dir, "", out)
		r.Resume = true
		done := startRun(t, ctx, newCommand(t, executor.CommandOptions{}), r, out)
		escapee := 0
		for line := range strings.Lines(out.String()) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "escapee="); ok {
				var err error
				escapee, err = strconv.Atoi(v)
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		if escapee == 0 || !running(escapee) {
			t.Fatalf("the command's escapee (PID %d) did not outlive the daemon; output %q", escapee, out.String())
		}
		defer syscall.Kill(escapee, syscall.SIGKILL) // whatever happens
		cancel()
		rr := waitRun(t, done)
		if !errors.Is(rr.err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", rr.err)
		}
		if diff := cmp.Diff(executor.Result{ExitCode: 128 + 15, Reason: "killed by signal SIGTERM (15)"}, rr.res); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
		checkGroupGone(t, d.pid)
		if running(escapee) {
			t.Errorf("the command's escapee (PID %d) runs on after the cancel", escapee)
		}
	})
}

// TestCommandLost: resuming an attempt that never started, or whose
// supervisor died without recording an exit (killed: its command dies
// with it), is ErrLost: the job must run again. A Run that watched the
// supervisor die says so.
func TestCommandLost(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := shRun(t, "echo must not run", newWatchWriter(""))
	r.Dir, r.Resume = dir, true
	ex := newCommand(t, executor.CommandOptions{})
	if _, err := ex.Run(context.Background(), r); !errors.Is(err, executor.ErrLost) {
		t.Fatalf("resume of an attempt that never started: %v, want ErrLost", err)
	}

	out := newWatchWriter("ready\n")
	r = shRun(t, `echo pid=$$; echo ready; exec sleep 60`, out)
	r.Dir = dir
	done := startRun(t, context.Background(), ex, r, out)
	pgid := pgidOf(t, out.String())
	sup := supervisorPID(t, executor.AttemptDir(dir, 0))
	if err := syscall.Kill(sup, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	rr := waitRun(t, done)
	if rr.err == nil || errors.Is(rr.err, executor.ErrLost) || !strings.Contains(rr.err.Error(), "without recording how the command ended") {
		t.Fatalf("Run that saw its supervisor killed: %+v, %v", rr.res, rr.err)
	}
	waitGroupGone(t, pgid) // the command died with its supervisor
	for _, resume := range []bool{true, false} {
		r.Resume = resume
		if _, err := ex.Run(context.Background(), r); !errors.Is(err, executor.ErrLost) {
			t.Errorf("run (resume %v) of an attempt whose supervisor died: %v, want ErrLost", resume, err)
		}
	}
}

func supervisorPID(t *testing.T, adir string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(adir, "supervisor"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.Fields(string(data))[0])
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitGroupGone waits for the group to vanish (a process killed by the
// kernel's parent-death signal dies a moment after its parent).
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still there a minute after its supervisor died", pgid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCommandDetach: a Run whose context is cancelled with the cause
// ErrDetached (the daemon stopping) returns at once and leaves the command
// running; a later Run resuming the attempt gets its end.
func TestCommandDetach(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(context.Background())
	out := newWatchWriter("ready\n")
	ran := filepath.Join(userDir(t), "ran") // the command writes there
	r := shRun(t, `echo pid=$$; echo ready; sleep 2; echo ran >> `+ran+`; exit 5`, out)
	ex := newCommand(t, executor.CommandOptions{})
	done := startRun(t, ctx, ex, r, out)
	cancel(executor.ErrDetached)
	rr := waitRun(t, done)
	if !errors.Is(rr.err, executor.ErrDetached) {
		t.Fatalf("error %v, want ErrDetached", rr.err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("the command ended before the detached Run returned: the test proves nothing")
	}
	r.Resume, r.Output = true, newWatchWriter("")
	res, err := ex.Run(context.Background(), r)
	if err != nil || res.ExitCode != 5 {
		t.Fatalf("resumed: %+v, %v; want exit 5", res, err)
	}
	if got := lines(t, ran); len(got) != 1 {
		t.Errorf("the command ran %d times", len(got))
	}
}

// TestCommandOutputBounded runs `yes`: the output kept (in the attempt's
// file and through Output to the daemon) stops at the cap with a note,
// the command goes on but is read at the bounded rate (it blocks on its
// pipe: the bytes read from it stay within the rate over the run's time),
// and it is still cancellable.
func TestCommandOutputBounded(t *testing.T) {
	t.Parallel()
	const (
		limit = 64 << 10
		rate  = 256 << 10
		burst = 64 << 10
	)
	note := "\n[metasched: the job's output reached its cap of 65536 bytes; what it writes from here on is read and discarded, and the command goes on]\n"
	out := newWatchWriter(note)
	r := shRun(t, "echo pid=$$; exec yes", out)
	ex := newCommand(t, executor.CommandOptions{MaxOutput: limit, OutputRate: rate})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	done := startRun(t, ctx, ex, r, out)
	time.Sleep(time.Second) // yes runs on past the cap
	cancel()
	rr := waitRun(t, done)
	took := time.Since(start)
	if !errors.Is(rr.err, context.Canceled) || rr.res.ExitCode != 128+15 {
		t.Fatalf("cancelled: %+v, %v; want killed by SIGTERM and context.Canceled", rr.res, rr.err)
	}
	checkGroupGone(t, pgidOf(t, out.String()))
	got := out.String()
	if len(got) != limit+len(note) || !strings.HasSuffix(got, note) {
		t.Errorf("Output took %d bytes ending %q, want the %d of the cap and the note", len(got), got[max(0, len(got)-40):], limit)
	}
	adir := executor.AttemptDir(r.Dir, 0)
	if fi, err := os.Stat(filepath.Join(adir, "output")); err != nil || fi.Size() != int64(limit+len(note)) {
		t.Errorf("output file: %v, %v; want %d bytes", fi, err, limit+len(note))
	}
	var rec struct {
		OutputKept int64 `json:"output_kept"`
		OutputRead int64 `json:"output_read"`
	}
	data, err := os.ReadFile(filepath.Join(adir, "exit"))
	if err != nil || json.Unmarshal(data, &rec) != nil {
		t.Fatalf("exit record: %s, %v", data, err)
	}
	// The bytes read from yes: more than the cap (it went on), at most the
	// burst and the rate over the time it ran, and what was left in its
	// pipe (64 KiB) when it died, read at once.
	most := int64(burst + rate*took.Seconds() + 64<<10)
	if rec.OutputRead <= limit || rec.OutputRead > most {
		t.Errorf("the supervisor read %d bytes from yes in %v, want more than %d and at most %d", rec.OutputRead, took, limit, most)
	}
	t.Logf("yes for %v: %d bytes read from it, %d kept", took, rec.OutputRead, rec.OutputKept)
}

// TestSupervisorStoppedTwice: a supervisor told to stop more than once
// stops its command once and still records how it ended (a SIGTERM again
// must not end the supervisor itself, which would record nothing).
func TestSupervisorStoppedTwice(t *testing.T) {
	t.Parallel()
	out := newWatchWriter("ready\n")
	r := shRun(t, `trap '' TERM; echo pid=$$; echo ready; while :; do sleep 0.05; done`, out)
	ex := newCommand(t, executor.CommandOptions{Grace: 500 * time.Millisecond})
	done := startRun(t, context.Background(), ex, r, out)
	sup := supervisorPID(t, executor.AttemptDir(r.Dir, 0))
	for range 3 {
		if err := syscall.Kill(sup, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	rr := waitRun(t, done)
	if rr.err != nil {
		t.Fatalf("Run: %v", rr.err)
	}
	if diff := cmp.Diff(executor.Result{ExitCode: 128 + 9, Reason: "killed by signal SIGKILL (9)"}, rr.res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	checkGroupGone(t, pgidOf(t, out.String()))
}

// TestCommandSignals: the command under its supervisor has the signal
// dispositions a command the test starts itself has (a signal the
// supervisor ignored would stay ignored in the command: SIGPIPE would no
// longer end a pipeline's writer).
func TestCommandSignals(t *testing.T) {
	t.Parallel()
	const script = `grep '^SigIgn' /proc/$$/status`
	want, err := exec.Command("/bin/sh", "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	out := newWatchWriter("")
	res, err := newCommand(t, executor.CommandOptions{}).Run(context.Background(), shRun(t, script, out))
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %+v, %v", res, err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("signal dispositions (-a command of the test's +the command under a supervisor):\n%s", diff)
	}
}
