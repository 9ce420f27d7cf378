package metasched

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/selection"
)

// restoreJobs loads every live job of the store into memory. Run's
// resumeJobs then requeues or resumes them.
func (d *Daemon) restoreJobs(ctx context.Context) error {
	js, err := d.st.Jobs(ctx, store.JobFilter{States: []store.JobState{store.Queued, store.Planned, store.Provisioning, store.Running}})
	if err != nil {
		return err
	}
	for _, sj := range js {
		var spec selection.Job
		if err := json.Unmarshal(sj.Spec, &spec); err != nil {
			return fmt.Errorf("job %s: corrupt spec: %w", sj.ID, err)
		}
		lj := newLiveJob(fromStore(sj), &spec, sj.Owner, sj.Submitted)
		if _, _, ok := d.jobType(sj.Type); !ok {
			// The configuration dropped the job's type: it can never run.
			if _, err := d.stop(ctx, lj, lifecycle.Failed, fmt.Sprintf("job type %q is no longer configured", sj.Type)); err != nil {
				return err
			}
			continue
		}
		d.addJobLocked(lj)
	}
	return nil
}

// resumeJobs picks up the jobs a previous run of the daemon left live: a
// planned or provisioning job goes back to the queue (its VMs, if any, are
// destroyed); a running job resumes: a command's run takes the exit its
// supervisor recorded, or follows the supervisor that still runs it (and
// only when neither is there is the job requeued to run again, see
// execute); an emulated run resumes where it was when its VMs still exist,
// and runs again from the start otherwise; a run inside the VMs (guest)
// is followed again when its VMs still exist (its processes run on in
// them; with no trace of them there it runs again, see execute), and runs
// again otherwise.
func (d *Daemon) resumeJobs(ctx context.Context) {
	d.jobs.mu.Lock()
	var todo []*liveJob
	for _, j := range d.jobs.live {
		if j.job.State != lifecycle.Queued {
			todo = append(todo, j)
		}
	}
	d.jobs.mu.Unlock()
	slices.SortFunc(todo, func(a, b *liveJob) int { return strings.Compare(a.id(), b.id()) })
	for _, j := range todo {
		if j.job.State == lifecycle.Running && (d.exec.Name() == HostCommand || (d.exec.Name() == "emulated" || d.exec.Name() == "guest") && d.resumable(j)) {
			d.log.Info().Str("job", j.id()).Msg("resuming a running job after a restart")
			if err := d.stepJob(ctx, j, lifecycle.Resume{At: d.now()}); err != nil {
				d.log.Error().Err(err).Str("job", j.id()).Msg("cannot resume")
			}
			continue
		}
		reason := "the daemon restarted before the job ran: requeued"
		if j.job.State == lifecycle.Running {
			reason = "the daemon restarted while the job ran: requeued to run again"
		}
		if _, err := d.stop(ctx, j, lifecycle.Queued, reason); err != nil {
			d.log.Error().Err(err).Str("job", j.id()).Msg("cannot requeue")
		}
	}
	d.kick()
}

// resumable reports whether a running job's VMs let it resume after a
// restart (the emulated and guest executors): every VM on its host, by
// the hosts' last inventory; for an elastic job, its master and at least
// one worker (the workers missing are lost once refreshes miss them, see
// goneVMsLocked; a job that lost workers before the restart has only the
// others among its VMs).
func (d *Daemon) resumable(j *liveJob) bool {
	d.lockR()
	defer d.unlockR()
	vms := j.job.Record.VMs
	if len(vms) == 0 {
		return false
	}
	missing := slices.DeleteFunc(slices.Clone(vms), func(v lifecycle.VM) bool {
		h := d.hv.hosts[v.Host]
		return h != nil && slices.ContainsFunc(h.inv.VMs, func(vm hp.VM) bool { return vm.Name == v.Name })
	})
	switch {
	case len(missing) == 0:
		return true
	case !j.spec.Elastic || slices.ContainsFunc(missing, func(v lifecycle.VM) bool { return v.Master }):
		return false
	}
	return len(missing) < len(vms)-1 // a worker is left
}
