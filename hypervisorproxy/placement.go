package hypervisorproxy

import (
	"errors"
	"fmt"
	"strings"
)

// usageOf is what a host's VMs take: the managed VMs that take room on it
// (on, from vmsOnLocked: a VM being migrated counts on both hosts) and the
// running domains the agent does not manage. a.mu must be held.
func (a *Agent) usageOf(st hostState, on []*vm) (vcpus, mib int) {
	for _, v := range on {
		vcpus += v.spec.VCPUs
		mib += v.spec.MemoryMiB
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

// vmsOnLocked lists the managed VMs that take room on the host: those on
// it, and those migrating to it. a.mu must be held.
func (a *Agent) vmsOnLocked(host string) []*vm {
	var out []*vm
	for _, v := range a.vms {
		if v.spec.Host == host || v.moving == host {
			out = append(out, v)
		}
	}
	return out
}

// vmsByHostLocked is vmsOnLocked for every host at once, in one pass over
// the VMs. a.mu must be held.
func (a *Agent) vmsByHostLocked() map[string][]*vm {
	out := make(map[string][]*vm, len(a.hosts))
	for _, v := range a.vms {
		out[v.spec.Host] = append(out[v.spec.Host], v)
		if v.moving != "" && v.moving != v.spec.Host {
			out[v.moving] = append(out[v.moving], v)
		}
	}
	return out
}

// freeLocked is what a host has left: its CPUs and memory less usageOf.
// a.mu must be held.
func (a *Agent) freeLocked(st hostState) (vcpus, mib int) {
	return a.freeOf(st, a.vmsOnLocked(st.h.cfg.Name))
}

// freeOf is freeLocked with the managed VMs that take room on the host
// given. a.mu must be held.
func (a *Agent) freeOf(st hostState, on []*vm) (vcpus, mib int) {
	usedC, usedM := a.usageOf(st, on)
	return st.h.node.CPUs - usedC, st.h.node.MemoryMiB - usedM
}

// placeLocked picks the host of a new VM among sts. a.mu must be held.
func (a *Agent) placeLocked(spec VMSpec, sts []hostState) (hostState, error) {
	var best hostState
	var on map[string][]*vm
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
				return st, fmt.Errorf("pool: %w: host %s is in pool %q, not %q", ErrWrongPool, h.cfg.Name, h.pool, spec.Pool)
			}
			continue
		}
		if on == nil {
			on = a.vmsByHostLocked() // one pass over the VMs for all the hosts
		}
		freeC, freeM := a.freeOf(st, on[h.cfg.Name])
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
