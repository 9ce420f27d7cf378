package metasched

import "sync"

// hostBook is the hosts' view: every host of the grid as the daemon sees
// it (gridHost: its record, the switch that holds it, its agent's last
// report), the hosts in grid order, the generation of the set of hosts,
// and the count of the switches' steps.
//
// Its lock is taken alone, or after the jobs' lock (jobs.mu), and before
// the leaves (the switch book, the ledger, the rate book, the tuning's
// book). What changes the hosts alone takes it alone: the refresh of the
// inventories, the switches' steps and their notifications (a host held,
// its pool, stranded, cleared); and so do the readers of the hosts alone
// (the VMs' list, a host's site). A section about jobs that reads the
// hosts holds both (lockR), one that changes a host on a decision about
// jobs holds both with the view to write (lockW): a function named
// ...Locked that reads the hosts is called so.
type hostBook struct {
	mu    sync.RWMutex
	hosts map[string]*gridHost
	order []string // host names in grid order
	// gen counts the changes of the set of hosts (sortHosts).
	gen uint64
	// steps counts the switches' steps: refresh reconciles a host's pool
	// with its agent's only when no switch stepped while it read the
	// inventories.
	steps uint64
}

// lockR takes the jobs' lock and the hosts' view to read: a section that reads
// or changes the jobs and reads the hosts.
func (d *Daemon) lockR() {
	d.jobs.mu.Lock()
	d.hv.mu.RLock()
}

func (d *Daemon) unlockR() {
	d.hv.mu.RUnlock()
	d.jobs.mu.Unlock()
}

// lockW takes the jobs' lock and the hosts' view to write: a section that
// changes the hosts on a decision about the jobs (a host a switch takes,
// a drain).
func (d *Daemon) lockW() {
	d.jobs.mu.Lock()
	d.hv.mu.Lock()
}

func (d *Daemon) unlockW() {
	d.hv.mu.Unlock()
	d.jobs.mu.Unlock()
}
