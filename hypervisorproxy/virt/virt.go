package virt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"libvirt.org/go/libvirt"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
)

// Host is one host's hypervisor over one libvirt connection. It is safe
// for concurrent use. A dropped connection is re-opened on the next call
// (and the call retried once when it only reads); OnReconnect then runs.
type Host struct {
	uri string
	typ string // domain type: "test" or "qemu"
	log zerolog.Logger

	mu     sync.Mutex
	poolMu sync.Mutex // making storage pools
	conn   *libvirt.Connect
	// verified names the image volumes known to hold their files (see
	// PutImage).
	verified    map[string]bool
	reconnects  int
	onReconnect func()
}

var (
	_ hp.GuestHypervisor = (*Host)(nil)
	_ hp.ImageHypervisor = (*Host)(nil)
)

// Options configure Open.
type Options struct {
	Logger zerolog.Logger
	// OnReconnect runs (without locks held, in the calling goroutine)
	// after the connection was re-opened: a file-based test host has then
	// lost every domain, and its owner recreates them.
	OnReconnect func()
}

// Open connects to the libvirt URI. Domains of test:// URIs are of type
// "test"; all others of type "qemu" (TCG).
func Open(ctx context.Context, uri string, opt Options) (*Host, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h := &Host{uri: uri, typ: DomainType(uri), log: opt.Logger, onReconnect: opt.OnReconnect, verified: map[string]bool{}}
	conn, err := libvirt.NewConnect(uri)
	if err != nil {
		return nil, wrap(err, "connect to %s", uri)
	}
	h.conn = conn
	return h, nil
}

// DomainType is the domain type the driver uses on a URI: "test" for the
// test driver, else "qemu".
func DomainType(uri string) string {
	if strings.HasPrefix(uri, "test:") || strings.HasPrefix(uri, "test+") {
		return "test"
	}
	return "qemu"
}

// URI returns the host's libvirt URI.
func (h *Host) URI() string { return h.uri }

// Reconnects returns how many times the connection was re-opened.
func (h *Host) Reconnects() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reconnects
}

// Close closes the connection.
func (h *Host) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == nil {
		return nil
	}
	_, err := h.conn.Close()
	h.conn = nil
	return wrap(err, "close %s", h.uri)
}

// Reconnect closes the connection and opens a new one.
func (h *Host) Reconnect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	h.mu.Lock()
	if h.conn != nil {
		h.conn.Close()
		h.conn = nil
	}
	h.mu.Unlock()
	_, err := h.connection(ctx)
	return err
}

// connection returns a live connection, re-opening a dead one.
func (h *Host) connection(ctx context.Context) (*libvirt.Connect, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.conn != nil {
		if alive, err := h.conn.IsAlive(); err == nil && alive {
			c := h.conn
			h.mu.Unlock()
			return c, nil
		}
		h.conn.Close()
		h.conn = nil
		h.log.Warn().Str("uri", h.uri).Msg("libvirt connection lost, reconnecting")
	}
	conn, err := libvirt.NewConnect(h.uri)
	if err != nil {
		h.mu.Unlock()
		return nil, &Error{Op: "reconnect to " + h.uri, Sentinel: hp.ErrConnLost, Err: err}
	}
	h.conn = conn
	h.reconnects++
	cb := h.onReconnect
	h.mu.Unlock()
	h.log.Info().Str("uri", h.uri).Msg("libvirt connection re-opened")
	if cb != nil {
		cb()
	}
	return conn, nil
}

// read runs a read-only call, retried once on a fresh connection when the
// connection was lost.
func read[T any](ctx context.Context, h *Host, f func(*libvirt.Connect) (T, error)) (T, error) {
	conn, err := h.connection(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	v, err := f(conn)
	if errors.Is(err, hp.ErrConnLost) {
		h.dropConn(conn)
		if conn, err = h.connection(ctx); err != nil {
			var zero T
			return zero, err
		}
		return f(conn)
	}
	return v, err
}

// dropConn forgets conn if it is still the current connection.
func (h *Host) dropConn(conn *libvirt.Connect) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn == conn {
		h.conn.Close()
		h.conn = nil
	}
}

