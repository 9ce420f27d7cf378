package metasched

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/metasched/metasched/graph"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/jobfile"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/selection"
)

func invalid(fields ...api.FieldError) *api.RequestError { return jobfile.Invalid(fields...) }

// checkJob checks a job sent to the API beyond the job file's own rules
// (jobfile.Decode checked those): a registered type, the executor's
// features, the walltime, and a VM that some cluster's machines can hold.
// A job file without vm gets its type's VM shape. The job returned is the
// daemon's own copy: the request may be submitted again.
func (d *Daemon) checkJob(ctx context.Context, req jobfile.Request) (*selection.Job, error) {
	if req.Err != nil {
		return nil, req.Err
	}
	if req.Job == nil {
		return nil, errors.New("submit: a request without a job: decode the body with jobfile.Decode")
	}
	j := new(*req.Job)
	j.Command, j.Inputs, j.Outputs = slices.Clone(j.Command), slices.Clone(j.Inputs), slices.Clone(j.Outputs)
	jt, _, ok := d.jobType(j.Type)
	if !ok {
		names := make([]string, len(d.types))
		for i, t := range d.types {
			names[i] = t.Name
		}
		return nil, invalid(api.FieldError{Field: "type", Problem: fmt.Sprintf("no job type %q: the pools are %s", j.Type, strings.Join(names, ", "))})
	}
	if d.exec.Name() != "guest" {
		for _, f := range []struct {
			field string
			n     int
		}{{"inputs", len(j.Inputs)}, {"outputs", len(j.Outputs)}} {
			if f.n > 0 {
				return nil, invalid(api.FieldError{Field: f.field, Problem: fmt.Sprintf("applies to the guest executor only; this daemon runs the %s executor", d.exec.Name())})
			}
		}
	}
	if most := d.cfg.Walltime.Max; most > 0 && time.Duration(j.Walltime) > most {
		return nil, invalid(api.FieldError{Field: "walltime", Problem: fmt.Sprintf("must be at most %s (the daemon's most), not %s", most, time.Duration(j.Walltime))})
	}
	if !req.VMGiven {
		j.VM = selection.VM{VCPUs: jt.VCPUs, MemoryMiB: jt.MemoryMiB}
	}
	fits := slices.ContainsFunc(d.grid.Clusters, func(c graph.Cluster) bool {
		return c.Cores >= j.VM.VCPUs && c.MemoryMiB >= j.VM.MemoryMiB
	})
	if !fits {
		return nil, invalid(api.FieldError{Field: "vm", Problem: fmt.Sprintf("no cluster's machines can hold a VM of %d vCPUs and %d MiB", j.VM.VCPUs, j.VM.MemoryMiB)})
	}
	if j.Master != "" {
		i, ok := d.grid.Index(j.Master)
		if !ok {
			names := make([]string, len(d.grid.Clusters))
			for k, c := range d.grid.Clusters {
				names[k] = c.Name
			}
			return nil, invalid(api.FieldError{Field: "master", Problem: fmt.Sprintf("no cluster %q in the grid: the clusters are %s", j.Master, strings.Join(names, ", "))})
		}
		if c := d.grid.Clusters[i]; c.Cores < j.VM.VCPUs || c.MemoryMiB < j.VM.MemoryMiB {
			return nil, invalid(api.FieldError{Field: "master", Problem: fmt.Sprintf("cluster %s's machines (%d cores, %d MiB) can never hold the job's VM (%d vCPUs, %d MiB)",
				c.Name, c.Cores, c.MemoryMiB, j.VM.VCPUs, j.VM.MemoryMiB)})
		}
	}
	if why, err := d.neverRuns(ctx, j); err != nil {
		return nil, err
	} else if why != "" {
		return nil, invalid(api.FieldError{Problem: "the job can never run on this grid, even with every host free: " + why})
	}
	return j, nil
}

