package libvirtdtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/netlab"
)

const tinyXML = `<domain type='qemu'><name>tiny</name><memory unit='MiB'>128</memory>
 <currentMemory unit='MiB'>128</currentMemory><vcpu placement='static' current='1'>4</vcpu>
 <os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/><apic/></features>
 <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
 <devices><emulator>/usr/bin/qemu-system-x86_64</emulator><memballoon model='virtio'/></devices></domain>
`

// needDaemons fails the test when daemons cannot be started here: the
// test command installs what they need.
func needDaemons(t *testing.T) {
	t.Helper()
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("virsh"); err != nil {
		t.Fatal("virsh not found (on Debian: apt-get install libvirt-clients)")
	}
}

// virsh runs virsh against uri and returns its standard output.
func virsh(t *testing.T, uri string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-c", uri}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("virsh %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// running reports whether process pid exists and is not a zombie.
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return false
	}
	state := b[i+2]
	return state != 'Z' && state != 'X'
}

func TestStartRejectsBadHostUUID(t *testing.T) {
	for _, u := range []string{"not-a-uuid", "11111111-1111-1111-1111-111111111111", `1"; x = "2`} {
		d, err := libvirtdtest.Start(context.Background(), libvirtdtest.Options{HostUUID: u})
		if err == nil {
			if err := d.Stop(); err != nil {
				t.Error(err)
			}
			t.Errorf("Start(HostUUID %q): no error", u)
		} else if !strings.Contains(err.Error(), "host uuid") {
			t.Errorf("Start(HostUUID %q): error %q does not mention the host uuid", u, err)
		}
	}
}

