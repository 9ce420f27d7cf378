package metasched

import (
	"context"
	"fmt"
	"hash/fnv"
	"iter"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/dispatch"
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

// dispatch plans the queued jobs of every pool: a round of the pure
// dispatch decision (metasched/dispatch) per pool, on the pool's hosts as
// they are now, then its decisions carried out (docs/internals/daemon.md,
// "The dispatch round").
//
// A round costs what the hosts and the changes cost, not the backlog: it is
// skipped when the hosts' free capacity, their pools and the queues are as
// the last round left them (but for one round every fullRoundEvery), and
// the planning of a round is prepared once (roundPlanner).
func (d *Daemon) dispatch(ctx context.Context) {
	d.refresh(ctx)
	d.lockR()
	key := d.roundKeyLocked()
	if key == d.jobs.lastRound {
		d.unlockR()
		d.metrics.rounds.WithLabelValues("skipped").Inc()
		return
	}
	d.jobs.lastRound = key
	d.unlockR()
	d.metrics.rounds.WithLabelValues("planned").Inc()
	start := time.Now()
	defer func() { d.metrics.round.Observe(time.Since(start).Seconds()) }()
	// The pools' rounds run at once: their hosts are disjoint, and each
	// plans on a grid of its own (one core each).
	now := d.now()
	var wg sync.WaitGroup
	for _, jt := range d.types {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.dispatchPool(ctx, jt.Name, &roundPlanner{d: d, ctx: ctx, now: now, live: map[string]*liveJob{}})
		}()
	}
	wg.Wait()
}

// roundKeyLocked sums up what a dispatch round depends on: each host's
// pool, whether it serves, and its free capacity after promises; the
// queues' changes; and the time, in steps of fullRoundEvery.
func (d *Daemon) roundKeyLocked() uint64 {
	h := fnv.New64a()
	b := make([]byte, 0, 128)
	promised := d.ledger.Promised()
	for _, name := range d.hv.order {
		g := d.hv.hosts[name]
		r := promised[name]
		// NAME|POOL|SERVING|VCPUS|MIB, appended by hand: a host costs no
		// formatting (this runs over every host at every tick).
		b = append(append(append(append(b[:0], name...), '|'), g.rec.Pool...), '|')
		b = strconv.AppendBool(b, g.serving())
		b = strconv.AppendInt(append(b, '|'), int64(g.inv.FreeVCPUs-r.VCPUs), 10)
		b = strconv.AppendInt(append(b, '|'), int64(g.inv.FreeMemoryMiB-r.MemoryMiB), 10)
		h.Write(append(b, '\n'))
	}
	b = strconv.AppendUint(append(b[:0], 'q'), d.jobs.index.queueGen, 10)
	b = strconv.AppendInt(append(b, "|t"...), d.now().UnixNano()/int64(fullRoundEvery), 10)
	h.Write(b)
	return h.Sum64()
}

// noRoom is why a pool's queued jobs wait without being planned: its
// hosts had no free vCPU and memory left, for the jobs after the one
// named (all of them when none is).
type noRoom struct {
	why   string
	after string
}

// dispatchPool is one round of the dispatcher for one pool: the round's
// input under d.jobs.mu, the decision outside it, then the waits recorded and
// the claims carried out.
func (d *Daemon) dispatchPool(ctx context.Context, pool string, rp *roundPlanner) {
	// Each claim is carried out as soon as the round makes it, while the
	// round plans the next jobs; the round ends once they are all done.
	var claims sync.WaitGroup
	sem := make(chan struct{}, claimParallel)
	claim := func(dec dispatch.Decision) {
		j := rp.live[dec.Job] // claim checks it is still queued
		sem <- struct{}{}
		claims.Go(func() {
			defer func() { <-sem }()
			d.claim(ctx, j, dec.Claim)
		})
	}
	d.lockR()
	in := dispatch.Input{Pool: pool, Hosts: d.poolHostsLocked(pool), Queue: d.queueOf(pool, rp.live), Now: d.now(), HoldAfter: d.cfg.HoldAfter,
		TimeScale: d.timeScale(), MaxClaims: maxClaims, Claimed: claim}
	d.unlockR()
	res := dispatch.Round(ctx, in, rp)
	defer claims.Wait()
	d.jobs.mu.Lock()
	delete(d.jobs.noRoom, pool)
	if res.NoRoom != "" {
		nr := noRoom{why: res.NoRoom}
		if n := len(res.Decisions); n > 0 {
			nr.after = res.Decisions[n-1].Job
		}
		d.jobs.noRoom[pool] = nr
	}
	for _, dec := range res.Decisions {
		if j := d.jobs.live[dec.Job]; j != nil && dec.Claim == nil {
			j.waiting = dec.Why
		}
	}
	d.jobs.mu.Unlock()
	if res.Capped {
		d.kick() // the rest of the queue in the next round
	}
}

