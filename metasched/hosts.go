package metasched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/metasched/metasched/gramvm"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/calibration"
	"github.com/metasched/metasched/metasched/coordinator"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/store"
)

// hostRecord is a host's durable record in the store: its pool, or the
// stranded mark.
type hostRecord struct {
	Site     string `json:"site"`
	Pool     string `json:"pool"`
	Stranded bool   `json:"stranded,omitempty"`
	Reason   string `json:"reason,omitempty"`
	Switch   string `json:"switch,omitempty"` // the switch that stranded it
	// Drain is an operator's drain: the host serves its pool no more
	// (DrainHost).
	Drain bool `json:"drain,omitempty"`
}

// gridHost is a host of the grid as the daemon sees it.
type gridHost struct {
	name string
	rec  hostRecord
	// held is the switch in flight that holds the host: it serves no pool
	// meanwhile.
	held coordinator.SwitchID
	// inv is the agent's last report; reachable says whether that report
	// came and the host answered.
	inv       hp.Host
	reachable bool
	err       string
	// lostSince is when the daemon found the host unreachable (zero: not
	// yet timed); its jobs are stopped once it has been so for the
	// agent-loss grace.
	lostSince time.Time
	// recording says an operator's drain or undrain of the host is being
	// written to the store (recordHostLocked).
	recording bool
}

// movedVM is a VM of a live job that its agent reports on another host
// than the job's record says (it was migrated, by the daemon's tuning or
// by an operator through the agent).
type movedVM struct {
	job *liveJob
	ev  lifecycle.Moved
}

// movedVMsLocked lists the VMs of the placed jobs that where (VM name →
// site and host, from the inventories) puts on another host than their
// job's record; d.jobs.mu must be held.
func (d *Daemon) movedVMsLocked(where map[string][2]string) []movedVM {
	var out []movedVM
	for _, j := range d.jobs.index.placed {
		if j.job.State != lifecycle.Provisioning && j.job.State != lifecycle.Running {
			continue
		}
		for _, v := range j.job.Record.VMs {
			if w, ok := where[v.Name]; ok && w[1] != v.Host {
				out = append(out, movedVM{job: j, ev: lifecycle.Moved{VM: v.Name, Site: w[0], Host: w[1], At: d.now()}})
			}
		}
	}
	slices.SortFunc(out, func(a, b movedVM) int { return strings.Compare(a.ev.VM, b.ev.VM) })
	return out
}

// lost says h has been unreachable for the agent-loss grace or longer
// (refresh times it); the hosts' view must be held.
func (d *Daemon) lost(h *gridHost) bool {
	return !h.reachable && !h.lostSince.IsZero() && d.now().Sub(h.lostSince) >= d.cfg.AgentLossGrace
}

// serving reports whether h counts as a server of its pool (k_i): in a
// pool, reachable and ready, not held by a switch, not stranded, not
// drained.
func (h *gridHost) serving() bool {
	return h.reachable && h.inv.State == hp.HostReady && h.held == "" && !h.rec.Stranded && !h.rec.Drain && h.rec.Pool != ""
}

// serves reports whether h is a server of pool.
func (h *gridHost) serves(pool string) bool { return h.serving() && h.rec.Pool == pool }

// restoreHosts reads the recorded pools and the agents' inventories. A host
// the daemon has never seen joins the pool its agent labels it with, or,
// unlabelled, a pool chosen round-robin.
func (d *Daemon) restoreHosts(ctx context.Context) error {
	d.hv.mu.Lock()
	defer d.hv.mu.Unlock()
	recs, err := d.st.Hosts(ctx)
	if err != nil {
		return err
	}
	for name, v := range recs {
		var r hostRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("host %s: corrupt record: %w", name, err)
		}
		d.hv.hosts[name] = &gridHost{name: name, rec: r}
	}
	invs := d.inventories(ctx)
	next := 0
	for i, s := range d.sites {
		if invs[i].err != nil {
			d.log.Warn().Err(invs[i].err).Str("site", s.name).Msg("agent unreachable at start: its hosts join when it answers")
			continue
		}
		s.canShrink = unplugs(invs[i].inv)
		for _, h := range invs[i].inv.Hosts {
			rt := d.hv.hosts[h.Name]
			if rt == nil {
				pool := h.Pool
				if _, _, ok := d.jobType(pool); !ok {
					pool = d.types[next%len(d.types)].Name
					next++
					if _, err := s.agent.ReconfigureHost(ctx, h.Name, hp.Reconfigure{Pool: pool, Image: d.imageOf(pool)}); err != nil {
						d.log.Warn().Err(err).Str("host", h.Name).Str("pool", pool).Msg("cannot label new host")
					}
				}
				rt = &gridHost{name: h.Name, rec: hostRecord{Site: s.name, Pool: pool}}
				d.hv.hosts[h.Name] = rt
				if err := d.st.SetHost(ctx, h.Name, mustJSON(rt.rec)); err != nil {
					return err
				}
			}
			rt.rec.Site = s.name
			rt.inv = h
			rt.reachable = h.State != hp.HostUnreachable
		}
	}
	now := d.now()
	for _, h := range d.hv.hosts {
		if !h.reachable {
			h.lostSince = now // unreachable since the start, as far as the daemon knows
		}
	}
	d.sortHosts()
	return nil
}