func TestTwoDaemonsGuestAndStop(t *testing.T) {
	libvirtdtest.SkipShort(t)
	t.Parallel()
	needDaemons(t)
	uuids := []string{
		"11111111-1111-4111-8111-111111111111",
		"22222222-2222-4222-8222-222222222222",
	}

	// Start both daemons concurrently.
	ctx, cancel := context.WithTimeout(context.Background(), libvirtdtest.StartTimeout)
	defer cancel()
	daemons := make([]*libvirtdtest.Daemon, len(uuids))
	errs := make([]error, len(uuids))
	var wg sync.WaitGroup
	for i, u := range uuids {
		wg.Go(func() {
			daemons[i], errs[i] = libvirtdtest.Start(ctx, libvirtdtest.Options{HostUUID: u})
		})
	}
	wg.Wait()
	for _, d := range daemons {
		if d != nil {
			t.Cleanup(func() {
				if err := d.Stop(); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	a, b := daemons[0], daemons[1]

	if a.URI() == b.URI() {
		t.Fatalf("both daemons have URI %s", a.URI())
	}
	for i, d := range daemons {
		conn, err := net.Dial("unix", d.Socket())
		if err != nil {
			t.Fatalf("daemon %d: %v", i, err)
		}
		conn.Close()
		if !strings.Contains(d.URI(), "socket="+d.Socket()) {
			t.Errorf("daemon %d: URI %s does not name socket %s", i, d.URI(), d.Socket())
		}
		if !running(d.PID()) {
			t.Errorf("daemon %d: libvirtd (pid %d) is not running", i, d.PID())
		}
		if caps := virsh(t, d.URI(), "capabilities"); !strings.Contains(caps, "<uuid>"+uuids[i]+"</uuid>") {
			t.Errorf("daemon %d: capabilities do not show host uuid %s:\n%s", i, uuids[i], caps)
		}
	}

	// A tiny transient guest on a.
	xmlPath := filepath.Join(t.TempDir(), "tiny.xml")
	if err := os.WriteFile(xmlPath, []byte(tinyXML), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh(t, a.URI(), "create", xmlPath)
	guests, err := a.GuestPIDs()
	if err != nil {
		t.Fatal(err)
	}
	guestPID, ok := guests["tiny"]
	if !ok || len(guests) != 1 {
		t.Fatalf("GuestPIDs() = %v, want just tiny", guests)
	}
	if !running(guestPID) {
		t.Fatalf("guest tiny (pid %d) is not running", guestPID)
	}
	if other, err := b.GuestPIDs(); err != nil || len(other) != 0 {
		t.Errorf("second daemon: GuestPIDs() = %v, %v, want none", other, err)
	}
	b2, err := os.ReadFile(filepath.Join(a.Dir(), "run", "libvirt", "virtlogd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	virtlogdPID, err := strconv.Atoi(strings.TrimSpace(string(b2)))
	if err != nil || !running(virtlogdPID) {
		t.Fatalf("virtlogd pid file %q: not a running process (%v)", b2, err)
	}

	// Stop everything and check that nothing is left.
	for i, d := range daemons {
		dir, pid := d.Dir(), d.PID()
		if err := d.Stop(); err != nil {
			t.Fatalf("daemon %d: Stop: %v", i, err)
		}
		if running(pid) {
			t.Errorf("daemon %d: libvirtd (pid %d) still running after Stop", i, pid)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("daemon %d: state directory %s not removed (stat: %v)", i, dir, err)
		}
		if err := d.Stop(); err != nil {
			t.Errorf("daemon %d: second Stop: %v", i, err)
		}
	}
	if running(guestPID) {
		t.Errorf("guest tiny (pid %d) still running after Stop", guestPID)
	}
	if running(virtlogdPID) {
		t.Errorf("virtlogd (pid %d) still running after Stop", virtlogdPID)
	}
}

func TestStartT(t *testing.T) {
	t.Parallel()
	needDaemons(t)
	d := libvirtdtest.StartT(t, libvirtdtest.Options{})
	if !running(d.PID()) {
		t.Fatalf("libvirtd (pid %d) is not running", d.PID())
	}
	if u := d.HostUUID(); len(u) != 36 || u[14] != '4' {
		t.Errorf("default host uuid %q is not a version 4 UUID", u)
	}
	if info, err := os.Stat(d.Dir()); err != nil || info.Mode().Perm() != 0o755 {
		t.Errorf("state directory %s: %v, %v, want mode 0755", d.Dir(), info, err)
	}
}

func TestStartTimeoutCleansUp(t *testing.T) {
	libvirtdtest.SkipShort(t)
	t.Parallel()
	needDaemons(t)
	for _, root := range []bool{false, true} {
		t.Run(fmt.Sprintf("root=%v", root), func(t *testing.T) { startTimeoutCleansUp(t, libvirtdtest.Options{Root: root}) })
	}
}

// startTimeoutCleansUp starts a daemon with too short a timeout and checks
// that nothing is left.
func startTimeoutCleansUp(t *testing.T, opts libvirtdtest.Options) {
	// Long enough for libvirtd to run, too short for it to be ready.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	d, err := libvirtdtest.Start(ctx, opts)
	if err == nil {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
		t.Fatal("Start with a 300 ms timeout: no error")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Start error %q does not wrap context.DeadlineExceeded", err)
	}
	// The error names the state directory, which must be gone.
	_, rest, ok := strings.Cut(err.Error(), "start libvirtd in ")
	dir, _, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || !strings.Contains(dir, "libvirtd-") {
		t.Fatalf("Start error %q does not name the state directory", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state directory %s left behind (stat: %v)", dir, err)
	}
}

// netNSOf returns the identity of the network namespace of process pid.
func netNSOf(t *testing.T, pid int) string {
	t.Helper()
	ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// A root daemon in a grid's network namespace: it is a system daemon with
// its own host uuid, its guest's QEMU runs in the grid's namespace and on
// a site's bridge, and Stop ends libvirtd, virtlogd and the guest by PID
// and removes the directory.
func TestRootDaemonInGrid(t *testing.T) {
	libvirtdtest.SkipShort(t)
	needDaemons(t)
	if err := netlab.Check(); err != nil {
		t.Fatal(err)
	}
	g := netlab.NewGridT(t, netlab.GridOptions{Sites: []string{"a"}})
	const uuid = "33333333-3333-4333-8333-333333333333"
	d := libvirtdtest.StartT(t, libvirtdtest.Options{Root: true, NetNS: g.Namespace(), HostUUID: uuid})
	if !d.Root() || d.NetNS() != g.Namespace() || !strings.HasPrefix(d.URI(), "qemu+unix:///system?socket=") {
		t.Errorf("root %v, netns %q, URI %s", d.Root(), d.NetNS(), d.URI())
	}
	if caps := virsh(t, d.URI(), "capabilities"); !strings.Contains(caps, "<uuid>"+uuid+"</uuid>") {
		t.Errorf("capabilities do not show host uuid %s:\n%s", uuid, caps)
	}
	gridNS, err := os.Stat(filepath.Join("/run/netns", g.Namespace()))
	if err != nil {
		t.Fatal(err)
	}
	if ns, err := os.Stat("/proc/" + strconv.Itoa(d.PID()) + "/ns/net"); err != nil || !os.SameFile(ns, gridNS) {
		t.Errorf("libvirtd (pid %d) is not in the grid's network namespace (%v)", d.PID(), err)
	}
	self := netNSOf(t, os.Getpid())

	xml := strings.Replace(tinyXML, "<memballoon", "<interface type='bridge'><source bridge='"+g.Bridge("a")+
		"'/><mac address='52:54:00:00:00:11'/><model type='virtio'/></interface><memballoon", 1)
	xmlPath := filepath.Join(t.TempDir(), "tiny.xml")
	if err := os.WriteFile(xmlPath, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh(t, d.URI(), "create", xmlPath)
	guests, err := d.GuestPIDs()
	if err != nil {
		t.Fatal(err)
	}
	guestPID, ok := guests["tiny"]
	if !ok || len(guests) != 1 || !running(guestPID) {
		t.Fatalf("GuestPIDs() = %v, want just tiny, running", guests)
	}
	if netNSOf(t, guestPID) == self {
		t.Errorf("guest tiny (pid %d) runs in the caller's network namespace", guestPID)
	}
	ports := exec.Command("ip", "-n", g.Namespace(), "-o", "link", "show", "master", g.Bridge("a"))
	if out, err := ports.CombinedOutput(); err != nil || !strings.Contains(string(out), "vnet") {
		t.Errorf("bridge %s has no guest tap: %s, %v", g.Bridge("a"), out, err)
	}

	// Every process named by a pid file of the daemon (libvirtd, virtlogd,
	// the guest) must be gone after Stop.
	pidFiles := map[string]int{}
	filepath.WalkDir(d.Dir(), func(path string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && strings.HasSuffix(path, ".pid") {
			if b, err := os.ReadFile(path); err == nil {
				if p, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && running(p) {
					pidFiles[strings.TrimPrefix(path, d.Dir())] = p
				}
			}
		}
		return nil
	})
	t.Logf("processes of pid files: %v", pidFiles)
	if _, ok := pidFiles["/run/libvirtd.pid"]; !ok {
		t.Errorf("no running libvirtd named by run/libvirtd.pid: %v", pidFiles)
	}
	// A root process of the host named by a pid file in the daemon's
	// directory is not the daemon's: Stop must leave it alone.
	stranger := exec.Command("sleep", "600")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stranger.Process.Kill(); stranger.Wait() }()
	if err := os.WriteFile(filepath.Join(d.Dir(), "run", "stranger.pid"), []byte(strconv.Itoa(stranger.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	dir, pid := d.Dir(), d.PID()
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	if !running(stranger.Process.Pid) {
		t.Errorf("Stop ended process %d, not the daemon's, named by a pid file", stranger.Process.Pid)
	}
	if running(pid) || running(guestPID) {
		t.Errorf("after Stop: libvirtd running %v, guest running %v", running(pid), running(guestPID))
	}
	for f, p := range pidFiles {
		if running(p) {
			t.Errorf("process %d of %s still running after Stop", p, f)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("state directory %s not removed (stat: %v)", dir, err)
	}
}

// Bad root-mode options are refused, each naming its field.
func TestStartRejectsBadNetNS(t *testing.T) {
	for _, tc := range []struct {
		opts libvirtdtest.Options
		want string
	}{
		{libvirtdtest.Options{NetNS: "x"}, `netns: "x" needs root mode`},
		{libvirtdtest.Options{Root: true, NetNS: "../x"}, `netns: "../x" is not a namespace name`},
		{libvirtdtest.Options{Root: true, NetNS: "ms-no-such-namespace"}, `netns: no network namespace "ms-no-such-namespace"`},
	} {
		checkRefused(t, tc.opts, tc.want)
	}
}

// A migration certificate directory libvirtd could not use is refused
// before anything starts, naming the option.
func TestStartRejectsBadMigrateTLSDir(t *testing.T) {
	hidden := t.TempDir() // its parent is 0700: uid 65534 cannot reach it
	file := filepath.Join(hidden, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts libvirtdtest.Options
		want string
	}{
		{libvirtdtest.Options{MigrateTLSDir: "certs"}, `migrate tls dir: "certs" is not a clean absolute path`},
		{libvirtdtest.Options{MigrateTLSDir: "/nonexistent/metasched-certs"}, "no such file or directory (it must exist before libvirtd starts)"},
		{libvirtdtest.Options{MigrateTLSDir: file}, "is not a directory"},
		{libvirtdtest.Options{MigrateTLSDir: `/tmp/a"b`}, "cannot be written in qemu.conf"},
		{libvirtdtest.Options{MigrateTLSDir: hidden}, "is not traversable by uid 65534"},
		{libvirtdtest.Options{Root: true, MigrateTLSDir: "/run/metasched-certs"}, "is under /run, which the root daemon's mount namespace replaces"},
	} {
		checkRefused(t, tc.opts, tc.want)
	}
}

// checkRefused checks that Start refuses opts with an error holding want.
func checkRefused(t *testing.T, opts libvirtdtest.Options, want string) {
	t.Helper()
	d, err := libvirtdtest.Start(context.Background(), opts)
	if err == nil {
		if err := d.Stop(); err != nil {
			t.Error(err)
		}
		t.Errorf("Start(%+v): no error", opts)
	} else if !strings.Contains(err.Error(), want) {
		t.Errorf("Start(%+v): error %q lacks %q", opts, err, want)
	}
}
