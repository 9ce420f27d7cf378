package metasched

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/graph"
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/executor"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/selection"
)

// jobRT is a live job in memory. Its state is the daemon's decision; the
// store follows (a crash between the two leaves the store one step behind,
// which a restart handles).
type jobRT struct {
	id, typ   string
	spec      *selection.Job
	state     store.JobState
	reason    string
	submitted time.Time
	data      jobData
	// waiting says why a queued job is not planned yet.
	waiting string
	// cancel stops the job's run goroutine with a *stopCause; done is
	// closed when that goroutine has ended.
	cancel   context.CancelCauseFunc
	done     chan struct{}
	stopping bool
	lostHost string
	lastTune time.Time
}

// stopCause says why a job's run was stopped and where the job goes.
type stopCause struct {
	to     store.JobState
	reason string
}

func (c *stopCause) Error() string { return c.reason }

func (j *jobRT) stop(to store.JobState, reason string) {
	if j.cancel != nil && !j.stopping {
		j.stopping = true
		j.cancel(&stopCause{to: to, reason: reason})
	}
}

// onHost reports whether the job is placed on the host (planned,
// provisioning or running).
func (j *jobRT) onHost(name string) bool {
	return slices.Contains(j.hostNames(), name)
}

// hostNames lists the hosts of a planned, provisioning or running job:
// those of its VMs (which tuning may have moved), else of its plan.
func (j *jobRT) hostNames() []string {
	if j.state == store.Queued || j.state.Terminal() || j.data.Placement == nil {
		return nil
	}
	var out []string
	if len(j.data.VMs) > 0 {
		for _, v := range j.data.VMs {
			if !slices.Contains(out, v.Host) {
				out = append(out, v.Host)
			}
		}
		return out
	}
	for _, h := range hostsOf(j.data.Placement) {
		out = append(out, h.Host)
	}
	return out
}

// hostsOf lists the distinct hosts of a placement.
func hostsOf(p *gramvm.Placement) []gramvm.HostRef {
	out := []gramvm.HostRef{p.Master}
	for _, w := range p.Workers {
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

// RequestError is a rejected request: a 4xx status with field problems.
type RequestError struct {
	Status int
	Code   string
	Msg    string
	Fields []api.FieldError
}

func (e *RequestError) Error() string {
	if len(e.Fields) == 0 {
		return e.Msg
	}
	lines := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		lines[i] = f.Field + ": " + f.Problem
		if f.Field == "" {
			lines[i] = f.Problem
		}
	}
	return e.Msg + ":\n" + strings.Join(lines, "\n")
}

func invalid(fields ...api.FieldError) *RequestError {
	return &RequestError{Status: 400, Code: api.CodeInvalid, Msg: "the job is not valid", Fields: fields}
}

// fieldErrors turns the "body: FIELD: problem" lines of a parse error into
// field errors.
func fieldErrors(err error) []api.FieldError {
	var out []api.FieldError
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimPrefix(line, "body: ")
		f, p, ok := strings.Cut(line, ": ")
		if !ok || strings.ContainsAny(f, " \t") {
			out = append(out, api.FieldError{Problem: line})
			continue
		}
		out = append(out, api.FieldError{Field: f, Problem: p})
	}
	return out
}

// parseJob checks a job file sent to the API: the job's own rules, a
// registered type, and a VM that some cluster's machines can hold. A job
// file without vm gets its type's VM shape.
func (d *Daemon) parseJob(body []byte) (*selection.Job, error) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil, invalid(api.FieldError{Problem: "the body is empty: send a job file (YAML or JSON)"})
	}
	j, err := selection.ParseJob("body", body)
	if err != nil {
		return nil, invalid(fieldErrors(err)...)
	}
	jt, _, ok := d.jobType(j.Type)
	if !ok {
		names := make([]string, len(d.types))
		for i, t := range d.types {
			names[i] = t.Name
		}
		return nil, invalid(api.FieldError{Field: "type", Problem: fmt.Sprintf("no job type %q: the pools are %s", j.Type, strings.Join(names, ", "))})
	}
	var raw map[string]any
	if yaml.Unmarshal(body, &raw) == nil {
		if _, has := raw["vm"]; !has {
			j.VM = selection.VM{VCPUs: jt.VCPUs, MemoryMiB: jt.MemoryMiB}
		}
	}
	fits := slices.ContainsFunc(d.grid.Clusters, func(c graph.Cluster) bool {
		return c.Cores >= j.VM.VCPUs && c.MemoryMiB >= j.VM.MemoryMiB
	})
	if !fits {
		return nil, invalid(api.FieldError{Field: "vm", Problem: fmt.Sprintf("no cluster's machines can hold a VM of %d vCPUs and %d MiB", j.VM.VCPUs, j.VM.MemoryMiB)})
	}
	return j, nil
}

