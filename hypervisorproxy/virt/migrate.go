package virt

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
)

// DefaultProgressTimeout aborts a live migration that moved no data for
// that long.
const DefaultProgressTimeout = 60 * time.Second

// pollInterval is how often a migration's progress is read.
const pollInterval = 200 * time.Millisecond

// Migrate moves the VM to dst. Between QEMU hosts it is a live migration
// (Migrate3, managed by this process, over opt.URI: tcp://ADDR:PORT, and
// with opt.TLS over libvirt's native TLS), the domain persisted on the
// destination and undefined on the source; it is aborted when ctx is
// cancelled or no data moved for opt.ProgressTimeout, and the VM then
// keeps running on the source (ErrAborted). A migration that fails for
// its TLS set-up (certificates missing, of another CA, or naming another
// host; a host that takes TLS migrations only) says what the hosts need.
// Between test driver hosts, which cannot migrate, the domain is defined
// and started on dst and then destroyed on the source: the stats say it
// was not live.
func (h *Host) Migrate(ctx context.Context, name string, dst hp.Hypervisor, opt hp.MigrateOptions) (hp.MigrateStats, error) {
	d, ok := dst.(*Host)
	if !ok {
		return hp.MigrateStats{}, fmt.Errorf("migrate %s: %w: the destination is not a libvirt host", name, hp.ErrUnsupported)
	}
	if d == h {
		return hp.MigrateStats{}, fmt.Errorf("migrate %s: %w: the destination is the source", name, hp.ErrInvalid)
	}
	switch {
	case h.typ == "test" && d.typ == "test":
		return h.move(ctx, name, d)
	case h.typ != d.typ:
		return hp.MigrateStats{}, fmt.Errorf("migrate %s from %s to %s: %w: %s domains cannot move to a %s host",
			name, h.uri, d.uri, hp.ErrUnsupported, h.typ, d.typ)
	}
	return h.live(ctx, name, d, opt)
}

// move is the test driver's cold move.
func (h *Host) move(ctx context.Context, name string, d *Host) (hp.MigrateStats, error) {
	start := time.Now()
	dom, err := h.lookup(ctx, name)
	if err != nil {
		return hp.MigrateStats{}, err
	}
	defer dom.Free()
	xml, err := dom.GetXMLDesc(0) // the live definition: current sizes
	if err != nil {
		return hp.MigrateStats{}, wrap(err, "xml of %s", name)
	}
	if _, err := d.define(ctx, name, xml); err != nil {
		return hp.MigrateStats{}, fmt.Errorf("move %s to %s: %w", name, d.uri, err)
	}
	if err := h.Destroy(ctx, name); err != nil {
		// Two copies would be worse than none on the destination.
		if derr := d.Destroy(context.WithoutCancel(ctx), name); derr != nil {
			return hp.MigrateStats{}, errors.Join(fmt.Errorf("move %s: %w", name, err), derr)
		}
		return hp.MigrateStats{}, fmt.Errorf("move %s: %w", name, err)
	}
	return hp.MigrateStats{Live: false, Duration: time.Since(start)}, nil
}

