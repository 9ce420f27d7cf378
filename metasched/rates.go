package metasched

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/metasched/metasched/gramvm"
	"github.com/metasched/metasched/metasched/api"
	"github.com/metasched/metasched/switching"
)

// poolRates are a pool's rate estimates (docs/research/switching.md, "Rate
// estimators"): λ from the submissions, µ from the busy host-seconds of each
// completed job. Jobs span many hosts, so µ (completions per busy host-second)
// stands for the papers' per-server service rate only approximately: a job on
// h hosts for t seconds counts as h·t host-seconds of service. Until a few
// jobs have completed, µ is the prior set from the plans' predictions.
type poolRates struct {
	arr       switching.ArrivalRate
	svc       switching.ServiceRate
	completed int
	// startEnd are the last jobs' start and end (measured less the
	// program's own run time) by the site of their master, oldest first.
	startEnd map[string][]float64
}

// startEndSamples is how many of the pool's last jobs with their master at
// a site the start-and-end estimate takes the median of.
const startEndSamples = 9

// Minimum samples before an estimate replaces its prior.
const rateMinSamples = 3

func newPoolRates(since time.Time) *poolRates {
	return &poolRates{
		arr: switching.ArrivalRate{MinSamples: rateMinSamples, Since: since},
		svc: switching.ServiceRate{MinSamples: rateMinSamples, Prior: 0.01},
	}
}

func (r *poolRates) arrival(at time.Time) { r.arr.Observe(at) }

// planned updates µ's prior from a plan's prediction, until completions
// take over.
func (r *poolRates) planned(hosts int, seconds float64) {
	if hs := float64(hosts) * seconds; hs > 0 && !r.svc.Ready() {
		r.svc.Prior = 1 / hs
	}
}

func (r *poolRates) completion(hostSeconds float64) {
	r.svc.Observe(hostSeconds)
	r.completed++
}

// ran notes a job done with its master at site: its measured run time
// and its program's own (0: no summary, and nothing to note).
func (r *poolRates) ran(site string, measured, program float64) {
	if program <= 0 || measured <= program {
		return
	}
	if r.startEnd == nil {
		r.startEnd = map[string][]float64{}
	}
	s := append(r.startEnd[site], measured-program)
	if n := len(s); n > startEndSamples {
		s = slices.Delete(s, 0, n-startEndSamples)
	}
	r.startEnd[site] = s
}

// rateBook is the pools' rate estimates (poolRates), under a lock of its
// own, a leaf: the jobs' lock and the hosts' view may be held when it is
// taken. The job steps give it the arrivals, plans and completions; the
// cluster manager, the pools' view and the plans' start and end read it.
type rateBook struct {
	mu    sync.Mutex
	pools map[string]*poolRates
}

func newRateBook(pools []string, since time.Time) *rateBook {
	b := &rateBook{pools: make(map[string]*poolRates, len(pools))}
	for _, p := range pools {
		b.pools[p] = newPoolRates(since)
	}
	return b
}

// with calls f with pool's rates under the book's lock; a pool the book
// does not know is nothing to do.
func (b *rateBook) with(pool string, f func(r *poolRates)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.pools[pool]; r != nil {
		f(r)
	}
}

func (b *rateBook) arrival(pool string, at time.Time) {
	b.with(pool, func(r *poolRates) { r.arrival(at) })
}

func (b *rateBook) planned(pool string, hosts int, seconds float64) {
	b.with(pool, func(r *poolRates) { r.planned(hosts, seconds) })
}

// done notes a job of pool done: its busy host-seconds, and its measured
// and program run times with its master at site.
func (b *rateBook) done(pool string, hostSeconds float64, site string, measured, program float64) {
	b.with(pool, func(r *poolRates) {
		r.completion(hostSeconds)
		r.ran(site, measured, program)
	})
}

// rates returns pool's λ and µ at now.
func (b *rateBook) rates(pool string, now time.Time) (arrival, service float64) {
	b.with(pool, func(r *poolRates) { arrival, service = r.arrivalRate(now), r.serviceRate() })
	return arrival, service
}

// view returns pool's rates as the API shows them and its jobs completed.
func (b *rateBook) view(pool string, now time.Time) (v api.Rates, completed int) {
	b.with(pool, func(r *poolRates) { v, completed = r.view(now), r.completed })
	return v, completed
}

// startEnd is the median start and end of pool's last jobs with their
// master at site, and how many it is of (see poolRates.startEndCost).
func (b *rateBook) startEnd(pool, site string) (cost float64, n int) {
	b.with(pool, func(r *poolRates) { cost, n = r.startEndCost(site) })
	return cost, n
}

// startEndLocked is what a job of pool planned on pl adds to its t* for
// its start and end, and whence: the median of the pool's last jobs'
// (measured less their program's own run time) with their master at the
// plan's master site (the master starts last, after its workers, and its
// end is the job's: on the real grid a master on a slow site adds 5–6 s,
// on a fast one 2.5–4); before any, the most the calibration measured at
// the plan's sites (start/SITE: a job's VMs start side by side, the
// slowest site last); 0 with neither, and with the emulated executor,
// whose runs have no start.
func (d *Daemon) startEndLocked(pool string, pl *gramvm.Placement) (float64, string) {
	if d.exec.Name() == "emulated" {
		return 0, ""
	}
	if c, n := d.rates.startEnd(pool, pl.Master.Site); n > 0 {
		return c, fmt.Sprintf("the median of the pool's last %d jobs with their master at %s", n, pl.Master.Site)
	}
	most, at := 0.0, ""
	for _, h := range append([]gramvm.HostRef{pl.Master}, pl.Workers...) {
		if s := d.cal.StartSeconds(h.Site); s > most {
			most, at = s, h.Site
		}
	}
	if most == 0 {
		return 0, ""
	}
	return most, "as the calibration measured it at " + at
}

// startEndCost is the median start and end of the pool's last jobs with
// their master at site, and how many it is of (0, 0: none yet).
func (r *poolRates) startEndCost(site string) (float64, int) {
	n := len(r.startEnd[site])
	if n == 0 {
		return 0, 0
	}
	s := slices.Sorted(slices.Values(r.startEnd[site]))
	if n%2 == 1 {
		return s[n/2], n
	}
	return (s[n/2-1] + s[n/2]) / 2, n
}

func (r *poolRates) arrivalRate(now time.Time) float64 { return r.arr.Rate(now) }
func (r *poolRates) serviceRate() float64              { return r.svc.Rate() }

func (r *poolRates) view(now time.Time) api.Rates {
	return api.Rates{Arrival: r.arr.Rate(now), Service: r.svc.Rate(), Samples: r.arr.N() + r.svc.N(),
		Prior: !r.arr.Ready() || !r.svc.Ready()}
}

// switchRate is ζ: 1 / the mean duration of completed switches, with a
// prior from the configured switch delay.
type switchRate struct{ z switching.SwitchRate }

func newSwitchRate(delay time.Duration) *switchRate {
	return &switchRate{z: switching.SwitchRate{MinSamples: rateMinSamples, Prior: 1 / (delay + time.Second).Seconds()}}
}

func (s *switchRate) observe(d time.Duration) { s.z.Observe(d) }
func (s *switchRate) rate() float64           { return s.z.Rate() }
func (s *switchRate) samples() int            { return s.z.N() }
