package metasched

import "github.com/metasched/metasched/gramvm"

// HeldSwitches counts the switches the daemon's coordinator holds in
// memory (tests).
func (d *Daemon) HeldSwitches() int {
	d.jobs.mu.Lock()
	defer d.jobs.mu.Unlock()
	return len(d.sw.all())
}

// Housekeeping runs one round of the housekeeping now (tests).
func (d *Daemon) Housekeeping() { d.housekeeping(d.jobs.runCtx) }

// Planner is the daemon's planning service (tests).
func (d *Daemon) Planner() *gramvm.Service { return d.planner }