// queueOf yields the pool's queued jobs, oldest first, read from the index
// a chunk at a time under d.jobs.mu (call it without): a round that stops after
// a few hundred jobs reads a few hundred, whatever the backlog. Each chunk
// starts after the last job of the one before, so jobs queued meanwhile
// after it are read too and a job that left the queue is not. Each job
// yielded is filed in live, for the round's Planner and claims.
func (d *Daemon) queueOf(pool string, live map[string]*liveJob) iter.Seq[dispatch.Job] {
	return func(yield func(dispatch.Job) bool) {
		after := ""
		chunk := make([]dispatch.Job, 0, queueChunk)
		for {
			chunk = chunk[:0]
			d.jobs.mu.Lock()
			q := d.jobs.index.queues[pool]
			i := 0
			if after != "" {
				var found bool
				if i, found = slices.BinarySearchFunc(q, after, byID); found {
					i++
				}
			}
			for ; i < len(q) && len(chunk) < queueChunk; i++ {
				j := q[i]
				dj := dispatch.Job{ID: j.id(), Spec: j.spec, Submitted: j.submitted}
				live[dj.ID] = j
				if w := j.tuning; w != nil {
					dj.Tuning = &dispatch.Tuning{Hosts: w.hosts, Reason: w.reason()}
				}
				chunk = append(chunk, dj)
			}
			d.jobs.mu.Unlock()
			for _, dj := range chunk {
				if !yield(dj) {
					return
				}
			}
			if len(chunk) < queueChunk {
				return
			}
			after = chunk[len(chunk)-1].ID
		}
	}
}

// queueChunk is how many queued jobs a round reads at a time: as many as
// it claims at most.
const queueChunk = maxClaims

// maxClaims ends a round at that many claims: they are carried out, and
// the next round plans the rest of the queue on what they left, at once.
// A backlog of 20,000 jobs freed at once waited 27 s for the round that
// planned them all before the first started.
const maxClaims = 256

// claimParallel bounds the claims of a round carried out at once: their
// plans' commits share the store's transactions (group commit).
const claimParallel = 64

// poolHostsLocked lists the hosts serving the pool, in grid order, with
// their free capacity after promises.
func (d *Daemon) poolHostsLocked(pool string) []dispatch.Host {
	var out []dispatch.Host
	promised := d.ledger.Promised()
	for _, name := range d.hv.order {
		h := d.hv.hosts[name]
		if !h.serves(pool) {
			continue
		}
		r := promised[name]
		out = append(out, dispatch.Host{Name: name, Site: h.rec.Site, CPUs: h.inv.CPUs, MemoryMiB: h.inv.MemoryMiB,
			FreeVCPUs: h.inv.FreeVCPUs - r.VCPUs, FreeMemoryMiB: h.inv.FreeMemoryMiB - r.MemoryMiB})
	}
	return out
}

// roundPlanner is a pool's dispatch round's dispatch.Planner: GramVM on
// the live grid, prepared once per round (gramvm.Prepared: the running jobs'
// load, the graphs, the searches of each shape on the same free host
// counts), with at most one bandwidth tuning evaluated per round.
type roundPlanner struct {
	d   *Daemon
	ctx context.Context
	now time.Time

	// live are the jobs the round read from the queue (queueOf).
	live          map[string]*liveJob
	running       []gramvm.RunningJob
	loaded, empty *gramvm.Prepared
	err           error
	tuned         bool
}

