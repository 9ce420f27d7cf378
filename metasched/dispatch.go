package metasched

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/selection"
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

// fullRoundEvery is how often the dispatcher plans its queues although
// nothing it watches changed: plans also follow the links' measured
// bandwidths and the running jobs' progress.
const fullRoundEvery = 5 * time.Second

// dispatch plans the queued jobs of every pool, oldest first, on the free
// hosts of the pool. A job that fits is planned and started; one that does
// not waits, and younger jobs that fit go first (backfill). So that a job
// that does not fit is not passed over for ever (starved by younger, smaller
// jobs that keep its hosts busy), one that has waited hold_after and still
// does not fit holds the hosts of its best plan on its pool as if the pool
// were empty: younger jobs are planned only on the other hosts, and as the
// held hosts empty, the job is planned on them. A job whose best plan even
// on the empty pool is infeasible holds nothing (it waits for the pool to
// grow).
//
// A round costs what the hosts and the changes cost, not the backlog: it is
// skipped when the hosts' free capacity, their pools and the queues are as
// the last round left them (but for one round every fullRoundEvery), a pool
// with no room is skipped whole, and a job whose shape did not fit is not
// planned again in the round for another job of the same shape.
func (d *Daemon) dispatch(ctx context.Context) {
	d.refresh(ctx)
	d.mu.Lock()
	key := d.roundKeyLocked()
	if key == d.lastRound {
		d.mu.Unlock()
		d.metrics.rounds.WithLabelValues("skipped").Inc()
		return
	}
	d.lastRound = key
	d.mu.Unlock()
	d.metrics.rounds.WithLabelValues("planned").Inc()
	start := time.Now()
	defer func() { d.metrics.round.Observe(time.Since(start).Seconds()) }()
	for _, jt := range d.types {
		if ctx.Err() != nil {
			return
		}
		d.dispatchPool(ctx, jt.Name)
	}
}

// roundKeyLocked sums up what a dispatch round depends on: each host's
// pool, whether it serves, and its free capacity after promises; the
// queues' changes; and the time, in steps of fullRoundEvery.
func (d *Daemon) roundKeyLocked() uint64 {
	h := fnv.New64a()
	for _, name := range d.order {
		g := d.hosts[name]
		r := d.promised.on(name)
		fmt.Fprintf(h, "%s|%s|%t|%d|%d\n", name, g.rec.Pool, g.serving(), g.inv.FreeVCPUs-r.vcpus, g.inv.FreeMemoryMiB-r.mem)
	}
	fmt.Fprintf(h, "q%d|t%d", d.index.queueGen, d.now().UnixNano()/int64(fullRoundEvery))
	return h.Sum64()
}

// dispatchPool is one round of the dispatcher for one pool.
func (d *Daemon) dispatchPool(ctx context.Context, pool string) {
	d.mu.Lock()
	if !d.anyRoomLocked(pool) {
		d.noRoom[pool] = "no free host in pool " + pool
		d.mu.Unlock()
		return
	}
	delete(d.noRoom, pool)
	queue := d.queuedLocked(pool)
	d.mu.Unlock()
	held := map[string]string{}                     // host → the job that holds it
	misfits := map[string]string{}                  // shapes that did not fit this round → why
	frees := map[selection.VM]map[string][]string{} // free hosts per VM shape, until a claim
	waits := map[string]*gramvm.Placement{}         // shapes whose baseline waits for its cluster → its plan
	for _, j := range queue {
		if ctx.Err() != nil {
			return
		}
		if why, waits := d.waitsForTuning(j, held); waits {
			d.setWaiting(j, why)
			continue
		}
		free, ok := frees[j.spec.VM]
		if !ok {
			d.mu.Lock()
			free = d.freeLocked(pool, j.spec.VM)
			d.mu.Unlock()
			frees[j.spec.VM] = free
		}
		free = withoutHosts(free, held)
		shape := shapeKey(j)
		baseline := j.spec.PlacementOrDefault().Baseline()
		why, misfit := misfits[shape]
		if !misfit && len(free) == 0 && !baseline {
			why, misfit = "no free host in pool "+pool+" for its VMs", true
			misfits[shape] = why
		}
		if !misfit {
			var (
				pl     gramvm.Placement
				tuning bool
				err    error
			)
			if baseline {
				pl, err = d.planAvailable(ctx, j.spec, held)
			} else {
				pl, tuning, err = d.plan(ctx, j, free)
			}
			switch {
			case err != nil:
				d.log.Error().Err(err).Str("job", j.id()).Msg("plan")
				why, misfit = "cannot plan it: "+err.Error(), true
			case tuning:
				why, _ := d.waitsForTuning(j, held)
				d.setWaiting(j, why)
				continue
			case !pl.Plan.Feasible:
				why, misfit = pl.Plan.Reason, true
				misfits[shape] = why
			case pl.Plan.Start > 0: // its baseline waits for the cluster it chose
				why, misfit = d.waitReason(&pl), true
				misfits[shape], waits[shape] = why, &pl
			default:
				d.claim(ctx, j, &pl)
				clear(misfits) // the free hosts changed
				clear(frees)
				clear(waits)
				continue
			}
		}
		if d.now().Sub(j.submitted) >= d.cfg.HoldAfter {
			if hosts := d.holdFor(ctx, j, pool, held, waits[shape]); len(hosts) > 0 {
				why = fmt.Sprintf("%s; it has waited more than hold_after (%s) and holds hosts %s, which younger jobs do not take",
					why, d.cfg.HoldAfter, strings.Join(hosts, ", "))
			}
		}
		d.setWaiting(j, why)
	}
}

