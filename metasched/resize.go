package metasched

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/capacity"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/wire"
)

// Resizing a job's VM live (POST /v1/jobs/{id}/vms/{vm}/resize): through
// the agent of the VM's site, in process or remote, within the VM's
// maxima (its size plus vm_headroom) and its host's free capacity. What
// the hypervisor cannot do (QEMU does not unplug vCPUs) is refused by the
// agent and reported as it says it.

// ResizeVM changes the current vCPUs and memory of a VM of a provisioning
// or running job. A growth that the VM's host has no room for is refused
// before the agent is asked, naming the host's free vCPUs and memory; the
// growth is promised on the host while the agent works, so that no plan
// takes it meanwhile. Afterwards the daemon reads the inventories again:
// its view of the host's capacity follows the VM's new size.
func (d *Daemon) ResizeVM(ctx context.Context, jobID, vmName string, r api.ResizeRequest) (_ api.VM, err error) {
	defer apiError(&err)
	var fields []api.FieldError
	if r.VCPUs < 0 {
		fields = append(fields, api.FieldError{Field: "vcpus", Problem: fmt.Sprintf("must be >= 1, not %d", r.VCPUs)})
	}
	if r.MemoryMiB < 0 {
		fields = append(fields, api.FieldError{Field: "memory_mib", Problem: fmt.Sprintf("must be >= 1, not %d", r.MemoryMiB)})
	}
	if r.VCPUs == 0 && r.MemoryMiB == 0 && len(fields) == 0 {
		fields = append(fields, api.FieldError{Field: "vcpus", Problem: "give vcpus or memory_mib (or both)"})
	}
	if len(fields) > 0 {
		return api.VM{}, &api.RequestError{Status: 400, Code: api.CodeInvalid, Msg: "invalid resize", Fields: fields}
	}
	sj, err := d.st.Job(ctx, jobID)
	if err != nil {
		return api.VM{}, notFoundJob(jobID, err)
	}
	conflict := func(format string, args ...any) (api.VM, error) {
		return api.VM{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf(format, args...)}
	}
	d.lockR()
	j := d.jobs.live[jobID]
	if j == nil || (j.job.State != lifecycle.Provisioning && j.job.State != lifecycle.Running) {
		state := sj.State
		if j != nil {
			state = j.job.State
		}
		d.unlockR()
		return conflict("job %s is %s: only the VMs of a provisioning or running job can be resized", jobID, state)
	}
	i := slices.IndexFunc(j.job.Record.VMs, func(v lifecycle.VM) bool { return v.Name == vmName })
	if i < 0 {
		names := make([]string, len(j.job.Record.VMs))
		for k, v := range j.job.Record.VMs {
			names[k] = v.Name
		}
		d.unlockR()
		return api.VM{}, &api.RequestError{Status: 404, Code: api.CodeNotFound,
			Msg: fmt.Sprintf("job %s has no VM %q (its VMs: %s)", jobID, vmName, strings.Join(names, ", "))}
	}
	rec := j.job.Record.VMs[i]
	h := d.hv.hosts[rec.Host]
	var cur hp.VM
	found := false
	if h != nil {
		for _, v := range h.inv.VMs {
			if v.Name == vmName {
				cur, found = v, true
			}
		}
	}
	if !found {
		d.unlockR()
		return conflict("VM %s of job %s is not on its host %s yet (being created or moved): try again", vmName, jobID, rec.Host)
	}
	if r.VCPUs > cur.MaxVCPUs {
		fields = append(fields, api.FieldError{Field: "vcpus", Problem: fmt.Sprintf("%d is beyond the VM's maximum of %d vCPUs (its size plus vm_headroom.vcpus)", r.VCPUs, cur.MaxVCPUs)})
	}
	if r.MemoryMiB > cur.MaxMemoryMiB {
		fields = append(fields, api.FieldError{Field: "memory_mib", Problem: fmt.Sprintf("%d is beyond the VM's maximum of %d MiB (its size plus vm_headroom.memory_mib)", r.MemoryMiB, cur.MaxMemoryMiB)})
	}
	if len(fields) > 0 {
		d.unlockR()
		return api.VM{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("VM %s cannot grow that far", vmName), Fields: fields}
	}
	growC, growM := max(r.VCPUs-cur.VCPUs, 0), max(r.MemoryMiB-cur.MemoryMiB, 0)
	p := d.ledger.On(h.name)
	freeC, freeM := h.inv.FreeVCPUs-p.VCPUs, h.inv.FreeMemoryMiB-p.MemoryMiB
	if growC > freeC || growM > freeM {
		d.unlockR()
		return conflict("host %s has %d vCPUs and %d MiB free: VM %s cannot grow by %d vCPUs and %d MiB there", h.name, freeC, freeM, vmName, growC, growM)
	}
	s := d.site(rec.Site)
	hold := lifecycle.VM{Name: "resize:" + vmName, Site: rec.Site, Host: rec.Host}
	d.ledger.Promise(jobID, capacity.Use{VCPUs: growC, MemoryMiB: growM}, capacity.Spot{VM: hold.Name, Host: hold.Host})
	d.unlockR()

	var vm hp.VM
	if s == nil {
		err = fmt.Errorf("no agent for site %s", rec.Site)
	} else {
		vm, err = s.agent.ResizeVM(ctx, vmName, hp.Resize{VCPUs: r.VCPUs, MemoryMiB: r.MemoryMiB})
	}
	d.ledger.Drop(hold.Name)
	// The capacity view follows what the VM is now, resized or not.
	d.refresh(context.WithoutCancel(ctx))
	d.kick()
	if err != nil {
		d.log.Warn().Err(err).Str("job", jobID).Str("vm", vmName).Int("vcpus", r.VCPUs).Int("memory_mib", r.MemoryMiB).Msg("resize refused")
		return wire.VM(vm), resizeError(vmName, err)
	}
	d.log.Info().Str("job", jobID).Str("vm", vmName).Int("vcpus", vm.VCPUs).Int("memory_mib", vm.MemoryMiB).Msg("vm resized")
	return wire.VM(vm), nil
}

// resizeError is an agent's refusal of a resize as the API answers it.
func resizeError(vm string, err error) error {
	status, code := 409, api.CodeConflict
	switch {
	case errors.Is(err, hp.ErrInvalid):
		status, code = 400, api.CodeInvalid
	case errors.Is(err, hp.ErrNotFound):
		status, code = 404, api.CodeNotFound
	case errors.Is(err, hp.ErrConnLost), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		status, code = 503, api.CodeUnavailable
	}
	return &api.RequestError{Status: status, Code: code, Msg: fmt.Sprintf("the agent did not resize VM %s: %v", vm, err)}
}