// sortHosts orders the hosts like the grid's clusters and, within one,
// like the agent lists them (SITE-0, SITE-1, ...); the hosts' view is
// held to write.
func (d *Daemon) sortHosts() {
	d.hv.gen++
	d.hv.order = d.hv.order[:0]
	for name := range d.hv.hosts {
		d.hv.order = append(d.hv.order, name)
	}
	idx := func(h *gridHost) int {
		i, _ := d.grid.Index(h.rec.Site)
		return i
	}
	slices.SortFunc(d.hv.order, func(a, b string) int {
		ha, hb := d.hv.hosts[a], d.hv.hosts[b]
		if c := idx(ha) - idx(hb); c != 0 {
			return c
		}
		if c := len(a) - len(b); c != 0 { // spain-2 before spain-10
			return c
		}
		return strings.Compare(a, b)
	})
}

type siteInventory struct {
	inv hp.Inventory
	err error
}

// inventories asks every agent for its inventory, concurrently.
func (d *Daemon) inventories(ctx context.Context) []siteInventory {
	out := make([]siteInventory, len(d.sites))
	var wg sync.WaitGroup
	for i, s := range d.sites {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			out[i].inv, out[i].err = s.agent.Inventory(c)
		}()
	}
	wg.Wait()
	return out
}

