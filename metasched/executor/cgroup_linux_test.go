package executor_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/metasched/executor"
)

// testCgroups is a cgroup of the test's own, in the test process's cgroup
// (as the daemon's would be), for the executor's jobs' cgroups: the test
// sees what is left in it. It is removed at the end.
func testCgroups(t *testing.T) string {
	t.Helper()
	own, err := executor.FindCgroupParent()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(own, "metasched-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("the test's cgroup: %v", err)
		}
	})
	return dir
}

// TestCommandEscapees: a job's command starts a process that double-forks
// and calls setsid, leaving the command's process group and session, and
// ends: normally, with a failure, cancelled (a cancel or a walltime), or
// with its supervisor killed. Every time, Run returns only once that
// process has ended too, and the job's cgroup is gone. Before, the process
// ran on after its job.
func TestCommandEscapees(t *testing.T) {
	t.Parallel()
	// The escapee writes its PID, then the command prints ready.
	const escape = `( setsid sh -c 'echo $$ > "$0"; exec sleep 300' "$PWD/escapee" & ); while [ ! -s escapee ]; do sleep 0.01; done; echo ready; `
	for _, tt := range []struct {
		name, then string
		cancel     bool // ctx cancelled once ready
		killSup    bool // the supervisor SIGKILLed once ready
		want       executor.Result
	}{
		{name: "exit", then: `exit 0`},
		{name: "failure", then: `exit 3`, want: executor.Result{ExitCode: 3, Reason: "exit status 3"}},
		{name: "cancel", then: `exec sleep 300`, cancel: true,
			want: executor.Result{ExitCode: 128 + 15, Reason: "killed by signal SIGTERM (15)"}},
		{name: "supervisor killed", then: `exec sleep 300`, killSup: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cgroups := testCgroups(t)
			work := userDir(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			out := newWatchWriter("ready\n")
			ex := newCommand(t, executor.CommandOptions{Grace: 300 * time.Millisecond, WorkDir: work, CgroupParent: cgroups})
			r := shRun(t, escape+tt.then, out)
			done := startRun(t, ctx, ex, r, out)
			data, err := os.ReadFile(filepath.Join(work, "escapee"))
			if err != nil {
				t.Fatal(err)
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			defer syscall.Kill(pid, syscall.SIGKILL) // whatever happens
			switch {
			case tt.cancel:
				cancel()
			case tt.killSup:
				if err := syscall.Kill(supervisorPID(t, executor.AttemptDir(r.Dir, 0)), syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			rr := waitRun(t, done)
			switch {
			case tt.cancel:
				if !errors.Is(rr.err, context.Canceled) {
					t.Fatalf("error %v, want context.Canceled", rr.err)
				}
			case tt.killSup:
				if rr.err == nil || !strings.Contains(rr.err.Error(), "without recording how the command ended") {
					t.Fatalf("error %v, want the supervisor's death", rr.err)
				}
			case rr.err != nil:
				t.Fatal(rr.err)
			}
			if rr.res != tt.want {
				t.Errorf("result %+v, want %+v", rr.res, tt.want)
			}
			if running(pid) {
				t.Errorf("the job's escapee (PID %d, its own session) runs on after the job", pid)
			}
			left, err := os.ReadDir(cgroups)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range left {
				if e.IsDir() {
					t.Errorf("the job's cgroup %s is left", e.Name())
				}
			}
		})
	}
}

// TestCommandNoCgroup: where the executor cannot make a cgroup per job
// (here a directory that is no cgroup, or an unmounted hierarchy), it is
// refused at its start, with the reason.
func TestCommandNoCgroup(t *testing.T) {
	t.Parallel()
	_, err := executor.NewCommand(zerolog.Nop(), executor.CommandOptions{RunAs: jobUser(), CgroupParent: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "runs each job in a cgroup of its own") || !strings.Contains(err.Error(), "is not a cgroup v2 directory") {
		t.Errorf("a parent that is no cgroup: %v", err)
	}
}

// TestParseCgroupParent finds the daemon's cgroup v2 directory from its
// mountinfo and /proc/self/cgroup, on hybrid and unified machines, in a
// cgroup namespace, and says why there is none.
func TestParseCgroupParent(t *testing.T) {
	t.Parallel()
	const (
		hybrid = `24 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
31 24 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 31 0:39 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
`
		unified = `27 22 0:25 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate
`
		nsroot = `27 22 0:25 /system.slice/x.service /sys/fs/cgroup rw - cgroup2 cgroup2 rw
`
		spaced = `27 22 0:25 / /mnt/my\040cgroups rw - cgroup2 none rw
`
		v1only = `42 31 0:39 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory
`
	)
	for _, tt := range []struct {
		name, mountinfo, self, want, err string
	}{
		{"hybrid, root cgroup", hybrid, "4:memory:/x\n0::/\n", "/sys/fs/cgroup/unified", ""},
		{"unified, a service", unified, "0::/system.slice/metasched.service\n", "/sys/fs/cgroup/system.slice/metasched.service", ""},
		{"a mount of a subtree", nsroot, "0::/system.slice/x.service/sub\n", "/sys/fs/cgroup/sub", ""},
		{"escaped mount point", spaced, "0::/a\n", "/mnt/my cgroups/a", ""},
		{"v1 only", v1only, "4:memory:/x\n", "", "no cgroup v2 hierarchy is mounted"},
		{"in no v2 cgroup", unified, "4:memory:/x\n", "", "the daemon is in no cgroup v2"},
		{"outside the mount", nsroot, "0::/user.slice\n", "", "is not below the cgroup v2 mount at /sys/fs/cgroup"},
	} {
		got, err := executor.ParseCgroupParent([]byte(tt.mountinfo), []byte(tt.self))
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %q, %v; want the error %q", tt.name, got, err, tt.err)
			}
		case err != nil || got != tt.want:
			t.Errorf("%s: %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
