package libvirtdtest_test

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
)

// quotaDomain is a firmware-only guest whose vCPUs may use a quarter of a
// core each.
const quotaDomain = `<domain type='qemu'><name>tiny</name><memory unit='MiB'>64</memory>
 <vcpu placement='static' current='1'>2</vcpu>
 <cputune><period>100000</period><quota>25000</quota></cputune>
 <os><type arch='x86_64' machine='pc'>hvm</type></os>
 <cpu mode='custom' match='exact'><model fallback='allow'>qemu64</model></cpu>
 <devices><emulator>/usr/bin/qemu-system-x86_64</emulator></devices></domain>`

// Root daemons have the cpu cgroup controller, each in a cgroup directory
// of its own: a guest's vCPU threads run under its <cputune> quota (also
// a vCPU plugged later, and after a live migration to a daemon where the
// guest gets the same domain ID and name), the two daemons' cgroups of
// that guest never collide, and Stop removes the directories.
func TestRootDaemonCPUQuota(t *testing.T) {
	libvirtdtest.SkipShort(t)
	needDaemons(t)
	if _, ok := cpuMount(t); !ok {
		t.Fatal("this host has no cgroup v1 cpu controller: the root daemons cannot enforce a CPU quota")
	}
	a := libvirtdtest.StartT(t, libvirtdtest.Options{Root: true})
	b := libvirtdtest.StartT(t, libvirtdtest.Options{Root: true})
	if !a.CPUControl() || !b.CPUControl() {
		t.Fatalf("root daemons without the cpu controller (%v, %v)", a.CPUControl(), b.CPUControl())
	}
	xml := filepath.Join(t.TempDir(), "tiny.xml")
	if err := os.WriteFile(xml, []byte(quotaDomain), 0o644); err != nil {
		t.Fatal(err)
	}
	virsh(t, a.URI(), "define", xml)
	virsh(t, a.URI(), "start", "tiny")
	checkQuota(t, a, 1)
	virsh(t, a.URI(), "setvcpus", "tiny", "2", "--live")
	checkQuota(t, a, 2)

	port := libvirtdtest.FreePort(t)
	virsh(t, a.URI(), "migrate", "--live", "--p2p", "tiny", b.URI(), "tcp://127.0.0.1:"+strconv.Itoa(port))
	checkQuota(t, b, 2)
	if out := virsh(t, b.URI(), "schedinfo", "tiny"); !strings.Contains(out, "vcpu_quota     : 25000") {
		t.Errorf("schedinfo after the migration:\n%s", out)
	}

	dirs := daemonCgroups(t, a, b)
	if len(dirs) == 0 {
		t.Fatal("the daemons have no cgroup directories")
	}
	for _, d := range []*libvirtdtest.Daemon{a, b} {
		if err := d.Stop(); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("cgroup directory %s left after Stop (stat: %v)", dir, err)
		}
	}
}

// checkQuota finds the guest "tiny" of d and checks that each of its
// vCPU threads is in a cpu cgroup of d's own with a quota of 25 ms per
// 100 ms, and that there are n of them.
func checkQuota(t *testing.T, d *libvirtdtest.Daemon, n int) {
	t.Helper()
	pids, err := d.GuestPIDs()
	if err != nil {
		t.Fatal(err)
	}
	pid, ok := pids["tiny"]
	if !ok {
		t.Fatalf("no guest tiny on %s (%v)", d.Dir(), pids)
	}
	mount, _ := cpuMount(t)
	tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	own := "/metasched-" + filepath.Base(d.Dir()) + "/"
	vcpus := 0
	for _, task := range tasks {
		path := cpuCgroupOf(t, "/proc/"+strconv.Itoa(pid)+"/task/"+task.Name()+"/cgroup")
		if !strings.Contains(path, "/vcpu") {
			continue
		}
		vcpus++
		if !strings.HasPrefix(path, own) {
			t.Errorf("vcpu thread %s is in cgroup %s, not under the daemon's %s", task.Name(), path, own)
		}
		q, err := os.ReadFile(filepath.Join(mount, path, "cpu.cfs_quota_us"))
		if err != nil || strings.TrimSpace(string(q)) != "25000" {
			t.Errorf("quota of %s: %q, %v; want 25000", path, q, err)
		}
	}
	if vcpus != n {
		t.Errorf("%d vcpu threads in vcpu cgroups, want %d", vcpus, n)
	}
}

// cpuCgroupOf reads the cpu controller's cgroup from a /proc cgroup file.
func cpuCgroupOf(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpu") {
			return parts[2]
		}
	}
	t.Fatalf("%s has no cpu controller line:\n%s", file, b)
	return ""
}

// cpuMount is the mount point of the cgroup v1 hierarchy of the cpu
// controller.
func cpuMount(t *testing.T) (string, bool) {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // read only: nothing to lose
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if ok && len(a) >= 5 && len(b) >= 3 && b[0] == "cgroup" && slices.Contains(strings.Split(b[2], ","), "cpu") {
			return a[4], true
		}
	}
	return "", false
}

// daemonCgroups lists the cgroup directories of the daemons in the cpu
// hierarchy.
func daemonCgroups(t *testing.T, ds ...*libvirtdtest.Daemon) []string {
	t.Helper()
	mount, _ := cpuMount(t)
	var out []string
	for _, d := range ds {
		dir := filepath.Join(mount, "metasched-"+filepath.Base(d.Dir()))
		if _, err := os.Stat(dir); err == nil {
			out = append(out, dir)
		}
	}
	return out
}
