package metasched

import (
	"slices"
	"strings"

	"github.com/metasched/metasched/metasched/lifecycle"
)

// The live jobs indexed by what the loops ask of them, so that their cost
// follows the jobs placed on hosts and the hosts, not the backlog: a queue
// per pool in ID order (oldest first) for the dispatcher, the placed jobs
// (planned, provisioning or running) for the hosts' views and the switches,
// and per pool the count of queued and placed jobs for the policy and the
// pools' view. d.jobs.live holds every live job; the index follows each job's
// state as committed (trackLocked after every change).

// jobIndex is the index; the daemon's lock guards it.
type jobIndex struct {
	queues map[string][]*liveJob // pool → queued jobs in ID order
	placed map[string]*liveJob   // planned, provisioning or running
	counts map[string]*poolCount // pool → its live jobs
	// onHost holds, for each host, the placed jobs with a VM on it (by
	// ID): kept as jobs are placed, move and end, in O(their hosts).
	onHost map[string]map[string]*liveJob
	// queueGen changes whenever a job joins a queue.
	queueGen uint64
}

type poolCount struct{ queued, placed int }

func newJobIndex() jobIndex {
	return jobIndex{queues: map[string][]*liveJob{}, placed: map[string]*liveJob{}, counts: map[string]*poolCount{},
		onHost: map[string]map[string]*liveJob{}}
}

// addJobLocked makes a job live: in d.jobs.live and the index.
func (d *Daemon) addJobLocked(lj *liveJob) {
	d.jobs.live[lj.id()] = lj
	d.trackLocked(lj)
}

// trackLocked moves the job in the index to where its state puts it, and
// out of it (and d.jobs.live) when it has ended.
func (d *Daemon) trackLocked(lj *liveJob) {
	st := lj.job.State
	if st.Terminal() {
		d.tuningEnded(lj)
		delete(d.jobs.live, lj.id())
		st = ""
	}
	d.jobs.index.hostsOf(lj)
	if lj.indexed == st {
		return
	}
	ix := &d.jobs.index
	c := ix.counts[lj.typ()]
	if c == nil {
		c = &poolCount{}
		ix.counts[lj.typ()] = c
	}
	switch lj.indexed {
	case lifecycle.Queued:
		q := ix.queues[lj.typ()]
		if i, ok := slices.BinarySearchFunc(q, lj.id(), byID); ok {
			ix.queues[lj.typ()] = deleteAt(q, i)
		}
		c.queued--
	case lifecycle.Planned, lifecycle.Provisioning, lifecycle.Running:
		if st == lifecycle.Planned || st == lifecycle.Provisioning || st == lifecycle.Running {
			lj.indexed = st // still placed
			return
		}
		delete(ix.placed, lj.id())
		c.placed--
	}
	switch st {
	case lifecycle.Queued:
		q := ix.queues[lj.typ()]
		i, _ := slices.BinarySearchFunc(q, lj.id(), byID)
		ix.queues[lj.typ()] = slices.Insert(q, i, lj)
		c.queued++
		ix.queueGen++
	case lifecycle.Planned, lifecycle.Provisioning, lifecycle.Running:
		ix.placed[lj.id()] = lj
		c.placed++
	}
	lj.indexed = st
}

func byID(j *liveJob, id string) int { return strings.Compare(j.id(), id) }

// deleteAt deletes q[i], moving the shorter side: the jobs planned are
// mostly the oldest, and moving the rest of a backlog of 100,000 down
// for each of them copied 800 kB a job.
func deleteAt(q []*liveJob, i int) []*liveJob {
	if i < len(q)/2 {
		copy(q[1:i+1], q[:i])
		q[0] = nil
		return q[1:]
	}
	return slices.Delete(q, i, i+1)
}

// hostsOf files the job under the hosts of its VMs now (none once it is
// queued or has ended), and out from under those it left.
func (ix *jobIndex) hostsOf(lj *liveJob) {
	now := lj.hostNames()
	if slices.Equal(now, lj.hosts) {
		return
	}
	for _, h := range lj.hosts {
		if !slices.Contains(now, h) {
			delete(ix.onHost[h], lj.id())
			if len(ix.onHost[h]) == 0 {
				delete(ix.onHost, h)
			}
		}
	}
	for _, h := range now {
		m := ix.onHost[h]
		if m == nil {
			m = map[string]*liveJob{}
			ix.onHost[h] = m
		}
		m[lj.id()] = lj
	}
	lj.hosts = now
}

// countsLocked is the pool's count of live jobs.
func (d *Daemon) countsLocked(pool string) poolCount {
	if c := d.jobs.index.counts[pool]; c != nil {
		return *c
	}
	return poolCount{}
}

// placedLocked lists the planned, provisioning and running jobs in ID
// order.
func (d *Daemon) placedLocked() []*liveJob {
	out := make([]*liveJob, 0, len(d.jobs.index.placed))
	for _, j := range d.jobs.index.placed {
		out = append(out, j)
	}
	slices.SortFunc(out, func(a, b *liveJob) int { return strings.Compare(a.id(), b.id()) })
	return out
}