// Node reports the host's CPUs and memory.
func (h *Host) Node(ctx context.Context) (hp.Node, error) {
	return read(ctx, h, func(c *libvirt.Connect) (hp.Node, error) {
		ni, err := c.GetNodeInfo()
		if err != nil {
			return hp.Node{}, wrap(err, "node info of %s", h.uri)
		}
		return hp.Node{CPUs: int(ni.Cpus), MemoryMiB: int(ni.Memory / 1024), MHz: int(ni.MHz), Model: ni.Model}, nil
	})
}

// Domains lists every domain of the host, running or not, by name.
func (h *Host) Domains(ctx context.Context) ([]hp.Domain, error) {
	return read(ctx, h, func(c *libvirt.Connect) ([]hp.Domain, error) {
		doms, err := c.ListAllDomains(0)
		if err != nil {
			return nil, wrap(err, "list domains of %s", h.uri)
		}
		defer freeAll(doms)
		out := make([]hp.Domain, 0, len(doms))
		for i := range doms {
			d, err := describe(&doms[i])
			if errors.Is(err, hp.ErrNotFound) {
				continue // gone meanwhile
			}
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		slices.SortFunc(out, func(a, b hp.Domain) int { return strings.Compare(a.Name, b.Name) })
		return out, nil
	})
}

func freeAll(doms []libvirt.Domain) {
	for i := range doms {
		doms[i].Free()
	}
}

// describe reads a domain's state, current sizes (from GetInfo: the
// balloon's actual memory) and maxima and metadata (from its XML).
func describe(dom *libvirt.Domain) (hp.Domain, error) {
	name, err := dom.GetName()
	if err != nil {
		return hp.Domain{}, wrap(err, "domain name")
	}
	info, err := dom.GetInfo()
	if err != nil {
		return hp.Domain{}, wrap(err, "info of %s", name)
	}
	desc, err := dom.GetXMLDesc(0)
	if err != nil {
		return hp.Domain{}, wrap(err, "xml of %s", name)
	}
	x, err := domxml.Parse(desc)
	if err != nil {
		return hp.Domain{}, fmt.Errorf("xml of %s: %w", name, err)
	}
	d := hp.Domain{
		Name:         name,
		State:        state(info.State),
		VCPUs:        int(info.NrVirtCpu),
		MaxVCPUs:     x.MaxVCPUs,
		MemoryMiB:    int(info.Memory / 1024),
		MaxMemoryMiB: x.MaxMemoryMiB,
		Job:          x.Job,
		Pool:         x.Pool,
		CPUQuota:     x.CPUQuota,
	}
	if d.State != hp.StateRunning && d.State != hp.StatePaused {
		// A stopped domain reports its configured sizes.
		d.VCPUs, d.MemoryMiB = x.VCPUs, x.MemoryMiB
	}
	return d, nil
}

func state(s libvirt.DomainState) hp.State {
	switch s {
	case libvirt.DOMAIN_RUNNING, libvirt.DOMAIN_BLOCKED:
		return hp.StateRunning
	case libvirt.DOMAIN_PAUSED, libvirt.DOMAIN_PMSUSPENDED:
		return hp.StatePaused
	case libvirt.DOMAIN_SHUTOFF, libvirt.DOMAIN_SHUTDOWN:
		return hp.StateShutoff
	case libvirt.DOMAIN_CRASHED:
		return hp.StateCrashed
	}
	return hp.StateOther
}

// lookup finds a domain by name on a live connection; the caller frees it.
func (h *Host) lookup(ctx context.Context, name string) (*libvirt.Domain, error) {
	conn, err := h.connection(ctx)
	if err != nil {
		return nil, err
	}
	dom, err := conn.LookupDomainByName(name)
	if err != nil {
		return nil, wrap(err, "vm %s on %s", name, h.uri)
	}
	return dom, nil
}

// lookupDescribed finds a domain and describes it; the caller frees it.
func (h *Host) lookupDescribed(ctx context.Context, name string) (*libvirt.Domain, hp.Domain, error) {
	dom, err := h.lookup(ctx, name)
	if err != nil {
		return nil, hp.Domain{}, err
	}
	d, err := describe(dom)
	if err != nil {
		dom.Free()
		return nil, hp.Domain{}, err
	}
	return dom, d, nil
}

// Create defines the domain (persistent) and starts it. A domain that
// fails to start is undefined again.
func (h *Host) Create(ctx context.Context, spec hp.VMSpec, lim hp.VMLimits) (hp.Domain, error) {
	return h.CreateDomain(ctx, domxml.Domain{
		Type: h.typ, Name: spec.Name, VCPUs: spec.VCPUs, MaxVCPUs: spec.MaxVCPUs,
		MemoryMiB: spec.MemoryMiB, MaxMemoryMiB: spec.MaxMemoryMiB, Job: spec.Job, Pool: spec.Pool,
		CPUQuota: lim.CPUQuota,
	})
}

// CreateGuest defines and starts a VM that boots b: direct kernel boot,
// its console appended to b.ConsoleLog and the guest agent's channel
// (its socket chosen, and removed with the VM, by libvirt). A VM of a disk
// image (b.Disk) gets its own copy-on-write overlay of it in
// b.OverlayDir (see overlay.go), and with b.Seed its cloud-init seed
// beside it (a read-only vdb), made before the domain is defined and
// deleted when it fails to start or is destroyed. On the test driver it
// is ErrUnsupported.
func (h *Host) CreateGuest(ctx context.Context, spec hp.VMSpec, b hp.Boot, lim hp.VMLimits) (hp.Domain, error) {
	if h.typ != domxml.TypeQEMU {
		return hp.Domain{}, fmt.Errorf("create %s on %s: %w: booting a guest image needs QEMU", spec.Name, h.uri, hp.ErrUnsupported)
	}
	d := domxml.Domain{
		Type: h.typ, Name: spec.Name, VCPUs: spec.VCPUs, MaxVCPUs: spec.MaxVCPUs,
		MemoryMiB: spec.MemoryMiB, MaxMemoryMiB: spec.MaxMemoryMiB, Job: spec.Job, Pool: spec.Pool,
		Kernel: b.Kernel, Initrd: b.Initrd, Cmdline: b.Cmdline, ConsoleLog: b.ConsoleLog, GuestAgent: true,
		Bridge: b.Bridge, MAC: b.MAC, CPUQuota: lim.CPUQuota,
	}
	if b.Disk == "" {
		return h.CreateDomain(ctx, d)
	}
	if b.OverlayDir == "" || !filepath.IsAbs(b.OverlayDir) || !filepath.IsAbs(b.Disk) {
		return hp.Domain{}, fmt.Errorf("create %s: %w: disk %q and overlay directory %q must be absolute paths", spec.Name, hp.ErrInvalid, b.Disk, b.OverlayDir)
	}
	// The domain is checked before its overlay is made.
	d.Disk = filepath.Join(b.OverlayDir, overlayName(spec.Name))
	if b.Seed != nil {
		d.Seed = filepath.Join(b.OverlayDir, seedName(spec.Name))
	}
	if _, err := d.XML(); err != nil {
		return hp.Domain{}, fmt.Errorf("create %s: %w: %w", spec.Name, hp.ErrInvalid, err)
	}
	if conn, err := h.connection(ctx); err != nil {
		return hp.Domain{}, err
	} else if dom, err := conn.LookupDomainByName(spec.Name); err == nil {
		dom.Free()
		return hp.Domain{}, fmt.Errorf("create %s on %s: %w", spec.Name, h.uri, hp.ErrExists)
	}
	overlay, err := h.createOverlay(ctx, b.OverlayDir, spec.Name, b.Disk, b.BuildOverlayDir)
	if err != nil {
		return hp.Domain{}, fmt.Errorf("create %s: %w", spec.Name, err)
	}
	d.Disk = overlay
	made := []string{overlay}
	undo := func(err error) error {
		for _, p := range made {
			if derr := h.deleteOverlay(context.WithoutCancel(ctx), spec.Name, p); derr != nil {
				err = errors.Join(err, derr)
			}
		}
		return err
	}
	if b.Seed != nil {
		seed, err := h.createSeed(ctx, b.OverlayDir, spec.Name, b.Seed, b.BuildOverlayDir)
		if err != nil {
			return hp.Domain{}, undo(fmt.Errorf("create %s: %w", spec.Name, err))
		}
		d.Seed = seed
		made = append(made, seed)
	}
	dom, err := h.CreateDomain(ctx, d)
	if err != nil {
		return hp.Domain{}, undo(err)
	}
	return dom, nil
}

// define defines and starts a domain from its XML.
func (h *Host) define(ctx context.Context, name, xml string) (hp.Domain, error) {
	conn, err := h.connection(ctx)
	if err != nil {
		return hp.Domain{}, err
	}
	if dom, err := conn.LookupDomainByName(name); err == nil {
		dom.Free()
		return hp.Domain{}, fmt.Errorf("create %s on %s: %w", name, h.uri, hp.ErrExists)
	}
	dom, err := conn.DomainDefineXML(xml)
	if err != nil {
		return hp.Domain{}, wrap(err, "define %s on %s", name, h.uri)
	}
	defer dom.Free()
	if err := startDomain(ctx, dom); err != nil {
		err = wrap(err, "start %s on %s", name, h.uri)
		if uerr := dom.Undefine(); uerr != nil {
			return hp.Domain{}, errors.Join(err, wrap(uerr, "undefine %s after a failed start", name))
		}
		return hp.Domain{}, err
	}
	return describe(dom)
}

// SetVCPUs hot-plugs or unplugs vCPUs and reads the count back. QEMU
// cannot unplug the vCPUs of these guests: that is ErrUnsupported.
func (h *Host) SetVCPUs(ctx context.Context, name string, n int) (hp.Domain, error) {
	dom, before, err := h.lookupDescribed(ctx, name)
	if err != nil {
		return hp.Domain{}, err
	}
	defer dom.Free()
	if n < 1 || n > before.MaxVCPUs {
		return before, fmt.Errorf("set vcpus of %s to %d: %w (max_vcpus %d)", name, n, hp.ErrLimit, before.MaxVCPUs)
	}
	if n == before.VCPUs {
		return before, nil
	}
	flags := libvirt.DOMAIN_VCPU_LIVE | libvirt.DOMAIN_VCPU_CONFIG
	if err := dom.SetVcpusFlags(uint(n), flags); err != nil {
		err = wrap(err, "set vcpus of %s to %d", name, n)
		if n < before.VCPUs && h.typ == "qemu" && !errors.Is(err, hp.ErrUnsupported) {
			// QEMU refuses to unplug qemu64 vCPUs with an internal error.
			err = fmt.Errorf("%w: vcpu unplug: %w", hp.ErrUnsupported, err)
		}
		return before, err
	}
	after, err := describe(dom)
	if err != nil {
		return hp.Domain{}, err
	}
	if after.VCPUs != n {
		return after, fmt.Errorf("set vcpus of %s to %d: %w: the vm has %d", name, n, hp.ErrUnsupported, after.VCPUs)
	}
	return after, nil
}

// memorySettle is how long a balloon change may take before SetMemory
// reads it back for the last time.
const memorySettle = 2 * time.Second

// SetMemory changes a VM's memory live. Within the VM's present memory
// the balloon does it, and the result is read back: a change that did not
// take (the guest has no balloon driver) is ErrUnsupported. On QEMU, memory
// beyond the present size up to the maximum is hot-plugged as one DIMM
// (sizes in multiples of 2 MiB).
func (h *Host) SetMemory(ctx context.Context, name string, mib int) (hp.Domain, error) {
	dom, before, err := h.lookupDescribed(ctx, name)
	if err != nil {
		return hp.Domain{}, err
	}
	defer dom.Free()
	if mib < 1 || mib > before.MaxMemoryMiB {
		return before, fmt.Errorf("set memory of %s to %d MiB: %w (max_memory_mib %d)", name, mib, hp.ErrLimit, before.MaxMemoryMiB)
	}
	if mib == before.MemoryMiB {
		return before, nil
	}
	info, err := dom.GetInfo()
	if err != nil {
		return before, wrap(err, "info of %s", name)
	}
	present := int(info.MaxMem / 1024) // boot memory plus DIMMs
	if h.typ == "qemu" && mib > present {
		grow := mib - present
		if before.MemoryMiB < present {
			return before, fmt.Errorf("set memory of %s to %d MiB: %w: the balloon holds %d MiB back; set %d MiB first",
				name, mib, hp.ErrUnsupported, present-before.MemoryMiB, present)
		}
		if grow%2 != 0 {
			return before, fmt.Errorf("set memory of %s to %d MiB: %w: a DIMM of %d MiB is not a multiple of 2 MiB", name, mib, hp.ErrInvalid, grow)
		}
		flags := libvirt.DOMAIN_DEVICE_MODIFY_LIVE | libvirt.DOMAIN_DEVICE_MODIFY_CONFIG
		if err := dom.AttachDeviceFlags(domxml.DIMM(grow, 0), flags); err != nil {
			return before, wrap(err, "hot-plug %d MiB into %s", grow, name)
		}
	} else {
		flags := libvirt.DOMAIN_MEM_LIVE
		if h.typ == "qemu" {
			flags |= libvirt.DOMAIN_MEM_CONFIG
		}
		if err := dom.SetMemoryFlags(uint64(mib)*1024, flags); err != nil {
			return before, wrap(err, "set memory of %s to %d MiB", name, mib)
		}
	}
	deadline := time.Now().Add(memorySettle)
	for {
		after, err := describe(dom)
		if err != nil {
			return hp.Domain{}, err
		}
		if after.MemoryMiB == mib {
			return after, nil
		}
		if time.Now().After(deadline) {
			return after, fmt.Errorf("set memory of %s to %d MiB: %w: the balloon change did not take (the guest has %d MiB; no balloon driver in it?)",
				name, mib, hp.ErrUnsupported, after.MemoryMiB)
		}
		select {
		case <-ctx.Done():
			return after, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Destroy stops the domain (if it runs) and undefines it, and deletes
// its overlay when it has one (a VM of a disk image).
func (h *Host) Destroy(ctx context.Context, name string) error {
	dom, err := h.lookup(ctx, name)
	if err != nil {
		return err
	}
	defer dom.Free()
	disks := disksOf(dom)
	if active, err := dom.IsActive(); err == nil && active {
		if err := dom.Destroy(); err != nil && code(err) != libvirt.ERR_OPERATION_INVALID {
			return wrap(err, "destroy %s on %s", name, h.uri)
		}
	}
	if err := dom.UndefineFlags(libvirt.DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA); err != nil {
		if code(err) != libvirt.ERR_NO_DOMAIN && code(err) != libvirt.ERR_OPERATION_INVALID {
			return wrap(err, "undefine %s on %s", name, h.uri)
		}
		// transient: gone with the destroy
	}
	var errs []error
	for _, p := range disks {
		errs = append(errs, h.deleteOverlay(ctx, name, p))
	}
	return errors.Join(errs...)
}

// Connector returns the agent's connector over this driver: one Host per
// URI, logging to log.
func Connector(log zerolog.Logger) hp.Connector {
	return func(ctx context.Context, uri string, onReconnect func()) (hp.Hypervisor, error) {
		return Open(ctx, uri, Options{Logger: log.With().Str("uri", uri).Logger(), OnReconnect: onReconnect})
	}
}

// tapRetries is how many times a start that lost the race for a tap
// device's name is tried again.
const tapRetries = 5

// startDomain starts a defined domain. libvirtd names a bridged guest's
// tap vnetN with the first N free when it looks: another libvirtd of the
// same network namespace (or any other program making taps) may take the
// same name at the same moment, and the start then fails with "Unable to
// create tap device vnetN: Device or resource busy". Such a start is
// tried again, a few times, after a short pause.
func startDomain(ctx context.Context, dom *libvirt.Domain) error {
	for i := 0; ; i++ {
		err := dom.Create()
		if err == nil || i == tapRetries || !tapRace(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(50*(i+1)) * time.Millisecond):
		}
	}
}

// tapRace says err is a lost race for a tap device's name.
func tapRace(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Unable to create tap device") && strings.Contains(msg, "busy")
}