// refresh reads the agents' inventories into the host view. Hosts that stop
// answering leave plans and switching; the jobs on them are requeued or
// failed (on_agent_loss). VMs of the daemon's jobs that no live job owns
// any more (left behind by a lost agent or a crash) are destroyed.
func (d *Daemon) refresh(ctx context.Context) {
	// One refresh at a time (the dispatcher and the cluster manager both
	// refresh): a refresh whose inventories were read before an agent
	// stopped must not land after one that saw it stop and mark its hosts
	// reachable again.
	d.refreshMu.Lock()
	defer d.refreshMu.Unlock()
	d.hv.mu.RLock()
	steps := d.hv.steps
	d.hv.mu.RUnlock()
	readAt := d.now()
	invs := d.inventories(ctx)
	if ctx.Err() != nil {
		return
	}
	// managed are the VMs of the daemon's jobs the inventories list, and
	// orphans those no live job owns.
	type orphan struct {
		s       *siteAgent
		job, vm string
	}
	var managed, orphans []orphan
	// unlabelled are the new hosts of an agent that joined late whose
	// pool is none of the job types: labelled (round-robin over the
	// types) below, and they join at the next refresh.
	type unlabelled struct {
		s    *siteAgent
		host string
	}
	var unlab []unlabelled
	// where is the site and host of every VM the inventories list.
	where := map[string][2]string{}
	// present is every VM the inventories list that its host has (not
	// only in its agent's record); answered the sites that answered.
	present, answered := map[string]bool{}, map[string]bool{}
	// The reports go into the hosts' view under its lock alone: the jobs'
	// sections wait only while it is written.
	d.hv.mu.Lock()
	added := false
	now := d.now()
	for i, s := range d.sites {
		answered[s.name] = invs[i].err == nil
		if invs[i].err != nil {
			for _, h := range d.hv.hosts {
				if h.rec.Site != s.name {
					continue
				}
				if h.reachable {
					h.reachable, h.err, h.lostSince = false, invs[i].err.Error(), now
					d.log.Error().Err(invs[i].err).Str("host", h.name).Str("site", s.name).Msg("host unreachable: its agent does not answer")
				} else if h.lostSince.IsZero() {
					h.lostSince = now
				}
			}
			continue
		}
		s.canShrink = unplugs(invs[i].inv)
		for _, hi := range invs[i].inv.Hosts {
			h := d.hv.hosts[hi.Name]
			if h == nil {
				pool := hi.Pool
				if _, _, ok := d.jobType(pool); !ok {
					unlab = append(unlab, unlabelled{s, hi.Name})
					continue
				}
				h = &gridHost{name: hi.Name, rec: hostRecord{Site: s.name, Pool: pool}}
				d.hv.hosts[hi.Name] = h
				added = true
				d.persistHost(ctx, h)
			}
			if d.hv.steps == steps {
				d.reconcilePoolLocked(ctx, h, hi)
			}
			was := h.reachable
			h.inv = hi
			h.reachable = hi.State != hp.HostUnreachable
			h.err = hi.Error
			switch {
			case h.reachable:
				h.lostSince = time.Time{}
			case was || h.lostSince.IsZero():
				h.lostSince = now
			}
			switch {
			case was && !h.reachable:
				d.log.Error().Str("host", h.name).Str("error", hi.Error).Msg("host unreachable")
			case !was && h.reachable:
				d.log.Info().Str("host", h.name).Msg("host reachable again")
			}
			for _, vm := range hi.VMs {
				d.ledger.Seen(vm.Name)
				where[vm.Name] = [2]string{s.name, hi.Name}
				if vm.State != hp.StateMissing {
					present[vm.Name] = true
				}
				// A VM on a host out of reach cannot be destroyed now: an
				// orphan there waits until the host answers again.
				if vm.Managed && vm.Job != "" && h.reachable {
					managed = append(managed, orphan{s, vm.Job, vm.Name})
				}
			}
		}
	}
	if added {
		d.sortHosts()
	}
	d.hv.mu.Unlock()

	d.lockR()
	for _, o := range managed {
		if !d.ownsVMLocked(o.job, o.vm) {
			orphans = append(orphans, o)
		}
	}
	for _, job := range d.ledger.Jobs() {
		if d.jobs.live[job] == nil && job != calibration.Job {
			d.ledger.DropJob(job) // ended: its VMs are gone or going
		}
	}
	to := store.Queued
	if d.cfg.OnAgentLoss == "fail" {
		to = store.Failed
	}
	lost := d.jobsOnLostHostsLocked()
	moved := d.movedVMsLocked(where)
	gone := d.goneVMsLocked(present, answered, readAt)
	d.unlockR()
	if len(gone) > 0 {
		d.goJob(func() { d.loseGone(ctx, gone) })
	}
	for _, m := range moved {
		d.log.Info().Str("job", m.job.id()).Str("vm", m.ev.VM).Str("host", m.ev.Host).Msg("a VM of the job moved: the job follows it")
		d.goJob(func() { d.answer(ctx, m.job, m.ev) })
	}
	for _, l := range lost {
		d.goJob(func() {
			if len(l.workers) > 0 {
				for _, v := range l.workers {
					d.loseWorker(ctx, l.job, lifecycle.WorkerLost{VM: v.Name, Host: v.Host, Reason: d.lostHostReason(v.Host),
						Attempt: l.attempt, At: d.now()})
				}
				return
			}
			reason := fmt.Sprintf("a host of the job became unreachable: %s (for %v or more)", l.host, d.cfg.AgentLossGrace)
			if _, err := d.stop(ctx, l.job, to, reason, l.attempt); err != nil {
				d.log.Error().Err(err).Str("job", l.job.id()).Msg("cannot stop a job on a lost host")
			}
		})
	}
	for i, u := range unlab {
		pool := d.types[i%len(d.types)].Name
		if _, err := u.s.agent.ReconfigureHost(ctx, u.host, hp.Reconfigure{Pool: pool, Image: d.imageOf(pool)}); err != nil {
			d.log.Warn().Err(err).Str("host", u.host).Str("pool", pool).Msg("cannot label new host")
		}
	}
	for _, o := range orphans {
		if err := o.s.agent.DestroyVM(ctx, o.vm); err != nil && !errors.Is(err, hp.ErrNotFound) {
			d.log.Warn().Err(err).Str("vm", o.vm).Msg("cannot destroy a vm no job owns")
		} else if err == nil {
			d.vmsDestroyed.Add(1)
			d.log.Info().Str("vm", o.vm).Msg("destroyed a vm no live job owns")
		}
	}
}

