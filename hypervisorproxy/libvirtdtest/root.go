package libvirtdtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

// The directories of a root daemon, inside its state directory, and the
// system paths they are bind-mounted on in its private mount namespace.
var rootMounts = []struct{ sub, target string }{
	{"etc", "/etc/libvirt"},
	{"run", "/run"},
	{"lib", "/var/lib"},
	{"cache", "/var/cache"},
	{"log", "/var/log"},
	{"passwd", "/etc/passwd"},
	{"group", "/etc/group"},
}

// qemuUser is the user and group libvirtd looks up before it reads
// qemu.conf (Debian's libvirt-daemon-system creates them; the copies of
// /etc/passwd and /etc/group get them when the host has none).
const (
	qemuUserLine  = "libvirt-qemu:x:64055:64055:Libvirt Qemu,,,:/var/lib/libvirt:/usr/sbin/nologin\n"
	qemuGroupLine = "libvirt-qemu:x:64055:libvirt-qemu\n"
)

// rootQEMUConf runs QEMU as root, with no security driver or namespaces
// of its own, and its output in files (no virtlogd needed for it), so
// that the daemon needs nothing of the host's system services; %s are
// the cgroup controllers libvirt uses (see cgroup.go): the cpu and
// cpuacct controllers when the host has them, for <cputune>, else none.
const rootQEMUConf = `user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ %s ]
namespaces = [ ]
stdio_handler = "file"
`

// rootMountScript bind-mounts the daemon's cgroup directories over their
// hierarchies' mount points (the pairs MOUNT DIR after $1) and its
// directories ($1 is the state directory), and then becomes libvirtd,
// keeping its PID.
const rootMountScript = `set -e
dir=$1
shift
while [ $# -ge 2 ]; do
	mount --bind "$2" "$1"
	shift 2
done
set -- "$dir"
mount --bind "$1/etc" /etc/libvirt
mount --bind "$1/run" /run
mount --bind "$1/lib" /var/lib
mount --bind "$1/cache" /var/cache
mount --bind "$1/log" /var/log
mount --bind "$1/passwd" /etc/passwd
mount --bind "$1/group" /etc/group
exec ` + LibvirtdPath + `
`

// startRoot prepares the state directory of a root daemon, starts libvirtd
// in a private mount namespace (inside the network namespace d.netns when
// set) and waits until it serves connections.
func (d *Daemon) startRoot(ctx context.Context) error {
	if err := os.Chmod(d.dir, 0o700); err != nil {
		return err
	}
	for _, sub := range []string{"etc", "run/libvirt", "lib/libvirt/qemu", "cache/libvirt", "log/libvirt/qemu"} {
		if err := os.MkdirAll(filepath.Join(d.dir, sub), 0o755); err != nil {
			return err
		}
	}
	conf := fmt.Sprintf("host_uuid = %q\n", d.hostUUID) +
		// The socket is root's only (0700): no authentication on top.
		"auth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\n"
	mounts, cpuOK, err := cgroupMounts()
	if err != nil {
		return fmt.Errorf("cgroup hierarchies: %w", err)
	}
	controllers := ""
	var binds [][2]string
	if cpuOK {
		if binds, err = d.makeCgroups(mounts); err != nil {
			return err
		}
		controllers = `"cpu", "cpuacct"`
		d.cpuControl = true
	}
	files := []struct {
		name string
		data []byte
	}{
		{"etc/libvirtd.conf", []byte(conf)},
		{"etc/qemu.conf", []byte(fmt.Sprintf(rootQEMUConf, controllers) + d.qemuConf)},
	}
	for _, f := range []struct{ sys, sub, line string }{
		{"/etc/passwd", "passwd", qemuUserLine},
		{"/etc/group", "group", qemuGroupLine},
	} {
		b, err := os.ReadFile(f.sys)
		if err != nil {
			return err
		}
		files = append(files, struct {
			name string
			data []byte
		}{f.sub, withEntry(b, f.line)})
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(d.dir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	logFile, err := os.OpenFile(d.logPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close() // the child has its own copy

	// Each program execs the next in place: the PID of the process
	// started here is libvirtd's.
	args := []string{"unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", rootMountScript, "sh", d.dir}
	for _, b := range binds {
		args = append(args, b[0], b[1])
	}
	if d.netns != "" {
		args = append([]string{"nsenter", "--net=" + filepath.Join(netnsDir, d.netns)}, args...)
	}
	path, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args[1:]...)
	cmd.Dir = d.dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root"}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	d.cmd = cmd
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	if err := d.waitReady(ctx); err != nil {
		return err
	}
	// Serving: libvirtd has long been exec'd in its mount namespace.
	ns, err := mountNS(cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("mount namespace of libvirtd: %w", err)
	}
	self, err := mountNS(os.Getpid())
	if err != nil {
		return err
	}
	if ns == self {
		return fmt.Errorf("libvirtd (pid %d) is not in a private mount namespace", cmd.Process.Pid)
	}
	d.mu.Lock()
	d.mntNS = ns
	d.mu.Unlock()
	return nil
}

// withEntry returns the lines of a passwd or group file with line added
// unless an entry of the same name is there.
func withEntry(file []byte, line string) []byte {
	name := line[:bytes.IndexByte([]byte(line), ':')+1]
	for l := range bytes.SplitSeq(file, []byte("\n")) {
		if bytes.HasPrefix(l, []byte(name)) {
			return file
		}
	}
	out := bytes.Clone(file)
	if len(out) > 0 && out[len(out)-1] != '\n' {
		out = append(out, '\n')
	}
	return append(out, line...)
}

// mountNS returns the identity of the mount namespace of process pid, as
// the link /proc/PID/ns/mnt reads ("mnt:[INODE]").
func mountNS(pid int) (string, error) {
	return os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/mnt")
}

// daemonMountNS returns the mount namespace that the root daemon's
// processes share: the one recorded when it became ready, or, when the
// start failed before that, libvirtd's own if it is still alive and has
// left the caller's. "" means none is known: no process can then be
// proven to be the daemon's. Called with d.mu held.
func (d *Daemon) daemonMountNS() string {
	if d.mntNS != "" || d.cmd == nil {
		return d.mntNS
	}
	select {
	case <-d.exited:
		return ""
	default:
	}
	ns, err := mountNS(d.cmd.Process.Pid)
	if err != nil {
		return ""
	}
	if self, err := mountNS(os.Getpid()); err != nil || ns == self {
		return ""
	}
	return ns
}