// neverRuns plans the job on the whole grid with every host free, and
// says why no plan exists when none does: such a job would wait forever.
// The answer depends on the job's shape and pool, the hosts, and the
// planner's figures only: it is kept per shape and pool until the hosts
// or the figures change, so that a stream of submissions of a few shapes
// plans a few times, not once each.
func (d *Daemon) neverRuns(ctx context.Context, j *selection.Job) (string, error) {
	key := j.Type + "|" + j.Shape()
	d.lockR()
	gen := [2]uint64{d.hv.gen, d.planner.Version()}
	if why, ok := d.jobs.never.get(gen, key); ok {
		d.unlockR()
		return why, nil
	}
	all := map[string][]string{}
	for _, name := range d.hv.order {
		h := d.hv.hosts[name]
		all[h.rec.Site] = append(all[h.rec.Site], name)
	}
	d.unlockR()
	pl, err := d.planner.Plan(ctx, j, all, selection.Options{Master: -1})
	if err != nil {
		return "", err
	}
	why := ""
	if !pl.Plan.Feasible {
		why = pl.Plan.Reason
	}
	d.jobs.mu.Lock()
	d.jobs.never.put(gen, key, why)
	d.jobs.mu.Unlock()
	return why, nil
}

// neverRunsCache keeps neverRuns' answers for one generation of the
// hosts and the planner's figures, up to maxNeverRuns of them.
type neverRunsCache struct {
	gen [2]uint64
	m   map[string]string
}

// maxNeverRuns bounds the answers kept: past it, they are dropped and
// made again (a stream of ever new shapes plans each, as before).
const maxNeverRuns = 4096

func (c *neverRunsCache) get(gen [2]uint64, key string) (string, bool) {
	if c.gen != gen {
		return "", false
	}
	why, ok := c.m[key]
	return why, ok
}

func (c *neverRunsCache) put(gen [2]uint64, key, why string) {
	if c.gen != gen || len(c.m) >= maxNeverRuns {
		c.gen, c.m = gen, map[string]string{}
	}
	c.m[key] = why
}

// mayRunOnHost refuses a user's job when the executor runs jobs'
// commands on the daemon's own machine (host-command) and the operator
// has not allowed users to (executor.allow_users), and the job of an
// owner with no account to run as there (executor.accounts, run_as).
func (d *Daemon) mayRunOnHost(ctx context.Context) error {
	p, ok := api.PrincipalFrom(ctx)
	if ok && !p.Operator() && d.cfg.Executor.Name == HostCommand && !d.cfg.Executor.AllowUsers {
		return &api.RequestError{Status: 403, Code: api.CodeForbidden, Msg: fmt.Sprintf(
			"%s has the role user: this daemon runs jobs' commands on its own machine (the host-command executor), which only operators may use unless the configuration's executor.allow_users says so", p.Name)}
	}
	if a, ok := d.exec.(interface{ Admits(owner string) error }); ok {
		if err := a.Admits(p.Name); err != nil {
			return &api.RequestError{Status: 403, Code: api.CodeForbidden, Msg: fmt.Sprintf(
				"%v: this daemon runs jobs' commands on its own machine, each as its owner's account, which the operator gives in executor.accounts", err)}
		}
	}
	return nil
}

// ownerOf is the owner of a job submitted with ctx: its principal's
// name ("" for the daemon's own calls).
func ownerOf(ctx context.Context) string {
	p, _ := api.PrincipalFrom(ctx)
	return p.Name
}

// Submit accepts a job file (YAML or JSON, decoded by jobfile.Decode) of
// the principal ctx carries (api.WithPrincipal; none: the daemon's own).
// The job is on disk when Submit returns.
func (d *Daemon) Submit(ctx context.Context, req jobfile.Request) (_ api.Job, err error) {
	defer apiError(&err)
	if err := d.mayRunOnHost(ctx); err != nil {
		return api.Job{}, err
	}
	j, err := d.checkJob(ctx, req)
	if err != nil {
		return api.Job{}, err
	}
	sj, err := d.st.SubmitJobBy(ctx, ownerOf(ctx), j.Type, mustJSON(j), "submitted")
	if err != nil {
		return api.Job{}, err
	}
	return d.accepted(j, sj), nil
}

