package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/hypervisorproxy/domxml"
)

// Connector opens a host's hypervisor. onReconnect must be called after the
// connection was re-opened (the virt driver's Options.OnReconnect).
type Connector func(ctx context.Context, uri string, onReconnect func()) (Hypervisor, error)

// Config configures an Agent.
type Config struct {
	Site    *Site
	Token   string      // bearer token of the API; required
	Grid    *graph.Grid // required when the site file lists no hosts
	Connect Connector   // required
	Logger  zerolog.Logger
	// Now is the clock of timestamps (default time.Now).
	Now func() time.Time
}

// Agent is one site's hypervisor proxy: it manages the site's hosts and
// the VMs it created on them. Its methods are the operations of the HTTP
// API (Handler); they are safe for concurrent use. The agent's lock guards
// only its bookkeeping: no hypervisor call is made under it.
type Agent struct {
	site    *Site
	token   string
	connect Connector
	log     zerolog.Logger
	now     func() time.Time
	dataDir string
	tmpDir  string // removed by Close

	mu    sync.Mutex
	hosts []*host
	vms   map[string]*vm
	ports map[int]bool // migration ports in use
}

type host struct {
	cfg       SiteHost
	hv        Hypervisor // nil while unreachable
	err       error      // why it is unreachable
	node      Node
	pool      string
	switching bool
	test      bool // a test-driver host: it keeps no state across reconnects
}

type vm struct {
	spec   VMSpec // Host, VCPUs and MemoryMiB follow the VM
	busy   string // operation in progress, "" when idle
	moving string // destination host of a migration in progress
}

