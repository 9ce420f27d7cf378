package metasched

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/lifecycle"
	"github.com/metasched/metasched/selection"
)

// liveJob is a job that has not ended, as the daemon holds it. job is the
// lifecycle's state as last committed to the store (a cache of the store:
// a restart rebuilds it from there); the other fields are the daemon's
// working notes. d.jobs.mu guards every field but steps, which serialises the
// job's steps (Daemon.step holds it across the store's commit).
type liveJob struct {
	steps     sync.Mutex
	job       lifecycle.Job
	spec      *selection.Job
	submitted time.Time
	// waiting says why a queued job is not planned yet.
	waiting string
	// indexed is the state the job's index entry is for ("": none).
	indexed lifecycle.State
	// lastTune is when the dispatch last considered a bandwidth tuning
	// for the job, or a tuning for it ended (Unix nanoseconds): read and
	// set by its pool's round without the daemon's lock.
	lastTune atomic.Int64
	// tuning is the bandwidth tuning being carried out for the queued
	// job: it waits for it, and is planned when it is over.
	tuning *tuningWait
	// runs holds what runs for the job's attempts, by number, while
	// something does.
	runs map[int]*attempt

	// hosts are the hosts the index files the job under (jobIndex.hostsOf).
	hosts []string

	// jobID, jobType and owner are the job's ID, type and owner (who
	// submitted it), which never change: read without the lock.
	jobID, jobType, owner string
}

// newLiveJob is a live job in state job, submitted by owner.
func newLiveJob(job lifecycle.Job, spec *selection.Job, owner string, submitted time.Time) *liveJob {
	return &liveJob{jobID: job.ID, jobType: job.Type, owner: owner, job: job, spec: spec, submitted: submitted}
}

func (j *liveJob) id() string  { return j.jobID }
func (j *liveJob) typ() string { return j.jobType }

// attempt is what runs for one attempt of a job: the creation of its VMs
// and the executor, under one context that StopRun cancels. Each step of
// an attempt starts the next before it ends, so active drops to 0 once,
// when the attempt is over; done is closed then.
type attempt struct {
	ctx    context.Context
	cancel context.CancelFunc
	active int // goroutines running for it (guarded by the daemon's lock)
	done   chan struct{}
}

// wait waits until nothing runs for the attempt any more, or ctx ends. A
// nil attempt has nothing to wait for.
func (a *attempt) wait(ctx context.Context) {
	if a == nil {
		return
	}
	select {
	case <-a.done:
	case <-ctx.Done():
	}
}

// hostNames lists the hosts of a planned, provisioning or running job: those
// of its VMs (which tuning may have moved).
func (j *liveJob) hostNames() []string {
	if j.job.State == lifecycle.Queued || j.job.State.Terminal() {
		return nil
	}
	var out []string
	for _, v := range j.job.Record.VMs {
		if !slices.Contains(out, v.Host) {
			out = append(out, v.Host)
		}
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

// vmNames names the job's VMs: JOB-aATTEMPT-m for the master and -wN for
// the workers, so that VMs of an earlier attempt never collide.
func vmNames(id string, attempt int, pl *gramvm.Placement) []lifecycle.VM {
	out := []lifecycle.VM{{Name: fmt.Sprintf("%s-a%d-m", id, attempt), Site: pl.Master.Site, Host: pl.Master.Host, Master: true}}
	for i, w := range pl.Workers {
		out = append(out, lifecycle.VM{Name: fmt.Sprintf("%s-a%d-w%d", id, attempt, i+1), Site: w.Site, Host: w.Host})
	}
	return out
}

func clusterList(pl *gramvm.Placement) string {
	parts := make([]string, len(pl.Plan.Clusters))
	for i, c := range pl.Plan.Clusters {
		parts[i] = fmt.Sprintf("%s×%d", c.Name, c.Machines)
	}
	return strings.Join(parts, " ")
}
