package metasched

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/capacity"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/tuning"
)

// Draining a host for maintenance: an operator's drain takes the host out of
// its pool's service at once (no new VM is placed on it, no switch takes it,
// the switching policy no longer counts it), while the jobs already on it run
// to their end, or, with Move, have their VMs live-migrated to other hosts of
// the pool at the same site. Once no job is left on it the host is drained:
// the operator may stop it. Undrain returns it to its pool. The mark is in
// the host's record, so a restart keeps it.

// DrainHost drains a host (see above) and answers its view.
func (d *Daemon) DrainHost(ctx context.Context, name string, r api.DrainRequest) (_ api.HostView, err error) {
	defer apiError(&err)
	d.lockW()
	h := d.hv.hosts[name]
	if h == nil {
		d.unlockW()
		return api.HostView{}, &api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no host %q", name)}
	}
	switch {
	case h.held != "":
		d.unlockW()
		return api.HostView{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("host %s is being switched (switch %s): drain it when the switch has ended", name, h.held)}
	case h.rec.Stranded:
		d.unlockW()
		return api.HostView{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("host %s is stranded: it serves no pool already (clear it into one first)", name)}
	case h.recording:
		d.unlockW()
		return api.HostView{}, recordingConflict(name)
	}
	if !h.rec.Drain {
		// Out of service at once; recorded without the daemon's lock (a
		// store write waits for its group commit), and undone if the store
		// refuses it.
		h.rec.Drain = true
		if err := d.recordHostLocked(ctx, h, func(r *hostRecord) {}); err != nil {
			h.rec.Drain = false
			d.unlockW()
			return api.HostView{}, fmt.Errorf("host %s: cannot record the drain: %w", name, err)
		}
		d.log.Info().Str("host", name).Str("pool", h.rec.Pool).Int("jobs", len(d.jobsOnHostLocked(name))).
			Bool("move", r.Move).Msg("host draining: no new VMs on it, out of its pool when its jobs have left")
	}
	var moves []drainMove
	if r.Move {
		moves = d.drainMovesLocked(h)
	}
	d.jobs.lastRound = 0 // the pools' sizes changed: a policy round at once
	d.unlockW()
	d.kick()
	if len(moves) > 0 {
		d.carryOutDrain(ctx, name, moves)
	}
	d.lockR()
	defer d.unlockR()
	return d.hostViewLocked(h), nil
}

// UndrainHost returns a draining or drained host to its pool.
func (d *Daemon) UndrainHost(ctx context.Context, name string) (_ api.HostView, err error) {
	defer apiError(&err)
	d.lockW()
	defer d.unlockW()
	h := d.hv.hosts[name]
	if h == nil {
		return api.HostView{}, &api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no host %q", name)}
	}
	if h.recording {
		return api.HostView{}, recordingConflict(name)
	}
	if !h.rec.Drain {
		return api.HostView{}, &api.RequestError{Status: 409, Code: api.CodeConflict,
			Msg: fmt.Sprintf("host %s is not drained (%s)", name, d.hostStateLocked(h))}
	}
	// Back in service once recorded: the host stays drained meanwhile.
	if err := d.recordHostLocked(ctx, h, func(r *hostRecord) { r.Drain = false }); err != nil {
		return api.HostView{}, fmt.Errorf("host %s: cannot record the undrain: %w", name, err)
	}
	d.jobs.lastRound = 0
	d.log.Info().Str("host", name).Str("pool", h.rec.Pool).Msg("host undrained: back in its pool")
	d.kick()
	return d.hostViewLocked(h), nil
}

// recordHostLocked writes h's record with change made to the store, and
// once it is there makes the change to h's record: without holding d.jobs.mu
// meanwhile (it is unlocked and locked again), as the write waits for a
// group commit, which every other user of the lock would wait for too (the
// undrain of 5,000 hosts held the daemon for seconds). h is marked
// recording meanwhile, so that another drain or undrain of it is refused
// (a 409) until this one is recorded; whatever else changed h's record
// meanwhile is written again.
// d.jobs.mu and the hosts' view must be held to write (lockW).
func (d *Daemon) recordHostLocked(ctx context.Context, h *gridHost, change func(*hostRecord)) error {
	rec := h.rec
	change(&rec)
	h.recording = true
	d.unlockW()
	err := d.st.SetHost(context.WithoutCancel(ctx), h.name, mustJSON(rec))
	d.lockW()
	h.recording = false
	if err != nil {
		return err
	}
	change(&h.rec)
	if h.rec != rec {
		d.persistHost(ctx, h) // changed meanwhile: the latest goes to the store
	}
	return nil
}

