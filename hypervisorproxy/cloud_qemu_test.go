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
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/libvirtdtest"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// A disk VM moves live between two hosts that share no storage (each has
// its own image_dir): the destination makes the VM's overlay anew on its
// own copy of the image and the migration copies what the VM wrote; the
// VM runs on with its files and its processes, and the source keeps
// nothing of it.
func TestDiskMigrationWithoutSharedStorage(t *testing.T) {
	ctx := context.Background()
	da, db := twoDaemons(t)
	disk, err := image.Build(ctx, image.Options{Out: filepath.Join(da.Dir(), "images", "disk"), Kind: image.KindDisk, TaskFarm: taskfarmtest.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	dirA, dirB := filepath.Join(da.Dir(), "host-images"), filepath.Join(db.Dir(), "host-images")
	lo, hi := libvirtdtest.FreePortRange(t, 4)
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), fmt.Appendf(nil, `site: lab
token_file: token
insecure_http: true
data_dir: %q
boot_timeout: %s
migration_ports: %d-%d
images: {disk: %q}
hosts:
  - {name: qa, uri: %q, pool: render, image_dir: %q}
  - {name: qb, uri: %q, pool: render, image_dir: %q}
`, filepath.Join(da.Dir(), "agent"), goodBootTimeout, lo, hi, disk.Dir, da.URI(), dirA, db.URI(), dirB))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	if _, err := c.Create(ctx, hp.VMSpec{Name: "mover", Host: "qa", Job: "j", VCPUs: 1, MemoryMiB: 256, Image: "disk"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy(context.Background(), "mover") }) // gone already when the test got through

	// What the VM wrote is in its overlay only; a process of it runs.
	const blob = "/blob"
	st := guestRun(t, c, "mover", hp.GuestExec{Path: "/bin/sh", CaptureOutput: true, Args: []string{"-c",
		"dd if=/dev/urandom of=" + blob + " bs=64k count=64 2>/dev/null && sync && sha256sum " + blob + " | cut -d' ' -f1; " +
			"(while :; do date +%s >>/ticks; sleep 0.2; done) </dev/null >/dev/null 2>&1 & echo $!"}})
	lines := strings.Fields(string(st.Stdout))
	if len(lines) != 2 {
		t.Fatalf("the guest's blob and ticker: %q %q", st.Stdout, st.Stderr)
	}
	sum, ticker := lines[0], lines[1]
	srcOverlay, dstOverlay := filepath.Join(dirA, "overlays", "mover.qcow2"), filepath.Join(dirB, "overlays", "mover.qcow2")
	if _, err := os.Stat(srcOverlay); err != nil {
		t.Fatalf("the source's overlay: %v", err)
	}

	m, err := c.Migrate(ctx, "mover", "qb")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("migrated without shared storage in %.2f s, downtime %.0f ms, %.1f MiB moved", m.Seconds, m.DowntimeMs, m.DataMiB)
	if !m.Live || !m.Disk || m.To != "qb" {
		t.Errorf("migration %+v: want live, with its disk, to qb", m)
	}
	if _, err := os.Stat(srcOverlay); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the source's overlay after the migration: %v", err)
	}
	if _, err := os.Stat(dstOverlay); err != nil {
		t.Errorf("the destination's overlay: %v", err)
	}
	// The files and the process came along.
	time.Sleep(time.Second)
	st = guestRun(t, c, "mover", hp.GuestExec{Path: "/bin/sh", CaptureOutput: true, Args: []string{"-c",
		"sha256sum " + blob + " | cut -d' ' -f1; kill -0 " + ticker + " && echo alive; grep -c . /ticks"}})
	after := strings.Fields(string(st.Stdout))
	if len(after) != 3 || after[0] != sum || after[1] != "alive" {
		t.Errorf("after the migration the guest says %q, want the blob's sum %s and the ticker alive", st.Stdout, sum)
	}
	if err := c.Destroy(ctx, "mover"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dstOverlay); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the destination's overlay after the destroy: %v", err)
	}
}

// An image said to be contextualized by cloud-init that has no cloud-init
// (the bundled disk image, which answers through its guest agent): the
// create fails saying so, and nothing of the VM is left.
func TestCloudImageWithoutCloudInit(t *testing.T) {
	ctx := context.Background()
	d, _ := imageDaemon(t)
	disk, err := image.Build(ctx, image.Options{Out: filepath.Join(d.Dir(), "images", "disk"), Kind: image.KindDisk, TaskFarm: taskfarmtest.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	// The same disk, booted by its kernel, declared as a cloud image.
	img := *disk.Image
	img.Contextualization = image.ContextCloudInit
	img.Cmdline += " metasched.root=/dev/vda"
	cloud := filepath.Join(d.Dir(), "images", "not-cloud")
	if _, err := img.CopyTo(cloud, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	agentDir := filepath.Join(d.Dir(), "agent")
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), fmt.Appendf(nil, `site: lab
token_file: token
insecure_http: true
data_dir: %q
boot_timeout: %s
images: {cloud: %q}
hosts:
  - {name: qa, uri: %q, pool: render}
`, agentDir, goodBootTimeout, cloud, d.URI()))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	_, err = c.Create(ctx, hp.VMSpec{Name: "nocloud", Host: "qa", Job: "j", VCPUs: 1, MemoryMiB: 128, Image: "cloud"})
	if !errors.Is(err, hp.ErrBoot) || !strings.Contains(err.Error(), "nocloud has no cloud-init") {
		t.Fatalf("create: %v; want a boot failure saying the guest has no cloud-init", err)
	}
	t.Logf("refused: %v", err)
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(inv.Hosts[0].VMs); n != 0 {
		t.Errorf("the inventory has %d VMs after the failed boot", n)
	}
	for _, sub := range []string{"overlays", "consoles"} {
		left, err := filepath.Glob(filepath.Join(agentDir, sub, "nocloud*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("left after the failed boot: %v", left)
		}
	}
	if pids, err := d.GuestPIDs(); err != nil || len(pids) > 0 {
		t.Errorf("QEMU processes after the failed boot: %v %v", pids, err)
	}
}
