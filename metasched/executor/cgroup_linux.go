package executor

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Each attempt's command runs in a cgroup of its own (cgroup v2), made
// inside the daemon's own cgroup: whatever the command starts stays in it,
// a process that double-forks and calls setsid as well, so that the whole
// job can be signalled, and killed at once (cgroup.kill), however it ends.
// No controller is enabled: the cgroup only holds the job's processes.

// cgroupMountInfo and cgroupSelf are read to find the daemon's cgroup.
const (
	cgroupMountInfo = "/proc/self/mountinfo"
	cgroupSelf      = "/proc/self/cgroup"
)

// findCgroupParent returns the directory of the daemon's own cgroup in
// the cgroup v2 hierarchy, wherever that is mounted (/sys/fs/cgroup on a
// unified system, /sys/fs/cgroup/unified beside v1 controllers).
func findCgroupParent() (string, error) {
	mi, err := os.ReadFile(cgroupMountInfo)
	if err != nil {
		return "", err
	}
	self, err := os.ReadFile(cgroupSelf)
	if err != nil {
		return "", err
	}
	return parseCgroupParent(mi, self)
}

// parseCgroupParent finds the cgroup v2 directory of a process from its
// mountinfo (the first cgroup2 mount) and its /proc/PID/cgroup (the
// "0::PATH" line).
func parseCgroupParent(mountinfo, self []byte) (string, error) {
	var mount, root string
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTIONS
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) >= 5 && len(g) >= 1 && g[0] == "cgroup2" {
			root, mount = unescapeMount(f[3]), unescapeMount(f[4])
			break
		}
	}
	if mount == "" {
		return "", errors.New("no cgroup v2 hierarchy is mounted (no cgroup2 line in " + cgroupMountInfo + ")")
	}
	var path string
	found := false
	for line := range strings.Lines(string(self)) {
		if p, ok := strings.CutPrefix(strings.TrimRight(line, "\n"), "0::"); ok {
			path, found = p, true
			break
		}
	}
	if !found || !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("the daemon is in no cgroup v2 (no 0:: line in %s), though one is mounted at %s", cgroupSelf, mount)
	}
	rel, ok := strings.CutPrefix(path, root)
	if root == "/" {
		rel, ok = path, true
	}
	if !ok || (rel != "" && !strings.HasPrefix(rel, "/")) {
		return "", fmt.Errorf("the daemon's cgroup %s is not below the cgroup v2 mount at %s (which shows %s)", path, mount, root)
	}
	return filepath.Join(mount, rel), nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// checkCgroupParent says why the executor cannot make its jobs' cgroups
// in dir, or nil: it makes one and removes it, looks for cgroup.kill
// (Linux 5.14), and checks that the daemon may move processes out of dir
// (write cgroup.procs: root, or a cgroup delegated to the daemon's user).
func checkCgroupParent(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "cgroup.procs")); err != nil {
		return fmt.Errorf("%s is not a cgroup v2 directory: %w", dir, err)
	}
	if err := syscall.Access(filepath.Join(dir, "cgroup.procs"), 2 /* W_OK */); err != nil {
		return fmt.Errorf("the daemon may not move processes between the cgroups below its own, %s (cgroup.procs: %w): run it as root, or delegate its cgroup to it (Delegate=yes in its systemd unit)", dir, err)
	}
	probe, err := cgroupName(dir, "probe")
	if err != nil {
		return err
	}
	if err := makeCgroup(probe); err != nil {
		return err
	}
	defer os.Remove(probe)
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		return fmt.Errorf("cgroups here have no cgroup.kill, which ends every process of a job at once (Linux 5.14 and later have it): %w", err)
	}
	return nil
}

// cgroupName names a cgroup of its own in parent, after what it is for,
// made unique by a random suffix (several daemons may share a cgroup, and
// a job ID is only unique within one daemon).
func cgroupName(parent, what string) (string, error) {
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	return filepath.Join(parent, cgroupPrefix+what+"-"+hex.EncodeToString(rnd[:])), nil
}

