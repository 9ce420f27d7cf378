package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"time"

	"github.com/metasched/metasched/hypervisorproxy/image"
)

// MigrateVM moves a VM to another host of the site, of the same pool and
// with room for it: live between QEMU hosts (over tcp://ADDR:PORT with a
// port of the site's migration_ports, encrypted by libvirt's native TLS
// when the site file says migration_tls), a cold move between test hosts.
func (a *Agent) MigrateVM(ctx context.Context, name string, req MigrateRequest) (Migration, error) {
	if req.Host == "" {
		return Migration{}, fmt.Errorf("migrate vm %s: %w: host: is required", name, ErrInvalid)
	}
	dst := a.host(req.Host)
	if dst == nil {
		return Migration{}, fmt.Errorf("migrate vm %s: host %q: %w in site %s", name, req.Host, ErrNotFound, a.site.Site)
	}
	v, src, err := a.acquire(name, "migrate")
	if err != nil {
		return Migration{}, err
	}
	defer a.release(v)
	if src == dst {
		return Migration{}, fmt.Errorf("migrate vm %s: host: %w: the vm is on %s already", name, ErrInvalid, dst.cfg.Name)
	}
	sts := a.observe(ctx, dst.cfg.Name)
	a.mu.Lock()
	s := v.spec
	var cerr error
	switch {
	case sts[0].err != nil || dst.hv == nil:
		cerr = fmt.Errorf("host %s: %w", dst.cfg.Name, errors.Join(ErrConnLost, sts[0].err))
	case dst.switching:
		cerr = fmt.Errorf("host %s is being reconfigured for another pool: %w", dst.cfg.Name, ErrBusy)
	case dst.pool != s.Pool:
		cerr = fmt.Errorf("host: %w: %s is in pool %q, the vm in %q", ErrWrongPool, dst.cfg.Name, dst.pool, s.Pool)
	}
	if cerr == nil {
		if freeC, freeM := a.freeLocked(sts[0]); s.VCPUs > freeC || s.MemoryMiB > freeM {
			cerr = fmt.Errorf("%w on %s for %d vcpus and %d MiB: %d and %d free", ErrCapacity, dst.cfg.Name, s.VCPUs, s.MemoryMiB, freeC, freeM)
		}
	}
	// A disk VM whose hosts do not share the storage of its overlay: its
	// disk moves with it, through a second port (the destination's NBD
	// server).
	img := a.images[s.Image]
	copyDisk := img != nil && img.Disk != "" && !src.test && (src.cfg.ImageDir != "" || dst.cfg.ImageDir != "")
	var ports []int
	for range 1 + btoi(copyDisk) {
		if cerr != nil {
			break
		}
		var port int
		if port, cerr = a.ports.take(); cerr == nil {
			ports = append(ports, port)
		}
	}
	if cerr == nil {
		v.moving = dst.cfg.Name
	}
	srcHV, dstHV, addr, dstDir := src.hv, dst.hv, v.addr, dst.cfg.ImageDir
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		for _, p := range ports {
			a.ports.release(p)
		}
		a.mu.Unlock()
	}()
	if cerr != nil {
		return Migration{}, fmt.Errorf("migrate vm %s: %w", name, cerr)
	}

	uri := fmt.Sprintf("tcp://%s:%d", dst.cfg.migrationAddress(), ports[0])
	opt := MigrateOptions{URI: uri, ProgressTimeout: a.site.MigrationProgressTimeout, TLS: a.site.MigrationTLS}
	if copyDisk {
		if opt.Storage, err = a.migrateStorage(ctx, img, s, addr, dstHV, dstDir); err != nil {
			return Migration{}, fmt.Errorf("migrate vm %s to %s: %w", name, dst.cfg.Name, err)
		}
		opt.Storage.DisksURI = fmt.Sprintf("tcp://%s:%d", dst.cfg.migrationAddress(), ports[1])
	}
	l := a.opLog("migrate", s).With().Str("to", dst.cfg.Name).Str("uri", uri).Bool("disk", copyDisk).Logger()
	start := time.Now()
	st, err := srcHV.Migrate(ctx, name, dstHV, opt)
	if err != nil {
		logDone(l.With().Bool("tls", a.site.MigrationTLS).Logger(), start, err, "vm migration failed")
		return Migration{}, fmt.Errorf("migrate vm %s to %s: %w", name, dst.cfg.Name, err)
	}
	a.mu.Lock()
	v.spec.Host = dst.cfg.Name
	a.touchLocked(name)
	a.saveAndUnlock()
	tls := st.Live && st.TLS
	logDone(l.With().Bool("live", st.Live).Bool("tls", tls).Logger(), start, nil, "vm migrated")
	out := Migration{From: src.cfg.Name, To: dst.cfg.Name, Live: st.Live, TLS: tls, Seconds: st.Duration.Seconds(),
		DowntimeMs: float64(st.Downtime.Microseconds()) / 1000, DataMiB: st.DataMiB, Disk: st.Storage}
	if st.Live {
		out.URI = uri
	}
	doms, _ := dstHV.Domains(ctx)
	a.mu.Lock()
	live := map[string]Domain{}
	for _, d := range doms {
		live[d.Name] = d
	}
	out.VM = a.vmLocked(v, live)
	a.mu.Unlock()
	return out, nil
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// migrateStorage is how the disk of a VM of img moves to the host of dstHV
// (its image_dir dstDir, or none): the destination's copy of the image's
// disk (put there when missing, as for a create) as the base of its new
// overlay, made in the destination's overlay directory, and its seed
// made again.
func (a *Agent) migrateStorage(ctx context.Context, img *image.Image, spec VMSpec, addr netip.Addr, dstHV Hypervisor, dstDir string) (*MigrateStorage, error) {
	st := &MigrateStorage{Base: img.DiskPath()}
	if dstDir != "" {
		ih, ok := dstHV.(ImageHypervisor)
		if !ok {
			return nil, fmt.Errorf("%w: the destination has an image_dir but its hypervisor cannot take images", ErrUnsupported)
		}
		var b Boot
		if _, err := a.placeImage(ctx, ih, dstDir, img, &b); err != nil {
			return nil, fmt.Errorf("image %s onto the destination: %w", spec.Image, err)
		}
		st.Base, st.OverlayDir, st.BuildOverlayDir = b.Disk, filepath.Join(dstDir, "overlays"), true
	} else {
		var err error
		if st.OverlayDir, err = a.overlayDir(); err != nil {
			return nil, err
		}
	}
	if img.CloudInit() {
		var err error
		if st.Seed, err = a.seed(img, spec, addr); err != nil {
			return nil, err
		}
	}
	return st, nil
}
