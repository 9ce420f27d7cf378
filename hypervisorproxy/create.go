package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
	"github.com/metasched/metasched/hypervisorproxy/image"
)

// domainType is the domain type of VMs on h: "test" on the test driver,
// else "qemu".
func (a *Agent) domainType(h *host) string {
	if h.test {
		return "test"
	}
	return "qemu"
}

// limits are the limits of the VMs the agent creates on h: the site
// file's CPU quota on QEMU hosts, none on test-driver hosts.
func (a *Agent) limits(h *host) VMLimits {
	if h.test {
		return VMLimits{}
	}
	return VMLimits{CPUQuota: a.site.CPUQuota}
}

// CreateVM creates and starts a VM. Without spec.Host the agent picks the
// ready host of the pool with the most free vCPUs that fits the VM. The
// VM's pool is its host's.
func (a *Agent) CreateVM(ctx context.Context, spec VMSpec) (VM, error) {
	if spec.MaxVCPUs == 0 {
		spec.MaxVCPUs = spec.VCPUs
	}
	if spec.MaxMemoryMiB == 0 {
		spec.MaxMemoryMiB = spec.MemoryMiB
	}
	if err := checkSpec(spec); err != nil {
		return VM{}, err
	}
	var names []string
	if spec.Host != "" {
		if a.host(spec.Host) == nil {
			return VM{}, fmt.Errorf("create vm %s: host %q: %w in site %s", spec.Name, spec.Host, ErrNotFound, a.site.Site)
		}
		names = []string{spec.Host}
	}
	sts := a.observe(ctx, names...)
	a.mu.Lock()
	if _, ok := a.vms[spec.Name]; ok {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("create vm %s: %w", spec.Name, ErrExists)
	}
	st, err := a.placeLocked(spec, sts)
	if err != nil {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("create vm %s: %w", spec.Name, err)
	}
	h := st.h
	spec.Host, spec.Pool = h.cfg.Name, h.pool
	lim := a.limits(h)
	if err := (domxml.Domain{Type: a.domainType(h), Name: spec.Name, VCPUs: spec.VCPUs, MaxVCPUs: spec.MaxVCPUs,
		MemoryMiB: spec.MemoryMiB, MaxMemoryMiB: spec.MaxMemoryMiB, Job: spec.Job, Pool: spec.Pool,
		CPUQuota: lim.CPUQuota}).Validate(); err != nil {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("create vm %s: %w: %w", spec.Name, ErrInvalid, err)
	}
	img, err := a.imageLocked(spec.Image, h)
	if err != nil {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("create vm %s: %w", spec.Name, err)
	}
	v := &vm{spec: spec, busy: "create"}
	if a.site.Network != nil {
		if v.addr, err = a.allocateLocked(spec.Name); err != nil {
			a.mu.Unlock()
			return VM{}, fmt.Errorf("create vm %s: %w", spec.Name, err)
		}
	}
	a.vms[spec.Name] = v
	a.touchLocked(spec.Name)
	hv := h.hv
	a.mu.Unlock()

	l := a.opLog("create", spec)
	start := time.Now()
	var (
		d    Domain
		boot bootTimes
	)
	if img == nil {
		d, err = hv.Create(ctx, spec, lim)
	} else {
		d, boot, err = a.createGuest(ctx, hv, img, spec, v.addr, lim)
	}
	a.mu.Lock()
	if err != nil {
		delete(a.vms, spec.Name)
		a.touchLocked(spec.Name)
		a.mu.Unlock()
		logDone(l, start, err, "create vm failed")
		return VM{}, fmt.Errorf("create vm %s on %s: %w", spec.Name, spec.Host, err)
	}
	v.busy = ""
	v.boot, v.agent = boot.ready, boot.agent
	v.spec.VCPUs, v.spec.MemoryMiB = d.VCPUs, d.MemoryMiB
	a.touchLocked(spec.Name)
	n := a.saveLocked()
	ll := l.With().Int("vcpus", d.VCPUs).Int("memory_mib", d.MemoryMiB)
	if img != nil {
		ll = ll.Dur("boot", boot.ready)
		if img.CloudInit() {
			ll = ll.Dur("agent", boot.agent)
		}
	}
	logDone(ll.Logger(), start, nil, "vm created")
	out := a.vmLocked(v, map[string]Domain{d.Name: d})
	a.mu.Unlock()
	a.syncRecord(n)
	return out, nil
}

