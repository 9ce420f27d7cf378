package hypervisorproxy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// goodBootTimeout bounds the boot of a guest that works: a bound against
// one that never comes up, not a measure (a guest answers in 4 to 20 s on
// two loaded cores). badBootTimeout is the deadline of the guest whose
// kernel panics: the agent sees the panic on its console before.
const (
	goodBootTimeout = 3 * time.Minute
	badBootTimeout  = 30 * time.Second
)

// imageDaemon starts a private libvirtd and builds the bundled image
// under its directory, which its QEMU processes can search.
func imageDaemon(tb testing.TB) (*libvirtdtest.Daemon, *image.Result) {
	tb.Helper()
	d := libvirtdtest.StartT(tb, libvirtdtest.Options{})
	res, err := image.Build(context.Background(), image.Options{Out: filepath.Join(d.Dir(), "images", "render"), TaskFarm: taskfarmtest.Binary(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	return d, res
}

// bootAgent serves an agent of one QEMU host (qa, on d) in pool pool,
// whose image is imgDir, with the given boot timeout and data directory;
// extra are more lines of its site file.
func bootAgent(t testing.TB, d *libvirtdtest.Daemon, dataDir, pool, imgDir string, timeout time.Duration, extra ...string) *client.Client {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`site: lab
token_file: token
insecure_http: true
data_dir: %q
boot_timeout: %s
images: {%s: %q}
hosts:
  - {name: qa, uri: %q, pool: %s}
`, dataDir, timeout, pool, imgDir, d.URI(), pool) + strings.Join(extra, "")
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	return serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
}

// brokenImage writes a copy of img into dir (without its sums) whose
// kernel or initrd is replaced by junk.
func brokenImage(t *testing.T, img *image.Image, dir, junkFile string) string {
	t.Helper()
	if _, err := img.CopyTo(dir, map[string][]byte{junkFile: []byte(strings.Repeat("not a kernel nor an initramfs\n", 1000))}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// noDomains fails the test when the daemon runs a guest or the agent
// lists a VM.
func noDomains(t *testing.T, d *libvirtdtest.Daemon, c *client.Client) {
	t.Helper()
	if pids, err := d.GuestPIDs(); err != nil || len(pids) != 0 {
		t.Errorf("guests left on the daemon: %v, %v", pids, err)
	}
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range inv.Hosts {
		if len(h.VMs) != 0 {
			t.Errorf("host %s still lists %+v", h.Name, h.VMs)
		}
	}
}

// An agent whose pool has the bundled image boots its VMs on QEMU: the
// VM answers through its guest agent, its boot time is in the inventory,
// and destroying it removes its console. A pool whose image's kernel is
// junk fails the creation with QEMU's reason, one whose kernel panics
// (its initramfs is junk) fails it as soon as the panic is on its
// console, with the console's last lines; neither leaves a domain or a
// console.
func TestAgentBootsPoolImage(t *testing.T) {
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, res := imageDaemon(t)
	// One data directory per agent: each keeps its own record of pools.
	data := func(pool string) string { return filepath.Join(d.Dir(), "agent-"+pool) }
	console := func(pool, vm string) string { return filepath.Join(data(pool), "consoles", vm+".console") }

	t.Run("boots", func(t *testing.T) {
		c := bootAgent(t, d, data("render"), "render", res.Dir, goodBootTimeout)
		vm, err := c.Create(ctx, hp.VMSpec{Name: "node-1", Host: "qa", Job: "job-1", VCPUs: 1, MemoryMiB: 128, Image: "render"})
		if err != nil {
			t.Fatal(err)
		}
		if vm.State != hp.StateRunning || vm.BootSeconds <= 0 {
			t.Fatalf("created %+v: want running with a boot time", vm)
		}
		t.Logf("boot to the guest agent's answer: %.1f s", vm.BootSeconds)
		inv, err := c.Inventory(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if vms := inv.Hosts[0].VMs; len(vms) != 1 || vms[0].BootSeconds != vm.BootSeconds {
			t.Errorf("inventory vms = %+v, want node-1 with boot time %v", vms, vm.BootSeconds)
		}
		// The guest runs the image's kernel with the VM's name as host name.
		g, err := virt.Open(ctx, d.URI(), virt.Options{Logger: zerolog.Nop()})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close() // the connection to libvirtd: nothing the test checks is lost
		if err := g.WaitAgent(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(console("render", "node-1")); err != nil {
			t.Fatalf("console file: %v", err)
		}
		t.Run("guest API", func(t *testing.T) { checkGuestAPI(t, c, "node-1", res.Image) })
		if err := c.Destroy(ctx, "node-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(console("render", "node-1")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("console file after destroy: %v, want it gone", err)
		}
		noDomains(t, d, c)
	})

	t.Run("junk kernel", func(t *testing.T) {
		img := brokenImage(t, res.Image, filepath.Join(d.Dir(), "images", "junk"), "vmlinuz")
		c := bootAgent(t, d, data("junk"), "junk", img, goodBootTimeout)
		_, err := c.Create(ctx, hp.VMSpec{Name: "node-2", Host: "qa", VCPUs: 1, MemoryMiB: 128, Image: "junk"})
		if err == nil || !strings.Contains(err.Error(), "node-2") || !strings.Contains(err.Error(), "qa") {
			t.Fatalf("create with a junk kernel: %v, want an error naming the vm and the host", err)
		}
		t.Logf("junk kernel: %v", err)
		if !errors.Is(err, hp.ErrBoot) {
			t.Errorf("error %v is not ErrBoot", err)
		}
		if _, err := os.Stat(console("junk", "node-2")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("console file after the failure: %v, want it gone", err)
		}
		noDomains(t, d, c)
	})

	t.Run("kernel panics", func(t *testing.T) {
		img := brokenImage(t, res.Image, filepath.Join(d.Dir(), "images", "panic"), "initrd.img")
		c := bootAgent(t, d, data("panic"), "panic", img, badBootTimeout)
		_, err := c.Create(ctx, hp.VMSpec{Name: "node-3", Host: "qa", VCPUs: 1, MemoryMiB: 128, Image: "panic"})
		if err == nil {
			t.Fatal("a guest whose kernel panics was created")
		}
		t.Logf("kernel panic: %v", err)
		for _, want := range []string{"node-3", "qa", "its kernel panicked", "Kernel panic"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if !errors.Is(err, hp.ErrBoot) {
			t.Errorf("error %v is not ErrBoot", err)
		}
		if _, err := os.Stat(console("panic", "node-3")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("console file after the failure: %v, want it gone", err)
		}
		noDomains(t, d, c)
	})
}

// An agent whose pool has the disk form of the bundled image boots its
// VMs with their root file system on their own copy-on-write overlay of
// the image's disk: the guest runs the image's kernel with / on
// /dev/vda (ext4), is contextualized through its guest agent as a kernel
// VM is (/etc/metasched written by file calls), and a file written in it
// lands in its overlay, not in the base, nor in a second VM's overlay.
// Destroying a VM removes its overlay; the base's bytes never change.
func TestAgentBootsDiskImage(t *testing.T) {
	if err := libvirtdtest.Check(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d := libvirtdtest.StartT(t, libvirtdtest.Options{})
	res, err := image.Build(ctx, image.Options{Out: filepath.Join(d.Dir(), "images", "disk"), Kind: image.KindDisk, TaskFarm: taskfarmtest.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	img := res.Image
	data := filepath.Join(d.Dir(), "agent-disk")
	overlay := func(vm string) string { return filepath.Join(data, "overlays", vm+".qcow2") }
	c := bootAgent(t, d, data, "disk", res.Dir, goodBootTimeout)

	run := func(vm, script string) string {
		t.Helper()
		st := guestRun(t, c, vm, hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", script}, CaptureOutput: true})
		if st.ExitCode != 0 {
			t.Fatalf("%s: %q: exit %d: %s%s", vm, script, st.ExitCode, st.Stdout, st.Stderr)
		}
		return string(st.Stdout)
	}

	vm, err := c.Create(ctx, hp.VMSpec{Name: "disk-1", Host: "qa", Job: "job-d", VCPUs: 1, MemoryMiB: 128, Image: "disk"})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("disk guest: boot to the guest agent's answer %.1f s", vm.BootSeconds)
	if fi, err := os.Stat(overlay("disk-1")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("overlay of disk-1: %v", err)
	}
	info, err := exec.Command("qemu-img", "info", "-U", "--output=json", overlay("disk-1")).Output()
	if err != nil {
		t.Fatal(err)
	}
	var qi struct {
		Format  string `json:"format"`
		Backing string `json:"backing-filename"`
	}
	if err := json.Unmarshal(info, &qi); err != nil || qi.Format != "qcow2" || qi.Backing != img.DiskPath() {
		t.Errorf("overlay of disk-1: %+v (%v), want qcow2 backed by %s", qi, err, img.DiskPath())
	}

	if got := strings.TrimSpace(run("disk-1", "uname -r")); got != img.KernelRelease {
		t.Errorf("uname -r = %q, want the image's kernel %s", got, img.KernelRelease)
	}
	mounts := run("disk-1", "cat /proc/mounts; cat /proc/cmdline")
	if !regexp.MustCompile(`(?m)^/dev/vda / ext4 rw[, ]`).MatchString(mounts) || !strings.Contains(mounts, "metasched.root=/dev/vda") {
		t.Errorf("the root is not /dev/vda (ext4, read-write):\n%s", mounts)
	}
	// Contextualization through the guest agent, as for a kernel image.
	run("disk-1", "mkdir -p /etc/metasched")
	hostfile := "disk-1 slots=1\n"
	if err := c.GuestWriteFile(ctx, "disk-1", "/etc/metasched/hostfile", []byte(hostfile), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := run("disk-1", "cat /etc/metasched/hostfile; hostname; sync"); got != hostfile+"disk-1\n" {
		t.Errorf("hostfile and host name in the guest: %q", got)
	}
	// The write is in disk-1's overlay (read while the VM runs: -U; the
	// copy's journal replayed by e2fsck, which exits 1 when it did).
	raw := filepath.Join(t.TempDir(), "disk-1.raw")
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", overlay("disk-1"), raw).CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := exec.Command("e2fsck", "-fy", raw).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("e2fsck of disk-1's overlay: %v\n%s", err, out)
		}
	}
	if out, err := exec.Command("debugfs", "-R", "cat /etc/metasched/hostfile", raw).Output(); err != nil || string(out) != hostfile {
		t.Errorf("the hostfile in disk-1's overlay: %q, %v", out, err)
	}

	// A second VM: its own overlay, without the first one's writes. A
	// stale overlay of its name (left as if by a VM lost in a crash, owned
	// by the daemon's user as the overlays it makes) is replaced.
	fi, err := os.Stat(overlay("disk-1"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if err := os.WriteFile(overlay("disk-2"), []byte("stale"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(overlay("disk-2"), int(st.Uid), int(st.Gid)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, hp.VMSpec{Name: "disk-2", Host: "qa", Job: "job-d", VCPUs: 1, MemoryMiB: 128, Image: "disk"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(overlay("disk-2")); err != nil {
		t.Errorf("overlay of disk-2: %v", err)
	}
	if got := run("disk-2", "test -e /etc/metasched/hostfile && echo there || echo absent; hostname"); got != "absent\ndisk-2\n" {
		t.Errorf("disk-2 sees %q, want absent and its own name", got)
	}

	for _, name := range []string{"disk-1", "disk-2"} {
		if err := c.Destroy(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(overlay(name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("overlay of %s after destroy: %v, want it gone", name, err)
		}
	}
	noDomains(t, d, c)
	if err := img.Verify(); err != nil {
		t.Errorf("the base changed: %v", err)
	}

	// A VM whose kernel QEMU cannot load fails after its overlay was
	// made, and one whose disk is not a qcow2 before: neither leaves an
	// overlay or a domain.
	for _, tc := range []struct{ name, file string }{{"junk kernel", "vmlinuz"}, {"junk disk", "rootfs.qcow2"}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := strings.ReplaceAll(strings.ReplaceAll(tc.name, " ", ""), "junk", "junk-")
			junk, err := img.CopyTo(filepath.Join(d.Dir(), "images", pool), map[string][]byte{tc.file: []byte(strings.Repeat("junk\n", 1000))})
			if err != nil {
				t.Fatal(err)
			}
			agentData := filepath.Join(d.Dir(), "agent-"+pool)
			c := bootAgent(t, d, agentData, pool, junk.Dir, goodBootTimeout)
			_, err = c.Create(ctx, hp.VMSpec{Name: "disk-3", Host: "qa", VCPUs: 1, MemoryMiB: 128, Image: pool})
			if err == nil || !errors.Is(err, hp.ErrBoot) || !strings.Contains(err.Error(), "disk-3") {
				t.Fatalf("create: %v, want ErrBoot naming the vm", err)
			}
			t.Logf("%s: %v", tc.name, err)
			entries, err := os.ReadDir(filepath.Join(agentData, "overlays"))
			if err != nil || len(entries) != 0 {
				t.Errorf("overlays left: %v, %v", entries, err)
			}
			noDomains(t, d, c)
		})
	}
}
