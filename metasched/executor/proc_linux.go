package executor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER of prctl(2).
const prSetChildSubreaper = 36

// BecomeSubreaper makes the calling process a child subreaper (prctl
// PR_SET_CHILD_SUBREAPER): a process that a job leaves behind when its
// parent exits is re-parented to the command's supervisor instead of to
// init, and the supervisor reaps them once the command ended, so that
// none stays a zombie even where init does not reap (some containers and
// sandboxes). Each supervisor calls it at its start. Orphans of the
// process's other children come to it too, and nothing here reaps them:
// call it only in a process whose other children do not leave orphans
// (not the daemon, whose supervisors' orphans would stay its zombies).
func BecomeSubreaper() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_CHILD_SUBREAPER): %w", e)
	}
	return nil
}

func supported() error { return nil }

// commandAttr starts the command inside its cgroup (cg, clone3's
// CLONE_INTO_CGROUP: with no moment outside it), in a process group of its
// own, and has the kernel SIGKILL it when its supervisor dies: a
// supervisor that dies (killed from outside) records no exit, and a
// command left running without one would be run again beside itself
// after the daemon's next start (the daemon then kills what is left in
// the cgroup). (Pdeathsig follows the thread that started the command;
// the Go runtime ends a thread only when a goroutine locked to it exits,
// and the supervisor locks none.) With ids, the command runs with that
// user's uid, gid and supplementary groups (the supervisor, root, keeps
// its own); the child sets the parent-death signal after it switched, so
// the switch does not clear it.
func commandAttr(ids *commandIDs, cg *os.File) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	if ids != nil {
		attr.Credential = &syscall.Credential{Uid: ids.uid, Gid: ids.gid, Groups: ids.groups}
	}
	return attr
}

// noSearch says why the account may not search the directory fi (its
// owner and mode), or "" when it may.
func noSearch(fi os.FileInfo, a account) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return ""
	}
	perm := fi.Mode().Perm()
	var bit os.FileMode
	switch {
	case st.Uid == a.uid:
		bit = 0o100
	case st.Gid == a.gid || slices.Contains(a.groups, st.Gid):
		bit = 0o010
	default:
		bit = 0o001
	}
	if perm&bit != 0 {
		return ""
	}
	return fmt.Sprintf("mode %04o, owned by uid %d and gid %d", perm, st.Uid, st.Gid)
}

// supervisorAttr starts the supervisor in a session of its own, with no
// parent-death signal: it outlives the daemon (a SIGKILL, a crash, a
// restart), and the signals of the daemon's terminal (Ctrl-C) do not reach
// it or its command.
func supervisorAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true}
}

// tryLock takes an exclusive (or shared) flock on f without waiting; it
// reports false when another holds it.
func tryLock(f *os.File, exclusive bool) (bool, error) {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	for {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		switch err {
		case nil:
			return true, nil
		case syscall.EINTR:
			continue
		case syscall.EWOULDBLOCK:
			return false, nil
		}
		return false, err
	}
}

// unlock drops the flock on f.
func unlock(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// closeOnExec marks fd close-on-exec, so that the command does not
// inherit it.
func closeOnExec(fd uintptr) { syscall.CloseOnExec(int(fd)) }

// startTime reads a process's start time (clock ticks after boot, field 22
// of /proc/PID/stat): with the PID it names one process, a PID reused
// since by another has another start time.
func startTime(pid int) (uint64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	return strconv.ParseUint(string(f[19]), 10, 64) // field 22: the 20th after the name
}

// errnoOf digs the errno out of an error of starting a process.
func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return 0
}

// errnoError is an errno a supervisor reported.
func errnoError(n int) error {
	if n == 0 {
		return nil
	}
	return syscall.Errno(n)
}

// exitResult turns a wait status into a Result: the exit status, or
// 128+N for a process killed by signal N.
func exitResult(ps *os.ProcessState) Result {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return Result{ExitCode: ps.ExitCode(), Reason: ps.String()}
	case ws.Signaled():
		sig := ws.Signal()
		reason := fmt.Sprintf("killed by signal %s (%d)", signalName(sig), int(sig))
		if ws.CoreDump() {
			reason += ", core dumped"
		}
		return Result{ExitCode: 128 + int(sig), Reason: reason}
	case ws.ExitStatus() != 0:
		return Result{ExitCode: ws.ExitStatus(), Reason: fmt.Sprintf("exit status %d", ws.ExitStatus())}
	}
	return Result{}
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT",
	syscall.SIGILL: "SIGILL", syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT",
	syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE", syscall.SIGKILL: "SIGKILL",
	syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM",
	syscall.SIGSTKFLT: "SIGSTKFLT", syscall.SIGCHLD: "SIGCHLD", syscall.SIGCONT: "SIGCONT",
	syscall.SIGSTOP: "SIGSTOP", syscall.SIGTSTP: "SIGTSTP", syscall.SIGTTIN: "SIGTTIN",
	syscall.SIGTTOU: "SIGTTOU", syscall.SIGURG: "SIGURG", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGVTALRM: "SIGVTALRM", syscall.SIGPROF: "SIGPROF",
	syscall.SIGWINCH: "SIGWINCH", syscall.SIGIO: "SIGIO", syscall.SIGPWR: "SIGPWR",
	syscall.SIGSYS: "SIGSYS",
}

func signalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(sig))
}
