package hypervisorproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
	"github.com/metasched/metasched/hypervisorproxy/image"
)

// Boot is how a VM boots its pool's image: direct kernel boot, its
// console appended to a file, and the channel of QEMU's guest agent.
type Boot struct {
	Kernel, Initrd, Cmdline string // absolute paths on the host; the command line
	ConsoleLog              string // absolute path of the console file
	// Bridge and MAC: the guest's network interface, a port of the host's
	// Linux bridge Bridge; "" for none.
	Bridge, MAC string
	// Disk is a disk image's qcow2 file (absolute, on the host), the base
	// of the VM's own copy-on-write overlay, made in OverlayDir and
	// removed with the VM; "" for a VM without a disk.
	Disk, OverlayDir string
	// BuildOverlayDir says OverlayDir is a directory of the host that the
	// hypervisor makes when it is missing (under a host's image_dir); else
	// the agent made it.
	BuildOverlayDir bool
	// Seed is the VM's cloud-init NoCloud seed (an ISO 9660 volume
	// labelled cidata), a read-only disk made beside its overlay and
	// removed with the VM; nil for an image without cloud-init.
	Seed []byte
}

// GuestHypervisor is a Hypervisor that boots guest images (the libvirt
// driver on QEMU hosts). The agent uses it for VMs of pools that have an
// image.
type GuestHypervisor interface {
	Hypervisor
	// CreateGuest defines and starts a VM that boots as b says, under
	// the limits lim. A VM that fails to start is not left defined.
	CreateGuest(ctx context.Context, spec VMSpec, b Boot, lim VMLimits) (Domain, error)
	// WaitAgent returns when the VM's guest agent answers guest-ping,
	// or with an error when ctx ends first or the VM stops running.
	WaitAgent(ctx context.Context, name string) error
	// WaitCloudInit returns when cloud-init in the VM has finished, or
	// with an error saying why it failed (or that the guest has none).
	WaitCloudInit(ctx context.Context, name string) error
}

// consoleLines is how many of a console's last lines an error about a
// guest that did not boot carries.
const consoleLines = 20

// imageLocked is the image named name for a VM on h: nil for no name
// and on test-driver hosts (they boot nothing), an error naming the
// site's images for a name that is not one of them (on every host); a.mu
// must be held.
func (a *Agent) imageLocked(name string, h *host) (*image.Image, error) {
	if name == "" || h.slurm {
		// A Slurm node runs its jobs on its own system: the job type's
		// image is for the sites that boot VMs.
		return nil, nil
	}
	img, ok := a.images[name]
	if !ok {
		names := make([]string, 0, len(a.images))
		for n := range a.images {
			names = append(names, n)
		}
		slices.Sort(names)
		have := "it has none"
		if len(names) > 0 {
			have = "it has " + strings.Join(names, ", ")
		}
		return nil, fmt.Errorf("%w: image: %q is not an image of site %s (%s)", ErrInvalid, name, a.site.Site, have)
	}
	if h.test {
		return nil, nil
	}
	return img, nil
}

// loadImages loads and verifies every image of the site file; every bad
// one is reported, named by its field.
func loadImages(dirs map[string]string) (map[string]*image.Image, error) {
	imgs := map[string]*image.Image{}
	var errs []error
	names := make([]string, 0, len(dirs))
	for n := range dirs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		img, err := image.Load(dirs[name])
		if err == nil {
			err = img.Verify()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("images.%s: %w", name, err))
			continue
		}
		imgs[name] = img
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("agent: site file: %w: %w", ErrInvalid, err)
	}
	return imgs, nil
}

// consoleDir is where the consoles of booted VMs are: DATA_DIR/consoles
// (under the agent's temporary directory without a data_dir).
func (a *Agent) consoleDir() (string, error) { return a.subDir("consoles", 0o755) }

// overlayDir is where the overlays of VMs of disk images are:
// DATA_DIR/overlays (under the agent's temporary directory without a
// data_dir). The hypervisor's daemon makes them there, as its own user,
// which need not be the agent's: the directory is writable by all, and
// sticky, like /tmp (each overlay is its maker's, mode 0600).
func (a *Agent) overlayDir() (string, error) { return a.subDir("overlays", os.ModeSticky|0o777) }

