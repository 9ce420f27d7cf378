package hypervisorproxy_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/client"
	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

var cloudSoak = flag.Int("cloud-soak-boots", 0, "TestCloudImageSoak: boots of each image to time (make soak: 5); 0 skips the test")

// The cloud images at length (make soak): the Debian image's and the
// bundled image's times to the guest agent and to readiness, booted one
// after the other; a Debian image whose own user-data fails (its runcmd
// exits 3), which fails the boot with cloud-init's reason and leaves
// nothing; and a Debian VM moved back and forth between two hosts that
// share no storage, its files and a process of it going on.
func TestCloudImageSoak(t *testing.T) {
	if *cloudSoak <= 0 {
		t.Skip("make soak runs it (-cloud-soak-boots 5)")
	}
	ctx := context.Background()
	da, db := twoDaemons(t)
	tf := taskfarmtest.Binary(t)
	// The images where both daemons' QEMU processes can read them.
	deb, err := image.Build(ctx, image.Options{Out: filepath.Join(da.Dir(), "images", "debian"), Kind: image.BuildDebian, TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := image.Build(ctx, image.Options{Out: filepath.Join(da.Dir(), "images", "busybox"), TaskFarm: tf})
	if err != nil {
		t.Fatal(err)
	}
	// The Debian image with its own cloud-config, whose runcmd fails.
	failing := filepath.Join(da.Dir(), "images", "debian-failing")
	if err := os.MkdirAll(failing, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{deb.Image.Kernel, deb.Image.Initrd, deb.Image.Disk} {
		if err := os.Link(filepath.Join(deb.Dir, f), filepath.Join(failing, f)); err != nil {
			t.Fatal(err)
		}
	}
	fimg := *deb.Image
	fimg.UserData = "user-data.yaml"
	text, err := fimg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(failing, image.FileName), text, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(failing, "user-data.yaml"),
		[]byte("#cloud-config\nruncmd:\n  - [sh, -c, 'echo the site setup failed >&2; exit 3']\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(da.Dir(), "agent")
	dirA, dirB := filepath.Join(da.Dir(), "host-images"), filepath.Join(db.Dir(), "host-images")
	lo, hi := libvirtdtest.FreePortRange(t, 4)
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), fmt.Appendf(nil, `site: lab
token_file: token
insecure_http: true
data_dir: %q
boot_timeout: 15m
migration_ports: %d-%d
images: {debian: %q, failing: %q, busybox: %q}
hosts:
  - {name: qa, uri: %q, pool: render, image_dir: %q}
  - {name: qb, uri: %q, pool: render, image_dir: %q}
`, agentDir, lo, hi, deb.Dir, failing, busybox.Dir, da.URI(), dirA, db.URI(), dirB))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel)
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHk0RSsbkSP5D37Gc6fdqaWtGIYB5hWQ/xW6DFqYxkYZ soak"

	t.Run("boot times", func(t *testing.T) {
		for _, img := range []string{"debian", "busybox"} {
			var agent, ready []float64
			for i := range *cloudSoak {
				name := fmt.Sprintf("boot-%s-%d", img, i)
				vm, err := c.Create(ctx, hp.VMSpec{Name: name, Host: "qa", Job: "soak", VCPUs: 1, MemoryMiB: 512, Image: img, SSHKeys: []string{key}})
				if err != nil {
					t.Fatal(err)
				}
				agent, ready = append(agent, vm.AgentSeconds), append(ready, vm.BootSeconds)
				if img == "debian" && vm.User != cloudinit.User {
					t.Errorf("%s: job user %q", name, vm.User)
				}
				if err := c.Destroy(ctx, name); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("%s, %d boots one after the other: guest agent median %.1f s, max %.1f s; ready median %.1f s, max %.1f s (each: %v, %v)",
				img, len(agent), median(agent), slices.Max(agent), median(ready), slices.Max(ready), agent, ready)
		}
	})

	t.Run("failing user-data", func(t *testing.T) {
		_, err := c.Create(ctx, hp.VMSpec{Name: "failing", Host: "qa", Job: "soak", VCPUs: 1, MemoryMiB: 512, Image: "failing", SSHKeys: []string{key}})
		if !errors.Is(err, hp.ErrBoot) || !strings.Contains(err.Error(), "cloud-init in failing failed") || !strings.Contains(err.Error(), "status: error") {
			t.Fatalf("create: %v; want a boot failure with cloud-init's status", err)
		}
		t.Logf("refused: %v", err)
		nothingOf(t, c, da, "failing", agentDir, dirA)
	})

	t.Run("repeated migrations", func(t *testing.T) {
		if _, err := c.Create(ctx, hp.VMSpec{Name: "mover", Host: "qa", Job: "soak", VCPUs: 1, MemoryMiB: 512, Image: "debian", SSHKeys: []string{key}}); err != nil {
			t.Fatal(err)
		}
		st := guestRun(t, c, "mover", hp.GuestExec{Path: "/bin/sh", CaptureOutput: true, Args: []string{"-c",
			"dd if=/dev/urandom of=/root/blob bs=1M count=16 2>/dev/null && sync && sha256sum /root/blob | cut -d' ' -f1; " +
				"(while :; do date +%s >>/root/ticks; sleep 0.2; done) </dev/null >/dev/null 2>&1 & echo $!"}})
		f := strings.Fields(string(st.Stdout))
		if len(f) != 2 {
			t.Fatalf("the guest's blob and ticker: %q %q", st.Stdout, st.Stderr)
		}
		for i, to := range []string{"qb", "qa", "qb"} {
			m, err := c.Migrate(ctx, "mover", to)
			if err != nil {
				t.Fatalf("migration %d to %s: %v", i+1, to, err)
			}
			t.Logf("migration %d to %s without shared storage: %.1f s, downtime %.0f ms, %.0f MiB moved, disk %v", i+1, to, m.Seconds, m.DowntimeMs, m.DataMiB, m.Disk)
			st := guestRun(t, c, "mover", hp.GuestExec{Path: "/bin/sh", CaptureOutput: true, Args: []string{"-c",
				"sha256sum /root/blob | cut -d' ' -f1; kill -0 " + f[1] + " && echo alive"}})
			if got := strings.Fields(string(st.Stdout)); !m.Disk || len(got) != 2 || got[0] != f[0] || got[1] != "alive" {
				t.Errorf("after migration %d: %+v, the guest says %q", i+1, m, st.Stdout)
			}
		}
		if err := c.Destroy(ctx, "mover"); err != nil {
			t.Fatal(err)
		}
		nothingOf(t, c, da, "mover", agentDir, dirA)
		nothingOf(t, c, db, "mover", agentDir, dirB)
	})
}

// median is the median of xs (not empty).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// nothingOf checks that nothing of VM name is left: no VM in the
// inventory, no overlay or seed, no console, no QEMU on daemon d.
func nothingOf(t *testing.T, c *client.Client, d *libvirtdtest.Daemon, name, agentDir, imageDir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range inv.Hosts {
		for _, v := range h.VMs {
			if v.Name == name {
				t.Errorf("vm %s is still on %s", name, h.Name)
			}
		}
	}
	for _, pat := range []string{filepath.Join(agentDir, "consoles", name+".*"), filepath.Join(imageDir, "overlays", name+".*")} {
		left, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("left of %s: %v", name, left)
		}
	}
	if pids, err := d.GuestPIDs(); err != nil || len(pids) > 0 {
		t.Errorf("QEMU processes: %v %v", pids, err)
	}
}
