package hypervisorproxy

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metasched/metasched/hypervisorproxy/image"
)

// The boot of a VM of a disk image: with the image's kernel, its command
// line tells the init where the root is; without one the disk boots
// itself (no command line). Either way the overlay goes into the agent's
// overlay directory, sticky and writable by the hypervisor's user.
func TestPrepareBootDisk(t *testing.T) {
	data := t.TempDir()
	a := &Agent{site: &Site{Site: "lab"}, dataDir: data}
	dir := t.TempDir()
	withKernel := &image.Image{Kind: image.KindDisk, Dir: dir, Kernel: "vmlinuz", Initrd: "initrd.img",
		Cmdline: image.BaseCmdline, Disk: "rootfs.qcow2"}
	b, err := a.prepareBoot(withKernel, VMSpec{Name: "vm-1"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	overlays := filepath.Join(data, "overlays")
	if b.Disk != filepath.Join(dir, "rootfs.qcow2") || b.OverlayDir != overlays || b.Kernel != filepath.Join(dir, "vmlinuz") ||
		!strings.Contains(b.Cmdline, image.KeyRoot+"="+image.RootDevice) {
		t.Errorf("boot of a disk image with a kernel: %+v", b)
	}
	fi, err := os.Stat(overlays)
	if err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
		t.Errorf("overlay directory: %v, %v; want sticky and 0777", fi.Mode(), err)
	}

	alone := &image.Image{Kind: image.KindDisk, Dir: dir, Disk: "base.qcow2"}
	b, err = a.prepareBoot(alone, VMSpec{Name: "vm-2"}, netip.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Kernel != "" || b.Initrd != "" || b.Cmdline != "" || b.Disk != filepath.Join(dir, "base.qcow2") || b.OverlayDir != overlays {
		t.Errorf("boot of a disk image without a kernel: %+v", b)
	}

	kernel := &image.Image{Kind: image.KindKernel, Dir: dir, Kernel: "vmlinuz"}
	if b, err = a.prepareBoot(kernel, VMSpec{Name: "vm-3"}, netip.Addr{}); err != nil || b.Disk != "" || b.OverlayDir != "" ||
		strings.Contains(b.Cmdline, image.KeyRoot) {
		t.Errorf("boot of a kernel image: %+v, %v", b, err)
	}
}
