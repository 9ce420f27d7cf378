package hypervisorproxy_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/image"
	"github.com/metasched/metasched/hypervisorproxy/virt"
	"github.com/metasched/metasched/internal/taskfarmtest"
)

// hostFiles lists the files of a directory with their SHA-256.
func hostFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		if e.IsDir() {
			continue // the overlays'
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		out[e.Name()] = hex.EncodeToString(sum[:])
	}
	return out
}

// A host with an image_dir gets the image its VMs boot there, through
// libvirt's storage API (uploaded once, whole: each volume holds its
// file), and its VMs boot from the host's copy; a reconfiguration for a
// pool with another image puts that image there and deletes the first,
// and says how long it took; a volume cut short is made again.
func TestImagesOntoHosts(t *testing.T) {
	ctx := context.Background()
	d, res := imageDaemon(t)
	other, err := res.Image.CopyTo(filepath.Join(d.Dir(), "images", "other"), map[string][]byte{"vmlinuz": []byte("another kernel\n")})
	if err != nil {
		t.Fatal(err)
	}
	disk, err := image.Build(ctx, image.Options{Out: filepath.Join(d.Dir(), "images", "disk"), Kind: image.KindDisk, TaskFarm: taskfarmtest.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(testToken), 0o600); err != nil {
		t.Fatal(err)
	}
	hostDir := filepath.Join(d.Dir(), "host-images") // made by the daemon's user
	site, err := hp.ParseSite(filepath.Join(dir, "site.yaml"), fmt.Appendf(nil, `site: lab
token_file: token
insecure_http: true
data_dir: %q
boot_timeout: %s
images: {render: %q, other: %q, disk: %q}
hosts:
  - {name: qa, uri: %q, pool: render, image_dir: %q}
`, filepath.Join(d.Dir(), "agent"), goodBootTimeout, res.Dir, other.Dir, disk.Dir, d.URI(), hostDir))
	if err != nil {
		t.Fatal(err)
	}
	log := zerolog.New(zerolog.NewTestWriter(t))
	c := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client

	if _, err := c.Create(ctx, hp.VMSpec{Name: "placed", Host: "qa", Job: "j", VCPUs: 1, MemoryMiB: 128, Image: "render"}); err != nil {
		t.Fatal(err)
	}
	got := hostFiles(t, hostDir)
	want := map[string]string{}
	for _, f := range []string{res.Image.KernelPath(), res.Image.InitrdPath()} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		h := hex.EncodeToString(sum[:])
		want[h[:16]+"-"+filepath.Base(f)] = h
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the host's images: %v, want %v", got, want)
	}
	// The VM boots the host's copy.
	st := guestRun(t, c, "placed", hp.GuestExec{Path: "/bin/cat", Args: []string{"/proc/cmdline"}, CaptureOutput: true})
	if !strings.Contains(string(st.Stdout), "metasched.hostname=placed") {
		t.Errorf("the guest's command line: %q", st.Stdout)
	}
	if err := c.Destroy(ctx, "placed"); err != nil {
		t.Fatal(err)
	}

	// A VM of a disk image: its base and its overlay on the host.
	if _, err := c.Create(ctx, hp.VMSpec{Name: "disky", Host: "qa", Job: "j", VCPUs: 1, MemoryMiB: 128, Image: "disk"}); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(hostDir, "overlays", "disky.qcow2")
	if _, err := os.Stat(overlay); err != nil {
		t.Errorf("the disk vm's overlay on the host: %v", err)
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(hostFiles(t, hostDir))), func(n string) bool { return strings.HasSuffix(n, "-"+filepath.Base(disk.Image.DiskPath())) }) {
		t.Errorf("the disk image's base is not on the host: %v", hostFiles(t, hostDir))
	}
	st = guestRun(t, c, "disky", hp.GuestExec{Path: "/bin/sh", Args: []string{"-c", "grep ' / ' /proc/mounts"}, CaptureOutput: true})
	if !strings.HasPrefix(string(st.Stdout), "/dev/vda / ") {
		t.Errorf("the disk vm's root: %q", st.Stdout)
	}
	if err := c.Destroy(ctx, "disky"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(overlay); !os.IsNotExist(err) {
		t.Errorf("the disk vm's overlay after its destroy: %v", err)
	}

	// A volume cut short (its file truncated) is made again.
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range want {
			if !yield(n) {
				return
			}
		}
	})
	if err := os.Truncate(filepath.Join(hostDir, names[0]), 1000); err != nil {
		t.Fatal(err)
	}
	// A new connection's agent knows nothing of the volumes: it checks.
	c2 := serveAgent(t, hp.Config{Site: site, Token: testToken, Connect: virt.Connector(log), Logger: log}).client
	if _, err := c2.Create(ctx, hp.VMSpec{Name: "placed-2", Host: "qa", Job: "j", VCPUs: 1, MemoryMiB: 128, Image: "render"}); err != nil {
		t.Fatal(err)
	}
	got = hostFiles(t, hostDir)
	for n, sum := range want {
		if got[n] != sum {
			t.Errorf("after a volume was cut short, the host's %s has SHA-256 %q, want %s", n, got[n], sum)
		}
	}
	if err := c2.Destroy(ctx, "placed-2"); err != nil {
		t.Fatal(err)
	}

	// A switch to a pool of another image puts it there and deletes the
	// first.
	r, err := c2.Reconfigure(ctx, "qa", hp.Reconfigure{Pool: "batch", Image: "other"})
	if err != nil {
		t.Fatal(err)
	}
	got = hostFiles(t, hostDir)
	t.Logf("reconfigured in %.2f s, %.2f s of it for the image; the host has %v", r.Seconds, r.ImageSeconds, got)
	if r.ImageSeconds <= 0 || len(got) != 2 {
		t.Errorf("reconfiguration %+v: the host has %v", r, got)
	}
	for n := range got {
		if _, ok := want[n]; ok && !strings.HasSuffix(n, "initrd.img") {
			t.Errorf("the first image's %s is still on the host after the switch", n)
		}
		if strings.HasSuffix(n, "vmlinuz") && got[n] != fmt.Sprintf("%x", sha256.Sum256([]byte("another kernel\n"))) {
			t.Errorf("the host's kernel is not the other image's")
		}
	}
}
