// Package capacity keeps what the daemon knows of its hosts' capacity
// beside what their agents report: the capacity promised to VMs that the
// inventories do not list yet, the VMs in the job lifecycle's hands (being
// created or destroyed), the VMs it destroyed lately, and the VMs of
// running jobs that the inventories missed.
//
// A Ledger has a lock of its own, a leaf: the daemon calls it with its own
// lock held or not, and the Ledger calls nothing back. It takes the time
// from its caller and does no I/O.
package capacity

import (
	"maps"
	"slices"
	"sync"
	"time"
)

// Use is an amount of capacity: vCPUs and memory.
type Use struct{ VCPUs, MemoryMiB int }

// Spot is a VM and the host it is planned on.
type Spot struct{ VM, Host string }

// DestroyedFor is how long a destroyed VM is noted: longer than an
// inventory refresh takes to drop it.
const DestroyedFor = time.Minute

// Ledger is the capacity view beside the inventories. The zero value is
// not usable: call NewLedger. Its methods are safe for concurrent use.
type Ledger struct {
	mu sync.Mutex

	// The promises: VM → its promise, job → its promised VMs, host →
	// the sum of its promises.
	byVM    map[string]promise
	byJob   map[string][]string
	perHost map[string]Use

	// inHand counts, per VM, the lifecycle's calls creating or
	// destroying it in flight.
	inHand map[string]int

	// destroyed is when each VM was destroyed (last); destroyedQ the
	// same, oldest first, to drop the notes as they expire.
	destroyed  map[string]time.Time
	destroyedQ []destroyedNote

	// missed is how many inventories in a row missed each VM.
	missed map[string]int
}

type promise struct {
	job, host string
	use       Use
}

type destroyedNote struct {
	vm string
	at time.Time
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger {
	return &Ledger{byVM: map[string]promise{}, byJob: map[string][]string{}, perHost: map[string]Use{},
		inHand: map[string]int{}, destroyed: map[string]time.Time{}, missed: map[string]int{}}
}

// Promise promises use on its host to each VM of the job, before the VM
// exists: no other plan takes that room meanwhile. The promise is kept
// until an inventory lists the VM (Seen: from then on its host's free
// capacity as its agent reports it counts the VM) or until the VM will
// not exist (Drop, DropJob, Destroyed). Giving it back when the VM is
// created, before the next inventory shows it, would let a plan see the
// host free for one round and place another job onto a full host. A VM
// promised already keeps its promise.
func (l *Ledger) Promise(job string, use Use, vms ...Spot) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range vms {
		if _, ok := l.byVM[v.VM]; ok {
			continue
		}
		l.byVM[v.VM] = promise{job: job, host: v.Host, use: use}
		l.byJob[job] = append(l.byJob[job], v.VM)
		u := l.perHost[v.Host]
		u.VCPUs += use.VCPUs
		u.MemoryMiB += use.MemoryMiB
		l.perHost[v.Host] = u
	}
}

// On is what is promised on the host.
func (l *Ledger) On(host string) Use {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.perHost[host]
}

// Promised is what is promised per host, for the hosts with promises (a
// copy: as many entries as hosts with VMs on their way).
func (l *Ledger) Promised() map[string]Use {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.perHost)
}

// Jobs lists the jobs that hold promises, sorted.
func (l *Ledger) Jobs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.byJob))
}

// DropJob gives back every promise of the job.
func (l *Ledger) DropJob(job string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, vm := range slices.Clone(l.byJob[job]) {
		l.dropLocked(vm)
	}
}

// Drop gives back the promises of the VMs.
func (l *Ledger) Drop(vms ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, vm := range vms {
		l.dropLocked(vm)
	}
}

// Seen gives back the promise of a VM an inventory lists: the capacity
// its agent reports free counts it now.
func (l *Ledger) Seen(vm string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(vm)
}

func (l *Ledger) dropLocked(vm string) {
	p, ok := l.byVM[vm]
	if !ok {
		return
	}
	delete(l.byVM, vm)
	names := l.byJob[p.job]
	if i := slices.Index(names, vm); i >= 0 {
		names = slices.Delete(names, i, i+1)
	}
	if len(names) == 0 {
		delete(l.byJob, p.job)
	} else {
		l.byJob[p.job] = names
	}
	u := l.perHost[p.host]
	u.VCPUs -= p.use.VCPUs
	u.MemoryMiB -= p.use.MemoryMiB
	if u.VCPUs <= 0 && u.MemoryMiB <= 0 {
		delete(l.perHost, p.host)
	} else {
		l.perHost[p.host] = u
	}
}

// Take marks VMs as in the lifecycle's hands (being created or
// destroyed), so that a refresh does not take them for orphans; Release
// unmarks them. Each Take needs its own Release.
func (l *Ledger) Take(vms ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, vm := range vms {
		l.inHand[vm]++
	}
}

// Release undoes a Take of the VMs.
func (l *Ledger) Release(vms ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, vm := range vms {
		if l.inHand[vm]--; l.inHand[vm] <= 0 {
			delete(l.inHand, vm)
		}
	}
}

// InHand says whether the lifecycle is creating or destroying the VM.
func (l *Ledger) InHand(vm string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inHand[vm] > 0
}

// Handled is how many VMs are in the lifecycle's hands.
func (l *Ledger) Handled() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.inHand)
}

// Destroyed notes the VMs the lifecycle destroyed at now and gives back
// their promises: the hosts' inventories may list them until their next
// refresh, and their room is free (Gone). Notes older than DestroyedFor
// go, from the oldest: a note costs O(1), however many VMs were destroyed
// in the last minute.
func (l *Ledger) Destroyed(now time.Time, vms ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.destroyedQ {
		if now.Sub(e.at) <= DestroyedFor {
			break
		}
		if at, ok := l.destroyed[e.vm]; ok && at.Equal(e.at) { // not noted again since
			delete(l.destroyed, e.vm)
		}
		n++
	}
	l.destroyedQ = l.destroyedQ[n:]
	for _, vm := range vms {
		l.dropLocked(vm)
		l.destroyed[vm] = now
		l.destroyedQ = append(l.destroyedQ, destroyedNote{vm, now})
	}
}

// Gone says whether the VM's room is free or about to be: the lifecycle
// is destroying it, or destroyed it in the last DestroyedFor.
func (l *Ledger) Gone(vm string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.destroyed[vm]
	return ok || l.inHand[vm] > 0
}

// Missed notes the VMs an inventory missed, and forgets those it did not
// (missed or not, they are counted again from zero): it returns how many
// inventories in a row have missed each of vms.
func (l *Ledger) Missed(vms []string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, len(vms))
	missed := make(map[string]int, len(vms))
	for i, vm := range vms {
		missed[vm] = l.missed[vm] + 1
		out[i] = missed[vm]
	}
	l.missed = missed
	return out
}