// Submit accepts a job file (YAML or JSON). The job is on disk when Submit
// returns.
func (d *Daemon) Submit(ctx context.Context, body []byte) (api.Job, error) {
	j, err := d.parseJob(body)
	if err != nil {
		return api.Job{}, err
	}
	sj, err := d.st.SubmitJob(ctx, j.Type, mustJSON(j), "submitted")
	if err != nil {
		return api.Job{}, err
	}
	rt := &jobRT{id: sj.ID, typ: j.Type, spec: j, state: store.Queued, reason: "submitted", submitted: sj.Submitted}
	d.mu.Lock()
	d.jobs[sj.ID] = rt
	d.rates[j.Type].arrival(sj.Submitted)
	v := d.jobViewLocked(rt, sj)
	d.mu.Unlock()
	d.kick()
	return v, nil
}

// Cancel cancels a live job and waits (up to ctx) until its VMs are gone.
func (d *Daemon) Cancel(ctx context.Context, id string) (api.Job, error) {
	d.mu.Lock()
	rt := d.jobs[id]
	if rt == nil {
		d.mu.Unlock()
		j, err := d.st.Job(ctx, id)
		if err != nil {
			return api.Job{}, notFoundJob(id, err)
		}
		return api.Job{}, &RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("job %s is %s: only a live job can be cancelled", id, j.State)}
	}
	var done chan struct{}
	if rt.state == store.Queued {
		rt.state, rt.reason = store.Cancelled, "cancelled through the API"
		delete(d.jobs, id)
		d.mu.Unlock()
		if _, err := d.st.Transition(context.WithoutCancel(ctx), id, store.Queued, store.Cancelled, "cancelled through the API"); err != nil {
			return api.Job{}, err
		}
	} else {
		rt.stop(store.Cancelled, "cancelled through the API")
		done = rt.done
		d.mu.Unlock()
	}
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return d.Job(ctx, id)
}

func notFoundJob(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no job %q", id)}
	}
	return err
}

