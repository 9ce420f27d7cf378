package metasched

import (
	hp "github.com/metasched/metasched/hypervisorproxy"
	"github.com/metasched/metasched/metasched/lifecycle"
)

// reservations is the capacity promised to VMs that the hosts'
// inventories do not count yet. A plan promises its VMs' vCPUs and memory
// on their hosts before its commit, so that no other plan takes them; the
// promise for a VM is kept until an inventory of the agents lists the VM
// (from then on the host's free capacity, as its agent reports it, counts
// it) or until the VM will not exist: its creation failed, its attempt was
// stopped before it was created, or it was destroyed. Giving the promise
// back when the VM is created, before the next inventory shows it, would
// let a plan see the host as free for one round and place another job onto
// a full host (the agent refuses it and the job goes back to the queue).
type reservations struct {
	byVM    map[string]promise  // VM name → its promise
	byJob   map[string][]string // job → names of its promised VMs
	perHost map[string]usage    // host → the sum of its promises
}

type promise struct {
	job, host string
	use       usage
}

func newReservations() *reservations {
	return &reservations{byVM: map[string]promise{}, byJob: map[string][]string{}, perHost: map[string]usage{}}
}

// on is what is promised on the host.
func (r *reservations) on(host string) usage { return r.perHost[host] }

// add promises use on their hosts for the job's VMs; a VM promised
// already keeps its promise.
func (r *reservations) add(job string, vms []lifecycle.VM, use usage) {
	for _, v := range vms {
		if _, ok := r.byVM[v.Name]; ok {
			continue
		}
		r.byVM[v.Name] = promise{job: job, host: v.Host, use: use}
		r.byJob[job] = append(r.byJob[job], v.Name)
		u := r.perHost[v.Host]
		u.vcpus += use.vcpus
		u.mem += use.mem
		r.perHost[v.Host] = u
	}
}

// dropJob gives back every promise of the job.
func (r *reservations) dropJob(job string) {
	for _, name := range r.byJob[job] {
		r.drop(name)
	}
}

// dropVMs gives back the promises of the VMs.
func (r *reservations) dropVMs(vms []lifecycle.VM) {
	for _, v := range vms {
		r.drop(v.Name)
	}
}

// seen gives back the promises of the VMs an inventory lists: the
// capacity the agent reports free counts them now.
func (r *reservations) seen(vms []hp.VM) {
	for _, v := range vms {
		r.drop(v.Name)
	}
}

// jobs lists the jobs that hold promises.
func (r *reservations) jobs() []string {
	out := make([]string, 0, len(r.byJob))
	for j := range r.byJob {
		out = append(out, j)
	}
	return out
}

func (r *reservations) drop(name string) {
	p, ok := r.byVM[name]
	if !ok {
		return
	}
	delete(r.byVM, name)
	names := r.byJob[p.job]
	for i, n := range names {
		if n == name {
			names = append(names[:i], names[i+1:]...)
			break
		}
	}
	if len(names) == 0 {
		delete(r.byJob, p.job)
	} else {
		r.byJob[p.job] = names
	}
	u := r.perHost[p.host]
	u.vcpus -= p.use.vcpus
	u.mem -= p.use.mem
	if u.vcpus <= 0 && u.mem <= 0 {
		delete(r.perHost, p.host)
	} else {
		r.perHost[p.host] = u
	}
}
