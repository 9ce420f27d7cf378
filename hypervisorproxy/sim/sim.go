// Package sim is a simulated hypervisor: hosts of a given size whose VMs
// are created, destroyed, resized and migrated in memory, after
// configurable delays, with no libvirt. It is to the agent what
// Kubernetes' fake nodes are to its scheduler: the agent, and the daemon
// above it, take the same code path as with real hosts, so that the
// scheduler can be measured at ten thousand hosts on one machine.
//
// A simulated host is named by a URI of the scheme "sim":
//
//	sim:///NAME?cpus=8&memory_mib=16384&create=2s&destroy=0s&resize=0s&migrate=5s
//
// cpus and memory_mib are the host's size (required); mhz its clock
// (default 2000); create, destroy, resize and migrate how long each
// operation takes (default 0). Connector opens such URIs and hands the
// others to another connector (libvirt's). A simulated host keeps its VMs
// in memory for as long as its Connector lives: an agent that restarts
// finds its hosts empty, and gives them back the VMs of its record, as it
// does for the libvirt test driver's hosts.
package sim

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
)

// Scheme is the URI scheme of simulated hosts.
const Scheme = hp.SimScheme

// Spec and Delays are a simulated host, as its URI gives it.
type (
	Spec   = hp.SimSpec
	Delays = hp.SimDelays
)

// ParseURI reads a simulated host's URI (hp.ParseSimURI).
func ParseURI(uri string) (Spec, error) { return hp.ParseSimURI(uri) }

// Connector opens simulated hosts (URIs of the scheme sim), each once: a
// second connection to a host, after a reconnect, finds its VMs. Every
// other URI goes to other (nil: refused).
func Connector(other hp.Connector) hp.Connector {
	var (
		mu    sync.Mutex
		hosts = map[string]*Host{}
	)
	return func(ctx context.Context, uri string, onReconnect func()) (hp.Hypervisor, error) {
		if !strings.HasPrefix(uri, Scheme+":") {
			if other == nil {
				return nil, fmt.Errorf("%w: %q: only simulated hosts (sim:///NAME) here", hp.ErrInvalid, uri)
			}
			return other(ctx, uri, onReconnect)
		}
		s, err := ParseURI(uri)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", hp.ErrInvalid, err)
		}
		mu.Lock()
		defer mu.Unlock()
		h, ok := hosts[s.Name]
		switch {
		case !ok:
			h = New(s)
			hosts[s.Name] = h
		case h.spec != s:
			return nil, fmt.Errorf("%w: simulated host %s is open as %s already, not %s", hp.ErrInvalid, s.Name, h.spec.URI(), uri)
		}
		return &conn{h: h}, nil
	}
}

// Host is one simulated host. It is safe for concurrent use.
type Host struct {
	spec Spec

	mu   sync.Mutex
	doms map[string]*hp.Domain
}

// New is a simulated host with no VM.
func New(s Spec) *Host {
	return &Host{spec: s, doms: map[string]*hp.Domain{}}
}

// conn is a connection to a simulated host: a Hypervisor until closed.
type conn struct {
	h *Host

	mu     sync.Mutex
	closed bool
}

var _ hp.Hypervisor = (*conn)(nil)

// errClosed is the error of a call on a closed connection.
var errClosed = fmt.Errorf("%w: the simulated host's connection is closed", hp.ErrConnLost)

func (c *conn) host() (*Host, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	return c.h, nil
}

// wait sleeps d, or returns ctx's error.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *conn) Node(ctx context.Context) (hp.Node, error) {
	h, err := c.host()
	if err != nil {
		return hp.Node{}, err
	}
	return hp.Node{CPUs: h.spec.CPUs, MemoryMiB: h.spec.MemoryMiB, MHz: h.spec.MHz, Model: "simulated"}, nil
}