// SubmitOnce is Submit with an idempotency key: caller names the caller's
// credentials (the keys of two callers never meet) and key is the key it
// sent. The first submission with a key makes the job (created is true);
// a repeat with the same body, while the store keeps the key (the
// configuration's idempotency_retention), returns that job as it is now
// and makes none; a repeat with another body is refused (422). The key is
// recorded in the transaction that records the job, with the hash of the
// body sent (req.BodyHash).
func (d *Daemon) SubmitOnce(ctx context.Context, req jobfile.Request, caller, key string) (_ api.Job, created bool, err error) {
	defer apiError(&err)
	if caller == "" || key == "" {
		return api.Job{}, false, fmt.Errorf("submit: an idempotency key needs a caller and a key: %w", store.ErrInvalid)
	}
	if err := d.mayRunOnHost(ctx); err != nil {
		return api.Job{}, false, err
	}
	h := sha256.New()
	h.Write([]byte(caller))
	h.Write([]byte{0})
	h.Write([]byte(key))
	k := store.IdempotencyKey{Key: h.Sum(nil), Body: req.BodyHash}
	// A repeat is answered before the job is checked: the job it made
	// as it is now, or the key's reuse with another body (even one that
	// is not a valid job).
	sj, found, err := d.st.LookupKey(ctx, k)
	switch {
	case errors.Is(err, store.ErrKeyReused):
		return api.Job{}, false, keyReused(sj.ID)
	case err != nil:
		return api.Job{}, false, err
	case found:
		v, err := d.Job(ctx, sj.ID)
		return v, false, err
	}
	j, err := d.checkJob(ctx, req)
	if err != nil {
		return api.Job{}, false, err
	}
	sj, made, err := d.st.SubmitJobOnce(ctx, ownerOf(ctx), j.Type, mustJSON(j), "submitted", k)
	switch {
	case errors.Is(err, store.ErrKeyReused):
		return api.Job{}, false, keyReused(sj.ID)
	case err != nil:
		return api.Job{}, false, err
	case !made: // a concurrent request with the key made it
		v, err := d.Job(ctx, sj.ID)
		return v, false, err
	}
	return d.accepted(j, sj), true, nil
}

// dropExpiredKeys drops the idempotency keys that expired while the
// daemon was away (each submission with a key drops a few more).
func (d *Daemon) dropExpiredKeys(ctx context.Context) {
	n, err := d.st.DropExpiredKeys(ctx)
	if err != nil {
		d.log.Warn().Err(err).Msg("cannot drop the expired idempotency keys: submissions drop them later")
		return
	}
	if n > 0 {
		d.log.Info().Int("keys", n).Msg("dropped expired idempotency keys")
	}
}

// keyReused is the 422 of an idempotency key sent again with another body.
func keyReused(id string) error {
	return &api.RequestError{Status: 422, Code: api.CodeKeyReused,
		Msg: fmt.Sprintf("the %s was used for job %s with another body", api.IdempotencyHeader, id),
		Fields: []api.FieldError{{Field: api.IdempotencyHeader,
			Problem: fmt.Sprintf("was sent with another body, which made job %s: send that body again, or a new key for a new job", id)}}}
}

// accepted makes a job the store just recorded live.
func (d *Daemon) accepted(j *selection.Job, sj store.Job) api.Job {
	lj := newLiveJob(lifecycle.New(sj.ID, j.Type), j, sj.Owner, sj.Submitted)
	d.jobs.mu.Lock()
	d.addJobLocked(lj)
	d.rates.arrival(j.Type, sj.Submitted)
	v := d.jobViewLocked(lj, sj)
	d.jobs.mu.Unlock()
	d.kick()
	return v
}

// Cancel cancels a live job and waits (up to ctx) until what ran for it
// has stopped and its VMs are gone.
func (d *Daemon) Cancel(ctx context.Context, id string) (_ api.Job, err error) {
	defer apiError(&err)
	d.jobs.mu.Lock()
	lj := d.jobs.live[id]
	d.jobs.mu.Unlock()
	if lj == nil {
		j, err := d.st.Job(ctx, id)
		if err != nil {
			return api.Job{}, notFoundJob(id, err)
		}
		return api.Job{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("job %s is %s: only a live job can be cancelled", id, j.State)}
	}
	run, err := d.stop(context.WithoutCancel(ctx), lj, lifecycle.Cancelled, "cancelled through the API")
	if errors.Is(err, lifecycle.ErrNotAllowed) {
		return api.Job{}, &api.RequestError{Status: 409, Code: api.CodeConflict, Msg: fmt.Sprintf("job %s has ended: only a live job can be cancelled", id)}
	}
	if err != nil {
		return api.Job{}, err
	}
	run.wait(ctx)
	return d.Job(ctx, id)
}

func notFoundJob(id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return &api.RequestError{Status: 404, Code: api.CodeNotFound, Msg: fmt.Sprintf("no job %q", id)}
	}
	return err
}
