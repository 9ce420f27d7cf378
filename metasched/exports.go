package metasched

import (
	"context"
	"slices"
	"time"

	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/metasched/wire"
)

// What the daemon tells the clients in its process: the HTTP server
// (package httpapi), the dashboard and the demo. Each of them declares the
// methods it needs as an interface of its own; these are the ones beyond
// the API's (Submit, Job, Pools, ...).

// Version is the version the daemon reports (Options.Version).
func (d *Daemon) Version() string { return d.opt.Version }

// Started is when the daemon started, on its clock.
func (d *Daemon) Started() time.Time { return d.started }

// Instance identifies this start of the daemon: it changes at every start,
// so that the dashboard sees restarts.
func (d *Daemon) Instance() string { return d.instance }

// Now is the daemon's time (Options.Clock).
func (d *Daemon) Now() time.Time { return d.now() }

// Types are the job types, one per pool, in the configuration's order.
func (d *Daemon) Types() []api.JobType { return slices.Clone(d.types) }

// Logs returns what a job's command wrote.
func (d *Daemon) Logs(ctx context.Context, id string) (_ []byte, err error) {
	defer apiError(&err)
	b, err := d.st.Logs(ctx, id)
	if err != nil {
		return nil, notFoundJob(id, err)
	}
	return b, nil
}

// RecentJobs returns the newest n jobs, newest first.
func (d *Daemon) RecentJobs(ctx context.Context, n int) (_ []api.Job, err error) {
	defer apiError(&err)
	recent, err := d.st.Recent(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]api.Job, 0, len(recent))
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	for _, sj := range recent {
		out = append(out, d.jobViewLocked(d.jobs.live[sj.ID], sj))
	}
	return out, nil
}

// JobCounts counts the jobs of the store by state.
func (d *Daemon) JobCounts() map[api.State]int { return wire.JobCounts(d.st.Counts()) }

// RecentSwitches lists, newest first, the switches in flight and the
// stranded ones not cleared, and at most final of the others.
func (d *Daemon) RecentSwitches(ctx context.Context, final int) (_ []api.SwitchView, err error) {
	defer apiError(&err)
	return d.recentSwitches(ctx, final)
}

// VMCounts returns how many VMs the daemon created and destroyed since it
// started.
func (d *Daemon) VMCounts() (created, destroyed int64) { return d.vmCounts() }

// VMsInHand returns how many VMs the jobs are creating or destroying now:
// a job is done before its VMs are destroyed.
func (d *Daemon) VMsInHand() int { return d.vmsInHand() }

// Refresh reads every agent's inventory now, as the cluster manager does
// at each tick (the views of hosts and VMs show the last inventories).
func (d *Daemon) Refresh(ctx context.Context) { d.refresh(ctx) }
