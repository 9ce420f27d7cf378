package hypervisorproxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// host is one host of the site and the agent's connection to it.
type host struct {
	cfg       SiteHost
	hv        Hypervisor // nil while unreachable
	err       error      // why it is unreachable
	node      Node
	pool      string
	switching bool
	test      bool // a test-driver or simulated host: it keeps no state across restarts, boots no image, takes no limits
	slurm     bool // a Slurm node: its jobs run on its own system, so it boots no image
	// warned is when the agent last logged the host unreachable, and
	// failed the attempts since (a repeated fault is logged once, then
	// only when it changes or every unreachableLogEvery, with a count).
	warned time.Time
	failed int
}

// unreachableLogEvery is how often a host that stays unreachable for the
// same reason is logged again.
const unreachableLogEvery = 5 * time.Minute

// host returns the host of that name, or nil. The list of hosts does not
// change after New.
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
		if node, err = hv.Node(ctx); err == nil {
			node, err = h.cfg.share(node)
		}
		if err != nil {
			hv.Close()
		}
	}
	a.mu.Lock()
	if err != nil {
		same := h.err != nil && h.err.Error() == err.Error()
		h.err = err
		h.failed++
		now := a.now()
		if same && now.Sub(h.warned) < unreachableLogEvery {
			a.mu.Unlock()
			return
		}
		failed := h.failed
		h.warned, h.failed = now, 0
		a.mu.Unlock()
		a.log.Warn().Err(err).Str("host", name).Int("attempts", failed).Msg("host unreachable")
		return
	}
	if h.hv != nil { // connected meanwhile
		a.mu.Unlock()
		hv.Close()
		return
	}
	h.hv, h.err, h.node, h.warned, h.failed = hv, nil, node, time.Time{}, 0
	a.mu.Unlock()
	a.log.Info().Str("host", name).Str("uri", h.cfg.URI).Int("cpus", node.CPUs).Int("memory_mib", node.MemoryMiB).Msg("host connected")
	a.restore(name)
}

// keepPool holds a host whose hypervisor keeps its pool (PoolHypervisor)
// in the pool the agent holds: a host the agent holds in no pool takes
// the hypervisor's; one the hypervisor has elsewhere (Slurm forgot a
// partition change at a restart or a reconfigure) is put back. A host
// switching pools is left to its switch.
func (a *Agent) keepPool(ctx context.Context, h *host, hv Hypervisor) {
	ph, ok := hv.(PoolHypervisor)
	if !ok {
		return
	}
	have, err := ph.Pool(ctx)
	if err != nil {
		return // the host's look at its domains says why
	}
	a.mu.Lock()
	want, switching := h.pool, h.switching
	if want == "" && have != "" && !switching {
		h.pool = have
		a.saveAndUnlock()
		a.log.Info().Str("host", h.cfg.Name).Str("pool", have).Msg("host in its hypervisor's pool")
		return
	}
	if switching || want == "" || want == have {
		a.mu.Unlock()
		return
	}
	h.switching = true // no reconfiguration meanwhile
	a.mu.Unlock()
	err = ph.SetPool(ctx, have, want)
	a.mu.Lock()
	h.switching = false
	a.mu.Unlock()
	l := a.log.With().Str("host", h.cfg.Name).Str("pool", want).Str("hypervisor_pool", have).Logger()
	if err != nil {
		l.Warn().Err(err).Msg("host not put back in its pool")
		return
	}
	l.Info().Msg("host put back in its pool: its hypervisor had lost it")
}

// share is the part of a host's node that its site file gives the agent's
// VMs (cpus, memory_mib); more than the host has is an error.
func (c SiteHost) share(n Node) (Node, error) {
	if c.CPUs > n.CPUs {
		return n, fmt.Errorf("%w: cpus: the site file gives the VMs %d CPUs of host %s, which has %d", ErrInvalid, c.CPUs, c.Name, n.CPUs)
	}
	if c.MemoryMiB > n.MemoryMiB {
		return n, fmt.Errorf("%w: memory_mib: the site file gives the VMs %d MiB of host %s, which has %d", ErrInvalid, c.MemoryMiB, c.Name, n.MemoryMiB)
	}
	if c.CPUs > 0 {
		n.CPUs = c.CPUs
	}
	if c.MemoryMiB > 0 {
		n.MemoryMiB = c.MemoryMiB
	}
	return n, nil
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
		if _, err := hv.Create(ctx, s, VMLimits{}); err != nil && !errors.Is(err, ErrExists) { // a test host: no limits
			a.log.Error().Err(err).Str("host", name).Str("vm", s.Name).Msg("restore: recreate vm")
			continue
		}
		a.log.Info().Str("host", name).Str("vm", s.Name).Str("job", s.Job).Msg("recreated vm from the record")
	}
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
			a.keepPool(ctx, h, hv)
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
