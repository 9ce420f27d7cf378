package metasched

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/metasched/metasched/metasched/lifecycle"
)

// Elastic jobs (a job file's elastic: true) survive the loss of a worker
// VM: a switch that takes the host of one of their workers (the release
// rule, chooseReleaseLocked), a worker's host unreachable for the
// agent-loss grace, or a worker VM gone from its host (destroyed outside
// the daemon) costs the running job that worker (lifecycle.WorkerLost),
// and it goes on with the others. The loss of its master VM, or of its
// last worker, requeues it; a job that is not elastic is requeued (or
// failed, on_agent_loss: fail) by any of them.

// missedFor is how many refreshes in a row must miss a running job's VM
// from its host's inventory before it counts as gone: one inventory may
// be read while a VM is being created or moved.
const missedFor = 2

// goneVM is a VM of a running job that its host's agent no longer lists.
type goneVM struct {
	job     *liveJob
	attempt int
	vm      lifecycle.VM
}

// goneVMsLocked lists the VMs of running jobs that the inventories read
// from readAt on do not have, on hosts that answered (answered: the sites
// whose inventory came), missedFor refreshes in a row: their agent no
// longer lists them (destroyed through it), or lists them as missing from
// their host (in its record only: destroyed through libvirt). A VM that
// the job's own creation or destruction holds, on a host that a tuning
// migration is moving VMs to or from, or of a job that started running
// after readAt (its VMs may have come after the inventory), is not
// counted. present is every VM the inventories list on its host.
func (d *Daemon) goneVMsLocked(present map[string]bool, answered map[string]bool, readAt time.Time) []goneVM {
	var cand []goneVM
	for _, j := range d.placedLocked() {
		rec := j.job.Record
		if j.job.State != lifecycle.Running || rec.Started.IsZero() || !rec.Started.Before(readAt) {
			continue
		}
		for _, v := range rec.VMs {
			h := d.hv.hosts[v.Host]
			if present[v.Name] || !answered[v.Site] || h == nil || !h.reachable || d.ledger.InHand(v.Name) || d.tuner.Moving(v.Host) {
				continue
			}
			cand = append(cand, goneVM{job: j, attempt: rec.Attempts, vm: v})
		}
	}
	names := make([]string, len(cand))
	for i, g := range cand {
		names[i] = g.vm.Name
	}
	var out []goneVM
	for i, n := range d.ledger.Missed(names) {
		if n >= missedFor {
			out = append(out, cand[i])
		}
	}
	return out
}

// loseGone stops following VMs gone from their hosts: an elastic job
// loses each (lifecycle.WorkerLost: a worker goes, the master or the last
// worker requeues it), any other job is requeued.
func (d *Daemon) loseGone(ctx context.Context, gone []goneVM) {
	requeued := map[*liveJob]bool{}
	for _, g := range gone {
		why := fmt.Sprintf("gone from its host %s: its agent no longer has it there (destroyed outside the daemon)", g.vm.Host)
		d.log.Warn().Str("job", g.job.id()).Str("vm", g.vm.Name).Str("host", g.vm.Host).Bool("elastic", g.job.spec.Elastic).
			Msg("a VM of a running job is gone from its host")
		if g.job.spec.Elastic {
			d.loseWorker(ctx, g.job, lifecycle.WorkerLost{VM: g.vm.Name, Host: g.vm.Host, Reason: why, Attempt: g.attempt, At: d.now()})
			continue
		}
		if requeued[g.job] {
			continue
		}
		requeued[g.job] = true
		if _, err := d.stop(ctx, g.job, lifecycle.Queued, fmt.Sprintf("VM %s %s: requeued", g.vm.Name, why), g.attempt); err != nil &&
			!errors.Is(err, lifecycle.ErrNotAllowed) {
			d.log.Error().Err(err).Str("job", g.job.id()).Msg("cannot requeue a job whose VM is gone")
		}
	}
}

// loseWorker feeds a lost worker to the job and logs what it did.
func (d *Daemon) loseWorker(ctx context.Context, lj *liveJob, e lifecycle.WorkerLost) {
	if err := d.stepJob(ctx, lj, e); err != nil {
		if !errors.Is(err, lifecycle.ErrNotAllowed) {
			d.log.Error().Err(err).Str("job", lj.id()).Str("vm", e.VM).Msg("cannot record a lost worker")
		}
		return
	}
	d.jobs.mu.Lock()
	st, workers := lj.job.State, len(lj.job.Record.VMs)-1
	d.jobs.mu.Unlock()
	if st == lifecycle.Running {
		d.log.Info().Str("job", lj.id()).Str("vm", e.VM).Str("host", e.Host).Str("why", e.Reason).Int("workers_left", workers).
			Msg("an elastic job lost a worker VM: it goes on without it")
	}
}

// lostWorkers is what Run.Lost answers for attempt n of the job: the
// worker VMs it lost, with why.
func (d *Daemon) lostWorkers(lj *liveJob, n int) map[string]string {
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	rec := lj.job.Record
	if rec.Attempts != n || len(rec.LostWorkers) == 0 {
		return nil
	}
	out := make(map[string]string, len(rec.LostWorkers))
	for _, l := range rec.LostWorkers {
		out[l.Name] = l.Reason
	}
	return out
}

// lostHostReason is why a job loses what it has on a host unreachable for
// the agent-loss grace.
func (d *Daemon) lostHostReason(host string) string {
	return fmt.Sprintf("host %s unreachable for %v or more", host, d.cfg.AgentLossGrace)
}