// createGuest creates a VM that boots its pool's image img on hv and
// waits until it is ready (bootGuest). Its console file is removed when
// it fails.
func (a *Agent) createGuest(ctx context.Context, hv Hypervisor, img *image.Image, spec VMSpec, addr netip.Addr, lim VMLimits) (Domain, bootTimes, error) {
	gh, ok := hv.(GuestHypervisor)
	if !ok {
		return Domain{}, bootTimes{}, fmt.Errorf("%w: image %s: host %s cannot boot one", ErrUnsupported, spec.Image, spec.Host)
	}
	b, err := a.prepareBoot(img, spec, addr)
	if err != nil {
		return Domain{}, bootTimes{}, err
	}
	a.mu.Lock()
	dir := a.host(spec.Host).cfg.ImageDir
	a.mu.Unlock()
	if dir != "" {
		// The host's own copy of the image, put there when missing.
		ih, ok := hv.(ImageHypervisor)
		if !ok {
			err = fmt.Errorf("%w: host %s has an image_dir but its hypervisor cannot take images", ErrUnsupported, spec.Host)
		} else if _, err = a.placeImage(ctx, ih, dir, img, &b); err != nil {
			err = fmt.Errorf("%w: image %s onto %s: %w", ErrBoot, spec.Image, spec.Host, err)
		}
		if b.Disk != "" {
			// The VM's overlay beside its base, on the host.
			b.OverlayDir, b.BuildOverlayDir = filepath.Join(dir, "overlays"), true
		}
		if err != nil {
			a.removeConsole(spec.Name)
			return Domain{}, bootTimes{}, err
		}
	}
	d, boot, err := a.bootGuest(ctx, gh, spec, b, lim)
	if err != nil {
		a.removeConsole(spec.Name)
	}
	return d, boot, err
}

// checkSpec checks the fields of a VM spec that do not depend on the host.
func checkSpec(s VMSpec) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.Name == "" {
		bad("name: is required")
	}
	if s.VCPUs < 1 {
		bad("vcpus: must be >= 1, not %d", s.VCPUs)
	}
	if s.MemoryMiB < 1 {
		bad("memory_mib: must be >= 1, not %d", s.MemoryMiB)
	}
	if s.MaxVCPUs < s.VCPUs && s.VCPUs >= 1 {
		bad("max_vcpus: must be >= vcpus (%d), not %d", s.VCPUs, s.MaxVCPUs)
	}
	if s.Image != "" { // no image: nothing to name (and no message to format)
		if msg := CheckImageName(s.Image); msg != "" {
			bad("image: %s", msg)
		}
	}
	if s.WalltimeSeconds < 0 || s.WalltimeSeconds > MaxWalltimeSeconds {
		bad("walltime_seconds: must be from 0 (none) to %d, not %d", MaxWalltimeSeconds, s.WalltimeSeconds)
	}
	if s.MaxMemoryMiB < s.MemoryMiB && s.MemoryMiB >= 1 {
		bad("max_memory_mib: must be >= memory_mib (%d), not %d", s.MemoryMiB, s.MaxMemoryMiB)
	}
	if len(s.SSHKeys) > cloudinit.MaxKeys {
		bad("ssh_authorized_keys: at most %d keys, not %d", cloudinit.MaxKeys, len(s.SSHKeys))
	} else {
		for i, k := range s.SSHKeys {
			if msg := cloudinit.CheckAuthorizedKey(k); msg != "" {
				bad("ssh_authorized_keys[%d]: %s", i, msg)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// DestroyVM stops and undefines a managed VM and forgets it. A VM already
// gone from its host is forgotten too.
func (a *Agent) DestroyVM(ctx context.Context, name string) error {
	v, h, err := a.acquire(name, "destroy")
	if err != nil {
		return err
	}
	l := a.opLog("destroy", v.spec)
	start := time.Now()
	err = h.hv.Destroy(ctx, name)
	if errors.Is(err, ErrNotFound) {
		err = nil
	}
	logDone(l, start, err, "vm destroyed")
	if err != nil {
		a.release(v)
		return fmt.Errorf("destroy vm %s: %w", name, err)
	}
	a.mu.Lock()
	delete(a.vms, name)
	a.touchLocked(name)
	a.saveAndUnlock()
	a.removeConsole(name)
	return nil
}