// subDir makes the agent's directory sub with mode perm.
func (a *Agent) subDir(sub string, perm os.FileMode) (string, error) {
	dir := a.dataDir
	if dir == "" {
		a.mu.Lock()
		if a.tmpDir == "" {
			t, err := os.MkdirTemp("", "metasched-agent-")
			if err == nil {
				// The hypervisor's QEMU processes, whose user need not be
				// the agent's, write the consoles inside it.
				err = os.Chmod(t, 0o755)
			}
			if err != nil {
				a.mu.Unlock()
				return "", fmt.Errorf("%s directory: %w", sub, err)
			}
			a.tmpDir = t
		}
		dir = a.tmpDir
		a.mu.Unlock()
	}
	dir, err := filepath.Abs(filepath.Join(dir, sub))
	if err != nil {
		return "", fmt.Errorf("%s directory: %w", sub, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s directory: %w", sub, err)
	}
	if perm != 0o755 {
		if err := os.Chmod(dir, perm); err != nil {
			return "", fmt.Errorf("%s directory: %w", sub, err)
		}
	}
	return dir, nil
}

// consolePath is the console file of a VM.
func consolePath(dir, name string) string { return filepath.Join(dir, name+".console") }

// prepareBoot makes the boot of a VM of img: its command line (the VM's
// name is the guest's host name) or, for a cloud-init image, its NoCloud
// seed (the same host name, address and gateway, the site's name servers,
// the job user with the spec's ssh keys), and its console file, created
// empty and writable by the hypervisor's QEMU processes, whose user is not
// the agent's (the file is appended to, never read, by them).
func (a *Agent) prepareBoot(img *image.Image, spec VMSpec, addr netip.Addr) (Boot, error) {
	name := spec.Name
	g := image.Guest{Hostname: name, Address: a.prefix(addr)}
	if g.Address.IsValid() {
		g.Gateway = a.site.Network.Gateway
	}
	var seed []byte
	cmdline := img.Cmdline
	if img.CloudInit() {
		var err error
		if seed, err = a.seed(img, spec, addr); err != nil {
			return Boot{}, err
		}
	} else {
		var err error
		if cmdline, err = img.GuestCmdline(g); err != nil {
			return Boot{}, fmt.Errorf("%w: vm %s: its kernel command line: %w", ErrInvalid, name, err)
		}
	}
	dir, err := a.consoleDir()
	if err != nil {
		return Boot{}, err
	}
	b := Boot{Kernel: img.KernelPath(), Initrd: img.InitrdPath(), Cmdline: cmdline, ConsoleLog: consolePath(dir, name), Seed: seed}
	if img.Kernel == "" {
		b.Cmdline = "" // the disk's own boot loader has its own
	}
	if img.Disk != "" {
		if b.OverlayDir, err = a.overlayDir(); err != nil {
			return Boot{}, err
		}
		b.Disk = img.DiskPath()
	}
	if g.Address.IsValid() {
		b.Bridge, b.MAC = a.site.Network.Bridge, macOf(addr)
	}
	f, err := os.OpenFile(b.ConsoleLog, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return Boot{}, fmt.Errorf("console file: %w", err)
	}
	if err := f.Close(); err != nil {
		return Boot{}, fmt.Errorf("console file: %w", err)
	}
	if err := os.Chmod(b.ConsoleLog, 0o622); err != nil {
		return Boot{}, fmt.Errorf("console file: %w", err)
	}
	return b, nil
}

// seed is the cloud-init NoCloud seed of a VM of a cloud-init image: its
// name as instance ID and host name, its address (with the network's
// prefix, gateway and name servers) matched by its MAC, and the job user
// with the spec's ssh keys, and the image's own cloud-config.
func (a *Agent) seed(img *image.Image, spec VMSpec, addr netip.Addr) ([]byte, error) {
	s := cloudinit.Seed{InstanceID: spec.Name, Hostname: spec.Name, Address: a.prefix(addr), AuthorizedKeys: spec.SSHKeys,
		Extra: img.CloudConfig}
	if s.Address.IsValid() {
		s.MAC, s.Gateway, s.DNS = macOf(addr), a.site.Network.Gateway, a.site.Network.DNS
	}
	iso, err := s.ISO()
	if err != nil {
		return nil, fmt.Errorf("%w: vm %s: its cloud-init seed: %w", ErrInvalid, spec.Name, err)
	}
	return iso, nil
}

// consoleTail returns the last n lines of a console file (at most 64 KiB
// of its end are read), or why they cannot be read.
func consoleTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no console: %v)", err)
	}
	defer f.Close()
	const most = 64 << 10
	fi, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(no console: %v)", err)
	}
	off := max(0, fi.Size()-most)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Sprintf("(no console: %v)", err)
	}
	buf = bytes.ReplaceAll(buf, []byte("\r"), nil)
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(the console is empty)"
	}
	return strings.Join(lines, "\n")
}