// Job returns one job.
func (d *Daemon) Job(ctx context.Context, id string) (api.Job, error) {
	sj, err := d.st.Job(ctx, id)
	if err != nil {
		return api.Job{}, notFoundJob(id, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.jobViewLocked(d.jobs[id], sj), nil
}

// jobViewLocked builds the API's view of a job from the store's record and,
// for a live job, the daemon's memory.
func (d *Daemon) jobViewLocked(rt *jobRT, sj store.Job) api.Job {
	v := api.Job{JobHead: api.JobHead{ID: sj.ID, Type: sj.Type, State: sj.State, Submitted: sj.Submitted, Updated: sj.Submitted},
		Transitions: sj.Transitions, ExitCode: sj.ExitCode}
	if n := len(sj.Transitions); n > 0 {
		v.Reason, v.Updated = sj.Transitions[n-1].Reason, sj.Transitions[n-1].At
	}
	var spec selection.Job
	if err := json.Unmarshal(sj.Spec, &spec); err == nil {
		v.Spec, v.Name = spec, spec.Name
	}
	data := decodeJobData(sj.Data)
	if rt != nil && !sj.State.Terminal() {
		data = rt.data
		if rt.state == store.Queued && rt.waiting != "" && sj.State == store.Queued {
			v.Reason = "waiting: " + rt.waiting
		}
	}
	v.Placement, v.VMs, v.Attempts, v.PredictedSeconds = data.Placement, data.VMs, data.Attempts, data.Predicted
	if !data.Started.IsZero() && !data.Finished.IsZero() {
		v.ActualSeconds = data.Finished.Sub(data.Started).Seconds()
	}
	if v.Placement != nil {
		v.Explanation = explain(v.Placement)
	}
	return v
}

// Jobs lists jobs.
func (d *Daemon) Jobs(ctx context.Context, f store.JobFilter) (api.JobList, error) {
	limit := f.Limit
	if limit > 0 {
		f.Limit = limit + 1
	}
	js, err := d.st.Jobs(ctx, f)
	if err != nil {
		return api.JobList{}, err
	}
	out := api.JobList{Jobs: make([]api.Job, 0, len(js))}
	if limit > 0 && len(js) > limit {
		js = js[:limit]
		out.Next = js[limit-1].ID
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, j := range js {
		out.Jobs = append(out.Jobs, d.jobViewLocked(d.jobs[j.ID], j))
	}
	return out, nil
}

// restoreJobs loads every live job of the store. Run's resumeJobs then
// requeues or resumes them.
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
		rt := &jobRT{id: sj.ID, typ: sj.Type, spec: &spec, state: sj.State, submitted: sj.Submitted, data: decodeJobData(sj.Data)}
		if _, _, ok := d.jobType(sj.Type); !ok {
			// The configuration dropped the job's type: it can never run.
			if _, err := d.st.Transition(ctx, sj.ID, sj.State, store.Failed, fmt.Sprintf("job type %q is no longer configured", sj.Type)); err != nil {
				return err
			}
			continue
		}
		d.jobs[sj.ID] = rt
	}
	return nil
}

// resumeJobs picks up the jobs a previous run of the daemon left live: a
// planned or provisioning job goes back to the queue (its VMs, if any, are
// destroyed), a running job resumes where it was when the emulated
// executor runs it and its VMs still exist, and runs again from the start
// otherwise (a command died with the daemon).
func (d *Daemon) resumeJobs(ctx context.Context) {
	d.mu.Lock()
	var todo []*jobRT
	for _, j := range d.jobs {
		if j.state != store.Queued {
			todo = append(todo, j)
		}
	}
	d.mu.Unlock()
	slices.SortFunc(todo, func(a, b *jobRT) int { return strings.Compare(a.id, b.id) })
	for _, j := range todo {
		if j.state == store.Running && d.exec.Name() == "emulated" && d.vmsExist(j) {
			jctx, cancel := context.WithCancelCause(ctx)
			d.mu.Lock()
			j.cancel, j.done = cancel, make(chan struct{})
			d.reserveLocked(j)
			d.mu.Unlock()
			d.log.Info().Str("job", j.id).Msg("resuming a running job after a restart")
			d.goJob(func() { d.run(jctx, j, true) })
			continue
		}
		d.destroyVMs(ctx, j.data.VMs)
		reason := "the daemon restarted before the job ran: requeued"
		if j.state == store.Running {
			reason = "the daemon restarted while the job ran: requeued to run again"
		}
		if _, err := d.st.Transition(ctx, j.id, j.state, store.Queued, reason); err != nil {
			d.log.Error().Err(err).Str("job", j.id).Msg("cannot requeue")
			continue
		}
		d.mu.Lock()
		j.state, j.reason, j.data.VMs = store.Queued, reason, nil
		d.mu.Unlock()
	}
	d.kick()
}

// vmsExist reports whether every VM of the job is on its host, by the
// hosts' last inventory.
func (d *Daemon) vmsExist(j *jobRT) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(j.data.VMs) == 0 {
		return false
	}
	for _, v := range j.data.VMs {
		h := d.hosts[v.Host]
		if h == nil || !slices.ContainsFunc(h.inv.VMs, func(vm hp.VM) bool { return vm.Name == v.Name }) {
			return false
		}
	}
	return true
}

// dispatchLoop plans queued jobs whenever something changed, and at least
// four times a second.
func (d *Daemon) dispatchLoop(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C:
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
				if j.typ == jt.Name && j.state == store.Queued {
					j.waiting = "no free host in pool " + jt.Name
				}
			}
			d.mu.Unlock()
			continue
		}
		var queue []*jobRT
		for _, j := range d.jobs {
			if j.typ == jt.Name && j.state == store.Queued {
				queue = append(queue, j)
			}
		}
		d.mu.Unlock()
		slices.SortFunc(queue, func(a, b *jobRT) int { return strings.Compare(a.id, b.id) })
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
				d.log.Error().Err(err).Str("job", j.id).Msg("plan")
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
			if !d.claim(j, &pl) {
				continue
			}
			d.start(ctx, j, pl)
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
		r := d.reserved[name]
		if h.inv.FreeVCPUs-r.vcpus >= 1 && h.inv.FreeMemoryMiB-r.mem >= 1 {
			return true
		}
	}
	return false
}

