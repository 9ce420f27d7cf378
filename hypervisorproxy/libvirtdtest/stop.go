package libvirtdtest

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Bounds of Stop: how long processes get to exit after SIGTERM, then after
// SIGKILL, and how often they are polled.
const (
	termGrace = 5 * time.Second
	killWait  = 5 * time.Second
	pollEvery = 20 * time.Millisecond
)

// maxStopPasses bounds how many times Stop reads the pid files again for
// processes it has not seen yet (a guest being started while libvirtd was
// being stopped).
const maxStopPasses = 3

// target is one process Stop must end.
type target interface {
	name() string
	signal(sig syscall.Signal)
	alive() bool
}

// Stop ends libvirtd, its virtlogd and every QEMU guest of the daemon (and
// any other process named by a pid file under Dir() that belongs to the
// daemon, such as a QEMU capabilities probe), by PID: SIGTERM, then SIGKILL
// for those still there after a bounded wait. It waits until each of them is
// gone and then removes Dir(). It returns an error naming what could not be
// stopped or removed; the directory is kept when a process survived, and a
// later Stop tries again. Stop is idempotent: once it has succeeded, it
// returns nil.
func (d *Daemon) Stop() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return nil
	}

	var survivors []string
	var scanErrs []error
	seen := make(map[procKey]bool)
	// Read before libvirtd is signalled: the mount namespace of a root
	// daemon, which only its processes share.
	var mntNS string
	if d.root {
		mntNS = d.daemonMountNS()
	}
	for pass := 0; pass < maxStopPasses; pass++ {
		var targets []target
		if pass == 0 && d.cmd != nil {
			targets = append(targets, childTarget{d})
		}
		procs, err := d.pidFileProcs(seen, mntNS)
		if err != nil {
			scanErrs = append(scanErrs, err)
		}
		for _, p := range procs {
			targets = append(targets, p)
		}
		if len(targets) == 0 {
			break
		}
		survivors = append(survivors, terminate(targets)...)
		for _, p := range procs {
			p.release()
		}
	}

	if len(survivors) > 0 {
		return fmt.Errorf("libvirtdtest: could not stop %s (state directory %s kept)",
			strings.Join(survivors, ", "), d.dir)
	}
	if len(scanErrs) > 0 {
		// Processes may have been missed: keep their pid files.
		return fmt.Errorf("libvirtdtest: stop (state directory %s kept): %w", d.dir, errors.Join(scanErrs...))
	}
	// No process of the daemon is left: another binary's suite may run.
	if d.releaseSuite != nil {
		d.releaseSuite()
	}
	if err := d.removeCgroups(); err != nil {
		return fmt.Errorf("libvirtdtest: stop (state directory %s kept): %w", d.dir, err)
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return fmt.Errorf("libvirtdtest: remove state directory: %w", err)
	}
	d.stopped = true
	return nil
}

// terminate sends SIGTERM to every target, SIGKILL to those still alive after
// termGrace, and returns the names of those still alive killWait later.
func terminate(targets []target) (survivors []string) {
	for _, t := range targets {
		t.signal(syscall.SIGTERM)
	}
	if left := waitGone(targets, termGrace); len(left) > 0 {
		for _, t := range left {
			t.signal(syscall.SIGKILL)
		}
		targets = waitGone(left, killWait)
	} else {
		targets = nil
	}
	for _, t := range targets {
		survivors = append(survivors, t.name())
	}
	return survivors
}

// waitGone polls the targets until none is alive or timeout has passed, and
// returns those still alive.
func waitGone(targets []target, timeout time.Duration) []target {
	deadline := time.Now().Add(timeout)
	for {
		targets = slices.DeleteFunc(targets, func(t target) bool { return !t.alive() })
		if len(targets) == 0 || time.Now().After(deadline) {
			return targets
		}
		time.Sleep(pollEvery)
	}
}

// childTarget is libvirtd itself, the child process Start started and whose
// Wait runs in a goroutine: it is gone (and reaped) once Wait has returned.
type childTarget struct{ d *Daemon }

func (c childTarget) name() string { return fmt.Sprintf("libvirtd (pid %d)", c.d.cmd.Process.Pid) }

func (c childTarget) signal(sig syscall.Signal) {
	_ = c.d.cmd.Process.Signal(sig) // fails only when it has already exited
}

func (c childTarget) alive() bool {
	select {
	case <-c.d.exited:
		return false
	default:
		return true
	}
}

// procKey identifies a process across PID reuse.
type procKey struct {
	pid   int
	start string // start time, field 22 of /proc/PID/stat
}

// proc is a process named by one of the daemon's pid files and checked to
// belong to the daemon. It is not a child of ours: once it exits, it may stay
// a zombie until its parent (usually init) reaps it, which counts as gone.
type proc struct {
	label string
	key   procKey
	p     *os.Process // pidfd-backed where the kernel supports it
}