// unplugs says every host of an inventory (and there is one) can unplug
// vCPUs of its running VMs.
func unplugs(inv hp.Inventory) bool {
	for _, h := range inv.Hosts {
		if !h.VCPUUnplug {
			return false
		}
	}
	return len(inv.Hosts) > 0
}

// reconcilePoolLocked makes the agent's pool of a host its pool in the
// daemon when they differ outside a switch: the host was reconfigured on its
// agent directly (the agent is the truth about what a host serves; a VM of
// the daemon's pool would be refused there). Jobs planned on it meanwhile are
// refused by the agent (wrong_pool) and requeued. The caller makes sure that
// no switch stepped while the inventory was read, so a reconfiguration the
// daemon made itself is never taken for drift.
func (d *Daemon) reconcilePoolLocked(ctx context.Context, h *gridHost, hi hp.Host) {
	if hi.Pool == h.rec.Pool || h.held != "" || h.rec.Stranded || hi.State == hp.HostUnreachable {
		return
	}
	ev := d.log.Warn()
	if _, _, ok := d.jobType(hi.Pool); !ok {
		ev = d.log.Error().Str("problem", "no job type names the pool: the host serves none")
	}
	ev.Str("host", h.name).Str("pool", h.rec.Pool).Str("agent_pool", hi.Pool).
		Msg("the host's agent has it in another pool (reconfigured outside the daemon): the daemon follows the agent")
	h.rec.Pool = hi.Pool
	d.persistHost(ctx, h)
}

// ownsVMLocked reports whether a live job owns the VM now (a VM of an
// earlier attempt of a requeued job is not owned).
func (d *Daemon) ownsVMLocked(job, vm string) bool {
	if d.ledger.InHand(vm) {
		return true // the job's own creation or destroy is under way
	}
	if job == calibration.Job {
		return d.cal.Owns(vm) // a measurement's, or left by a crash
	}
	j := d.jobs.live[job]
	if j == nil {
		return false
	}
	if j.job.State == lifecycle.Queued {
		return false
	}
	return slices.ContainsFunc(j.job.Record.VMs, func(v lifecycle.VM) bool { return v.Name == vm })
}

// persistHost writes h's record.
func (d *Daemon) persistHost(ctx context.Context, h *gridHost) {
	if err := d.st.SetHost(context.WithoutCancel(ctx), h.name, mustJSON(h.rec)); err != nil {
		d.log.Error().Err(err).Str("host", h.name).Msg("cannot record host")
	}
}

// plannerHost is h as gramvm takes it: the site and pool of its record,
// ready when it serves that pool (serving), and its size, free capacity
// and VMs as its agent last reported them.
func (h *gridHost) plannerHost() gramvm.Host {
	out := gramvm.Host{Site: h.rec.Site, Name: h.name, Pool: h.rec.Pool, Ready: h.serving(),
		CPUs: h.inv.CPUs, MemoryMiB: h.inv.MemoryMiB, FreeVCPUs: h.inv.FreeVCPUs, FreeMemoryMiB: h.inv.FreeMemoryMiB}
	for _, v := range h.inv.VMs {
		out.VMs = append(out.VMs, gramvm.HostVM{Name: v.Name, Job: v.Job, VCPUs: v.VCPUs, MemoryMiB: v.MemoryMiB})
	}
	return out
}

// hostState is the host's state as the API shows it.
func (d *Daemon) hostStateLocked(h *gridHost) string {
	switch {
	case h.rec.Stranded:
		return api.HostStranded
	case h.held != "":
		return api.HostSwitching
	case !h.reachable:
		return api.HostUnreachable
	case h.rec.Drain:
		return d.drainStateLocked(h)
	case d.hostBusyLocked(h.name):
		return api.HostBusy
	}
	return api.HostIdle
}

// hostBusyLocked reports whether a live job is placed on the host.
func (d *Daemon) hostBusyLocked(name string) bool {
	return len(d.jobs.index.onHost[name]) > 0
}