// removeConsole removes a VM's console file, if it has one.
func (a *Agent) removeConsole(name string) {
	dir := a.dataDir
	if dir == "" {
		a.mu.Lock()
		dir = a.tmpDir
		a.mu.Unlock()
		if dir == "" {
			return
		}
	}
	p, err := filepath.Abs(consolePath(filepath.Join(dir, "consoles"), name))
	if err != nil {
		return
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		a.log.Warn().Err(err).Str("vm", name).Msg("remove console file")
	}
}

// bootTimes are the times from a VM's create call to its guest agent's
// first answer and to its readiness (the same but for a cloud-init image,
// whose cloud-init must also have finished).
type bootTimes struct{ agent, ready time.Duration }

// bootGuest creates a VM that boots b on gh and waits until it is ready:
// its guest agent answers and, with a seed, cloud-init has finished. A VM
// that is not ready within the site's boot_timeout, or whose cloud-init
// failed, is destroyed: the error names the VM, its host, and the
// deadline with the last lines of its console, or cloud-init's status.
func (a *Agent) bootGuest(ctx context.Context, gh GuestHypervisor, spec VMSpec, b Boot, lim VMLimits) (Domain, bootTimes, error) {
	if a.boots != nil {
		// max_concurrent_boots: the boot waits its turn (its times count
		// from its start).
		select {
		case a.boots <- struct{}{}:
			defer func() { <-a.boots }()
		case <-ctx.Done():
			return Domain{}, bootTimes{}, fmt.Errorf("vm %s: waiting for a boot slot (max_concurrent_boots %d): %w", spec.Name, cap(a.boots), ctx.Err())
		}
	}
	start := time.Now()
	d, err := gh.CreateGuest(ctx, spec, b, lim)
	if err != nil {
		return Domain{}, bootTimes{}, fmt.Errorf("%w: %w; console:\n%s", ErrBoot, err, consoleTail(b.ConsoleLog, consoleLines))
	}
	pctx, panicked := context.WithCancelCause(ctx)
	wctx, cancel := context.WithTimeout(pctx, a.site.BootTimeout)
	go watchConsole(wctx, b.ConsoleLog, panicked)
	var t bootTimes
	err = gh.WaitAgent(wctx, spec.Name)
	t.agent = time.Since(start)
	waited := "its guest agent"
	if err == nil && b.Seed != nil {
		waited = "cloud-init"
		if err = gh.WaitCloudInit(wctx, spec.Name); err == nil {
			a.log.Debug().Str("vm", spec.Name).Dur("agent", t.agent).Dur("ready", time.Since(start)).Msg("cloud-init finished")
		}
	}
	t.ready = time.Since(start)
	timedOut := errors.Is(wctx.Err(), context.DeadlineExceeded)
	cancel()
	panicked(nil)
	switch {
	case err == nil:
		return d, t, nil
	case errors.Is(context.Cause(pctx), errKernelPanic):
		err = fmt.Errorf("%w: vm %s on %s: %w; console (last lines):\n%s",
			ErrBoot, spec.Name, spec.Host, errKernelPanic, consoleTail(b.ConsoleLog, consoleLines))
	case timedOut:
		err = fmt.Errorf("%w: vm %s on %s: %s did not answer within %v: %w; console (last lines):\n%s",
			ErrBoot, spec.Name, spec.Host, waited, a.site.BootTimeout, err, consoleTail(b.ConsoleLog, consoleLines))
	case waited == "cloud-init":
		err = fmt.Errorf("%w: vm %s on %s: %w", ErrBoot, spec.Name, spec.Host, err)
	default:
		err = fmt.Errorf("%w: vm %s on %s did not answer within %v: %w; console (last lines):\n%s",
			ErrBoot, spec.Name, spec.Host, a.site.BootTimeout, err, consoleTail(b.ConsoleLog, consoleLines))
	}
	if derr := gh.Destroy(context.WithoutCancel(ctx), spec.Name); derr != nil && !errors.Is(derr, ErrNotFound) {
		err = errors.Join(err, fmt.Errorf("destroy %s after its failed boot: %w", spec.Name, derr))
	}
	return Domain{}, bootTimes{}, err
}

