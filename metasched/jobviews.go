package metasched

import (
	"context"
	"encoding/json"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/metasched/store"
	"github.com/metasched/metasched/metasched/wire"
	"github.com/metasched/metasched/selection"
)

// Job returns one job.
func (d *Daemon) Job(ctx context.Context, id string) (_ api.Job, err error) {
	defer apiError(&err)
	sj, err := d.st.Job(ctx, id)
	if err != nil {
		return api.Job{}, notFoundJob(id, err)
	}
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	return d.jobViewLocked(d.jobs.live[id], sj), nil
}

// OwnsJob reports whether owner submitted job id: one seek in the
// store's index of the owners' jobs, no read of the job, so that a user
// asking for another's job and one asking for no job get their 404 by the
// same work (a 404 of a job that exists took longer when it read and
// built the job's view first).
func (d *Daemon) OwnsJob(ctx context.Context, owner, id string) (_ bool, err error) {
	defer apiError(&err)
	return d.st.OwnsJob(ctx, owner, id)
}

// Jobs lists jobs.
func (d *Daemon) Jobs(ctx context.Context, af api.JobFilter) (_ api.JobList, err error) {
	defer apiError(&err)
	f := store.JobFilter{Type: af.Type, Owner: af.Owner, After: af.After, Limit: af.Limit}
	for _, s := range af.States {
		f.States = append(f.States, wire.DomainState(s))
	}
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
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	for _, j := range js {
		out.Jobs = append(out.Jobs, d.jobViewLocked(d.jobs.live[j.ID], j))
	}
	return out, nil
}

// jobViewLocked builds the API's view of a job from the store's record and,
// for a queued job, why it waits.
func (d *Daemon) jobViewLocked(lj *liveJob, sj store.Job) api.Job {
	v := api.Job{JobHead: api.JobHead{ID: sj.ID, Type: sj.Type, Owner: sj.Owner, State: wire.State(sj.State), Submitted: sj.Submitted, Updated: sj.Submitted},
		Transitions: wire.Transitions(sj.Transitions), ExitCode: sj.ExitCode}
	if n := len(sj.Transitions); n > 0 {
		v.Reason, v.Updated = sj.Transitions[n-1].Reason, sj.Transitions[n-1].At
	}
	var spec selection.Job
	if err := json.Unmarshal(sj.Spec, &spec); err == nil {
		// A view names the job's inputs but does not carry their bytes
		// (up to 512 KiB a job): a page of jobs stays small.
		for i := range spec.Inputs {
			spec.Inputs[i].Content, spec.Inputs[i].Data = "", nil
		}
		v.Spec, v.Name = wire.Spec(spec), spec.Name
	}
	rec := decodeRecord(sj.Data)
	if lj != nil && lj.job.State == lifecycle.Queued && sj.State == lifecycle.Queued {
		if nr, ok := d.jobs.noRoom[lj.typ()]; ok && (nr.after == "" || lj.id() > nr.after) && lj.tuning == nil {
			v.Reason = "waiting: " + nr.why
		} else if lj.waiting != "" {
			v.Reason = "waiting: " + lj.waiting
		}
	}
	v.Placement, v.Attempts, v.RunTimes, v.Clusters = wire.PlacementPtr(rec.Placement), rec.Attempts, runTimesOf(rec), clustersOf(rec)
	v.VMs, v.LostWorkers = wire.JobVMs(rec.VMs), wire.LostVMs(rec.LostWorkers)
	if rec.Placement != nil {
		v.Explanation = explain(rec.Placement)
	}
	return v
}

// decodeRecord reads the daemon's record of a job from the store; a record
// that does not decode reads as empty.
func decodeRecord(raw json.RawMessage) lifecycle.Record {
	var r lifecycle.Record
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &r)
	}
	return r
}