func (d *Daemon) setWaiting(j *jobRT, why string) {
	d.mu.Lock()
	j.waiting = why
	d.mu.Unlock()
}

// claim moves a queued job to planned in memory and reserves its hosts'
// capacity, if the job is still queued and the hosts still free.
func (d *Daemon) claim(j *jobRT, pl *gramvm.Placement) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if j.state != store.Queued || d.jobs[j.id] != j {
		return false
	}
	free := d.freeLocked(j.typ, j.spec.VM)
	need := map[string]int{}
	for _, h := range append([]gramvm.HostRef{pl.Master}, pl.Workers...) {
		need[h.Host]++
	}
	for _, h := range hostsOf(pl) {
		if !slices.Contains(free[h.Site], h.Host) {
			return false
		}
		hi := d.hosts[h.Host].inv
		r := d.reserved[h.Host]
		if hi.FreeVCPUs-r.vcpus < need[h.Host]*j.spec.VM.VCPUs || hi.FreeMemoryMiB-r.mem < need[h.Host]*j.spec.VM.MemoryMiB {
			return false
		}
	}
	j.state, j.waiting, j.stopping = store.Planned, "", false
	j.data.Placement = pl
	j.data.Attempts++
	j.data.VMs = vmNames(j.id, j.data.Attempts, pl)
	j.data.Started, j.data.Finished = time.Time{}, time.Time{}
	j.data.Predicted = pl.Plan.Runtime
	if d.cfg.Executor.Name == "emulated" {
		j.data.Predicted = pl.Plan.Runtime * d.cfg.Executor.TimeScale
	}
	d.reserveLocked(j)
	d.rates[j.typ].planned(len(hostsOf(pl)), j.data.Predicted)
	return true
}

// reserveLocked promises the capacity of the job's VMs on their hosts until
// an inventory taken after they exist shows them.
func (d *Daemon) reserveLocked(j *jobRT) {
	for _, v := range j.data.VMs {
		r := d.reserved[v.Host]
		r.vcpus += j.spec.VM.VCPUs
		r.mem += j.spec.VM.MemoryMiB
		d.reserved[v.Host] = r
	}
}

func (d *Daemon) unreserveLocked(j *jobRT) {
	for _, v := range j.data.VMs {
		r := d.reserved[v.Host]
		r.vcpus -= j.spec.VM.VCPUs
		r.mem -= j.spec.VM.MemoryMiB
		if r.vcpus <= 0 && r.mem <= 0 {
			delete(d.reserved, v.Host)
		} else {
			d.reserved[v.Host] = r
		}
	}
}

// vmNames names the job's VMs: JOB-aATTEMPT-m for the master and -wN for
// the workers, so that VMs of an earlier attempt never collide.
func vmNames(id string, attempt int, pl *gramvm.Placement) []api.JobVM {
	out := []api.JobVM{{Name: fmt.Sprintf("%s-a%d-m", id, attempt), Site: pl.Master.Site, Host: pl.Master.Host, Master: true}}
	for i, w := range pl.Workers {
		out = append(out, api.JobVM{Name: fmt.Sprintf("%s-a%d-w%d", id, attempt, i+1), Site: w.Site, Host: w.Host})
	}
	return out
}

// start records the plan and runs the job in its own goroutine.
func (d *Daemon) start(ctx context.Context, j *jobRT, pl gramvm.Placement) {
	jctx, cancel := context.WithCancelCause(ctx)
	d.mu.Lock()
	j.cancel, j.done = cancel, make(chan struct{})
	data := j.data
	d.mu.Unlock()
	d.goJob(func() {
		if _, err := d.st.SetJobData(ctx, j.id, mustJSON(data)); err != nil {
			d.abandon(j, err)
			return
		}
		why := fmt.Sprintf("planned: master %s, %d machines on %s, predicted %.3gs", pl.Plan.Master, pl.Plan.Machines,
			clusterList(&pl), data.Predicted)
		if _, err := d.st.Transition(ctx, j.id, store.Queued, store.Planned, why); err != nil {
			d.abandon(j, err)
			return
		}
		d.log.Info().Str("job", j.id).Str("name", j.spec.Name).Str("type", j.typ).Str("master", pl.Plan.Master).
			Str("clusters", clusterList(&pl)).Int("vms", len(data.VMs)).Float64("predicted_s", data.Predicted).Msg("job planned")
		d.run(jctx, j, false)
	})
}