func (p *proc) name() string { return fmt.Sprintf("%s (pid %d)", p.label, p.key.pid) }

func (p *proc) signal(sig syscall.Signal) {
	if p.alive() {
		_ = p.p.Signal(sig) // fails only when it has already exited
	}
}

func (p *proc) alive() bool {
	state, start, err := procStat(p.key.pid)
	return err == nil && start == p.key.start && state != 'Z' && state != 'X'
}

func (p *proc) release() { _ = p.p.Release() }

// pidFileProcs returns the live processes named by pid files (*.pid) under
// Dir() that belong to the daemon and are not in seen, and adds them to seen:
// virtlogd and the QEMU guests under run/, and the QEMU processes that probe
// capabilities under config/libvirt/qemu/lib/qmp-*/. libvirtd itself (which
// the driver.pid lock files also name) is left out. Pid files that are empty
// or name a process that is gone or not the daemon's (a stale file) are
// skipped.
func (d *Daemon) pidFileProcs(seen map[procKey]bool, mntNS string) ([]*proc, error) {
	var procs []*proc
	guestDir := d.guestPIDDir()
	err := filepath.WalkDir(d.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		if !e.Type().IsRegular() || !strings.HasSuffix(path, ".pid") {
			return nil
		}
		pid, err := readPIDFile(path)
		if err != nil || (d.cmd != nil && pid == d.cmd.Process.Pid) {
			return nil
		}
		label := pidFileLabel(d.dir, path, guestDir)
		p, err := d.openProc(pid, label, mntNS)
		if err != nil || seen[p.key] {
			if p != nil {
				p.release()
			}
			return nil
		}
		seen[p.key] = true
		procs = append(procs, p)
		return nil
	})
	if err != nil {
		err = fmt.Errorf("read pid files: %w", err)
	}
	return procs, err
}

// pidFileLabel names the process of a pid file for error messages.
func pidFileLabel(dir, path, guestDir string) string {
	base := strings.TrimSuffix(filepath.Base(path), ".pid")
	switch {
	case filepath.Dir(path) == guestDir:
		return "qemu guest " + base
	case base == "virtlogd":
		return base
	case base == "qmp":
		return "qemu capabilities probe"
	}
	if rel, err := filepath.Rel(dir, path); err == nil {
		path = rel
	}
	return "process of " + path
}

// openProc returns a handle on process pid if it is alive and belongs to the
// daemon. A session daemon's process runs as uid 65534 with HOME set to
// Dir()/home, like everything libvirtd starts. A root daemon's process is in
// mntNS, the daemon's private mount namespace (which a process of another
// daemon or of the host cannot be in); with mntNS "" (unknown) none is.
func (d *Daemon) openProc(pid int, label, mntNS string) (*proc, error) {
	state, start, err := procStat(pid)
	if err != nil {
		return nil, err
	}
	if state == 'Z' || state == 'X' {
		return nil, fmt.Errorf("pid %d has exited", pid)
	}
	if d.root {
		ns, err := mountNS(pid)
		if err != nil {
			return nil, err
		}
		if mntNS == "" || ns != mntNS {
			return nil, fmt.Errorf("pid %d is not in the mount namespace of the daemon of %s", pid, d.dir)
		}
	} else {
		if uid, err := procUID(pid); err != nil || uid != daemonUID {
			return nil, fmt.Errorf("pid %d does not run as uid %d", pid, daemonUID)
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil {
			return nil, err
		}
		home := "HOME=" + filepath.Join(d.dir, "home")
		if !slices.ContainsFunc(bytes.Split(env, []byte{0}), func(v []byte) bool { return string(v) == home }) {
			return nil, fmt.Errorf("pid %d does not belong to %s", pid, d.dir)
		}
	}
	h, err := os.FindProcess(pid)
	if err != nil {
		return nil, err
	}
	// The handle pins the process (pidfd): check it is still the one seen.
	if _, start2, err := procStat(pid); err != nil || start2 != start {
		_ = h.Release()
		return nil, fmt.Errorf("pid %d has exited", pid)
	}
	return &proc{label: label, key: procKey{pid, start}, p: h}, nil
}

// procStat returns the state and the start time of process pid from
// /proc/PID/stat.
func procStat(pid int) (state byte, start string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", err
	}
	// pid (comm) state ppid ...: comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return 0, "", fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	return fields[0][0], fields[19], nil
}

// procUID returns the real user ID of process pid.
func procUID(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("no Uid in /proc/%d/status", pid)
}

// readPIDFile returns the process ID written in a pid file.
func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("pid file %s: no process id in %q", path, b)
	}
	return pid, nil
}
