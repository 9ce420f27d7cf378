package libvirtdtest

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A root daemon gets the cpu cgroup controller (and cpuacct, which
// libvirt wants beside it on a host with cgroup v1), so that a domain's
// <cputune> quota holds: libvirt puts each vCPU thread of a guest in a
// cgroup of its own, MOUNT/machine/qemu-ID-NAME.libvirt-qemu/vcpuN, and
// writes the quota there. libvirt makes that path from the root of each
// hierarchy, and ID restarts at 1 on every daemon, so two daemons of one
// machine would share the cgroup of a guest that migrates between them.
// Each daemon therefore gets a directory of its own in every cgroup
// hierarchy it uses (MOUNT/metasched-STATEDIR), bind-mounted over the
// hierarchy's mount point in its private mount namespace: there it is
// the root, and what libvirt makes goes below it. Stop removes those
// directories (a test binary killed before its Stop leaves them behind,
// empty: rmdir takes them).

// cgroupPrefix starts the name of a daemon's cgroup directories.
const cgroupPrefix = "metasched-"

// cgroupMounts lists the mount points of the cgroup hierarchies a
// daemon's guests use: the cgroup v1 hierarchies of the cpu and cpuacct
// controllers and a cgroup v2 hierarchy beside them (libvirt tracks its
// guests there too). ok is false when there is no v1 cpu and cpuacct
// controller: this package then gives the daemon no cgroup controllers.
func cgroupMounts() (mounts []string, ok bool, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	var cpu, cpuacct bool
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPEROPTIONS
		pre, post, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		a, b := strings.Fields(pre), strings.Fields(post)
		if len(a) < 5 || len(b) < 3 {
			continue
		}
		point := unescapeMount(a[4])
		switch b[0] {
		case "cgroup":
			opts := strings.Split(b[2], ",")
			hasCPU, hasAcct := slices.Contains(opts, "cpu"), slices.Contains(opts, "cpuacct")
			if hasCPU || hasAcct {
				cpu, cpuacct = cpu || hasCPU, cpuacct || hasAcct
				mounts = append(mounts, point)
			}
		case "cgroup2":
			mounts = append(mounts, point)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	if !cpu || !cpuacct {
		return nil, false, nil
	}
	slices.Sort(mounts)
	return slices.Compact(mounts), true, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// makeCgroups makes the daemon's directory in every hierarchy of mounts
// and returns the pairs (mount point, directory) for the bind mounts.
func (d *Daemon) makeCgroups(mounts []string) ([][2]string, error) {
	name := cgroupPrefix + filepath.Base(d.dir)
	var out [][2]string
	for _, m := range mounts {
		dir := filepath.Join(m, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return out, fmt.Errorf("cgroup of the daemon: %w", err)
		}
		d.cgroups = append(d.cgroups, dir)
		out = append(out, [2]string{m, dir})
	}
	return out, nil
}

// cgroupBusyWait bounds the wait for a cgroup whose last processes have
// ended but are not reaped yet (a process killed with its parent, which
// init reaps in its own time, keeps its cgroup busy until then).
const cgroupBusyWait = 10 * time.Second

// removeCgroup removes one empty cgroup directory, waiting while it is
// busy for at most cgroupBusyWait; one already gone is no error.
func removeCgroup(dir string) error {
	deadline := time.Now().Add(cgroupBusyWait)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// removeCgroups removes the daemon's cgroup directories, deepest first.
// A cgroup is removed with rmdir once no process is in it and it has no
// children: call it when every process of the daemon has ended.
func (d *Daemon) removeCgroups() error {
	var errs []error
	left := d.cgroups[:0]
	for _, root := range d.cgroups {
		var dirs []string
		err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			left = append(left, root)
			continue
		}
		failed := false
		for _, dir := range slices.Backward(dirs) {
			if err := removeCgroup(dir); err != nil {
				errs = append(errs, fmt.Errorf("remove cgroup: %w", err))
				failed = true
				break
			}
		}
		if failed {
			left = append(left, root)
		}
	}
	d.cgroups = left
	return errors.Join(errs...)
}