// waitsForTuning says whether the queued job waits for a bandwidth
// tuning being carried out for it, and why; the hosts the tuning frees
// are then held for it, so that younger jobs are planned around them
// (as around the hosts of a job that has waited hold_after).
func (d *Daemon) waitsForTuning(j *liveJob, held map[string]string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := j.tuning
	if w == nil {
		return "", false
	}
	for _, h := range w.hosts {
		if _, ok := held[h]; !ok {
			held[h] = j.id()
		}
	}
	return w.reason(), true
}

// reason is why a job waits for the tuning w.
func (w *tuningWait) reason() string {
	why := fmt.Sprintf("waiting for bandwidth tuning #%d, carried out for it, to end: it is then planned on what the tuning frees", w.seq)
	if len(w.hosts) > 0 {
		why += fmt.Sprintf(" (hosts %s are held for it meanwhile)", strings.Join(w.hosts, ", "))
	}
	return why + "; GET /v1/tuning"
}

// holdFor marks the hosts of the job's best plan on its empty pool as held
// for it (hosts held by an older job stay theirs) and returns them; none
// when no plan is feasible even there. A job whose baseline waits for the
// cluster it chose (waiting) holds the hosts it waits for.
func (d *Daemon) holdFor(ctx context.Context, j *liveJob, pool string, held map[string]string, waiting *gramvm.Placement) []string {
	pl := waiting
	if pl == nil {
		d.mu.Lock()
		empty := withoutHosts(d.emptyPoolLocked(pool, j.spec.VM), held)
		d.mu.Unlock()
		if len(empty) == 0 {
			return nil
		}
		p, _, err := d.planLoaded(ctx, j.spec, empty, nil, selection.Options{Master: -1})
		if err != nil || !p.Plan.Feasible {
			return nil
		}
		pl = &p
	}
	var out []string
	for _, h := range hostsOf(pl) {
		if _, ok := held[h.Host]; !ok {
			held[h.Host] = j.id()
			out = append(out, h.Host)
		}
	}
	return out
}

// emptyPoolLocked lists, per site, the hosts serving pool that could take
// a VM of the shape if they ran nothing.
func (d *Daemon) emptyPoolLocked(pool string, vm selection.VM) map[string][]string {
	hosts := make([]gramvm.Host, 0, len(d.order))
	for _, name := range d.order {
		h := d.hosts[name].plannerHost()
		h.FreeVCPUs, h.FreeMemoryMiB = h.CPUs, h.MemoryMiB
		hosts = append(hosts, h)
	}
	return gramvm.FreeHosts(hosts, pool, vm)
}

// withoutHosts is free without the held hosts.
func withoutHosts(free map[string][]string, held map[string]string) map[string][]string {
	if len(held) == 0 {
		return free
	}
	out := map[string][]string{}
	for site, hosts := range free {
		for _, h := range hosts {
			if _, ok := held[h]; !ok {
				out[site] = append(out[site], h)
			}
		}
	}
	return out
}

// shapeKey is what a job's plan depends on besides the hosts: two queued
// jobs with the same key get the same plan on the same free hosts.
func shapeKey(j *liveJob) string {
	s := j.spec
	return fmt.Sprintf("%d|%g|%g|%g|%d|%d|%s|%s", s.Tasks, s.TaskOps, s.TaskBytes, s.Efficiency, s.VM.VCPUs, s.VM.MemoryMiB,
		s.PlacementOrDefault(), s.Master)
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
	startEnd, how := d.startEndLocked(j.spec.Type, pl)
	d.mu.Unlock()
	why := fmt.Sprintf("planned: master %s%s, %d machines on %s, predicted %.3gs", pl.Plan.Master, forcedNote(&pl.Plan), pl.Plan.Machines,
		clusterList(pl), predicted+startEnd)
	if startEnd > 0 {
		why += fmt.Sprintf(" (%.3gs of tasks, whole, and %.2gs to start and end, %s)", predicted, startEnd, how)
		predicted += startEnd
	}
	if p := j.spec.PlacementOrDefault(); p != selection.PlaceGramVM {
		why += ", placement " + string(p)
	}
	if err := d.stepJob(ctx, j, lifecycle.Plan{Placement: pl, VMs: vms, Predicted: predicted, StartEnd: startEnd, Reason: why, At: d.now()}); err != nil {
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
