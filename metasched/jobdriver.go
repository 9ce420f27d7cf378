package metasched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/capacity"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/selection"
)

// The job lifecycle's driver: it feeds each job's lifecycle.Job its events,
// commits every change to the store and only then applies it to memory, and
// carries out the actions that follow.

// stepJob feeds ev to the job's lifecycle. The change it makes is committed
// to the store in one transaction and only then applied to memory; when the
// commit fails, memory is unchanged and stepJob returns the error. Then
// stepJob carries out the other actions: answers come back as later steps.
// The steps of one job are serialised; the daemon's lock is not held while
// the store commits.
func (d *Daemon) stepJob(ctx context.Context, lj *liveJob, ev lifecycle.Event) error {
	lj.steps.Lock()
	d.jobs.mu.Lock()
	cur := lj.job
	d.jobs.mu.Unlock()
	next, acts, err := cur.Step(ev)
	// The VMs the step destroys are in the lifecycle's hands from before
	// its commit: whoever reads the job's end in the store finds them
	// held until their destruction has answered (no orphans, and the
	// demo's count of destroyed VMs waits for them).
	doomed := destroyedBy(acts)
	if len(doomed) > 0 {
		d.ledger.Take(names(doomed)...)
	}
	if err == nil && len(acts) > 0 {
		if c, ok := acts[0].(lifecycle.Commit); ok {
			err = d.commitJob(ctx, c)
			acts = acts[1:]
		}
	}
	if err != nil {
		if len(doomed) > 0 {
			d.ledger.Release(names(doomed)...)
		}
		if errors.Is(err, store.ErrConflict) {
			d.reload(ctx, lj)
		}
		lj.steps.Unlock()
		return err
	}
	d.jobs.mu.Lock()
	later := d.applyLocked(lj, cur, next, acts)
	d.jobs.mu.Unlock()
	lj.steps.Unlock()
	d.carryOutJob(ctx, lj, later)
	return nil
}

// destroyedBy lists the VMs that a step's actions destroy.
func destroyedBy(acts []lifecycle.Action) []lifecycle.VM {
	var vms []lifecycle.VM
	for _, a := range acts {
		if x, ok := a.(lifecycle.DestroyVMs); ok {
			vms = append(vms, x.VMs...)
		}
	}
	return vms
}

// commitJob writes a change of the lifecycle to the store: the
// transition, the job's record and its exit code, in one transaction.
func (d *Daemon) commitJob(ctx context.Context, c lifecycle.Commit) error {
	data, err := json.Marshal(c.Job.Record)
	if err != nil {
		return fmt.Errorf("job %s: encode its record: %w", c.Job.ID, err)
	}
	_, err = d.jobCommit(context.WithoutCancel(ctx), c.Job.ID, store.Change{From: c.From, To: c.To, Reason: c.Reason, Data: data, ExitCode: c.Job.ExitCode})
	return err
}

// reload rebuilds the job's state in memory from the store, after a commit
// found the store in another state than memory (the caller holds the job's
// steps).
func (d *Daemon) reload(ctx context.Context, lj *liveJob) {
	sj, err := d.st.Job(context.WithoutCancel(ctx), lj.id())
	if err != nil {
		d.log.Error().Err(err).Str("job", lj.id()).Msg("cannot reload the job from the store")
		return
	}
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	d.log.Warn().Str("job", lj.id()).Str("memory", string(lj.job.State)).Str("store", string(sj.State)).Msg("the job's state in memory differed from the store: reloaded")
	lj.job = fromStore(sj)
	if lj.job.State.Terminal() {
		d.unreserveLocked(lj)
	}
	d.trackLocked(lj)
}

// fromStore is the lifecycle of a job as the store has it.
func fromStore(sj store.Job) lifecycle.Job {
	j := lifecycle.Job{ID: sj.ID, Type: sj.Type, State: sj.State, Record: decodeRecord(sj.Data), ExitCode: sj.ExitCode}
	if n := len(sj.Transitions); n > 0 {
		j.Reason = sj.Transitions[n-1].Reason
	}
	return j
}

