package metasched

import (
	"errors"
	"fmt"
	"maps"

	"github.com/metasched/metasched/metasched/lifecycle"
)

// HeldSwitches counts the switches the daemon's coordinator holds in
// memory (tests).
func (d *Daemon) HeldSwitches() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.coord.Switches())
}

// Housekeeping runs one round of the housekeeping now (tests).
func (d *Daemon) Housekeeping() { d.housekeeping(d.runCtx) }

// CheckJobIndex recounts the live jobs per pool and per host and says
// where the indexes the daemon keeps differ (tests).
func (d *Daemon) CheckJobIndex() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	pools := map[string]poolJobs{}
	hosts := map[string]map[*liveJob]struct{}{}
	for _, lj := range d.jobs {
		c := pools[lj.typ()]
		if lj.job.State == lifecycle.Queued {
			c.queued++
		} else {
			c.active++
		}
		pools[lj.typ()] = c
		for _, h := range lj.hostNames() {
			if hosts[h] == nil {
				hosts[h] = map[*liveJob]struct{}{}
			}
			hosts[h][lj] = struct{}{}
		}
	}
	var errs []error
	for typ, c := range d.poolJobs {
		if *c != pools[typ] {
			errs = append(errs, fmt.Errorf("pool %s: %d queued and %d active counted, %d and %d live", typ, c.queued, c.active, pools[typ].queued, pools[typ].active))
		}
		delete(pools, typ)
	}
	for typ, c := range pools {
		if c != (poolJobs{}) {
			errs = append(errs, fmt.Errorf("pool %s: not counted, %d queued and %d active live", typ, c.queued, c.active))
		}
	}
	if !maps.EqualFunc(hosts, d.onHost, func(a, b map[*liveJob]struct{}) bool { return maps.Equal(a, b) }) {
		errs = append(errs, fmt.Errorf("the jobs on each host differ from the index: %d hosts with jobs, %d indexed", len(hosts), len(d.onHost)))
	}
	return errors.Join(errs...)
}