// errKernelPanic: a booting guest's console says its kernel panicked.
var errKernelPanic = errors.New("its kernel panicked")

// panicLine is what Linux prints when it panics.
const panicLine = "Kernel panic - not syncing"

// watchConsole reads the end of a booting guest's console twice a second
// until ctx ends, and calls panicked with errKernelPanic when it shows a
// kernel panic: a panicked guest never answers, and need not be waited
// for until the boot timeout.
func watchConsole(ctx context.Context, path string, panicked context.CancelCauseFunc) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if strings.Contains(consoleTail(path, consoleLines*10), panicLine) {
			panicked(errKernelPanic)
			return
		}
	}
}

// ImageFile is one file of an image, as a host holds it: a volume named
// Name (the start of its content's SHA-256 and its file name), made from
// the agent's file Source of Size bytes.
type ImageFile struct {
	Name   string
	Source string
	Size   int64
	SHA256 string
}

// ImageHypervisor is a Hypervisor that takes images onto its host (the
// libvirt driver on QEMU hosts, through libvirt's storage API). The agent
// uses it for the hosts the site file gives an image_dir.
type ImageHypervisor interface {
	Hypervisor
	// PutImage makes the files present in dir on the host and returns
	// their paths there, in order.
	PutImage(ctx context.Context, dir string, files []ImageFile) ([]string, error)
	// PruneImages deletes the image files in dir that keep does not name.
	PruneImages(ctx context.Context, dir string, keep []string) error
}

// imageFiles are the files of img as a host holds them, and the role of
// each (kernel, initrd, disk); a file without a sum in the image file is
// hashed.
func imageFiles(img *image.Image) ([]ImageFile, []string, error) {
	var files []ImageFile
	var roles []string
	for _, f := range []struct{ role, path, sum string }{
		{"kernel", img.KernelPath(), img.KernelSHA256},
		{"initrd", img.InitrdPath(), img.InitrdSHA256},
		{"disk", img.DiskPath(), img.DiskSHA256},
	} {
		if f.path == "" {
			continue
		}
		fi, err := os.Stat(f.path)
		if err != nil {
			return nil, nil, err
		}
		sum := f.sum
		if sum == "" {
			if sum, err = image.FileSHA256(f.path); err != nil {
				return nil, nil, err
			}
		}
		files = append(files, ImageFile{Name: sum[:16] + "-" + filepath.Base(f.path), Source: f.path, Size: fi.Size(), SHA256: sum})
		roles = append(roles, f.role)
	}
	return files, roles, nil
}

// hostFiles are the files of an image as a host holds them (imageFiles).
type hostFiles struct {
	files []ImageFile
	roles []string
}

// placeImage puts img onto a host with an image_dir (dir) through ih and
// points b's kernel, initrd and disk at the host's copies; it returns the
// names of the host's volumes of img.
func (a *Agent) placeImage(ctx context.Context, ih ImageHypervisor, dir string, img *image.Image, b *Boot) ([]string, error) {
	files, roles := a.imageFiles[img].files, a.imageFiles[img].roles
	paths, err := ih.PutImage(ctx, dir, files)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, role := range roles {
		names[i] = files[i].Name
		if b == nil {
			continue
		}
		switch role {
		case "kernel":
			b.Kernel = paths[i]
		case "initrd":
			b.Initrd = paths[i]
		case "disk":
			b.Disk = paths[i]
		}
	}
	return names, nil
}
