package hypervisorproxy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/metasched/metasched/hypervisorproxy/cloudinit"
)

// hostLocked builds the API view of a host. a.mu must be held.
func (a *Agent) hostLocked(st hostState) Host { return a.hostOf(st, a.vmsOnLocked(st.h.cfg.Name)) }

// hostOf is hostLocked with the managed VMs that take room on the host
// (vmsOnLocked). a.mu must be held.
func (a *Agent) hostOf(st hostState, on []*vm) Host {
	h := st.h
	out := Host{Name: h.cfg.Name, URI: h.cfg.URI, Pool: h.pool, State: HostReady, VMs: []VM{},
		Model: h.node.Model, CPUs: h.node.CPUs, MemoryMiB: h.node.MemoryMiB,
		// The test driver unplugs vCPUs; QEMU refuses to unplug those of
		// its qemu64 guests (virt.Host.SetVCPUs: ErrUnsupported).
		VCPUUnplug: h.test}
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
				VCPUs: d.VCPUs, MaxVCPUs: d.MaxVCPUs, MemoryMiB: d.MemoryMiB, MaxMemoryMiB: d.MaxMemoryMiB, CPUQuota: d.CPUQuota})
		}
	}
	for _, v := range on {
		if v.spec.Host != h.cfg.Name {
			continue // migrating to it: listed on its source
		}
		out.VMs = append(out.VMs, a.vmLocked(v, live))
	}
	slices.SortFunc(out.VMs, func(x, y VM) int { return strings.Compare(x.Name, y.Name) })
	out.FreeVCPUs, out.FreeMemoryMiB = a.freeOf(st, on)
	return out
}

// vmLocked is the API view of a managed VM, with the live figures of its
// domain when the host reports it. a.mu must be held.
func (a *Agent) vmLocked(v *vm, live map[string]Domain) VM {
	s := v.spec
	out := VM{Name: s.Name, Host: s.Host, Pool: s.Pool, Job: s.Job, State: StateMissing, Managed: true,
		VCPUs: s.VCPUs, MaxVCPUs: s.MaxVCPUs, MemoryMiB: s.MemoryMiB, MaxMemoryMiB: s.MaxMemoryMiB,
		BootSeconds: v.boot.Seconds(), AgentSeconds: v.agent.Seconds()}
	if img := a.images[s.Image]; img != nil && img.CloudInit() && v.boot > 0 {
		out.User = cloudinit.User
	}
	if pfx := a.prefix(v.addr); pfx.IsValid() {
		out.Address = pfx.String()
	}
	if a.site.Slurm != nil { // a site's hosts are all of one kind
		out.Kind = KindSlurm
	}
	switch {
	case v.busy == "create":
		out.State = StateBuilding
	case v.moving != "":
		out.State = StateMigrating // unless its source still has it, below
	}
	if d, ok := live[s.Name]; ok {
		out.State, out.VCPUs, out.MaxVCPUs, out.MemoryMiB, out.MaxMemoryMiB = d.State, d.VCPUs, d.MaxVCPUs, d.MemoryMiB, d.MaxMemoryMiB
		out.CPUQuota = d.CPUQuota
		if out.Address == "" {
			out.Address = d.Address
		}
	}
	return out
}

// Inventory reports every host of the site and every VM on them.
func (a *Agent) Inventory(ctx context.Context) (Inventory, error) {
	sts := a.observe(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	inv := Inventory{Site: a.site.Site, At: a.now().UTC(), Hosts: make([]Host, len(sts))}
	on := a.vmsByHostLocked() // one pass over the VMs, not one per host
	for i, st := range sts {
		inv.Hosts[i] = a.hostOf(st, on[st.h.cfg.Name])
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
