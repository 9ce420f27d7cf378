package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/metasched/metasched/internal/syncbuf"
	"github.com/metasched/metasched/metasched/lab"
)

// buildBinary builds the real metasched binary into a temporary directory.
func buildBinary(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs metasched as processes of its own (a lab of real binaries); make test runs it")
	}
	bin := filepath.Join(t.TempDir(), "metasched")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// skipShortImageBuild skips a test that builds the guest image in -short
// mode: the build runs Debian's apt and dpkg, and downloads packages into
// a cold cache.
func skipShortImageBuild(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: builds the guest image with apt and dpkg (downloads on a cold cache); make test runs it")
	}
}

// buildTaskFarm builds the task farm static (as make build does) into
// dir, where metasched image build finds it beside a metasched binary
// built there, and returns its path.
func buildTaskFarm(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "taskfarm")
	cmd := exec.Command("go", "build", "-o", bin, "../taskfarm")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the task farm: %v\n%s", err, out)
	}
	return bin
}

// servedDaemon is one run of `metasched serve` by a test.
type servedDaemon struct {
	cmd  *exec.Cmd
	base string        // http://ADDRESS
	done chan struct{} // closed when the process has exited
}

// startServe runs `bin serve args...` in dir with its log in logPath and
// waits for the address it prints first. The process is killed (by PID)
// when the test ends, if it still runs.
func startServe(t testing.TB, bin, dir, logPath string, args ...string) *servedDaemon {
	t.Helper()
	d, addr, out := startProcess(t, bin, dir, logPath, append([]string{"serve"}, args...)...)
	select {
	case d.base = <-addr:
	case <-d.done:
		t.Fatalf("the daemon exited before serving (%v); stdout:\n%s", d.cmd.ProcessState, out.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the daemon printed no address in 30 s")
	}
	return d
}

// startProcess runs `bin args...` in dir with its stderr in logPath; it
// returns the address a daemon prints on stdout first (`metasched daemon
// on ADDR`) when it does, and its stdout. The process is killed (by PID)
// when the test ends, if it still runs.
func startProcess(t testing.TB, bin, dir, logPath string, args ...string) (*servedDaemon, <-chan string, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	return startCmd(t, cmd, logPath)
}

// startCmd is startProcess for a command made by the caller (its
// environment, when not set, serveEnv's).
func startCmd(t testing.TB, cmd *exec.Cmd, logPath string) (*servedDaemon, <-chan string, *syncbuf.Buffer) {
	t.Helper()
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if cmd.Env == nil {
		cmd.Env = serveEnv()
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &servedDaemon{cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	out := &syncbuf.Buffer{}
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		lab.WatchServe(stdout, out, addr)
	}()
	go func() {
		<-eof          // Wait closes the pipe: read it to the end first
		_ = cmd.Wait() // the exit status is the test's to read
		if err := logFile.Close(); err != nil {
			t.Errorf("the daemon's log: %v", err)
		}
		close(d.done)
	}()
	t.Cleanup(func() {
		select {
		case <-d.done:
		default:
			_ = cmd.Process.Kill() // by PID: this test's own child
			<-d.done
		}
	})
	return d, addr, out
}

// interrupt sends SIGINT and waits (at most limit) for the process to end;
// it returns the exit code.
func (d *servedDaemon) interrupt(t testing.TB, limit time.Duration) int {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.done:
	case <-time.After(limit):
		t.Fatalf("the daemon did not stop in %s after SIGINT", limit)
	}
	return d.cmd.ProcessState.ExitCode()
}