// abandon gives a claimed job back to the queue after a store failure (the
// store still has it queued).
func (d *Daemon) abandon(j *jobRT, err error) {
	d.log.Error().Err(err).Str("job", j.id).Msg("cannot record the plan: the job stays queued")
	d.mu.Lock()
	d.unreserveLocked(j)
	j.state, j.data.VMs, j.data.Placement = store.Queued, nil, nil
	j.cancel, j.stopping = nil, false
	close(j.done)
	d.mu.Unlock()
}

func clusterList(pl *gramvm.Placement) string {
	parts := make([]string, len(pl.Plan.Clusters))
	for i, c := range pl.Plan.Clusters {
		parts[i] = fmt.Sprintf("%s×%d", c.Name, c.Machines)
	}
	return strings.Join(parts, " ")
}

// run provisions the job's VMs, runs it and tears it down. resumed: the job
// was running before a restart and its VMs exist.
func (d *Daemon) run(ctx context.Context, j *jobRT, resumed bool) {
	defer close(j.done)
	bg := context.WithoutCancel(ctx)
	log := d.log.With().Str("job", j.id).Str("type", j.typ).Logger()
	d.mu.Lock()
	data := j.data
	d.mu.Unlock()
	from := store.Planned
	if !resumed {
		if _, err := d.st.Transition(bg, j.id, store.Planned, store.Provisioning,
			fmt.Sprintf("creating %d VMs", len(data.VMs))); err != nil {
			d.finish(bg, j, store.Planned, store.Queued, "cannot record provisioning: "+err.Error(), nil)
			return
		}
		d.setState(j, store.Provisioning)
		from = store.Provisioning
		if err := d.createVMs(ctx, j, data.VMs); err != nil {
			d.destroyVMs(bg, data.VMs)
			to, reason := store.Queued, "provisioning failed, requeued: "+err.Error()
			var sc *stopCause
			switch {
			case errors.As(context.Cause(ctx), &sc):
				to, reason = sc.to, sc.reason
			case ctx.Err() != nil:
				return // the daemon is stopping: a restart requeues the job
			case errors.Is(err, hp.ErrInvalid) || errors.Is(err, hp.ErrLimit):
				to, reason = store.Failed, "provisioning failed: "+err.Error()
			}
			d.finish(bg, j, from, to, reason, nil)
			return
		}
		d.mu.Lock()
		d.unreserveLocked(j)
		j.data.Started = d.now()
		data = j.data
		d.mu.Unlock()
		if _, err := d.st.SetJobData(bg, j.id, mustJSON(data)); err != nil {
			log.Error().Err(err).Msg("cannot record the job's start")
		}
		if _, err := d.st.Transition(bg, j.id, store.Provisioning, store.Running,
			fmt.Sprintf("%d VMs up", len(data.VMs))); err != nil {
			d.destroyVMs(bg, data.VMs)
			d.finish(bg, j, store.Provisioning, store.Queued, "cannot record running: "+err.Error(), nil)
			return
		}
		d.setState(j, store.Running)
		log.Info().Int("vms", len(data.VMs)).Msg("job running: its VMs are up")
		d.kick() // the reservation is now in the inventory
	} else {
		d.mu.Lock()
		d.unreserveLocked(j)
		d.mu.Unlock()
	}
	from = store.Running
	vms := make([]executor.VM, len(data.VMs))
	for i, v := range data.VMs {
		vms[i] = executor.VM{Name: v.Name, Site: v.Site, Host: v.Host, Master: v.Master, VCPUs: j.spec.VM.VCPUs, MemoryMiB: j.spec.VM.MemoryMiB}
	}
	elapsed := time.Duration(0)
	if resumed {
		elapsed = d.now().Sub(data.Started)
	}
	out := &logWriter{d: d, id: j.id}
	res, err := d.exec.Run(ctx, executor.Run{JobID: j.id, Job: j.spec, VMs: vms,
		Predicted: time.Duration(data.Predicted * float64(time.Second)), Elapsed: elapsed,
		Dir: filepath.Join(d.cfg.DataDir, "jobs", j.id), Output: out})
	var sc *stopCause
	if errors.As(context.Cause(ctx), &sc) {
		d.destroyVMs(bg, data.VMs)
		d.finish(bg, j, from, sc.to, sc.reason, nil)
		return
	}
	if ctx.Err() != nil {
		log.Info().Msg("daemon stopping: the job resumes after the restart")
		return
	}
	d.destroyVMs(bg, data.VMs)
	switch {
	case err != nil:
		d.finish(bg, j, from, store.Failed, "executor: "+err.Error(), nil)
	case res.ExitCode != 0:
		reason := fmt.Sprintf("exit code %d", res.ExitCode)
		if res.Reason != "" {
			reason += ": " + res.Reason
		}
		d.finish(bg, j, from, store.Failed, reason, &res.ExitCode)
	default:
		code := 0
		if d.exec.Name() == "emulated" {
			d.finish(bg, j, from, store.Done, "completed", nil)
		} else {
			d.finish(bg, j, from, store.Done, "exit code 0", &code)
		}
	}
}