// prepare takes the running jobs and prepares the grid they leave, once
// a round.
func (p *roundPlanner) prepare() error {
	if p.loaded != nil || p.err != nil {
		return p.err
	}
	p.d.lockR()
	p.running = p.d.runningJobsLocked(p.now)
	p.d.unlockR()
	p.loaded, p.err = p.d.planner.Prepare(p.running)
	if p.err == nil {
		p.empty, p.err = p.d.planner.Prepare(nil)
	}
	return p.err
}

// Plan plans a job on the free hosts with the links as the running jobs
// leave them, and evaluates bandwidth tuning for it when something holds
// the plan back (for a job every tuneEvery, and for any job at most once
// a round and every tuneGap).
func (p *roundPlanner) Plan(dj *dispatch.Job, free map[string][]string) dispatch.Outcome {
	if err := p.prepare(); err != nil {
		return dispatch.Outcome{Err: err}
	}
	d := p.d
	// The job as the round read it from the queue: no lock per job (the
	// round would wait behind every job driver for each).
	j := p.live[dj.ID]
	tune := j != nil && len(p.running) > 0 && !p.tuned && p.now.Sub(time.Unix(0, j.lastTune.Load())) >= tuneEvery && d.tuner.Idle(p.now, tuneGap)
	if tune {
		j.lastTune.Store(p.now.UnixNano())
	}
	start, reused := time.Now(), p.loaded.Reused // the plan's compute time, on the wall clock whatever the daemon's clock
	// The job's record keeps the first clusters left out (claim): those
	// alone are explained.
	pl, err := p.loaded.Plan(p.ctx, dj.Spec, free, selection.Options{Master: -1, ExcludedReasons: recordExcluded})
	d.metrics.plan.Observe(time.Since(start).Seconds())
	if p.loaded.Reused > reused {
		d.metrics.plans.WithLabelValues("reused").Inc()
	} else {
		d.metrics.plans.WithLabelValues("searched").Inc()
	}
	if err != nil {
		d.log.Error().Err(err).Str("job", dj.ID).Msg("plan")
		return dispatch.Outcome{Err: err}
	}
	if !tune || !heldBack(&pl) {
		return dispatch.Outcome{Placement: pl}
	}
	p.tuned = true
	// One tuning is carried out at a time: the pools' rounds evaluate
	// theirs in turn, each when none is being carried out.
	done, ok := d.tuner.Evaluate(p.now, tuneGap)
	defer done()
	if !ok || !d.tune(p.ctx, j, free, p.running) {
		return dispatch.Outcome{Placement: pl}
	}
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	return dispatch.Outcome{Tuning: &dispatch.Tuning{Hosts: j.tuning.hosts, Reason: j.tuning.reason()}}
}

// PlanAvailable plans a job whose placement is a baseline on the pool's
// hosts and when each is free (availLocked).
func (p *roundPlanner) PlanAvailable(dj *dispatch.Job, free map[string][]string, held map[string]string, claims []dispatch.Decision) dispatch.Outcome {
	if err := p.prepare(); err != nil {
		return dispatch.Outcome{Err: err}
	}
	d := p.d
	d.lockR()
	avail := d.availLocked(dj.Spec.Type, dj.Spec.VM, held, p.now, free, claims)
	d.unlockR()
	start := time.Now()
	pl, err := p.loaded.PlanAvailable(p.ctx, dj.Spec, avail, selection.Options{Master: -1})
	d.metrics.plan.Observe(time.Since(start).Seconds())
	d.metrics.plans.WithLabelValues("searched").Inc()
	if err != nil {
		d.log.Error().Err(err).Str("job", dj.ID).Msg("plan")
	}
	return dispatch.Outcome{Placement: pl, Err: err}
}