// applyLocked makes a committed change the job's state in memory and
// carries out the actions that only touch memory (reservations, stopping
// the attempt); it returns the others.
func (d *Daemon) applyLocked(lj *liveJob, prev, next lifecycle.Job, acts []lifecycle.Action) []lifecycle.Action {
	lj.job = next
	d.trackLocked(lj)
	var later []lifecycle.Action
	for _, a := range acts {
		switch a := a.(type) {
		case lifecycle.Reserve:
			d.reserveLocked(lj, a.VMs)
		case lifecycle.Unreserve:
			if next.State != lifecycle.Running {
				d.unreserveLocked(lj)
			}
			// Created: the promises stay until an inventory lists the VMs.
		case lifecycle.StopRun:
			if run := lj.runs[a.Attempt]; run != nil {
				run.cancel()
			}
		case lifecycle.DestroyVMs: // held by stepJob, released once destroyed
			later = append(later, a)
		default:
			later = append(later, a)
		}
	}
	if prev.State == next.State {
		return later
	}
	log := d.log.With().Str("job", next.ID).Str("type", next.Type).Logger()
	rec := next.Record
	switch next.State {
	case lifecycle.Planned:
		lj.waiting = ""
		d.rates.planned(next.Type, len(hostsOf(rec.Placement)), rec.Predicted)
		log.Info().Str("name", lj.spec.Name).Str("master", rec.Placement.Plan.Master).Str("clusters", clusterList(rec.Placement)).
			Int("vms", len(rec.VMs)).Float64("predicted_s", roundMs(rec.Predicted)).Msg("job planned")
	case lifecycle.Running:
		log.Info().Int("vms", len(rec.VMs)).Msg("job running: its VMs are up")
		d.kick() // the reservation is now in the inventory
	case lifecycle.Provisioning:
	default:
		ev := log.Info()
		if next.State == lifecycle.Failed {
			ev = log.Warn()
		}
		ev.Str("state", string(next.State)).Str("reason", next.Reason).Msg("job " + string(next.State))
		d.kick()
	}
	if next.State.Terminal() {
		if next.State == lifecycle.Done && !rec.Started.IsZero() && rec.Placement != nil {
			d.rates.done(next.Type, float64(len(hostsOf(rec.Placement)))*rec.Finished.Sub(rec.Started).Seconds(),
				rec.Placement.Master.Site, runTimesOf(rec).MeasuredS, rec.ProgramSeconds)
			d.metrics.observeRatio(next.Type, rec)
		}
	}
	return later
}

// carryOutJob carries out the actions of a step that reach outside the daemon:
// VM creation and the executor run in the attempt's goroutines and answer
// with later steps; VMs are destroyed before carryOut returns.
func (d *Daemon) carryOutJob(ctx context.Context, lj *liveJob, acts []lifecycle.Action) {
	for _, a := range acts {
		switch a := a.(type) {
		case lifecycle.Next:
			d.goAttempt(lj, a.Attempt, func(actx context.Context) { d.answer(actx, lj, a.Event) })
		case lifecycle.CreateVMs:
			d.goAttempt(lj, a.Attempt, func(actx context.Context) { d.provision(actx, lj, a) })
		case lifecycle.Execute:
			d.goAttempt(lj, a.Attempt, func(actx context.Context) { d.execute(actx, lj, a) })
		case lifecycle.DestroyVMs:
			d.destroyVMs(context.WithoutCancel(ctx), a.VMs)
			vms := names(a.VMs)
			d.ledger.Destroyed(d.now(), vms...)
			d.ledger.Release(vms...)
		default:
			d.log.Error().Str("job", lj.id()).Str("action", fmt.Sprintf("%T", a)).Msg("unknown lifecycle action")
		}
	}
}