// recordingConflict is the answer to a drain or undrain of a host whose
// last one is being recorded.
func recordingConflict(name string) error {
	return &api.RequestError{Status: 409, Code: api.CodeConflict,
		Msg: fmt.Sprintf("host %s: its last drain or undrain is being recorded: try again", name)}
}

// jobsOnHostLocked lists the IDs of the live jobs with a VM on the host.
func (d *Daemon) jobsOnHostLocked(name string) []string {
	out := make([]string, 0, len(d.jobs.index.onHost[name]))
	for id := range d.jobs.index.onHost[name] {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// placedOnLocked lists the live jobs with a VM on the host, in ID order.
func (d *Daemon) placedOnLocked(name string) []*liveJob {
	out := make([]*liveJob, 0, len(d.jobs.index.onHost[name]))
	for _, j := range d.jobs.index.onHost[name] {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *liveJob) int { return strings.Compare(a.id(), b.id()) })
	return out
}

// drainStateLocked is the state of a draining host: draining while a job
// or a VM of the daemon's is on it, drained after.
func (d *Daemon) drainStateLocked(h *gridHost) string {
	if d.hostBusyLocked(h.name) || slices.ContainsFunc(h.inv.VMs, func(v hp.VM) bool { return v.Managed }) {
		return api.HostDraining
	}
	return api.HostDrained
}

// drainMove is one VM of a draining host to move, and where.
type drainMove struct {
	job  *liveJob
	site string
	vm   string
	from string
	to   string
}

// drainMovesLocked chooses, for each VM of a running job on the draining
// host h, another host of the same site serving the same pool with room for
// it (its free capacity less what is promised and chosen already), the
// roomiest first. A VM with no such host stays, to finish its job there.
func (d *Daemon) drainMovesLocked(h *gridHost) []drainMove {
	free := map[string]capacity.Use{}
	var targets []string
	for _, name := range d.hv.order {
		t := d.hv.hosts[name]
		if t == h || t.rec.Site != h.rec.Site || !t.serves(h.rec.Pool) {
			continue
		}
		p := d.ledger.On(name)
		free[name] = capacity.Use{VCPUs: t.inv.FreeVCPUs - p.VCPUs, MemoryMiB: t.inv.FreeMemoryMiB - p.MemoryMiB}
		targets = append(targets, name)
	}
	var out []drainMove
	for _, j := range d.jobs.index.placed {
		if j.job.State != lifecycle.Running {
			continue
		}
		for _, v := range j.job.Record.VMs {
			if v.Host != h.name || d.ledger.InHand(v.Name) {
				continue
			}
			size := d.vmSize(h, v.Name)
			slices.SortStableFunc(targets, func(a, b string) int { return free[b].VCPUs - free[a].VCPUs })
			for _, t := range targets {
				if f := free[t]; f.VCPUs >= size.VCPUs && f.MemoryMiB >= size.MemoryMiB {
					free[t] = capacity.Use{VCPUs: f.VCPUs - size.VCPUs, MemoryMiB: f.MemoryMiB - size.MemoryMiB}
					out = append(out, drainMove{job: j, site: h.rec.Site, vm: v.Name, from: h.name, to: t})
					d.tuner.Migrating(tuning.Move{From: h.name, To: t, LAN: gramvm.LANKey(h.rec.Site)})
					break
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b drainMove) int { return strings.Compare(a.vm, b.vm) })
	return out
}

// vmSize is the size of the VM on h as its agent last reported it.
func (d *Daemon) vmSize(h *gridHost, vm string) capacity.Use {
	for _, v := range h.inv.VMs {
		if v.Name == vm {
			return capacity.Use{VCPUs: v.VCPUs, MemoryMiB: v.MemoryMiB}
		}
	}
	return capacity.Use{}
}

// carryOutDrain live-migrates the VMs of a draining host, all at once, and
// records each move in its job; a move that fails leaves its VM to finish
// its job on the host.
func (d *Daemon) carryOutDrain(ctx context.Context, host string, moves []drainMove) {
	var wg sync.WaitGroup
	for _, m := range moves {
		wg.Go(func() {
			mig, err := d.migrate(ctx, m.site, m.vm, m.from, m.to)
			if err != nil {
				d.log.Warn().Err(err).Str("host", host).Str("vm", m.vm).Str("to", m.to).
					Msg("drain: cannot move the VM: its job finishes on the draining host")
				return
			}
			d.answer(ctx, m.job, lifecycle.Moved{VM: m.vm, Site: m.site, Host: m.to, At: d.now()})
			d.log.Info().Str("host", host).Str("job", m.job.id()).Str("vm", m.vm).Str("to", m.to).
				Bool("live", mig.Live).Float64("seconds", mig.Seconds).Msg("drain: VM moved off the draining host")
		})
	}
	wg.Wait()
	d.refresh(ctx)
}