// PlanEmpty plans a job on hosts as if nothing ran on them.
func (p *roundPlanner) PlanEmpty(dj *dispatch.Job, hosts map[string][]string) (gramvm.Placement, error) {
	if err := p.prepare(); err != nil {
		return gramvm.Placement{}, err
	}
	start := time.Now()
	pl, err := p.empty.Plan(p.ctx, dj.Spec, hosts, selection.Options{Master: -1})
	p.d.metrics.plan.Observe(time.Since(start).Seconds())
	return pl, err
}

// emptyPoolLocked lists, per site, the hosts serving pool that could take
// a VM of the shape if they ran nothing.
func (d *Daemon) emptyPoolLocked(pool string, vm selection.VM) map[string][]string {
	out := map[string][]string{}
	for _, name := range d.hv.order {
		h := d.hv.hosts[name]
		if h.serves(pool) && h.inv.CPUs >= vm.VCPUs && h.inv.MemoryMiB >= vm.MemoryMiB {
			out[h.rec.Site] = append(out[h.rec.Site], name)
		}
	}
	return out
}

// claim plans a queued job on a placement, if the job is still queued and
// the hosts still have the room. The hosts' capacity is reserved for the
// job before its plan is committed, so that no other plan takes it
// meanwhile (and given back if the commit fails); a host that a switch
// took while the plan was being committed sends the job back to the queue.
func (d *Daemon) claim(ctx context.Context, j *liveJob, pl *gramvm.Placement) {
	pl.Plan.TrimExcluded(recordExcluded)
	predicted := pl.Plan.Runtime
	if d.cfg.Executor.Name == "emulated" {
		predicted = pl.Plan.Runtime * d.cfg.Executor.TimeScale
	}
	d.lockR()
	if j.job.State != lifecycle.Queued || d.jobs.live[j.id()] != j || !d.fitsLocked(j, pl) {
		d.unlockR()
		return
	}
	n := j.job.Record.Attempts + 1
	vms := vmNames(j.id(), n, pl)
	d.reserveLocked(j, vms)
	startEnd, how := d.startEndLocked(j.spec.Type, pl)
	d.unlockR()
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
		if !d.stoppedDuring(j, err, "the job's plan") {
			d.log.Error().Err(err).Str("job", j.id()).Msg("cannot record the plan: the job stays queued")
		}
		d.jobs.mu.Lock()
		if j.job.State == lifecycle.Queued {
			d.unreserveLocked(j)
		}
		d.jobs.mu.Unlock()
		return
	}
	d.hv.mu.RLock()
	var taken string
	var by coordinator.SwitchID
	for _, v := range vms {
		if h := d.hv.hosts[v.Host]; h != nil && h.held != "" {
			taken, by = h.name, h.held
			break
		}
	}
	d.hv.mu.RUnlock()
	if taken != "" {
		reason := fmt.Sprintf("host %s was taken by switch %s while the job was planned: requeued", taken, by)
		if _, err := d.stop(ctx, j, lifecycle.Queued, reason, n); err != nil {
			d.log.Error().Err(err).Str("job", j.id()).Msg("cannot requeue")
		}
	}
}

// recordExcluded is how many of the clusters a plan leaves out a job's
// record lists with their reason: on a grid of 147 clusters, the 146
// reasons were most of every record's bytes, encoded and decoded at each
// of the job's transitions.
const recordExcluded = 8

// fitsLocked reports whether the placement's hosts still serve the job's
// pool and have the room for its VMs with what is reserved on them.
func (d *Daemon) fitsLocked(j *liveJob, pl *gramvm.Placement) bool {
	need := map[string]int{}
	for _, h := range append([]gramvm.HostRef{pl.Master}, pl.Workers...) {
		need[h.Host]++
	}
	for _, h := range hostsOf(pl) {
		g := d.hv.hosts[h.Host]
		if g == nil || g.rec.Site != h.Site || !g.serves(j.typ()) {
			return false
		}
		hi := g.inv
		r := d.ledger.On(h.Host)
		if hi.FreeVCPUs-r.VCPUs < need[h.Host]*j.spec.VM.VCPUs || hi.FreeMemoryMiB-r.MemoryMiB < need[h.Host]*j.spec.VM.MemoryMiB {
			return false
		}
	}
	return true
}