// New resolves the site's hosts (generating them from the grid when the
// site file lists none), loads the record of VMs from the data directory,
// connects to every host and recreates the recorded VMs that a test host
// lost. A host that cannot be reached is kept, marked unreachable, and
// retried on every inventory.
func New(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.Site == nil || cfg.Connect == nil {
		return nil, errors.New("agent: site and connector are required")
	}
	if cfg.Token == "" {
		return nil, fmt.Errorf("agent: token: %w: must not be empty", ErrInvalid)
	}
	a := &Agent{
		site: cfg.Site, token: cfg.Token, connect: cfg.Connect, log: cfg.Logger, now: cfg.Now,
		dataDir: cfg.Site.DataDir, vms: map[string]*vm{}, ports: map[int]bool{},
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.dataDir != "" {
		if err := os.MkdirAll(a.dataDir, 0o755); err != nil {
			return nil, fmt.Errorf("agent: data_dir: %w", err)
		}
	}
	hosts := cfg.Site.Hosts
	if len(hosts) == 0 {
		var err error
		if hosts, err = a.generateHosts(cfg.Grid); err != nil {
			a.Close()
			return nil, err
		}
	}
	rec, err := loadRecord(a.dataDir)
	if err != nil {
		a.Close()
		return nil, err
	}
	for _, hc := range hosts {
		h := &host{cfg: hc, pool: hc.Pool, test: strings.HasPrefix(hc.URI, "test")}
		if p, ok := rec.Pools[hc.Name]; ok {
			h.pool = p
		}
		a.hosts = append(a.hosts, h)
	}
	for _, s := range rec.VMs {
		if a.host(s.Host) == nil {
			a.log.Warn().Str("vm", s.Name).Str("host", s.Host).Msg("recorded vm on a host the site no longer has: forgotten")
			continue
		}
		a.vms[s.Name] = &vm{spec: s}
	}
	for _, h := range a.hosts {
		a.dial(ctx, h)
	}
	return a, nil
}

// generateHosts makes one host per machine of the site's cluster entry.
func (a *Agent) generateHosts(g *graph.Grid) ([]SiteHost, error) {
	if g == nil {
		return nil, fmt.Errorf("agent: site %s lists no hosts and there is no grid to generate them from", a.site.Site)
	}
	dir := a.dataDir
	if dir == "" {
		var err error
		if a.tmpDir, err = os.MkdirTemp("", "metasched-agent-"); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		dir = a.tmpDir
	}
	dir = filepath.Join(dir, "hosts")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	hosts, c, err := GenerateHosts(g, a.site.Site, a.site.Pool, func(name string) string {
		p, _ := filepath.Abs(filepath.Join(dir, name+".xml"))
		return p
	})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	for _, h := range hosts {
		if !strings.HasPrefix(h.URI, "test://") {
			continue
		}
		x, err := domxml.Node{CPUs: c.Cores, MemoryMiB: c.MemoryMiB}.XML()
		if err != nil {
			return nil, fmt.Errorf("agent: host %s: %w", h.Name, err)
		}
		if err := os.WriteFile(strings.TrimPrefix(h.URI, "test://"), []byte(x), 0o644); err != nil {
			return nil, fmt.Errorf("agent: host %s: %w", h.Name, err)
		}
	}
	return hosts, nil
}

// Site returns the name of the site.
func (a *Agent) Site() string { return a.site.Site }

// Close closes every host connection and removes the temporary directory.
func (a *Agent) Close() error {
	a.mu.Lock()
	var errs []error
	for _, h := range a.hosts {
		if h.hv != nil {
			errs = append(errs, h.hv.Close())
			h.hv = nil
		}
	}
	a.mu.Unlock()
	if a.tmpDir != "" {
		errs = append(errs, os.RemoveAll(a.tmpDir))
	}
	return errors.Join(errs...)
}

func (a *Agent) host(name string) *host {
	for _, h := range a.hosts {
		if h.cfg.Name == name {
			return h
		}
	}
	return nil
}

// dial connects a host that has no connection (again).
func (a *Agent) dial(ctx context.Context, h *host) {
	a.mu.Lock()
	if h.hv != nil {
		a.mu.Unlock()
		return
	}
	a.mu.Unlock()
	name := h.cfg.Name
	hv, err := a.connect(ctx, h.cfg.URI, func() { a.restore(name) })
	var node Node
	if err == nil {
		if node, err = hv.Node(ctx); err != nil {
			hv.Close()
		}
	}
	a.mu.Lock()
	if err != nil {
		h.err = err
		a.mu.Unlock()
		a.log.Warn().Err(err).Str("host", name).Msg("host unreachable")
		return
	}
	if h.hv != nil { // connected meanwhile
		a.mu.Unlock()
		hv.Close()
		return
	}
	h.hv, h.err, h.node = hv, nil, node
	a.mu.Unlock()
	a.log.Info().Str("host", name).Str("uri", h.cfg.URI).Int("cpus", node.CPUs).Int("memory_mib", node.MemoryMiB).Msg("host connected")
	a.restore(name)
}

// restore recreates the recorded VMs a test host does not have: such a
// host keeps no state across reconnects and restarts. On a real host a
// missing VM is reported as missing, not recreated.
func (a *Agent) restore(name string) {
	a.mu.Lock()
	h := a.host(name)
	if h == nil || h.hv == nil || !h.test {
		a.mu.Unlock()
		return
	}
	hv := h.hv
	var want []VMSpec
	for _, v := range a.vms {
		if v.spec.Host == name && v.busy == "" {
			want = append(want, v.spec)
		}
	}
	a.mu.Unlock()
	if len(want) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	doms, err := hv.Domains(ctx)
	if err != nil {
		a.log.Warn().Err(err).Str("host", name).Msg("restore: list vms")
		return
	}
	slices.SortFunc(want, func(x, y VMSpec) int { return strings.Compare(x.Name, y.Name) })
	for _, s := range want {
		if slices.ContainsFunc(doms, func(d Domain) bool { return d.Name == s.Name }) {
			continue
		}
		if _, err := hv.Create(ctx, s); err != nil && !errors.Is(err, ErrExists) {
			a.log.Error().Err(err).Str("host", name).Str("vm", s.Name).Msg("restore: recreate vm")
			continue
		}
		a.log.Info().Str("host", name).Str("vm", s.Name).Str("job", s.Job).Msg("recreated vm from the record")
	}
}

// saveLocked writes the record; a.mu must be held.
func (a *Agent) saveLocked() error {
	r := &record{Pools: map[string]string{}}
	for _, v := range a.vms {
		r.VMs = append(r.VMs, v.spec)
	}
	for _, h := range a.hosts {
		r.Pools[h.cfg.Name] = h.pool
	}
	if err := r.save(a.dataDir); err != nil {
		a.log.Error().Err(err).Msg("save record")
		return err
	}
	return nil
}

// hostState is one host as the agent sees it at a moment.
type hostState struct {
	h    *host
	doms []Domain
	err  error
}

// observe reads the domains of the named hosts (all when names is empty),
// reconnecting hosts that were unreachable.
func (a *Agent) observe(ctx context.Context, names ...string) []hostState {
	var out []hostState
	for _, h := range a.hosts {
		if len(names) > 0 && !slices.Contains(names, h.cfg.Name) {
			continue
		}
		a.dial(ctx, h)
		a.mu.Lock()
		hv, herr := h.hv, h.err
		a.mu.Unlock()
		st := hostState{h: h, err: herr}
		if hv != nil {
			st.doms, st.err = hv.Domains(ctx)
			if errors.Is(st.err, ErrConnLost) {
				a.mu.Lock()
				if h.hv == hv {
					h.hv, h.err = nil, st.err
				}
				a.mu.Unlock()
				hv.Close()
			}
		}
		out = append(out, st)
	}
	return out
}

// usageLocked is what a host's VMs take: the managed VMs of the record
// (a VM being migrated counts on both hosts) and the running domains the
// agent does not manage. a.mu must be held.
func (a *Agent) usageLocked(st hostState) (vcpus, mib int) {
	name := st.h.cfg.Name
	for _, v := range a.vms {
		if v.spec.Host == name || v.moving == name {
			vcpus += v.spec.VCPUs
			mib += v.spec.MemoryMiB
		}
	}
	for _, d := range st.doms {
		if _, ok := a.vms[d.Name]; ok || (d.State != StateRunning && d.State != StatePaused) {
			continue
		}
		vcpus += d.VCPUs
		mib += d.MemoryMiB
	}
	return vcpus, mib
}

// freeLocked is what a host has left: its CPUs and memory less usageLocked.
// a.mu must be held.
func (a *Agent) freeLocked(st hostState) (vcpus, mib int) {
	usedC, usedM := a.usageLocked(st)
	return st.h.node.CPUs - usedC, st.h.node.MemoryMiB - usedM
}

// hostLocked builds the API view of a host. a.mu must be held.
func (a *Agent) hostLocked(st hostState) Host {
	h := st.h
	out := Host{Name: h.cfg.Name, URI: h.cfg.URI, Pool: h.pool, State: HostReady, VMs: []VM{},
		Model: h.node.Model, CPUs: h.node.CPUs, MemoryMiB: h.node.MemoryMiB}
	if h.switching {
		out.State = HostSwitching
	}
	if st.err != nil {
		out.State, out.Error = HostUnreachable, st.err.Error()
	}
	live := map[string]Domain{}
	for _, d := range st.doms {
		live[d.Name] = d
		if _, ok := a.vms[d.Name]; !ok {
			out.VMs = append(out.VMs, VM{Name: d.Name, Host: h.cfg.Name, Pool: d.Pool, Job: d.Job, State: d.State,
				VCPUs: d.VCPUs, MaxVCPUs: d.MaxVCPUs, MemoryMiB: d.MemoryMiB, MaxMemoryMiB: d.MaxMemoryMiB})
		}
	}
	for _, v := range a.vms {
		if v.spec.Host != h.cfg.Name {
			continue
		}
		out.VMs = append(out.VMs, a.vmLocked(v, live))
	}
	slices.SortFunc(out.VMs, func(x, y VM) int { return strings.Compare(x.Name, y.Name) })
	out.FreeVCPUs, out.FreeMemoryMiB = a.freeLocked(st)
	return out
}

// vmLocked is the API view of a managed VM, with the live figures of its
// domain when the host reports it.
func (a *Agent) vmLocked(v *vm, live map[string]Domain) VM {
	s := v.spec
	out := VM{Name: s.Name, Host: s.Host, Pool: s.Pool, Job: s.Job, State: StateMissing, Managed: true,
		VCPUs: s.VCPUs, MaxVCPUs: s.MaxVCPUs, MemoryMiB: s.MemoryMiB, MaxMemoryMiB: s.MaxMemoryMiB}
	if v.busy == "create" {
		out.State = StateBuilding
	}
	if d, ok := live[s.Name]; ok {
		out.State, out.VCPUs, out.MaxVCPUs, out.MemoryMiB, out.MaxMemoryMiB = d.State, d.VCPUs, d.MaxVCPUs, d.MemoryMiB, d.MaxMemoryMiB
	}
	return out
}

// Inventory reports every host of the site and every VM on them.
func (a *Agent) Inventory(ctx context.Context) (Inventory, error) {
	sts := a.observe(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	inv := Inventory{Site: a.site.Site, At: a.now().UTC(), Hosts: make([]Host, len(sts))}
	for i, st := range sts {
		inv.Hosts[i] = a.hostLocked(st)
	}
	return inv, ctx.Err()
}

// VM reports one managed VM.
func (a *Agent) VM(ctx context.Context, name string) (VM, error) {
	a.mu.Lock()
	v, ok := a.vms[name]
	if !ok {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("vm %q: %w", name, ErrNotFound)
	}
	hostName := v.spec.Host
	a.mu.Unlock()
	sts := a.observe(ctx, hostName)
	a.mu.Lock()
	defer a.mu.Unlock()
	if v, ok = a.vms[name]; !ok {
		return VM{}, fmt.Errorf("vm %q: %w", name, ErrNotFound)
	}
	live := map[string]Domain{}
	for _, d := range sts[0].doms {
		live[d.Name] = d
	}
	return a.vmLocked(v, live), nil
}

// opLog starts the log line of a VM operation.
func (a *Agent) opLog(op string, s VMSpec) zerolog.Logger {
	return a.log.With().Str("op", op).Str("vm", s.Name).Str("host", s.Host).Str("job", s.Job).Logger()
}

func done(l zerolog.Logger, start time.Time, err error, msg string) {
	ev := l.Info()
	if err != nil {
		ev = l.Warn().Err(err)
	}
	ev.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000).Msg(msg)
}

func (a *Agent) domainType(h *host) string {
	if h.test {
		return "test"
	}
	return "qemu"
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
	if err := (domxml.Domain{Type: a.domainType(h), Name: spec.Name, VCPUs: spec.VCPUs, MaxVCPUs: spec.MaxVCPUs,
		MemoryMiB: spec.MemoryMiB, MaxMemoryMiB: spec.MaxMemoryMiB, Job: spec.Job, Pool: spec.Pool}).Validate(); err != nil {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("create vm %s: %w: %w", spec.Name, ErrInvalid, err)
	}
	v := &vm{spec: spec, busy: "create"}
	a.vms[spec.Name] = v
	hv := h.hv
	a.mu.Unlock()

	l := a.opLog("create", spec)
	start := time.Now()
	d, err := hv.Create(ctx, spec)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		delete(a.vms, spec.Name)
		done(l, start, err, "create vm failed")
		return VM{}, fmt.Errorf("create vm %s on %s: %w", spec.Name, spec.Host, err)
	}
	v.busy = ""
	v.spec.VCPUs, v.spec.MemoryMiB = d.VCPUs, d.MemoryMiB
	a.saveLocked()
	done(l.With().Int("vcpus", d.VCPUs).Int("memory_mib", d.MemoryMiB).Logger(), start, nil, "vm created")
	return a.vmLocked(v, map[string]Domain{d.Name: d}), nil
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
	if s.MaxMemoryMiB < s.MemoryMiB && s.MemoryMiB >= 1 {
		bad("max_memory_mib: must be >= memory_mib (%d), not %d", s.MemoryMiB, s.MaxMemoryMiB)
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalid, errors.Join(errs...))
	}
	return nil
}