// makeCgroup makes the cgroup dir (named by cgroupName).
func makeCgroup(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("cannot make a cgroup in %s (run the daemon as root, or delegate its cgroup to it: Delegate=yes in its systemd unit): %w", filepath.Dir(dir), err)
	}
	return nil
}

// cgroupProcs lists the processes in the cgroup.
func cgroupProcs(dir string) ([]int, error) {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// populated reports whether a process is left in the cgroup (its
// cgroup.events says "populated 1"); a cgroup that is gone is not.
func populated(dir string) bool {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || bytes.Contains(data, []byte("populated 1"))
}

// signalCgroup sends sig to every process in the cgroup.
func signalCgroup(dir string, sig syscall.Signal) {
	pids, _ := cgroupProcs(dir)
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
}

// killCgroup SIGKILLs every process in the cgroup and in the cgroups
// below it at once, those they are forking included (cgroup.kill).
func killCgroup(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// reapChildren reaps every child of this process that has exited: the
// supervisor is a subreaper, and the job's orphans become its children.
// It reports whether children are left (running, or exiting). Call it
// only once the command itself was reaped (exec.Cmd.Wait).
func reapChildren() (left bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil: // ECHILD: none
			return false
		case pid == 0:
			return true
		}
	}
}

// clearCgroup ends what is left in the job's cgroup once the command
// itself has ended: the processes it left get SIGTERM and, after the grace
// period, all are killed at once (cgroup.kill); then the cgroup is
// removed. termAt and killAt are when the job already had those (zero:
// not yet). It returns once the cgroup is empty and gone, or says why not.
func clearCgroup(log zerolog.Logger, dir string, grace time.Duration, termAt, killAt time.Time) error {
	pause := 2 * time.Millisecond
	for {
		reapChildren()
		if !populated(dir) {
			break
		}
		now := time.Now()
		switch {
		case termAt.IsZero():
			log.Info().Msg("the command left processes in its cgroup: SIGTERM to them")
			signalCgroup(dir, syscall.SIGTERM)
			termAt = now
		case killAt.IsZero() && now.Sub(termAt) >= grace:
			log.Warn().Msg("processes of the job outlived the grace period: killing every process of its cgroup")
			if err := killCgroup(dir); err != nil {
				return fmt.Errorf("kill the job's cgroup: %w", err)
			}
			killAt = now
		case !killAt.IsZero() && now.Sub(killAt) >= killWait:
			return fmt.Errorf("processes of the job's cgroup %s survive SIGKILL", dir)
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
	// A process leaves its cgroup as it exits, a moment before its
	// children are handed to this subreaper: reap until no child is left,
	// so that none stays a zombie of init's (which does not reap
	// everywhere). None of them runs any more.
	for deadline := time.Now().Add(killWait); reapChildren() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	return removeCgroup(dir)
}

// endCgroup kills whatever is in the cgroup and removes it, for a job
// whose supervisor is gone: nothing of the job may outlive it.
func endCgroup(dir string) error {
	if err := killCgroup(dir); err != nil {
		return fmt.Errorf("kill the job's cgroup %s: %w", dir, err)
	}
	deadline := time.Now().Add(killWait)
	for populated(dir) {
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of the job's cgroup %s survive SIGKILL", dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return removeCgroup(dir)
}

// removeCgroup removes an empty cgroup; one that is gone already is no
// error. The kernel may say busy for a moment after its last process
// left.
func removeCgroup(dir string) error {
	for tries := 0; ; tries++ {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || tries == 100 {
			return fmt.Errorf("remove the job's cgroup: %w", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// openCgroup opens the cgroup's directory for clone3's CLONE_INTO_CGROUP
// (SysProcAttr.CgroupFD): the command starts inside it, with no moment
// outside.
func openCgroup(dir string) (*os.File, error) {
	return os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
}