func (d *Daemon) setState(j *jobRT, s store.JobState) {
	d.mu.Lock()
	j.state = s
	d.mu.Unlock()
}

// finish records the job's last transition of this attempt: back to the
// queue, or terminal.
func (d *Daemon) finish(ctx context.Context, j *jobRT, from, to store.JobState, reason string, code *int) {
	log := d.log.With().Str("job", j.id).Logger()
	now := d.now()
	d.mu.Lock()
	d.unreserveLocked(j)
	started := j.data.Started
	if to == store.Done || to == store.Failed || to == store.Cancelled {
		j.data.Finished = now
	}
	data := j.data
	if to == store.Queued {
		data.VMs = nil
	}
	d.mu.Unlock()
	if code != nil {
		if _, err := d.st.SetExitCode(ctx, j.id, *code); err != nil {
			log.Error().Err(err).Msg("cannot record the exit code")
		}
	}
	if _, err := d.st.SetJobData(ctx, j.id, mustJSON(data)); err != nil {
		log.Error().Err(err).Msg("cannot record the job's data")
	}
	if _, err := d.st.Transition(ctx, j.id, from, to, reason); err != nil {
		log.Error().Err(err).Str("to", string(to)).Msg("cannot record the job's transition")
	}
	ev := log.Info()
	if to == store.Failed {
		ev = log.Warn()
	}
	ev.Str("state", string(to)).Str("reason", reason).Msg("job " + string(to))
	d.mu.Lock()
	j.state, j.reason, j.stopping, j.cancel = to, reason, false, nil
	if to == store.Queued {
		j.data.VMs, j.data.Placement = nil, nil
	}
	if to.Terminal() {
		delete(d.jobs, j.id)
		if to == store.Done && !started.IsZero() {
			hosts := len(hostsOf(data.Placement))
			d.rates[j.typ].completion(float64(hosts) * now.Sub(started).Seconds())
		}
	}
	d.mu.Unlock()
	d.kick()
}

// createVMs creates the job's VMs, concurrently.
func (d *Daemon) createVMs(ctx context.Context, j *jobRT, vms []api.JobVM) error {
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
			_, err := s.agent.CreateVM(ctx, hp.VMSpec{Name: v.Name, Host: v.Host, Pool: j.typ, Job: j.id,
				VCPUs: j.spec.VM.VCPUs, MemoryMiB: j.spec.VM.MemoryMiB})
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

// destroyVMs destroys VMs, concurrently; a VM already gone is fine.
func (d *Daemon) destroyVMs(ctx context.Context, vms []api.JobVM) {
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
			case !errors.Is(err, hp.ErrNotFound):
				d.log.Warn().Err(err).Str("vm", v.Name).Msg("cannot destroy vm: it is destroyed when its agent answers again")
			}
		}()
	}
	wg.Wait()
}

// jobsOnLostHostsLocked lists the running jobs with a VM on an unreachable
// host.
func (d *Daemon) jobsOnLostHostsLocked() []*jobRT {
	var out []*jobRT
	for _, j := range d.jobs {
		if j.cancel == nil || j.stopping || j.data.Placement == nil {
			continue
		}
		for _, h := range j.hostNames() {
			if rt := d.hosts[h]; rt != nil && !rt.reachable {
				j.lostHost = h
				out = append(out, j)
				break
			}
		}
	}
	return out
}

// logWriter appends a job's output to the store.
type logWriter struct {
	d  *Daemon
	id string
}

func (w *logWriter) Write(p []byte) (int, error) {
	if err := w.d.st.AppendLog(context.Background(), w.id, p); err != nil {
		return 0, err
	}
	return len(p), nil
}
