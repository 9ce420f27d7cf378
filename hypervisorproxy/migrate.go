package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"time"
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
	port := 0
	if cerr == nil {
		if port, cerr = a.ports.take(); cerr == nil {
			v.moving = dst.cfg.Name
		}
	}
	srcHV, dstHV := src.hv, dst.hv
	a.mu.Unlock()
	if cerr != nil {
		return Migration{}, fmt.Errorf("migrate vm %s: %w", name, cerr)
	}
	defer func() {
		a.mu.Lock()
		a.ports.release(port)
		a.mu.Unlock()
	}()

	uri := fmt.Sprintf("tcp://%s:%d", dst.cfg.migrationAddress(), port)
	l := a.opLog("migrate", s).With().Str("to", dst.cfg.Name).Str("uri", uri).Logger()
	start := time.Now()
	st, err := srcHV.Migrate(ctx, name, dstHV, MigrateOptions{URI: uri, ProgressTimeout: a.site.MigrationProgressTimeout,
		TLS: a.site.MigrationTLS})
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
		DowntimeMs: float64(st.Downtime.Microseconds()) / 1000, DataMiB: st.DataMiB}
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
