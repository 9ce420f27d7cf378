package metasched

import "github.com/metasched/metasched/metasched/lifecycle"

// The daemon's indexes of its live jobs: per pool, the jobs queued and
// active (planned, provisioning or running), and per host, the jobs placed
// on it. They change with every change of d.jobs and of a live job's state
// in memory (addJobLocked, setJobLocked, dropJobLocked), so that what is
// read every tick (the pools' view, the hosts' states, the cluster
// manager's j_i) and a switch's choice of a host cost the same with 50,000
// jobs queued as with none.

// poolJobs counts a pool's live jobs.
type poolJobs struct{ queued, active int }

// addJobLocked makes lj one of the daemon's live jobs.
func (d *Daemon) addJobLocked(lj *liveJob) {
	d.dropJobLocked(d.jobs[lj.id()])
	d.jobs[lj.id()] = lj
	d.indexLocked(lj, lj.job, 1)
}

// setJobLocked makes next the job's state in memory.
func (d *Daemon) setJobLocked(lj *liveJob, next lifecycle.Job) {
	if d.jobs[lj.id()] == lj {
		d.indexLocked(lj, lj.job, -1)
		d.indexLocked(lj, next, 1)
	}
	lj.job = next
}

// dropJobLocked removes lj from the daemon's live jobs (nil: nothing).
func (d *Daemon) dropJobLocked(lj *liveJob) {
	if lj == nil || d.jobs[lj.id()] != lj {
		return
	}
	d.indexLocked(lj, lj.job, -1)
	delete(d.jobs, lj.id())
}

// indexLocked counts the job as in state j (n = 1) or no longer (n = -1).
// A terminal state is not counted.
func (d *Daemon) indexLocked(lj *liveJob, j lifecycle.Job, n int) {
	if j.State.Terminal() {
		return
	}
	c := d.poolJobs[j.Type]
	if c == nil {
		c = &poolJobs{}
		d.poolJobs[j.Type] = c
	}
	if j.State == lifecycle.Queued {
		c.queued += n
	} else {
		c.active += n
	}
	for _, h := range jobHosts(j) {
		on := d.onHost[h]
		if n > 0 {
			if on == nil {
				on = map[*liveJob]struct{}{}
				d.onHost[h] = on
			}
			on[lj] = struct{}{}
			continue
		}
		delete(on, lj)
		if len(on) == 0 {
			delete(d.onHost, h)
		}
	}
}

// jobsOnLocked lists the live jobs placed on the host.
func (d *Daemon) jobsOnLocked(host string) []*liveJob {
	out := make([]*liveJob, 0, len(d.onHost[host]))
	for lj := range d.onHost[host] {
		out = append(out, lj)
	}
	return out
}