func (c *conn) Domains(ctx context.Context) ([]hp.Domain, error) {
	h, err := c.host()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	out := make([]hp.Domain, 0, len(h.doms))
	for _, d := range h.doms {
		out = append(out, *d)
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b hp.Domain) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

func (c *conn) Create(ctx context.Context, spec hp.VMSpec, lim hp.VMLimits) (hp.Domain, error) {
	h, err := c.host()
	if err != nil {
		return hp.Domain{}, err
	}
	if spec.Name == "" || spec.VCPUs < 1 || spec.MemoryMiB < 1 {
		return hp.Domain{}, fmt.Errorf("%w: a VM needs a name, vCPUs and memory", hp.ErrInvalid)
	}
	d := hp.Domain{Name: spec.Name, State: hp.StateRunning, VCPUs: spec.VCPUs, MaxVCPUs: max(spec.MaxVCPUs, spec.VCPUs),
		MemoryMiB: spec.MemoryMiB, MaxMemoryMiB: max(spec.MaxMemoryMiB, spec.MemoryMiB), Job: spec.Job, Pool: spec.Pool, CPUQuota: lim.CPUQuota}
	if err := wait(ctx, h.spec.Delays.Create); err != nil {
		return hp.Domain{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.doms[d.Name]; ok {
		return hp.Domain{}, fmt.Errorf("vm %s: %w", d.Name, hp.ErrExists)
	}
	h.doms[d.Name] = &d
	return d, nil
}

// resize changes a VM's vCPUs or memory within its maximum.
func (c *conn) resize(ctx context.Context, name string, set func(d *hp.Domain) error) (hp.Domain, error) {
	h, err := c.host()
	if err != nil {
		return hp.Domain{}, err
	}
	if err := wait(ctx, h.spec.Delays.Resize); err != nil {
		return hp.Domain{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	d, ok := h.doms[name]
	if !ok {
		return hp.Domain{}, fmt.Errorf("vm %s: %w", name, hp.ErrNotFound)
	}
	if err := set(d); err != nil {
		return hp.Domain{}, err
	}
	return *d, nil
}

func (c *conn) SetVCPUs(ctx context.Context, name string, n int) (hp.Domain, error) {
	return c.resize(ctx, name, func(d *hp.Domain) error {
		if n < 1 || n > d.MaxVCPUs {
			return fmt.Errorf("vm %s: %d vCPUs: %w (%d)", name, n, hp.ErrLimit, d.MaxVCPUs)
		}
		d.VCPUs = n
		return nil
	})
}

func (c *conn) SetMemory(ctx context.Context, name string, mib int) (hp.Domain, error) {
	return c.resize(ctx, name, func(d *hp.Domain) error {
		if mib < 1 || mib > d.MaxMemoryMiB {
			return fmt.Errorf("vm %s: %d MiB: %w (%d)", name, mib, hp.ErrLimit, d.MaxMemoryMiB)
		}
		d.MemoryMiB = mib
		return nil
	})
}

// Migrate moves the VM to dst, another simulated host, after the delay
// of migrate (the source's): a live move, with no downtime counted.
func (c *conn) Migrate(ctx context.Context, name string, dst hp.Hypervisor, opt hp.MigrateOptions) (hp.MigrateStats, error) {
	h, err := c.host()
	if err != nil {
		return hp.MigrateStats{}, err
	}
	to, ok := dst.(*conn)
	if !ok {
		return hp.MigrateStats{}, fmt.Errorf("%w: a simulated host migrates only to another", hp.ErrUnsupported)
	}
	th, err := to.host()
	if err != nil {
		return hp.MigrateStats{}, err
	}
	if th == h {
		return hp.MigrateStats{}, fmt.Errorf("%w: vm %s is on that host already", hp.ErrInvalid, name)
	}
	h.mu.Lock()
	d, ok := h.doms[name]
	var size int
	if ok {
		size = d.MemoryMiB
	}
	h.mu.Unlock()
	if !ok {
		return hp.MigrateStats{}, fmt.Errorf("vm %s: %w", name, hp.ErrNotFound)
	}
	start := time.Now()
	if err := wait(ctx, h.spec.Delays.Migrate); err != nil {
		return hp.MigrateStats{}, fmt.Errorf("vm %s: %w: %v", name, hp.ErrAborted, err)
	}
	// Lock both hosts in one order (by name) so that two moves the
	// other way round do not deadlock.
	first, second := h, th
	if th.spec.Name < h.spec.Name {
		first, second = th, h
	}
	first.mu.Lock()
	second.mu.Lock()
	defer first.mu.Unlock()
	defer second.mu.Unlock()
	d, ok = h.doms[name]
	switch {
	case !ok:
		return hp.MigrateStats{}, fmt.Errorf("vm %s: %w: destroyed during its migration", name, hp.ErrAborted)
	case th.doms[name] != nil:
		return hp.MigrateStats{}, fmt.Errorf("vm %s: %w on the destination", name, hp.ErrExists)
	}
	delete(h.doms, name)
	th.doms[name] = d
	return hp.MigrateStats{Live: true, TLS: opt.TLS, Duration: time.Since(start), DataMiB: float64(size)}, nil
}

func (c *conn) Destroy(ctx context.Context, name string) error {
	h, err := c.host()
	if err != nil {
		return err
	}
	if err := wait(ctx, h.spec.Delays.Destroy); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.doms[name]; !ok {
		return fmt.Errorf("vm %s: %w", name, hp.ErrNotFound)
	}
	delete(h.doms, name)
	return nil
}

func (c *conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errors.New("closed twice")
	}
	c.closed = true
	return nil
}
