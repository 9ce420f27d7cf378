package hypervisorproxy_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
)

// goodBootTimeout bounds the boot of a guest that works: a bound against
// one that never comes up, not a measure (a guest answers in 4 to 20 s on
// two loaded cores). badBootTimeout is the deadline of the guest whose
// kernel panics: the agent sees the panic on its console before.
const (
	goodBootTimeout = 3 * time.Minute
	badBootTimeout  = 30 * time.Second
)

// bootAgent serves an agent of one QEMU host (qa, on d) in pool pool,
// whose image is imgDir, with the given boot timeout and data directory.
func bootAgent(t testing.TB, d *libvirtdtest.Daemon, dataDir, pool, imgDir string, timeout time.Duration) *client.Client {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf(`site: lab
token_file: token
data_dir: %q
boot_timeout: %s
images: {%s: %q}
hosts:
  - {name: qa, uri: %q, pool: %s}
`, dataDir, timeout, pool, imgDir, d.URI(), pool)
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
	d := libvirtdtest.StartT(t, libvirtdtest.Options{})
	// Under the daemon's directory, which its QEMU processes can search.
	res, err := image.Build(ctx, image.Options{Out: filepath.Join(d.Dir(), "images", "render")})
	if err != nil {
		t.Fatal(err)
	}
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
		defer g.Close()
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