// goAttempt runs f for attempt n of the job, under the attempt's context,
// which StopRun (and the daemon's end) cancels.
func (d *Daemon) goAttempt(lj *liveJob, n int, f func(context.Context)) {
	d.jobs.mu.Lock()
	a := lj.runs[n]
	if a == nil {
		parent := d.jobs.runCtx
		if parent == nil {
			parent = context.Background()
		}
		ctx, cancel := context.WithCancel(parent)
		a = &attempt{ctx: ctx, cancel: cancel, done: make(chan struct{})}
		if lj.runs == nil {
			lj.runs = map[int]*attempt{}
		}
		lj.runs[n] = a
	}
	a.active++
	d.jobs.mu.Unlock()
	d.goJob(func() {
		defer func() {
			d.jobs.mu.Lock()
			if a.active--; a.active == 0 {
				a.cancel()
				close(a.done)
				delete(lj.runs, n)
			}
			d.jobs.mu.Unlock()
		}()
		defer func() {
			// A panic in what runs for the job fails the job, not the
			// daemon.
			if r := recover(); r != nil {
				d.log.Error().Str("job", lj.id()).Str("panic", fmt.Sprint(r)).Str("stack", string(debug.Stack())).
					Msg("internal error while running a job: the job fails")
				if _, err := d.stop(context.Background(), lj, lifecycle.Failed, fmt.Sprintf("internal error: %v", r), n); err != nil &&
					!errors.Is(err, lifecycle.ErrNotAllowed) {
					d.log.Error().Err(err).Str("job", lj.id()).Msg("cannot fail the job")
				}
			}
		}()
		f(a.ctx)
	})
}

// stopping reports whether the daemon is shutting down: then a job's run
// ends without a step, and the restart resumes or requeues the job.
func (d *Daemon) stopping() bool {
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	return d.jobs.closing || (d.jobs.runCtx != nil && d.jobs.runCtx.Err() != nil)
}