// placeLocked picks the host of a new VM among sts. a.mu must be held.
func (a *Agent) placeLocked(spec VMSpec, sts []hostState) (hostState, error) {
	var best hostState
	bestFree := -1
	var why []string
	for _, st := range sts {
		h := st.h
		switch {
		case st.err != nil || h.hv == nil:
			why = append(why, fmt.Sprintf("%s unreachable", h.cfg.Name))
			if spec.Host != "" {
				return st, fmt.Errorf("host %s: %w", h.cfg.Name, errors.Join(ErrConnLost, st.err))
			}
			continue
		case h.switching:
			why = append(why, fmt.Sprintf("%s switching pools", h.cfg.Name))
			if spec.Host != "" {
				return st, fmt.Errorf("host %s is being reconfigured for another pool: %w", h.cfg.Name, ErrBusy)
			}
			continue
		case spec.Pool != "" && h.pool != spec.Pool:
			why = append(why, fmt.Sprintf("%s in pool %q", h.cfg.Name, h.pool))
			if spec.Host != "" {
				return st, fmt.Errorf("pool: %w: host %s is in pool %q, not %q", ErrInvalid, h.cfg.Name, h.pool, spec.Pool)
			}
			continue
		}
		freeC, freeM := a.freeLocked(st)
		if spec.VCPUs > freeC || spec.MemoryMiB > freeM {
			why = append(why, fmt.Sprintf("%s has %d vcpus and %d MiB free", h.cfg.Name, freeC, freeM))
			continue
		}
		if freeC > bestFree {
			best, bestFree = st, freeC
		}
	}
	if bestFree < 0 {
		if len(sts) == 0 {
			return best, fmt.Errorf("%w: the site has no hosts", ErrCapacity)
		}
		return best, fmt.Errorf("%w for %d vcpus and %d MiB: %s", ErrCapacity, spec.VCPUs, spec.MemoryMiB, strings.Join(why, "; "))
	}
	return best, nil
}

