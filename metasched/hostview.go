package metasched

import "sync"

// hostBook is the hosts' view: every host of the grid as the daemon sees
// it (gridHost: its record, the switch that holds it, its agent's last
// report), the hosts in grid order, the generation of the set of hosts,
// and the count of the switches' steps.
//
// Its lock is taken after Daemon.mu and before the leaves (the switch
// book, the ledger, the rate book, the tuning's book): every section under
// Daemon.mu holds it too, to read (lockR) or to write (lockW), so that
// what the jobs' decisions read of the hosts does not change under them.
// What changes the hosts alone takes it alone, without Daemon.mu: the
// refresh of the inventories, the switches' steps and their notifications
// (a host held, its pool, stranded, cleared); and so do the readers of the
// hosts alone (the VMs' list, a host's site).
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

// lockR takes Daemon.mu and the hosts' view to read: a section that reads
// or changes the jobs and reads the hosts.
func (d *Daemon) lockR() {
	d.mu.Lock()
	d.hv.mu.RLock()
}

func (d *Daemon) unlockR() {
	d.hv.mu.RUnlock()
	d.mu.Unlock()
}

// lockW takes Daemon.mu and the hosts' view to write: a section that
// changes the hosts on a decision about the jobs (a host a switch takes,
// a drain).
func (d *Daemon) lockW() {
	d.mu.Lock()
	d.hv.mu.Lock()
}

func (d *Daemon) unlockW() {
	d.hv.mu.Unlock()
	d.mu.Unlock()
}
