package image

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runner runs metasched-run with busybox's sh and a PATH of busybox's
// applets only (as in the bundled guest), or with this machine's /bin/sh
// and tools (GNU coreutils, as in a Debian guest).
type runner struct {
	t      *testing.T
	script string
	sh     string
	path   string
	root   string
}

// The tools a runner runs with.
const (
	busyboxRunner = "busybox"
	debianRunner  = "debian"
)

func newRunner(t *testing.T, tools string) *runner {
	t.Helper()
	r := &runner{t: t, root: t.TempDir(), sh: "/bin/sh", path: "/usr/sbin:/usr/bin:/sbin:/bin"}
	r.script = filepath.Join(r.root, "metasched-run")
	if err := os.WriteFile(r.script, []byte(runnerScript), 0o755); err != nil {
		t.Fatal(err)
	}
	if tools == debianRunner {
		return r
	}
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Fatalf("%v (Debian package busybox-static; make test installs it)", err)
	}
	r.sh, r.path = BusyboxPath+" sh", filepath.Join(r.root, "bin")
	out, err := exec.Command(BusyboxPath, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(r.path, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Fields(string(out)) {
		if err := os.Symlink(BusyboxPath, filepath.Join(r.path, name)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// run runs metasched-run with args and the environment env (PATH added)
// and returns its exit code and output.
func (r *runner) run(env []string, args ...string) (int, string) {
	r.t.Helper()
	sh := strings.Fields(r.sh)
	cmd := exec.Command(sh[0], append(append(sh[1:], r.script), args...)...)
	cmd.Env = append([]string{"PATH=" + r.path}, env...)
	cmd.Dir = r.root
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return 0, string(out)
}

// start writes the command line into a new DIR and starts it; it returns
// DIR.
func (r *runner) start(name, command string, maxBytes int, env ...string) string {
	r.t.Helper()
	dir := filepath.Join(r.root, "run", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "command"), []byte(command), 0o644); err != nil {
		r.t.Fatal(err)
	}
	if code, out := r.run(env, "start", dir, filepath.Join(r.root, "work", name), strconv.Itoa(maxBytes)); code != 0 {
		r.t.Fatalf("start %s: exit %d: %s", name, code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "pid")); err != nil {
		r.t.Fatalf("start %s returned without a pid file: %v", name, err)
	}
	pid := r.pid(dir)
	t := r.t
	t.Cleanup(func() {
		if groupAlive(t, pid) { // a failed test leaves nothing running
			_ = syscall.Kill(-pid, syscall.SIGKILL) // best effort: groupAlive has reported it
		}
	})
	return dir
}

// exit waits for DIR/exit (a bound against a runner that never writes
// it, not a measure) and returns the status and the output as they were
// when the exit appeared.
func (r *runner) exit(dir string) (int, string) {
	r.t.Helper()
	for range 3000 {
		data, err := os.ReadFile(filepath.Join(dir, "exit"))
		if err == nil {
			out, err := os.ReadFile(filepath.Join(dir, "output"))
			if err != nil {
				r.t.Fatal(err)
			}
			code, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				r.t.Fatalf("exit file %q: %v", data, err)
			}
			return code, string(out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Fatalf("%s/exit did not appear within a minute", dir)
	return 0, ""
}

func (r *runner) pid(dir string) int {
	r.t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		r.t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		r.t.Fatalf("pid file %q: %v", data, err)
	}
	return pid
}

// groupAlive reports whether the process group pgid has a process that
// is not a zombie.
func groupAlive(t *testing.T, pgid int) bool {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}

// metasched-run, run by busybox's sh and applets (the bundled image) and
// by this machine's sh and GNU tools (the Debian image): the command runs
// in WORKDIR with the environment start was given, in its own session,
// its output written as it comes and capped at MAXBYTES (the rest dropped
// while it goes on), its exit status (128+N for signal N) written once its
// output is complete; start is idempotent, and stop ends the whole
// process group.
func TestRunner(t *testing.T) {
	for _, tools := range []string{busyboxRunner, debianRunner} {
		t.Run(tools, func(t *testing.T) { testRunner(t, newRunner(t, tools)) })
	}
}

func testRunner(t *testing.T, base *runner) {

	t.Run("output, environment, directory, exit status", func(t *testing.T) {
		r := base.in(t)
		dir := r.start("env", `echo "role=$METASCHED_ROLE"; pwd; exit 3`, 1000, "METASCHED_ROLE=master")
		code, out := r.exit(dir)
		want := "role=master\n" + filepath.Join(r.root, "work", "env") + "\n"
		if code != 3 || out != want {
			t.Errorf("exit %d, output %q; want 3 and %q", code, out, want)
		}
		pid := r.pid(dir)
		if sid, err := getsid(pid); err == nil && sid != pid {
			t.Errorf("the program (pid %d) ran in session %d, not its own", pid, sid)
		}
		if _, err := os.Stat(filepath.Join(dir, "exit.tmp")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("exit.tmp left: %v", err)
		}
	})

	t.Run("output capped, the rest read", func(t *testing.T) {
		r := base.in(t)
		// 300 KiB written: the program is not stopped by a full pipe.
		dir := r.start("cap", `i=0; while [ $i -lt 300 ]; do printf '%01024d' $i; i=$((i+1)); done; echo end >&2; exit 0`, 10000)
		code, out := r.exit(dir)
		var all strings.Builder
		for i := range 300 {
			fmt.Fprintf(&all, "%01024d", i)
		}
		if code != 0 || out != all.String()[:10000] {
			t.Errorf("exit %d, %d bytes of output (%.40q…); want 0 and the first 10000 bytes", code, len(out), out)
		}
		dir = r.start("nothing", `echo lost`, 0)
		if code, out := r.exit(dir); code != 0 || out != "" {
			t.Errorf("MAXBYTES 0: exit %d, output %q", code, out)
		}
	})

	t.Run("output as it comes, read by read", func(t *testing.T) {
		r := base.in(t)
		// 200 lines, each a read of its own (the program waits between
		// them), well within MAXBYTES; the first is in the output while
		// the program waits for the file go.
		dir := r.start("lines", `echo first; while [ ! -e go ]; do sleep 0.05; done; i=0; while [ $i -lt 200 ]; do echo "line $i"; sleep 0.01; i=$((i+1)); done`, 4<<20)
		for n := 0; ; n++ {
			out, err := os.ReadFile(filepath.Join(dir, "output"))
			if err != nil && !errors.Is(err, fs.ErrNotExist) { // not there yet: the program has not written
				t.Fatal(err)
			}
			if string(out) == "first\n" {
				break
			}
			if n == 3000 {
				t.Fatal("the first line is not in the output within a minute while the program runs")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := os.WriteFile(filepath.Join(r.root, "work", "lines", "go"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
		var want strings.Builder
		want.WriteString("first\n")
		for i := range 200 {
			fmt.Fprintf(&want, "line %d\n", i)
		}
		if code, out := r.exit(dir); code != 0 || out != want.String() {
			t.Errorf("exit %d, %d bytes of output (…%q); want 0 and %d bytes", code, len(out), out[max(0, len(out)-40):], want.Len())
		}
	})

	t.Run("killed by a signal", func(t *testing.T) {
		r := base.in(t)
		dir := r.start("signal", `echo before; kill -9 $$; echo after`, 1000)
		if code, out := r.exit(dir); code != 128+9 || out != "before\n" {
			t.Errorf("exit %d, output %q; want 137 and \"before\\n\"", code, out)
		}
	})

	t.Run("exit only once the output is complete", func(t *testing.T) {
		r := base.in(t)
		// The program ends at once; a child it left writes later.
		dir := r.start("late", `(sleep 0.5; echo late) & echo early`, 1000)
		if code, out := r.exit(dir); code != 0 || out != "early\nlate\n" {
			t.Errorf("exit %d, output %q when the exit appeared; want 0 and \"early\\nlate\\n\"", code, out)
		}
	})

	t.Run("start is idempotent", func(t *testing.T) {
		r := base.in(t)
		dir := r.start("twice", `echo ran >>../ran; sleep 0.3`, 1000)
		pid := r.pid(dir)
		if code, out := r.run(nil, "start", dir, filepath.Join(r.root, "work", "twice"), "1000"); code != 0 {
			t.Fatalf("second start: exit %d: %s", code, out)
		}
		if code, _ := r.exit(dir); code != 0 {
			t.Errorf("exit %d", code)
		}
		if r.pid(dir) != pid {
			t.Errorf("pid changed from %d to %d", pid, r.pid(dir))
		}
		ran, err := os.ReadFile(filepath.Join(r.root, "work", "ran"))
		if err != nil {
			t.Fatal(err)
		}
		if string(ran) != "ran\n" {
			t.Errorf("the command ran %q", ran)
		}
	})

	t.Run("stop ends the process group", func(t *testing.T) {
		r := base.in(t)
		dir := r.start("stop", `sleep 600 & echo up; sleep 600`, 1000)
		pid := r.pid(dir)
		if !groupAlive(t, pid) {
			t.Fatal("the program is not running")
		}
		if code, out := r.run(nil, "stop", dir); code != 0 {
			t.Fatalf("stop: exit %d: %s", code, out)
		}
		if code, out := r.exit(dir); code != 128+15 || out != "up\n" {
			t.Errorf("exit %d, output %q; want 143 (SIGTERM) and \"up\\n\"", code, out)
		}
		if groupAlive(t, pid) {
			t.Errorf("process group %d still has processes after stop", pid)
		}
		if code, out := r.run(nil, "stop", dir); code != 0 {
			t.Errorf("stop of an ended program: exit %d: %s", code, out)
		}
	})

	t.Run("stop kills what ignores SIGTERM", func(t *testing.T) {
		r := base.in(t)
		dir := r.start("stubborn", `trap "" TERM; echo up; sleep 600`, 1000)
		if code, out := r.run(nil, "stop", dir); code != 0 {
			t.Fatalf("stop: exit %d: %s", code, out)
		}
		if code, out := r.exit(dir); code != 128+9 || out != "up\n" {
			t.Errorf("exit %d, output %q; want 137 (SIGKILL after 5 s)", code, out)
		}
	})

	t.Run("run returns once the program has ended", func(t *testing.T) {
		r := base.in(t)
		dir := filepath.Join(r.root, "run", "fg")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "command"), []byte(`sleep 0.3; echo "rank=$METASCHED_RANK"; exit 5`), 0o644); err != nil {
			t.Fatal(err)
		}
		code, out := r.run([]string{"METASCHED_RANK=2"}, "run", dir, filepath.Join(r.root, "work", "fg"), "1000")
		if code != 0 || out != "" {
			t.Fatalf("run: exit %d: %q", code, out)
		}
		// Written before run returned: no wait.
		data, err := os.ReadFile(filepath.Join(dir, "exit"))
		if err != nil || strings.TrimSpace(string(data)) != "5" {
			t.Errorf("exit file after run: %q, %v; want 5", data, err)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "output")); string(got) != "rank=2\n" {
			t.Errorf("output %q", got)
		}
		if groupAlive(t, r.pid(dir)) {
			t.Errorf("the program's group still runs after run returned")
		}
		// A DIR already run runs nothing again.
		if code, out := r.run(nil, "run", dir, filepath.Join(r.root, "work", "fg"), "1000"); code != 0 {
			t.Errorf("run again: exit %d: %s", code, out)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "output")); string(got) != "rank=2\n" {
			t.Errorf("output after a second run %q", got)
		}
	})

	t.Run("bad arguments", func(t *testing.T) {
		r := base.in(t)
		if code, out := r.run(nil, "stop", filepath.Join(r.root, "never")); code != 0 {
			t.Errorf("stop with nothing started: exit %d: %s", code, out)
		}
		for _, tc := range []struct {
			args []string
			msg  string
		}{
			{[]string{"start", "/x", "/y", "lots"}, "MAXBYTES: must be a whole number of bytes, not 'lots'"},
			{[]string{"start", "rel", "/y", "10"}, "DIR: must be an absolute path, not 'rel'"},
			{[]string{"start", "/x", "y", "10"}, "WORKDIR: must be an absolute path, not 'y'"},
			{[]string{"start", filepath.Join(r.root, "nocmd"), filepath.Join(r.root, "w"), "10"}, "/command: no such file"},
			{[]string{"start", "/x"}, "usage: metasched-run start DIR WORKDIR MAXBYTES"},
			{[]string{"run"}, "usage: metasched-run run DIR WORKDIR MAXBYTES"},
			{[]string{"rerun"}, "usage: metasched-run start DIR WORKDIR MAXBYTES | run DIR WORKDIR MAXBYTES | stop DIR"},
		} {
			code, out := r.run(nil, tc.args...)
			if code == 0 || !strings.Contains(out, tc.msg) {
				t.Errorf("%q: exit %d, %q; want a failure saying %q", tc.args, code, out, tc.msg)
			}
		}
	})
}

// in returns the runner for subtest t.
func (r *runner) in(t *testing.T) *runner {
	c := *r
	c.t = t
	return &c
}

func getsid(pid int) (int, error) {
	sid, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(sid), nil
}