// acquire marks a managed VM busy with op and returns its spec and host.
func (a *Agent) acquire(name, op string) (*vm, *host, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.vms[name]
	if !ok {
		return nil, nil, fmt.Errorf("%s vm %s: %w", op, name, ErrNotFound)
	}
	if v.busy != "" {
		return nil, nil, fmt.Errorf("%s vm %s: %w: %s in progress", op, name, ErrBusy, v.busy)
	}
	h := a.host(v.spec.Host)
	if h.hv == nil {
		return nil, nil, fmt.Errorf("%s vm %s: host %s: %w", op, name, h.cfg.Name, errors.Join(ErrConnLost, h.err))
	}
	v.busy = op
	return v, h, nil
}

func (a *Agent) release(v *vm) {
	a.mu.Lock()
	v.busy, v.moving = "", ""
	a.saveLocked()
	a.mu.Unlock()
}

// ResizeVM changes a VM's vCPUs and memory live, within its maxima and the
// host's free capacity, and reports the sizes read back. On a failure the
// VM keeps the sizes it has (read back where the hypervisor allows).
func (a *Agent) ResizeVM(ctx context.Context, name string, r Resize) (VM, error) {
	var errs []error
	if r.VCPUs < 0 {
		errs = append(errs, fmt.Errorf("vcpus: must be >= 1, not %d", r.VCPUs))
	}
	if r.MemoryMiB < 0 {
		errs = append(errs, fmt.Errorf("memory_mib: must be >= 1, not %d", r.MemoryMiB))
	}
	if r.VCPUs == 0 && r.MemoryMiB == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("vcpus, memory_mib: give at least one"))
	}
	if len(errs) > 0 {
		return VM{}, fmt.Errorf("resize vm %s: %w: %w", name, ErrInvalid, errors.Join(errs...))
	}
	v, h, err := a.acquire(name, "resize")
	if err != nil {
		return VM{}, err
	}
	defer a.release(v)
	a.mu.Lock()
	s := v.spec
	a.mu.Unlock()
	if r.VCPUs > s.MaxVCPUs || r.MemoryMiB > s.MaxMemoryMiB {
		return VM{}, fmt.Errorf("resize vm %s to %d vcpus, %d MiB: %w (max_vcpus %d, max_memory_mib %d)",
			name, r.VCPUs, r.MemoryMiB, ErrLimit, s.MaxVCPUs, s.MaxMemoryMiB)
	}
	sts := a.observe(ctx, h.cfg.Name)
	a.mu.Lock()
	freeC, freeM := a.freeLocked(sts[0])
	growC, growM := max(r.VCPUs-s.VCPUs, 0), max(r.MemoryMiB-s.MemoryMiB, 0) // 0 leaves a size as it is
	if growC > freeC || growM > freeM {
		a.mu.Unlock()
		return VM{}, fmt.Errorf("resize vm %s: %w on %s: %d more vcpus and %d MiB asked, %d and %d free",
			name, ErrCapacity, h.cfg.Name, growC, growM, freeC, freeM)
	}
	// Reserve the growth while the hypervisor works.
	v.spec.VCPUs += growC
	v.spec.MemoryMiB += growM
	hv := h.hv
	a.mu.Unlock()

	l := a.opLog("resize", s)
	start := time.Now()
	var d Domain
	if r.VCPUs != 0 {
		d, err = hv.SetVCPUs(ctx, name, r.VCPUs)
	}
	if err == nil && r.MemoryMiB != 0 {
		d, err = hv.SetMemory(ctx, name, r.MemoryMiB)
	}
	a.mu.Lock()
	if d.Name == name {
		v.spec.VCPUs, v.spec.MemoryMiB = d.VCPUs, d.MemoryMiB
	} else {
		v.spec.VCPUs, v.spec.MemoryMiB = s.VCPUs, s.MemoryMiB
	}
	out := a.vmLocked(v, map[string]Domain{d.Name: d})
	a.mu.Unlock()
	done(l.With().Int("vcpus", out.VCPUs).Int("memory_mib", out.MemoryMiB).Logger(), start, err, "vm resized")
	if err != nil {
		return out, fmt.Errorf("resize vm %s: %w", name, err)
	}
	return out, nil
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
	done(l, start, err, "vm destroyed")
	if err != nil {
		a.release(v)
		return fmt.Errorf("destroy vm %s: %w", name, err)
	}
	a.mu.Lock()
	delete(a.vms, name)
	a.saveLocked()
	a.mu.Unlock()
	return nil
}