// answer feeds the answer of an action to the job. An answer reports what
// already happened, so a commit that fails is tried again until the store
// takes it (or the daemon stops); an answer that no longer fits is dropped.
func (d *Daemon) answer(ctx context.Context, lj *liveJob, ev lifecycle.Event) {
	wait := 50 * time.Millisecond
	for {
		err := d.stepJob(context.WithoutCancel(ctx), lj, ev)
		if err == nil || errors.Is(err, lifecycle.ErrNotAllowed) {
			return
		}
		if d.stoppedDuring(lj, err, "the job's change") {
			return
		}
		d.log.Error().Err(err).Str("job", lj.id()).Str("event", fmt.Sprintf("%T", ev)).Dur("retry_in", wait).
			Msg("cannot record the job's change: trying again")
		select {
		case <-d.clock.After(wait):
		case <-d.runDone():
			return
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// stoppedDuring reports whether the daemon has stopped, and then logs that
// what (a change of the job) was not recorded: a commit that failed once
// the daemon stopped (a leader cut off from etcd stops before its
// commit's bound ends) is not an error of the job's, and nothing is tried
// again; the job resumes after the restart, or under the next leader.
func (d *Daemon) stoppedDuring(lj *liveJob, err error, what string) bool {
	if !d.stopping() {
		return false
	}
	d.log.Info().Err(err).Str("job", lj.id()).Msgf("daemon stopping: %s is not recorded; the job resumes after the restart, or under the next leader", what)
	return true
}

// runDone is closed when the daemon stops.
func (d *Daemon) runDone() <-chan struct{} {
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	if d.jobs.runCtx == nil {
		return nil
	}
	return d.jobs.runCtx.Done()
}

// provision creates the attempt's VMs and answers Created or
// CreateFailed.
func (d *Daemon) provision(ctx context.Context, lj *liveJob, a lifecycle.CreateVMs) {
	// Until the answer is carried out (the VMs of a stopped attempt are
	// destroyed by it), the VMs are the job's, not orphans.
	vms := names(a.VMs)
	d.ledger.Take(vms...)
	defer d.ledger.Release(vms...)
	err := d.createVMs(ctx, lj, a.Attempt, a.VMs)
	if err != nil && d.stopping() {
		return // a restart requeues the job
	}
	at := d.now()
	if err == nil {
		d.answer(ctx, lj, lifecycle.Created{Attempt: a.Attempt, VMs: a.VMs, At: at})
		return
	}
	d.answer(ctx, lj, lifecycle.CreateFailed{Attempt: a.Attempt, VMs: a.VMs, Err: err.Error(),
		Permanent: errors.Is(err, hp.ErrInvalid) || errors.Is(err, hp.ErrLimit), Boot: errors.Is(err, hp.ErrBoot), At: at})
}

// execute runs the job on its VMs and answers Exited.
func (d *Daemon) execute(ctx context.Context, lj *liveJob, a lifecycle.Execute) {
	d.jobs.mu.Lock()
	spec, predicted := lj.spec, lj.job.Record.Predicted
	d.jobs.mu.Unlock()
	vms := make([]executor.VM, len(a.VMs))
	for i, v := range a.VMs {
		vms[i] = executor.VM{Name: v.Name, Site: v.Site, Host: v.Host, Master: v.Master, VCPUs: spec.VM.VCPUs, MemoryMiB: spec.VM.MemoryMiB}
	}
	if w := d.walltime(spec); w > 0 {
		d.jobs.mu.Lock()
		started := lj.job.Record.Started
		d.jobs.mu.Unlock()
		defer d.watchWalltime(lj, a.Attempt, started.Add(w), w)()
	}
	if d.exec.Name() == "guest" {
		if err := d.vmAddresses(ctx, vms); err != nil {
			if ctx.Err() == nil {
				d.answer(ctx, lj, lifecycle.Exited{Attempt: a.Attempt, At: d.now(), Err: err.Error()})
			}
			return
		}
	}
	// After a restart the job's log has taken part of the attempt's output
	// already: the executor writes what follows.
	var from int64
	if a.Resume {
		var err error
		if from, err = d.st.OutputTaken(ctx, lj.id(), a.Attempt); err != nil {
			d.log.Warn().Err(err).Str("job", lj.id()).Msg("cannot read how much output the job's log took: it takes the attempt's output again from its start")
		}
	}
	res, err := d.exec.Run(ctx, executor.Run{JobID: lj.id(), Owner: lj.owner, Job: spec, VMs: vms,
		Predicted: duration(predicted), Elapsed: a.Elapsed,
		Dir: filepath.Join(d.cfg.DataDir, "jobs", lj.id()), Attempt: a.Attempt, Resume: a.Resume,
		Output: &logWriter{d: d, id: lj.id(), attempt: a.Attempt, at: from}, OutputFrom: from,
		Lost: func() map[string]string { return d.lostWorkers(lj, a.Attempt) }})
	if ctx.Err() != nil {
		if d.stopping() {
			d.log.Info().Str("job", lj.id()).Msg("daemon stopping: the job resumes after the restart")
		}
		return // stopped: the job has already moved on
	}
	if errors.Is(err, executor.ErrLost) {
		// Nothing ran the command to its end and nothing runs it: it
		// runs again, in a new attempt.
		d.answer(ctx, lj, lifecycle.Stop{To: lifecycle.Queued, Attempt: a.Attempt, At: d.now(),
			Reason: "the daemon restarted while the job ran, and its command left no exit record and no supervisor runs it: requeued to run again"})
		return
	}
	ev := lifecycle.Exited{Attempt: a.Attempt, At: d.now()}
	if err == nil && d.exec.Name() == "guest" {
		ev.TasksDone, ev.ProgramSeconds = d.tasksDone(ctx, lj.id(), a.Attempt)
	}
	switch {
	case err != nil:
		ev.Err = err.Error()
	case d.exec.Name() != "emulated":
		code := res.ExitCode
		ev.Code, ev.Reason = &code, res.Reason
	case res.ExitCode != 0:
		code := res.ExitCode
		ev.Code, ev.Reason = &code, res.Reason
	}
	d.answer(ctx, lj, ev)
}

// stop ends the job's current attempt (requeue, cancel or fail) and returns
// what ran for it, for the caller to wait for. attempt, when not 0, is the
// attempt meant.
func (d *Daemon) stop(ctx context.Context, lj *liveJob, to lifecycle.State, reason string, attempt ...int) (*attempt, error) {
	d.jobs.mu.Lock()
	n := lj.job.Record.Attempts
	d.jobs.mu.Unlock()
	if len(attempt) > 0 {
		n = attempt[0]
	}
	return d.stopWith(ctx, lj, lifecycle.Stop{To: to, Reason: reason, Attempt: n, At: d.now()})
}

// stopWith feeds the stop event to the job and returns the attempt it
// stopped (nil when none runs).
func (d *Daemon) stopWith(ctx context.Context, lj *liveJob, e lifecycle.Stop) (*attempt, error) {
	err := d.stepJob(ctx, lj, e)
	d.jobs.mu.Lock()
	run := lj.runs[e.Attempt]
	d.jobs.mu.Unlock()
	return run, err
}

// reserveLocked promises the capacity of the job's VMs on their hosts until
// the inventories count them (capacity.Ledger.Promise).
func (d *Daemon) reserveLocked(lj *liveJob, vms []lifecycle.VM) {
	spots := make([]capacity.Spot, len(vms))
	for i, v := range vms {
		spots[i] = capacity.Spot{VM: v.Name, Host: v.Host}
	}
	d.ledger.Promise(lj.id(), capacity.Use{VCPUs: lj.spec.VM.VCPUs, MemoryMiB: lj.spec.VM.MemoryMiB}, spots...)
}

// unreserveLocked gives back what reserveLocked promised for the job; a
// job with nothing promised is fine.
func (d *Daemon) unreserveLocked(lj *liveJob) { d.ledger.DropJob(lj.id()) }

// createVMs creates the job's VMs of attempt attempt, concurrently. Under
// the guest executor, a pool with an image gets the attempt's ssh key
// (executor.AttemptSSHKey) in every spec: a VM of a cloud-init image
// authorizes it for its job user.
func (d *Daemon) createVMs(ctx context.Context, lj *liveJob, attempt int, vms []lifecycle.VM) error {
	var keys []string
	if d.exec.Name() == "guest" && d.imageOf(lj.typ()) != "" {
		key, err := executor.AttemptSSHKey(filepath.Join(d.cfg.DataDir, "jobs", lj.id()), attempt, lj.id())
		if err != nil {
			return err
		}
		keys = []string{key.Authorized}
	}
	errs := make([]error, len(vms))
	var wg sync.WaitGroup
	for i, v := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := d.site(v.Site)
			if s == nil {
				errs[i] = fmt.Errorf("vm %s: no agent for site %s", v.Name, v.Site)
				return
			}
			vm := lj.spec.VM
			_, err := s.agent.CreateVM(ctx, hp.VMSpec{Name: v.Name, Host: v.Host, Pool: lj.typ(), Job: lj.id(),
				VCPUs: vm.VCPUs, MemoryMiB: vm.MemoryMiB, Image: d.imageOf(lj.typ()), SSHKeys: keys,
				MaxVCPUs: vm.VCPUs + d.cfg.VMHeadroom.VCPUs, MaxMemoryMiB: vm.MemoryMiB + d.cfg.VMHeadroom.MemoryMiB,
				WalltimeSeconds: walltimeSeconds(lj.spec.Walltime)})
			if err != nil {
				errs[i] = fmt.Errorf("vm %s on %s: %w", v.Name, v.Host, err)
				return
			}
			d.vmsCreated.Add(1)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// walltimeSeconds is a job's walltime as a VM's spec gives it: whole
// seconds, rounded up (0: none).
func walltimeSeconds(w selection.Duration) int64 {
	return int64((time.Duration(w) + time.Second - 1) / time.Second)
}

// imageOf is the image of a pool's VMs (its job type's), "" for none.
func (d *Daemon) imageOf(pool string) string {
	jt, _ := d.cfg.Pool(pool)
	return jt.Image
}

// walltime is the longest an attempt of the job may run: its job file's,
// else the configuration's default, at most the configuration's max; 0:
// no bound.
func (d *Daemon) walltime(spec *selection.Job) time.Duration {
	w := d.cfg.Walltime.Default
	if spec != nil && spec.Walltime > 0 {
		w = time.Duration(spec.Walltime)
	}
	if most := d.cfg.Walltime.Max; most > 0 && w > most {
		w = most
	}
	return w
}

// watchWalltime fails the attempt of the job at end (on the daemon's
// clock; end is from the attempt's start, in the job's record, so a
// restart keeps it): its run is cancelled (the executor stops its
// processes) and its VMs destroyed, and the job fails, not requeued. The
// function it returns stops the watch and waits for it.
func (d *Daemon) watchWalltime(lj *liveJob, attempt int, end time.Time, w time.Duration) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := d.clock.NewTimer(max(end.Sub(d.now()), 0))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.Chan():
		}
		reason := fmt.Sprintf("walltime %s exceeded", w)
		d.log.Warn().Str("job", lj.id()).Int("attempt", attempt).Dur("walltime", w).Msg("the job ran past its walltime: failing it")
		if _, err := d.stop(context.WithoutCancel(ctx), lj, lifecycle.Failed, reason, attempt); err != nil && !errors.Is(err, lifecycle.ErrNotAllowed) {
			d.log.Error().Err(err).Str("job", lj.id()).Msg("cannot fail the job past its walltime")
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// errNoAddress: a site gave a VM no address (it has no network).
var errNoAddress = errors.New("gave it no address")

// addressesFor is how long execute tries to read the addresses of a
// job's VMs from agents that fail, before the attempt fails.
const addressesFor = time.Minute

// vmAddresses fills the addresses (and job users) of the job's VMs from
// their sites' inventories, asked now (a VM's address is kept by its
// agent, with the VM), trying again for addressesFor while an agent
// fails.
func (d *Daemon) vmAddresses(ctx context.Context, vms []executor.VM) error {
	start, pause := d.now(), 250*time.Millisecond
	for {
		err := d.vmAddressesOnce(ctx, vms)
		if err == nil || ctx.Err() != nil || errors.Is(err, errNoAddress) || d.now().Sub(start) >= addressesFor {
			return err
		}
		d.log.Warn().Err(err).Dur("retry_in", pause).Msg("cannot read the addresses of the job's VMs: trying again")
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-d.clock.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// vmAddressesOnce is one try of vmAddresses: one inventory per site.
func (d *Daemon) vmAddressesOnce(ctx context.Context, vms []executor.VM) error {
	found := map[string]hp.VM{}
	asked := map[string]bool{}
	for _, v := range vms {
		if asked[v.Site] {
			continue
		}
		asked[v.Site] = true
		s := d.site(v.Site)
		if s == nil {
			return fmt.Errorf("vm %s: no agent for site %s", v.Name, v.Site)
		}
		inv, err := s.agent.Inventory(ctx)
		if err != nil {
			return fmt.Errorf("the addresses of the job's VMs: site %s: %w", v.Site, err)
		}
		for _, h := range inv.Hosts {
			for _, vm := range h.VMs {
				found[vm.Name] = vm
			}
		}
	}
	for i, v := range vms {
		vm, ok := found[v.Name]
		switch {
		case !ok:
			return fmt.Errorf("vm %s: not in the inventory of site %s", v.Name, v.Site)
		case vm.Address == "":
			return fmt.Errorf("vm %s: site %s %w: the guest executor needs the site's network", v.Name, v.Site, errNoAddress)
		}
		vms[i].Address, vms[i].User, vms[i].Kind = vm.Address, vm.User, vm.Kind
	}
	return nil
}

// destroyVMs destroys VMs, concurrently; a VM already gone is fine.
func (d *Daemon) destroyVMs(ctx context.Context, vms []lifecycle.VM) {
	var wg sync.WaitGroup
	for _, v := range vms {
		s := d.site(v.Site)
		if s == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			switch err := s.agent.DestroyVM(c, v.Name); {
			case err == nil:
				d.vmsDestroyed.Add(1)
			case errors.Is(err, hp.ErrNotFound):
			case errors.Is(err, hp.ErrBusy) && strings.Contains(err.Error(), "destroy in progress"):
				// A switch's reconfiguration destroys the VMs of the jobs it
				// requeued as the jobs' own stop does: one of the two does it.
				d.log.Debug().Err(err).Str("vm", v.Name).Msg("vm already being destroyed by another request: nothing to do")
			default:
				d.log.Warn().Err(err).Str("vm", v.Name).
					Msg("cannot destroy vm now: the daemon destroys it when its agent next lists it (a VM no job owns is destroyed then)")
			}
		}()
	}
	wg.Wait()
}

// lostJob is a live job with a VM on an unreachable host.
type lostJob struct {
	job     *liveJob
	attempt int
	host    string
	// workers, when set, are the worker VMs of a running elastic job on
	// the unreachable hosts: the job loses them and goes on.
	workers []lifecycle.VM
}

// jobsOnLostHostsLocked lists the live jobs placed on a host unreachable
// for the agent-loss grace or longer.
func (d *Daemon) jobsOnLostHostsLocked() []lostJob {
	var out []lostJob
	lost := func(h string) bool {
		rt := d.hv.hosts[h]
		return rt != nil && d.lost(rt)
	}
	for _, j := range d.jobs.index.placed { // any order: each is stopped on its own
		for _, h := range j.hostNames() {
			if !lost(h) {
				continue
			}
			l := lostJob{job: j, attempt: j.job.Record.Attempts, host: h}
			if names, goesOn := elasticLossLocked(j, lost); goesOn {
				for _, v := range j.job.Record.VMs {
					if slices.Contains(names, v.Name) {
						l.workers = append(l.workers, v)
					}
				}
			}
			out = append(out, l)
			break
		}
	}
	return out
}

// logWriter appends the output of a job's attempt to the store, with
// where it stands in that output: at bytes of it were taken before.
type logWriter struct {
	d       *Daemon
	id      string
	attempt int
	at      int64
}

func (w *logWriter) Write(p []byte) (int, error) {
	if err := w.d.st.AppendLogAt(context.Background(), w.id, w.attempt, w.at, p); err != nil {
		if w.d.stopping() {
			// Not the job's fault: the executor says the daemon stops.
			return 0, fmt.Errorf("%w: %w", executor.ErrDetached, err)
		}
		return 0, err
	}
	w.at += int64(len(p))
	return len(p), nil
}

// duration converts seconds to a time.Duration, the longest one for what
// does not fit (a plan of ten years at a time_scale of a million).
func duration(seconds float64) time.Duration {
	if !(seconds < float64(math.MaxInt64)/float64(time.Second)) {
		return math.MaxInt64
	}
	return time.Duration(seconds * float64(time.Second))
}

// names lists the VMs' names.
func names(vms []lifecycle.VM) []string {
	out := make([]string, len(vms))
	for i, v := range vms {
		out[i] = v.Name
	}
	return out
}

// roundMs rounds seconds to the millisecond, for the log: a quantity an
// operator reads, not 1.0000000000000002.
func roundMs(s float64) float64 { return math.Round(s*1000) / 1000 }
