package hypervisorproxy

import (
	"errors"
	"fmt"
	"strings"
)

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
				return st, fmt.Errorf("pool: %w: host %s is in pool %q, not %q", ErrWrongPool, h.cfg.Name, h.pool, spec.Pool)
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