// live is a QEMU live migration with a progress watch.
func (h *Host) live(ctx context.Context, name string, d *Host, opt hp.MigrateOptions) (hp.MigrateStats, error) {
	if opt.URI == "" {
		return hp.MigrateStats{}, fmt.Errorf("migrate %s: %w: no migration uri (tcp://ADDR:PORT)", name, hp.ErrInvalid)
	}
	timeout := opt.ProgressTimeout
	if timeout <= 0 {
		timeout = DefaultProgressTimeout
	}
	dom, err := h.lookup(ctx, name)
	if err != nil {
		return hp.MigrateStats{}, err
	}
	defer dom.Free()
	dconn, err := d.connection(ctx)
	if err != nil {
		return hp.MigrateStats{}, fmt.Errorf("migrate %s: destination: %w", name, err)
	}
	params := &libvirt.DomainMigrateParameters{URISet: true, URI: opt.URI}
	if opt.BandwidthMiBps > 0 {
		params.BandwidthSet, params.Bandwidth = true, opt.BandwidthMiBps
	}
	flags := migrateFlags(opt)
	var moved *movedStorage
	if opt.Storage != nil {
		if moved, err = h.prepareStorage(ctx, dom, name, d, opt.Storage, params); err != nil {
			return hp.MigrateStats{}, fmt.Errorf("migrate %s from %s to %s: %w", name, h.uri, d.uri, err)
		}
		if moved != nil {
			flags |= libvirt.MIGRATE_NON_SHARED_INC
		}
	}

	type result struct {
		dom *libvirt.Domain
		err error
	}
	start := time.Now()
	done := make(chan result, 1)
	go func() {
		nd, err := dom.Migrate3(dconn, params, flags)
		done <- result{nd, err}
	}()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	watch := progress{timeout: timeout}
	watch.moved(0, start)
	var why error
	cancelled := ctx.Done()
	for {
		select {
		case r := <-done:
			if r.err == nil && why != nil {
				// Too late to abort: the VM is on the destination now.
				h.log.Warn().Str("vm", name).Msg("migration finished before the abort took")
			}
			if r.err != nil {
				err := migrationError(r.err, opt.TLS, "migrate %s from %s to %s over %s", name, h.uri, d.uri, opt.URI)
				if why != nil {
					err = fmt.Errorf("%w: %w", why, err)
				}
				if moved != nil {
					err = errors.Join(err, moved.drop(context.WithoutCancel(ctx), d, moved.dst))
				}
				return hp.MigrateStats{}, err
			}
			defer r.dom.Free()
			st := hp.MigrateStats{Live: true, TLS: flags&libvirt.MIGRATE_TLS != 0, Duration: time.Since(start), Storage: moved != nil}
			if moved != nil {
				// The VM runs on the destination's disks: the source's go.
				if err := moved.drop(context.WithoutCancel(ctx), h, moved.src); err != nil {
					h.log.Warn().Err(err).Str("vm", name).Msg("the source's overlay after the migration")
				}
			}
			if js, err := r.dom.GetJobStats(libvirt.DOMAIN_JOB_STATS_COMPLETED); err == nil {
				if js.DowntimeSet {
					st.Downtime = time.Duration(js.Downtime) * time.Millisecond
				}
				if js.DataProcessedSet {
					st.DataMiB = float64(js.DataProcessed) / (1 << 20)
				}
			}
			return st, nil
		case <-cancelled:
			cancelled = nil // a closed channel is always ready
			if why == nil {
				why = fmt.Errorf("%w: %w", hp.ErrAborted, ctx.Err())
				h.abort(dom, name, "cancelled")
			}
		case now := <-tick.C:
			if why != nil {
				// The job may not have started when the first abort came.
				dom.AbortJob()
				continue
			}
			ji, err := dom.GetJobInfo()
			if err != nil {
				continue // the job may just have ended
			}
			var processed uint64 // nothing while the job sets up
			if ji.DataProcessedSet {
				processed = ji.DataProcessed
			}
			if watch.moved(processed, now) {
				continue
			}
			why = fmt.Errorf("%w: no progress for %v", hp.ErrAborted, timeout)
			h.abort(dom, name, "no progress")
		}
	}
}

// movedStorage is the disks of a VM whose migration copies them: the
// source's files and the destination's, made for it.
type movedStorage struct {
	name     string
	src, dst []string
}

// drop deletes files of the VM's (overlays and seeds) on host h.
func (m *movedStorage) drop(ctx context.Context, h *Host, files []string) error {
	var errs []error
	for _, p := range files {
		errs = append(errs, h.deleteOverlay(ctx, m.name, p))
	}
	return errors.Join(errs...)
}

// prepareStorage makes the destination's overlay (and seed) of a VM whose
// disks move with its migration (st), and sets the migration's
// parameters: the destination's domain XML naming them, the disk to copy
// (vda: the seed is read-only, made anew) and the NBD address.
func (h *Host) prepareStorage(ctx context.Context, dom *libvirt.Domain, name string, d *Host, st *hp.MigrateStorage, params *libvirt.DomainMigrateParameters) (*movedStorage, error) {
	if st.OverlayDir == "" || !filepath.IsAbs(st.OverlayDir) || !filepath.IsAbs(st.Base) || st.DisksURI == "" {
		return nil, fmt.Errorf("%w: storage: overlay directory %q and base %q must be absolute paths, with a disks uri (%q)",
			hp.ErrInvalid, st.OverlayDir, st.Base, st.DisksURI)
	}
	x, err := dom.GetXMLDesc(libvirt.DOMAIN_XML_MIGRATABLE)
	if err != nil {
		return nil, wrap(err, "xml of %s", name)
	}
	desc, err := domxml.Parse(x)
	if err != nil {
		return nil, fmt.Errorf("xml of %s: %w", name, err)
	}
	if desc.Disk == "" {
		return nil, fmt.Errorf("%w: %s has no disk to copy", hp.ErrInvalid, name)
	}
	if filepath.Join(st.OverlayDir, overlayName(name)) == desc.Disk {
		// The destination would make its overlay where the source's is:
		// the same storage (hosts of one machine, or a shared
		// directory), which QEMU reads on both sides as it is.
		return nil, nil
	}
	m := &movedStorage{name: name}
	for _, p := range []string{desc.Disk, desc.Seed} {
		if p != "" {
			m.src = append(m.src, p)
		}
	}
	overlay, err := d.createOverlay(ctx, st.OverlayDir, name, st.Base, st.BuildOverlayDir)
	if err != nil {
		return nil, fmt.Errorf("the destination's overlay: %w", err)
	}
	m.dst = append(m.dst, overlay)
	x, err = replaceSource(x, desc.Disk, overlay)
	if err == nil && desc.Seed != "" {
		var seed string
		if seed, err = d.createSeed(ctx, st.OverlayDir, name, st.Seed, st.BuildOverlayDir); err == nil {
			m.dst = append(m.dst, seed)
			x, err = replaceSource(x, desc.Seed, seed)
		}
	}
	if err != nil {
		return nil, errors.Join(err, m.drop(context.WithoutCancel(ctx), d, m.dst))
	}
	params.DestXMLSet, params.DestXML = true, x
	params.MigrateDisksSet, params.MigrateDisks = true, []string{domxml.DiskTarget}
	params.DisksURISet, params.DisksURI = true, st.DisksURI
	return m, nil
}

