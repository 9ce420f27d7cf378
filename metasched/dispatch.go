package metasched

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// dispatchLoop plans queued jobs whenever something changed, and at least
// four times a second.
func (d *Daemon) dispatchLoop(ctx context.Context) {
	t := d.clock.NewTicker(dispatchEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.Chan():
		}
		d.dispatch(ctx)
	}
}

// maxMisses is how many jobs of one pool that do not fit are tried per
// round before the pool's queue is left for the next round.
const maxMisses = 3

// dispatch plans the queued jobs of every pool, oldest first, on the free
// hosts of the pool. A job that fits is planned and started; one that does
// not waits (a younger job that fits may go first).
func (d *Daemon) dispatch(ctx context.Context) {
	d.refresh(ctx)
	for _, jt := range d.types {
		d.mu.Lock()
		if !d.anyRoomLocked(jt.Name) {
			// Nothing can start: skip sorting a long queue.
			for _, j := range d.jobs {
				if j.typ() == jt.Name && j.job.State == lifecycle.Queued {
					j.waiting = "no free host in pool " + jt.Name
				}
			}
			d.mu.Unlock()
			continue
		}
		var queue []*liveJob
		for _, j := range d.jobs {
			if j.typ() == jt.Name && j.job.State == lifecycle.Queued {
				queue = append(queue, j)
			}
		}
		d.mu.Unlock()
		slices.SortFunc(queue, func(a, b *liveJob) int { return strings.Compare(a.id(), b.id()) })
		misses := 0
		for _, j := range queue {
			if ctx.Err() != nil || misses >= maxMisses {
				break
			}
			d.mu.Lock()
			free := d.freeLocked(jt.Name, j.spec.VM)
			d.mu.Unlock()
			if len(free) == 0 {
				d.setWaiting(j, "no free host in pool "+jt.Name)
				break
			}
			pl, tuning, err := d.plan(ctx, j, free)
			if err != nil {
				d.log.Error().Err(err).Str("job", j.id()).Msg("plan")
				misses++
				continue
			}
			if tuning {
				d.setWaiting(j, "bandwidth tuning is freeing capacity for it (GET /v1/tuning)")
				continue
			}
			if !pl.Plan.Feasible {
				d.setWaiting(j, pl.Plan.Reason)
				misses++
				continue
			}
			d.claim(ctx, j, &pl)
		}
	}
}

// anyRoomLocked reports whether some host serving the pool has a free vCPU
// and some memory left, before what is promised to jobs being provisioned.
func (d *Daemon) anyRoomLocked(pool string) bool {
	for _, name := range d.order {
		h := d.hosts[name]
		if !h.serves(pool) {
			continue
		}
		r := d.promised.on(name)
		if h.inv.FreeVCPUs-r.vcpus >= 1 && h.inv.FreeMemoryMiB-r.mem >= 1 {
			return true
		}
	}
	return false
}

func (d *Daemon) setWaiting(j *liveJob, why string) {
	d.mu.Lock()
	j.waiting = why
	d.mu.Unlock()
}

// claim plans a queued job on a placement, if the job is still queued and
// the hosts still have the room. The hosts' capacity is reserved for the
// job before its plan is committed, so that no other plan takes it
// meanwhile (and given back if the commit fails); a host that a switch
// took while the plan was being committed sends the job back to the queue.
func (d *Daemon) claim(ctx context.Context, j *liveJob, pl *gramvm.Placement) {
	predicted := pl.Plan.Runtime
	if d.cfg.Executor.Name == "emulated" {
		predicted = pl.Plan.Runtime * d.cfg.Executor.TimeScale
	}
	d.mu.Lock()
	if j.job.State != lifecycle.Queued || d.jobs[j.id()] != j || !d.fitsLocked(j, pl) {
		d.mu.Unlock()
		return
	}
	n := j.job.Record.Attempts + 1
	vms := vmNames(j.id(), n, pl)
	d.reserveLocked(j, vms)
	d.mu.Unlock()
	why := fmt.Sprintf("planned: master %s, %d machines on %s, predicted %.3gs", pl.Plan.Master, pl.Plan.Machines,
		clusterList(pl), predicted)
	if err := d.stepJob(ctx, j, lifecycle.Plan{Placement: pl, VMs: vms, Predicted: predicted, Reason: why, At: d.now()}); err != nil {
		d.log.Error().Err(err).Str("job", j.id()).Msg("cannot record the plan: the job stays queued")
		d.mu.Lock()
		if j.job.State == lifecycle.Queued {
			d.unreserveLocked(j)
		}
		d.mu.Unlock()
		return
	}
	d.mu.Lock()
	var taken *gridHost
	for _, v := range vms {
		if h := d.hosts[v.Host]; h != nil && h.held != "" {
			taken = h
			break
		}
	}
	d.mu.Unlock()
	if taken != nil {
		reason := fmt.Sprintf("host %s was taken by switch %s while the job was planned: requeued", taken.name, taken.held)
		if _, err := d.stop(ctx, j, lifecycle.Queued, reason, n); err != nil {
			d.log.Error().Err(err).Str("job", j.id()).Msg("cannot requeue")
		}
	}
}

// fitsLocked reports whether the placement's hosts are still free for the
// job with what is reserved on them.
func (d *Daemon) fitsLocked(j *liveJob, pl *gramvm.Placement) bool {
	free := d.freeLocked(j.typ(), j.spec.VM)
	need := map[string]int{}
	for _, h := range append([]gramvm.HostRef{pl.Master}, pl.Workers...) {
		need[h.Host]++
	}
	for _, h := range hostsOf(pl) {
		if !slices.Contains(free[h.Site], h.Host) {
			return false
		}
		hi := d.hosts[h.Host].inv
		r := d.promised.on(h.Host)
		if hi.FreeVCPUs-r.vcpus < need[h.Host]*j.spec.VM.VCPUs || hi.FreeMemoryMiB-r.mem < need[h.Host]*j.spec.VM.MemoryMiB {
			return false
		}
	}
	return true
}