// MigrateVM moves a VM to another host of the site, of the same pool and
// with room for it: live between QEMU hosts (over tcp://ADDR:PORT with a
// port of the site's migration_ports), a cold move between test hosts.
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
		cerr = fmt.Errorf("host: %w: %s is in pool %q, the vm in %q", ErrInvalid, dst.cfg.Name, dst.pool, s.Pool)
	}
	if cerr == nil {
		if freeC, freeM := a.freeLocked(sts[0]); s.VCPUs > freeC || s.MemoryMiB > freeM {
			cerr = fmt.Errorf("%w on %s for %d vcpus and %d MiB: %d and %d free", ErrCapacity, dst.cfg.Name, s.VCPUs, s.MemoryMiB, freeC, freeM)
		}
	}
	port := 0
	if cerr == nil {
		if port, cerr = a.portLocked(); cerr == nil {
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
		delete(a.ports, port)
		a.mu.Unlock()
	}()

	uri := fmt.Sprintf("tcp://%s:%d", dst.cfg.migrationAddress(), port)
	l := a.opLog("migrate", s).With().Str("to", dst.cfg.Name).Str("uri", uri).Logger()
	start := time.Now()
	st, err := srcHV.Migrate(ctx, name, dstHV, MigrateOptions{URI: uri, ProgressTimeout: a.site.MigrationProgressTimeout})
	if err != nil {
		done(l, start, err, "vm migration failed")
		return Migration{}, fmt.Errorf("migrate vm %s to %s: %w", name, dst.cfg.Name, err)
	}
	a.mu.Lock()
	v.spec.Host = dst.cfg.Name
	a.saveLocked()
	a.mu.Unlock()
	done(l.With().Bool("live", st.Live).Logger(), start, nil, "vm migrated")
	out := Migration{From: src.cfg.Name, To: dst.cfg.Name, Live: st.Live, Seconds: st.Duration.Seconds(),
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

// portLocked takes a free migration port. a.mu must be held.
func (a *Agent) portLocked() (int, error) {
	for p := a.site.MigrationPorts[0]; p <= a.site.MigrationPorts[1]; p++ {
		if !a.ports[p] {
			a.ports[p] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("%w: every migration port (%d-%d) is in use", ErrBusy, a.site.MigrationPorts[0], a.site.MigrationPorts[1])
}

// ReconfigureHost moves a host to another pool (docs/design.md, "The switch
// protocol"): refused while the host runs a VM of a job the coordinator has
// not released; otherwise the old pool's VMs on it are destroyed, the host's
// pool label is set, and the site's switch_delay (emulating a reimage) passes
// before the call returns. The host takes no new VMs meanwhile.
func (a *Agent) ReconfigureHost(ctx context.Context, name string, r Reconfigure) (Reconfigured, error) {
	if r.Pool == "" {
		return Reconfigured{}, fmt.Errorf("reconfigure host %s: %w: pool: is required", name, ErrInvalid)
	}
	a.mu.Lock()
	h := a.host(name)
	if h == nil {
		a.mu.Unlock()
		return Reconfigured{}, fmt.Errorf("reconfigure host %q: %w in site %s", name, ErrNotFound, a.site.Site)
	}
	from := h.pool
	var cerr error
	var victims []*vm
	switch {
	case h.switching:
		cerr = fmt.Errorf("%w: a reconfiguration is in progress", ErrBusy)
	case r.ExpectPool != "" && r.ExpectPool != h.pool:
		cerr = fmt.Errorf("expect_pool: %w: the host is in pool %q, not %q", ErrBusy, h.pool, r.ExpectPool)
	case h.hv == nil:
		cerr = errors.Join(ErrConnLost, h.err)
	}
	if cerr == nil {
		var held []string
		for _, v := range a.vms {
			if v.spec.Host != name && v.moving != name {
				continue
			}
			if v.busy != "" || v.moving == name || (v.spec.Job != "" && !slices.Contains(r.Released, v.spec.Job)) {
				held = append(held, fmt.Sprintf("%s (job %q)", v.spec.Name, v.spec.Job))
				continue
			}
			victims = append(victims, v)
		}
		if len(held) > 0 {
			slices.Sort(held)
			cerr = fmt.Errorf("%w: it runs vms of jobs not released: %s", ErrBusy, strings.Join(held, ", "))
		}
	}
	if cerr != nil {
		a.mu.Unlock()
		return Reconfigured{}, fmt.Errorf("reconfigure host %s for pool %s: %w", name, r.Pool, cerr)
	}
	h.switching = true
	for _, v := range victims {
		v.busy = "destroy"
	}
	hv := h.hv
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		h.switching = false
		a.mu.Unlock()
	}()

	l := a.log.With().Str("op", "reconfigure").Str("host", name).Str("from", from).Str("to", r.Pool).Logger()
	start := time.Now()
	slices.SortFunc(victims, func(x, y *vm) int { return strings.Compare(x.spec.Name, y.spec.Name) })
	var destroyed []string
	for _, v := range victims {
		err := hv.Destroy(ctx, v.spec.Name)
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		a.mu.Lock()
		if err != nil {
			for _, w := range victims {
				if w.busy == "destroy" {
					w.busy = ""
				}
			}
			a.saveLocked()
			a.mu.Unlock()
			done(l, start, err, "reconfiguration failed")
			return Reconfigured{}, fmt.Errorf("reconfigure host %s: destroy vm %s: %w", name, v.spec.Name, err)
		}
		delete(a.vms, v.spec.Name)
		a.mu.Unlock()
		destroyed = append(destroyed, v.spec.Name)
	}
	a.mu.Lock()
	h.pool = r.Pool
	a.saveLocked()
	a.mu.Unlock()
	if d := a.site.SwitchDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			done(l, start, ctx.Err(), "reconfiguration interrupted")
			return Reconfigured{}, fmt.Errorf("reconfigure host %s: %w (the pool label is %s already)", name, ctx.Err(), r.Pool)
		case <-t.C:
		}
	}
	done(l.With().Strs("destroyed", destroyed).Logger(), start, nil, "host reconfigured")
	a.mu.Lock()
	h.switching = false
	a.mu.Unlock()
	sts := a.observe(ctx, name)
	a.mu.Lock()
	defer a.mu.Unlock()
	if destroyed == nil {
		destroyed = []string{}
	}
	return Reconfigured{Host: a.hostLocked(sts[0]), From: from, Destroyed: destroyed, Seconds: time.Since(start).Seconds()}, nil
}