// replaceSource puts path to in the place of path from as a disk's
// source file in a domain's XML; from must be there once.
func replaceSource(x, from, to string) (string, error) {
	esc := func(s string) string {
		var b strings.Builder
		xml.EscapeText(&b, []byte(s))
		return strings.ReplaceAll(b.String(), "'", "&apos;")
	}
	old := "<source file='" + esc(from) + "'"
	if strings.Count(x, old) != 1 {
		return "", fmt.Errorf("the domain's XML names the disk %s %d times, not once", from, strings.Count(x, old))
	}
	return strings.Replace(x, old, "<source file='"+esc(to)+"'", 1), nil
}

// migrateFlags are the flags of a live migration: live, the domain
// persisted on the destination and undefined on the source, and over TLS
// when opt says so.
func migrateFlags(opt hp.MigrateOptions) libvirt.DomainMigrateFlags {
	flags := libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PERSIST_DEST | libvirt.MIGRATE_UNDEFINE_SOURCE
	if opt.TLS {
		flags |= libvirt.MIGRATE_TLS
	}
	return flags
}

// What a migration over TLS needs of each host, for the errors that show
// it missing.
const (
	tlsFilesHint = "the live migration over TLS (migration_tls) needs libvirt's migration certificates on both hosts: " +
		"migrate_tls_x509_cert_dir in each host's qemu.conf names a directory with ca-cert.pem (the grid's CA), " +
		"server-cert.pem and server-key.pem, client-cert.pem and client-key.pem (the host's certificate of that CA), " +
		"readable by the hosts' QEMU"
	tlsNameHint  = "the destination host's server-cert.pem (in its migrate_tls_x509_cert_dir) must name the host's migration address"
	tlsForceHint = "the host's libvirtd takes live migrations over TLS only (migrate_tls_force in its qemu.conf): " +
		"set migration_tls: true in the site file"
)

// tlsFileProblems are the parts of QEMU's and libvirt's messages that show
// a host's migration certificates missing, unreadable or of another CA.
var tlsFileProblems = []string{
	"Unable to access credentials", // a file missing from the directory
	"Cannot load certificate",      // a file QEMU cannot read
	"Cannot load CA",
	"hasn't got a known issuer", // a certificate of another CA
	"certificate is not trusted",
}

// migrationError is wrap for a failed live migration, with what the
// hosts' TLS set-up lacks when the libvirt error shows it: with tls, the
// migration certificates (missing, unreadable, of another CA, naming
// another host), an error of the class libvirt's code gives; without, a
// libvirtd that refuses plain migrations (migrate_tls_force), which is
// ErrUnsupported (libvirt's "operation invalid" would make it ErrBusy, as
// if a retry could help).
func migrationError(err error, tls bool, format string, args ...any) error {
	werr := wrap(err, format, args...)
	e, ok := werr.(*Error)
	if !ok {
		return werr
	}
	msg := e.Err.Error()
	switch {
	case strings.Contains(msg, "allows migration only with VIR_MIGRATE_TLS"):
		e.Sentinel, e.Hint = hp.ErrUnsupported, tlsForceHint
	case !tls:
		// A plain migration's failures are not of TLS.
	case strings.Contains(msg, "does not match the hostname"):
		e.Hint = tlsNameHint
	default:
		for _, p := range tlsFileProblems {
			if strings.Contains(msg, p) {
				e.Hint = tlsFilesHint
				break
			}
		}
	}
	return e
}

func (h *Host) abort(dom *libvirt.Domain, name, reason string) {
	h.log.Warn().Str("vm", name).Str("reason", reason).Msg("aborting migration")
	if err := dom.AbortJob(); err != nil {
		h.log.Warn().Err(err).Str("vm", name).Msg("abort migration")
	}
}

// progress tells a stalled migration from a slow one.
type progress struct {
	timeout time.Duration
	last    uint64
	at      time.Time
}

// moved records the data processed so far at time now and reports whether
// the migration still moves: it does while the data grew within timeout.
func (p *progress) moved(processed uint64, now time.Time) bool {
	if p.at.IsZero() || processed > p.last {
		p.last, p.at = processed, now
		return true
	}
	return now.Sub(p.at) <= p.timeout
}
